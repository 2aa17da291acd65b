//! Containment: the escape suite through the real `mur exec` (with `tests/escape/`),
//! `mur doctor` against mechanisms really taken away, hostile WASM guests through
//! `mur run`, and `mur exec` against a capsule's shell tool (one child policy). One test
//! binary; each module is one area's file. Egress has its own binary
//! (`tests/egress/main.rs` says why).

#[path = "../common/mod.rs"]
mod common;

mod containment;
mod doctor;
mod exec_parity;
mod exec_start;
mod run_hostile;
mod unprivileged;
