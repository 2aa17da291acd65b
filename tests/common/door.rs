//! The capsule's A2A door through the real `mur run --json`: a launch with flags and
//! environment, JSON-RPC calls in either protocol generation over raw loopback sockets,
//! server-sent-event streams read one event at a time, SIGTERM by PID, the session's trace.
#![allow(dead_code)]

use super::capsule::{manifest_arg, MUR};
use super::{read_all, Running, TempDir};
use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A manifest lifecycle block: `lifecycle:` with the given lines, e.g.
/// `lifecycle(&["task_acceptance: queue", "queue_depth: 2"])`.
pub fn lifecycle(lines: &[&str]) -> String {
    let mut s = "lifecycle:\n".to_string();
    for l in lines {
        s.push_str("  ");
        s.push_str(l);
        s.push('\n');
    }
    s
}

/// A process-unique message id.
pub fn message_id() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("msg-test-{}", N.fetch_add(1, Ordering::SeqCst))
}

/// Whether `method` is one of A2A 1.0's (they are CamelCase; 0.3's have a slash).
pub fn is_v10(method: &str) -> bool {
    method.starts_with(|c: char| c.is_ascii_uppercase())
}

/// The params of a send in the generation of `method` with `text`, and `config` (a JSON
/// object or null) as its `configuration`.
pub fn send_params(method: &str, text: &str, config: Value) -> Value {
    let message = if is_v10(method) {
        json!({"messageId": message_id(), "role": "ROLE_USER", "parts": [{"text": text}]})
    } else {
        json!({"kind": "message", "messageId": message_id(), "role": "user",
               "parts": [{"kind": "text", "text": text}]})
    };
    let mut p = json!({ "message": message });
    if !config.is_null() {
        p["configuration"] = config;
    }
    p
}

/// `configuration` that asks for an answer at once (1.0 `returnImmediately`, 0.3
/// `blocking: false`).
pub fn at_once(method: &str) -> Value {
    if is_v10(method) {
        json!({"returnImmediately": true})
    } else {
        json!({"blocking": false})
    }
}

/// The task of a send result or a stream's first event (1.0 wraps it in `task`).
pub fn task_of(result: &Value) -> &Value {
    result.get("task").unwrap_or(result)
}

/// A task's state, in either generation's spelling.
pub fn state_of(task: &Value) -> &str {
    task["status"]["state"]
        .as_str()
        .unwrap_or_else(|| panic!("no state in {task}"))
}

/// The text of a task's status message.
pub fn status_text(task: &Value) -> &str {
    task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no status message in {task}"))
}

/// The text of a task's `response` artifact, if it has one.
pub fn response_text(task: &Value) -> Option<&str> {
    let arts = task["artifacts"].as_array()?;
    let a = arts.iter().find(|a| a["name"] == "response")?;
    a["parts"][0]["text"].as_str()
}

/// Every object key anywhere in `v` (to check that 1.0 shapes carry no `kind`).
pub fn has_key(v: &Value, key: &str) -> bool {
    match v {
        Value::Object(o) => o.contains_key(key) || o.values().any(|x| has_key(x, key)),
        Value::Array(a) => a.iter().any(|x| has_key(x, key)),
        _ => false,
    }
}

/// Whether `ts` is RFC 3339 UTC with milliseconds: `2026-01-01T00:00:00.000Z`.
pub fn is_rfc3339_z(ts: &str) -> bool {
    let b = ts.as_bytes();
    b.len() == 24
        && b[23] == b'Z'
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19, 23].contains(&i) || c.is_ascii_digit())
}

/// An id with `prefix` and 32 lowercase hex digits.
pub fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('_'))
        .is_some_and(|h| {
            h.len() == 32
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// Poll `f` every 50 ms until it gives a value or `within` passes (then panic naming `what`).
pub fn wait_for<T>(within: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + within;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < until,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running `mur run --json` session and its door.
pub struct Door {
    pub running: Running,
    pub port: u16,
    pub addr: SocketAddr,
    pub session_id: String,
    pub workdir: PathBuf,
    pub records: PathBuf,
    /// The `--json` announcement line, parsed.
    pub announced: Value,
    next_id: AtomicU64,
}

/// The capsule the door tests serve: `sleep N` sleeps, `fail` panics, anything else is
/// answered at once with `done: <text>`.
pub const SLOW: &str = "tests/fixtures/slow/capsule.wasm";

pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A `queue` + `sleep` door of the slow capsule (open until SIGTERM) with `depth` waiting
/// tasks.
pub fn queue_door(t: &TempDir, depth: u32) -> Door {
    let depth = format!("queue_depth: {depth}");
    let dir = super::capsule::capsule(
        t,
        SLOW,
        &lifecycle(&["task_acceptance: queue", "after_task: sleep", &depth]),
    );
    start(t, &dir, &[], &[])
}

/// Start `mur run --json --manifest <dir>/murmur.yaml <args>` with `env`, with private cache
/// and records directories under `t`, and read its announcement.
pub fn start(t: &TempDir, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Door {
    let mut cmd = Command::new(MUR);
    cmd.args(["run", "--json", "--manifest", &manifest_arg(dir)])
        .args(args)
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .env("MURMUR_SPEND_DIR", t.path().join("spend"))
        .env_remove("MURMUR_A2A_TIMEOUT_SECS")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut running = Running::spawn(cmd);
    let line = running.line();
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("announcement {line:?}: {e}"));
    let url = v["url"].as_str().unwrap();
    let port: u16 = url
        .strip_prefix("localhost:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected url {url:?}"));
    let session_id = v["session_id"].as_str().unwrap().to_string();
    Door {
        running,
        port,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        records: t.path().join("records").join(&session_id),
        workdir: PathBuf::from(v["workdir"].as_str().unwrap()),
        session_id,
        announced: v.clone(),
        next_id: AtomicU64::new(1),
    }
}

impl Door {
    /// `host: 127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A raw exchange on a fresh connection.
    pub fn raw(&self, bytes: &[u8]) -> String {
        super::exchange(self.addr, bytes)
    }

    /// `GET path`; the whole answer.
    pub fn get(&self, path: &str) -> String {
        self.raw(format!("GET {path} HTTP/1.1\r\nhost: {}\r\n\r\n", self.host()).as_bytes())
    }

    /// The status of a GET of the agent card.
    pub fn card_status(&self) -> u16 {
        super::status_of(&self.get("/.well-known/agent-card.json"))
    }

    /// The request bytes of `POST /` with `body`, `host`, `content-type: application/json`
    /// and `headers`.
    pub fn post_bytes(&self, body: &[u8], headers: &[(&str, &str)]) -> Vec<u8> {
        let mut head = format!(
            "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
            self.host(),
            body.len()
        );
        for (n, v) in headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(body);
        out
    }

    /// `POST /` of `body` (see [`Door::post_bytes`]); the whole answer.
    pub fn post(&self, body: &[u8], headers: &[(&str, &str)]) -> String {
        self.raw(&self.post_bytes(body, headers))
    }

    /// A JSON-RPC request body for `method` with `params` and a fresh numeric id.
    pub fn envelope(&self, method: &str, params: &Value) -> (u64, Vec<u8>) {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        (id, serde_json::to_vec(&body).unwrap())
    }

    /// Call `method` with `params` and `headers` (plus `A2A-Version: 1.0` for a 1.0 method);
    /// the JSON-RPC response, which must come with HTTP 200 and echo the request id.
    pub fn call_with(&self, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
        let (id, body) = self.envelope(method, &params);
        let mut hs: Vec<(&str, &str)> = headers.to_vec();
        if is_v10(method) && !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("a2a-version")) {
            hs.push(("A2A-Version", "1.0"));
        }
        let answer = self.post(&body, &hs);
        assert_eq!(super::status_of(&answer), 200, "{method}: {answer}");
        // A 0.3 streaming method's error is the one event of an event stream.
        let json = if matches!(method, "message/stream" | "tasks/resubscribe") {
            assert!(
                answer.contains("\r\ncontent-type: text/event-stream\r\n"),
                "{answer}"
            );
            let event = super::body_of(&answer);
            assert!(
                event.ends_with("\n\n") && event.matches('\n').count() == 2,
                "{answer}"
            );
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("{answer}"))
                .trim_end()
        } else {
            assert!(
                answer.contains("\r\ncontent-type: application/json\r\n"),
                "{answer}"
            );
            super::body_of(&answer)
        };
        let v: Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{method}: not JSON ({e}): {answer}"));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert_eq!(v["id"], id, "{v}");
        v
    }

    /// [`Door::call_with`] without extra headers.
    pub fn call(&self, method: &str, params: Value) -> Value {
        self.call_with(method, params, &[])
    }

    /// The result of a call that must succeed.
    pub fn result(&self, method: &str, params: Value) -> Value {
        let v = self.call(method, params);
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    /// The (code, message) of a call that must fail.
    pub fn error_with(&self, method: &str, params: Value, headers: &[(&str, &str)]) -> (i64, String) {
        let v = self.call_with(method, params, headers);
        assert!(v.get("result").is_none(), "{method}: {v}");
        let e = &v["error"];
        (
            e["code"].as_i64().unwrap(),
            e["message"].as_str().unwrap().to_string(),
        )
    }

    pub fn error(&self, method: &str, params: Value) -> (i64, String) {
        self.error_with(method, params, &[])
    }

    /// Send `text` with `method` (a send of either generation) answered at once; the task.
    pub fn submit(&self, method: &str, text: &str) -> Value {
        let r = self.result(method, send_params(method, text, at_once(method)));
        task_of(&r).clone()
    }

    /// The task `id` through 1.0 GetTask.
    pub fn task(&self, id: &str) -> Value {
        self.result("GetTask", json!({ "id": id }))
    }

    /// Wait until task `id` is in `state` (1.0 spelling); the task.
    pub fn wait_state(&self, id: &str, state: &str, within: Duration) -> Value {
        wait_for(within, &format!("{id} to be {state}"), || {
            let t = self.task(id);
            (state_of(&t) == state).then_some(t)
        })
    }

    /// Open a stream: `method` with `params`; the head is read.
    pub fn stream_with(&self, method: &str, params: Value, headers: &[(&str, &str)]) -> Sse {
        let (id, body) = self.envelope(method, &params);
        let mut hs: Vec<(&str, &str)> = headers.to_vec();
        if is_v10(method) {
            hs.push(("A2A-Version", "1.0"));
        }
        let mut sse = Sse::open(self.addr, &self.post_bytes(&body, &hs));
        sse.id = id;
        sse
    }

    pub fn stream(&self, method: &str, params: Value) -> Sse {
        self.stream_with(method, params, &[])
    }

    /// SIGTERM by PID; the exit status (within 15 s).
    pub fn term(&mut self) -> ExitStatus {
        let pid = self.running.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success(), "kill -TERM {pid}");
        self.wait_exit(Duration::from_secs(15))
    }

    /// The exit status once the process ends by itself within `within`.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let child = &mut self.running.child;
        wait_for(within, "mur run to exit", || child.try_wait().unwrap())
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.running.child.try_wait().unwrap().is_none()
    }

    /// The session's trace so far (complete lines only).
    pub fn trace(&self) -> Vec<Value> {
        super::trace_lines(&self.records)
    }

    /// The trace events of `kind`.
    pub fn events(&self, kind: &str) -> Vec<Value> {
        super::trace_events(&self.records, kind)
    }

    /// The one `kind` event of task `task_id`.
    pub fn event_of(&self, kind: &str, task_id: &str) -> Value {
        let evs: Vec<Value> = self
            .events(kind)
            .into_iter()
            .filter(|e| e["task_id"] == task_id)
            .collect();
        assert_eq!(evs.len(), 1, "{kind} events of {task_id}: {evs:?}");
        evs[0].clone()
    }

    /// A file of the session's workdir.
    pub fn workfile(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.workdir.join(rel)).ok()
    }
}

/// One item of an SSE body.
#[derive(Debug, Clone, PartialEq)]
pub enum Ev {
    /// A `data:` event, parsed.
    Data(Value),
    /// A comment line (`: keep-alive`), without its colon and space.
    Comment(String),
}

/// A streamed answer read event by event.
pub struct Sse {
    pub s: TcpStream,
    /// The response head (status line and fields).
    pub head: String,
    /// The JSON-RPC id of the request.
    pub id: u64,
    buf: Vec<u8>,
    eof: bool,
}

impl Sse {
    /// Send `request` on a fresh connection and read the response head.
    pub fn open(addr: SocketAddr, request: &[u8]) -> Sse {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request).unwrap();
        let mut sse = Sse {
            s,
            head: String::new(),
            id: 0,
            buf: Vec::new(),
            eof: false,
        };
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(i) = sse.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                sse.head = String::from_utf8_lossy(&sse.buf[..i + 4]).into_owned();
                sse.buf.drain(..i + 4);
                return sse;
            }
            assert!(
                sse.fill(until),
                "no head before the stream closed: {:?}",
                String::from_utf8_lossy(&sse.buf)
            );
        }
    }

    /// The head's status.
    pub fn status(&self) -> u16 {
        super::status_of(&self.head)
    }

    /// Read more bytes (until `until`); false at end of stream.
    fn fill(&mut self, until: Instant) -> bool {
        if self.eof {
            return false;
        }
        let left = until.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "stream timed out; buffered {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        self.s.set_read_timeout(Some(left)).unwrap();
        let mut chunk = [0u8; 16384];
        match self.s.read(&mut chunk) {
            Ok(0) => {
                self.eof = true;
                false
            }
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                true
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) =>
            {
                true
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {
                self.eof = true;
                false
            }
            Err(e) => panic!("stream read failed: {e}"),
        }
    }

    /// The next event or comment within `within`; `None` when the server closed the stream.
    pub fn next(&mut self, within: Duration) -> Option<Ev> {
        let until = Instant::now() + within;
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..i + 2).collect();
                let text = String::from_utf8(block).expect("an SSE event is UTF-8");
                let text = text.trim_end_matches('\n');
                if let Some(c) = text.strip_prefix(':') {
                    return Some(Ev::Comment(c.trim_start().to_string()));
                }
                let data: String = text
                    .lines()
                    .map(|l| {
                        l.strip_prefix("data: ")
                            .or_else(|| l.strip_prefix("data:"))
                            .unwrap_or_else(|| panic!("not an SSE data line: {l:?}"))
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                let v: Value = serde_json::from_str(&data).unwrap_or_else(|e| panic!("event {data:?}: {e}"));
                return Some(Ev::Data(v));
            }
            if !self.fill(until) {
                assert!(
                    self.buf.is_empty(),
                    "stream ended mid-event: {:?}",
                    String::from_utf8_lossy(&self.buf)
                );
                return None;
            }
        }
    }

    /// The next `data:` event's JSON-RPC result within `within` (comments skipped); panics at
    /// the end of the stream, or on an error or another id.
    pub fn result(&mut self, within: Duration) -> Value {
        loop {
            match self.next(within) {
                Some(Ev::Comment(_)) => continue,
                Some(Ev::Data(v)) => {
                    assert_eq!(v["jsonrpc"], "2.0", "{v}");
                    assert_eq!(v["id"], self.id, "{v}");
                    assert!(v.get("error").is_none(), "{v}");
                    return v["result"].clone();
                }
                None => panic!("the stream ended before the next event"),
            }
        }
    }

    /// Everything until the server closes the stream (within `within`).
    pub fn rest(&mut self, within: Duration) -> Vec<Ev> {
        let until = Instant::now() + within;
        let mut out = Vec::new();
        while let Some(ev) = self.next(
            until
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ) {
            out.push(ev);
        }
        out
    }

    /// Assert the server closes the stream within `within` with nothing but comments first.
    pub fn expect_end(&mut self, within: Duration) {
        let rest = self.rest(within);
        assert!(
            rest.iter().all(|e| matches!(e, Ev::Comment(_))),
            "events after the last: {rest:?}"
        );
    }
}

/// The whole answer on `s` (reads to the end).
pub fn read_rest(s: &mut TcpStream) -> String {
    read_all(s)
}
