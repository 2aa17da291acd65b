//! The `mur` subcommands' work, kept out of the binary so the binary only parses and
//! dispatches. Each returns its result or one diagnostic; rendering is in [`render`].

pub mod build;
pub mod exec;
pub mod render;

pub use build::{build, Built};
