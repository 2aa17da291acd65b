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

/// What a manifest has the lock pin.
pub(crate) struct Declared {
    /// (name, version): every artifact the manifest declares, then each `spawn.allow`
    /// capsule the old lock pins, at its pinned version (a delegation pinned it first).
    pub pins: Vec<(String, String)>,
    /// The manifest's `spawn.allow`.
    pub children: Vec<String>,
}

/// Step: what the lock pins; an artifact without a version is refused, as `mur run`
/// refuses it.
pub(crate) fn declared(path: &Path, old: Option<&Lock>) -> Result<Declared, Diagnostic> {
    let loaded = manifest::load_file(path, Resolve::AllButApiKey(&manifest::process_env))?;
    let m = &loaded.manifest;
    let mut pins = m
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
    let children = m.capabilities.spawn_allow.clone();
    for child in &children {
        let pinned = old.and_then(|l| l.get(child));
        if let (Some(p), false) = (pinned, pins.iter().any(|(n, _)| n == child)) {
            pins.push((child.clone(), p.version.clone()));
        }
    }
    Ok(Declared { pins, children })
}

/// Step: which artifacts to pin: all of them, or the one `--update` names.
fn wanted(update: Option<&str>, declared: &Declared) -> Result<Vec<(String, String)>, Diagnostic> {
    let Some(update) = update else {
        return Ok(declared.pins.clone());
    };
    // A child capsule's version is the operator's to move: `--update NAME@VERSION`.
    if let Some((name, version)) = update.split_once('@') {
        if !declared.children.iter().any(|c| c == name) {
            return Err(Diagnostic::new(
                code::RUN_LOCK,
                "capabilities.spawn.allow",
                format!("NAME@VERSION moves a spawn.allow capsule's pin, and {name} is not one; an artifact's version comes from the manifest"),
            ));
        }
        return Ok(vec![(name.to_string(), version.to_string())]);
    }
    let one = declared.pins.iter().find(|(n, _)| n == update).ok_or_else(|| {
        Diagnostic::new(
            code::RUN_LOCK,
            "artifacts",
            format!("the manifest declares no artifact {update} (with a version) to pin, and the lock pins no child capsule {update}"),
        )
    })?;
    Ok(vec![one.clone()])
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

/// Where a manifest's lock lives, and the lock there now (shared by `mur lock` and
/// `mur install`).
pub(crate) struct LockPlace {
    /// The manifest (default `./murmur.yaml`).
    pub path: PathBuf,
    /// Its directory.
    pub base: PathBuf,
    /// The lock's file name.
    pub file: String,
    pub dir: Dir,
    pub old: Option<Lock>,
}

impl LockPlace {
    /// Step: the manifest's directory opened and its lock read.
    pub fn of(manifest: Option<PathBuf>) -> Result<LockPlace, Diagnostic> {
        let path = manifest.unwrap_or_else(|| PathBuf::from("murmur.yaml"));
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
        Ok(LockPlace {
            path,
            base,
            file,
            dir,
            old,
        })
    }
}

/// Write the lock; what was pinned, as text or JSON.
pub fn lock(o: &LockOptions) -> Result<String, Diagnostic> {
    let root = o.registry.clone().unwrap_or_else(registry::default_root);
    let LockPlace {
        path,
        base,
        file,
        dir,
        old,
    } = LockPlace::of(o.manifest.clone())?;
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
    let mut kept = Vec::new();
    for (name, version) in wanted(o.update.as_deref(), &declared)? {
        let p = match pin_of(&root, old.as_ref(), &name, &version, o, &file) {
            Ok(p) => p,
            // A child pinned by a delegation but not installed here keeps its pin.
            Err(d) if d.code == code::REG_NOT_INSTALLED && o.update.is_none() => {
                if let Some(p) = old.as_ref().and_then(|l| l.get(&name)) {
                    lock.set(p.clone());
                    kept.push(format!("kept the child capsule {name}@{version}'s pin: it is not in the local registry (mur install fetches it)"));
                    continue;
                }
                return Err(d);
            }
            Err(d) => return Err(d),
        };
        lock.set(p.pin.clone());
        pinned.push(p);
    }
    lockfile::write(&dir, &file, &lock, Existing::Replace)
        .map_err(|e| Diagnostic::new(code::IO_READ, &file, format!("cannot write {file}: {e}")))?;
    let mut out = report(&base.join(&file), &pinned, lock.pins().len(), o.json);
    if !o.json {
        for k in kept {
            out.push_str(&k);
            out.push('\n');
        }
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    use super::{wanted, Declared};

    #[test]
    fn only_a_child_capsules_pin_moves_to_a_version_named_on_the_command_line() {
        let d = Declared {
            pins: vec![("drv".into(), "1.0.0".into()), ("courier".into(), "0.1.0".into())],
            children: vec!["courier".into(), "other".into()],
        };
        assert_eq!(wanted(None, &d).unwrap(), d.pins);
        assert_eq!(
            wanted(Some("courier"), &d).unwrap(),
            vec![("courier".into(), "0.1.0".into())]
        );
        assert_eq!(
            wanted(Some("courier@0.2.0"), &d).unwrap(),
            vec![("courier".into(), "0.2.0".into())]
        );
        assert_eq!(
            wanted(Some("other@1.0.0"), &d).unwrap(),
            vec![("other".into(), "1.0.0".into())]
        );
        assert_eq!(wanted(Some("drv@2.0.0"), &d).unwrap_err().code, "E-RUN-003");
        assert_eq!(wanted(Some("nothing"), &d).unwrap_err().code, "E-RUN-003");
    }
}
