//! A scripted mock LLM provider on 127.0.0.1, for black-box tests of agent capsules.
//!
//! The mock answers on one OS-assigned loopback port and speaks both wire formats, chosen by
//! path: `POST /v1/chat/completions` gets an OpenAI chat-completions answer and
//! `POST /v1/messages` an Anthropic Messages answer. Each such request consumes the next
//! [`Step`] of the script; once the script is exhausted every model request gets a 500 with
//! a provider-format error `mock script exhausted`. Any other path gets a 404 JSON error, a
//! model path with another method a 405 (neither consumes a step). Every request that
//! reaches the mock, on any path, is recorded ([`Provider::requests`]).
//!
//! Token usage is deterministic: the n-th request to a model path (1-based, counting every
//! such request, including those answered with an error) is "turn n", and a successful
//! answer for turn n reports `input_tokens` / `prompt_tokens` = 10 * n, `output_tokens` /
//! `completion_tokens` = 5 and `total_tokens` = 10 * n + 5 (see [`usage_for`]).
//!
//! The HTTP side is the project's own layer (`murmur::http::Server`, deferred answers through
//! `Ticket`). That layer always writes a whole response, so to cut one short
//! ([`Step::CloseMidBody`]) the public port is a small byte relay in front of it: every
//! connection is piped unchanged to the inner server, except that for a connection the
//! handler marked (by the relay socket's port, which the handler sees as the peer) the relay
//! forwards the response head and only half of the body, then closes. The loopback guard is
//! off on the inner server (the `host` its clients send names the relay's port, not the inner
//! one); `host` is recorded like every other header so tests can assert it.
//!
//! A *responder* mock ([`Provider::start_responder`]) has no script: a function decides each
//! answer from the request itself, so one mock serves every capsule of a formation (each
//! telling itself apart by, say, the `model` it asks for) deterministically whatever order
//! their requests arrive in. Turn numbers and recording are as for a script.
#![allow(dead_code)]

use murmur::http::{Controller, Exchange, Limits, Reply, Request, Response, Server};
use serde_json::{json, Value};
use std::collections::{HashSet, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The OpenAI-compatible chat-completions path.
pub const OPENAI_PATH: &str = "/v1/chat/completions";
/// The Anthropic Messages path.
pub const ANTHROPIC_PATH: &str = "/v1/messages";
/// Output tokens every successful answer reports.
pub const OUTPUT_TOKENS: u64 = 5;
/// Input tokens per turn: turn n reports `INPUT_TOKENS_PER_TURN * n`.
pub const INPUT_TOKENS_PER_TURN: u64 = 10;
/// The error message once the script has run out.
pub const EXHAUSTED: &str = "mock script exhausted";
/// The text of the (valid, complete) answer that [`Step::CloseMidBody`] cuts in half.
pub const CUT_TEXT: &str = "this answer is cut off in the middle of its body by the mock provider";
/// The body [`Step::Malformed`] answers with.
pub const MALFORMED_BODY: &str = r#"{"unexpected":true}"#;
/// The body [`Step::NotJson`] answers with (declared `application/json`).
pub const NOT_JSON_BODY: &str = "<html>this is not json at all";
/// Extra time a deferred ([`Step::Slow`]) answer may take beyond its delay.
const DEFER_SLACK: Duration = Duration::from_secs(30);
/// How often the relay's request pump checks whether its connection is finished.
const PUMP_TICK: Duration = Duration::from_millis(200);

/// `(input_tokens, output_tokens)` a successful answer for 1-based `turn` reports.
pub fn usage_for(turn: u64) -> (u64, u64) {
    (INPUT_TOKENS_PER_TURN * turn, OUTPUT_TOKENS)
}

/// One scripted answer to one model request.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A final answer with this text (`end_turn` / `stop`).
    Text(String),
    /// A tool-call answer: `(id, name, input)` per call, no text (`tool_use` / `tool_calls`).
    Tools(Vec<(String, String, Value)>),
    /// A tool-call answer that also carries text before the calls.
    TextTools(String, Vec<(String, String, Value)>),
    /// A truncated answer with this text (`max_tokens` / `length`).
    MaxTokens(String),
    /// An error answer: `code`, the provider-format error body with `message`, and a
    /// `retry-after: <secs>` header when given.
    Status {
        code: u16,
        message: String,
        retry_after: Option<u64>,
    },
    /// 200 with JSON that is not the provider's format: [`MALFORMED_BODY`].
    Malformed,
    /// 200 with a body that is not JSON at all: [`NOT_JSON_BODY`].
    NotJson,
    /// The inner step, answered only after the delay (the server loop is not blocked).
    Slow(Duration, Box<Step>),
    /// A 200 head announcing the whole body, about half the body, then the connection closes.
    CloseMidBody,
}

impl Step {
    /// [`Step::Text`].
    pub fn text(text: &str) -> Step {
        Step::Text(text.to_string())
    }

    /// [`Step::Tools`] with one call.
    pub fn tool(id: &str, name: &str, input: Value) -> Step {
        Step::Tools(vec![(id.to_string(), name.to_string(), input)])
    }

    /// [`Step::Status`] without `retry-after`.
    pub fn status(code: u16, message: &str) -> Step {
        Step::Status {
            code,
            message: message.to_string(),
            retry_after: None,
        }
    }

    /// [`Step::Status`] with `retry-after: secs`.
    pub fn retry_after(code: u16, message: &str, secs: u64) -> Step {
        Step::Status {
            code,
            message: message.to_string(),
            retry_after: Some(secs),
        }
    }

    /// [`Step::Slow`].
    pub fn slow(delay: Duration, step: Step) -> Step {
        Step::Slow(delay, Box::new(step))
    }
}

/// The two wire formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic,
}

impl Wire {
    /// The wire format a path selects, if it is a model path.
    pub fn of_path(path: &str) -> Option<Wire> {
        match path {
            OPENAI_PATH => Some(Wire::OpenAi),
            ANTHROPIC_PATH => Some(Wire::Anthropic),
            _ => None,
        }
    }
}

/// One request as the mock received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The method, as sent.
    pub method: String,
    /// The target's path, without the query.
    pub path: String,
    /// The whole request target, query included.
    pub target: String,
    /// Header fields in arrival order, names lowercase, values as (lossy) UTF-8.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
    /// When the whole request had arrived (for the agent bench's per-turn figures).
    pub at: Instant,
    /// The body parsed as JSON, if it is JSON.
    pub json: Option<Value>,
}

impl Recorded {
    fn from_request(req: &Request) -> Recorded {
        Recorded {
            method: req.method.clone(),
            path: req.path().to_string(),
            target: req.target.clone(),
            headers: req
                .headers
                .iter()
                .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
                .collect(),
            body: req.body.clone(),
            at: Instant::now(),
            json: serde_json::from_slice(&req.body).ok(),
        }
    }

    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The wire format of this request's path, if it is a model path.
    pub fn wire(&self) -> Option<Wire> {
        Wire::of_path(&self.path)
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

struct Script {
    steps: VecDeque<Step>,
    /// Model requests seen so far (the last one's turn number).
    turns: u64,
}

/// What a responder mock answers with: a function of the request.
pub type Responder = Box<dyn Fn(&Recorded) -> Step + Send + Sync + 'static>;

struct Shared {
    sink: bool,
    /// When set, the step for each model request comes from here instead of the script.
    responder: Option<Responder>,
    recorded: Mutex<Vec<Recorded>>,
    script: Mutex<Script>,
    /// Ports of relay-to-inner sockets whose answer the relay is to cut mid-body.
    cut: Mutex<HashSet<u16>>,
}

/// Lock, shrugging off poisoning: a panicking test thread must not take the mock down.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running mock provider; dropping it stops it.
pub struct Provider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    controller: Controller,
    stopping: Arc<AtomicBool>,
    server: Option<JoinHandle<()>>,
    relay: Option<JoinHandle<()>>,
}

impl Provider {
    /// Start a mock that answers model requests from `script`, in order.
    pub fn start(script: Vec<Step>) -> Provider {
        Provider::launch(script, false, None)
    }

    /// Start a mock that answers each model request with `f(request)`. A panic in `f` is
    /// answered with a provider-format 500 naming it, never taking the mock down.
    pub fn start_responder(f: impl Fn(&Recorded) -> Step + Send + Sync + 'static) -> Provider {
        Provider::launch(Vec::new(), false, Some(Box::new(f)))
    }

    /// Start a sink: it records every request and answers each with 200 `{}`.
    pub fn start_sink() -> Provider {
        Provider::launch(Vec::new(), true, None)
    }

    fn launch(script: Vec<Step>, sink: bool, responder: Option<Responder>) -> Provider {
        let shared = Arc::new(Shared {
            sink,
            responder,
            recorded: Mutex::new(Vec::new()),
            script: Mutex::new(Script {
                steps: script.into(),
                turns: 0,
            }),
            cut: Mutex::new(HashSet::new()),
        });
        let inner = TcpListener::bind("127.0.0.1:0").expect("bind the mock's inner listener");
        let limits = Limits {
            max_body: 8 * 1024 * 1024,
            loopback_only: false,
            ..Limits::default()
        };
        let server = Server::bind(inner, limits).expect("start the mock's HTTP server");
        let inner_addr = server.local_addr().expect("inner address");
        let controller = server.controller();
        let handler_shared = Arc::clone(&shared);
        let server = std::thread::spawn(move || {
            let _ = server.run(move |req: &Request, ex: &Exchange<'_>| handle(&handler_shared, req, ex));
        });

        let front = TcpListener::bind("127.0.0.1:0").expect("bind the mock's listener");
        let addr = front.local_addr().expect("mock address");
        let stopping = Arc::new(AtomicBool::new(false));
        let relay_stop = Arc::clone(&stopping);
        let relay_shared = Arc::clone(&shared);
        let relay = std::thread::spawn(move || accept_loop(front, inner_addr, relay_shared, relay_stop));
        Provider {
            addr,
            shared,
            controller,
            stopping,
            server: Some(server),
            relay: Some(relay),
        }
    }

    /// The port the mock listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The address the mock listens on (`127.0.0.1:P`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:P/v1`: the OpenAI-compatible base (POST `<base>/chat/completions`).
    pub fn base_openai(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port())
    }

    /// `http://127.0.0.1:P`: the Anthropic base (POST `<base>/v1/messages`).
    pub fn base_anthropic(&self) -> String {
        format!("http://127.0.0.1:{}", self.port())
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.shared.recorded).clone()
    }

    /// The requests to the two model paths, in arrival order.
    pub fn model_requests(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.wire().is_some())
            .collect()
    }

    /// Append `step` to the script: for an answer that depends on what an earlier turn saw.
    pub fn push(&self, step: Step) {
        lock(&self.shared.script).steps.push_back(step);
    }

    /// Steps not yet consumed.
    pub fn remaining(&self) -> usize {
        lock(&self.shared.script).steps.len()
    }

    /// Model requests received so far (the last turn number).
    pub fn turns(&self) -> u64 {
        lock(&self.shared.script).turns
    }

    /// Wait until at least `n` requests have been recorded or `timeout` passes; whether they
    /// were.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        loop {
            if lock(&self.shared.recorded).len() >= n {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stop serving (also done on drop). Open connections are dropped.
    pub fn stop(&mut self) {
        if !self.stopping.swap(true, Ordering::SeqCst) {
            // Wake the blocking accept so the relay sees the flag; if that fails, leave the
            // accept thread behind rather than wait for it.
            let woke = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).is_ok();
            self.controller.stop();
            if let Some(t) = self.relay.take() {
                if woke {
                    let _ = t.join();
                }
            }
        }
        if let Some(t) = self.server.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The inner server's handler. Never panics on any input (the layer would answer a 500).
fn handle(shared: &Shared, req: &Request, ex: &Exchange<'_>) -> Reply {
    let recorded = Recorded::from_request(req);
    let for_responder = shared.responder.as_ref().map(|_| recorded.clone());
    lock(&shared.recorded).push(recorded);
    if shared.sink {
        return Response::json(200, "{}").into();
    }
    let Some(wire) = Wire::of_path(req.path()) else {
        let body = json!({
            "error": {"message": format!("mock provider: no such path {}", req.path()), "type": "not_found_error"}
        });
        return Response::json_value(404, &body).into();
    };
    if req.method != "POST" {
        return error_response(wire, 405, "mock provider: model paths take POST", None).into();
    }
    let (step, turn) = {
        let mut script = lock(&shared.script);
        script.turns += 1;
        let step = match shared.responder {
            Some(_) => None,
            None => script.steps.pop_front(),
        };
        (step, script.turns)
    };
    // A responder is asked outside the script's lock (it may take its time).
    let step = match (&shared.responder, for_responder) {
        (Some(f), Some(r)) => match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&r))) {
            Ok(step) => Some(step),
            Err(_) => return error_response(wire, 500, "mock provider: the responder panicked", None).into(),
        },
        _ => step,
    };
    let Some(step) = step else {
        return error_response(wire, 500, EXHAUSTED, None).into();
    };
    let model = serde_json::from_slice::<Value>(&req.body)
        .ok()
        .and_then(|v| v.get("model").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "mock-model".to_string());

    // Flatten nested delays.
    let mut delay = Duration::ZERO;
    let mut step = step;
    while let Step::Slow(d, inner) = step {
        delay = delay.saturating_add(d);
        step = *inner;
    }
    if step == Step::CloseMidBody {
        match ex.peer() {
            Some(peer) => {
                lock(&shared.cut).insert(peer.port());
            }
            None => {
                return error_response(
                    wire,
                    500,
                    "mock provider: cannot cut a connection without a peer",
                    None,
                )
                .into();
            }
        }
    }
    let resp = answer(wire, &step, turn, &model).header("x-mock-turn", &turn.to_string());
    if delay.is_zero() {
        return resp.into();
    }
    let ticket = ex.defer(delay.saturating_add(DEFER_SLACK));
    std::thread::spawn(move || {
        std::thread::sleep(delay);
        // False when the server is gone; an answer for a connection that closed meanwhile
        // is dropped by the loop. Neither is an error here.
        let _ = ticket.complete(resp);
    });
    Reply::Later
}

/// The response for a step that is not `Slow`.
fn answer(wire: Wire, step: &Step, turn: u64, model: &str) -> Response {
    match step {
        Step::Text(text) => success(wire, turn, model, Some(text), &[], Finish::End),
        Step::Tools(calls) => success(wire, turn, model, None, calls, Finish::Tools),
        Step::TextTools(text, calls) => success(wire, turn, model, Some(text), calls, Finish::Tools),
        Step::MaxTokens(text) => success(wire, turn, model, Some(text), &[], Finish::Length),
        Step::Status {
            code,
            message,
            retry_after,
        } => error_response(wire, *code, message, *retry_after),
        Step::Malformed => Response::json(200, MALFORMED_BODY),
        Step::NotJson => Response::json(200, NOT_JSON_BODY),
        Step::CloseMidBody => success(wire, turn, model, Some(CUT_TEXT), &[], Finish::End),
        // Flattened by the caller; kept total for safety.
        Step::Slow(_, inner) => answer(wire, inner, turn, model),
    }
}

#[derive(Clone, Copy)]
enum Finish {
    End,
    Tools,
    Length,
}

fn success(
    wire: Wire,
    turn: u64,
    model: &str,
    text: Option<&str>,
    calls: &[(String, String, Value)],
    finish: Finish,
) -> Response {
    let (input, output) = usage_for(turn);
    let body = match wire {
        Wire::OpenAi => {
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                let tool_calls: Vec<Value> = calls
                    .iter()
                    .map(|(id, name, args)| {
                        json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
                    })
                    .collect();
                message["tool_calls"] = Value::Array(tool_calls);
            }
            let finish = match finish {
                Finish::End => "stop",
                Finish::Tools => "tool_calls",
                Finish::Length => "length",
            };
            json!({
                "id": format!("chatcmpl-mock-{turn}"),
                "object": "chat.completion",
                "created": 1_700_000_000u64,
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
            })
        }
        Wire::Anthropic => {
            let mut content = Vec::new();
            if let Some(text) = text {
                content.push(json!({"type": "text", "text": text}));
            }
            for (id, name, input) in calls {
                content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
            }
            let stop = match finish {
                Finish::End => "end_turn",
                Finish::Tools => "tool_use",
                Finish::Length => "max_tokens",
            };
            json!({
                "id": format!("msg_mock_{turn}"),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": output},
            })
        }
    };
    Response::json_value(200, &body)
}

/// The error type each provider names for a status.
fn error_type(wire: Wire, code: u16) -> &'static str {
    match (wire, code) {
        (_, 401) => "authentication_error",
        (_, 403) => "permission_error",
        (_, 404) => "not_found_error",
        (_, 429) => "rate_limit_error",
        (Wire::Anthropic, 413) => "request_too_large",
        (Wire::Anthropic, 529) => "overloaded_error",
        (Wire::Anthropic, c) if c >= 500 => "api_error",
        (Wire::OpenAi, c) if c >= 500 => "server_error",
        _ => "invalid_request_error",
    }
}

/// An error answer in `wire`'s own format, with `retry-after` when given.
fn error_response(wire: Wire, code: u16, message: &str, retry_after: Option<u64>) -> Response {
    let kind = error_type(wire, code);
    let body = match wire {
        Wire::OpenAi => json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
        Wire::Anthropic => json!({"type": "error", "error": {"type": kind, "message": message}}),
    };
    let resp = Response::json_value(code, &body);
    match retry_after {
        Some(secs) => resp.header("retry-after", &secs.to_string()),
        None => resp,
    }
}

/// Accept on the public port and relay each connection to the inner server.
fn accept_loop(front: TcpListener, inner: SocketAddr, shared: Arc<Shared>, stopping: Arc<AtomicBool>) {
    for conn in front.incoming() {
        if stopping.load(Ordering::SeqCst) {
            return;
        }
        match conn {
            Ok(client) => {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || relay(client, inner, &shared));
            }
            // Out of descriptors or similar: back off rather than spin.
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Pipe one connection: request bytes to the inner server, its answer back, cut in half when
/// the handler marked this connection.
fn relay(client: TcpStream, inner: SocketAddr, shared: &Shared) {
    let Ok(upstream) = TcpStream::connect(inner) else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = upstream.set_nodelay(true);
    let Ok(port) = upstream.local_addr().map(|a| a.port()) else {
        return;
    };
    let (Ok(client_in), Ok(upstream_out)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let done = Arc::new(AtomicBool::new(false));
    let pump_done = Arc::clone(&done);
    let pump = std::thread::spawn(move || pump_request(client_in, upstream_out, &pump_done));
    pump_response(client, upstream, port, shared);
    done.store(true, Ordering::SeqCst);
    let _ = pump.join();
    lock(&shared.cut).remove(&port);
}

/// Client to inner server until the client's EOF (passed on as a half-close) or `done`.
fn pump_request(mut client: TcpStream, mut upstream: TcpStream, done: &AtomicBool) {
    let _ = client.set_read_timeout(Some(PUMP_TICK));
    let mut buf = [0u8; 16 * 1024];
    while !done.load(Ordering::SeqCst) {
        match client.read(&mut buf) {
            Ok(0) => {
                let _ = upstream.shutdown(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if upstream.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(_) => {
                let _ = upstream.shutdown(Shutdown::Write);
                return;
            }
        }
    }
}

/// Inner server to client. Interim (1xx) heads pass through; at the final head the cut mark
/// is checked: unmarked answers are copied as they come, a marked one is read whole and only
/// its head and the first half of its body are sent before the close.
fn pump_response(mut client: TcpStream, mut upstream: TcpStream, port: u16, shared: &Shared) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(end) = find_head_end(&buf) {
            if buf.starts_with(b"HTTP/1.1 1") || buf.starts_with(b"HTTP/1.0 1") {
                if client.write_all(&buf[..end]).is_err() {
                    return;
                }
                buf.drain(..end);
                continue;
            }
            break Some(end);
        }
        match upstream.read(&mut chunk) {
            Ok(0) => break None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break None,
        }
    };
    let cut = head_end.is_some() && lock(&shared.cut).remove(&port);
    if let (true, Some(end)) = (cut, head_end) {
        // The inner server closes after its answer: read it whole, then send half the body.
        loop {
            match upstream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let body_len = buf.len() - end;
        let keep = end + body_len / 2;
        let _ = client.write_all(&buf[..keep]);
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    if client.write_all(&buf).is_err() {
        return;
    }
    loop {
        match upstream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                if client.write_all(&chunk[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = client.shutdown(Shutdown::Write);
}

/// Where the first head in `buf` ends (after its blank line).
fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// The text of every tool result `req` carried, in order, for either wire format: OpenAI
/// `role: tool` messages' content; Anthropic `tool_result` blocks' content. Content given as
/// an array of parts is the concatenation of their `text`s.
pub fn tool_results(req: &Recorded) -> Vec<String> {
    let Some(messages) = messages_of(req) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for m in messages {
        if m.get("role").and_then(Value::as_str) == Some("tool") {
            out.push(content_text(m.get("content")));
            continue;
        }
        if let Some(blocks) = m.get("content").and_then(Value::as_array) {
            for b in blocks {
                if b.get("type").and_then(Value::as_str) == Some("tool_result") {
                    out.push(content_text(b.get("content")));
                }
            }
        }
    }
    out
}

/// The text of the last user message in `req` that has any text (so an Anthropic user turn
/// that only carries `tool_result` blocks is skipped); empty when there is none. Text parts
/// are concatenated.
pub fn last_user_text(req: &Recorded) -> String {
    let Some(messages) = messages_of(req) else {
        return String::new();
    };
    messages
        .iter()
        .rev()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .map(|m| content_text(m.get("content")))
        .find(|t| !t.is_empty())
        .unwrap_or_default()
}

/// The conversation a request sent, the system prompt left out: each message as
/// `role: text`.
pub fn turns(req: &Recorded) -> Vec<String> {
    messages_of(req)
        .map(|m| {
            m.iter()
                .filter(|m| m.get("role").and_then(Value::as_str) != Some("system"))
                .map(|m| {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
                    format!("{role}: {}", content_text(m.get("content")))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn messages_of(req: &Recorded) -> Option<&Vec<Value>> {
    req.json.as_ref()?.get("messages")?.as_array()
}

/// A content value as text: a string as is; an array of parts as the concatenation of the
/// `text` of its text parts (`{"type":"text","text":..}` or a bare `{"text":..}`).
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|p| matches!(p.get("type").and_then(Value::as_str), None | Some("text")))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

/// The `model` a request asked for (empty when it named none).
pub fn model_of(req: &Recorded) -> String {
    req.json
        .as_ref()
        .and_then(|j| j.get("model"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// Whether the last message of `req` is a tool result: an OpenAI `role: tool` message, or an
/// Anthropic user turn carrying a `tool_result` block.
pub fn last_is_tool_result(req: &Recorded) -> bool {
    let Some(last) = messages_of(req).and_then(|m| m.last()) else {
        return false;
    };
    if last.get("role").and_then(Value::as_str) == Some("tool") {
        return true;
    }
    last.get("content")
        .and_then(Value::as_array)
        .is_some_and(|blocks| {
            blocks
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        })
}

/// The names of the tools a model request offered (OpenAI `tools[].function.name`,
/// Anthropic `tools[].name`).
pub fn offered(req: &Recorded) -> Vec<String> {
    let tools = req
        .json
        .as_ref()
        .and_then(|j| j.get("tools"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    tools
        .iter()
        .filter_map(|t| {
            t.pointer("/function/name")
                .or_else(|| t.get("name"))
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect()
}
