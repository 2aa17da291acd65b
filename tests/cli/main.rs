//! The binaries as an operator runs them: versions, help and arguments, the manifest table
//! and `mur build`, the registry, `mur run` of each fixture, and `mur trace`. One test
//! binary; each module is a former `tests/<name>.rs`.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod manifest_table;
mod registry;
mod run;
mod trace;
