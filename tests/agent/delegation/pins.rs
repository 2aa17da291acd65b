//! A delegated child pinned in its parent's lock: the first delegation of a `spawn.allow`
//! capsule adds its name, version and sha256 to the lock beside the parent's manifest (and
//! `mur lock` keeps it); the same capsule republished with other bytes is then refused at
//! the next delegation with E-REG-002 naming both hashes, though the roost approves the new
//! bytes, and no child session starts.

use crate::common::capsule::MUR;
use crate::common::delegation::*;
use crate::common::provider::Provider;
use std::path::Path;

/// `mur run` of the manifest at `manifest` with `task` (and `extra` arguments), to its end.
fn run_manifest(f: &Formation, manifest: &Path, task: &str, extra: &[&str]) -> Ended {
    let wd = f.workdir("boss");
    let mut args: Vec<String> = [
        "run",
        "--manifest",
        manifest.to_str().unwrap(),
        "--registry-path",
        f.reg.to_str().unwrap(),
        "--workdir",
        wd.to_str().unwrap(),
        "--json",
        "--task",
        task,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    f.run_to_end(&args, &f.env(), None)
}

/// The output of the one failed delegation of session `sid`.
fn refusal(f: &Formation, run: &Ended) -> String {
    let failed: Vec<_> = delegations(f, &run.sid())
        .into_iter()
        .filter(|e| e["status"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{}\n{}", run.both(), f.dump());
    failed[0]["output"].as_str().unwrap_or_default().to_string()
}

/// `mur lock ARGS` for the parent's manifest; its exit code and output.
fn mur_lock(f: &Formation, manifest: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(MUR)
        .args([
            "lock",
            "--manifest",
            manifest.to_str().unwrap(),
            "--registry-path",
            f.reg.to_str().unwrap(),
        ])
        .args(args)
        .env("HOME", &f.home)
        .output()
        .unwrap()
}

/// The delegation events of session `sid`.
fn delegations(f: &Formation, sid: &str) -> Vec<serde_json::Value> {
    events_of(&f.trace(sid), "delegation")
        .into_iter()
        .cloned()
        .collect()
}

#[test]
fn a_child_is_pinned_at_its_first_delegation_and_other_bytes_are_refused_after() {
    let p = Provider::start_responder(responder(&[
        ("boss", Plan::delegate(&[("courier", "carry it")])),
        ("courier", Plan::answer("OUTPUT-courier")),
    ]));
    let mut f = Formation::new("dlg-pins");
    let boss = Cap::delegating("boss", &["courier"]);
    f.publish(&p, &boss);
    let old = f.publish(&p, &Cap::leaf("courier"));
    f.start_roost(&["boss"], &[]);
    let dir = f.t.path().join("boss");
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("murmur.yaml");
    std::fs::write(&manifest, boss.yaml(&p)).unwrap();

    let first = run_manifest(&f, &manifest, "send the courier", &[]);
    assert_eq!(first.code, Some(0), "{}\n{}", first.both(), f.dump());
    let started: Vec<_> = delegations(&f, &first.sid())
        .into_iter()
        .filter(|e| e["status"] == "started")
        .collect();
    assert_eq!(started.len(), 1, "{}", f.dump());
    let lock = std::fs::read_to_string(dir.join("murmur.lock")).unwrap();
    assert!(
        lock.contains(&format!(
            "  - name: courier\n    resolved_version: {V}\n    sha256: {old}\n"
        )),
        "{lock}"
    );
    // `mur lock` rewriting every pin keeps the child's.
    let out = mur_lock(&f, &manifest, &[]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(std::fs::read_to_string(dir.join("murmur.lock")).unwrap(), lock);

    // The courier republished with other bytes: the roost approves them, the lock does not.
    std::fs::remove_dir_all(f.reg.join("courier").join(V)).unwrap();
    let new = f.publish_yaml(&Cap::leaf("courier").yaml(&p), &[("notes.md", b"other bytes")]);
    assert_ne!(old, new);
    let couriers = requests_of(&p, "courier").len();
    let second = run_manifest(&f, &manifest, "send the courier again", &[]);
    let why = refusal(&f, &second);
    assert!(
        why.contains(&format!(
            "E-REG-002: courier@{V} in the registry has sha256 {new}, murmur.lock pins sha256 {old}"
        )),
        "{why}"
    );
    assert_eq!(requests_of(&p, "courier").len(), couriers, "no child ran");
    assert_eq!(std::fs::read_to_string(dir.join("murmur.lock")).unwrap(), lock);

    // A pin at another version is refused before the roost is asked; the operator moves it
    // with `mur lock --update NAME@VERSION`, and the child runs again.
    let moved = lock.replace(
        &format!("resolved_version: {V}\n    sha256: {old}"),
        &format!("resolved_version: 9.9.9\n    sha256: {old}"),
    );
    assert_ne!(moved, lock);
    std::fs::write(dir.join("murmur.lock"), &moved).unwrap();
    let third = run_manifest(&f, &manifest, "send the courier once more", &[]);
    let why = refusal(&f, &third);
    assert!(
        why.contains(&format!("E-RUN-003: murmur.lock pins the child capsule courier at 9.9.9, the delegation asks for {V} (to move it: `mur lock --update courier@{V}`)")),
        "{why}"
    );
    let out = mur_lock(&f, &manifest, &["--update", &format!("courier@{V}")]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let repinned = std::fs::read_to_string(dir.join("murmur.lock")).unwrap();
    assert!(
        repinned.contains(&format!("resolved_version: {V}\n    sha256: {new}")),
        "{repinned}"
    );
    let fourth = run_manifest(&f, &manifest, "send the courier at last", &[]);
    let started = delegations(&f, &fourth.sid())
        .into_iter()
        .filter(|e| e["status"] == "started")
        .count();
    assert_eq!(started, 1, "{}\n{}", fourth.both(), f.dump());

    // With --locked, a child the lock does not pin is refused.
    let unpinned = repinned.replace(
        &format!("  - name: courier\n    resolved_version: {V}\n    sha256: {new}\n"),
        "",
    );
    assert!(
        unpinned.contains("murmur-driver-openai") && !unpinned.contains("courier"),
        "{unpinned}"
    );
    std::fs::write(dir.join("murmur.lock"), &unpinned).unwrap();
    let fifth = run_manifest(&f, &manifest, "send the courier locked", &["--locked"]);
    let why = refusal(&f, &fifth);
    assert!(
        why.contains("E-RUN-003: --locked: murmur.lock does not pin the child capsule courier"),
        "{why}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("murmur.lock")).unwrap(),
        unpinned
    );
}
