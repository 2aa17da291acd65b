//! `mur run` through the real binary: the hello capsule, each fixture's containment or trap,
//! the environment and HTTP grants, output shapes, the door and lifecycle, exit codes.

use crate::common;

use common::capsule::{
    capsule, event, hello, manifest_arg, mur, records, repo, serve, session_of, text, trace,
};
use common::TempDir;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};

#[test]
fn hello_capsule_writes_its_result_and_reports_ok() {
    let t = TempDir::new("run-hello");
    let dir = hello(&t);
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "say hi"], &[]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("murmur: url localhost:"), "{stdout}");
    assert!(lines[0]["murmur: url localhost:".len()..].parse::<u16>().is_ok());
    assert_eq!(lines.last(), Some(&"status:  ok"));
    let sid = session_of(&out);
    assert!(sid.starts_with("ses_") && sid.len() == 36);
    let workdir = dir.join("workdir").join(&sid);
    assert_eq!(
        std::fs::read_to_string(workdir.join("task.md")).unwrap(),
        "say hi"
    );
    assert_eq!(
        std::fs::read_to_string(workdir.join("out/result.txt")).unwrap(),
        "hello from hello: say hi\n"
    );
    let events = trace(&t, &sid);
    let start = event(&events, "session_start");
    assert_eq!(start["capsule_name"], "hello");
    assert_eq!(start["containment_declared"], "advisory");
    assert_eq!(start["containment_achieved"], "advisory");
    assert_eq!(start["session_id"], sid.as_str());
    assert_eq!(start["effective_grants"]["network"]["sockets"], false);
    let end = event(&events, "session_end");
    assert_eq!(end["exit_status"], "ok");
    assert!(end["duration_ms"].is_u64());
    assert_eq!(events.last().unwrap()["event_type"], "session_end");
}

#[test]
fn a_write_outside_the_preopen_is_refused() {
    let t = TempDir::new("run-escape");
    let dir = capsule(
        &t,
        "tests/fixtures/escape/capsule.wasm",
        "capabilities:\n  env:\n    allow: [ESCAPE_TARGET]\n",
    );
    let work = t.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let outside = t.path().join("outside.txt");
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
        &[("ESCAPE_TARGET", outside.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let report = std::fs::read_to_string(work.join("out/result.txt")).unwrap();
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 3, "{report}");
    assert!(lines[0].starts_with("../escaped.txt: refused: "), "{report}");
    assert!(
        lines[2].starts_with(&format!("{}: refused: ", outside.display())),
        "{report}"
    );
    assert!(!outside.exists(), "the absolute path outside was written");
    assert!(!t.path().join("escaped.txt").exists(), "../ escaped the workdir");
    // The guest's "/" is its preopen: "/escaped.txt" lands inside the workdir, not at the
    // host's root.
    assert_eq!(lines[1], "/escaped.txt: written");
    assert!(!Path::new("/escaped.txt").exists(), "the host root was written");
    assert_eq!(std::fs::read(work.join("escaped.txt")).unwrap(), b"escaped");
}

#[test]
fn a_spinning_guest_is_trapped_by_the_deadline() {
    let t = TempDir::new("run-spin");
    let dir = capsule(
        &t,
        "tests/fixtures/spin/capsule.wasm",
        "capabilities:\n  limits:\n    deadline_seconds: 1\n",
    );
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error[E-RUN-001]: guest trapped (deadline): deadline of 1 s exceeded"),
        "{stderr}"
    );
    assert!(text(&out.stdout).ends_with("status:  trapped\n"));
    let events = trace(&t, &session_of(&out));
    assert_eq!(event(&events, "trap")["trap_kind"], "deadline");
    assert_eq!(event(&events, "session_end")["exit_status"], "failed");
}

#[test]
fn a_growing_guest_is_trapped_by_the_limiter() {
    let t = TempDir::new("run-grow");
    let dir = capsule(
        &t,
        "tests/fixtures/grow/capsule.wasm",
        "capabilities:\n  limits:\n    memory_bytes: 67108864\n    deadline_seconds: 30\n",
    );
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("error[E-RUN-001]: guest trapped (resource_limit): memory limit"),
        "{stderr}"
    );
    assert!(stderr.contains("memory_bytes is 67108864"), "{stderr}");
    let events = trace(&t, &session_of(&out));
    assert_eq!(event(&events, "trap")["trap_kind"], "resource_limit");
}

#[test]
fn a_guest_panic_is_its_own_outcome() {
    let t = TempDir::new("run-panic");
    let dir = capsule(&t, "tests/fixtures/panic/capsule.wasm", "");
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            "error[E-RUN-001]: guest trapped (guest_panic): wasm trap: wasm `unreachable` instruction executed"
        ),
        "{stderr}"
    );
    assert!(
        !stderr.contains("panicked at"),
        "the runtime itself must not panic: {stderr}"
    );
    let sid = session_of(&out);
    let events = trace(&t, &sid);
    assert_eq!(event(&events, "trap")["trap_kind"], "guest_panic");
    let result = std::fs::read_to_string(dir.join("workdir").join(&sid).join("out/result.txt")).unwrap();
    assert!(result.starts_with("error: "), "{result}");
}

#[test]
fn the_guest_sees_exactly_the_allowed_environment() {
    let t = TempDir::new("run-env");
    let dir = capsule(
        &t,
        "tests/fixtures/env/capsule.wasm",
        "capabilities:\n  env:\n    allow: [ALLOWED_ONE, ALLOWED_ABSENT]\n",
    );
    let out = mur(
        &t,
        &["--manifest", &manifest_arg(&dir), "--task", "go"],
        &[
            ("ALLOWED_ONE", "yes"),
            ("SALT_SECRET", "leak"),
            ("ANTHROPIC_API_KEY", "sk-leak"),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let sid = session_of(&out);
    let port = text(&out.stdout).lines().next().unwrap()["murmur: url localhost:".len()..].to_string();
    let seen = std::fs::read_to_string(dir.join("workdir").join(&sid).join("out/result.txt")).unwrap();
    let expected = format!(
        "ALLOWED_ONE=yes\nMURMUR_CAPSULE_NAME=probe\nMURMUR_CAPSULE_URL=http://localhost:{port}\nMURMUR_CAPSULE_VERSION=0.2.0\nMURMUR_SESSION_ID={sid}\n"
    );
    assert_eq!(seen, expected);
}

/// A loopback server answering every connection with 200 "reached"; counts connections.
fn test_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            h.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nreached");
        }
    });
    (port, hits)
}

#[test]
fn outbound_http_passes_the_gate_only_for_allowed_destinations() {
    let t = TempDir::new("run-http");
    let (port, hits) = test_server();
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = capsule(
        &t,
        "tests/fixtures/http/capsule.wasm",
        &format!("capabilities:\n  network:\n    allow: [\"http://127.0.0.1:{port}\"]\n  env:\n    allow: [HTTP_TARGETS]\n"),
    );
    let targets = format!(
        "http://127.0.0.1:{port}/x http://127.0.0.1:{closed}/ https://example.com/ http://user@127.0.0.1:{port}/y"
    );
    let out = mur(
        &t,
        &["--manifest", &manifest_arg(&dir), "--task", "go"],
        &[("HTTP_TARGETS", &targets)],
    );
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let report =
        std::fs::read_to_string(dir.join("workdir").join(session_of(&out)).join("out/result.txt")).unwrap();
    // The userinfo request is refused by the gate, and never reaches the server either.
    assert_eq!(
        report,
        format!(
            "http://127.0.0.1:{port}/x -> status 200\nhttp://127.0.0.1:{closed}/ -> error: ErrorCode::HttpRequestDenied\nhttps://example.com/ -> error: ErrorCode::HttpRequestDenied\nhttp://user@127.0.0.1:{port}/y -> error: ErrorCode::HttpRequestDenied\n"
        )
    );
    assert_eq!(hits.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[test]
fn an_unknown_tool_is_an_error_value_not_a_trap() {
    let t = TempDir::new("run-tool");
    let dir = capsule(&t, "tests/fixtures/tool/capsule.wasm", "");
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let report =
        std::fs::read_to_string(dir.join("workdir").join(session_of(&out)).join("out/result.txt")).unwrap();
    assert_eq!(
        report,
        "error: unknown tool 'no-such-tool': this capsule declares no tools\n"
    );
}

#[test]
fn json_mode_prints_exactly_one_line_in_the_documented_shape() {
    let t = TempDir::new("run-json");
    let dir = capsule(&t, "examples/hello/capsule.wasm", "");
    let work = t.path().join("w");
    std::fs::create_dir_all(&work).unwrap();
    let out = mur(
        &t,
        &[
            "--manifest",
            &manifest_arg(&dir),
            "--task",
            "go",
            "--json",
            "--workdir",
            work.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let line = stdout.trim_end();
    let keys = ["url", "pid", "session_id", "name", "version", "workdir"];
    let mut at = 0;
    for k in keys {
        let pos = line
            .find(&format!("\"{k}\":"))
            .unwrap_or_else(|| panic!("{k} missing in {line}"));
        assert!(pos >= at, "{k} out of order in {line}");
        at = pos;
    }
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 6);
    assert!(v["url"].as_str().unwrap().starts_with("localhost:"));
    assert!(v["pid"].as_u64().unwrap() > 0);
    assert_eq!(
        (v["name"].as_str(), v["version"].as_str()),
        (Some("probe"), Some("0.2.0"))
    );
    assert_eq!(
        v["workdir"].as_str().unwrap(),
        std::fs::canonicalize(&work).unwrap().to_str().unwrap()
    );
    let sid = v["session_id"].as_str().unwrap();
    assert!(records(&t, sid).join("trace.jsonl").is_file());
    assert!(
        !work.join(".murmur").exists(),
        "records must not be kept in the workdir"
    );
}

#[test]
fn a_queue_sleep_capsule_serves_its_card_until_sigterm() {
    let t = TempDir::new("run-sleep");
    let dir = capsule(
        &t,
        "examples/hello/capsule.wasm",
        "lifecycle:\n  task_acceptance: queue\n  after_task: sleep\n",
    );
    let (mut running, line) = serve(&t, &dir);
    let hostport = line["url"].as_str().unwrap().replace("localhost", "127.0.0.1");
    let get = |path: &str| {
        common::exchange(
            hostport.parse().unwrap(),
            format!("GET {path} HTTP/1.1\r\nhost: {hostport}\r\n\r\n").as_bytes(),
        )
    };
    let card = get("/.well-known/agent-card.json");
    assert_eq!(common::status_of(&card), 200, "{card}");
    let body: serde_json::Value = serde_json::from_str(common::body_of(&card)).unwrap();
    assert_eq!(body["name"], "probe");
    assert_eq!(body["version"], "0.2.0");
    // The card's `url` is the `--json` line's `localhost:<port>` under http://, so a 0.3
    // client can call it; 1.0 clients use supportedInterfaces.
    assert_eq!(body["url"], format!("http://{}/", line["url"].as_str().unwrap()));
    let port = hostport.rsplit(':').next().unwrap();
    for (i, version) in ["1.0", "0.3"].iter().enumerate() {
        assert_eq!(body["supportedInterfaces"][i]["protocolVersion"], *version);
        assert_eq!(
            body["supportedInterfaces"][i]["url"],
            format!("http://127.0.0.1:{port}/")
        );
    }
    assert!(body["capabilities"].is_object());
    let missing = get("/nope");
    assert_eq!(common::status_of(&missing), 404);
    // Still alive after the task: the lifecycle keeps the door open.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(running.child.try_wait().unwrap().is_none());
    let status = running.terminate();
    assert_eq!(status.code(), Some(0));
    assert!(
        std::net::TcpStream::connect(&hostport).is_err(),
        "the door outlived the session"
    );
    let sid = line["session_id"].as_str().unwrap();
    let events = trace(&t, sid);
    assert_eq!(events.last().unwrap()["event_type"], "session_end");
    assert_eq!(events.last().unwrap()["exit_status"], "ok");
}

#[test]
fn explain_scope_prints_grants_and_runs_nothing() {
    let t = TempDir::new("run-explain");
    let dir = capsule(
        &t,
        "examples/hello/capsule.wasm",
        "capabilities:\n  network:\n    allow: [\"https://api.example.com\"]\n  env:\n    allow: [SHOWN]\n",
    );
    let out = mur(
        &t,
        &["--manifest", &manifest_arg(&dir), "--explain-scope"],
        &[("SHOWN", "1")],
    );
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("containment: declared advisory, achieved advisory\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("network: http via the allow-list gate to https://api.example.com:443"),
        "{stdout}"
    );
    assert!(stdout.contains("env: SHOWN, MURMUR_CAPSULE_NAME"), "{stdout}");
    assert!(!dir.join("workdir").exists(), "explain-scope staged a workdir");

    let out = mur(
        &t,
        &[
            "--manifest",
            &manifest_arg(&dir),
            "--explain-scope",
            "--json",
            "--containment",
            "sealed",
        ],
        &[("MURMUR_PROBE_DENY", "sealed")],
    );
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["containment"]["declared"], "sealed");
    let achieved = v["containment"]["achieved"].as_str().unwrap();
    assert!(achieved == "advisory" || achieved == "scoped", "{achieved}");
    assert_eq!(v["containment"]["floor_met"], false);
    assert_eq!(
        v["effective_grants"]["network"]["http_allow"][0],
        "https://api.example.com:443"
    );
    assert_eq!(v["effective_grants"]["limits"]["deadline_seconds"], 600);
}

#[test]
fn a_floor_above_what_the_host_achieves_is_refused() {
    let t = TempDir::new("run-floor");
    let dir = capsule(
        &t,
        "examples/hello/capsule.wasm",
        "capabilities:\n  containment: sealed\n",
    );
    let out = mur(
        &t,
        &["--manifest", &manifest_arg(&dir), "--task", "go"],
        &[("MURMUR_PROBE_DENY", "sealed")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with("error[E-CAP-003]: containment floor not met: declared 'sealed', achieved '"),
        "{stderr}"
    );
    assert!(!dir.join("workdir").exists());
}

#[test]
fn bad_components_are_clear_errors() {
    let t = TempDir::new("run-bad");
    let cases: [(&str, &[u8], &str); 3] = [
        (
            "garbage",
            b"not wasm at all",
            "error[E-RUN-002]: the component is not a valid WebAssembly component",
        ),
        (
            "core",
            b"\0asm\x01\0\0\0",
            "error[E-RUN-002]: the component is not a valid WebAssembly component",
        ),
        (
            "empty-component",
            b"\0asm\x0d\0\x01\0",
            "error[E-RUN-002]: the component does not fit the capsule world",
        ),
    ];
    for (label, bytes, want) in cases {
        let dir = t.path().join(label);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("murmur.yaml"), "name: bad\nversion: 0.1.0\n").unwrap();
        std::fs::write(dir.join("capsule.wasm"), bytes).unwrap();
        let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
        assert_eq!(out.status.code(), Some(1), "{label}");
        let stderr = text(&out.stderr);
        let error = stderr.lines().find(|l| l.starts_with("error[")).unwrap_or("");
        assert!(error.starts_with(want), "{label}: {stderr}");
        assert!(!stderr.contains("panicked"), "{label}: {stderr}");
    }
    let dir = t.path().join("missing");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("murmur.yaml"), "name: bad\nversion: 0.1.0\n").unwrap();
    let out = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error[E-BLD-003]: no capsule.wasm"),
        "{}",
        text(&out.stderr)
    );
    let out = mur(
        &t,
        &["--manifest", t.path().join("nowhere.yaml").to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("error[E-IO-001]"));
}

#[test]
fn usage_errors_exit_2() {
    let t = TempDir::new("run-usage");
    for args in [
        &["--bogus"][..],
        &["--containment", "loose"],
        &["--capsule", "x"],
        &["--json=yes"],
    ] {
        let out = mur(&t, args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
    }
}

#[test]
fn the_second_launch_uses_the_cache_and_a_corrupt_entry_is_rebuilt() {
    let t = TempDir::new("run-cache");
    let dir = capsule(&t, "examples/hello/capsule.wasm", "");
    let bootstrap = |out: &Output| {
        std::fs::read_to_string(records(&t, &session_of(out)).join("logs/bootstrap.log")).unwrap()
    };
    let first = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert!(bootstrap(&first).contains("Compiled { stored: true, rejected: None }"));
    let second = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert!(bootstrap(&second).contains(": Cached"), "{}", bootstrap(&second));
    let entry = std::fs::read_dir(t.path().join("cache"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&entry).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&entry, bytes).unwrap();
    let third = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert_eq!(third.status.code(), Some(0));
    let log = bootstrap(&third);
    assert!(
        log.contains("rejected: Some(\"the entry's checksum does not match its bytes\")"),
        "{log}"
    );
    let fourth = mur(&t, &["--manifest", &manifest_arg(&dir), "--task", "go"], &[]);
    assert!(bootstrap(&fourth).contains(": Cached"));
}

#[test]
fn a_registry_capsule_runs_by_name_and_version() {
    let t = TempDir::new("run-registry");
    let reg = t.path().join("registry");
    let wasm = std::fs::read(repo("examples/hello/capsule.wasm")).unwrap();
    let bytes = murmur::registry::archive::write(&[
        ("murmur.yaml".into(), b"name: hello\nversion: 1.0.0\n".to_vec()),
        ("capsule.wasm".into(), wasm),
    ])
    .unwrap();
    murmur::registry::publish(&reg, &bytes, Some("local")).unwrap();
    let work = t.path().join("w");
    std::fs::create_dir_all(&work).unwrap();
    let out = mur(
        &t,
        &[
            "--capsule",
            "local/hello",
            "--capsule-version",
            "1.0.0",
            "--registry-path",
            reg.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
            "--task",
            "from the registry",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(work.join("out/result.txt")).unwrap(),
        "hello from hello: from the registry\n"
    );
}

#[test]
fn a_stdout_that_cannot_be_written_is_not_a_failure_of_the_session() {
    let t = TempDir::new("run-full-stdout");
    let dir = hello(&t);
    // Every write to /dev/full fails (ENOSPC), as one to a closed pipe does (EPIPE).
    let out = Command::new(common::capsule::MUR)
        .args(["run", "--manifest", &manifest_arg(&dir), "--task", "hi"])
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let sessions: Vec<_> = std::fs::read_dir(dir.join("workdir"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(sessions.len(), 1);
    let sid = sessions[0].file_name().to_string_lossy().into_owned();
    assert_eq!(
        std::fs::read_to_string(sessions[0].path().join("out/result.txt")).unwrap(),
        "hello from hello: hi\n"
    );
    assert_eq!(event(&trace(&t, &sid), "session_end")["exit_status"], "ok");
}

#[test]
fn output_a_stdout_cannot_take_is_e_io_003_never_a_panic() {
    let full = || std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let hello = repo("examples/hello/murmur.yaml");
    for args in [
        vec!["version"],
        vec!["run", "--manifest", hello.to_str().unwrap(), "--explain-scope"],
    ] {
        let out = Command::new(common::capsule::MUR)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(full())
            .output()
            .unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(
            stderr,
            "error[E-IO-003]: cannot write to standard output: No space left on device (os error 28)\n",
            "{args:?}"
        );
    }
}

#[test]
fn a_records_root_others_can_write_is_refused_before_anything_is_made() {
    use std::os::unix::fs::{chown, PermissionsExt};
    let t = TempDir::new("run-shared-records");
    let dir = hello(&t);
    let shared = t.path().join("shared-records");
    std::fs::create_dir_all(&shared).unwrap();
    let refused = |why: &str| {
        let out = mur(
            &t,
            &["--manifest", &manifest_arg(&dir), "--task", "hi"],
            &[("MURMUR_RECORDS_DIR", shared.to_str().unwrap())],
        );
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{why}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "error[E-IO-003]: the records root cannot be used: refusing {}: it is not a directory of this user (or root) that no other user can write",
                shared.display()
            )),
            "{why}: {stderr}"
        );
        assert!(!dir.join("workdir").exists(), "{why}: a workdir was made");
        assert_eq!(
            std::fs::read_dir(&shared).unwrap().count(),
            0,
            "{why}: records were made"
        );
    };
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused("mode 0777");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    refused("mode 1777");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Another user's directory (this test runs as root, which may give it away).
    if chown(&shared, Some(65534), Some(65534)).is_ok() {
        refused("owned by nobody");
        chown(&shared, Some(0), Some(0)).unwrap();
    }
    // The control: the same root, this user's and private, is used.
    let out = mur(
        &t,
        &["--manifest", &manifest_arg(&dir), "--task", "hi"],
        &[("MURMUR_RECORDS_DIR", shared.to_str().unwrap())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(shared.join(session_of(&out)).join("trace.jsonl").is_file());
}

/// A delegated child is told the device and inode of the directory its launcher made
/// (`MURMUR_WORKDIR_IDENTITY`): when its `--workdir` path names another directory by the
/// time it opens it (swapped for a symlink to a directory the swapper could not write),
/// it refuses before it makes anything, there or in the records.
#[test]
fn a_workdir_swapped_after_its_launcher_made_it_is_refused_before_anything_is_written() {
    use std::os::unix::fs::MetadataExt;
    let t = TempDir::new("run-identity");
    let dir = capsule(&t, "examples/hello/capsule.wasm", "");
    let made = t.path().join("made");
    let elsewhere = t.path().join("elsewhere");
    std::fs::create_dir_all(&made).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let meta = std::fs::metadata(&made).unwrap();
    let identity = format!("{}:{}", meta.dev(), meta.ino());
    // The swap: the path the child was given now leads elsewhere.
    let path = t.path().join("child");
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    let args = [
        "--manifest",
        &manifest_arg(&dir),
        "--task",
        "go",
        "--workdir",
        path.to_str().unwrap(),
    ];
    let out = mur(&t, &args, &[("MURMUR_WORKDIR_IDENTITY", identity.as_str())]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("is not the directory the delegating parent made for this child"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "something was written elsewhere"
    );
    assert!(
        std::fs::read_dir(t.path().join("records")).map_or(true, |mut d| d.next().is_none()),
        "records were made"
    );
    // The directory it was made for is taken.
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&made, &path).unwrap();
    let out = mur(&t, &args, &[("MURMUR_WORKDIR_IDENTITY", identity.as_str())]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(made.join("out/result.txt").is_file());
}

/// With too few descriptors (`ulimit -n` 8 to 32) `mur run` and `mur exec` refuse up front
/// with E-RUN-060 naming the limit: no panic, no other step's code, nothing half-made.
#[test]
fn too_few_descriptors_are_refused_up_front_naming_the_limit() {
    let t = TempDir::new("run-ulimit");
    let dir = capsule(&t, "examples/hello/capsule.wasm", "");
    std::fs::write(
        t.path().join("exec.yaml"),
        "name: fds\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [\"true\"]\n",
    )
    .unwrap();
    let manifest = manifest_arg(&dir);
    let exec_manifest = t.path().join("exec.yaml").display().to_string();
    let work = t.path().join("w");
    std::fs::create_dir_all(&work).unwrap();
    for n in [8, 12, 16, 20, 24, 28, 32] {
        let limited = |args: &[&str]| {
            Command::new("bash")
                .arg("-c")
                .arg(format!("ulimit -n {n} && exec \"$@\""))
                .arg("limited")
                .arg(common::capsule::MUR)
                .args(args)
                .env("MURMUR_CACHE_DIR", t.path().join("cache"))
                .env("MURMUR_RECORDS_DIR", t.path().join("records"))
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap()
        };
        let run = limited(&["run", "--manifest", &manifest, "--task", "go"]);
        let exec = limited(&[
            "exec",
            "--manifest",
            &exec_manifest,
            "--workdir",
            work.to_str().unwrap(),
            "--",
            "true",
        ]);
        for (what, out) in [("run", run), ("exec", exec)] {
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(1), "{what} at {n}: {stderr}");
            assert!(
                stderr.starts_with(&format!(
                    "error[E-RUN-060]: only {n} file descriptors may be open (ulimit -n)"
                )),
                "{what} at {n}: {stderr}"
            );
            assert!(!stderr.contains("panicked"), "{what} at {n}: {stderr}");
        }
    }
    assert!(!dir.join("workdir").exists(), "a session was started");
}
