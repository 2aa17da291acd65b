//! The binaries as an operator runs them: versions, help and arguments, the manifest table
//! and `mur build`, the registry, `mur run` of each fixture (with a task and as a script),
//! `mur trace`, and the operator's commands on live sessions (`mur ps`, `stop`, `cancel`,
//! `watch`). One test binary; each module is one area's file.

#[path = "../common/mod.rs"]
mod common;

mod cli;
mod eval;
mod lock;
mod manifest_table;
mod new;
mod oci;
mod records_full;
mod records_prune;
mod registry;
mod run;
mod script;
mod sessions;
mod trace;
mod trace_html;
