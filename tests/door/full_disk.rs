//! A workdir whose disk fills mid-write, through the real `mur run` with its workdir on a
//! 1 MiB tmpfs: the failed task answers over A2A with the failure's reason, never the
//! truncated file; what the guest left in `out/result.txt` does not stay there as if it were
//! the answer; the guest is told `insufficient-space`, not a generic I/O error.

use crate::common;

use common::capsule::capsule;
use common::door::{lifecycle, response_text, secs, send_params, start, state_of, status_text, task_of};
use common::tmpfs::Tmpfs;
use common::TempDir;
use serde_json::Value;

/// Writes `fill N` bytes to out/result.txt through wasi:filesystem's stream.
const FILL: &str = "tests/fixtures/fill/capsule.wasm";

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: mounts a tmpfs")]
fn a_task_that_fills_the_workdir_answers_with_its_failure_not_the_truncated_file() {
    let t = TempDir::new("full-disk");
    let ws = match Tmpfs::mount(&t.path().join("ws"), "1m") {
        Ok(m) => m,
        Err(why) => panic!("mounting a tmpfs was refused: {why}"),
    };
    let dir = capsule(&t, FILL, &lifecycle(&["task_acceptance: single"]));
    let mut d = start(&t, &dir, &["--workdir", ws.path().to_str().unwrap()], &[]);

    let r = d.result(
        "message/send",
        send_params("message/send", "fill 2000000", Value::Null),
    );
    let task = task_of(&r);
    let shown = short(&task.to_string());
    assert_eq!(state_of(task), "failed", "{shown}");
    // The host names the full disk, which the guest's own trap never does.
    let why = "wasm trap: wasm `unreachable` instruction executed (a guest panic's own message, \
               if it printed one, is in logs/guest-stderr.log) — the workdir's filesystem is full \
               (0 bytes free)";
    assert!(status_text(task) == why, "{shown}");
    let answer = format!("error: {why}\n");
    assert!(response_text(task) == Some(answer.as_str()), "{shown}");
    assert_eq!(d.wait_exit(secs(10)).code(), Some(1));
    let traps = d.events("trap");
    assert_eq!(traps.len(), 1, "{traps:?}");
    assert_eq!(traps[0]["message"], why);

    // The truncated bytes are gone: out/result.txt holds the failure, nothing of the guest's.
    let result = std::fs::read_to_string(ws.path().join("out/result.txt")).unwrap();
    assert!(result == answer, "out/result.txt: {}", short(&result));
    // The guest asked filesystem-error-code what failed and was told the disk is full.
    let stderr = std::fs::read_to_string(d.records.join("logs/guest-stderr.log")).unwrap();
    assert!(
        stderr.contains("out/result.txt: write failed after ")
            && stderr.contains(" bytes: insufficient-space\n"),
        "{stderr}"
    );
}

/// The first 300 characters of `s` (a truncated answer is a megabyte of `x`).
fn short(s: &str) -> String {
    let cut: String = s.chars().take(300).collect();
    if cut.len() < s.len() {
        format!("{cut}… ({} bytes)", s.len())
    } else {
        cut
    }
}
