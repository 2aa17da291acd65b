//! The scripted mock LLM provider (`common::provider`), driven over plain loopback sockets:
//! every step kind in both wire formats, recording, slow and cut answers, the sink.

use crate::common;

use common::provider::{
    last_user_text, tool_results, usage_for, Provider, Recorded, Step, CUT_TEXT, EXHAUSTED, MALFORMED_BODY,
    NOT_JSON_BODY,
};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const OPENAI: &str = "/v1/chat/completions";
const ANTHROPIC: &str = "/v1/messages";

/// One raw answer, split.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    fn content_length(&self) -> usize {
        self.header("content-length").unwrap().parse().unwrap()
    }
}

/// Read until the peer closes (tolerating a reset after some bytes), at most 10 s.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("read failed after {} bytes: {e}", out.len()),
        }
    }
    out
}

fn parse(raw: &[u8]) -> Answer {
    let at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..at]).unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    assert!(status_line.starts_with("HTTP/1.1 "), "{status_line}");
    let status = status_line[9..12].parse().unwrap();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.to_ascii_lowercase(), v.trim().to_string())
        })
        .collect();
    Answer {
        status,
        headers,
        body: raw[at + 4..].to_vec(),
    }
}

/// A raw request with `host: 127.0.0.1:P`, `extra` header lines and `body`.
fn raw_request(p: &Provider, method: &str, target: &str, extra: &[&str], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nhost: 127.0.0.1:{}\r\n", p.port());
    for line in extra {
        out.push_str(line);
        out.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" {
        out.push_str(&format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        ));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

fn send(p: &Provider, method: &str, target: &str, extra: &[&str], body: &[u8]) -> Answer {
    let mut s = TcpStream::connect(p.addr()).unwrap();
    s.write_all(&raw_request(p, method, target, extra, body)).unwrap();
    parse(&read_to_close(&mut s))
}

/// POST a chat request with a user prompt to `path`.
fn chat(p: &Provider, path: &str) -> Answer {
    let body = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}]});
    send(p, "POST", path, &[], body.to_string().as_bytes())
}

fn calls() -> Vec<(String, String, Value)> {
    vec![
        ("call_1".into(), "read_file".into(), json!({"path": "a.txt"})),
        ("call_2".into(), "list".into(), json!({})),
    ]
}

fn script() -> Vec<Step> {
    vec![
        Step::text("hello"),
        Step::Tools(calls()),
        Step::TextTools("let me look".into(), calls()),
        Step::MaxTokens("trunc".into()),
    ]
}

#[test]
fn openai_answers_text_tools_and_max_tokens() {
    let p = Provider::start(script());
    let usage = |turn: u64| {
        let (i, o) = usage_for(turn);
        json!({"prompt_tokens": i, "completion_tokens": o, "total_tokens": i + o})
    };
    let openai_calls = json!([
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "list", "arguments": "{}"}},
    ]);
    let expect = |turn: u64, message: Value, finish: &str| {
        json!({
            "id": format!("chatcmpl-mock-{turn}"),
            "object": "chat.completion",
            "created": 1_700_000_000u64,
            "model": "test-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage(turn),
        })
    };

    let a = chat(&p, OPENAI);
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.header("x-mock-turn"), Some("1"));
    assert_eq!(
        a.json(),
        expect(1, json!({"role": "assistant", "content": "hello"}), "stop")
    );

    let a = chat(&p, OPENAI);
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        expect(
            2,
            json!({"role": "assistant", "content": null, "tool_calls": openai_calls}),
            "tool_calls"
        )
    );

    let a = chat(&p, OPENAI);
    assert_eq!(
        a.json(),
        expect(
            3,
            json!({"role": "assistant", "content": "let me look", "tool_calls": openai_calls}),
            "tool_calls"
        )
    );

    let a = chat(&p, OPENAI);
    assert_eq!(
        a.json(),
        expect(4, json!({"role": "assistant", "content": "trunc"}), "length")
    );
    assert_eq!(a.json()["usage"]["prompt_tokens"], 40);
    assert_eq!(a.json()["usage"]["completion_tokens"], 5);
    assert_eq!(p.remaining(), 0);
    assert_eq!(p.turns(), 4);
}

#[test]
fn anthropic_answers_text_tools_and_max_tokens() {
    let p = Provider::start(script());
    let tool_use = json!([
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.txt"}},
        {"type": "tool_use", "id": "call_2", "name": "list", "input": {}},
    ]);
    let expect = |turn: u64, content: Value, stop: &str| {
        let (i, o) = usage_for(turn);
        json!({
            "id": format!("msg_mock_{turn}"),
            "type": "message",
            "role": "assistant",
            "model": "test-model",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": {"input_tokens": i, "output_tokens": o},
        })
    };

    let a = chat(&p, ANTHROPIC);
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        expect(1, json!([{"type": "text", "text": "hello"}]), "end_turn")
    );

    let a = chat(&p, ANTHROPIC);
    assert_eq!(a.json(), expect(2, tool_use.clone(), "tool_use"));

    let a = chat(&p, ANTHROPIC);
    let mut with_text = vec![json!({"type": "text", "text": "let me look"})];
    with_text.extend(tool_use.as_array().unwrap().iter().cloned());
    assert_eq!(a.json(), expect(3, Value::Array(with_text), "tool_use"));

    let a = chat(&p, ANTHROPIC);
    assert_eq!(
        a.json(),
        expect(4, json!([{"type": "text", "text": "trunc"}]), "max_tokens")
    );
    assert_eq!(a.json()["usage"]["input_tokens"], 40);
}

#[test]
fn the_model_name_defaults_when_the_request_names_none() {
    let p = Provider::start(vec![Step::text("a"), Step::text("b")]);
    let a = send(&p, "POST", OPENAI, &[], b"{}");
    assert_eq!(a.json()["model"], "mock-model");
    let a = send(&p, "POST", ANTHROPIC, &[], b"not json either");
    assert_eq!(a.json()["model"], "mock-model");
}

#[test]
fn status_steps_answer_in_each_providers_error_format() {
    let steps = || {
        vec![
            Step::status(401, "bad key"),
            Step::retry_after(429, "slow down", 7),
            Step::status(500, "boom"),
        ]
    };
    let p = Provider::start(steps());
    let a = chat(&p, OPENAI);
    assert_eq!(a.status, 401);
    assert_eq!(a.header("retry-after"), None);
    assert_eq!(
        a.json(),
        json!({"error": {"message": "bad key", "type": "authentication_error", "param": null, "code": null}})
    );
    let a = chat(&p, OPENAI);
    assert_eq!(a.status, 429);
    assert_eq!(a.header("retry-after"), Some("7"));
    assert_eq!(
        a.json(),
        json!({"error": {"message": "slow down", "type": "rate_limit_error", "param": null, "code": null}})
    );
    let a = chat(&p, OPENAI);
    assert_eq!(a.status, 500);
    assert_eq!(
        a.json(),
        json!({"error": {"message": "boom", "type": "server_error", "param": null, "code": null}})
    );

    let p = Provider::start(steps());
    let a = chat(&p, ANTHROPIC);
    assert_eq!(a.status, 401);
    assert_eq!(a.header("retry-after"), None);
    assert_eq!(
        a.json(),
        json!({"type": "error", "error": {"type": "authentication_error", "message": "bad key"}})
    );
    let a = chat(&p, ANTHROPIC);
    assert_eq!(a.status, 429);
    assert_eq!(a.header("retry-after"), Some("7"));
    assert_eq!(
        a.json(),
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}})
    );
    let a = chat(&p, ANTHROPIC);
    assert_eq!(a.status, 500);
    assert_eq!(
        a.json(),
        json!({"type": "error", "error": {"type": "api_error", "message": "boom"}})
    );
    // An error still counts as a turn: the next success would report turn 4.
    assert_eq!(p.turns(), 3);
}

#[test]
fn malformed_and_not_json_answer_200_in_no_provider_format() {
    for path in [OPENAI, ANTHROPIC] {
        let p = Provider::start(vec![Step::Malformed, Step::NotJson]);
        let a = chat(&p, path);
        assert_eq!(a.status, 200);
        assert_eq!(a.body, MALFORMED_BODY.as_bytes());
        assert_eq!(a.json(), json!({"unexpected": true}));
        let a = chat(&p, path);
        assert_eq!(a.status, 200);
        assert_eq!(a.body, NOT_JSON_BODY.as_bytes());
        assert!(serde_json::from_slice::<Value>(&a.body).is_err());
    }
}

#[test]
fn an_exhausted_script_answers_500_and_records_the_request() {
    let p = Provider::start(vec![]);
    let a = chat(&p, OPENAI);
    assert_eq!(a.status, 500);
    assert_eq!(a.json()["error"]["message"], EXHAUSTED);
    assert_eq!(a.json()["error"]["type"], "server_error");
    let a = chat(&p, ANTHROPIC);
    assert_eq!(a.status, 500);
    assert_eq!(
        a.json(),
        json!({"type": "error", "error": {"type": "api_error", "message": EXHAUSTED}})
    );
    let recorded = p.requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].path, OPENAI);
    assert_eq!(recorded[1].path, ANTHROPIC);
}

#[test]
fn every_request_is_recorded_with_path_headers_and_body() {
    let p = Provider::start(vec![Step::text("one")]);
    let body = json!({"model": "m", "messages": [{"role": "user", "content": "ping"}]}).to_string();
    let a = send(
        &p,
        "POST",
        "/v1/chat/completions?beta=true",
        &["Authorization: Bearer sk-test", "X-Custom-Thing: Value Kept"],
        body.as_bytes(),
    );
    assert_eq!(a.status, 200, "a query does not change the route");
    // Unknown path: 404 JSON, no step consumed.
    let a = send(&p, "GET", "/v1/models", &[], b"");
    assert_eq!(a.status, 404);
    assert_eq!(a.json()["error"]["type"], "not_found_error");
    // A model path with another method: 405, no step consumed.
    let a = send(&p, "GET", ANTHROPIC, &[], b"");
    assert_eq!(a.status, 405);
    assert_eq!(a.json()["type"], "error");
    // A host naming something else is still answered and recorded.
    let mut s = TcpStream::connect(p.addr()).unwrap();
    s.write_all(b"POST /steal HTTP/1.1\r\nhost: api.openai.com\r\ncontent-length: 6\r\n\r\nsecret")
        .unwrap();
    assert_eq!(parse(&read_to_close(&mut s)).status, 404);
    // A body beyond the layer's default 1 MiB is taken.
    let big = json!({"messages": [{"role": "user", "content": "x".repeat(3 * 1024 * 1024)}]}).to_string();
    let a = send(&p, "POST", "/big", &[], big.as_bytes());
    assert_eq!(a.status, 404);

    assert_eq!(p.remaining(), 0);
    assert_eq!(p.turns(), 1);
    let r = p.requests();
    assert_eq!(r.len(), 5);
    assert_eq!(r[0].method, "POST");
    assert_eq!(r[0].path, OPENAI);
    assert_eq!(r[0].target, "/v1/chat/completions?beta=true");
    assert_eq!(r[0].header("authorization"), Some("Bearer sk-test"));
    assert_eq!(r[0].header("x-custom-thing"), Some("Value Kept"));
    assert_eq!(
        r[0].header("host"),
        Some(format!("127.0.0.1:{}", p.port()).as_str())
    );
    assert!(r[0].headers.iter().all(|(n, _)| *n == n.to_ascii_lowercase()));
    assert_eq!(r[0].body, body.as_bytes());
    assert_eq!(r[0].json.as_ref().unwrap()["model"], "m");
    assert_eq!(last_user_text(&r[0]), "ping");
    assert_eq!(p.model_requests().len(), 2);
    assert_eq!((r[1].method.as_str(), r[1].path.as_str()), ("GET", "/v1/models"));
    assert!(r[1].body.is_empty() && r[1].json.is_none());
    assert_eq!((r[2].method.as_str(), r[2].path.as_str()), ("GET", ANTHROPIC));
    assert_eq!(r[3].path, "/steal");
    assert_eq!(r[3].header("host"), Some("api.openai.com"));
    assert_eq!(r[3].body, b"secret");
    assert!(r[3].json.is_none());
    assert_eq!(r[4].body.len(), big.len());
}

#[test]
fn slow_steps_answer_after_the_delay_without_blocking_others() {
    for path in [OPENAI, ANTHROPIC] {
        let p = Provider::start(vec![
            Step::slow(Duration::from_millis(600), Step::text("late")),
            Step::text("quick"),
        ]);
        let started = Instant::now();
        let mut slow = TcpStream::connect(p.addr()).unwrap();
        let body = json!({"messages": []}).to_string();
        slow.write_all(&raw_request(&p, "POST", path, &[], body.as_bytes()))
            .unwrap();
        assert!(p.wait_requests(1, Duration::from_secs(5)));
        // The second request is answered while the first still waits.
        let quick = chat(&p, path);
        assert!(
            started.elapsed() < Duration::from_millis(600),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(quick.status, 200);
        assert_eq!(quick.header("x-mock-turn"), Some("2"));
        let late = parse(&read_to_close(&mut slow));
        assert!(started.elapsed() >= Duration::from_millis(600));
        assert_eq!(late.status, 200);
        let text = match path {
            OPENAI => late.json()["choices"][0]["message"]["content"].clone(),
            _ => late.json()["content"][0]["text"].clone(),
        };
        assert_eq!(text, "late");
        assert_eq!(late.header("x-mock-turn"), Some("1"));
    }
}

#[test]
fn a_slow_answer_for_a_closed_connection_is_dropped_quietly() {
    let p = Provider::start(vec![
        Step::slow(Duration::from_millis(300), Step::text("nobody hears this")),
        Step::slow(Duration::from_millis(200), Step::CloseMidBody),
        Step::text("still here"),
    ]);
    for _ in 0..2 {
        let mut s = TcpStream::connect(p.addr()).unwrap();
        s.write_all(&raw_request(&p, "POST", OPENAI, &[], b"{}")).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        drop(s);
    }
    assert!(p.wait_requests(2, Duration::from_secs(5)));
    std::thread::sleep(Duration::from_millis(500));
    let a = chat(&p, ANTHROPIC);
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["content"][0]["text"], "still here");
    assert_eq!(a.json()["usage"]["input_tokens"], 30);
    // The script is spent; the server keeps answering.
    assert_eq!(chat(&p, OPENAI).status, 500);

    // A delay beyond the provider's life: stopping first, the late completion finds no server.
    let mut p = Provider::start(vec![Step::slow(Duration::from_millis(300), Step::text("x"))]);
    let mut s = TcpStream::connect(p.addr()).unwrap();
    s.write_all(&raw_request(&p, "POST", OPENAI, &[], b"{}")).unwrap();
    assert!(p.wait_requests(1, Duration::from_secs(5)));
    p.stop();
    let got = read_to_close(&mut s);
    assert!(got.is_empty(), "{:?}", String::from_utf8_lossy(&got));
    std::thread::sleep(Duration::from_millis(400));
}

#[test]
fn close_mid_body_sends_fewer_bytes_than_announced() {
    for path in [OPENAI, ANTHROPIC] {
        let p = Provider::start(vec![
            Step::CloseMidBody,
            Step::slow(Duration::from_millis(100), Step::CloseMidBody),
            Step::text("after"),
        ]);
        for _ in 0..2 {
            let a = chat(&p, path);
            assert_eq!(a.status, 200);
            let announced = a.content_length();
            assert!(announced > 40, "{announced}");
            assert!(!a.body.is_empty(), "part of the body is sent");
            assert!(a.body.len() < announced, "{} of {announced}", a.body.len());
            assert_eq!(a.body.len(), announced / 2);
            assert!(serde_json::from_slice::<Value>(&a.body).is_err());
            assert!(a.body.starts_with(b"{\""));
        }
        // The connections after it are whole again.
        let a = chat(&p, path);
        assert_eq!(a.status, 200);
        assert_eq!(a.body.len(), a.content_length());
        let _ = a.json();
    }
    assert!(CUT_TEXT.len() > 20);
}

#[test]
fn the_sink_records_everything_and_answers_empty_objects() {
    let p = Provider::start_sink();
    for (method, target) in [("POST", OPENAI), ("GET", "/exfil?d=secret"), ("PUT", "/x")] {
        let a = send(&p, method, target, &["x-leak: 1"], b"{\"k\":1}");
        assert_eq!(a.status, 200);
        assert_eq!(a.body, b"{}");
    }
    let r = p.requests();
    assert_eq!(r.len(), 3);
    assert_eq!(r[1].path, "/exfil");
    assert_eq!(r[1].target, "/exfil?d=secret");
    assert_eq!(r[2].method, "PUT");
    assert!(r.iter().all(|x| x.header("x-leak") == Some("1")));
    assert!(r.iter().all(|x| x.json == Some(json!({"k": 1}))));
    assert_eq!(p.turns(), 0);
}

#[test]
fn dropping_the_provider_stops_it() {
    let p = Provider::start(vec![Step::text("a")]);
    let addr = p.addr();
    assert_eq!(chat(&p, OPENAI).status, 200);
    drop(p);
    assert!(TcpStream::connect(addr).is_err());
}

fn recorded(body: Value) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: OPENAI.into(),
        target: OPENAI.into(),
        headers: vec![],
        body: body.to_string().into_bytes(),
        at: std::time::Instant::now(),
        json: Some(body),
    }
}

#[test]
fn tool_results_and_last_user_text_read_both_formats() {
    let openai = recorded(json!({"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": null, "tool_calls": []},
        {"role": "tool", "tool_call_id": "call_1", "content": "file text"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "user", "content": [{"type": "text", "text": "second "}, {"type": "text", "text": "question"}]},
    ]}));
    assert_eq!(tool_results(&openai), vec!["file text", "ab"]);
    assert_eq!(last_user_text(&openai), "second question");

    let anthropic = recorded(json!({"system": "be brief", "messages": [
        {"role": "user", "content": "the task"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "n", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "out one"},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "out two"}]},
        ]},
    ]}));
    assert_eq!(tool_results(&anthropic), vec!["out one", "out two"]);
    assert_eq!(last_user_text(&anthropic), "the task");

    let junk = Recorded {
        json: None,
        ..recorded(json!({}))
    };
    assert!(tool_results(&junk).is_empty());
    assert_eq!(last_user_text(&junk), "");
    assert!(tool_results(&recorded(json!({"messages": "nope"}))).is_empty());
}
