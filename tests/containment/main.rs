//! Containment: the escape suite through the real `mur exec` (with `tests/escape/`),
//! `mur doctor` against mechanisms really taken away, and hostile WASM guests through
//! `mur run`. One test binary; each module is a former `tests/<name>.rs`. Egress has its
//! own binary (`tests/egress/main.rs` says why).

#[path = "../common/mod.rs"]
mod common;

mod containment;
mod doctor;
mod run_hostile;
