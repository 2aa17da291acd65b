//! Server-sent-event streams on the door of a WASM capsule, through the real `mur run`: the
//! event order in both generations, keep-alive comments, attaching to a running task, and a
//! thousand idle streams held on the event loop with the 1,025th refused.

use crate::common;

use common::door::{self, has_key, is_id, is_rfc3339_z, queue_door, secs, send_params, state_of, Ev};
use common::TempDir;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A streamed head: 200, an event stream, no length, closed at its end.
fn assert_stream_head(head: &str) {
    assert_eq!(common::status_of(head), 200, "{head}");
    assert!(head.contains("\r\ncontent-type: text/event-stream\r\n"), "{head}");
    assert!(head.contains("\r\ncache-control: no-store\r\n"), "{head}");
    assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
    assert!(!head.to_ascii_lowercase().contains("content-length"), "{head}");
}

#[test]
fn a_v03_stream_carries_task_working_artifact_completed_then_closes() {
    let t = TempDir::new("sse-v03");
    let mut d = queue_door(&t, 2);
    let mut s = d.stream(
        "message/stream",
        send_params("message/stream", "sleep 1", json!(null)),
    );
    assert_stream_head(&s.head);

    let task = s.result(secs(5));
    assert_eq!(
        (task["kind"].as_str(), state_of(&task)),
        (Some("task"), "submitted"),
        "{task}"
    );
    let id = task["id"].as_str().unwrap().to_string();
    let ctx = task["contextId"].as_str().unwrap().to_string();
    assert!(is_id(&id, "tsk") && is_id(&ctx, "ctx"), "{task}");
    assert_eq!(
        task["history"][0]["parts"],
        json!([{"kind": "text", "text": "sleep 1"}])
    );

    let working = s.result(secs(5));
    assert_eq!(working["kind"], "status-update", "{working}");
    assert_eq!(
        (state_of(&working), working["final"].as_bool()),
        ("working", Some(false))
    );
    assert_eq!(
        (working["taskId"].as_str(), working["contextId"].as_str()),
        (Some(&*id), Some(&*ctx))
    );
    assert!(is_rfc3339_z(working["status"]["timestamp"].as_str().unwrap()));

    let art = s.result(secs(10));
    assert_eq!(
        art,
        json!({"kind": "artifact-update", "taskId": id, "contextId": ctx, "append": false, "lastChunk": true,
               "artifact": {"artifactId": format!("{id}-response"), "name": "response",
                            "parts": [{"kind": "text", "text": "done: sleep 1\n"}]}})
    );
    let done = s.result(secs(5));
    assert_eq!(done["kind"], "status-update", "{done}");
    assert_eq!(
        (state_of(&done), done["final"].as_bool()),
        ("completed", Some(true)),
        "{done}"
    );
    assert_eq!(done["taskId"], id.as_str());
    assert!(is_rfc3339_z(done["status"]["timestamp"].as_str().unwrap()));
    // The server closes the stream after the final event.
    s.expect_end(secs(5));
    assert_eq!(state_of(&d.task(&id)), "TASK_STATE_COMPLETED");
    assert_eq!(d.term().code(), Some(0));
}

#[test]
fn a_v10_stream_has_the_same_order_in_1_0_shapes() {
    let t = TempDir::new("sse-v10");
    let mut d = queue_door(&t, 2);
    for (text, answer, end) in [
        ("sleep 1", "done: sleep 1\n", "TASK_STATE_COMPLETED"),
        ("fail", "", "TASK_STATE_FAILED"),
    ] {
        let mut s = d.stream(
            "SendStreamingMessage",
            send_params("SendStreamingMessage", text, json!(null)),
        );
        assert_stream_head(&s.head);
        let mut results = vec![
            s.result(secs(5)),
            s.result(secs(5)),
            s.result(secs(10)),
            s.result(secs(5)),
        ];
        s.expect_end(secs(5));
        for r in &results {
            assert!(
                !has_key(r, "kind") && !has_key(r, "final"),
                "1.0 events carry no kind or final: {r}"
            );
            assert_eq!(r.as_object().unwrap().len(), 1, "one wrapper per event: {r}");
        }
        let task = results.remove(0);
        assert_eq!(state_of(&task["task"]), "TASK_STATE_SUBMITTED", "{task}");
        assert_eq!(task["task"]["history"][0]["role"], "ROLE_USER");
        let id = task["task"]["id"].as_str().unwrap();
        assert_eq!(
            state_of(&results[0]["statusUpdate"]),
            "TASK_STATE_WORKING",
            "{}",
            results[0]
        );
        assert_eq!(results[0]["statusUpdate"]["taskId"], id);
        let art = &results[1]["artifactUpdate"];
        assert_eq!(art["artifact"]["name"], "response", "{}", results[1]);
        assert_eq!(
            (art["append"].as_bool(), art["lastChunk"].as_bool()),
            (Some(false), Some(true))
        );
        let text = art["artifact"]["parts"][0]["text"].as_str().unwrap();
        if answer.is_empty() {
            assert!(!text.contains("done:"), "{text}");
        } else {
            assert_eq!(art["artifact"]["parts"], json!([{"text": answer}]));
        }
        let last = &results[2]["statusUpdate"];
        assert_eq!(state_of(last), end, "{}", results[2]);
        if end == "TASK_STATE_FAILED" {
            assert_eq!(last["status"]["message"]["role"], "ROLE_AGENT", "{last}");
        }
    }
    assert_eq!(d.term().code(), Some(0));
}

#[test]
fn a_long_stream_carries_keep_alive_comments_before_its_answer() {
    let t = TempDir::new("sse-keepalive");
    let mut d = queue_door(&t, 2);
    let began = Instant::now();
    let mut s = d.stream(
        "message/stream",
        send_params("message/stream", "sleep 8", json!(null)),
    );
    assert_eq!(state_of(&s.result(secs(5))), "submitted");
    assert_eq!(state_of(&s.result(secs(5))), "working");
    let mut comments = Vec::new();
    let art = loop {
        match s.next(secs(15)) {
            Some(Ev::Comment(c)) => comments.push((c, began.elapsed())),
            Some(Ev::Data(v)) => break v["result"].clone(),
            None => panic!("the stream ended before its answer"),
        }
    };
    assert_eq!(art["kind"], "artifact-update", "{art}");
    assert!(
        comments.len() >= 2,
        "keep-alives before an 8 s answer: {comments:?}"
    );
    assert!(comments.iter().all(|(c, _)| c == "keep-alive"), "{comments:?}");
    // At least one every 4 s (an SDK client gives up after 5 s of silence).
    let mut last = Duration::ZERO;
    for (_, at) in &comments {
        assert!(*at - last <= Duration::from_millis(4500), "{comments:?}");
        last = *at;
    }
    let done = s.result(secs(5));
    assert_eq!(
        (state_of(&done), done["final"].as_bool()),
        ("completed", Some(true))
    );
    s.expect_end(secs(5));
    assert_eq!(d.term().code(), Some(0));
}

#[test]
fn subscribing_to_a_running_task_starts_with_the_task_working() {
    let t = TempDir::new("sse-resubscribe");
    let mut d = queue_door(&t, 2);
    let id = d.submit("SendMessage", "sleep 2")["id"]
        .as_str()
        .unwrap()
        .to_string();
    d.wait_state(&id, "TASK_STATE_WORKING", secs(5));
    let mut old = d.stream("tasks/resubscribe", json!({ "id": id }));
    let mut new = d.stream("SubscribeToTask", json!({ "id": id }));
    assert_stream_head(&old.head);
    assert_stream_head(&new.head);

    let first = old.result(secs(5));
    assert_eq!(
        (first["kind"].as_str(), first["id"].as_str(), state_of(&first)),
        (Some("task"), Some(&*id), "working")
    );
    let art = old.result(secs(10));
    assert_eq!(art["kind"], "artifact-update", "{art}");
    assert_eq!(art["artifact"]["parts"][0]["text"], "done: sleep 2\n");
    let done = old.result(secs(5));
    assert_eq!(
        (state_of(&done), done["final"].as_bool()),
        ("completed", Some(true))
    );
    old.expect_end(secs(5));

    let first = new.result(secs(5));
    assert_eq!(first["task"]["id"], id.as_str(), "{first}");
    assert_eq!(state_of(&first["task"]), "TASK_STATE_WORKING");
    assert!(new.result(secs(10)).get("artifactUpdate").is_some());
    assert_eq!(
        state_of(&new.result(secs(5))["statusUpdate"]),
        "TASK_STATE_COMPLETED"
    );
    new.expect_end(secs(5));
    // Once it is over there is nothing to attach to.
    assert_eq!(
        d.error("SubscribeToTask", json!({ "id": id })),
        (
            -32004,
            format!("Task {id} is completed: there is nothing left to stream")
        )
    );
    assert_eq!(d.term().code(), Some(0));
}

/// A stream's next data event (keep-alives skipped), or `None` at its end.
fn next_data(s: &mut door::Sse, within: Duration) -> Option<Value> {
    loop {
        match s.next(within)? {
            Ev::Comment(_) => continue,
            Ev::Data(v) => return Some(v["result"].clone()),
        }
    }
}

#[test]
fn a_thousand_idle_streams_are_held_and_the_1025th_is_refused() {
    let limit = murmur::http::raise_fd_limit(4096);
    assert!(
        limit >= 2200,
        "this test needs about 1,100 descriptors; the limit is {limit}"
    );
    let t = TempDir::new("sse-thousand");
    let mut d = queue_door(&t, 2);
    let id = d.submit("SendMessage", "sleep 60")["id"]
        .as_str()
        .unwrap()
        .to_string();
    d.wait_state(&id, "TASK_STATE_WORKING", secs(5));

    let began = Instant::now();
    let mut streams = Vec::with_capacity(1024);
    for i in 0..1024 {
        let (method, v10) = if i < 1000 || i % 2 == 0 {
            ("tasks/resubscribe", false)
        } else {
            ("SubscribeToTask", true)
        };
        let mut s = d.stream(method, json!({ "id": id }));
        assert_eq!(s.status(), 200, "stream {i}: {}", s.head);
        let first = s.result(secs(10));
        let task = if v10 { &first["task"] } else { &first };
        assert_eq!(task["id"], id.as_str(), "stream {i}: {first}");
        assert!(
            matches!(state_of(task), "working" | "TASK_STATE_WORKING"),
            "stream {i}: {first}"
        );
        streams.push(s);
        if i == 999 {
            // A thousand held: the card still answers.
            assert_eq!(d.card_status(), 200);
        }
    }
    let opened = began.elapsed();

    // The 1,025th, of any kind, is refused with a JSON-RPC error (and makes no task).
    let refusal =
        "too many open streams: this capsule holds at most 1024; poll with tasks/get (GetTask) instead";
    for m in ["tasks/resubscribe", "SubscribeToTask"] {
        assert_eq!(
            d.error(m, json!({ "id": id })),
            (-32603, refusal.to_string()),
            "{m}"
        );
    }
    for m in ["message/stream", "SendStreamingMessage"] {
        assert_eq!(
            d.error(m, send_params(m, "one more", json!(null))),
            (-32603, refusal.to_string()),
            "{m}"
        );
    }
    assert_eq!(d.result("ListTasks", json!({}))["totalSize"], 1);
    assert_eq!(d.card_status(), 200);
    assert_eq!(state_of(&d.task(&id)), "TASK_STATE_WORKING");

    // Idle streams get keep-alives.
    for s in streams.iter_mut().step_by(256) {
        assert_eq!(s.next(secs(6)), Some(Ev::Comment("keep-alive".into())));
    }

    // Canceling the task ends every stream with its final status.
    let canceled = d.result("CancelTask", json!({ "id": id }));
    assert_eq!(state_of(&canceled), "TASK_STATE_CANCELED");
    for (i, s) in streams.iter_mut().enumerate() {
        let last =
            next_data(s, secs(10)).unwrap_or_else(|| panic!("stream {i} ended without its final event"));
        let status = last.get("statusUpdate").unwrap_or(&last);
        assert!(
            matches!(state_of(status), "canceled" | "TASK_STATE_CANCELED"),
            "stream {i}: {last}"
        );
        s.expect_end(secs(10));
    }
    drop(streams);
    // Room again: a new stream runs to its end.
    let mut s = d.stream(
        "message/stream",
        send_params("message/stream", "after the crowd", json!(null)),
    );
    let events: Vec<Value> = std::iter::from_fn(|| next_data(&mut s, secs(10))).collect();
    assert_eq!(events.len(), 4, "{events:?}");
    assert_eq!(
        events[2]["artifact"]["parts"][0]["text"],
        "done: after the crowd\n"
    );
    assert!(opened < secs(60), "opening 1,024 streams took {opened:?}");
    assert_eq!(d.term().code(), Some(0));
}

/// An answer of text that JSON escapes six times over (events near a stream's 1 MiB budget)
/// reaches a client that reads, whole, with the final status after it.
#[test]
fn a_large_answer_and_its_final_status_reach_a_reading_stream() {
    let t = TempDir::new("sse-large");
    let mut d = queue_door(&t, 2);
    for round in 0..3 {
        let text = "\u{1}".repeat(160 * 1024);
        let mut s = d.stream(
            "message/stream",
            send_params("message/stream", &text, json!(null)),
        );
        let events: Vec<Value> = (0..4).map(|_| s.result(secs(20))).collect();
        let kinds: Vec<&str> = events.iter().map(|e| e["kind"].as_str().unwrap_or("")).collect();
        assert_eq!(
            kinds,
            ["task", "status-update", "artifact-update", "status-update"],
            "round {round}"
        );
        let answer = events[2]["artifact"]["parts"][0]["text"].as_str().unwrap();
        assert_eq!(answer, format!("done: {text}\n"));
        assert_eq!(events[3]["final"], true);
    }
    d.term();
}
