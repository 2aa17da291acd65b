//! The host probe's answer kept for the next launch: what the kernel backs does not change
//! within one boot of one kernel for one `mur` binary, user and execution context, so
//! `mur exec` and `mur run` read the last report instead of starting the throwaway probe
//! children again. The entry is keyed by the boot id, the kernel, the binary's identity, the
//! effective uid and gid, the floor probed, and the context that decides what may be made
//! (the process's namespaces and cgroup, its seccomp and no-new-privileges state, the user
//! namespace sysctls and the security modules); it lives in the compile cache's directory,
//! which must be this user's (or root's) and writable by no one else, as must the entry
//! itself (both judged on the descriptors read); it is believed for an hour, and only a
//! report where every mechanism probed works is kept (a failure may be of the moment). A
//! forged entry can claim less than the host backs (a refusal) or more (a spawn that then
//! fails to enter its sandbox), and skips the probe's own checks that a landlock ruleset and
//! a seccomp filter really deny: whoever can write the user's cache can also replace its
//! compiled components, which run as native code. `mur doctor` always probes afresh.

use super::class::{Class, HostReport};
use super::probe;
use crate::fsx;
use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// How long an entry is believed.
const FRESH_MS: u64 = 60 * 60 * 1000;
/// Largest entry read.
const MAX_ENTRY: u64 = 16 * 1024;

#[derive(Serialize, Deserialize)]
struct Entry {
    key: String,
    at_ms: u64,
    report: HostReport,
}

/// The probe's report for `floor`, from the cache in `dir` when a fresh entry matches,
/// else probed (and stored when every mechanism works). `MURMUR_PROBE_DENY` applies to
/// either: the stored report is the host's own.
pub fn probe(exe: &Path, floor: Class, dir: Option<&Path>, now_ms: u64) -> HostReport {
    let found = match (floor, dir) {
        (Class::Advisory, _) | (_, None) => None,
        (_, Some(d)) => key(exe, floor).map(|k| (d, entry_name(&k), k)),
    };
    let Some((dir, name, key)) = found else {
        return probe::probe(exe, floor);
    };
    let mut report = match cached(dir, &name, &key, now_ms) {
        Some(r) => r,
        None => {
            let r = probe::probe_raw(exe, floor);
            if works(&r) {
                store(dir, &name, &key, now_ms, &r);
            }
            r
        }
    };
    if let Ok(spec) = std::env::var("MURMUR_PROBE_DENY") {
        report.apply_simulated_denials(&spec);
    }
    report
}

/// Every mechanism probed works (those beyond the floor are "not probed"), and something
/// bounds a session's processes (a pids cgroup or a PID namespace).
fn works(r: &HostReport) -> bool {
    [&r.landlock, &r.seccomp, &r.netns, &r.sealed]
        .iter()
        .all(|m| !matches!(m, Err(e) if !e.starts_with("not probed")))
        && r.bound().is_ok()
}

/// `probe-<the first 16 hex digits of sha256(key)>.json`.
fn entry_name(key: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(key.as_bytes());
    let hex: String = d[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("probe-{hex}.json")
}

/// What the report depends on, as one line; None when a part that must be there cannot be
/// read (then nothing is cached).
fn key(exe: &Path, floor: Class) -> Option<String> {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    let optional = |p: &str| read(p).unwrap_or_else(|| "-".into());
    let boot = read("/proc/sys/kernel/random/boot_id")?;
    let release = read("/proc/sys/kernel/osrelease")?;
    let version = read("/proc/sys/kernel/version")?;
    let m = std::fs::metadata(exe).ok()?;
    let (uid, gid) = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    let ns: Vec<String> = ["user", "mnt", "pid", "net", "cgroup"]
        .iter()
        .map(|n| {
            std::fs::read_link(format!("/proc/self/ns/{n}"))
                .map(|l| l.display().to_string())
                .unwrap_or_default()
        })
        .collect();
    let status = read("/proc/self/status")?;
    let flags: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("Seccomp:") || l.starts_with("NoNewPrivs:"))
        .collect();
    let context = [
        "/proc/self/cgroup",
        "/proc/sys/user/max_user_namespaces",
        "/proc/sys/user/max_net_namespaces",
        "/proc/sys/kernel/unprivileged_userns_clone",
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "/sys/kernel/security/lsm",
        "/proc/self/attr/current",
    ]
    .map(optional)
    .join("|");
    let parent = std::env::var(super::cgroup::PARENT_VAR).unwrap_or_else(|_| "-".into());
    let context = format!("{context}|{parent}");
    Some(format!(
        "v1 boot={boot} kernel={release} {version} exe={}:{}:{}:{}.{} uid={uid} gid={gid} floor={} ns={} flags={} context={context}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        floor.as_str(),
        ns.join(","),
        flags.join(","),
    ))
}

/// A fresh entry for `key`, if the directory and the entry are this user's alone.
fn cached(dir: &Path, name: &str, key: &str, now_ms: u64) -> Option<HostReport> {
    let bytes = fsx::open_private(dir).ok()?.read_own(name, MAX_ENTRY).ok()?;
    let e: Entry = serde_json::from_slice(&bytes).ok()?;
    let fresh = now_ms >= e.at_ms && now_ms - e.at_ms < FRESH_MS;
    (e.key == key && fresh).then_some(e.report)
}

/// Store the report (best effort: a cache that cannot be written costs the next launch a
/// probe, nothing else).
fn store(dir: &Path, name: &str, key: &str, now_ms: u64, report: &HostReport) {
    use std::os::unix::fs::DirBuilderExt;
    let made = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    let Ok(d) = made
        .map_err(|_| ())
        .and_then(|()| fsx::open_private(dir).map_err(|_| ()))
    else {
        return;
    };
    let entry = Entry {
        key: key.to_string(),
        at_ms: now_ms,
        report: report.clone(),
    };
    if let Ok(text) = serde_json::to_vec(&entry) {
        let _ = d.replace(name, &text);
    }
}
