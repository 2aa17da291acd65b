//! A security-hardened implementation of the murmur capsule system.
//!
//! Two binaries come out of this crate: `mur-roost`, the loopback daemon that referees which
//! capsules may spawn which others, and `mur`, the capsule runtime. The modules here are the
//! mechanisms both share; each is written once and serves every caller.

#![deny(unsafe_code)]

pub mod a2a;
pub mod agent;
pub mod b64;
pub mod cli;
pub mod clock;
pub mod commands;
pub mod containment;
pub mod diag;
pub mod eval_view;
pub mod fsx;
pub mod http;
pub mod ids;
pub mod manifest;
pub mod page;
pub mod places;
pub mod registry;
pub mod resources;
pub mod retention;
pub mod roost;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod signals;
pub mod spawner;
pub mod spend;
pub mod token;
pub mod trace_view;

/// The crate version both binaries report.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
