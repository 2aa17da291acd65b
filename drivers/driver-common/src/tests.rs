//! The provider-independent flow with a fake provider and a fake transport.

use crate::drive::{drive, error_message, Env, HttpResponse, Provider, TransportError};
use crate::outcome::{Outcome, Status};
use crate::request::{Block, Message, Request, Response, StopReason, ToolCall, Usage};
use crate::url::Url;
use serde_json::{json, Map, Value};
use std::cell::RefCell;

struct Fake;

impl Provider for Fake {
    fn path(&self) -> &'static str {
        "/chat"
    }
    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("x-fake", "1")]
    }
    fn protected(&self) -> &'static [&'static str] {
        &["model", "messages"]
    }
    fn body(&self, req: &Request) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("model".into(), req.model.clone().into());
        m.insert("messages".into(), req.messages.len().into());
        if let Some(n) = req.max_tokens {
            m.insert("max_tokens".into(), n.into());
        }
        m
    }
    fn parse(&self, body: &Value) -> Result<Response, String> {
        let text = body.get("text").and_then(Value::as_str).ok_or("no text")?;
        Ok(Response {
            stop_reason: StopReason::EndTurn,
            content: vec![Block::Text(text.into())],
            usage: Some(Usage {
                input_tokens: 3,
                output_tokens: 4,
                cached_tokens: Some(1),
                cache_write_tokens: None,
            }),
        })
    }
}

fn env() -> Env {
    Env {
        endpoint: Some("http://127.0.0.1:9/api/".into()),
        model: Some("env-model".into()),
        config: None,
    }
}

const REQ: &str = r#"{"model":"m","max_tokens":100,"system":"s","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[],"params":{}}"#;

/// What the transport was asked to send: URL, headers, body.
type Sent = (String, Vec<(String, String)>, Value);

/// Run with a transport that records what it was asked to send and answers `answer`.
fn call(
    input: Option<&str>,
    env: &Env,
    answer: Result<HttpResponse, TransportError>,
) -> (Outcome, Option<Sent>) {
    let seen = RefCell::new(None);
    let out = drive(
        &Fake,
        input,
        env,
        1_000,
        |url: &Url, headers: &[(&str, &str)], body: &[u8]| {
            let headers = headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            *seen.borrow_mut() = Some((url.to_string(), headers, serde_json::from_slice(body).unwrap()));
            answer
        },
    );
    (out, seen.into_inner())
}

fn ok(status: u16, body: &str) -> Result<HttpResponse, TransportError> {
    Ok(HttpResponse {
        status,
        retry_after: None,
        body: body.as_bytes().to_vec(),
    })
}

#[test]
fn success_posts_to_the_joined_url_and_returns_the_response_json() {
    let (out, seen) = call(Some(REQ), &env(), ok(200, r#"{"text":"hello"}"#));
    assert_eq!(out.status, Status::Passed);
    let data: Value = serde_json::from_str(out.data.as_deref().unwrap()).unwrap();
    assert_eq!(
        data,
        json!({"stop_reason":"end_turn","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":3,"output_tokens":4,"cached_tokens":1}})
    );
    let (url, headers, body) = seen.unwrap();
    assert_eq!(url, "http://127.0.0.1:9/api/chat");
    assert_eq!(body, json!({"model":"m","messages":1,"max_tokens":100}));
    assert!(headers.contains(&("content-type".into(), "application/json".into())));
    assert!(headers.contains(&("x-fake".into(), "1".into())));
    assert!(!headers
        .iter()
        .any(|(k, _)| k == "authorization" || k == "x-api-key"));
}

#[test]
fn params_override_driver_config_null_removes_and_protected_keys_stay() {
    let mut e = env();
    e.config = Some(r#"{"temperature":0.1,"top_p":0.5,"model":"evil","seed":7}"#.into());
    let req = r#"{"model":"","max_tokens":10,"messages":[],"params":{"temperature":0.9,"messages":"x","max_tokens":null,"seed":null,"stop":["\n"]}}"#;
    let (out, seen) = call(Some(req), &e, ok(200, r#"{"text":""}"#));
    assert_eq!(out.status, Status::Passed);
    let body = seen.unwrap().2;
    assert_eq!(
        body,
        json!({"model":"env-model","messages":0,"temperature":0.9,"top_p":0.5,"stop":["\n"]})
    );
}

#[test]
fn bad_input_never_reaches_the_transport() {
    let mut bad_config = env();
    bad_config.config = Some("[1]".into());
    let mut no_endpoint = env();
    no_endpoint.endpoint = None;
    let mut bad_endpoint = env();
    bad_endpoint.endpoint = Some("localhost:11434".into());
    let mut no_model = env();
    no_model.model = None;
    let good = env();
    let cases: Vec<(Option<&str>, &Env, &str)> = vec![
        (None, &good, "no request data"),
        (Some("not json"), &good, "bad request: request is not JSON"),
        (Some("[]"), &good, "bad request: request is not a JSON object"),
        (
            Some(r#"{"messages":{}}"#),
            &good,
            "request.messages is not an array",
        ),
        (Some(r#"{"max_tokens":-1}"#), &good, "request.max_tokens"),
        (
            Some(r#"{"messages":[{"role":"robot"}]}"#),
            &good,
            "request.messages[0]: unknown role 'robot'",
        ),
        (
            Some(r#"{"messages":[{"role":"tool","content":[]}]}"#),
            &good,
            "tool_call_id",
        ),
        (
            Some(r#"{"messages":[{"role":"assistant","content":[{"type":"tool_call","name":"x"}]}]}"#),
            &good,
            "content[0]: tool_call without a string id",
        ),
        (
            Some(r#"{"tools":[{"description":"x"}]}"#),
            &good,
            "request.tools[0]: tool without a string name",
        ),
        (Some(r#"{"params":[]}"#), &good, "request.params is not an object"),
        (
            Some(REQ),
            &bad_config,
            "MURMUR_INFERENCE_DRIVER_CONFIG is not a JSON object",
        ),
        (Some(REQ), &no_endpoint, "MURMUR_INFERENCE_ENDPOINT is not set"),
        (
            Some(REQ),
            &bad_endpoint,
            "MURMUR_INFERENCE_ENDPOINT: 'localhost:11434' is not an http",
        ),
        (Some(r#"{"messages":[]}"#), &no_model, "no model"),
    ];
    for (input, e, want) in cases {
        let (out, seen) = call(input, e, ok(200, "{}"));
        assert!(seen.is_none(), "{want}");
        assert_eq!(out.status, Status::Error, "{want}");
        let summary = out.summary.clone().unwrap();
        assert!(summary.contains(want), "{summary} lacks {want}");
        assert_eq!(out.meta("transient"), Some("false"), "{want}");
    }
}

#[test]
fn http_errors_carry_status_transient_and_retry_after() {
    let cases = [
        (
            400,
            r#"{"error":{"message":"bad model","type":"invalid_request_error"}}"#,
            None,
            "provider returned 400: bad model",
            "false",
            None,
        ),
        (
            401,
            r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            None,
            "provider returned 401: invalid x-api-key",
            "false",
            None,
        ),
        (
            404,
            r#"{"error":"model 'llama9' not found"}"#,
            None,
            "provider returned 404: model 'llama9' not found",
            "false",
            None,
        ),
        (
            422,
            r#"{"detail":"Field required"}"#,
            None,
            "provider returned 422: Field required",
            "false",
            None,
        ),
        (408, "", None, "provider returned 408: (empty body)", "true", None),
        (
            429,
            r#"{"error":{"message":"Rate limit"}}"#,
            Some("20"),
            "provider returned 429: Rate limit",
            "true",
            Some("20"),
        ),
        (
            503,
            "<html>\n<h1>Service Unavailable</h1></html>",
            Some("Thu, 01 Jan 1970 00:17:00 GMT"),
            "provider returned 503: <html> <h1>Service Unavailable</h1></html>",
            "true",
            Some("20"),
        ),
        (
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            Some("soon"),
            "provider returned 529: Overloaded",
            "true",
            None,
        ),
    ];
    for (status, body, retry, summary, transient, retry_after) in cases {
        let answer = Ok(HttpResponse {
            status,
            retry_after: retry.map(String::from),
            body: body.as_bytes().to_vec(),
        });
        let (out, _) = call(Some(REQ), &env(), answer);
        assert_eq!(out.status, Status::Error);
        assert_eq!(out.summary.as_deref(), Some(summary));
        assert_eq!(out.meta("http_status"), Some(status.to_string().as_str()));
        assert_eq!(out.meta("transient"), Some(transient), "{status}");
        assert_eq!(out.meta("retry_after"), retry_after, "{status}");
        assert_eq!(out.data, None);
    }
}

#[test]
fn a_long_error_body_is_cut_short() {
    let long = "x".repeat(5000);
    let msg = error_message(long.as_bytes());
    assert_eq!(msg.chars().count(), 201);
    let msg = error_message(format!(r#"{{"error":{{"message":"{long}"}}}}"#).as_bytes());
    assert_eq!(msg.chars().count(), 501);
    // A cut through a multi-byte character does not panic.
    let multi = "é".repeat(1000);
    assert!(!error_message(multi.as_bytes()).is_empty());
}

#[test]
fn transport_failures_and_unparsable_bodies() {
    let (out, _) = call(
        Some(REQ),
        &env(),
        Err(TransportError::Failed("ConnectionRefused".into())),
    );
    assert_eq!(out.status, Status::Error);
    assert_eq!(
        out.summary.as_deref(),
        Some("transport failure calling http://127.0.0.1:9/api/chat: ConnectionRefused")
    );
    assert_eq!(out.metadata, vec![("transient".to_string(), "true".to_string())]);

    let (out, _) = call(
        Some(REQ),
        &env(),
        Err(TransportError::Denied("HttpRequestDenied".into())),
    );
    assert_eq!(out.meta("transient"), Some("false"));
    assert!(out.summary.unwrap().contains("refused by the host"));

    let (out, _) = call(Some(REQ), &env(), Err(TransportError::TooLarge { status: 200 }));
    assert_eq!(out.summary.as_deref(), Some("provider response exceeds 16 MiB"));
    assert_eq!(out.meta("transient"), Some("false"));

    for body in ["<html>oops</html>", "{\"nottext\":1}", ""] {
        let (out, _) = call(Some(REQ), &env(), ok(200, body));
        assert_eq!(out.status, Status::Error);
        assert!(
            out.summary
                .as_deref()
                .unwrap()
                .starts_with("unparsable provider response: "),
            "{body}"
        );
        assert_eq!(out.meta("transient"), Some("false"));
        assert_eq!(out.meta("http_status"), Some("200"));
    }
}

#[test]
fn request_parsing_is_lenient_where_harmless() {
    let req = Request::parse(
        r#"{"model":"m","messages":[
            {"role":"user","content":"plain string"},
            {"role":"system","content":[{"type":"text","text":"sys2"}]},
            {"role":"assistant","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"ok"},{"type":"tool_call","id":"c1","name":"bash"}]},
            {"role":"tool","tool_call_id":"c1","content":[{"type":"text","text":"a"},{"type":"image"},{"type":"text","text":"b"}]}
        ],"tools":[{"name":"t"}]}"#,
    )
    .unwrap();
    assert_eq!(
        req.messages,
        vec![
            Message::User(vec!["plain string".into()]),
            Message::System("sys2".into()),
            Message::Assistant {
                text: vec!["ok".into()],
                calls: vec![ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    input: json!({})
                }]
            },
            Message::Tool {
                call_id: "c1".into(),
                is_error: false,
                text: "a\nb".into()
            },
        ]
    );
    assert_eq!(req.tools[0].parameters, json!({"type":"object","properties":{}}));
    assert_eq!(req.tools[0].description, None);
    assert_eq!(req.max_tokens, None);
}
