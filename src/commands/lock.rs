//! `mur lock`: write a capsule's lock (`murmur.lock` beside `murmur.yaml`) from the local
//! registry, every artifact the manifest declares pinned by name, version and the sha256 of
//! its archive; `--update NAME` takes that one artifact as the registry has it now and keeps
//! every other pin. Other bytes under a version the lock already pins are refused
//! (E-REG-002) unless `--accept-changed NAME` says they are trusted: re-pinning is how a
//! swapped archive would otherwise slip in. `mur run` then refuses what the lock does not pin.

use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::lock::{file_name_for, Lock, Pin};
use crate::manifest::{self, Resolve};
use crate::registry::lockfile::{self, Existing};
use crate::registry::{self};
use std::path::{Path, PathBuf};

#[derive(Debug, Default)]
pub struct LockOptions {
    pub manifest: Option<PathBuf>,
    pub registry: Option<PathBuf>,
    /// Refresh only this artifact's pin.
    pub update: Option<String>,
    /// Artifacts whose other bytes under a pinned version are taken on purpose.
    pub accept_changed: Vec<String>,
    pub json: bool,
}

/// One pin written, and the hash it replaced when that differs.
struct Pinned {
    pin: Pin,
    was: Option<String>,
}

/// Step: what the lock pins, as (name, version): every artifact the manifest declares (one
/// without a version is refused, as `mur run` refuses it), then each `spawn.allow` capsule
/// the lock `old` already pins (at its pinned version: a delegation pinned it first).
pub(crate) fn declared(path: &Path, old: Option<&Lock>) -> Result<Vec<(String, String)>, Diagnostic> {
    let loaded = manifest::load_file(path, Resolve::AllButApiKey(&manifest::process_env))?;
    let m = &loaded.manifest;
    let mut out = m
        .artifacts
        .iter()
        .map(|a| match &a.version {
            Some(v) => Ok((a.name.clone(), v.clone())),
            None => Err(Diagnostic::new(
                code::REG_NOT_INSTALLED,
                format!("artifacts[{}]", a.name),
                format!("artifact {} has no version to pin", a.name),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    for child in &m.capabilities.spawn_allow {
        let pinned = old.and_then(|l| l.get(child));
        if let (Some(p), false) = (pinned, out.iter().any(|(n, _)| n == child)) {
            out.push((child.clone(), p.version.clone()));
        }
    }
    Ok(out)
}

/// Step: which artifacts to pin: all of them, or the one `--update` names.
fn wanted<'a>(
    update: Option<&str>,
    declared: &'a [(String, String)],
) -> Result<Vec<&'a (String, String)>, Diagnostic> {
    let Some(name) = update else {
        return Ok(declared.iter().collect());
    };
    let one = declared.iter().find(|(n, _)| n == name).ok_or_else(|| {
        Diagnostic::new(
            code::RUN_LOCK,
            "artifacts",
            format!("the manifest declares no artifact {name} (with a version) to pin"),
        )
    })?;
    Ok(vec![one])
}

/// Step: the pin of `name@version` as the registry holds it (its bytes hashed against its
/// sidecar by the registry's own resolve), refused when it moves a pinned version to other
/// bytes that were not accepted.
fn pin_of(
    root: &Path,
    old: Option<&Lock>,
    name: &str,
    version: &str,
    o: &LockOptions,
    file: &str,
) -> Result<Pinned, Diagnostic> {
    let r = registry::resolve(root, name, version, Resolve::Nothing)?;
    let pin = Pin {
        name: name.to_string(),
        version: version.to_string(),
        sha256: r.sha256,
    };
    let was = old
        .and_then(|l| l.get(name))
        .filter(|p| p.sha256 != pin.sha256)
        .map(|p| (p.version.clone(), p.sha256.clone()));
    if let Some((v, sha)) = &was {
        if v == version && !o.accept_changed.iter().any(|a| a == name) {
            return Err(Diagnostic::new(
                code::REG_INTEGRITY,
                format!("artifacts[{name}]"),
                format!(
                    "{name}@{version} in the registry has sha256 {}, {file} pins sha256 {sha}: other bytes under the same name and version; if they are trusted, pass --accept-changed {name}",
                    pin.sha256
                ),
            ));
        }
    }
    Ok(Pinned {
        pin,
        was: was.map(|(_, sha)| sha),
    })
}

/// Write the lock; what was pinned, as text or JSON.
pub fn lock(o: &LockOptions) -> Result<String, Diagnostic> {
    let path = o.manifest.clone().unwrap_or_else(|| PathBuf::from("murmur.yaml"));
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
    let old = lockfile::read(&dir, &file)?;
    let declared = declared(&path, old.as_ref())?;
    let mut lock = match (&o.update, &old) {
        (Some(_), Some(l)) => l.clone(),
        (Some(_), None) => {
            return Err(Diagnostic::new(
                code::RUN_LOCK,
                &file,
                format!("there is no {file} to update: run `mur lock` to write one"),
            ))
        }
        (None, _) => Lock::default(),
    };
    let mut pinned = Vec::new();
    for (name, version) in wanted(o.update.as_deref(), &declared)? {
        let p = pin_of(&root, old.as_ref(), name, version, o, &file)?;
        lock.set(p.pin.clone());
        pinned.push(p);
    }
    lockfile::write(&dir, &file, &lock, Existing::Replace)
        .map_err(|e| Diagnostic::new(code::IO_READ, &file, format!("cannot write {file}: {e}")))?;
    Ok(report(&base.join(&file), &pinned, lock.pins().len(), o.json))
}

/// Step: what was written.
fn report(written: &Path, pinned: &[Pinned], total: usize, json: bool) -> String {
    if json {
        let pins: Vec<serde_json::Value> = pinned
            .iter()
            .map(|p| {
                serde_json::json!({"name": p.pin.name, "resolved_version": p.pin.version,
                                   "sha256": p.pin.sha256, "was": p.was})
            })
            .collect();
        return format!(
            "{}\n",
            serde_json::json!({"lock": written.display().to_string(), "pinned": pins, "total": total})
        );
    }
    let mut out = String::new();
    for p in pinned {
        let was = p.was.as_ref().map(|w| format!(" (was {w})")).unwrap_or_default();
        out.push_str(&format!(
            "pinned {}@{} sha256 {}{was}\n",
            p.pin.name, p.pin.version, p.pin.sha256
        ));
    }
    out.push_str(&format!(
        "wrote {} ({total} artifacts pinned)\n",
        written.display()
    ));
    out
}
