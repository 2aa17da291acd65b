//! `mur lock`: write `murmur.lock` beside a capsule's manifest from the local registry, every
//! artifact the manifest declares pinned by name, version and the sha256 of its archive;
//! `--update NAME` takes that one artifact as the registry has it now and keeps every other
//! pin as it is. `mur run` then refuses what the lock does not pin.

use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::lock::{file_name_for, Lock, Pin};
use crate::manifest::{self, Resolve};
use crate::registry::{self, lockfile};
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
pub struct LockOptions {
    pub manifest: Option<PathBuf>,
    pub registry: Option<PathBuf>,
    /// Refresh only this artifact's pin.
    pub update: Option<String>,
    pub json: bool,
}

/// Step: the pin of `name@version` as the registry holds it (its bytes hashed against its
/// sidecar by the registry's own resolve).
fn pin_of(root: &Path, name: &str, version: &str) -> Result<Pin, Diagnostic> {
    let r = registry::resolve(root, name, version, Resolve::Nothing)?;
    Ok(Pin {
        name: name.to_string(),
        version: version.to_string(),
        sha256: r.sha256,
    })
}

/// Write the lock; what was pinned, as text or JSON.
pub fn lock(o: &LockOptions) -> Result<String, Diagnostic> {
    let path = o.manifest.clone().unwrap_or_else(|| PathBuf::from("murmur.yaml"));
    let loaded = manifest::load_file(&path, Resolve::AllButApiKey(&manifest::process_env))?;
    let root = o.registry.clone().unwrap_or_else(registry::default_root);
    let base = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let file = file_name_for(&path);
    let dir = Dir::open(&base).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            &file,
            format!("cannot open the manifest's directory: {e}"),
        )
    })?;
    let declared: Vec<(String, String)> = loaded
        .manifest
        .artifacts
        .iter()
        .filter_map(|a| a.version.clone().map(|v| (a.name.clone(), v)))
        .collect();
    let mut lock = Lock::default();
    let mut changed = Vec::new();
    match &o.update {
        None => {
            for (name, version) in &declared {
                let p = pin_of(&root, name, version)?;
                changed.push(p.clone());
                lock.set(p);
            }
        }
        Some(name) => {
            lock = lockfile::read(&dir, &file)?.ok_or_else(|| {
                Diagnostic::new(
                    code::RUN_LOCK,
                    &file,
                    format!("there is no {file} to update: run `mur lock` to write one"),
                )
            })?;
            let (_, version) = declared.iter().find(|(n, _)| n == name).ok_or_else(|| {
                Diagnostic::new(
                    code::RUN_LOCK,
                    "artifacts",
                    format!("the manifest declares no artifact {name} (with a version) to pin"),
                )
            })?;
            let p = pin_of(&root, name, version)?;
            changed.push(p.clone());
            lock.set(p);
        }
    }
    lockfile::write(&dir, &file, &lock)
        .map_err(|e| Diagnostic::new(code::IO_READ, &file, format!("cannot write {file}: {e}")))?;
    let written = base.join(&file);
    if o.json {
        let pins: Vec<serde_json::Value> = changed
            .iter()
            .map(|p| serde_json::json!({"name": p.name, "resolved_version": p.version, "sha256": p.sha256}))
            .collect();
        return Ok(format!(
            "{}\n",
            serde_json::json!({"lock": written.display().to_string(), "pinned": pins, "total": lock.pins().len()})
        ));
    }
    let mut out = String::new();
    for p in &changed {
        out.push_str(&format!("pinned {}@{} sha256 {}\n", p.name, p.version, p.sha256));
    }
    out.push_str(&format!(
        "wrote {} ({} artifacts pinned)\n",
        written.display(),
        lock.pins().len()
    ));
    Ok(out)
}
