//! `murmur.lock` through the real `mur run` and `mur lock`: the first run pins every artifact
//! by name, version and the sha256 of its archive; later runs verify before anything is
//! staged: other bytes under a pinned version are E-REG-002 naming both hashes, another
//! version or an artifact the lock lacks E-RUN-003; `mur lock --update NAME` takes the one
//! artifact on purpose; `--locked` never writes a lock and refuses to run without one; a
//! lock that is not one, or a symlink at its name, is refused.

use crate::common;

use common::agent::{publish_wasm_tool, Drv, Spec, World, KEY, KEY_VAR};
use common::capsule::{manifest_arg, mur, MUR};
use common::provider::{Provider, Step};
use serde_json::Value;
use std::process::Command;

const TOOL: &str = "{name: lock-tool, version: 1.0.0, runtime: tool}";

fn sha256_of(path: &std::path::Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    murmur::registry::sha256_hex(&bytes)
}

/// The archive the registry holds for `name@version` (bare name, no scope).
fn archive(w: &World, name: &str, version: &str) -> std::path::PathBuf {
    w.reg
        .join(name)
        .join(version)
        .join(format!("{name}-{version}.mur.zip"))
}

/// A capsule with the OpenAI driver and `lock-tool` (its manifest's description `desc`).
fn world(label: &str, p: &Provider, desc: &str) -> World {
    let w = World::new(label);
    publish_wasm_tool(&w.reg, "lock-tool", &format!("description: {desc}\n"));
    let mut spec = Spec::new(Drv::OpenAi, p);
    spec.artifacts = vec![TOOL.into()];
    w.manifest(&spec);
    w
}

fn lock_text(w: &World) -> String {
    std::fs::read_to_string(w.dir.join("murmur.lock")).unwrap()
}

/// The lock's pins as (name, version, sha256), read with a YAML reader of the test's own.
fn pins(w: &World) -> Vec<(String, String, String)> {
    let v: serde_yaml::Value = serde_yaml::from_str(&lock_text(w)).unwrap();
    assert_eq!(v["lock_version"], serde_yaml::Value::from(1));
    v["artifacts"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap().to_string();
            (s("name"), s("resolved_version"), s("sha256"))
        })
        .collect()
}

/// `mur run` with more arguments (`--locked`).
fn run_with(w: &World, extra: &[&str]) -> common::agent::Run {
    let manifest = manifest_arg(&w.dir);
    let mut args = vec![
        "--manifest",
        &manifest,
        "--registry-path",
        w.reg.to_str().unwrap(),
        "--task",
        "go",
    ];
    args.extend_from_slice(extra);
    let started = std::time::Instant::now();
    let out = mur(&w.t, &args, &[(KEY_VAR, KEY)]);
    common::agent::Run {
        out,
        elapsed: started.elapsed(),
    }
}

/// `mur lock` on the world's capsule with `extra` arguments: (exit code, stdout, stderr).
fn mur_lock(w: &World, extra: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(MUR)
        .args(["lock", "--manifest", &manifest_arg(&w.dir), "--registry-path"])
        .arg(&w.reg)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The `mur lock` command line a refusal's hint gives for the world's capsule.
fn lock_command(w: &World) -> String {
    format!(
        "mur lock --manifest {} --registry-path {}",
        manifest_arg(&w.dir),
        w.reg.display()
    )
}

/// Refused before any session: the exit code 1, the coded line, no workdir, no records.
fn assert_refused(w: &World, run: &common::agent::Run, line: &str) {
    assert_eq!(run.code(), Some(1), "{}", run.both());
    assert!(run.stderr().contains(line), "want {line:?}\n{}", run.both());
    w.assert_no_session();
}

#[test]
fn the_first_run_pins_every_artifact_and_later_runs_verify_it() {
    let p = Provider::start(vec![Step::text("one"), Step::text("two")]);
    let w = world("lock-first", &p, "one");
    assert!(!w.dir.join("murmur.lock").exists());
    let first = w.run("go", &[]);
    first.assert_ok();
    assert!(
        first
            .stderr()
            .contains("murmur.lock written: 2 artifacts pinned by content"),
        "{}",
        first.both()
    );
    let driver = archive(&w, "murmur-driver-openai", "1.0.0");
    let tool = archive(&w, "lock-tool", "1.0.0");
    assert_eq!(
        pins(&w),
        [
            ("lock-tool".into(), "1.0.0".into(), sha256_of(&tool)),
            ("murmur-driver-openai".into(), "1.0.0".into(), sha256_of(&driver)),
        ],
        "sorted by name, the hash of the archive bytes"
    );
    let before = lock_text(&w);
    let second = w.run("go", &[]);
    second.assert_ok();
    assert!(!second.stderr().contains("murmur.lock"), "{}", second.both());
    assert_eq!(lock_text(&w), before, "a verified lock is not rewritten");
}

#[test]
fn other_bytes_another_version_or_an_unpinned_artifact_are_refused_before_anything_is_staged() {
    let p = Provider::start(vec![Step::text("one"), Step::text("after update")]);
    let w = world("lock-refuse", &p, "one");
    w.run("go", &[]).assert_ok();
    let pinned = sha256_of(&archive(&w, "lock-tool", "1.0.0"));
    std::fs::remove_dir_all(w.t.path().join("capsule/workdir")).unwrap();
    std::fs::remove_dir_all(w.t.path().join("records")).unwrap();

    // The same name and version with other bytes (a registry restored from elsewhere).
    std::fs::remove_dir_all(w.reg.join("lock-tool")).unwrap();
    publish_wasm_tool(&w.reg, "lock-tool", "description: two\n");
    let other = sha256_of(&archive(&w, "lock-tool", "1.0.0"));
    assert_ne!(other, pinned);
    let run = w.run("go", &[]);
    assert_refused(
        &w,
        &run,
        &format!("error[E-REG-002]: lock-tool@1.0.0 in the registry has sha256 {other}, murmur.lock pins sha256 {pinned}: other bytes under the same name and version"),
    );
    // `mur lock` does not take the other bytes silently either.
    let (code, _, err) = mur_lock(&w, &[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!("error[E-REG-002]: lock-tool@1.0.0 in the registry has sha256 {other}, murmur.lock pins sha256 {pinned}: other bytes under the same name and version; if they are trusted, pass --accept-changed lock-tool")),
        "{err}"
    );
    assert!(lock_text(&w).contains(&pinned), "the lock is left as it was");

    // Another version than the one pinned.
    publish_wasm_tool_version(&w, "1.0.1");
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec!["{name: lock-tool, version: 1.0.1, runtime: tool}".into()];
    w.manifest(&spec);
    let run = w.run("go", &[]);
    assert_refused(
        &w,
        &run,
        &format!(
            "error[E-RUN-003]: murmur.lock pins lock-tool at 1.0.0, the manifest asks for 1.0.1: take it with `{} --update lock-tool`",
            lock_command(&w)
        ),
    );

    // An artifact the lock has no entry for (beside lock-tool, taken on purpose first).
    let (code, out, err) = mur_lock(&w, &["--update", "lock-tool"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("pinned lock-tool@1.0.1 sha256 "), "{out}");
    publish_wasm_tool(&w.reg, "new-tool", "description: new\n");
    spec.artifacts
        .push("{name: new-tool, version: 1.0.0, runtime: tool}".into());
    w.manifest(&spec);
    let run = w.run("go", &[]);
    assert_refused(
        &w,
        &run,
        &format!(
            "error[E-RUN-003]: new-tool@1.0.0 is not pinned in murmur.lock: pin it with `{} --update new-tool`",
            lock_command(&w)
        ),
    );

    // `mur lock --update` takes it on purpose, the other pins as they were.
    let (code, out, err) = mur_lock(&w, &["--update", "new-tool"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.starts_with("pinned new-tool@1.0.0 sha256 "), "{out}");
    let now = pins(&w);
    assert_eq!(now.len(), 3, "{now:?}");
    assert!(now.contains(&(
        "lock-tool".into(),
        "1.0.1".into(),
        sha256_of(&archive(&w, "lock-tool", "1.0.1"))
    )));
    assert!(now.contains(&(
        "murmur-driver-openai".into(),
        "1.0.0".into(),
        sha256_of(&archive(&w, "murmur-driver-openai", "1.0.0"))
    )));
    w.run("go", &[]).assert_ok();
}

/// Publish `lock-tool` at `version` (its manifest's own version line).
fn publish_wasm_tool_version(w: &World, version: &str) {
    let yaml = format!("name: lock-tool\nversion: \"{version}\"\nruntime: tool\ndescription: next\n");
    let wasm = std::fs::read(common::capsule::repo("tests/fixtures/echo-tool/capsule.wasm")).unwrap();
    common::agent::publish_files(
        &w.reg,
        &[("murmur.yaml", yaml.as_bytes()), ("capsule.wasm", &wasm)],
    );
}

#[test]
fn mur_lock_takes_other_bytes_only_when_told_to() {
    let p = Provider::start(vec![Step::text("one")]);
    let w = world("lock-accept", &p, "one");
    let (code, _, err) = mur_lock(&w, &[]);
    assert_eq!(code, Some(0), "{err}");
    let pinned = sha256_of(&archive(&w, "lock-tool", "1.0.0"));
    std::fs::remove_dir_all(w.reg.join("lock-tool")).unwrap();
    publish_wasm_tool(&w.reg, "lock-tool", "description: two\n");
    let other = sha256_of(&archive(&w, "lock-tool", "1.0.0"));
    let (code, out, err) = mur_lock(&w, &["--update", "lock-tool", "--accept-changed", "lock-tool"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.lines().next().unwrap(),
        format!("pinned lock-tool@1.0.0 sha256 {other} (was {pinned})")
    );
    w.run("go", &[]).assert_ok();
}

#[test]
fn locked_never_writes_a_lock_and_refuses_to_run_without_one() {
    let p = Provider::start(vec![Step::text("one")]);
    let w = world("lock-locked", &p, "one");
    let run = run_with(&w, &["--locked"]);
    assert_refused(
        &w,
        &run,
        &format!(
            "error[E-RUN-003]: there is no murmur.lock beside the manifest, and --locked writes none: run `{}` and commit it",
            lock_command(&w)
        ),
    );
    assert!(!w.dir.join("murmur.lock").exists());

    let (code, out, err) = mur_lock(&w, &["--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["total"], 2);
    assert_eq!(v["pinned"].as_array().unwrap().len(), 2);
    let run = run_with(&w, &["--locked"]);
    run.assert_ok();
    assert!(!run.stderr().contains("murmur.lock"), "{}", run.both());

    // A capsule from the registry has no lock beside a manifest: --locked refuses it.
    let yaml = std::fs::read(w.dir.join("murmur.yaml")).unwrap();
    common::agent::publish_files(&w.reg, &[("murmur.yaml", &yaml)]);
    let out = mur(
        &w.t,
        &[
            "--capsule",
            "agent-x",
            "--capsule-version",
            "0.1.0",
            "--registry-path",
            w.reg.to_str().unwrap(),
            "--locked",
        ],
        &[(KEY_VAR, KEY)],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "error[E-RUN-003]: a capsule run from the registry (--capsule) has no lock beside a manifest"
        ),
        "{err}"
    );
}

#[test]
fn a_lock_that_is_not_one_or_a_symlink_at_its_name_is_refused() {
    let p = Provider::start(vec![]);
    let w = world("lock-bad", &p, "one");
    std::fs::write(w.dir.join("murmur.lock"), "lock_version: 7\nartifacts: []\n").unwrap();
    let run = w.run("go", &[]);
    assert_refused(
        &w,
        &run,
        "error[E-RUN-003]: murmur.lock: lock_version 7 (this runtime reads 1)",
    );
    std::fs::remove_file(w.dir.join("murmur.lock")).unwrap();
    let elsewhere = w.t.path().join("elsewhere.lock");
    std::fs::write(&elsewhere, "lock_version: 1\nartifacts: []\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, w.dir.join("murmur.lock")).unwrap();
    let run = w.run("go", &[]);
    assert_refused(&w, &run, "error[E-RUN-003]: cannot read murmur.lock: refusing");
    assert!(run.stderr().contains("symbolic link"), "{}", run.both());
    assert_eq!(
        std::fs::read_to_string(&elsewhere).unwrap(),
        "lock_version: 1\nartifacts: []\n",
        "the file the symlink names is untouched"
    );
}

#[test]
fn two_manifests_in_one_directory_keep_locks_of_their_own() {
    let p = Provider::start(vec![Step::text("one"), Step::text("two")]);
    let w = world("lock-two", &p, "one");
    w.run("go", &[]).assert_ok();
    let other = Spec::new(Drv::Anthropic, &p);
    std::fs::write(w.dir.join("other.yaml"), other.yaml()).unwrap();
    let manifest = w.dir.join("other.yaml").display().to_string();
    let out = mur(
        &w.t,
        &[
            "--manifest",
            &manifest,
            "--registry-path",
            w.reg.to_str().unwrap(),
            "--task",
            "go",
        ],
        &[(KEY_VAR, KEY)],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("other.lock written: 1 artifacts pinned by content"),
        "{err}"
    );
    let text = std::fs::read_to_string(w.dir.join("other.lock")).unwrap();
    assert!(text.contains("name: murmur-driver-anthropic"), "{text}");
    assert_eq!(pins(&w).len(), 2, "murmur.lock is murmur.yaml's alone");
}

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: mounts a tmpfs")]
fn a_full_disk_leaves_the_run_unpinned_with_a_warning_and_no_partial_lock() {
    let p = Provider::start(vec![Step::text("one")]);
    let w = world("lock-full", &p, "one");
    let yaml = std::fs::read(w.dir.join("murmur.yaml")).unwrap();
    let _disk = match common::tmpfs::Tmpfs::mount(&w.dir, "64k") {
        Ok(m) => m,
        Err(why) => panic!("mounting a tmpfs was refused: {why}"),
    };
    std::fs::write(w.dir.join("murmur.yaml"), &yaml).unwrap();
    // Fill what is left of the disk.
    {
        use std::io::Write;
        let mut f = std::fs::File::create(w.dir.join("filler")).unwrap();
        let block = vec![0u8; 4096];
        while f.write_all(&block).is_ok() {}
    }
    let work = w.t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let run = run_with(&w, &["--workdir", work.to_str().unwrap()]);
    run.assert_ok();
    let warned: Vec<String> = run
        .stderr()
        .lines()
        .filter(|l| l.starts_with("warning[W-RUN-003]"))
        .map(str::to_string)
        .collect();
    assert_eq!(warned.len(), 1, "{}", run.both());
    assert!(
        warned[0].starts_with("warning[W-RUN-003]: cannot write murmur.lock (")
            && warned[0].contains("No space left on device")
            && warned[0].ends_with("); the artifacts are not pinned"),
        "{}",
        warned[0]
    );
    let left: Vec<String> = std::fs::read_dir(&w.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let mut left = left;
    left.sort();
    assert_eq!(
        left,
        ["filler", "murmur.yaml"],
        "no lock, no temp file left behind"
    );
}

#[test]
fn a_lock_another_user_could_write_is_warned_of_at_launch() {
    use std::os::unix::fs::PermissionsExt;
    let p = Provider::start(vec![Step::text("one"), Step::text("two"), Step::text("three")]);
    let w = world("lock-shared", &p, "one");
    let warned = |run: &common::agent::Run| -> Vec<String> {
        run.stderr()
            .lines()
            .filter(|l| l.starts_with("warning[W-SEC-026]"))
            .map(str::to_string)
            .collect()
    };
    let first = w.run("go", &[]);
    first.assert_ok();
    assert!(warned(&first).is_empty(), "{}", first.both());

    std::fs::set_permissions(&w.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let run = w.run("go", &[]);
    run.assert_ok();
    assert_eq!(
        warned(&run),
        [format!(
            "warning[W-SEC-026]: {}, the directory murmur.lock is kept in, can be written by another user: whoever can write it can change which bytes this capsule runs",
            w.dir.display()
        )],
        "{}",
        run.both()
    );

    std::fs::set_permissions(&w.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(w.dir.join("murmur.lock"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let run = w.run("go", &[]);
    run.assert_ok();
    assert_eq!(
        warned(&run),
        ["warning[W-SEC-026]: murmur.lock can be written by another user: whoever can write it can change which bytes this capsule runs"],
        "{}",
        run.both()
    );
}
