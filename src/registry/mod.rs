//! The local artifact registry, the `.mur.zip` archive, and remote OCI registries.

pub mod archive;
pub mod cache;
mod crc32;
pub mod lockfile;
pub mod oci;
pub mod payload;
pub mod store;

pub use cache::{Artifact, ParsedCache};
pub use store::{
    default_root, publish, resolve, resolve_cached, sha256_bytes, sha256_hex, ArtifactName, CachedResolve,
    Location, Resolved, ARCHIVE_TOO_LARGE,
};
