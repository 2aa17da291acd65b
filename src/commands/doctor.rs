//! `mur doctor`: the host probe a launch runs (the same code, in a throwaway `mur __probe`
//! child), read for an operator: which classes this host backs and, for each one it cannot,
//! the missing mechanism with its errno and a fix; the landlock ABI, the kernel, whether
//! `mur-roost` would confine itself, the registry, the compile cache and the day's spend
//! ledger; with `--manifest`, whether that capsule's floor is met here.

use super::doctor_fix::{errno_of, fix, Sysctls};
use crate::containment::class::{self, Class};
use crate::containment::probe::{self, HostReport};
use crate::diag::Diagnostic;
use crate::manifest::{self, Resolve};
use crate::trace_view::clean;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The flags of `mur doctor`.
#[derive(Debug, Default)]
pub struct DoctorOptions {
    pub manifest: Option<PathBuf>,
    pub registry: Option<PathBuf>,
    pub json: bool,
}

/// The mechanisms `scoped` needs, in the order the launch's decision names them
/// (`processes`: what bounds and ends a session's processes, a pids cgroup or a PID
/// namespace), then the sealed plan.
pub const NEEDS: [&str; 6] = [
    "landlock",
    "seccomp",
    "processes",
    "landlock_abi",
    "netns",
    "sealed",
];

/// The mechanisms listed one by one: each of the two that can bound a session's processes
/// apart.
pub const MECHANISMS: [&str; 7] = [
    "landlock",
    "seccomp",
    "netns",
    "pids_cgroup",
    "pidns",
    "landlock_abi",
    "sealed",
];

/// One mechanism's state: `None` when it works, else the probe's message.
fn state(r: &HostReport, name: &str) -> Option<String> {
    let res = match name {
        "landlock" => &r.landlock,
        "seccomp" => &r.seccomp,
        "netns" => &r.netns,
        "pids_cgroup" => &r.pids_cgroup,
        "pidns" => &r.pidns,
        "sealed" => &r.sealed,
        "processes" => return r.bound().err().map(|e| clean(&e, 600)),
        _ => {
            return (r.landlock.is_ok() && r.landlock_abi < crate::containment::rules::MIN_ABI).then(|| {
                format!(
                    "landlock ABI {} is below {}",
                    r.landlock_abi,
                    crate::containment::rules::MIN_ABI
                )
            })
        }
    };
    res.as_ref().err().map(|e| clean(e, 300))
}

fn mechanism_json(r: &HostReport, name: &str, s: &Sysctls) -> Value {
    match state(r, name) {
        None => json!({"name": name, "ok": true, "error": null, "errno": null, "fix": null}),
        Some(e) => {
            json!({"name": name, "ok": false, "errno": errno_of(&e), "fix": fix(name, &e, r.landlock_abi, s), "error": e})
        }
    }
}

/// What a class needs beyond advisory.
fn needs(c: Class) -> &'static [&'static str] {
    match c {
        Class::Advisory => &[],
        Class::Scoped => &NEEDS[..4],
        Class::Sealed => &NEEDS,
    }
}

fn class_json(r: &HostReport, c: Class, host: Class, s: &Sysctls) -> Value {
    let missing: Vec<&str> = needs(c)
        .iter()
        .copied()
        .filter(|m| state(r, m).is_some())
        .collect();
    let first = missing.first().map(|m| mechanism_json(r, m, s));
    json!({"class": c.as_str(), "achievable": c <= host, "missing": missing, "first_missing": first})
}

/// Count `*.mur.zip` files under the registry root (a bounded walk that follows no link).
fn count_artifacts(root: &Path) -> Option<u64> {
    let mut stack = vec![(root.to_path_buf(), 0u32)];
    let (mut found, mut visited) = (0u64, 0u32);
    std::fs::symlink_metadata(root).ok()?;
    while let Some((dir, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            visited += 1;
            if visited > 100_000 {
                return Some(found);
            }
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() && depth < 4 {
                stack.push((e.path(), depth + 1));
            } else if t.is_file() && e.file_name().to_string_lossy().ends_with(".mur.zip") {
                found += 1;
            }
        }
    }
    Some(found)
}

/// The compile cache: its path, and its entries and bytes if it exists.
fn cache_json() -> Value {
    let Some(dir) = crate::places::cache_dir() else {
        return json!({"path": null, "exists": false, "entries": 0, "bytes": 0});
    };
    let (mut entries, mut bytes) = (0u64, 0u64);
    let exists = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir());
    if let Ok(list) = std::fs::read_dir(&dir) {
        for m in list
            .flatten()
            .take(100_000)
            .filter_map(|e| e.metadata().ok())
            .filter(|m| m.is_file())
        {
            entries += 1;
            bytes = bytes.saturating_add(m.len());
        }
    }
    json!({"path": clean(&dir.display().to_string(), 400), "exists": exists, "entries": entries, "bytes": bytes})
}

/// The user's spend today (UTC): the ledger's path, the tokens charged, the per-day ceiling
/// and where it was set; a ledger or config that cannot be read says why.
fn spend_json(now_ms: u64) -> Value {
    let day = crate::spend::ledger::day_of(now_ms);
    let (ceiling, from, mut error) = match crate::spend::machine_ceiling() {
        Ok(c) => (c.tokens_per_day, c.from, None),
        Err(e) => (crate::spend::DEFAULT_MACHINE_TOKENS_PER_DAY, None, Some(e)),
    };
    let store = crate::spend::user_store();
    let used = match store.as_ref().map(crate::spend::store::Store::read) {
        Some(Ok(l)) => l.on_day(&day),
        Some(Err(e)) => {
            error = error.or(Some(e));
            0
        }
        None => {
            error = error.or(Some(
                "no place for the spend ledger: neither MURMUR_SPEND_DIR nor HOME is set".into(),
            ));
            0
        }
    };
    let path = store.map(|s| clean(&s.path().display().to_string(), 400));
    json!({
        "ledger": path, "day": day, "used_today": used, "machine_tokens_per_day": ceiling,
        "ceiling_from": from.map(|p| clean(&p.display().to_string(), 400)),
        "error": error.map(|e| clean(&e, 600)),
    })
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "unknown".into(), |k| clean(k.trim(), 100))
}

/// The system registry a package fills (read when the user's lacks a version): its path, or
/// null when `MURMUR_SYSTEM_REGISTRY` is set but empty.
fn system_registry_json() -> Value {
    let Some(root) = crate::places::system_registry_root() else {
        return Value::Null;
    };
    let artifacts = count_artifacts(&root);
    json!({"path": clean(&root.display().to_string(), 400), "exists": artifacts.is_some(),
           "artifacts": artifacts.unwrap_or(0)})
}

/// Probe and gather everything as one JSON object; `met` is false when `--manifest` names
/// a floor this host cannot meet.
pub fn report(o: &DoctorOptions, exe: &Path) -> Result<(Value, bool), Diagnostic> {
    let r = probe::probe(exe, Class::Sealed);
    let s = Sysctls::read();
    let (host, _) = class::host_class(&r);
    let registry = o.registry.clone().unwrap_or_else(crate::registry::default_root);
    let artifacts = count_artifacts(&registry);
    let classes = [Class::Advisory, Class::Scoped, Class::Sealed].map(|c| class_json(&r, c, host, &s));
    let mechanisms = MECHANISMS.map(|m| mechanism_json(&r, m, &s));
    let mut v = json!({
        "kernel": kernel_release(),
        "landlock_abi": r.landlock_abi,
        "host_class": host.as_str(),
        "classes": classes,
        "mechanisms": mechanisms,
        "processes": r.bound().ok().map(|b| b.describe()),
        "roost_confinement": {"landlock": r.landlock.is_ok(), "seccomp": r.seccomp.is_ok(), "no_new_privs": true,
                              "complete": r.landlock.is_ok() && r.seccomp.is_ok()},
        "registry": {"path": clean(&registry.display().to_string(), 400), "exists": artifacts.is_some(),
                     "artifacts": artifacts.unwrap_or(0)},
        "system_registry": system_registry_json(),
        "cache": cache_json(),
        "spend": spend_json(crate::clock::now_ms()),
        "manifest": null,
    });
    let mut met = true;
    if let Some(path) = &o.manifest {
        let loaded = manifest::load_file(path, Resolve::Nothing)?;
        let caps = &loaded.manifest.capabilities;
        let d = class::decide(caps.containment, None, caps.workdir_exec, &r);
        let refusal = d.refusal_for(caps.unix_sockets);
        met = refusal.is_none();
        v["manifest"] = json!({
            "path": clean(&path.display().to_string(), 400), "declared": d.declared.as_str(),
            "achieved": d.achieved.as_str(), "met": met,
            "refusal": refusal.map(|r| clean(&r.to_string(), 600)),
        });
    }
    Ok((v, met))
}

/// Run `mur doctor`: the output and the exit status (1 when a named manifest's floor is not
/// met here).
pub fn doctor(o: &DoctorOptions, exe: &Path) -> Result<(String, u8), Diagnostic> {
    let (v, met) = report(o, exe)?;
    let text = if o.json {
        format!("{v}\n")
    } else {
        super::doctor_text::render(&v)
    };
    Ok((text, if met { 0 } else { 1 }))
}
