//! WASM capsules without a `lifecycle:` block run as scripts: with no task their `run` is
//! called once at launch and the session ends when it returns (the reference runtime's
//! fixtures: hello, the deadline and memory traps, the environment echo, the filesystem
//! escape, the network gate). A capsule that declares `lifecycle:` still waits for an A2A
//! task.

use crate::common;

use common::capsule::{capsule, event, hello, manifest_arg, mur, repo, session_of, text, trace};
use common::TempDir;
use std::process::Output;

/// `mur run` of `dir` with no task, with an idle wait of one second: a session that waited
/// for an A2A task would end `idle` without running anything.
fn run_without_task(t: &TempDir, dir: &std::path::Path, env: &[(&str, &str)]) -> Output {
    let mut all = vec![("MURMUR_A2A_TIMEOUT_SECS", "1")];
    all.extend_from_slice(env);
    mur(t, &["--manifest", &manifest_arg(dir)], &all)
}

fn result_of(dir: &std::path::Path, out: &Output) -> String {
    let p = dir.join("workdir").join(session_of(out)).join("out/result.txt");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn hello_without_a_task_runs_at_once_and_reports_ok() {
    let t = TempDir::new("script-hello");
    let dir = hello(&t);
    let out = run_without_task(&t, &dir, &[]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).ends_with("status:  ok\n"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(result_of(&dir, &out), "hello from hello: (no task)\n");
    let sid = session_of(&out);
    assert!(
        !dir.join("workdir").join(&sid).join("task.md").exists(),
        "no task.md was made up"
    );
    let events = trace(&t, &sid);
    let start = event(&events, "task_start");
    assert_eq!(start["source"], "file");
    assert_eq!(start["message_parts_bytes"], 0);
    assert_eq!(event(&events, "session_end")["exit_status"], "ok");
    assert_eq!(event(&events, "session_end")["tasks"], 1);
}

#[test]
fn the_deadline_trap_needs_no_task() {
    let t = TempDir::new("script-spin");
    let dir = capsule(
        &t,
        "tests/fixtures/spin/capsule.wasm",
        "capabilities:\n  limits:\n    deadline_seconds: 1\n",
    );
    let out = run_without_task(&t, &dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error[E-RUN-001]: guest trapped (deadline): deadline of 1 s exceeded"),
        "{stderr}"
    );
    assert!(text(&out.stdout).ends_with("status:  trapped\n"));
    assert_eq!(
        event(&trace(&t, &session_of(&out)), "trap")["trap_kind"],
        "deadline"
    );
}

#[test]
fn the_memory_trap_needs_no_task() {
    let t = TempDir::new("script-grow");
    let dir = capsule(
        &t,
        "tests/fixtures/grow/capsule.wasm",
        "capabilities:\n  limits:\n    memory_bytes: 67108864\n    deadline_seconds: 30\n",
    );
    let out = run_without_task(&t, &dir, &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error[E-RUN-001]: guest trapped (resource_limit): memory limit"),
        "{stderr}"
    );
    assert_eq!(
        event(&trace(&t, &session_of(&out)), "trap")["trap_kind"],
        "resource_limit"
    );
}

#[test]
fn the_environment_echo_needs_no_task() {
    let t = TempDir::new("script-env");
    let dir = capsule(
        &t,
        "tests/fixtures/env/capsule.wasm",
        "capabilities:\n  env:\n    allow: [ALLOWED_ONE]\n",
    );
    let out = run_without_task(&t, &dir, &[("ALLOWED_ONE", "yes"), ("OTHER_SETTING", "no")]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let sid = session_of(&out);
    let port = text(&out.stdout).lines().next().unwrap()["murmur: url localhost:".len()..].to_string();
    assert_eq!(
        result_of(&dir, &out),
        format!(
            "ALLOWED_ONE=yes\nMURMUR_CAPSULE_NAME=probe\nMURMUR_CAPSULE_URL=http://localhost:{port}\nMURMUR_CAPSULE_VERSION=0.2.0\nMURMUR_SESSION_ID={sid}\n"
        )
    );
}

#[test]
fn the_filesystem_escape_needs_no_task() {
    let t = TempDir::new("script-escape");
    let dir = capsule(
        &t,
        "tests/fixtures/escape/capsule.wasm",
        "capabilities:\n  env:\n    allow: [ESCAPE_TARGET]\n",
    );
    let outside = t.path().join("outside.txt");
    let out = run_without_task(&t, &dir, &[("ESCAPE_TARGET", outside.to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let report = result_of(&dir, &out);
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines[0].starts_with("../escaped.txt: refused: "), "{report}");
    assert!(
        lines[2].starts_with(&format!("{}: refused: ", outside.display())),
        "{report}"
    );
    assert!(!outside.exists());
}

#[test]
fn the_network_gate_needs_no_task() {
    let t = TempDir::new("script-http");
    let dir = capsule(
        &t,
        "tests/fixtures/http/capsule.wasm",
        "capabilities:\n  env:\n    allow: [HTTP_TARGETS]\n",
    );
    let out = run_without_task(&t, &dir, &[("HTTP_TARGETS", "https://example.com/")]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert_eq!(
        result_of(&dir, &out),
        "https://example.com/ -> error: ErrorCode::HttpRequestDenied\n"
    );
}

#[test]
fn a_declared_lifecycle_still_waits_for_an_a2a_task() {
    let t = TempDir::new("script-lifecycle");
    let dir = t.path().join("hello");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo("examples/hello/capsule.wasm"), dir.join("capsule.wasm")).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        "name: hello\nversion: 0.1.0\nlifecycle:\n  task_acceptance: single\n",
    )
    .unwrap();
    let out = run_without_task(&t, &dir, &[]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(
        text(&out.stdout).ends_with("status:  idle\n"),
        "{}",
        text(&out.stdout)
    );
    let sid = session_of(&out);
    assert!(!dir.join("workdir").join(&sid).join("out/result.txt").exists());
    assert_eq!(event(&trace(&t, &sid), "session_end")["tasks"], 0);
}
