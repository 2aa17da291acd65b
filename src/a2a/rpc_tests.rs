//! Tests of `rpc`: every error code, the SDK's request bodies, caps, odd input.

use super::*;
use crate::a2a::Generation::{V03, V10};

use crate::a2a::test_support::{call, code, req, V1};

#[test]
fn sdk_v10_send_bodies_parse() {
    for (cfg, ri) in [(json!({"returnImmediately": true}), true), (json!({}), false)] {
        let c = call(
            req(
                "SendMessage",
                json!({"message": {"messageId": "9f0c", "role": "ROLE_USER", "parts": [{"text": "hello"}]},
                    "configuration": cfg}),
            ),
            V1,
        )
        .unwrap();
        assert_eq!(c.id, json!("abc"));
        assert_eq!(c.generation, V10);
        let Op::Send(s) = c.op else { panic!() };
        assert_eq!((s.message_id.as_str(), s.text.as_str()), ("9f0c", "hello"));
        assert_eq!(s.return_immediately, ri);
        assert_eq!((s.context_id, s.task_id), (None, None));
    }
    let c = call(
        req(
            "SendStreamingMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}, {"text": "b"}],
                "contextId": "ctx_9"}, "configuration": {}}),
        ),
        Some("1.0.0"),
    )
    .unwrap();
    let Op::Stream(s) = c.op else { panic!() };
    assert_eq!(s.text, "a\nb");
    assert_eq!(s.context_id.as_deref(), Some("ctx_9"));
}

#[test]
fn sdk_v03_send_bodies_parse() {
    for (blocking, ri) in [(false, true), (true, false)] {
        for method in ["message/send", "message/stream"] {
            let c = call(
                req(
                    method,
                    json!({"message": {"kind": "message", "messageId": "m1",
                        "parts": [{"kind": "text", "text": "hi"}], "role": "user"},
                        "configuration": {"blocking": blocking}}),
                ),
                Some("0.3"),
            )
            .unwrap();
            assert_eq!(c.generation, V03);
            let (Op::Send(s) | Op::Stream(s)) = c.op else {
                panic!()
            };
            assert_eq!(s.return_immediately, ri);
            assert_eq!(s.text, "hi");
        }
    }
    // 0.3 without the header, and the spec era's bare message as params.
    let c = call(
        req(
            "message/send",
            json!({"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x"}], "taskId": "tsk_1"}),
        ),
        None,
    )
    .unwrap();
    let Op::Send(s) = c.op else { panic!() };
    assert_eq!(
        (s.task_id.as_deref(), s.return_immediately),
        (Some("tsk_1"), false)
    );
}

#[test]
fn task_methods_parse() {
    let c = call(req("GetTask", json!({"id": "tsk_1", "historyLength": 2})), V1).unwrap();
    assert_eq!(
        c.op,
        Op::Get(TaskRequest {
            id: "tsk_1".into(),
            history_length: Some(2)
        })
    );
    let c = call(
        req("tasks/get", json!({"id": "tsk_1", "historyLength": "3"})),
        None,
    )
    .unwrap();
    assert_eq!(
        c.op,
        Op::Get(TaskRequest {
            id: "tsk_1".into(),
            history_length: Some(3)
        })
    );
    for (m, ver) in [("CancelTask", V1), ("tasks/cancel", None)] {
        assert!(matches!(
            call(req(m, json!({"id": "t"})), ver).unwrap().op,
            Op::Cancel(_)
        ));
    }
    for (m, ver) in [("SubscribeToTask", V1), ("tasks/resubscribe", None)] {
        assert!(matches!(
            call(req(m, json!({"id": "t"})), ver).unwrap().op,
            Op::Subscribe(_)
        ));
    }
    let c = call(req("GetTask", json!({"id": "t", "historyLength": 1e12})), V1);
    assert_eq!(c.unwrap_err().code, INVALID_PARAMS);
    let c = call(
        req("GetTask", json!({"id": "t", "historyLength": 99_999_999_999u64})),
        V1,
    )
    .unwrap();
    assert_eq!(
        c.op,
        Op::Get(TaskRequest {
            id: "t".into(),
            history_length: Some(u32::MAX)
        })
    );
}

#[test]
fn parse_error_has_null_id() {
    for b in [&b"{"[..], b"", b"not json", b"{\"id\":1,", b"\xff\xfe"] {
        let e = parse_call(b, V1).unwrap_err();
        assert_eq!((e.code, e.id.clone()), (PARSE_ERROR, Value::Null));
        assert_eq!(
            e.to_json(),
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}})
        );
    }
}

#[test]
fn invalid_requests() {
    for v in [
        json!([]),
        json!([req("GetTask", json!({"id": "t"}))]),
        json!("x"),
        json!(1),
        json!(null),
    ] {
        assert_eq!(code(v, V1), (INVALID_REQUEST, Value::Null));
    }
    for id in [json!({}), json!([1]), json!(true), json!("x".repeat(MAX_ID + 1))] {
        let v = json!({"jsonrpc": "2.0", "id": id, "method": "GetTask", "params": {"id": "t"}});
        assert_eq!(code(v, V1), (INVALID_REQUEST, Value::Null));
    }
    // jsonrpc wrong or missing, method not a string: the id is echoed.
    for v in [
        json!({"jsonrpc": "1.0", "id": 7, "method": "GetTask"}),
        json!({"id": 7, "method": "GetTask"}),
        json!({"jsonrpc": 2.0, "id": 7, "method": "GetTask"}),
        json!({"jsonrpc": "2.0", "id": 7, "method": 5}),
        json!({"jsonrpc": "2.0", "id": 7}),
    ] {
        assert_eq!(code(v, V1), (INVALID_REQUEST, json!(7)));
    }
    let big = vec![b' '; MAX_BODY + 1];
    assert_eq!(parse_call(&big, V1).unwrap_err().code, INVALID_REQUEST);
}

#[test]
fn ids_of_each_kind_echoed() {
    for id in [json!("u-1"), json!(42), json!(-1.5), json!(null)] {
        let v = json!({"jsonrpc": "2.0", "id": id, "method": "tasks/get", "params": {"id": "t"}});
        assert_eq!(call(v, None).unwrap().id, id);
    }
    let v = json!({"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": "t"}});
    assert_eq!(call(v, None).unwrap().id, Value::Null);
}

#[test]
fn method_table_codes() {
    for m in ["nope", "", "message/Send", "sendMessage", "stream/watch"] {
        assert_eq!(code(req(m, json!({})), V1), (METHOD_NOT_FOUND, json!("abc")));
    }
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
        // Known methods: the door answers -32003 itself when its capsule allows no webhook.
        assert!(matches!(classify(m), Ok((_, Method::Push(_)))), "{m}");
        assert_eq!(code(req(m, json!({})), V1).0, INVALID_PARAMS, "{m}");
    }
    assert_eq!(
        code(req("tasks/pushNotificationConfig/other", json!({})), V1).0,
        METHOD_NOT_FOUND
    );
    // The extended card is a served method: the door decides whether it has one.
    // No version header and no params needed: it is answered before both checks.
    for m in ["GetExtendedAgentCard", "agent/getAuthenticatedExtendedCard"] {
        let parsed = call(req(m, json!({})), V1).unwrap();
        assert_eq!(parsed.op, Op::ExtendedCard, "{m}");
        let bare = json!({"jsonrpc": "2.0", "id": 1, "method": m});
        assert_eq!(call(bare, None).unwrap().op, Op::ExtendedCard, "{m}");
    }
}

#[test]
fn version_check_for_v10_only() {
    for ver in [
        None,
        Some("0.3"),
        Some("2.0"),
        Some(""),
        Some("1"),
        Some("1.1"),
        Some("1.0.x"),
        Some("junk"),
    ] {
        let e = call(req("GetTask", json!({"id": "t"})), ver).unwrap_err();
        assert_eq!((e.code, e.id), (VERSION_NOT_SUPPORTED, json!("abc")), "{ver:?}");
    }
    for ver in ["1.0", " 1.0 ", "1.0.0", "1.0.3"] {
        assert!(
            call(req("GetTask", json!({"id": "t"})), Some(ver)).is_ok(),
            "{ver}"
        );
    }
    for ver in [None, Some("1.0"), Some("9")] {
        assert!(call(req("tasks/get", json!({"id": "t"})), ver).is_ok());
    }
    let e = call(req("GetTask", json!({"id": "t"})), Some(&"9".repeat(10_000))).unwrap_err();
    assert!(e.message.len() < 200);
}

#[test]
fn responses_render() {
    assert_eq!(
        result_response(&json!(1), json!({"task": {}})),
        json!({"jsonrpc": "2.0", "id": 1, "result": {"task": {}}})
    );
    assert_eq!(
        error_response(
            &json!("x"),
            TASK_NOT_FOUND,
            "Task not found",
            Some(json!([{"a": 1}]))
        ),
        json!({"jsonrpc": "2.0", "id": "x", "error": {"code": -32001, "message": "Task not found", "data": [{"a": 1}]}})
    );
    let e = RpcError::new(&json!(3), TASK_NOT_CANCELABLE, "Task cannot be canceled");
    let back: Value = serde_json::from_slice(&to_body(&e.to_json())).unwrap();
    assert_eq!(
        back,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32002, "message": "Task cannot be canceled"}})
    );
    assert!(CODES.contains(&UNSUPPORTED_OPERATION));
}

#[test]
fn odd_input_never_panics() {
    let odd = [
        json!(null),
        json!(true),
        json!(-1),
        json!(1.5),
        json!("s"),
        json!([]),
        json!({}),
        json!([{}]),
        json!({"a": {"b": []}}),
    ];
    let methods = [
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "CancelTask",
        "ListTasks",
        "SubscribeToTask",
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
    ];
    for m in methods {
        for o in &odd {
            let _ = call(req(m, o.clone()), V1);
            for key in [
                "message",
                "configuration",
                "id",
                "historyLength",
                "pageSize",
                "status",
                "statusTimestampAfter",
                "parts",
            ] {
                let _ = call(req(m, json!({key: o})), V1);
                let _ = call(
                    req(
                        m,
                        json!({"message": {"messageId": "m", key: o, "parts": [{"text": "x"}]}}),
                    ),
                    V1,
                );
                let _ = call(
                    req(
                        m,
                        json!({"message": {"messageId": "m", "parts": [{key: o, "text": "x"}]}}),
                    ),
                    V1,
                );
            }
        }
    }
    let deep = "[".repeat(100_000);
    assert_eq!(parse_call(deep.as_bytes(), V1).unwrap_err().code, PARSE_ERROR);
}

#[test]
fn a_1_0_a2a_error_carries_error_info_and_a_0_3_one_does_not() {
    let e = RpcError::new(&json!(1), TASK_NOT_FOUND, "Task not found").answering(V10);
    assert_eq!(
        e.to_json(),
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found",
            "data": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}]}})
    );
    let e = RpcError::new(&json!(1), TASK_NOT_FOUND, "Task not found").answering(V03);
    assert!(e.to_json()["error"].get("data").is_none());
    // JSON-RPC's own errors carry none in either generation.
    let e = RpcError::new(&json!(1), INVALID_PARAMS, "Invalid params: x").answering(V10);
    assert!(e.to_json()["error"].get("data").is_none());
    // Every A2A code has its reason; the generation of a refused method is its name's.
    for c in CODES.iter().filter(|c| (-32099..=-32001).contains(*c)) {
        assert!(error_reason(*c).is_some(), "{c}");
    }
    let e = RpcError::new(&json!(1), PUSH_NOT_SUPPORTED, "no").answering(V10);
    assert_eq!(
        e.to_json()["error"]["data"][0]["reason"],
        "PUSH_NOTIFICATION_NOT_SUPPORTED"
    );
    let e = RpcError::new(&json!(1), PUSH_NOT_SUPPORTED, "no").answering(V03);
    assert!(e.to_json()["error"].get("data").is_none());
    let e = call(req("GetTask", json!({"id": "t"})), None).unwrap_err();
    assert_eq!(e.to_json()["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
}
