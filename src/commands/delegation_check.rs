//! What `mur build` and `mur publish` say about delegation that could never work: a capsule
//! named in `capabilities.spawn.allow` that takes no task (a script without `lifecycle:`, or
//! `task_acceptance: none`), in the registry today, and a capsule that takes no task while
//! a capsule in the registry names it in its `spawn.allow`. W-BLD-001 each; never an error
//! (the registry may change before the capsule runs).

use crate::diag::{code, Diagnostic};
use crate::manifest::{Manifest, Resolve};
use std::path::Path;

/// The most registry entries one check reads.
const MAX_ENTRIES: usize = 512;

/// The warnings for manifest `m`, against the registry at `root`.
pub fn warnings(m: &Manifest, root: &Path) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for name in &m.capabilities.spawn_allow {
        for (version, child) in manifests_of(root, name) {
            if let Some(why) = child.takes_no_task() {
                out.push(warning(
                    "capabilities.spawn.allow",
                    format!("{name}@{version} in the registry {why}: every delegation to it will be refused"),
                ));
            }
        }
    }
    if let Some(why) = m.takes_no_task() {
        for (parent, version) in parents_naming(root, &m.name) {
            out.push(warning(
                "lifecycle",
                format!("{parent}@{version} in the registry lists {} in capabilities.spawn.allow, and this capsule {why}: its delegations will be refused", m.name),
            ));
        }
    }
    out
}

fn warning(key: &str, message: String) -> Diagnostic {
    Diagnostic::new(code::BLD_TAKES_NO_TASK, key, message)
        .with_hint("declare lifecycle: {task_acceptance: single} (or queue) for a capsule others delegate to")
}

/// Every registered version of `name` (bare, as `spawn.allow` names it), with its manifest.
fn manifests_of(root: &Path, name: &str) -> Vec<(String, Manifest)> {
    if name.is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
        return Vec::new();
    }
    let Ok(versions) = std::fs::read_dir(root.join(name)) else {
        return Vec::new();
    };
    versions
        .flatten()
        .take(MAX_ENTRIES)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|v| {
            let r = crate::registry::resolve(root, name, &v, Resolve::Nothing).ok()?;
            Some((v, r.loaded.manifest))
        })
        .collect()
}

/// The `(name, version)` of every registered capsule whose `spawn.allow` names `child`.
fn parents_naming(root: &Path, child: &str) -> Vec<(String, String)> {
    let Ok(names) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut read = 0;
    for n in names
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
    {
        let Ok(name) = n.file_name().into_string() else {
            continue;
        };
        for (version, m) in manifests_of(root, &name) {
            read += 1;
            if m.capabilities.spawn_allow.iter().any(|a| a == child) {
                out.push((name.clone(), version));
            }
        }
        if read >= MAX_ENTRIES {
            break;
        }
    }
    out
}
