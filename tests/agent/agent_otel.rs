//! The OpenTelemetry hook (`artifacts/murmur-hook-otel`) through the real `mur run` against
//! the mock provider, with a loopback collector (the mock's sink) capturing what it sends:
//! every body parses strictly with the official protobuf definitions (tests/sdk/otlp_check.py,
//! opentelemetry-proto), one request per task end and one at session end, the span tree
//! (session ← task ← turns and calls) in the caller's trace under its `traceparent`, a later
//! caller's task linked, attributes and statuses (a shell call that exits non-zero is
//! `ERROR`; each turn names its provider; a failed model call claims no tokens). A collector that is down, one that never
//! answers, a missing records grant and a missing network grant each cost the session nothing
//! but a line in the hook's log.

use crate::common;

use common::agent::{hook_example, log_text, publish_zip, Drv, Spec, World, MODEL};
use common::agent_door::{lifecycle_yaml, send_params_10};
use common::provider::{Provider, Recorded, Step};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TP_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const TP_SPAN: &str = "00f067aa0ba902b7";
const OTHER: &str = "00-11111111111111111111111111111111-2222222222222222-00";

/// The hook's entry: its records directory, the collector at `origin` granted and named.
fn entry(origin: &str, records: bool, network: bool, extra: &str) -> String {
    let records = if records { "records: own, " } else { "" };
    let caps = if network {
        format!("capabilities: {{network: {{allow: [\"{origin}\"]}}}}, ")
    } else {
        String::new()
    };
    format!(
        "{{name: murmur-hook-otel, version: 1.0.0, runtime: hook, {records}{caps}config: {{endpoint: \"{origin}\"{extra}}}}}"
    )
}

fn world(label: &str, p: &Provider, origin: &str, entry: String, lifecycle: &str) -> World {
    let w = World::new(label);
    publish_zip(&w.reg, &hook_example("murmur-hook-otel"));
    let mut spec = Spec::new(Drv::OpenAi, p);
    spec.network = vec![origin.to_string()];
    spec.artifacts = vec![entry];
    w.manifest_text(&format!("{}{lifecycle}", spec.yaml()));
    w
}

/// The bodies, parsed by the official definitions: per body, its resources as
/// tests/sdk/otlp_check.py prints them.
fn parsed(w: &World, bodies: &[Recorded]) -> Vec<Value> {
    let mut paths = Vec::new();
    for (i, r) in bodies.iter().enumerate() {
        assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/v1/traces"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        let path = w.t.path().join(format!("otlp-{i}.json"));
        std::fs::write(&path, &r.body).unwrap();
        paths.push(path);
    }
    let out = Command::new(common::sdk::python())
        .arg(common::capsule::repo("tests/sdk/otlp_check.py"))
        .args(&paths)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "the official definitions refuse a body: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

/// The spans of one parsed body (one resource, one scope), checking the resource.
fn spans_of(body: &Value, sid: &str) -> Vec<Value> {
    let resources = body.as_array().unwrap();
    assert_eq!(resources.len(), 1, "{body}");
    assert_eq!(
        resources[0]["attributes"],
        json!({"service.name": "agent-x", "service.version": "0.1.0",
               "service.instance.id": sid, "murmur.session.id": sid})
    );
    let scopes = resources[0]["scopes"].as_array().unwrap();
    assert_eq!(scopes.len(), 1);
    assert_eq!(
        (&scopes[0]["name"], &scopes[0]["version"]),
        (&json!("murmur-hook-otel"), &json!("1.0.0"))
    );
    scopes[0]["spans"].as_array().unwrap().clone()
}

fn within(child: &Value, parent: &Value) -> bool {
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap();
    n(parent, "start") <= n(child, "start")
        && n(child, "start") <= n(child, "end")
        && n(child, "end") <= n(parent, "end")
}

#[test]
fn the_otel_hook_exports_each_task_and_the_session_as_a_span_tree_the_protobuf_definitions_accept() {
    let collector = Provider::start_sink();
    let origin = format!("http://127.0.0.1:{}", collector.port());
    let p = Provider::start(vec![
        Step::Tools(vec![
            ("c1".into(), "bash".into(), json!({"command": "exit 3"})),
            ("c2".into(), "no-such-tool".into(), json!({})),
        ]),
        Step::text("first done"),
        Step::text("second done"),
    ]);
    let w = world(
        "otel-tree",
        &p,
        &origin,
        entry(&origin, true, true, ""),
        &lifecycle_yaml("queue", Some("exit"), Some(2)),
    );
    let mut s = w.serve(None, &[("MURMUR_A2A_TIMEOUT_SECS", "2")]);
    let first = s.result(
        "SendMessage",
        send_params_10("task one", false),
        &[("traceparent", TP)],
    );
    let second = s.result(
        "SendMessage",
        send_params_10("task two", false),
        &[("traceparent", OTHER)],
    );
    let ids: Vec<String> = [&first, &second]
        .iter()
        .map(|r| {
            r["task"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("{r}"))
                .to_string()
        })
        .collect();
    // The session ends on its own once idle (a SIGTERM would cut short the hook's call in
    // flight, as it does every guest call).
    let ended = s.wait_exit(Duration::from_secs(60));
    assert_eq!(ended.and_then(|e| e.code()), Some(0), "{}", s.both());
    let sid = s.sid.clone();
    let bodies = collector.requests();
    assert_eq!(
        bodies.len(),
        3,
        "one request per task end and one at session end; hook log: {}",
        log_text(&w, &sid, "hook-murmur-hook-otel.log")
    );
    let parsed = parsed(&w, &bodies);
    let (task1, task2, session) = (
        spans_of(&parsed[0], &sid),
        spans_of(&parsed[1], &sid),
        spans_of(&parsed[2], &sid),
    );

    // The session span: the caller's child, in the caller's trace.
    assert_eq!(session.len(), 1);
    let ses = &session[0];
    assert_eq!(
        (
            &ses["name"],
            &ses["kind"],
            &ses["trace_id"],
            &ses["parent_span_id"]
        ),
        (
            &json!("mur.session"),
            &json!("SPAN_KIND_SERVER"),
            &json!(TP_TRACE),
            &json!(TP_SPAN)
        )
    );
    assert_eq!(
        ses["attributes"],
        json!({"murmur.session.id": sid, "murmur.session.exit_status": "ok"})
    );
    assert_eq!(ses["status"]["code"], "STATUS_CODE_UNSET");

    // The first task: the task span, two turns, the shell call and the failed tool call.
    let names: Vec<&str> = task1.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "mur.task",
            &format!("chat {MODEL}"),
            "shell bash",
            "execute_tool no-such-tool",
            &format!("chat {MODEL}")
        ]
    );
    let task = &task1[0];
    assert_eq!(task["parent_span_id"], ses["span_id"]);
    assert!(within(task, ses), "{task} {ses}");
    let a = &task["attributes"];
    assert_eq!(
        (
            &a["murmur.task.id"],
            &a["murmur.task.turns"],
            &a["murmur.task.exit_status"],
            &a["murmur.task.source"]
        ),
        (&json!(ids[0]), &json!(2), &json!("ok"), &json!("a2a"))
    );
    assert_eq!(task["links"], json!([]), "its caller is the session's parent");
    assert_eq!(task["status"]["code"], "STATUS_CODE_UNSET");
    let mut seen = std::collections::BTreeSet::new();
    for s in &task1 {
        assert_eq!(s["trace_id"], TP_TRACE);
        assert!(
            seen.insert(s["span_id"].as_str().unwrap().to_string()),
            "a span id twice"
        );
    }
    for child in &task1[1..] {
        assert_eq!(child["parent_span_id"], task["span_id"], "{child}");
        assert!(within(child, task), "{child} {task}");
    }
    let usage = |s: &Value| {
        let a = &s["attributes"];
        (
            a["gen_ai.usage.input_tokens"].as_i64(),
            a["gen_ai.usage.output_tokens"].as_i64(),
            a["gen_ai.request.model"].as_str().map(str::to_string),
            a["murmur.decision"].as_str().map(str::to_string),
        )
    };
    assert_eq!(task1[1]["kind"], "SPAN_KIND_CLIENT");
    assert_eq!(
        usage(&task1[1]),
        (Some(10), Some(5), Some(MODEL.into()), Some("tool_call".into()))
    );
    assert_eq!(
        usage(&task1[4]),
        (Some(20), Some(5), Some(MODEL.into()), Some("end_turn".into()))
    );
    for turn in [&task1[1], &task1[4]] {
        assert_eq!(turn["attributes"]["gen_ai.provider.name"], "openai", "{turn}");
    }
    let shell = &task1[2];
    assert_eq!(shell["attributes"]["process.exit.code"], 3);
    assert_eq!(shell["attributes"]["murmur.call.outcome"], "ok");
    assert_eq!(
        (&shell["status"]["code"], &shell["status"]["message"]),
        (&json!("STATUS_CODE_ERROR"), &json!("bash exited with 3")),
        "a non-zero exit is data to the model, and a failed command to a trace"
    );
    let tool = &task1[3];
    assert_eq!(tool["attributes"]["gen_ai.tool.name"], "no-such-tool");
    assert_eq!(tool["status"]["code"], "STATUS_CODE_ERROR");

    // The second task: another caller's, linked; in the session's trace all the same.
    let names: Vec<&str> = task2.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mur.task", &format!("chat {MODEL}")]);
    assert_eq!(task2[0]["attributes"]["murmur.task.id"], json!(ids[1]));
    assert_eq!(task2[0]["parent_span_id"], ses["span_id"]);
    assert_eq!(task2[0]["trace_id"], TP_TRACE);
    assert_eq!(
        task2[0]["links"],
        json!([{"trace_id": "11111111111111111111111111111111", "span_id": "2222222222222222"}])
    );
    assert_eq!(usage(&task2[1]).0, Some(30), "{}", task2[1]);
    assert!(
        log_text(&w, &sid, "hook-murmur-hook-otel.log").is_empty(),
        "nothing went wrong"
    );
    assert!(
        !w.records(&sid).join("hooks/murmur-hook-otel/task.jsonl").exists()
            && !w
                .records(&sid)
                .join("hooks/murmur-hook-otel/session.json")
                .exists(),
        "the hook's working files stay behind"
    );
}

/// A model call that fails (the provider refuses the key) is an ERROR span naming its
/// provider (the Anthropic driver's `anthropic`) that claims no tokens: none were counted.
#[test]
fn a_failed_model_call_names_its_provider_and_claims_no_tokens() {
    let collector = Provider::start_sink();
    let origin = format!("http://127.0.0.1:{}", collector.port());
    let p = Provider::start(vec![Step::status(401, "bad key")]);
    let w = World::new("otel-failed-call");
    publish_zip(&w.reg, &hook_example("murmur-hook-otel"));
    let mut spec = Spec::new(Drv::Anthropic, &p);
    spec.network = vec![origin.clone()];
    spec.artifacts = vec![entry(&origin, true, true, "")];
    w.manifest(&spec);
    let run = w.run("do it", &[]);
    assert_ne!(run.code(), Some(0), "{}", run.both());
    let sid = run.sid();
    let bodies = collector.requests();
    assert_eq!(
        bodies.len(),
        2,
        "the task's end and the session's; hook log: {}",
        log_text(&w, &sid, "hook-murmur-hook-otel.log")
    );
    let task = spans_of(&parsed(&w, &bodies)[0], &sid);
    let names: Vec<&str> = task.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mur.task", &format!("chat {MODEL}")]);
    let turn = &task[1];
    assert_eq!(turn["status"]["code"], "STATUS_CODE_ERROR", "{turn}");
    let a = turn["attributes"].as_object().unwrap();
    assert_eq!(a["gen_ai.provider.name"], "anthropic", "{turn}");
    assert_eq!(a["murmur.decision"], "error", "{turn}");
    assert!(
        !a.keys().any(|k| k.starts_with("gen_ai.usage.")),
        "no tokens were counted, none claimed: {turn}"
    );
}

/// A collector that accepts connections and never answers, holding them open.
fn silent_collector() -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let mut held = Vec::new();
        l.set_nonblocking(true).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(60);
        while std::time::Instant::now() < until && held.len() < 8 {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    });
    (port, t)
}

#[test]
fn a_collector_down_or_silent_and_a_missing_grant_cost_the_session_only_a_log_line() {
    // Down: nothing listens on the port.
    let down = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (silent, _held) = silent_collector();
    let sink = Provider::start_sink();
    let cases: [(&str, u16, bool, bool, &str, &str); 4] = [
        ("otel-down", down, true, true, "", "not exported to"),
        (
            "otel-silent",
            silent,
            true,
            true,
            ", timeout_ms: 300",
            "not exported to",
        ),
        (
            "otel-norecords",
            sink.port(),
            false,
            true,
            "",
            "grant its entry `records: own`",
        ),
        ("otel-nonet", sink.port(), true, false, "", "HttpRequestDenied"),
    ];
    let mut lines = BTreeMap::new();
    for (label, port, records, network, extra, says) in cases {
        let origin = format!("http://127.0.0.1:{port}");
        let p = Provider::start(vec![Step::text("fine")]);
        let w = world(label, &p, &origin, entry(&origin, records, network, extra), "");
        let run = w.run("do it", &[]);
        run.assert_ok();
        let sid = run.sid();
        assert_eq!(w.result(&sid), "fine\n");
        let log = log_text(&w, &sid, "hook-murmur-hook-otel.log");
        assert!(log.contains(says), "{label}: {log}");
        lines.insert(label, log);
    }
    // Each failing collector is tried once: the session's span, right after, is dropped
    // without waiting on it again.
    for (label, port) in [("otel-down", down), ("otel-silent", silent)] {
        let log: Vec<&str> = lines[label].lines().collect();
        assert_eq!(log.len(), 2, "{label}: {log:?}");
        let url = format!("http://127.0.0.1:{port}/v1/traces");
        assert!(
            log[0].starts_with("on-task-end: the hook returned an error: ")
                && log[0].contains(" spans of task tsk_")
                && log[0].contains(&format!("not exported to {url}: ")),
            "{label}: {}",
            log[0]
        );
        assert!(
            log[1]
                .starts_with("on-session-end: the hook returned an error: 1 spans of the session dropped: ")
                && log[1].contains(&format!("the collector {url} failed "))
                && log[1].ends_with(" s ago (tried again 30 s after a failure)"),
            "{label}: {}",
            log[1]
        );
    }
    assert!(
        sink.requests().is_empty(),
        "nothing reached the collector without both grants"
    );
}

#[test]
fn a_reopened_task_is_a_span_per_attempt_and_a_session_that_did_not_end_ok_is_an_error() {
    let collector = Provider::start_sink();
    let origin = format!("http://127.0.0.1:{}", collector.port());
    let p = Provider::start(vec![Step::text("attempt one"), Step::text("attempt two")]);
    let w = World::new("otel-reopen");
    publish_zip(&w.reg, &hook_example("murmur-hook-otel"));
    common::agent::publish_hook(&w.reg, "hook-reopen-always");
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.network = vec![origin.clone()];
    spec.artifacts = vec![
        common::agent::hook_entry("hook-reopen-always", None),
        entry(&origin, true, true, ""),
    ];
    spec.inference_extra = "  max_task_reopens: 1\n".into();
    w.manifest(&spec);
    let run = w.run("go", &[]);
    assert_eq!(run.code(), Some(1), "{}", run.both());
    let sid = run.sid();
    let bodies = collector.requests();
    assert_eq!(bodies.len(), 3, "two attempts and the session");
    let parsed = parsed(&w, &bodies);
    let one = spans_of(&parsed[0], &sid);
    let two = spans_of(&parsed[1], &sid);
    let session = spans_of(&parsed[2], &sid);
    let (a, b) = (&one[0], &two[0]);
    assert_eq!(
        a["attributes"]["murmur.task.id"],
        b["attributes"]["murmur.task.id"]
    );
    assert_ne!(a["span_id"], b["span_id"]);
    assert_eq!(
        (
            &a["attributes"]["murmur.task.attempt"],
            &b["attributes"]["murmur.task.attempt"]
        ),
        (&json!(1), &json!(2))
    );
    assert_eq!(a["events"], json!([]));
    let reopen: Vec<&Value> = b["events"].as_array().unwrap().iter().collect();
    assert_eq!(reopen.len(), 1, "{b}");
    assert_eq!(reopen[0]["name"], "reopen");
    assert_eq!(reopen[0]["attributes"], json!({"murmur.task.attempt": 2}));
    assert_eq!(
        (
            a["attributes"]["murmur.task.turns"].as_i64(),
            b["attributes"]["murmur.task.turns"].as_i64()
        ),
        (Some(1), Some(2)),
        "turns count across attempts"
    );
    assert_eq!((one.len(), two.len()), (2, 2), "each attempt's one turn");
    let ses = &session[0];
    assert_eq!(ses["parent_span_id"], "", "no caller: a root span");
    assert_eq!(ses["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!(
        ses["trace_id"],
        sid.trim_start_matches("ses_"),
        "the session's own trace"
    );
    assert_eq!(
        ses["status"],
        json!({"code": "STATUS_CODE_ERROR", "message": "reopen_budget_exhausted"})
    );
    assert_eq!(
        ses["attributes"]["murmur.session.exit_status"],
        "reopen_budget_exhausted"
    );
    assert_eq!(a["parent_span_id"], ses["span_id"]);
    assert_eq!(b["parent_span_id"], ses["span_id"]);
}

/// A session halted by a failed compaction (a one-shot run, or a queue session given its
/// task over A2A): the task span has the compaction event and fails, and the session span
/// and the trace's `session_end` both say `failed`.
fn failed_compaction(label: &str, queue: bool) {
    let collector = Provider::start_sink();
    let origin = format!("http://127.0.0.1:{}", collector.port());
    let p = Provider::start(vec![
        Step::tool("c1", "bash", json!({"command": "echo one"})),
        Step::text("never asked"),
    ]);
    let w = World::new(label);
    publish_zip(&w.reg, &hook_example("murmur-hook-otel"));
    common::agent::publish_hook(&w.reg, "hook-compact-error");
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.network = vec![origin.clone()];
    spec.artifacts = vec![
        common::agent::hook_entry("hook-compact-error", None),
        entry(&origin, true, true, ""),
    ];
    // 100 × 0.1 = 10 tokens: turn 1 (15) reaches it.
    spec.inference_extra = "  compaction: {threshold: 0.1}\n".into();
    let lifecycle = if queue {
        lifecycle_yaml("queue", Some("sleep"), Some(2))
    } else {
        String::new()
    };
    w.manifest_text(&format!(
        "{}context: {{max_tokens: 100}}\n{lifecycle}",
        spec.yaml()
    ));
    let sid = if queue {
        let mut s = w.serve(None, &[]);
        let r = s.result("SendMessage", send_params_10("go", false), &[]);
        assert_eq!(r["task"]["status"]["state"], "TASK_STATE_FAILED", "{r}");
        let ended = s.wait_exit(Duration::from_secs(60));
        assert!(
            ended.is_some(),
            "a halted queue session ends by itself\n{}",
            s.both()
        );
        assert_eq!(ended.and_then(|e| e.code()), Some(1), "{}", s.both());
        s.sid.clone()
    } else {
        let run = w.run("go", &[]);
        assert_eq!(run.code(), Some(1), "{}", run.both());
        run.sid()
    };
    let bodies = collector.requests();
    assert_eq!(bodies.len(), 2, "the task and the session");
    let parsed = parsed(&w, &bodies);
    let task = &spans_of(&parsed[0], &sid)[0];
    let events = task["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{task}");
    assert_eq!(events[0]["name"], "compaction");
    assert_eq!(events[0]["attributes"]["murmur.threshold"], 0.1);
    assert_eq!(
        task["status"],
        json!({"code": "STATUS_CODE_ERROR", "message": "failed"})
    );
    let session = &spans_of(&parsed[1], &sid)[0];
    assert_eq!(
        session["status"],
        json!({"code": "STATUS_CODE_ERROR", "message": "failed"}),
        "a session halted by a failed compaction ended failed"
    );
    assert_eq!(session["attributes"]["murmur.session.exit_status"], "failed");
    let trace = w.trace(&sid);
    let end = common::agent::events(&trace, "session_end");
    assert_eq!(
        end[0]["exit_status"], "failed",
        "the trace says what the hook was told"
    );
}

#[test]
fn a_failed_compaction_is_a_compaction_event_and_a_failed_task_and_session() {
    failed_compaction("otel-compaction", false);
}

#[test]
fn a_queue_session_halted_by_a_failed_compaction_ends_failed_in_the_trace_and_the_spans() {
    failed_compaction("otel-compaction-queue", true);
}

/// A person in the loop on the span tree: the `ask` tool's wait for the caller's answer is
/// its `execute_tool ask` span, as long as the wait (after the `requested` mark).
#[test]
fn the_wait_for_a_persons_answer_is_a_span_as_long_as_the_wait() {
    let collector = Provider::start_sink();
    let origin = format!("http://127.0.0.1:{}", collector.port());
    let p = super::agent_person::model();
    let w = world(
        "otel-person",
        &p,
        &origin,
        entry(&origin, true, true, ""),
        &format!(
            "{}{}",
            lifecycle_yaml("queue", Some("exit"), Some(2)),
            super::agent_person::PERSON
        ),
    );
    let mut s = w.serve(None, &[("MURMUR_A2A_TIMEOUT_SECS", "2")]);
    let sent = s.result("SendMessage", send_params_10("ask away", true), &[]);
    let task = sent["task"].clone();
    s.wait_state(
        task["id"].as_str().unwrap(),
        "TASK_STATE_INPUT_REQUIRED",
        Duration::from_secs(60),
    );
    std::thread::sleep(Duration::from_millis(1200));
    let mut answer = send_params_10("blue", true);
    answer["message"]["taskId"] = task["id"].clone();
    answer["message"]["contextId"] = task["contextId"].clone();
    let resumed = s.result("SendMessage", answer, &[]);
    assert_eq!(
        resumed["task"]["status"]["state"], "TASK_STATE_WORKING",
        "{resumed}"
    );
    let ended = s.wait_exit(Duration::from_secs(60));
    assert_eq!(ended.and_then(|e| e.code()), Some(0), "{}", s.both());
    let bodies = collector.requests();
    assert_eq!(
        bodies.len(),
        2,
        "{}",
        log_text(&w, &s.sid, "hook-murmur-hook-otel.log")
    );
    let spans = spans_of(&parsed(&w, &bodies)[0], &s.sid);
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "mur.task",
            &format!("chat {MODEL}"),
            "execute_tool ask",
            "execute_tool ask",
            &format!("chat {MODEL}")
        ]
    );
    let length = |s: &Value| s["end"].as_u64().unwrap() - s["start"].as_u64().unwrap();
    assert!(
        length(&spans[2]) < 100_000_000,
        "the request is a mark: {}",
        spans[2]
    );
    assert!(length(&spans[3]) >= 1_200_000_000, "the wait: {}", spans[3]);
    assert!(within(&spans[3], &spans[0]), "{} {}", spans[3], spans[0]);
}
