//! The chat-completions mapping on realistic request and provider JSON.

use crate::map::{arguments, parse_response, OpenAi};
use driver_common::drive::{drive, provider_body, Env, HttpResponse};
use driver_common::Status;
use serde_json::{json, Value};

fn env(config: Option<&str>) -> Env {
    Env {
        endpoint: Some("http://localhost:11434/v1/".into()),
        model: Some("llama3.1".into()),
        config: config.map(String::from),
    }
}

fn body(req: &Value, config: Option<&str>) -> Value {
    let bytes = provider_body(&OpenAi, Some(&req.to_string()), &env(config)).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

fn conversation() -> Value {
    json!({
        "model": "gpt-4o-mini",
        "max_tokens": 1024,
        "system": "[Capsule] demo 1.0.0\nYou are helpful.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "List files"}, {"type": "text", "text": "and the date"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_call", "id": "call_1", "name": "bash", "input": {"command": "ls -la"}},
                {"type": "tool_call", "id": "call_2", "name": "bash", "input": {"command": "date", "timeout": 5}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "is_error": false, "content": [{"type": "text", "text": "a.txt\nb.txt"}]},
            {"role": "tool", "tool_call_id": "call_2", "is_error": true, "content": [{"type": "text", "text": "spawn failed"}]},
            {"role": "assistant", "content": [{"type": "tool_call", "id": "call_3", "name": "read", "input": {}}]},
            {"role": "tool", "tool_call_id": "call_3", "content": [{"type": "text", "text": ""}]},
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
        ],
        "tools": [
            {"name": "bash", "description": "Run a shell command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
            {"name": "read", "parameters": {"type": "object", "properties": {}}}
        ],
        "params": {"temperature": 0.2}
    })
}

#[test]
fn a_whole_conversation_maps_to_chat_completions() {
    let b = body(
        &conversation(),
        Some(r#"{"temperature":1.0,"top_p":0.9,"stream":true}"#),
    );
    assert_eq!(
        b,
        json!({
            "model": "gpt-4o-mini",
            "max_tokens": 1024,
            "temperature": 0.2,
            "top_p": 0.9,
            "messages": [
                {"role": "system", "content": "[Capsule] demo 1.0.0\nYou are helpful."},
                {"role": "user", "content": "List files\nand the date"},
                {"role": "assistant", "content": "Checking.", "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls -la\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"date\",\"timeout\":5}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\nb.txt"},
                {"role": "tool", "tool_call_id": "call_2", "content": "spawn failed"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_3", "type": "function", "function": {"name": "read", "arguments": "{}"}}
                ]},
                {"role": "tool", "tool_call_id": "call_3", "content": ""},
                {"role": "user", "content": "thanks"}
            ],
            "tools": [
                {"type": "function", "function": {"name": "bash", "description": "Run a shell command", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
                {"type": "function", "function": {"name": "read", "parameters": {"type": "object", "properties": {}}}}
            ]
        })
    );
}

#[test]
fn empty_system_tools_and_max_tokens_are_left_out() {
    let req = json!({"model": "", "system": "", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}
    ], "tools": [], "params": {}});
    assert_eq!(
        body(&req, None),
        json!({"model": "llama3.1", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}
        ]})
    );
}

#[test]
fn parallel_tool_calls_with_cached_usage() {
    // As api.openai.com answers a parallel function call.
    let resp = json!({
        "id": "chatcmpl-9x", "object": "chat.completion", "created": 1727000000, "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null, "tool_calls": [
            {"id": "call_abc", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}},
            {"id": "call_def", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}}
        ]}, "logprobs": null, "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                  "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
                  "completion_tokens_details": {"reasoning_tokens": 0}},
        "system_fingerprint": "fp_6b68a8204b"
    });
    let out: Value = serde_json::from_str(&parse_response(&resp).unwrap().to_json()).unwrap();
    assert_eq!(
        out,
        json!({
            "stop_reason": "tool_call",
            "content": [
                {"type": "tool_call", "id": "call_abc", "name": "bash", "input": {"command": "ls"}},
                {"type": "tool_call", "id": "call_def", "name": "read", "input": {"path": "a.txt"}}
            ],
            "usage": {"input_tokens": 2006, "output_tokens": 300, "cached_tokens": 1920}
        })
    );
}

#[test]
fn text_answers_and_stop_reasons() {
    let r = |content: Value, finish: &str| {
        let resp = json!({"choices": [{"message": {"role": "assistant", "content": content}, "finish_reason": finish}],
                          "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}});
        serde_json::from_str::<Value>(&parse_response(&resp).unwrap().to_json()).unwrap()
    };
    assert_eq!(
        r(json!("Done."), "stop"),
        json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "Done."}], "usage": {"input_tokens": 12, "output_tokens": 3}})
    );
    assert_eq!(r(json!("The list is"), "length")["stop_reason"], "max_tokens");
    assert_eq!(r(json!(null), "stop")["content"], json!([]));
    assert_eq!(r(json!(""), "content_filter")["stop_reason"], "end_turn");
    assert_eq!(
        r(
            json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
            "stop"
        )["content"][0]["text"],
        "ab"
    );
    // finish_reason tool_calls with no call to make does not claim a tool turn.
    assert_eq!(r(json!("hmm"), "tool_calls")["stop_reason"], "end_turn");
    // A refusal stands in for empty content.
    let resp = json!({"choices": [{"message": {"content": null, "refusal": "I can't help with that."}, "finish_reason": "stop"}]});
    let out: Value = serde_json::from_str(&parse_response(&resp).unwrap().to_json()).unwrap();
    assert_eq!(
        out,
        json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "I can't help with that."}]})
    );
}

#[test]
fn local_server_quirks() {
    // Ollama: finish_reason "stop" with tool calls; llama.cpp-like: no id, text beside calls,
    // arguments that are not JSON, an object instead of a string, or blank.
    let resp = json!({
        "model": "qwen2.5", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"function": {"name": "bash", "arguments": "{\"command\": \"ls\""}},
            {"id": "call_x", "function": {"name": "read", "arguments": {"path": "b"}}},
            {"id": "", "type": "function", "function": {"name": "now", "arguments": ""}},
            {"id": "c4", "function": {"name": "list", "arguments": "[1,2]"}}
        ]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 20}
    });
    let out: Value = serde_json::from_str(&parse_response(&resp).unwrap().to_json()).unwrap();
    assert_eq!(
        out,
        json!({
            "stop_reason": "tool_call",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_call", "id": "call_0", "name": "bash", "input": {"_raw": "{\"command\": \"ls\""}},
                {"type": "tool_call", "id": "call_x", "name": "read", "input": {"path": "b"}},
                {"type": "tool_call", "id": "call_2", "name": "now", "input": {}},
                {"type": "tool_call", "id": "c4", "name": "list", "input": {"_raw": "[1,2]"}}
            ],
            "usage": {"input_tokens": 50, "output_tokens": 20}
        })
    );
    assert_eq!(arguments("  "), json!({}));
    assert_eq!(arguments("{\"a\":[1]}"), json!({"a": [1]}));
    assert_eq!(arguments("nope"), json!({"_raw": "nope"}));
}

#[test]
fn bodies_that_are_not_chat_completions_are_refused() {
    for (resp, want) in [
        (
            json!({"error": {"message": "upstream timeout", "code": 504}}),
            "an error in a 2xx body: upstream timeout",
        ),
        (json!({"object": "list", "data": []}), "no choices array"),
        (json!({"choices": []}), "empty choices"),
        (
            json!({"choices": [{"text": "legacy completion"}]}),
            "choices[0] has no message object",
        ),
        (
            json!({"choices": [{"message": {"content": 5}}]}),
            "message.content is neither",
        ),
        (
            json!({"choices": [{"message": {"tool_calls": {}}}]}),
            "message.tool_calls is not an array",
        ),
        (
            json!({"choices": [{"message": {"tool_calls": [{"id": "a", "function": {"arguments": "{}"}}]}}]}),
            "tool_calls[0]: no function name",
        ),
        (
            json!({"choices": [{"message": {"tool_calls": [{"id": "a"}]}}]}),
            "tool_calls[0]: no function object",
        ),
        (json!([1, 2]), "no choices array"),
    ] {
        let err = parse_response(&resp).unwrap_err();
        assert!(err.contains(want), "{err} lacks {want}");
    }
}

#[test]
fn the_call_goes_to_chat_completions_without_auth_and_errors_classify() {
    let mut seen = None;
    let answer = HttpResponse {
        status: 429,
        retry_after: Some("7".into()),
        body: br#"{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}"#.to_vec(),
    };
    let out = drive(
        &OpenAi,
        Some(&conversation().to_string()),
        &env(None),
        0,
        |url, headers, _| {
            seen = Some((
                url.to_string(),
                headers.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>(),
            ));
            Ok(answer)
        },
    );
    let (url, headers) = seen.unwrap();
    assert_eq!(url, "http://localhost:11434/v1/chat/completions");
    assert_eq!(headers, ["content-type", "accept"]);
    assert_eq!(out.status, Status::Error);
    assert_eq!(
        out.summary.as_deref(),
        Some("provider returned 429: Rate limit reached for gpt-4o-mini in organization org-x on tokens per min (TPM): Limit 200000, Used 199000.")
    );
    let meta: Vec<(&str, &str)> = out
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        meta,
        [
            ("http_status", "429"),
            ("transient", "true"),
            ("retry_after", "7")
        ]
    );

    let ok = HttpResponse {
        status: 200,
        retry_after: None,
        body: br#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#.to_vec(),
    };
    let out = drive(
        &OpenAi,
        Some(&conversation().to_string()),
        &env(None),
        0,
        |_, _, _| Ok(ok),
    );
    assert_eq!(out.status, Status::Passed);
    assert_eq!(
        serde_json::from_str::<Value>(out.data.as_deref().unwrap()).unwrap(),
        json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 1, "output_tokens": 1}})
    );
}
