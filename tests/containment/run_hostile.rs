//! Hostile guests through the real `mur run`: symlinks planted for the runtime's own writes,
//! forged records, a guest blocked in a host call past its deadline, and memory spread over
//! several linear memories.

use crate::common;

use common::capsule::{capsule, event, manifest_arg, mur, records, session_of, text, trace, MUR};
use common::TempDir;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A guest links `out/result.txt` to `../../../murmur.yaml` (and `task.md` to a file beside
/// the workdir) and traps: the runtime's `error:` line replaces the link, never follows it.
#[test]
fn a_planted_symlink_never_redirects_the_runtimes_writes() {
    let t = TempDir::new("hostile-symlink");
    let dir = capsule(&t, "tests/fixtures/symlink/capsule.wasm", "");
    let manifest_before = std::fs::read(dir.join("murmur.yaml")).unwrap();
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "hi"], &[]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let sid = session_of(&out);
    let guest = std::fs::read_to_string(records(&t, &sid).join("logs/guest-stderr.log")).unwrap();
    assert!(
        guest.contains("planted: out/result.txt 0, task.md 0"),
        "the guest could not plant its links, so this test proves nothing: {guest}"
    );
    assert_eq!(
        std::fs::read(dir.join("murmur.yaml")).unwrap(),
        manifest_before,
        "the runtime wrote through the guest's symlink"
    );
    let result = dir.join("workdir").join(&sid).join("out/result.txt");
    let meta = std::fs::symlink_metadata(&result).unwrap();
    assert!(meta.file_type().is_file(), "out/result.txt is still a link");
    let body = std::fs::read_to_string(&result).unwrap();
    assert!(body.starts_with("error: "), "{body}");
}

/// The guest writes forged `trace.jsonl` files where the spec's layout keeps records; the
/// real records live outside the workdir and are intact.
#[test]
fn a_guest_cannot_forge_or_truncate_the_records() {
    let t = TempDir::new("hostile-records");
    let dir = capsule(&t, "tests/fixtures/symlink/capsule.wasm", "");
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let out = mur(
        &t,
        &[
            "--manifest",
            &manifest_arg(&dir),
            "--task",
            "go",
            "--workdir",
            work.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    let sid = session_of(&out);
    // The guest did write its forgeries inside its own preopen...
    let forged = std::fs::read_to_string(work.join(".murmur").join(&sid).join("trace.jsonl")).unwrap();
    assert!(forged.contains("forged"), "{forged}");
    // ...but the records are elsewhere, whole, and say what happened.
    let rec = records(&t, &sid);
    assert!(!rec.starts_with(&work));
    let events = trace(&t, &sid);
    assert!(events.iter().all(|e| e.get("forged").is_none()), "{events:?}");
    assert_eq!(events[0]["event_type"], "session_start");
    assert_eq!(event(&events, "trap")["trap_kind"], "guest_panic");
    let end = events.last().unwrap();
    assert_eq!(
        (end["event_type"].as_str(), end["exit_status"].as_str()),
        (Some("session_end"), Some("failed"))
    );
    let boot = std::fs::read_to_string(rec.join("logs/bootstrap.log")).unwrap();
    assert!(boot.contains("containment declared"), "{boot}");
    // Owner-only: the records directory is private to the operator.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&rec).unwrap().permissions().mode() & 0o777,
        0o700
    );
}

/// A guest asleep in a host call for an hour, forever, ends at its 1 s deadline plus the
/// grace, reported as the deadline trap. (Before: `mur run` never returned.)
#[test]
fn a_guest_blocked_in_a_host_call_ends_at_its_deadline() {
    let t = TempDir::new("hostile-block");
    let dir = capsule(
        &t,
        "tests/fixtures/block/capsule.wasm",
        "capabilities:\n  limits:\n    deadline_seconds: 1\n",
    );
    let mut child = Command::new(MUR)
        .args(["run", "--manifest", &manifest_arg(&dir), "--task", "go"])
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A bound on a hang, not a speed target: the deadline is 1 s.
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mur run was still blocked 60 s after a 1 s deadline");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "error[E-RUN-001]: guest trapped (deadline): deadline of 1 s exceeded, blocked in a host call"
        ),
        "{stderr}"
    );
    let events = trace(&t, &session_of(&out));
    assert_eq!(event(&events, "trap")["trap_kind"], "deadline");
    assert_eq!(event(&events, "session_end")["exit_status"], "failed");
}

/// Three memories of 62.5 MiB each fit a 128 MiB cap one by one, not together.
#[test]
fn memory_bytes_caps_the_sum_of_all_memories() {
    let t = TempDir::new("hostile-multimem");
    let limits = |bytes: u64| format!("capabilities:\n  limits:\n    memory_bytes: {bytes}\n");
    let dir = capsule(&t, "tests/fixtures/multimem/capsule.wasm", &limits(128 << 20));
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(1), "stdout: {}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("guest trapped (resource_limit): memory limit: the guest's memories would total"),
        "{stderr}"
    );
    assert!(stderr.contains("memory_bytes is 134217728"), "{stderr}");
    // With room for all three it runs: the cap is on the sum, nothing else refused it.
    let t2 = TempDir::new("hostile-multimem-ok");
    let dir = capsule(&t2, "tests/fixtures/multimem/capsule.wasm", &limits(256 << 20));
    let out = mur(&t2, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
}

/// Nine one-page memories: more memories than a store may hold, whatever their size.
#[test]
fn the_number_of_memories_is_capped() {
    let t = TempDir::new("hostile-manymem");
    let dir = capsule(&t, "tests/fixtures/manymem/capsule.wasm", "");
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(1), "stdout: {}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("guest trapped (resource_limit)"), "{stderr}");
    assert!(stderr.contains("memory count"), "{stderr}");
}

/// Compiled native code is loaded only from a cache no one else can swap: a cache directory
/// whose parent anyone may write (not sticky) is neither read nor written. (Before, only the
/// directory and the file were checked, by path, after reading.)
#[test]
fn the_compile_cache_is_refused_below_a_directory_others_can_write() {
    use std::os::unix::fs::PermissionsExt;
    let t = TempDir::new("hostile-cache");
    let dir = capsule(&t, "examples/hello/capsule.wasm", "");
    let open = t.path().join("open");
    std::fs::create_dir_all(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let cache = open.join("cache");
    let cache_env = cache.to_str().unwrap().to_string();
    let launch = || {
        mur(
            &t,
            &["--manifest", &manifest_arg(&dir), "--task", "go"],
            &[("MURMUR_CACHE_DIR", &cache_env)],
        )
    };
    let boot = |out: &std::process::Output| {
        std::fs::read_to_string(records(&t, &session_of(out)).join("logs/bootstrap.log")).unwrap()
    };
    // A trusted cache first, so there is an entry to find.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    let first = launch();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let second = launch();
    assert!(boot(&second).contains(": Cached"), "{}", boot(&second));
    // Now anyone could rename `cache` away and put their own in its place.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let third = launch();
    assert_eq!(third.status.code(), Some(0), "{}", text(&third.stderr));
    let log = boot(&third);
    assert!(!log.contains(": Cached"), "{log}");
    assert!(
        log.contains("is not owned by this user or root, or is writable by others")
            && log.contains("stored: false"),
        "{log}"
    );
}

/// Records may not land inside the workdir, whatever the environment says: with
/// `--workdir $HOME` and the default records root, the launch is refused and nothing runs.
#[test]
fn records_inside_the_workdir_are_refused() {
    let t = TempDir::new("hostile-records-home");
    let dir = capsule(&t, "tests/fixtures/symlink/capsule.wasm", "");
    let home = t.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let home_s = home.to_str().unwrap();
    let out = mur(
        &t,
        &[
            "--manifest",
            &manifest_arg(&dir),
            "--workdir",
            home_s,
            "--task",
            "go",
        ],
        &[("MURMUR_RECORDS_DIR", ""), ("HOME", home_s)],
    );
    assert_eq!(out.status.code(), Some(1), "stdout: {}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error[E-IO-003]: the records directory") && stderr.contains("is inside the workdir"),
        "{stderr}"
    );
    assert!(
        !home.join("trace.jsonl").exists() && !home.join("out").exists(),
        "the session ran"
    );
}

fn hoard(t: &TempDir, mode: &str, deadline: u64) -> (std::process::Output, String) {
    let dir = capsule(
        t,
        "tests/fixtures/hoard/capsule.wasm",
        &format!(
            "capabilities:\n  env:\n    allow: [HOARD_MODE]\n  limits:\n    deadline_seconds: {deadline}\n"
        ),
    );
    let out = mur(
        t,
        &["--manifest", &manifest_arg(&dir), "--task", "go"],
        &[("HOARD_MODE", mode)],
    );
    let sid = session_of(&out);
    (out, sid)
}

/// A guest printing without end until its deadline: its log keeps the first 8 MiB and a
/// note, the rest is drained, not written.
#[test]
fn a_guests_output_log_is_capped() {
    let t = TempDir::new("hostile-flood");
    let (out, sid) = hoard(&t, "stdout", 2);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(event(&trace(&t, &sid), "trap")["trap_kind"], "deadline");
    let log = records(&t, &sid).join("logs/guest-stdout.log");
    let size = std::fs::metadata(&log).unwrap().len();
    let note = "\n[murmur: output truncated at 8388608 bytes]\n";
    assert_eq!(size, (8 << 20) + note.len() as u64, "the log is not capped");
    let boot = std::fs::read_to_string(records(&t, &sid).join("logs/bootstrap.log")).unwrap();
    assert!(
        boot.contains("guest stdout: ") && boot.contains("the first 8388608 kept"),
        "{boot}"
    );
}

/// Host objects a guest leaks (wasi:http fields) are bounded by the resource table, not
/// left to grow until the host runs out of memory.
#[test]
fn host_resources_a_guest_hoards_are_capped() {
    let t = TempDir::new("hostile-fields");
    let (out, sid) = hoard(&t, "fields", 30);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("guest trapped (resource_limit): host resources: resource table has no free keys"),
        "{stderr}"
    );
    let guest = std::fs::read_to_string(records(&t, &sid).join("logs/guest-stderr.log")).unwrap();
    assert!(
        guest.contains("holding 4000 fields") && !guest.contains("holding 5000"),
        "{guest}"
    );
}

/// An entry renamed to another component's cache name is not run in its place: the entry
/// names the component it was compiled from.
#[test]
fn a_cache_entry_only_serves_the_component_it_was_compiled_from() {
    let t = TempDir::new("hostile-cache-swap");
    let hello = capsule(&t, "examples/hello/capsule.wasm", "");
    let out = mur(&t, &["--manifest", &manifest_arg(&hello), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let cache = t.path().join("cache");
    let entry = std::fs::read_dir(&cache).unwrap().next().unwrap().unwrap().path();
    let name = entry.file_name().unwrap().to_str().unwrap().to_string();
    let engine_key = name.split_once('-').unwrap().1;
    let spin_bytes = std::fs::read(common::capsule::repo("tests/fixtures/spin/capsule.wasm")).unwrap();
    let spin_sha = murmur::registry::sha256_hex(&spin_bytes);
    std::fs::copy(&entry, cache.join(format!("{spin_sha}-{engine_key}"))).unwrap();
    std::fs::remove_dir_all(&hello).unwrap();
    let spin = capsule(
        &t,
        "tests/fixtures/spin/capsule.wasm",
        "capabilities:\n  limits:\n    deadline_seconds: 1\n",
    );
    let out = mur(&t, &["--manifest", &manifest_arg(&spin), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(1), "the hello entry ran in spin's place");
    let sid = session_of(&out);
    assert_eq!(event(&trace(&t, &sid), "trap")["trap_kind"], "deadline");
    let boot = std::fs::read_to_string(records(&t, &sid).join("logs/bootstrap.log")).unwrap();
    assert!(
        boot.contains("the entry was compiled from another component"),
        "{boot}"
    );
}
