//! A records directory whose disk fills mid-session, through the real `mur run` with
//! `MURMUR_RECORDS_DIR` on a 64 KiB tmpfs: the failed write is warned once on stderr
//! (`W-RUN-002`), the session ends `incomplete` with an error exit, and `mur trace` says the
//! records are incomplete and why.

use crate::common;

use common::capsule::{hello, manifest_arg, mur, records, session_of, text, MUR};
use common::tmpfs::Tmpfs;
use common::TempDir;
use std::process::Command;

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: mounts a tmpfs")]
fn a_records_disk_that_fills_is_warned_once_and_the_session_ends_incomplete() {
    let t = TempDir::new("records-full");
    let _disk = match Tmpfs::mount(&t.path().join("records"), "64k") {
        Ok(m) => m,
        Err(why) => panic!("mounting a tmpfs was refused: {why}"),
    };
    // The hello capsule prints its answer (the task) on stdout: 200 KB for a 64 KiB disk.
    let dir = hello(&t);
    let task = t.path().join("task.txt");
    std::fs::write(&task, "x".repeat(200_000)).unwrap();
    let out = mur(
        &t,
        &[
            "--manifest",
            &manifest_arg(&dir),
            "--task",
            task.to_str().unwrap(),
        ],
        &[],
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let sid = session_of(&out);
    let log = records(&t, &sid).join("logs/guest-stdout.log");
    let why = format!(
        "cannot write {}: No space left on device (os error 28)",
        log.display()
    );

    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.ends_with("status:  incomplete\n"), "{stdout}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning[W-RUN"))
        .collect();
    assert_eq!(
        warnings,
        [format!(
            "warning[W-RUN-002]: {why}; the session's records are incomplete"
        )],
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "error[E-IO-003]: the session's records are incomplete: {why}\n"
        )),
        "{stderr}"
    );
    // The task itself went fine: its answer is in the workdir, whole.
    let workdir = dir.join("workdir").join(&sid);
    let answer = std::fs::read_to_string(workdir.join("out/result.txt")).unwrap();
    assert_eq!(answer.len(), "hello from hello: ".len() + 200_000 + 1);

    let shown = Command::new(MUR)
        .args(["trace", "--session", &sid])
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .output()
        .unwrap();
    let shown = text(&shown.stdout);
    assert!(
        shown.contains(&format!("\n  records     incomplete: {why}\n")),
        "{shown}"
    );
}
