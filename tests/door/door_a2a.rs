//! The A2A task interface on the door of a WASM capsule, through the real `mur run`: every
//! method of both protocol generations in its own shapes, ListTasks paging and filters, the
//! murmur headers in the trace, and what a task does to the workdir. Errors and bad input:
//! door_errors.rs; lifecycle and cancellation: door_lifecycle.rs; streams: door_streams.rs.

use crate::common;

use common::door::{
    has_key, is_id, is_rfc3339_z, queue_door, response_text, secs, send_params, state_of, status_text,
    task_of, wait_for, Door,
};
use common::TempDir;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn stop(mut d: Door) -> Door {
    assert_eq!(d.term().code(), Some(0));
    d
}

/// The history entry the client sent, as the door renders it back.
fn first_message(task: &Value) -> &Value {
    &task["history"][0]
}

#[test]
fn v03_methods_answer_with_bare_tasks_lowercase_states_and_kinds() {
    let t = TempDir::new("a2a-v03");
    let d = queue_door(&t, 4);

    // blocking: false is answered at once, the task still submitted.
    let params = send_params("message/send", "sleep 1", json!({"blocking": false}));
    let sent_id = params["message"]["messageId"].clone();
    let began = Instant::now();
    let task = d.result("message/send", params);
    assert!(
        began.elapsed() < secs(1),
        "a non-blocking send waited {:?}",
        began.elapsed()
    );
    assert_eq!(task["kind"], "task", "{task}");
    assert_eq!(state_of(&task), "submitted");
    assert!(task.get("task").is_none(), "0.3 answers the bare task: {task}");
    let id = task["id"].as_str().unwrap().to_string();
    assert!(is_id(&id, "tsk"), "{id}");
    assert!(is_id(task["contextId"].as_str().unwrap(), "ctx"), "{task}");
    assert!(
        is_rfc3339_z(task["status"]["timestamp"].as_str().unwrap()),
        "{task}"
    );
    let m = first_message(&task);
    assert_eq!(m["kind"], "message");
    assert_eq!(m["role"], "user");
    assert_eq!(m["messageId"], sent_id);
    assert_eq!(m["taskId"], id.as_str());
    assert_eq!(m["contextId"], task["contextId"]);
    assert_eq!(m["parts"], json!([{"kind": "text", "text": "sleep 1"}]));

    // tasks/get follows it to completed; the answer is the `response` artifact.
    let done = wait_for(secs(8), "the task to complete", || {
        let t = d.result("tasks/get", json!({ "id": id }));
        (state_of(&t) == "completed").then_some(t)
    });
    assert_eq!(done["kind"], "task");
    assert_eq!(
        done["artifacts"],
        json!([{"artifactId": format!("{id}-response"), "name": "response",
                "parts": [{"kind": "text", "text": "done: sleep 1\n"}]}])
    );
    assert!(
        is_rfc3339_z(done["status"]["timestamp"].as_str().unwrap()),
        "{done}"
    );
    let none = d.result("tasks/get", json!({"id": id, "historyLength": 0}));
    assert!(none.get("history").is_none(), "historyLength 0: {none}");
    let one = d.result("tasks/get", json!({"id": id, "historyLength": 1}));
    assert_eq!(one["history"].as_array().unwrap().len(), 1, "{one}");

    // blocking: true holds until the task settles.
    let began = Instant::now();
    let task = d.result(
        "message/send",
        send_params("message/send", "sleep 1", json!({"blocking": true})),
    );
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(4500),
        "{took:?}"
    );
    assert_eq!(state_of(&task), "completed", "{task}");
    assert_eq!(response_text(&task), Some("done: sleep 1\n"));
    assert_eq!(task["kind"], "task");

    // No configuration at all: blocking too. A client's contextId is echoed.
    let mut params = send_params("message/send", "plain", Value::Null);
    params["message"]["contextId"] = json!("client-context-03");
    let task = d.result("message/send", params);
    assert_eq!(state_of(&task), "completed", "{task}");
    assert_eq!(response_text(&task), Some("done: plain\n"));
    assert_eq!(task["contextId"], "client-context-03");
    assert_eq!(first_message(&task)["contextId"], "client-context-03");

    // tasks/cancel of a running task: canceled at once, with the agent's status message.
    let long = d.submit("message/send", "sleep 30");
    let long_id = long["id"].as_str().unwrap();
    d.wait_state(long_id, "TASK_STATE_WORKING", secs(5));
    let began = Instant::now();
    let canceled = d.result("tasks/cancel", json!({ "id": long_id }));
    assert!(began.elapsed() < secs(1));
    assert_eq!(canceled["kind"], "task");
    assert_eq!(state_of(&canceled), "canceled", "{canceled}");
    let msg = &canceled["status"]["message"];
    assert_eq!(
        (msg["kind"].as_str(), msg["role"].as_str()),
        (Some("message"), Some("agent")),
        "{msg}"
    );
    assert_eq!(status_text(&canceled), "canceled by request");
    assert_eq!(msg["taskId"], long_id);
    assert!(is_rfc3339_z(canceled["status"]["timestamp"].as_str().unwrap()));
    let again = d.result("tasks/get", json!({ "id": long_id }));
    assert_eq!(state_of(&again), "canceled");
    stop(d);
}

#[test]
fn v10_methods_answer_in_protojson_shapes_without_kind() {
    let t = TempDir::new("a2a-v10");
    let d = queue_door(&t, 4);

    let params = send_params("SendMessage", "sleep 1", json!({"returnImmediately": true}));
    let sent_id = params["message"]["messageId"].clone();
    let began = Instant::now();
    let result = d.result("SendMessage", params);
    assert!(began.elapsed() < secs(1));
    assert_eq!(
        result.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["task"],
        "{result}"
    );
    let task = &result["task"];
    assert!(!has_key(&result, "kind"), "1.0 has no kind: {result}");
    assert_eq!(state_of(task), "TASK_STATE_SUBMITTED");
    let id = task["id"].as_str().unwrap().to_string();
    assert!(
        is_id(&id, "tsk") && is_id(task["contextId"].as_str().unwrap(), "ctx"),
        "{task}"
    );
    assert!(is_rfc3339_z(task["status"]["timestamp"].as_str().unwrap()));
    let m = first_message(task);
    assert_eq!(m["role"], "ROLE_USER");
    assert_eq!(m["messageId"], sent_id);
    assert_eq!(m["parts"], json!([{"text": "sleep 1"}]));

    // GetTask is the bare task.
    let working = d.wait_state(&id, "TASK_STATE_WORKING", secs(5));
    assert!(
        working.get("task").is_none() && !has_key(&working, "kind"),
        "{working}"
    );
    let done = d.wait_state(&id, "TASK_STATE_COMPLETED", secs(8));
    assert_eq!(
        done["artifacts"],
        json!([{"artifactId": format!("{id}-response"), "name": "response", "parts": [{"text": "done: sleep 1\n"}]}])
    );
    let short = d.result("GetTask", json!({"id": id, "historyLength": 0}));
    assert!(short.get("history").is_none(), "{short}");

    // Without returnImmediately the call holds until the task settles.
    let mut params = send_params("SendMessage", "quick", Value::Null);
    params["message"]["contextId"] = json!("client-context-10");
    let result = d.result("SendMessage", params);
    let task = task_of(&result);
    assert!(result.get("task").is_some(), "{result}");
    assert_eq!(state_of(task), "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(response_text(task), Some("done: quick\n"));
    assert_eq!(task["contextId"], "client-context-10");
    assert!(!has_key(&result, "kind"), "{result}");

    // ... for a bounded wait (4 s): then the task as it stands.
    let began = Instant::now();
    let result = d.result("SendMessage", send_params("SendMessage", "sleep 8", json!({})));
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(3800) && took < Duration::from_millis(6000),
        "{took:?}"
    );
    let slow = task_of(&result).clone();
    assert_eq!(state_of(&slow), "TASK_STATE_WORKING", "{slow}");

    // CancelTask.
    let slow_id = slow["id"].as_str().unwrap();
    let canceled = d.result("CancelTask", json!({ "id": slow_id }));
    assert_eq!(state_of(&canceled), "TASK_STATE_CANCELED", "{canceled}");
    assert_eq!(canceled["status"]["message"]["role"], "ROLE_AGENT");
    assert_eq!(status_text(&canceled), "canceled by request");
    assert!(!has_key(&canceled, "kind"), "{canceled}");
    assert_eq!(state_of(&d.task(slow_id)), "TASK_STATE_CANCELED");
    stop(d);
}

/// Send `text` in context `ctx` answered at once (1.0); the task id.
fn send_in(d: &Door, ctx: &str, text: &str) -> String {
    let mut p = send_params("SendMessage", text, json!({"returnImmediately": true}));
    p["message"]["contextId"] = json!(ctx);
    let r = d.result("SendMessage", p);
    r["task"]["id"].as_str().unwrap().to_string()
}

fn ids(page: &Value) -> Vec<String> {
    page["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("no tasks in {page}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn list_tasks_pages_newest_first_and_filters() {
    let t = TempDir::new("a2a-list");
    let d = queue_door(&t, 8);
    let a1 = send_in(&d, "ctx-a", "one");
    let b1 = send_in(&d, "ctx-b", "two");
    let a2 = send_in(&d, "ctx-a", "three");
    let a3 = send_in(&d, "ctx-a", "four");
    for id in [&a1, &b1, &a2, &a3] {
        d.wait_state(id, "TASK_STATE_COMPLETED", secs(8));
    }
    let b2 = send_in(&d, "ctx-b", "sleep 30");
    d.wait_state(&b2, "TASK_STATE_WORKING", secs(5));
    d.result("CancelTask", json!({ "id": b2 }));

    let all = d.result("ListTasks", json!({}));
    assert_eq!(
        ids(&all),
        [b2.as_str(), a3.as_str(), a2.as_str(), b1.as_str(), a1.as_str()]
    );
    assert_eq!(all["totalSize"], 5);
    assert_eq!(all["nextPageToken"], "");
    assert!(!has_key(&all, "kind"), "{all}");
    assert!(
        all["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("artifacts").is_none()),
        "{all}"
    );
    assert_eq!(state_of(&all["tasks"][0]), "TASK_STATE_CANCELED");
    assert_eq!(state_of(&all["tasks"][1]), "TASK_STATE_COMPLETED");

    // Pages of two.
    let p1 = d.result("ListTasks", json!({"pageSize": 2}));
    assert_eq!(ids(&p1), [b2.as_str(), a3.as_str()]);
    assert_eq!(
        (p1["pageSize"].as_u64(), p1["totalSize"].as_u64()),
        (Some(2), Some(5))
    );
    let token = p1["nextPageToken"].as_str().unwrap();
    assert!(!token.is_empty(), "{p1}");
    let p2 = d.result("ListTasks", json!({"pageSize": 2, "pageToken": token}));
    assert_eq!(ids(&p2), [a2.as_str(), b1.as_str()]);
    let token = p2["nextPageToken"].as_str().unwrap();
    assert!(!token.is_empty(), "{p2}");
    let p3 = d.result("ListTasks", json!({"pageSize": 2, "pageToken": token}));
    assert_eq!(ids(&p3), [a1.as_str()]);
    assert_eq!(p3["nextPageToken"], "");

    // Filters: context, state, both; artifacts and history on request.
    let ctx_a = d.result("ListTasks", json!({"contextId": "ctx-a"}));
    assert_eq!(ids(&ctx_a), [a3.as_str(), a2.as_str(), a1.as_str()]);
    assert_eq!(ctx_a["totalSize"], 3);
    let canceled = d.result("ListTasks", json!({"status": "TASK_STATE_CANCELED"}));
    assert_eq!(ids(&canceled), [b2.as_str()]);
    let done_b = d.result(
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED", "contextId": "ctx-b"}),
    );
    assert_eq!(ids(&done_b), [b1.as_str()]);
    let with = d.result(
        "ListTasks",
        json!({"contextId": "ctx-a", "includeArtifacts": true, "historyLength": 0}),
    );
    let texts: Vec<_> = with["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| response_text(t).unwrap().to_string())
        .collect();
    assert_eq!(texts, ["done: four\n", "done: three\n", "done: one\n"]);
    assert!(
        with["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("history").is_none()),
        "{with}"
    );
    let since = |ts: &str| d.result("ListTasks", json!({ "statusTimestampAfter": ts }))["totalSize"].clone();
    assert_eq!(since("2000-01-01T00:00:00Z"), 5);
    assert_eq!(since("2999-01-01T00:00:00.000+01:00"), 0);
    let nothing = d.result("ListTasks", json!({"contextId": "ctx-none"}));
    assert_eq!(
        (nothing["tasks"].clone(), nothing["totalSize"].clone()),
        (json!([]), json!(0))
    );

    assert_eq!(
        d.error("ListTasks", json!({"pageToken": "not-a-token"})),
        (
            -32602,
            "Invalid params: pageToken is not one this door issued".into()
        )
    );
    assert_eq!(
        d.error("ListTasks", json!({"status": "sleeping"})),
        (-32602, "Invalid params: status is not a task state".into())
    );
    stop(d);
}

#[test]
fn the_trace_records_origin_trust_and_traceparent_of_each_task() {
    let t = TempDir::new("a2a-trace");
    let d = queue_door(&t, 4);
    let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    // (headers sent, origin recorded, trust recorded, traceparent recorded)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str, Option<&'a str>);
    let cases: [Case; 6] = [
        (&[], "event", "untrusted", None),
        (
            &[
                ("x-murmur-task-origin", "peer"),
                ("x-murmur-task-trust", "trusted"),
            ],
            "peer",
            "trusted",
            None,
        ),
        (&[("x-murmur-task-origin", "peer")], "peer", "untrusted", None),
        (
            &[
                ("x-murmur-task-origin", "user"),
                ("x-murmur-task-trust", "trusted"),
            ],
            "event",
            "untrusted",
            None,
        ),
        (&[("traceparent", good)], "event", "untrusted", Some(good)),
        (&[("traceparent", "00-junk-junk-01")], "event", "untrusted", None),
    ];
    let mut sent = Vec::new();
    for (i, (headers, ..)) in cases.iter().enumerate() {
        let mut p = send_params("SendMessage", &format!("task {i}"), Value::Null);
        if i == 0 {
            p["message"]["contextId"] = json!("ctx-traced");
        }
        let message_id = p["message"]["messageId"].as_str().unwrap().to_string();
        let v = d.call_with("SendMessage", p, headers);
        let task = v["result"]["task"].clone();
        assert_eq!(state_of(&task), "TASK_STATE_COMPLETED", "{v}");
        sent.push((
            task["id"].as_str().unwrap().to_string(),
            task["contextId"].as_str().unwrap().to_string(),
            message_id,
        ));
    }
    let d = stop(d);
    for ((id, ctx, message_id), (_, origin, trust, traceparent)) in sent.iter().zip(cases.iter()) {
        let got = d.event_of("a2a_task_received", id);
        assert_eq!(got["context_id"], ctx.as_str(), "{got}");
        assert_eq!(got["message_id"], message_id.as_str(), "{got}");
        assert_eq!(
            (got["origin"].as_str(), got["trust"].as_str()),
            (Some(*origin), Some(*trust)),
            "{got}"
        );
        assert_eq!(got["traceparent_from_caller"], json!(traceparent), "{got}");
        let start = d.event_of("task_start", id);
        assert_eq!(start["source"], "a2a", "{start}");
        assert_eq!(
            (start["origin"].as_str(), start["trust"].as_str()),
            (Some(*origin), Some(*trust)),
            "{start}"
        );
        assert_eq!(d.event_of("task_end", id)["exit_status"], "ok");
    }
    assert_eq!(sent[0].1, "ctx-traced");
    let trace = d.trace();
    assert_eq!(trace.last().unwrap()["event_type"], "session_end");
    assert_eq!(trace.last().unwrap()["tasks"], 6);
}

#[test]
fn a_completion_must_name_the_session_running_here() {
    let t = TempDir::new("a2a-completion");
    let d = queue_door(&t, 4);
    let completion = |session: &str| -> [(&'static str, String); 3] {
        [
            ("x-murmur-task-origin", "completion".into()),
            ("x-murmur-task-trust", "trusted".into()),
            ("x-murmur-completion-session", session.into()),
        ]
    };
    for (method, other) in [
        ("message/send", "ses_0123456789abcdef0123456789abcdef"),
        ("SendMessage", "someone-else"),
    ] {
        let owned = completion(other);
        let hs: Vec<(&str, &str)> = owned.iter().map(|(n, v)| (*n, v.as_str())).collect();
        assert_eq!(
            d.error_with(method, send_params(method, "done elsewhere", Value::Null), &hs),
            (
                -31001,
                format!("completion is addressed to session {other}, which is not the session running here")
            ),
            "{method}"
        );
    }
    // No session named at all.
    let (code, message) = d.error_with(
        "message/stream",
        send_params("message/stream", "x", Value::Null),
        &[("x-murmur-task-origin", "completion")],
    );
    assert_eq!(
        (code, message),
        (
            -31001,
            "completion is addressed to session , which is not the session running here".into()
        )
    );
    assert!(
        d.result("ListTasks", json!({}))["tasks"]
            .as_array()
            .unwrap()
            .is_empty(),
        "a refused completion made a task"
    );

    // Addressed to this session, a completion still names a delegation this session
    // started: none here, so every one is refused (and traced), and makes no task.
    let sid = d.session_id.clone();
    let owned = completion(&sid);
    let mut hs: Vec<(&str, &str)> = owned.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let refused = |id: &str| {
        (
            -31002,
            format!(
                "completion for delegation {id} refused: this session started no delegation with that id"
            ),
        )
    };
    assert_eq!(
        d.error_with(
            "SendMessage",
            send_params("SendMessage", "child finished", Value::Null),
            &hs
        ),
        refused("")
    );
    hs.push(("x-murmur-delegation-id", "dlg_00000000000000000000000000000000"));
    assert_eq!(
        d.error_with(
            "message/send",
            send_params("message/send", "child finished", Value::Null),
            &hs
        ),
        refused("dlg_00000000000000000000000000000000")
    );
    assert_eq!(d.result("ListTasks", json!({}))["tasks"], json!([]));
    let d = stop(d);
    let refusals: Vec<Value> = d
        .trace()
        .into_iter()
        .filter(|e| e["event_type"] == "completion_refused")
        .collect();
    assert_eq!(refusals.len(), 2, "{refusals:?}");
    assert_eq!(
        refusals[1]["delegation_id"],
        "dlg_00000000000000000000000000000000"
    );
    assert_eq!(
        refusals[1]["reason"],
        "this session started no delegation with that id"
    );
}

#[test]
fn a_task_writes_task_md_and_clears_the_previous_answer() {
    let t = TempDir::new("a2a-workdir");
    let d = queue_door(&t, 4);
    let first = d.result(
        "SendMessage",
        send_params("SendMessage", "first answer", Value::Null),
    );
    assert_eq!(response_text(&first["task"]), Some("done: first answer\n"));
    assert_eq!(d.workfile("task.md").as_deref(), Some("first answer"));
    assert_eq!(
        d.workfile("out/result.txt").as_deref(),
        Some("done: first answer\n")
    );

    // Two text parts are joined with a newline into task.md.
    let p = json!({"message": {"messageId": "two-parts", "role": "ROLE_USER",
                               "parts": [{"text": "line one"}, {"text": "line two"}]}});
    let two = d.result("SendMessage", p);
    assert_eq!(response_text(&two["task"]), Some("done: line one\nline two\n"));
    assert_eq!(d.workfile("task.md").as_deref(), Some("line one\nline two"));

    // A failing task: failed, its status says why, and the previous answer is gone.
    let failed = d.result("message/send", send_params("message/send", "fail", Value::Null));
    assert_eq!(d.workfile("task.md").as_deref(), Some("fail"));
    assert_eq!(state_of(&failed), "failed", "{failed}");
    let answer = response_text(&failed).unwrap_or("");
    assert!(
        !answer.contains("done:"),
        "a failed task carries an earlier answer: {failed}"
    );
    assert!(
        !d.workfile("out/result.txt").unwrap_or_default().contains("done:"),
        "out/result.txt still holds an earlier answer"
    );
    // The queue goes on after a failure.
    let after = d.result("SendMessage", send_params("SendMessage", "after", Value::Null));
    assert_eq!(response_text(&after["task"]), Some("done: after\n"));
    let d = stop(d);
    let ends: Vec<_> = d
        .events("task_end")
        .iter()
        .map(|e| e["exit_status"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ends, ["ok", "ok", "failed", "ok"]);
    assert_eq!(d.events("trap").len(), 1);
    // The status message says the guest panicked, not just a backtrace's header.
    let message = status_text(&failed).to_string();
    assert!(
        message.contains("asked to fail") || message.contains("panic") || message.contains("unreachable"),
        "the failed task's status message does not mention the panic: {message:?}"
    );
}
