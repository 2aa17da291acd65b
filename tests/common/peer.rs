//! Helpers of the peer-plane tests (tests/peer_plane*.rs): agent capsules declaring
//! `exports.peer_files` and `capabilities.peer_fetch`, a stand-in peer serving an agent
//! card, raw requests to a door, and readers of the tool results the mock provider saw.
#![allow(dead_code)]

use super::agent::Spec;
use super::provider::{tool_results, Provider};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A loopback port nothing listens on right now (for `network.internal_port`).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `spec`'s manifest with `caps` (lines already indented by two spaces) added under
/// `capabilities:` and the top-level blocks `tail` appended.
pub fn yaml(spec: &Spec, caps: &str, tail: &str) -> String {
    let base = spec.yaml();
    assert!(base.contains("capabilities:\n"), "{base}");
    format!(
        "{}{tail}",
        base.replacen("capabilities:\n", &format!("capabilities:\n{caps}"), 1)
    )
}

/// An `exports.peer_files` block.
pub fn peer_files(root: &str, max_ttl: Option<&str>, max_bytes: Option<&str>) -> String {
    let mut y = format!("exports:\n  peer_files:\n    root: {root}\n");
    if let Some(t) = max_ttl {
        y.push_str(&format!("    max_ttl: {t}\n"));
    }
    if let Some(b) = max_bytes {
        y.push_str(&format!("    max_bytes: {b}\n"));
    }
    y
}

/// A `capabilities.peer_fetch` line.
pub fn peer_fetch(allow: &[&str]) -> String {
    let list: Vec<String> = allow.iter().map(|a| format!("{a:?}")).collect();
    format!("  peer_fetch: {{allow: [{}]}}\n", list.join(", "))
}

/// The top-level `network.internal_port` block.
pub fn internal_port(port: u16) -> String {
    format!("network: {{internal_port: {port}}}\n")
}

/// A `share-file` call for a scripted turn.
pub fn share(id: &str, path: &str, peer: &str, ttl: Option<&str>) -> (String, String, Value) {
    let mut input = json!({"path": path, "peer": peer});
    if let Some(t) = ttl {
        input["ttl"] = t.into();
    }
    (id.into(), "share-file".into(), input)
}

/// A `fetch-peer-file` call for a scripted turn.
pub fn fetch(id: &str, peer: &str, handle: &str) -> (String, String, Value) {
    (
        id.into(),
        "fetch-peer-file".into(),
        json!({"peer": peer, "handle": handle}),
    )
}

/// The tool results the `n`-th model request (0-based) carried, each parsed as JSON.
pub fn results(p: &Provider, n: usize) -> Vec<Value> {
    let reqs = p.model_requests();
    let req = reqs
        .get(n)
        .unwrap_or_else(|| panic!("only {} model requests", reqs.len()));
    tool_results(req)
        .iter()
        .map(|t| serde_json::from_str(t).unwrap_or_else(|e| panic!("tool result {t:?}: {e}")))
        .collect()
}

/// The names of the tools a model request offered.
#[allow(unused_imports)]
pub use super::provider::offered;

/// A string field of a JSON value.
pub fn sv<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key} in {v}"))
}

/// A raw HTTP answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// Header lines, names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Every byte received.
    pub raw: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.raw)))
    }

    /// The `error` code of a refusal.
    pub fn code(&self) -> String {
        self.json()["error"].as_str().unwrap_or_default().to_string()
    }
}

/// One raw request to the door on `port`: `method path` with the loopback host and
/// `headers`, read to the close.
pub fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {:?}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.get(9..12))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
        raw,
    }
}

/// `GET /resources/peer/<handle>` on the door at `port`, asserting `audience` when given.
pub fn redeem(port: u16, handle: &str, audience: Option<&str>) -> Answer {
    let headers: Vec<(&str, &str)> = audience
        .map(|a| vec![("x-murmur-audience", a)])
        .unwrap_or_default();
    request(port, "GET", &format!("/resources/peer/{handle}"), &headers)
}

/// `handle` with its payload's `p` replaced by `path` and its MAC kept.
pub fn tampered(handle: &str, path: &str) -> String {
    let parts: Vec<&str> = handle.split('.').collect();
    assert_eq!(parts.len(), 3, "{handle}");
    let raw = murmur::b64::decode(parts[1].as_bytes()).unwrap();
    let mut payload: Value = serde_json::from_slice(&raw).unwrap();
    payload["p"] = path.into();
    let b = murmur::b64::encode(&serde_json::to_vec(&payload).unwrap());
    format!("{}.{b}.{}", parts[0], parts[2])
}

/// The lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A stand-in peer on loopback: every request is answered `200` with `body` as JSON, and
/// the connections it took are counted. Stops when dropped.
pub struct FakePeer {
    pub port: u16,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakePeer {
    /// A peer whose every answer is `body`.
    pub fn start(body: Value) -> FakePeer {
        FakePeer::start_with(|_| body)
    }

    /// A peer serving the agent card of `name` at its own `localhost:<port>`.
    pub fn card(name: &str) -> FakePeer {
        FakePeer::start_with(|port| json!({"name": name, "url": format!("localhost:{port}")}))
    }

    /// A peer whose every answer is made from its own port.
    pub fn start_with(body: impl FnOnce(u16) -> Value) -> FakePeer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, st) = (hits.clone(), stop.clone());
        let body = body(port).to_string();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut c) = conn else { continue };
                h.fetch_add(1, Ordering::SeqCst);
                let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match c.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = c.write_all(answer.as_bytes());
            }
        });
        FakePeer {
            port,
            hits,
            stop,
            thread: Some(thread),
        }
    }

    /// Connections taken so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    /// `localhost:<port>`.
    pub fn addr(&self) -> String {
        format!("localhost:{}", self.port)
    }

    fn stop_now(&mut self) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            let _ = TcpStream::connect(("127.0.0.1", self.port));
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FakePeer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

// ---------------------------------------------------------------------------------------
// Capsules of the peer tests.
// ---------------------------------------------------------------------------------------

use super::agent::{files_under, Drv, World};
use super::agent_door::door_kit::{id, submit, SETTLE};
use super::agent_door::Served;
use std::path::Path;

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// A world whose capsule `name` (OpenAI driver, mock `p`, no shell) also allows `network`,
/// declares the capability lines `caps` and ends with the top-level blocks `tail`.
pub fn peer_world(label: &str, name: &str, p: &Provider, network: &[&str], caps: &str, tail: &str) -> World {
    let w = World::new(label);
    let mut spec = Spec::new(Drv::OpenAi, p);
    spec.name = name.into();
    spec.shell = Vec::new();
    spec.network = network.iter().map(|n| n.to_string()).collect();
    w.manifest_text(&yaml(&spec, caps, tail));
    w
}

/// `w`'s capsule served over the workdir `work` (created when missing).
pub fn serve_in(w: &World, work: &Path) -> Served {
    std::fs::create_dir_all(work).unwrap();
    w.serve_with(None, &[], &["--workdir", work.to_str().unwrap()])
}

/// One A2A task on `s`, waited for: it must complete.
pub fn run_task(s: &Served, text: &str) {
    let t = submit(s, text, &[]);
    let done = s.settled(&id(&t), SETTLE);
    assert_eq!(
        done["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{done}\n{}",
        s.both()
    );
}

/// Whether `bytes` hold something token-shaped: `mh1.` and a base64url character. (The
/// text `mh1.<payload>.<mac>` of a `malformed_handle` message names the format, no token.)
pub fn holds_token(bytes: &[u8]) -> bool {
    bytes
        .windows(5)
        .any(|w| w.starts_with(b"mh1.") && (w[4].is_ascii_alphanumeric() || w[4] == b'-' || w[4] == b'_'))
}

/// No file of session `sid`'s records (its trace and its logs) holds a token; with
/// `literal`, not even the text `mh1.`.
pub fn assert_no_token(w: &World, sid: &str, literal: bool) {
    let files = files_under(&w.records(sid));
    assert!(
        files.iter().any(|(p, _)| p.ends_with("trace.jsonl")),
        "no trace for {sid}"
    );
    for (path, bytes) in files {
        let found = if literal {
            super::agent::contains(&bytes, b"mh1.")
        } else {
            holds_token(&bytes)
        };
        assert!(!found, "{} holds a token", path.display());
    }
}

/// The names in `dir` (empty when it does not exist), sorted.
pub fn names_in(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}
