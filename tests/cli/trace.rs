//! `mur trace` on traces of real `mur run` sessions (WASM: ok, trapped, a tool call), on a
//! hand-written agent trace carrying every documented event type (agent sessions, hooks,
//! delegation and the resource planes do not run yet), and on truncated and garbled traces:
//! malformed lines are reported by number and skipped, and nothing a trace holds reaches
//! the terminal as a control or bidi character.

use crate::common;

use common::capsule::{capsule, manifest_arg, mur, records, session_of, text, MUR};
use common::TempDir;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn trace_cmd(args: &[&str], env: &[(&str, &Path)]) -> Output {
    Command::new(MUR)
        .arg("trace")
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_os_str())))
        .output()
        .unwrap()
}

fn summary(path: &Path) -> Value {
    let out = trace_cmd(&["--json", path.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    serde_json::from_str(&stdout).unwrap()
}

/// The mark column of a timeline line: `!` refusal or failure, `*` notable, ` ` ordinary.
fn mark(line: &str) -> char {
    line.chars().nth(11).unwrap()
}

fn line_with<'a>(out: &'a str, needle: &str) -> &'a str {
    out.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{out}"))
}

fn real_session(t: &TempDir, wasm: &str) -> (String, std::path::PathBuf) {
    let dir = capsule(t, wasm, "");
    let out = mur(t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    let sid = session_of(&out);
    let path = records(t, &sid).join("trace.jsonl");
    (sid, path)
}

#[test]
fn a_real_wasm_session_by_path_and_by_session_id() {
    let t = TempDir::new("trace-ok");
    let (sid, path) = real_session(&t, "examples/hello/capsule.wasm");
    let records_root = t.path().join("records");
    let out = trace_cmd(&["--session", &sid], &[("MURMUR_RECORDS_DIR", &records_root)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(line_with(&stdout, "session ses_").contains(&format!("{sid} probe 0.2.0")));
    assert!(
        stdout.contains("containment declared advisory achieved advisory"),
        "{stdout}"
    );
    assert!(
        stdout.contains("grant filesystem: {access=read-write"),
        "{stdout}"
    );
    assert_eq!(mark(line_with(&stdout, "session ended ok after")), ' ');
    assert!(stdout.contains("\nsummary\n"), "{stdout}");
    assert!(stdout.contains("  outcome     ok\n"), "{stdout}");
    assert_eq!(text(&out.stderr), "");
    // A records directory names its trace too.
    let by_dir = trace_cmd(&[records(&t, &sid).to_str().unwrap()], &[]);
    assert_eq!(text(&by_dir.stdout), stdout);
    let s = summary(&path);
    assert_eq!(
        (s["session_id"].as_str(), s["exit_status"].as_str()),
        (Some(sid.as_str()), Some("ok"))
    );
    assert_eq!(
        (s["events"].clone(), s["turns"].clone(), s["refusals"].clone()),
        // session_start, task_start, task_end, session_end
        (json!(4), json!(0), json!(0))
    );
    let events = common::capsule::trace(&t, &sid);
    let end = common::capsule::event(&events, "session_end");
    assert_eq!(s["wall_ms"], end["duration_ms"]);
}

#[test]
fn a_trapped_session_and_a_tool_calling_session() {
    let t = TempDir::new("trace-trap");
    let (_, path) = real_session(&t, "tests/fixtures/panic/capsule.wasm");
    let out = trace_cmd(&[path.to_str().unwrap()], &[]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    assert_eq!(mark(line_with(&stdout, "trap guest_panic: ")), '!');
    assert_eq!(mark(line_with(&stdout, "session ended failed")), '!');
    let s = summary(&path);
    assert_eq!(
        (s["exit_status"].as_str(), s["refusals"].as_u64()),
        (Some("failed"), Some(1))
    );
    let t = TempDir::new("trace-tool");
    let (_, path) = real_session(&t, "tests/fixtures/tool/capsule.wasm");
    assert_eq!(summary(&path)["exit_status"], "ok");
}

#[test]
fn a_truncated_real_trace_reports_its_last_line_and_still_renders() {
    let t = TempDir::new("trace-cut");
    let (_, path) = real_session(&t, "tests/fixtures/panic/capsule.wasm");
    let whole = std::fs::read(&path).unwrap();
    let cut = &whole[..whole.len() - 20];
    let lines = cut.iter().filter(|&&b| b == b'\n').count() + 1;
    let short = t.path().join("short.jsonl");
    std::fs::write(&short, cut).unwrap();
    let out = trace_cmd(&[short.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!("mur trace: line {lines}: truncated (no newline): ")),
        "{stderr}"
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("trap guest_panic"), "{stdout}");
    assert!(
        stdout.contains(&format!("malformed   1 lines skipped (lines {lines})")),
        "{stdout}"
    );
    let s = summary(&short);
    assert_eq!(s["malformed"][0]["line"], lines);
    assert_eq!(s["exit_status"], Value::Null);
}

/// One line of a hand-written trace, in the documented field names.
fn ev(kind: &str, ts: u64, fields: Value) -> String {
    let mut line =
        json!({"event_type": kind, "session_id": "ses_0123456789abcdef0123456789abcdef", "timestamp": ts});
    line.as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    line.to_string() + "\n"
}

fn agent_trace() -> String {
    [
        ev("session_start", 1000, json!({"capsule_name": "agent", "capsule_version": "1.0.0", "model": "m1", "max_turns": 10,
            "containment_declared": "scoped", "containment_achieved": "scoped", "workdir_exec": false,
            "effective_grants": {"shell_allow": ["ls", "cat"], "network_allow": ["api.example.com"], "spawn_allow": []}})),
        ev("task_start", 1010, json!({"task_id": "tsk_1", "context_id": "ctx_1", "source": "a2a"})),
        ev("inference", 1100, json!({"turn": 0, "input_tokens": 100, "output_tokens": 20, "decision": "tool_call", "tool_name": "read_file"})),
        ev("tool_call", 1140, json!({"turn": 0, "tool_name": "read_file", "input": {"path": "a.txt"}, "duration_ms": 30, "status": "ok"})),
        ev("shell", 1160, json!({"binary": "ls", "command": "ls -la", "exit_code": 0, "duration_ms": 12})),
        ev("shell", 1170, json!({"binary": "cat", "exit_code": 1, "duration_ms": 5})),
        ev("inference", 1200, json!({"turn": 1, "input_tokens": 150, "output_tokens": 30, "decision": "tool_call", "tool_name": "write_file"})),
        ev("tool_call", 1210, json!({"turn": 1, "tool_name": "write_file", "input": {}, "duration_ms": 7, "status": "error", "error": "denied"})),
        ev("compaction", 1300, json!({"turn": 2, "tokens_before": 9000, "tokens_after": 3000})),
        ev("inference", 1400, json!({"turn": 2, "input_tokens": 50, "output_tokens": 10, "decision": "end_turn", "tool_name": null})),
        ev("task_reopened", 1450, json!({"task_id": "tsk_1", "hook_name": "verify", "reason": "tests fail", "reopen_number": 1})),
        ev("inference", 1500, json!({"turn": 3, "input_tokens": 100, "output_tokens": 40, "decision": "text", "tool_name": null, "origin": "hook:verify"})),
        ev("resource_list", 1600, json!({"root": "out", "entry_count": 2, "total_bytes": 100, "generation": 1, "containment_achieved": "scoped", "outcome": "ok", "reason": null})),
        ev("resource_read", 1610, json!({"path": "../etc/passwd", "outcome": "path_escape", "bytes": null, "sha256": null, "reason": "escapes the root"})),
        ev("peer_handle_mint", 1620, json!({"handle_id": "abcd1234abcd1234", "path": "out/r.txt", "audience": "peer@localhost:9", "expires_at_ms": 5000, "outcome": "ok", "reason": null})),
        ev("peer_handle_redeem", 1630, json!({"handle_id": "abcd1234abcd1234", "path": "out/r.txt", "audience_asserted": "x@localhost:1", "bytes": null, "outcome": "audience_mismatch", "reason": "wrong audience"})),
        ev("peer_file_fetch", 1640, json!({"peer": "worker", "handle_id": "abcd1234abcd1234", "stored_path": "peer-in/r.txt", "bytes": 10, "outcome": "ok", "reason": null})),
        ev("delegation_start", 1650, json!({"delegation_id": "dlg_1", "capsule": "worker", "version": "1.0.0", "child_session_id": "ses_c"})),
        ev("delegation", 1900, json!({"capsule": "worker", "version": "1.0.0", "delegation_id": "dlg_1", "child_session_id": "ses_c", "duration_ms": 200, "outcome": "ok", "reason": null})),
        ev("delegation", 1910, json!({"capsule": "evil", "version": "1.0.0", "delegation_id": null, "child_session_id": null, "duration_ms": 0, "outcome": "refused", "reason": "not in spawn.allow"})),
        ev("hook_dispatch_error", 1920, json!({"hook_name": "verify", "event": "task_end", "arm": "sync"})),
        ev("network", 1930, json!({"host": "evil.example", "port": 443, "outcome": "denied"})),
        ev("task_end", 2000, json!({"task_id": "tsk_1", "exit_status": "ok", "duration_ms": 990, "turns": 4, "input_tokens": 400, "output_tokens": 100, "tool_calls": 2, "shell_calls": 2, "reopen_count": 1})),
        ev("session_end", 2100, json!({"total_turns": 4, "total_input_tokens": 400, "total_output_tokens": 100, "total_tool_calls": 2, "total_shell_calls": 2, "duration_ms": 1100, "exit_status": "ok"})),
    ]
    .concat()
}

#[test]
fn every_documented_event_type_renders_from_a_hand_written_trace() {
    let t = TempDir::new("trace-agent");
    let path = t.path().join("trace.jsonl");
    std::fs::write(&path, agent_trace()).unwrap();
    let out = trace_cmd(&[path.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    let expect = [
        (' ', "session ses_0123456789abcdef0123456789abcdef agent 1.0.0"),
        (' ', "model m1, max_turns 10, containment declared scoped achieved scoped"),
        (' ', "grant shell_allow: [ls,cat]"),
        (' ', "task tsk_1 from a2a (context ctx_1)"),
        (' ', "turn 0: tool_call -> read_file, tokens 100 in / 20 out"),
        (' ', "tool read_file ok in 30 ms input {path=a.txt}"),
        (' ', "shell ls exit 0 in 12 ms: ls -la"),
        ('!', "shell cat exit 1 in 5 ms"),
        ('!', "tool write_file error in 7 ms input {}: denied"),
        ('*', "compaction at turn 2: 9000 -> 3000 tokens"),
        (' ', "turn 2: end_turn, tokens 50 in / 10 out"),
        ('*', "task tsk_1 reopened (#1) by hook verify: tests fail"),
        (' ', "turn 3: text, tokens 100 in / 40 out [hook:verify]"),
        ('*', "resources listed under 'out': 2 entries, 100 bytes"),
        ('!', "resource read ../etc/passwd: - bytes: path_escape: escapes the root"),
        ('*', "peer handle minted <handle:abcd1234abcd1234> for out/r.txt to peer@localhost:9, expires 5000"),
        ('!', "peer handle redeemed <handle:abcd1234abcd1234> for out/r.txt by x@localhost:1: - bytes: audience_mismatch: wrong audience"),
        ('*', "peer file fetched from worker <handle:abcd1234abcd1234> into peer-in/r.txt: 10 bytes"),
        ('*', "delegation dlg_1 started: worker@1.0.0 as ses_c"),
        ('*', "delegation to worker@1.0.0 (dlg_1) child ses_c in 200 ms"),
        ('!', "delegation to evil@1.0.0 (-) child - in 0 ms: refused: not in spawn.allow"),
        ('!', "hook verify failed on task_end (sync)"),
        ('!', "network host=evil.example outcome=denied port=443"),
        (' ', "task tsk_1 ended ok: 4 turns, 2 tool calls, 2 shell, tokens 400 in / 100 out, reopened 1, 990 ms"),
        (' ', "session ended ok after 1100 ms"),
    ];
    for (m, needle) in expect {
        assert_eq!(mark(line_with(&o, needle)), m, "{needle}");
    }
    assert!(
        line_with(&o, "turn 0: tool_call").starts_with("   +0.100s       turn"),
        "{o}"
    );
    assert!(
        line_with(&o, "tool read_file").starts_with("   +0.140s         tool"),
        "{o}"
    );
    assert!(o.contains("  tokens      400 in / 100 out\n"), "{o}");
    assert!(o.contains("time went   tools 37 ms (read_file 30 ms x1, write_file 7 ms x1), shell 17 ms, delegations 200 ms, the rest (model, runtime, guest) 846 ms"), "{o}");
    let s = summary(&path);
    let want = json!({"turns": 4, "tool_calls": 2, "shell_calls": 2, "input_tokens": 400, "output_tokens": 100,
        "wall_ms": 1100, "compactions": 1, "reopens": 1, "refusals": 7, "tasks": 1, "events": 24,
        "exit_status": "ok", "containment_achieved": "scoped", "malformed_lines": 0});
    for (k, v) in want.as_object().unwrap() {
        assert_eq!(&s[k], v, "{k}: {s}");
    }
    assert_eq!(
        s["time_ms"],
        json!({"tools": 37, "shell": 17, "delegations": 200, "rest": 846,
        "per_tool": {"read_file": {"calls": 1, "ms": 30}, "write_file": {"calls": 1, "ms": 7}}})
    );
}

#[test]
fn a_garbled_trace_is_reported_line_by_line_and_nothing_reaches_the_terminal() {
    let t = TempDir::new("trace-garbled");
    let path = t.path().join("trace.jsonl");
    let mut bytes = Vec::new();
    bytes.extend(ev("session_start", 5, json!({"capsule_name": "\u{1b}[31mRED\u{1b}]0;owned\u{7}", "capsule_version": "1\u{202e}gnp\u{9b}2J"})).bytes());
    bytes.extend(b"\xff\xfe not json at all\n");
    bytes.extend(b"[1,2]\n");
    bytes.extend(b"{\"no\":\"type\"}\n");
    bytes.extend(vec![b'a'; 300 * 1024]);
    bytes.push(b'\n');
    bytes.extend("[".repeat(100_000).bytes());
    bytes.push(b'\n');
    bytes.extend(
        ev(
            "inference",
            6,
            json!({"input_tokens": u64::MAX, "output_tokens": -3, "turn": 1.5}),
        )
        .bytes(),
    );
    bytes.extend(ev("inference", 7, json!({"input_tokens": u64::MAX})).bytes());
    bytes.extend(
        ev(
            "tool_call",
            8,
            json!({"tool_name": {"nested": [1, {"x": "\u{1b}c"}]}, "input": "\u{2066}x"}),
        )
        .bytes(),
    );
    bytes.extend(b"\n   \n");
    bytes.extend(
        ev(
            "session_end",
            9,
            json!({"exit_status": "ok", "duration_ms": "soon"}),
        )
        .bytes(),
    );
    std::fs::write(&path, &bytes).unwrap();
    let out = trace_cmd(&[path.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    for s in [&stdout, &stderr] {
        assert!(
            !s.chars().any(|c| (c.is_control() && c != '\n')
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)),
            "{s:?}"
        );
    }
    assert!(
        stdout.contains("session ses_0123456789abcdef0123456789abcdef [31mRED]0;owned 1gnp2J"),
        "{stdout}"
    );
    for (n, why) in [
        (2, "not JSON"),
        (3, "not a JSON object"),
        (4, "no event_type"),
        (5, "longer than 262144 bytes"),
        (6, "not JSON: recursion limit"),
    ] {
        assert!(
            stderr.contains(&format!("mur trace: line {n}: {why}")),
            "line {n}: {stderr}"
        );
    }
    assert!(
        stdout.contains("malformed   5 lines skipped (lines 2, 3, 4, 5, 6)"),
        "{stdout}"
    );
    let s = summary(&path);
    assert_eq!(s["input_tokens"], u64::MAX);
    assert_eq!(s["turns"], 2);
    assert_eq!(s["events"], 5);
}

#[test]
fn nothing_usable_is_an_error_and_a_bad_session_id_is_refused() {
    let t = TempDir::new("trace-none");
    let path = t.path().join("trace.jsonl");
    std::fs::write(&path, b"garbage\n{}\n").unwrap();
    let out = trace_cmd(&[path.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("error[E-IO-003]: no trace events in"),
        "{}",
        text(&out.stderr)
    );
    let out = trace_cmd(&["--session", "../../etc"], &[("MURMUR_RECORDS_DIR", t.path())]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("is not a session id"));
    let out = trace_cmd(&["--session", "ses_missing"], &[("MURMUR_RECORDS_DIR", t.path())]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error[E-IO-003]: cannot read "),
        "{}",
        text(&out.stderr)
    );
    let out = trace_cmd(&[], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).ends_with("run 'mur trace --help' for usage\n"));
}

#[test]
fn follow_tails_a_growing_trace_until_the_session_ends() {
    let t = TempDir::new("trace-follow");
    let path = t.path().join("trace.jsonl");
    let lines: Vec<String> = agent_trace().lines().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, &lines[0]).unwrap();
    let mut child = Command::new(MUR)
        .args(["trace", "--follow", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert!(child.try_wait().unwrap().is_none(), "follow must wait for more");
    for l in &lines[1..] {
        // Half a line first: the reader must hold it until its newline arrives.
        let (a, b) = l.split_at(l.len() / 2);
        file.write_all(a.as_bytes()).unwrap();
        file.flush().unwrap();
        std::thread::sleep(Duration::from_millis(15));
        file.write_all(b.as_bytes()).unwrap();
    }
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "follow did not stop after session_end"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    assert_eq!(text(&out.stderr), "");
    let o = text(&out.stdout);
    assert!(o.contains("session ended ok after 1100 ms"), "{o}");
    assert!(
        o.contains("  work        1 tasks, 4 turns, 2 tool calls, 2 shell calls\n"),
        "{o}"
    );
}

/// The events the agent runtime writes beside the documented ones: a retried model call
/// and a failed hook, each shown as a failure line with its reason.
#[test]
fn retries_and_hook_failures_show_as_failures() {
    let t = TempDir::new("trace-agent-extra");
    let path = t.path().join("trace.jsonl");
    let lines = [
        json!({"event_type": "session_start", "session_id": "ses_x", "timestamp": 1, "capsule_name": "a", "capsule_version": "1"}),
        json!({"event_type": "inference_retry", "session_id": "ses_x", "timestamp": 2, "turn": 1, "attempt": 1, "delay_ms": 500, "reason": "provider returned 429: slow down"}),
        json!({"event_type": "hook_error", "session_id": "ses_x", "timestamp": 3, "hook_name": "h", "binding": "on-session-start", "error": "guest trapped (deadline): x"}),
        json!({"event_type": "session_end", "session_id": "ses_x", "timestamp": 4, "exit_status": "ok"}),
    ];
    let body: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, body).unwrap();
    let out = trace_cmd(&[path.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let retry = line_with(&stdout, "retry 1 in 500 ms");
    assert_eq!(mark(retry), '!', "{retry}");
    assert!(
        retry.ends_with("turn 1: retry 1 in 500 ms: provider returned 429: slow down"),
        "{retry}"
    );
    let hook = line_with(&stdout, "hook h failed");
    assert_eq!(mark(hook), '!', "{hook}");
    assert!(
        hook.ends_with("hook h failed on on-session-start: guest trapped (deadline): x"),
        "{hook}"
    );
}
