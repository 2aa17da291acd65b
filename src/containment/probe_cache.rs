//! The host probe's answer kept for the next launch: what the kernel backs does not change
//! within one boot of one kernel for one `mur` binary and user, so `mur exec` and `mur run`
//! read the last report instead of starting the throwaway probe children again. The entry is
//! keyed by the boot id, the kernel release and version, the binary's identity (device,
//! inode, size, modification time), the effective uid and the floor probed; it lives in the
//! compile cache's directory, which must be this user's (or root's) and writable by no one
//! else, as must the entry itself; it is refreshed after an hour or when anything in its key
//! changes. A forged entry could only claim less than the host backs (a refusal) or more (a
//! spawn that then fails to enter its sandbox): the class a child gets never rests on it
//! alone. `mur doctor` always probes afresh.

use super::class::{Class, HostReport};
use super::probe;
use crate::fsx::{self, Dir};
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
/// else probed and stored. `MURMUR_PROBE_DENY` applies to either (the stored report is the
/// host's own).
pub fn probe(exe: &Path, floor: Class, dir: Option<&Path>, now_ms: u64) -> HostReport {
    if floor == Class::Advisory {
        return probe::probe(exe, floor);
    }
    let Some((dir, key)) = dir.and_then(|d| Some((d, key(exe, floor)?))) else {
        return probe::probe(exe, floor);
    };
    let name = entry_name(&key);
    if let Some(mut report) = cached(dir, &name, &key, now_ms) {
        if let Ok(spec) = std::env::var("MURMUR_PROBE_DENY") {
            report.apply_simulated_denials(&spec);
        }
        return report;
    }
    let report = probe::probe_raw(exe, floor);
    // A probe child that could not run or answer says nothing about the host: not kept.
    let ran = [&report.landlock, &report.seccomp, &report.netns, &report.pids_cgroup, &report.sealed]
        .iter()
        .all(|r| !matches!(r, Err(e) if e.starts_with("the probe child failed") || e.starts_with("spawn of the probe child")));
    if ran {
        store(dir, &name, &key, now_ms, &report);
    }
    let mut report = report;
    if let Ok(spec) = std::env::var("MURMUR_PROBE_DENY") {
        report.apply_simulated_denials(&spec);
    }
    report
}

/// `probe-<the first 16 hex digits of sha256(key)>.json`.
fn entry_name(key: &str) -> String {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(key.as_bytes());
    let hex: String = d[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("probe-{hex}.json")
}

/// What the report depends on, as one line; None when any part cannot be read (then
/// nothing is cached).
fn key(exe: &Path, floor: Class) -> Option<String> {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    let boot = read("/proc/sys/kernel/random/boot_id")?;
    let release = read("/proc/sys/kernel/osrelease")?;
    let version = read("/proc/sys/kernel/version")?;
    let m = std::fs::metadata(exe).ok()?;
    let uid = rustix::process::geteuid().as_raw();
    Some(format!(
        "v1 boot={boot} kernel={release} {version} exe={}:{}:{}:{}.{} uid={uid} floor={}",
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        floor.as_str()
    ))
}

/// A fresh entry for `key`, if the directory and the entry are this user's alone.
fn cached(dir: &Path, name: &str, key: &str, now_ms: u64) -> Option<HostReport> {
    fsx::check_private_root(dir).ok()?;
    let d = Dir::open(dir).ok()?;
    let st = rustix::fs::statat(d.as_fd(), name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
    if st.st_uid != rustix::process::geteuid().as_raw() || st.st_mode & 0o022 != 0 {
        return None;
    }
    let bytes = d.read(name, MAX_ENTRY).ok()?;
    let e: Entry = serde_json::from_slice(&bytes).ok()?;
    let fresh = now_ms >= e.at_ms && now_ms - e.at_ms < FRESH_MS;
    (e.key == key && fresh).then_some(e.report)
}

/// Store the report (best effort: a cache that cannot be written costs the next launch a
/// probe, nothing else).
fn store(dir: &Path, name: &str, key: &str, now_ms: u64, report: &HostReport) {
    use std::os::unix::fs::DirBuilderExt;
    if std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .is_err()
        || fsx::check_private_root(dir).is_err()
    {
        return;
    }
    let Ok(d) = Dir::open(dir) else { return };
    let entry = Entry {
        key: key.to_string(),
        at_ms: now_ms,
        report: report.clone(),
    };
    if let Ok(text) = serde_json::to_vec(&entry) {
        let _ = d.replace(name, &text);
    }
}
