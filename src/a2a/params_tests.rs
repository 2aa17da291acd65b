//! Tests of `params` through `rpc::parse_call`: invalid params, caps, ListTasks filters.

use super::*;
use crate::a2a::rpc::*;
use crate::a2a::shapes::State;
use serde_json::{json, Value};

use crate::a2a::test_support::{call, code, req, V1};

#[test]
fn list_parses_filters_and_caps() {
    let c = call(req("ListTasks", json!({})), V1).unwrap();
    let Op::List(l) = c.op else { panic!() };
    assert_eq!(
        l,
        ListRequest {
            context_id: None,
            status: None,
            page_size: DEFAULT_PAGE_SIZE,
            page_token: None,
            history_length: None,
            status_after_ms: None,
            include_artifacts: false,
        }
    );
    let c = call(
        req(
            "ListTasks",
            json!({"contextId": "ctx_1", "status": "TASK_STATE_WORKING", "pageSize": 100,
                "pageToken": "p2", "historyLength": 0, "statusTimestampAfter": "2026-01-01T00:00:00Z",
                "includeArtifacts": true}),
        ),
        V1,
    )
    .unwrap();
    let Op::List(l) = c.op else { panic!() };
    assert_eq!(l.page_size, MAX_PAGE_SIZE);
    assert_eq!(l.status, Some(State::Working));
    assert_eq!(l.status_after_ms, Some(1_767_225_600_000));
    assert_eq!(
        (l.context_id.as_deref(), l.page_token.as_deref()),
        (Some("ctx_1"), Some("p2"))
    );
    assert!(l.include_artifacts && l.history_length == Some(0));
    for bad in [
        json!({"status": "TASK_STATE_BOGUS"}),
        json!({"pageSize": -1}),
        json!({"pageSize": 0}),
        json!({"pageSize": 101}),
        json!({"pageSize": 5000}),
        json!({"pageSize": "x"}),
        json!({"statusTimestampAfter": "yesterday"}),
        json!({"includeArtifacts": "yes"}),
        json!({"contextId": 7}),
    ] {
        assert_eq!(code(req("ListTasks", bad.clone()), V1).0, INVALID_PARAMS, "{bad}");
    }
    // No ListTasks in 0.3.
    assert_eq!(code(req("tasks/list", json!({})), None).0, METHOD_NOT_FOUND);
}

#[test]
fn invalid_params_paths() {
    let m = |msg: Value| json!({"message": msg});
    let ok = json!({"messageId": "m", "role": "user", "parts": [{"text": "x"}]});
    let mut cases = vec![
        json!(null),
        json!([]),
        json!("s"),
        json!({}),
        json!({"message": "x"}),
        m(json!({"role": "user", "parts": [{"text": "x"}]})),
        m(json!({"messageId": "", "parts": [{"text": "x"}]})),
        m(json!({"messageId": 5, "parts": [{"text": "x"}]})),
        m(json!({"messageId": "m", "role": "agent", "parts": [{"text": "x"}]})),
        m(json!({"messageId": "m", "role": 1, "parts": [{"text": "x"}]})),
        m(json!({"messageId": "m", "parts": []})),
        m(json!({"messageId": "m", "parts": {"text": "x"}})),
        m(json!({"messageId": "m", "parts": ["x"]})),
        m(json!({"messageId": "m", "parts": [{"text": 5}]})),
        m(json!({"messageId": "m", "parts": [{"data": {"a": 1}}]})),
        m(json!({"messageId": "m", "parts": [{"kind": "file", "text": "x"}]})),
        m(json!({"messageId": "m", "parts": [{"text": "x"}], "contextId": 1})),
        m(json!({"messageId": "m", "parts": [{"text": "x"}], "taskId": []})),
        json!({"message": ok, "configuration": "x"}),
        json!({"message": ok, "configuration": {"returnImmediately": "yes"}}),
        json!({"message": ok, "configuration": {"historyLength": -2}}),
    ];
    cases.push(m(
        json!({"messageId": "m", "parts": vec![json!({"text": "x"}); MAX_PARTS + 1]}),
    ));
    cases.push(m(
        json!({"messageId": "m".repeat(MAX_ID + 1), "parts": [{"text": "x"}]}),
    ));
    for p in &cases {
        for (method, ver) in [("SendMessage", V1), ("SendStreamingMessage", V1)] {
            assert_eq!(
                code(req(method, p.clone()), ver),
                (INVALID_PARAMS, json!("abc")),
                "{p}"
            );
        }
    }
    let c03 = json!({"message": ok, "configuration": {"blocking": "no"}});
    assert_eq!(code(req("message/send", c03), None).0, INVALID_PARAMS);
    for p in [
        json!({}),
        json!({"id": ""}),
        json!({"id": 3}),
        json!({"id": "t", "historyLength": "x"}),
        json!(null),
    ] {
        for (method, ver) in [("GetTask", V1), ("tasks/cancel", None), ("SubscribeToTask", V1)] {
            assert_eq!(
                code(req(method, p.clone()), ver).0,
                INVALID_PARAMS,
                "{method} {p}"
            );
        }
    }
}

#[test]
fn text_cap_enforced() {
    let at = "a".repeat(MAX_TEXT);
    let text = |t: &str| json!({"kind": "text", "text": t});
    let p = json!({"message": {"messageId": "m", "role": "user", "parts": [text(&at)]}});
    assert!(call(req("message/send", p), None).is_ok());
    let over = "a".repeat(MAX_TEXT / 2);
    let p = json!({"message": {"messageId": "m", "role": "user", "parts": [text(&over), text(&over)]}});
    let e = call(req("message/send", p), None).unwrap_err();
    assert_eq!(e.code, INVALID_PARAMS);
    assert!(e.message.contains("exceeds"));
}

#[test]
fn a_message_needs_its_role_and_a_0_3_part_its_kind() {
    let send = |gen: Option<&str>, m: serde_json::Value| {
        let method = if gen.is_some() {
            "SendMessage"
        } else {
            "message/send"
        };
        call(req(method, json!({"message": m})), gen)
    };
    let no_role = json!({"messageId": "m", "parts": [{"kind": "text", "text": "x"}]});
    for gen in [None, V1] {
        let e = send(gen, no_role.clone()).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (INVALID_PARAMS, "Invalid params: message role is required")
        );
    }
    let no_kind = json!({"messageId": "m", "role": "user", "parts": [{"text": "x"}]});
    let e = send(None, no_kind.clone()).unwrap_err();
    assert_eq!(
        (e.code, e.message.as_str()),
        (INVALID_PARAMS, "Invalid params: a part's kind is required")
    );
    // 1.0 parts carry no kind.
    let v10 = json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]});
    assert!(send(V1, v10).is_ok());
    let empty = json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"mediaType": "text/plain"}]});
    assert_eq!(send(V1, empty).unwrap_err().code, INVALID_PARAMS);
}

#[test]
fn files_by_reference_are_content_type_not_supported_and_other_parts_are_read() {
    let cases = [
        (
            None,
            json!({"kind": "file", "file": {"uri": "http://x/y", "mimeType": "image/png"}}),
        ),
        (V1, json!({"url": "http://x/y"})),
    ];
    for (gen, part) in cases {
        let (role, method) = if gen.is_some() {
            ("ROLE_USER", "SendMessage")
        } else {
            ("user", "message/send")
        };
        let m = json!({"message": {"messageId": "m", "role": role,
            "parts": [{"kind": "text", "text": "x"}, part]}});
        let e = call(req(method, m), gen).unwrap_err();
        assert_eq!(e.code, CONTENT_TYPE_NOT_SUPPORTED);
        assert_eq!(
            e.message,
            "Content type not supported: a file part by reference (url/uri): the door fetches nothing; send the file's bytes inline"
        );
        let data = &e.to_json()["error"]["data"];
        if gen.is_some() {
            assert_eq!(data[0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED");
        } else {
            assert!(data.is_null(), "0.3 answers carry no ErrorInfo: {data}");
        }
    }
    let m = json!({"message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"text": "a"}, {"raw": "aGk=", "filename": "f"}, {"text": "b"}, {"data": {}}]}});
    let Op::Send(s) = call(req("SendMessage", m), V1).unwrap().op else {
        panic!("not a send")
    };
    assert_eq!(s.text, "a\nb");
    let kinds: Vec<&str> = s.parts.iter().map(|p| p.kind.as_str()).collect();
    assert_eq!(kinds, ["text", "file", "text", "data"]);
}

#[test]
fn a_message_on_a_task_keeps_its_data_parts_for_the_waiting_task() {
    for (gen, part, method, role) in [
        (
            None,
            json!({"kind": "data", "data": {"approve": true}}),
            "message/send",
            "user",
        ),
        (V1, json!({"data": {"approve": true}}), "SendMessage", "ROLE_USER"),
    ] {
        let m = json!({"message": {"messageId": "m", "role": role, "taskId": "tsk_1",
            "parts": [part.clone(), {"kind": "text", "text": "approve"}, {"kind": "text", "text": "b"}]}});
        let c = call(req(method, m), gen).unwrap();
        let Op::Send(s) = c.op else { panic!() };
        assert_eq!(s.data, [json!({"approve": true})]);
        assert_eq!(
            (s.text.as_str(), s.task_id.as_deref()),
            ("approve\nb", Some("tsk_1"))
        );
        assert!(s.parts.iter().all(|p| p.kind == Kind::Text), "{:?}", s.parts);
        // Without a taskId the same part is input, whether the capsule takes it is the door's.
        let m = json!({"message": {"messageId": "m", "role": role, "parts": [part]}});
        let c = call(req(method, m), gen).unwrap();
        let Op::Send(s) = c.op else { panic!() };
        assert!(s.data.is_empty());
        assert_eq!(s.parts.len(), 1);
        assert_eq!(s.parts[0].kind, Kind::Data);
        assert_eq!(s.parts[0].bytes, b"{\"approve\":true}\n");
    }
}

#[test]
fn history_length_is_also_taken_by_its_proto_field_name() {
    let get = |p: Value| match call(req("GetTask", p), V1).unwrap().op {
        Op::Get(t) => t.history_length,
        _ => panic!(),
    };
    assert_eq!(get(json!({"id": "t", "history_length": 1})), Some(1));
    assert_eq!(
        get(json!({"id": "t", "historyLength": 2, "history_length": 1})),
        Some(2)
    );
    assert_eq!(get(json!({"id": "t"})), None);
    assert!(call(req("GetTask", json!({"id": "t", "history_length": -1})), V1).is_err());
}
