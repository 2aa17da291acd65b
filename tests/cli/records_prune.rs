//! `mur records prune` and the prune `mur run` starts at launch, through the real binary:
//! session records directories made by hand with old mtimes, pruned by age, by count and by
//! bytes (oldest first, exactly which remain), a held lock (a test holding the flock the
//! way a session does, and a live `mur run`) never removed, a symlink in the records root
//! never followed, a kept session left alone, a delegated child's workdir removed with its
//! records only once its parent has ended, and the usage errors.

use crate::common;

use common::capsule::{capsule, hello, manifest_arg, mur, serve, session_of, text, MUR};
use common::TempDir;
use serde_json::Value;
use std::fs::{File, FileTimes};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, SystemTime};

const DAY: u64 = 86_400;

/// A session id for `n`.
fn sid(n: u32) -> String {
    format!("ses_{n:032x}")
}

/// Set the mtime of everything in `path` (files first, then their directories) to `days`
/// days ago, without following a symlink.
fn age(path: &Path, days: u64) {
    let when = SystemTime::now() - Duration::from_secs(days * DAY + 3600);
    let meta = std::fs::symlink_metadata(path).unwrap();
    // A live session's control socket cannot be opened (and a prune measures it as nothing).
    if meta.is_symlink() || std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) {
        return;
    }
    if meta.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            age(&e.unwrap().path(), days);
        }
    }
    File::open(path)
        .unwrap()
        .set_times(FileTimes::new().set_modified(when).set_accessed(when))
        .unwrap();
}

/// A session's records made by hand: `trace.jsonl` of `bytes` bytes and `logs/`, all
/// written `days` days ago.
fn fake(root: &Path, n: u32, days: u64, bytes: usize) -> PathBuf {
    let dir = root.join(sid(n));
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join("trace.jsonl"), vec![b'x'; bytes]).unwrap();
    age(&dir, days);
    dir
}

/// The test's world: a records root and an operator config with `policy` as its
/// `records:` block.
struct World {
    t: TempDir,
}

impl World {
    fn new(label: &str, policy: &str) -> World {
        let t = TempDir::new(label);
        let config = t.path().join("config/murmur");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(config.join("config.yaml"), format!("records:\n{policy}")).unwrap();
        let root = t.path().join("records");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        World { t }
    }

    fn root(&self) -> PathBuf {
        self.t.path().join("records")
    }

    fn env(&self) -> Vec<(String, String)> {
        vec![
            ("MURMUR_RECORDS_DIR".into(), self.root().display().to_string()),
            (
                "XDG_CONFIG_HOME".into(),
                self.t.path().join("config").display().to_string(),
            ),
        ]
    }

    /// `mur records ARGS`.
    fn records(&self, args: &[&str]) -> Output {
        Command::new(MUR)
            .arg("records")
            .args(args)
            .envs(self.env())
            .output()
            .unwrap()
    }

    /// `mur records prune [--dry-run] --json`, which must succeed: its report.
    fn prune(&self, dry_run: bool) -> Value {
        let mut args = vec!["prune", "--json"];
        if dry_run {
            args.push("--dry-run");
        }
        let out = self.records(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The names in the records root, sorted.
    fn left(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

/// The sessions a report names, with their reasons, in its order.
fn removed(report: &Value) -> Vec<(String, String)> {
    report["removed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["session"].as_str().unwrap().into(),
                r["reason"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn names(ns: &[u32]) -> Vec<String> {
    let mut v: Vec<String> = ns.iter().map(|n| sid(*n)).collect();
    v.sort();
    v
}

fn expect(ns: &[(u32, &str)]) -> Vec<(String, String)> {
    ns.iter().map(|(n, r)| (sid(*n), r.to_string())).collect()
}

#[test]
fn records_prune_removes_by_age_oldest_first_after_a_dry_run_that_removes_nothing() {
    let w = World::new("prune-age", "  max_age_days: 30\n");
    for (n, days) in [(1, 1), (2, 10), (3, 29), (4, 31), (5, 45), (6, 400)] {
        fake(&w.root(), n, days, 100);
    }
    let dry = w.prune(true);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(
        removed(&dry),
        expect(&[(6, "age"), (5, "age"), (4, "age")]),
        "{dry}"
    );
    assert_eq!(dry["freed_bytes"], 300, "{dry}");
    assert_eq!(
        w.left(),
        names(&[1, 2, 3, 4, 5, 6]),
        "the dry run removed something"
    );

    let done = w.prune(false);
    assert_eq!(removed(&done), removed(&dry), "{done}");
    assert_eq!(done["freed_bytes"], 300, "{done}");
    assert_eq!(done["left"]["sessions"], 3, "{done}");
    assert_eq!(w.left(), names(&[1, 2, 3]));

    // The text report says the same for a person.
    let out = w.records(&["prune", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stdout).starts_with("would remove 0 sessions, would free 0 bytes; left 3 sessions (300 bytes); 0 live or in use, 0 kept on purpose; policy: at most 30 days, 1000 sessions, 2147483648 bytes\n"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn records_prune_keeps_the_newest_sessions_by_count_and_by_bytes() {
    let w = World::new("prune-count", "  max_sessions: 3\n");
    for n in 1..=6 {
        fake(&w.root(), n, u64::from(n), 10);
    }
    let done = w.prune(false);
    assert_eq!(
        removed(&done),
        expect(&[(6, "count"), (5, "count"), (4, "count")]),
        "{done}"
    );
    assert_eq!(w.left(), names(&[1, 2, 3]));

    let w = World::new("prune-bytes", "  max_bytes: 2500\n");
    for n in 1..=5 {
        fake(&w.root(), n, u64::from(n), 1000);
    }
    let done = w.prune(false);
    assert_eq!(
        removed(&done),
        expect(&[(5, "bytes"), (4, "bytes"), (3, "bytes")]),
        "{done}"
    );
    assert_eq!(done["freed_bytes"], 3000, "{done}");
    assert_eq!(done["left"]["bytes"], 2000, "{done}");
    assert_eq!(w.left(), names(&[1, 2]));
}

#[test]
fn records_prune_never_takes_a_held_lock_a_symlink_a_kept_session_or_another_name() {
    let w = World::new("prune-held", "  max_age_days: 30\n");
    // Held the way a session holds its records: an exclusive flock on the directory.
    let held = fake(&w.root(), 1, 400, 10);
    let lock = File::open(&held).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    // A symlink under a session's name, to an old directory outside the root.
    let outside = w.t.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("precious"), "keep me").unwrap();
    age(&outside, 400);
    std::os::unix::fs::symlink(&outside, w.root().join(sid(2))).unwrap();
    // Kept on purpose, and another name.
    let kept = fake(&w.root(), 3, 400, 10);
    std::fs::write(kept.join("keep"), "").unwrap();
    age(&kept, 400);
    std::fs::create_dir_all(w.root().join("notes")).unwrap();
    age(&w.root().join("notes"), 400);
    // And one that goes, holding a symlink to the same directory: removed as a name.
    let goes = fake(&w.root(), 4, 400, 10);
    std::os::unix::fs::symlink(&outside, goes.join("logs/link")).unwrap();
    age(&goes, 400);

    let done = w.prune(false);
    assert_eq!(removed(&done), expect(&[(4, "age")]), "{done}");
    assert_eq!(done["freed_bytes"], 10, "{done}");
    assert_eq!(
        (done["live"].clone(), done["kept"].clone()),
        (1.into(), 1.into()),
        "{done}"
    );
    let mut want = names(&[1, 2, 3]);
    want.push("notes".into());
    want.sort();
    assert_eq!(w.left(), want);
    assert_eq!(
        std::fs::read_to_string(outside.join("precious")).unwrap(),
        "keep me"
    );

    // Let go, and it is an ended session like any other.
    drop(lock);
    let done = w.prune(false);
    assert_eq!(removed(&done), expect(&[(1, "age")]), "{done}");
}

#[test]
fn records_prune_leaves_a_live_mur_run_alone_until_it_ends() {
    let w = World::new("prune-live", "  max_age_days: 30\n");
    let t = &w.t;
    let dir = capsule(
        t,
        "examples/hello/capsule.wasm",
        "lifecycle:\n  task_acceptance: queue\n  after_task: sleep\n",
    );
    let (mut running, line) = serve(t, &dir);
    let live = line["session_id"].as_str().unwrap().to_string();
    age(&w.root().join(&live), 400);
    let done = w.prune(false);
    assert_eq!(removed(&done), Vec::<(String, String)>::new(), "{done}");
    assert_eq!(done["live"], 1, "{done}");
    assert!(w.root().join(&live).join("trace.jsonl").exists());

    let _ = running.terminate();
    age(&w.root().join(&live), 400);
    let done = w.prune(false);
    assert_eq!(removed(&done), [(live, "age".to_string())], "{done}");
    assert_eq!(w.left(), Vec::<String>::new());
}

#[test]
fn records_prune_runs_in_the_background_at_launch_and_spares_the_new_session() {
    let w = World::new("prune-launch", "  max_age_days: 30\n");
    for (n, days) in [(1, 400), (2, 40), (3, 2)] {
        fake(&w.root(), n, days, 10);
    }
    let dir = hello(&w.t);
    let env = w.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = mur(
        &w.t,
        &["--manifest", &manifest_arg(&dir), "--task", "say hi"],
        &env,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mut want = names(&[3]);
    want.push(session_of(&out));
    want.sort();
    assert_eq!(w.left(), want);

    // Turned off, a launch prunes nothing.
    let w = World::new(
        "prune-launch-off",
        "  max_age_days: 30\n  prune_at_launch: false\n",
    );
    fake(&w.root(), 1, 400, 10);
    let dir = hello(&w.t);
    let env = w.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let out = mur(
        &w.t,
        &["--manifest", &manifest_arg(&dir), "--task", "say hi"],
        &env,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(w.root().join(sid(1)).exists());
}

/// A delegated child's records linked to its workdir the way a child session links them.
fn child(w: &World, n: u32, parent: &Path, days: u64) -> PathBuf {
    let work = parent.join(".murmur/children").join(format!("worker-{n:02x}"));
    std::fs::create_dir_all(work.join("out")).unwrap();
    std::fs::write(work.join("out/result.txt"), vec![b'y'; 500]).unwrap();
    let meta = std::fs::metadata(&work).unwrap();
    let records = fake(&w.root(), n, days, 10);
    let link = serde_json::json!({"path": work.display().to_string(), "dev": meta.dev(), "ino": meta.ino()});
    std::fs::write(records.join("child-workdir.json"), link.to_string()).unwrap();
    age(&records, days);
    work
}

#[test]
fn records_prune_removes_an_ended_childs_workdir_with_its_records_once_its_parent_ended() {
    let w = World::new("prune-child", "  max_age_days: 30\n");
    let parent = w.t.path().join("parent-work");
    let work = child(&w, 1, &parent, 400);
    // The parent still runs: it holds its workdir shared, as every session does.
    let lock = File::open(&parent).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockShared).unwrap();
    let done = w.prune(false);
    assert_eq!(removed(&done), Vec::<(String, String)>::new(), "{done}");
    assert_eq!(done["live"], 1, "{done}");
    assert!(work.join("out/result.txt").exists());

    drop(lock);
    let dry = w.prune(true);
    assert!(dry["removed"][0]["bytes"].as_u64().unwrap() > 500, "{dry}");
    assert_eq!(
        dry["removed"][0]["child_workdir"],
        work.display().to_string(),
        "{dry}"
    );
    let done = w.prune(false);
    assert_eq!(removed(&done), expect(&[(1, "age")]), "{done}");
    assert!(!work.exists(), "the ended child's workdir is left");
    assert!(parent.join(".murmur/children").exists());

    // A link to a directory that is not the one recorded: the records go, it stays.
    let work = child(&w, 2, &parent, 400);
    std::fs::rename(&work, parent.join("moved")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("stranger"), "not the child's").unwrap();
    let done = w.prune(false);
    assert_eq!(removed(&done), expect(&[(2, "age")]), "{done}");
    assert!(work.join("stranger").exists());
}

#[test]
fn records_prune_usage_errors_get_the_usage_code() {
    let w = World::new("prune-usage", "  max_age_days: 30\n");
    let cases: [&[&str]; 5] = [
        &[],
        &["purge"],
        &["prune", "--bogus"],
        &["prune", "--dry-run=yes"],
        &["prune", "extra"],
    ];
    for args in cases {
        let out = w.records(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("mur records --help"),
            "{}",
            text(&out.stderr)
        );
    }
    let out = w.records(&["--help"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("usage: mur records prune [--dry-run] [--json]"));

    // A policy that cannot be read is an error naming the key, and nothing is removed.
    let bad = World::new("prune-bad", "  max_days: 3\n");
    fake(&bad.root(), 1, 400, 10);
    let out = bad.records(&["prune"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("records.max_days is not a key of records"),
        "{}",
        text(&out.stderr)
    );
    assert!(bad.root().join(sid(1)).exists());
}

#[test]
fn records_prune_holds_no_descriptor_per_session_so_a_root_larger_than_its_limit_is_pruned_whole() {
    let w = World::new("prune-many", "  max_sessions: 10\n");
    for n in 1..=300 {
        fake(&w.root(), n, u64::from(n), 10);
    }
    // 64 descriptors for a root of 300 sessions: one kept open per session would run out.
    let out = Command::new("sh")
        .args(["-c", "ulimit -n 64 && exec \"$0\" records prune --json", MUR])
        .envs(w.env())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(done["removed"].as_array().unwrap().len(), 290, "{}", done["left"]);
    assert_eq!(done["errors"], serde_json::json!([]), "{done}");
    assert_eq!(w.left(), names(&(1..=10).collect::<Vec<u32>>()));
}
