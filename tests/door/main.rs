//! The door of a WASM capsule through the real `mur run`: A2A (with the official Python SDK
//! too), errors, the loopback guard, lifecycles, streams; the operator resource plane; the
//! peer plane. One test binary; each module is a former `tests/<name>.rs`.

#[path = "../common/mod.rs"]
mod common;

mod a2a_sdk;
mod door_a2a;
mod door_auth;
mod door_errors;
mod door_files;
mod door_http;
mod door_lifecycle;
mod door_push;
mod door_streams;
mod door_tck;
mod full_disk;
mod peer_plane;
mod resources_files;
mod resources_launch;
mod resources_load;
mod trace_budget;
