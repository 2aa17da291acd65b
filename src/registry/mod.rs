//! The local artifact registry and the `.mur.zip` archive.

pub mod archive;
mod crc32;
pub mod store;

pub use store::{default_root, publish, resolve, sha256_bytes, sha256_hex, ArtifactName, Location, Resolved};
