//! The escape probe (`tests/escape/probe.c`, built here with cc once per test run) and what
//! the host backs, as `mur __probe` reports it: the containment and egress tests share both.
#![allow(dead_code)]

use super::capsule::MUR;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The probe, compiled once per test run.
pub fn probe_binary() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("murmur-escape-bin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("escape-probe");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/escape/probe.c");
        let status = Command::new("cc")
            .args(["-O1", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("a C compiler (cc) to build the escape probe");
        assert!(status.success(), "cc failed on {}", src.display());
        out
    })
}

/// Whether `mur __probe` reports every mechanism of `keys` available (`processes`: a
/// pids cgroup or a PID namespace, whichever bounds a session here).
pub fn probe_ok(keys: &[&str]) -> bool {
    let out = Command::new(MUR).arg("__probe").output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let ok = |k: &str| v[k].get("Ok").is_some();
    keys.iter().all(|k| match *k {
        "processes" => ok("pids_cgroup") || ok("pidns"),
        k => ok(k),
    })
}

/// Whether this host backs `scoped`; when it does not, every case must be the refusal.
pub fn host_backs_scoped() -> bool {
    probe_ok(&["landlock", "seccomp", "netns", "processes"])
}

/// Whether this host backs `sealed` (namespaces, a tmpfs root, pivot_root) as well.
pub fn host_backs_sealed() -> bool {
    host_backs_scoped() && probe_ok(&["sealed"])
}
