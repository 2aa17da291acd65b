//! Remote OCI registries as a source of artifacts: `mur push` files a published artifact
//! as an OCI artifact (its `meta.json` as the config blob, its `.mur.zip` as the one
//! layer), `mur pull` and `mur install` fetch one back, every byte checked against its
//! digest, and publish it into the local registry through the same archive reader as
//! `mur publish`.

pub mod auth;
pub mod challenge;
pub mod manifest;
pub mod reference;
mod session;
mod transfer;

pub use reference::{Reference, Target};
pub use session::Session;
pub use transfer::{pull, pull_pinned, push, Pulled, Pushed};
