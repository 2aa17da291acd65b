//! What the A2A door of a WASM capsule refuses, through the real `mur run`: every JSON-RPC
//! error code (each with HTTP 200), the HTTP-level refusals (415, 405, 404, 413), and bad
//! input of every kind with the door still serving its card afterwards.

use crate::common;

use common::door::{queue_door, send_params, state_of, Door};
use common::{body_of, status_of, TempDir};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn stop(mut d: Door) {
    assert_eq!(d.term().code(), Some(0));
}

/// The id, code and message of a JSON-RPC error answer (HTTP 200).
fn rpc_error(answer: &str) -> (Value, i64, String) {
    assert_eq!(status_of(answer), 200, "{answer}");
    let v: Value = serde_json::from_str(body_of(answer)).unwrap_or_else(|e| panic!("{e}: {answer}"));
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert!(v.get("result").is_none(), "{v}");
    (
        v["id"].clone(),
        v["error"]["code"].as_i64().unwrap(),
        v["error"]["message"].as_str().unwrap().to_string(),
    )
}

/// A2A 1.0 §9.5: an A2A-specific error answering a 1.0 call carries a
/// `google.rpc.ErrorInfo` in `error.data`; a 0.3 answer and JSON-RPC's own errors do not.
/// A part the capsule does not read is -32005 in both generations.
#[test]
fn a2a_errors_of_1_0_calls_carry_error_info_and_unread_parts_are_content_type_errors() {
    let t = TempDir::new("a2a-error-info");
    let d = queue_door(&t, 4);
    let info = |reason: &str| {
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason, "domain": "a2a-protocol.org"}])
    };
    let missing = json!({"id": "tsk_00000000000000000000000000000000"});
    let e = d.call_with("GetTask", missing.clone(), &[])["error"].clone();
    assert_eq!(e["code"], -32001, "{e}");
    assert_eq!(e["data"], info("TASK_NOT_FOUND"), "{e}");
    let e = d.call_with("tasks/get", missing, &[])["error"].clone();
    assert_eq!(e["code"], -32001, "{e}");
    assert!(e.get("data").is_none(), "a 0.3 answer: {e}");
    let e = d.call_with("GetTask", json!({"id": 5}), &[])["error"].clone();
    assert_eq!(e["code"], -32602, "{e}");
    assert!(e.get("data").is_none(), "JSON-RPC's own error: {e}");
    let e = d.call_with("CreateTaskPushNotificationConfig", json!({}), &[])["error"].clone();
    assert_eq!(e["data"], info("PUSH_NOTIFICATION_NOT_SUPPORTED"), "{e}");

    let raw = json!({"message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"raw": "aGk=", "mediaType": "application/octet-stream"}]}});
    let e = d.call_with("SendMessage", raw, &[])["error"].clone();
    assert_eq!(
        (&e["code"], &e["message"], &e["data"]),
        (
            &json!(-32005),
            &json!("Content type not supported: part 1 (file): this capsule takes text parts only (its card's defaultInputModes: text/plain)"),
            &info("CONTENT_TYPE_NOT_SUPPORTED")
        )
    );
    let file = json!({"message": {"messageId": "m", "role": "user",
        "parts": [{"kind": "file", "file": {"uri": "file:///etc/passwd"}}]}});
    assert_eq!(
        d.error("message/send", file),
        (
            -32005,
            "Content type not supported: a file part by reference (url/uri): the door fetches nothing; send the file's bytes inline".into()
        )
    );
    // Nothing of a refused message became a task.
    let listed = d.result("ListTasks", json!({}));
    assert_eq!(listed["tasks"], json!([]), "{listed}");
}

#[test]
fn every_json_rpc_error_comes_with_http_200() {
    let t = TempDir::new("a2a-errors");
    let d = queue_door(&t, 4);
    let raw = |body: &str| rpc_error(&d.post(body.as_bytes(), &[]));
    let null = Value::Null;

    // -32700, id null.
    for body in ["{not json", "", "{\"jsonrpc\":\"2.0\",\"id\":1,", "\u{0}\u{1}"] {
        assert_eq!(
            raw(body),
            (null.clone(), -32700, "Parse error".into()),
            "{body:?}"
        );
    }
    // -32600: not an object (a batch included), jsonrpc not "2.0", no method, a bad id.
    let not_object = (
        null.clone(),
        -32600,
        "Invalid Request: not a JSON object".to_string(),
    );
    for body in [
        "[]",
        r#"[{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}]"#,
        "\"send\"",
        "42",
        "null",
    ] {
        assert_eq!(raw(body), not_object, "{body}");
    }
    assert_eq!(
        raw(r#"{"jsonrpc":"1.0","id":7,"method":"tasks/get","params":{"id":"x"}}"#),
        (
            json!(7),
            -32600,
            "Invalid Request: jsonrpc must be \"2.0\"".into()
        )
    );
    assert_eq!(
        raw(r#"{"id":"r1","method":"tasks/get","params":{"id":"x"}}"#),
        (
            json!("r1"),
            -32600,
            "Invalid Request: jsonrpc must be \"2.0\"".into()
        )
    );
    assert_eq!(
        raw(r#"{"jsonrpc":"2.0","id":8,"method":5}"#),
        (
            json!(8),
            -32600,
            "Invalid Request: method must be a string".into()
        )
    );
    assert_eq!(
        raw(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"tasks/get","params":{"id":"x"}}"#),
        (
            null.clone(),
            -32600,
            "Invalid Request: id must be a string, a number or null".into()
        )
    );
    // -32601.
    for m in ["tasks/frobnicate", "message/sendd", "sendMessage", ""] {
        assert_eq!(d.error(m, json!({})), (-32601, "Method not found".into()), "{m}");
    }
    // -32602: wrong param types.
    let bad = |m: &str, p: Value, want: &str| {
        assert_eq!(
            d.error(m, p.clone()),
            (-32602, format!("Invalid params: {want}")),
            "{m} {p}"
        );
    };
    bad(
        "message/send",
        json!({"message": {"messageId": "m", "role": "user", "parts": "hello"}}),
        "message parts must be an array",
    );
    bad(
        "SendMessage",
        json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": {"text": "x"}}}),
        "message parts must be an array",
    );
    bad(
        "message/send",
        json!({"message": "hello"}),
        "message must be an object",
    );
    bad("message/send", json!({}), "message is required");
    bad(
        "message/send",
        json!({"message": {"role": "user", "parts": [{"kind": "text", "text": "x"}]}}),
        "messageId is required",
    );
    bad(
        "message/send",
        json!({"message": {"messageId": "m", "role": "agent", "parts": [{"kind": "text", "text": "x"}]}}),
        "message role must be user",
    );
    bad(
        "message/send",
        json!({"message": {"messageId": "m", "parts": [{"kind": "text", "text": "x"}]}}),
        "message role is required",
    );
    bad(
        "SendMessage",
        json!({"message": {"messageId": "m", "parts": [{"text": "x"}]}}),
        "message role is required",
    );
    bad(
        "message/send",
        json!({"message": {"messageId": "m", "role": "user", "parts": [{"text": "x"}]}}),
        "a part's kind is required",
    );
    bad(
        "ListTasks",
        json!({"pageSize": 0}),
        "pageSize must be between 1 and 100, got 0",
    );
    bad(
        "ListTasks",
        json!({"pageSize": 101}),
        "pageSize must be between 1 and 100, got 101",
    );
    bad(
        "message/send",
        json!({"message": {"messageId": "m", "role": "user", "parts": []}}),
        "message must have 1 to 64 parts",
    );
    let mut p = send_params("message/send", "x", Value::Null);
    p["configuration"] = json!({"blocking": "yes"});
    bad("message/send", p, "blocking must be a boolean");
    let mut p = send_params("SendMessage", "x", Value::Null);
    p["configuration"] = json!({"returnImmediately": 1});
    bad("SendMessage", p, "returnImmediately must be a boolean");
    let mut p = send_params("SendMessage", "x", Value::Null);
    p["configuration"] = json!([]);
    bad("SendMessage", p, "configuration must be an object");
    let big = "a".repeat(300 * 1024);
    bad(
        "message/send",
        send_params("message/send", &big, Value::Null),
        "message text exceeds 262144 bytes",
    );
    bad("tasks/get", json!({}), "id is required");
    bad("tasks/get", json!({"id": ""}), "id is required");
    bad("GetTask", json!({"id": 5}), "id must be a string");
    bad(
        "tasks/get",
        json!({"id": "x", "historyLength": -1}),
        "historyLength must be a non-negative integer",
    );
    bad("tasks/cancel", json!({"id": ["x"]}), "id must be a string");
    bad("CancelTask", json!({}), "id is required");
    bad("tasks/resubscribe", json!({"id": null}), "id is required");
    bad("SubscribeToTask", json!({"id": true}), "id must be a string");
    bad(
        "ListTasks",
        json!({"pageSize": "ten"}),
        "pageSize must be a non-negative integer",
    );
    bad(
        "ListTasks",
        json!({"includeArtifacts": "yes"}),
        "includeArtifacts must be a boolean",
    );
    bad("tasks/get", json!([]), "params must be an object");
    bad("GetTask", Value::Null, "params must be an object");

    // -32001: unknown task, every method that names one.
    for m in [
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "GetTask",
        "CancelTask",
        "SubscribeToTask",
    ] {
        assert_eq!(
            d.error(m, json!({"id": "tsk_00000000000000000000000000000000"})),
            (-32001, "Task not found".into()),
            "{m}"
        );
    }
    let mut p = send_params("message/send", "x", Value::Null);
    p["message"]["taskId"] = json!("tsk_unknown");
    assert_eq!(d.error("message/send", p), (-32001, "Task not found".into()));

    // -32002: a completed task is not cancelable.
    let done = d.result("SendMessage", send_params("SendMessage", "finished", Value::Null));
    let done_id = done["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(state_of(&done["task"]), "TASK_STATE_COMPLETED", "{done}");
    for m in ["tasks/cancel", "CancelTask"] {
        assert_eq!(
            d.error(m, json!({ "id": done_id })),
            (-32002, "Task cannot be canceled: it is completed".into()),
            "{m}"
        );
    }
    // -32003: push notifications, both generations' names.
    for m in [
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        assert_eq!(
            d.error(m, json!({"id": done_id, "taskId": done_id})),
            (-32003, "Push notifications are not supported".into()),
            "{m}"
        );
    }
    // -32004: nothing left to stream from a completed task; no follow-up messages.
    for m in ["SubscribeToTask", "tasks/resubscribe"] {
        assert_eq!(
            d.error(m, json!({ "id": done_id })),
            (
                -32004,
                format!("Task {done_id} is completed: there is nothing left to stream")
            ),
            "{m}"
        );
    }
    let mut p = send_params("message/send", "more", Value::Null);
    p["message"]["taskId"] = json!(done_id);
    assert_eq!(
        d.error("message/send", p),
        (
            -32004,
            "Unsupported operation: a task takes no further messages; send a new message without taskId"
                .into()
        )
    );
    // -32007: no extended card.
    assert_eq!(
        d.error("GetExtendedAgentCard", json!({})),
        (-32007, "Extended agent card is not configured".into())
    );

    // -32009: a 1.0 method without A2A-Version, or naming another version.
    let (id, body) = d.envelope("SendMessage", &send_params("SendMessage", "x", Value::Null));
    assert_eq!(
        rpc_error(&d.post(&body, &[])),
        (
            json!(id),
            -32009,
            "A2A version 0.3 (no A2A-Version header) is not supported by SendMessage".into()
        )
    );
    assert_eq!(
        rpc_error(&d.post(&body, &[("A2A-Version", "2.0")])),
        (
            json!(id),
            -32009,
            "A2A version \"2.0\" is not supported by SendMessage".into()
        )
    );
    for (m, v) in [("GetTask", "0.3"), ("ListTasks", "1"), ("CancelTask", "1.1")] {
        let (code, message) = d.error_with(m, json!({ "id": done_id }), &[("A2A-Version", v)]);
        assert_eq!(
            (code, message),
            (-32009, format!("A2A version \"{v}\" is not supported by {m}"))
        );
    }
    // 1.0.x is 1.0; a 0.3 method is not version-checked.
    assert_eq!(
        state_of(&d.result("GetTask", json!({ "id": done_id }))),
        "TASK_STATE_COMPLETED"
    );
    let v = d.call_with("GetTask", json!({ "id": done_id }), &[("A2A-Version", "1.0.3")]);
    assert_eq!(state_of(&v["result"]), "TASK_STATE_COMPLETED", "{v}");
    let v = d.call_with("tasks/get", json!({ "id": done_id }), &[("A2A-Version", "1.0")]);
    assert_eq!(state_of(&v["result"]), "completed", "{v}");

    // HTTP-level refusals: 415 without a JSON content type, 405 for GET /, 404 elsewhere.
    let json_body = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"id":"x"}}"#;
    let not_json = r#"{"error":{"code":-32005,"message":"Content type not supported: a POST body must be sent with content-type: application/json"},"id":null,"jsonrpc":"2.0"}"#;
    for ct in [
        "",
        "content-type: text/plain\r\n",
        "content-type: application/x-www-form-urlencoded\r\n",
    ] {
        let answer = d.raw(
            format!(
                "POST / HTTP/1.1\r\nhost: {}\r\n{ct}content-length: {}\r\n\r\n{json_body}",
                d.host(),
                json_body.len()
            )
            .as_bytes(),
        );
        assert_eq!((status_of(&answer), body_of(&answer)), (415, not_json), "{ct:?}");
    }
    // Naming A2A 1.0, the error carries its ErrorInfo.
    let answer = d.raw(
        format!(
            "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: text/plain\r\na2a-version: 1.0\r\ncontent-length: {}\r\n\r\n{json_body}",
            d.host(),
            json_body.len()
        )
        .as_bytes(),
    );
    assert_eq!(status_of(&answer), 415, "{answer}");
    let v: Value = serde_json::from_str(body_of(&answer)).unwrap();
    assert_eq!(v["error"]["code"], -32005, "{v}");
    assert_eq!(
        v["error"]["data"][0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED",
        "{v}"
    );
    let answer = d.get("/");
    assert_eq!(status_of(&answer), 405, "{answer}");
    assert!(answer.contains("\r\nallow: POST\r\n"), "{answer}");
    assert_eq!(
        body_of(&answer),
        r#"{"error":"method not allowed: A2A calls are POST /"}"#
    );
    let answer = d.raw(
        format!(
            "POST /tasks HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{json_body}",
            d.host(),
            json_body.len()
        )
        .as_bytes(),
    );
    assert_eq!(
        (status_of(&answer), body_of(&answer)),
        (404, r#"{"error":"not found"}"#)
    );
    assert_eq!(status_of(&d.get("/.well-known/nothing")), 404);
    assert_eq!(d.card_status(), 200);
    stop(d);
}

/// Write `bytes` on a fresh connection (a write the server cuts short is fine) and read
/// whatever answer comes before it closes.
fn blast(d: &Door, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let _ = s.write_all(bytes);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Deterministic noise.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
fn bad_input_of_every_kind_leaves_the_door_serving() {
    let t = TempDir::new("a2a-bad-input");
    let mut d = queue_door(&t, 2);

    // Unparsable JSON: deep nesting, invalid UTF-8, truncation, trailing garbage.
    let deep = "[".repeat(100_000);
    let deep_object = "{\"a\":".repeat(50_000);
    let bad: [&[u8]; 5] = [
        deep.as_bytes(),
        deep_object.as_bytes(),
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\",\"params\":{\"id\":\"\xff\xfe\"}}",
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tasks/get\"} trailing",
        b"\xef\xbb\xbf\xff",
    ];
    for body in bad {
        assert_eq!(
            rpc_error(&d.post(body, &[])),
            (Value::Null, -32700, "Parse error".into())
        );
    }
    // Wrong types everywhere.
    let long_id = "i".repeat(300);
    assert_eq!(
        rpc_error(&d.post(
            format!(r#"{{"jsonrpc":"2.0","id":"{long_id}","method":"tasks/get"}}"#).as_bytes(),
            &[]
        )),
        (
            Value::Null,
            -32600,
            "Invalid Request: id must be a string, a number or null".into()
        )
    );
    for (m, p) in [
        (
            "message/send",
            json!({"message": {"messageId": 1, "role": "user", "parts": []}}),
        ),
        (
            "message/send",
            json!({"message": {"messageId": "m", "parts": [1, 2, 3]}}),
        ),
        (
            "message/send",
            json!({"message": {"messageId": "m", "parts": [{"kind": "text", "text": 5}]}}),
        ),
        (
            "SendMessage",
            json!({"message": {"messageId": "m", "parts": [{"text": "x"}], "contextId": 5}}),
        ),
        (
            "SendMessage",
            json!({"message": {"messageId": "m", "parts": [{"text": "x"}], "taskId": {}}}),
        ),
        ("GetTask", json!({"id": "x", "historyLength": "many"})),
        ("ListTasks", json!({"statusTimestampAfter": "yesterday"})),
        ("ListTasks", json!({"contextId": ["a"]})),
    ] {
        let (code, message) = d.error(m, p.clone());
        assert_eq!(code, -32602, "{m} {p}: {message}");
        assert!(message.starts_with("Invalid params: "), "{message}");
    }
    let many_parts: Vec<Value> = (0..65).map(|i| json!({"text": format!("part {i}")})).collect();
    assert_eq!(
        d.error(
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": many_parts}})
        ),
        (-32602, "Invalid params: message must have 1 to 64 parts".into())
    );
    // A body of exactly 1 MiB is read (its text is still too long); one byte more is 413.
    let mut body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": send_params("message/send", "", json!(null))}))
    .unwrap();
    let pad = (1 << 20) - body.len();
    let at = body.windows(9).position(|w| w == b"\"text\":\"\"").unwrap() + 8;
    body.splice(at..at, std::iter::repeat_n(b'x', pad));
    assert_eq!(body.len(), 1 << 20);
    assert_eq!(
        rpc_error(&d.post(&body, &[])),
        (
            json!(1),
            -32602,
            "Invalid params: message text exceeds 262144 bytes".into()
        )
    );
    body.insert(at, b'x');
    let answer = blast(&d, &d.post_bytes(&body, &[]));
    assert_eq!(
        (status_of(&answer), body_of(&answer)),
        (413, r#"{"error":"request body too large"}"#)
    );
    // A 2 MiB body: refused on its declared length, whether or not the client sends it.
    let head = format!(
        "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        d.host(),
        2 << 20
    );
    let answer = d.raw(head.as_bytes());
    assert_eq!(
        (status_of(&answer), body_of(&answer)),
        (413, r#"{"error":"request body too large"}"#)
    );
    let mut whole = head.into_bytes();
    whole.extend(std::iter::repeat_n(b'{', 2 << 20));
    let answer = blast(&d, &whole);
    assert!(answer.is_empty() || status_of(&answer) == 413, "{answer}");
    // Garbage: noise as a request, noise as a body, a header flood, a bare line, idle sockets.
    let idle: Vec<TcpStream> = (0..50).map(|_| TcpStream::connect(d.addr).unwrap()).collect();
    for seed in 0..40 {
        let answer = blast(&d, &noise(seed, 32 * 1024));
        assert!(
            answer.is_empty() || matches!(status_of(&answer), 400 | 431),
            "{answer}"
        );
        let answer = d.post(&noise(seed + 1000, 4096), &[]);
        assert_eq!(rpc_error(&answer).1, -32700);
    }
    let mut flood = format!("POST / HTTP/1.1\r\nhost: {}\r\n", d.host());
    for i in 0..200 {
        flood.push_str(&format!("x-garbage-{i}: {}\r\n", "z".repeat(60)));
    }
    flood.push_str("\r\n");
    assert_eq!(status_of(&blast(&d, flood.as_bytes())), 431);
    assert_eq!(status_of(&blast(&d, b"\x00\x01\x02 / HTTP/1.1\r\n\r\n")), 400);
    assert_eq!(status_of(&blast(&d, b"GET / HTTP/9.9\r\n\r\n")), 400);

    // Still serving: the card, a task, nothing made of the garbage, the process alive.
    assert_eq!(d.card_status(), 200);
    let done = d.result(
        "SendMessage",
        send_params("SendMessage", "still here", json!(null)),
    );
    assert_eq!(state_of(&done["task"]), "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(d.result("ListTasks", json!({}))["totalSize"], 1);
    drop(idle);
    assert!(d.alive());
    assert_eq!(d.card_status(), 200);
    stop(d);
}
