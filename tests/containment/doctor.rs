//! `mur doctor` as an operator runs it: it reports what the real host probe achieves, and
//! when a mechanism is really taken away (a seccomp filter installed before exec, or an
//! unmapped user namespace from `unshare --user`) it names that mechanism, its errno and a
//! fix. The `MURMUR_PROBE_DENY` test hook covers what a test cannot take away for real.

use crate::common;

use common::TempDir;
use murmur::containment::class::host_class;
use murmur::containment::probe::HostReport;
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output};

const MUR: &str = env!("CARGO_BIN_EXE_mur");

fn doctor(cmd: &mut Command) -> (Output, Value) {
    let out = cmd.output().unwrap();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out, v)
}

fn json_cmd() -> Command {
    let mut c = Command::new(MUR);
    c.args(["doctor", "--json"]);
    c
}

fn class<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["class"] == name)
        .unwrap()
}

fn mechanism<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["mechanisms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

/// A command whose process (and so the probe child) runs under a seccomp filter that makes
/// `syscall` fail with `errno`.
fn under_filter(syscall: libc::c_long, errno: u32, args: &[&str]) -> Command {
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(syscall, Vec::new());
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(errno),
        murmur::containment::seccomp_arch(),
    )
    .unwrap();
    let prog: seccompiler::BpfProgram = filter.try_into().unwrap();
    let mut c = Command::new(MUR);
    c.args(args);
    // SAFETY: between fork and exec the hook makes two syscalls on a program built before
    // the fork and allocates nothing.
    unsafe {
        c.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            seccompiler::apply_filter(&prog).map_err(std::io::Error::other)
        });
    }
    c
}

#[test]
fn reports_the_classes_the_launch_probe_achieves() {
    let probe = Command::new(MUR)
        .args(["__probe", "sealed"])
        .env_clear()
        .output()
        .unwrap();
    let report: HostReport = serde_json::from_slice(&probe.stdout).unwrap();
    let (host, _) = host_class(&report);
    let (out, v) = doctor(&mut json_cmd());
    assert!(out.status.success());
    assert_eq!(v["host_class"], host.as_str());
    assert_eq!(v["landlock_abi"], report.landlock_abi);
    for (name, rank) in [("advisory", 0), ("scoped", 1), ("sealed", 2)] {
        let expected = rank <= host as usize;
        assert_eq!(class(&v, name)["achievable"], expected, "{name}: {v}");
    }
    assert_eq!(mechanism(&v, "landlock")["ok"], report.landlock.is_ok());
    assert_eq!(mechanism(&v, "seccomp")["ok"], report.seccomp.is_ok());
    assert_eq!(v["roost_confinement"]["landlock"], report.landlock.is_ok());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(v["kernel"], kernel.trim());
    let text = Command::new(MUR).arg("doctor").output().unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains(&format!("landlock ABI    {}", report.landlock_abi)),
        "{text}"
    );
    assert!(text.contains("mur-roost "), "{text}");
}

#[test]
fn registry_and_cache_are_counted() {
    let t = TempDir::new("doctor-reg");
    let reg = t.path().join("reg");
    std::fs::create_dir_all(reg.join("local/a/1.0.0")).unwrap();
    std::fs::write(reg.join("local/a/1.0.0/a-1.0.0.mur.zip"), b"x").unwrap();
    std::fs::create_dir_all(reg.join("b/2.0.0")).unwrap();
    std::fs::write(reg.join("b/2.0.0/b-2.0.0.mur.zip"), b"x").unwrap();
    std::fs::create_dir_all(t.path().join("cache")).unwrap();
    std::fs::write(t.path().join("cache/one.cwasm"), [0u8; 1000]).unwrap();
    let (_, v) = doctor(
        json_cmd()
            .args(["--registry-path", reg.to_str().unwrap()])
            .env("MURMUR_CACHE_DIR", t.path().join("cache"))
            .env("MURMUR_SYSTEM_REGISTRY", reg.join("local")),
    );
    assert_eq!(v["registry"]["artifacts"], 2);
    assert_eq!(v["cache"]["entries"], 1);
    assert_eq!(v["cache"]["bytes"], 1000);
    assert_eq!(
        v["system_registry"],
        serde_json::json!({"path": reg.join("local").to_str().unwrap(), "exists": true, "artifacts": 1})
    );
    let text = Command::new(MUR)
        .arg("doctor")
        .env("MURMUR_SYSTEM_REGISTRY", reg.join("local"))
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    let line = format!(
        "  system registry {}: 1 artifacts, read where yours lacks a version\n",
        reg.join("local").display()
    );
    assert!(text.contains(&line), "{text}");
    let (_, v) = doctor(json_cmd().env("MURMUR_SYSTEM_REGISTRY", ""));
    assert_eq!(v["system_registry"], serde_json::Value::Null);
}

#[test]
fn landlock_hidden_by_a_seccomp_filter_is_named_with_enosys() {
    let (out, v) = doctor(&mut under_filter(
        libc::SYS_landlock_create_ruleset,
        libc::ENOSYS as u32,
        &["doctor", "--json"],
    ));
    assert!(out.status.success());
    let m = mechanism(&v, "landlock");
    assert_eq!(
        (m["ok"].clone(), m["errno"].clone()),
        (false.into(), 38.into()),
        "{v}"
    );
    assert!(m["fix"].as_str().unwrap().contains("landlock"), "{m}");
    assert_eq!(class(&v, "scoped")["achievable"], false);
    assert_eq!(class(&v, "scoped")["first_missing"]["name"], "landlock");
    assert_eq!(class(&v, "advisory")["achievable"], true);
    assert_eq!(v["roost_confinement"]["landlock"], false);
    assert_eq!(v["roost_confinement"]["complete"], false);
}

#[test]
fn a_refused_network_namespace_is_named_with_eperm() {
    let (out, v) = doctor(&mut under_filter(
        libc::SYS_unshare,
        libc::EPERM as u32,
        &["doctor", "--json"],
    ));
    assert!(out.status.success());
    let m = mechanism(&v, "netns");
    assert_eq!(m["errno"], 1, "{v}");
    assert!(
        m["error"].as_str().unwrap().starts_with("unshare(CLONE_NEWNET)"),
        "{m}"
    );
    // Without namespaces only a pids cgroup bounds a session (root's, or one delegated):
    // `scoped` then runs with its network closed; `sealed` needs the namespaces.
    let cgroup = mechanism(&v, "pids_cgroup")["ok"] == true;
    assert_eq!(class(&v, "scoped")["achievable"], cgroup, "{v}");
    assert_eq!(class(&v, "sealed")["achievable"], false);
    assert_eq!(class(&v, "sealed")["first_missing"]["name"], "netns");
    let text = under_filter(libc::SYS_unshare, libc::EPERM as u32, &["doctor"])
        .output()
        .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("sealed        no: netns: unshare(CLONE_NEWNET): errno 1"),
        "{text}"
    );
    assert!(text.contains("fix: "), "{text}");
}

/// A mechanism whose failure is an `io::Error` (the pids cgroup's parent, here one that is
/// not there) carries the errno its text shows (`os error 2`) into the JSON.
#[test]
fn an_os_error_in_the_text_is_the_errno_in_the_json() {
    let parent = "/nonexistent-murmur-cgroup-parent/x";
    let (out, v) = doctor(json_cmd().env("MURMUR_CGROUP_PARENT", parent));
    assert!(out.status.success());
    let m = mechanism(&v, "pids_cgroup");
    assert_eq!(m["ok"], false, "{m}");
    assert!(m["error"].as_str().unwrap().ends_with("(os error 2)"), "{m}");
    assert_eq!(m["errno"], 2, "{m}");
}

#[test]
fn an_unmapped_user_namespace_takes_namespaces_and_the_cgroup_away() {
    let ok = Command::new("unshare")
        .args(["--user", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipped: unshare --user is not available here");
        return;
    }
    let (out, v) = doctor(Command::new("unshare").args(["--user", MUR, "doctor", "--json"]));
    assert!(out.status.success());
    assert_eq!(class(&v, "scoped")["achievable"], false, "{v}");
    let m = mechanism(&v, "netns");
    assert_eq!(m["errno"], 1, "{v}");
    assert!(m["fix"].as_str().unwrap().contains("no uid map"), "{m}");
    assert_eq!(mechanism(&v, "sealed")["ok"], false);
    assert_eq!(mechanism(&v, "pids_cgroup")["ok"], false);
}

#[test]
fn the_test_hook_and_a_manifest_floor() {
    let t = TempDir::new("doctor-floor");
    let manifest = t.path().join("murmur.yaml");
    std::fs::write(
        &manifest,
        "name: floor\nversion: 1.0.0\ncapabilities:\n  containment: scoped\n",
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let out = Command::new(MUR)
        .args(["doctor", "--manifest", m])
        .env("MURMUR_PROBE_DENY", "cgroup,pidns")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("scoped        no: processes: no pids cgroup can be made (cgroup: disabled by MURMUR_PROBE_DENY) and no PID namespace bounds the session ("),
        "{text}"
    );
    assert!(
        text.contains("floor 'scoped' NOT met here: error[E-CAP-003]"),
        "{text}"
    );
    assert!(String::from_utf8(out.stderr).unwrap().contains("E-CAP-003"));
    let (_, v) = doctor(
        json_cmd()
            .args(["--manifest", m])
            .env("MURMUR_PROBE_DENY", "landlock_abi=2"),
    );
    assert_eq!(v["manifest"]["met"], false);
    assert!(mechanism(&v, "landlock_abi")["fix"]
        .as_str()
        .unwrap()
        .contains("too old for landlock ABI 3"));
}

#[test]
fn argument_errors_point_at_help() {
    let out = Command::new(MUR).args(["doctor", "--bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "mur: unknown argument: --bogus\nrun 'mur doctor --help' for usage\n"
    );
}
