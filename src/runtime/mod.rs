//! `mur run`: one capsule session, from manifest to exit: the phases of the launch
//! (`launch`), the session skeleton both kinds run through (`serve`), and the two runners
//! (`component`, `agent`). The session thread runs the guest; the door (the capsule's own
//! HTTP listener) runs on its own thread.

pub mod agent;
pub mod component;
pub mod component_ask;
pub mod delegation;
pub mod door;
pub mod door_access;
pub mod explain;
pub mod gate;
pub mod launch;
pub mod lifecycle;
pub mod pinning;
pub mod records;
pub mod serve;
pub mod session;
pub mod status;
pub mod task_files;
pub mod trace;
pub mod wasm;

pub use launch::{run, RunOptions};
