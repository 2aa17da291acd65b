//! The Messages API mapping on realistic request and provider JSON.

use crate::map::{parse_response, Anthropic};
use driver_common::drive::{drive, provider_body, Env, HttpResponse};
use driver_common::Status;
use serde_json::{json, Value};

fn env(config: Option<&str>) -> Env {
    Env {
        endpoint: Some("https://api.anthropic.com/".into()),
        model: Some("claude-sonnet-4-5".into()),
        config: config.map(String::from),
    }
}

fn body(req: &Value, config: Option<&str>) -> Value {
    let bytes = provider_body(&Anthropic, Some(&req.to_string()), &env(config)).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn conversation() -> Value {
    json!({
        "model": "claude-opus-4-1",
        "max_tokens": 2048,
        "system": "[Capsule] demo 1.0.0\nYou are helpful.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What's in the dir and the date?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me check."},
                {"type": "tool_call", "id": "toolu_01", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_call", "id": "toolu_02", "name": "bash", "input": {"command": "date"}}
            ]},
            {"role": "tool", "tool_call_id": "toolu_01", "is_error": false, "content": [{"type": "text", "text": "a.txt\nb.txt"}]},
            {"role": "tool", "tool_call_id": "toolu_02", "is_error": true, "content": [{"type": "text", "text": "spawn failed"}]},
            {"role": "user", "content": [{"type": "text", "text": "Also: be brief."}]},
            {"role": "assistant", "content": [{"type": "text", "text": ""}, {"type": "tool_call", "id": "toolu_03", "name": "noop", "input": {}}]},
            {"role": "tool", "tool_call_id": "toolu_03", "content": [{"type": "text", "text": ""}]}
        ],
        "tools": [
            {"name": "bash", "description": "Run a shell command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
            {"name": "noop", "parameters": {}}
        ],
        "params": {"temperature": 0.3, "top_k": null}
    })
}

#[test]
fn a_whole_conversation_maps_to_the_messages_api() {
    let b = body(
        &conversation(),
        Some(r#"{"top_k":40,"metadata":{"user_id":"u1"},"system":"evil","stream":true}"#),
    );
    assert_eq!(
        b,
        json!({
            "model": "claude-opus-4-1",
            "max_tokens": 2048,
            "system": "[Capsule] demo 1.0.0\nYou are helpful.",
            "temperature": 0.3,
            "metadata": {"user_id": "u1"},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "What's in the dir and the date?"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "toolu_02", "name": "bash", "input": {"command": "date"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "a.txt\nb.txt", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_02", "content": "spawn failed", "is_error": true},
                    {"type": "text", "text": "Also: be brief."}
                ]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_03", "name": "noop", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_03", "is_error": false}]}
            ],
            "tools": [
                {"name": "bash", "description": "Run a shell command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
                {"name": "noop", "input_schema": {"type": "object"}}
            ]
        })
    );
}

#[test]
fn defaults_and_omissions() {
    let req = json!({"model": "", "system": "", "messages": [
        {"role": "system", "content": "extra rules"},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "user", "content": [{"type": "text", "text": "there"}]},
        {"role": "assistant", "content": []}
    ]});
    assert_eq!(
        body(&req, None),
        json!({"model": "claude-sonnet-4-5", "max_tokens": 4096, "system": "extra rules", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "there"}]}
        ]})
    );
    let req = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "max_tokens": 10});
    let b = body(&req, None);
    assert!(b.get("system").is_none() && b.get("tools").is_none());
    assert_eq!(b["max_tokens"], 10);
}

#[test]
fn tool_use_response_with_cache_usage() {
    // As api.anthropic.com answers a turn with text and two parallel tool uses.
    let resp = json!({
        "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929",
        "content": [
            {"type": "thinking", "thinking": "I should list.", "signature": "sig"},
            {"type": "text", "text": "I'll run both."},
            {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "bash", "input": {"command": "ls -la"}},
            {"type": "tool_use", "id": "toolu_01B", "name": "read", "input": {"path": "a.txt"}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 472, "cache_creation_input_tokens": 1024, "cache_read_input_tokens": 2048, "output_tokens": 91, "service_tier": "standard"}
    });
    let out: Value = serde_json::from_str(&parse_response(&resp).unwrap().to_json()).unwrap();
    assert_eq!(
        out,
        json!({
            "stop_reason": "tool_call",
            "content": [
                {"type": "text", "text": "I'll run both."},
                {"type": "tool_call", "id": "toolu_01A09q90qw90lq917835lq9", "name": "bash", "input": {"command": "ls -la"}},
                {"type": "tool_call", "id": "toolu_01B", "name": "read", "input": {"path": "a.txt"}}
            ],
            "usage": {"input_tokens": 472, "output_tokens": 91, "cached_tokens": 2048, "cache_write_tokens": 1024}
        })
    );
}

#[test]
fn stop_reasons() {
    let r = |stop: &str, content: Value| {
        let resp = json!({"type": "message", "role": "assistant", "content": content, "stop_reason": stop,
                          "usage": {"input_tokens": 10, "output_tokens": 5}});
        serde_json::from_str::<Value>(&parse_response(&resp).unwrap().to_json()).unwrap()
    };
    let text = json!([{"type": "text", "text": "Done."}]);
    assert_eq!(
        r("end_turn", text.clone()),
        json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "Done."}], "usage": {"input_tokens": 10, "output_tokens": 5}})
    );
    assert_eq!(r("max_tokens", text.clone())["stop_reason"], "max_tokens");
    assert_eq!(r("stop_sequence", text.clone())["stop_reason"], "end_turn");
    assert_eq!(r("refusal", json!([]))["content"], json!([]));
    // tool_use claimed with no tool_use block: nothing to run.
    assert_eq!(r("tool_use", text)["stop_reason"], "end_turn");
    let call = json!([{"type": "tool_use", "id": "t1", "name": "bash"}]);
    assert_eq!(r("pause_turn", call.clone())["stop_reason"], "tool_call");
    assert_eq!(r("tool_use", call.clone())["content"][0]["input"], json!({}));
    assert_eq!(r("max_tokens", call)["stop_reason"], "max_tokens");
}

#[test]
fn bodies_that_are_not_messages_are_refused() {
    for (resp, want) in [
        (
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            "an error in a 2xx body: Overloaded",
        ),
        (json!({"choices": []}), "no content array"),
        (
            json!({"content": [{"text": "x"}]}),
            "content[0]: a block without a type",
        ),
        (
            json!({"content": [{"type": "text"}]}),
            "content[0]: a text block without text",
        ),
        (
            json!({"content": [{"type": "tool_use", "name": "x"}]}),
            "content[0]: a tool_use block without id",
        ),
        (
            json!({"content": [{"type": "tool_use", "id": "x", "name": ""}]}),
            "content[0]: a tool_use block without name",
        ),
        (json!("message"), "no content array"),
    ] {
        let err = parse_response(&resp).unwrap_err();
        assert!(err.contains(want), "{err} lacks {want}");
    }
}

#[test]
fn the_call_carries_the_version_header_and_no_key() {
    let mut seen = None;
    let overloaded = HttpResponse {
        status: 529,
        retry_after: None,
        body: br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_011"}"#.to_vec(),
    };
    let out = drive(
        &Anthropic,
        Some(&conversation().to_string()),
        &env(None),
        0,
        |url, headers, _| {
            seen = Some((
                url.to_string(),
                headers
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>(),
            ));
            Ok(overloaded)
        },
    );
    let (url, headers) = seen.unwrap();
    assert_eq!(url, "https://api.anthropic.com/v1/messages");
    assert_eq!(
        headers,
        [
            "content-type: application/json",
            "accept: application/json",
            "anthropic-version: 2023-06-01"
        ]
    );
    assert_eq!(out.status, Status::Error);
    assert_eq!(out.summary.as_deref(), Some("provider returned 529: Overloaded"));
    let meta: Vec<(&str, &str)> = out
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(meta, [("http_status", "529"), ("transient", "true")]);

    let bad_request = HttpResponse {
        status: 400,
        retry_after: None,
        body: br#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}"#.to_vec(),
    };
    let out = drive(
        &Anthropic,
        Some(&conversation().to_string()),
        &env(None),
        0,
        |_, _, _| Ok(bad_request),
    );
    assert_eq!(
        out.summary.as_deref(),
        Some("provider returned 400: messages: roles must alternate between \"user\" and \"assistant\"")
    );
    assert_eq!(out.meta("transient"), Some("false"));

    let rate_limited = HttpResponse {
        status: 429,
        retry_after: Some("12".into()),
        body: br#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#.to_vec(),
    };
    let out = drive(
        &Anthropic,
        Some(&conversation().to_string()),
        &env(None),
        0,
        |_, _, _| Ok(rate_limited),
    );
    assert_eq!(out.meta("retry_after"), Some("12"));
    assert_eq!(out.meta("transient"), Some("true"));
}
