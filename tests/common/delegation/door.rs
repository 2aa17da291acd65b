//! A stand-in parent door for children the test launches itself, and the handle such a
//! child is given.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// A stand-in parent door, for children the test launches itself.
// ---------------------------------------------------------------------------------------

/// One request a [`FakeDoor`] received: its header fields (names lowercased) and its body.
#[derive(Debug, Clone)]
pub struct DoorHit {
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl DoorHit {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The text of the message sent.
    pub fn text(&self) -> String {
        self.body
            .pointer("/params/message/parts")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A loopback listener answering every JSON-RPC request with a submitted task (what a door
/// that took the message says), recording each. Stops when dropped.
pub struct FakeDoor {
    pub port: u16,
    hits: Arc<Mutex<Vec<DoorHit>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeDoor {
    pub fn start() -> FakeDoor {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (h, st) = (hits.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut c) = conn else { continue };
                if let Some(hit) = read_request(&mut c) {
                    let answer = json!({
                        "jsonrpc": "2.0",
                        "id": hit.body.get("id").cloned().unwrap_or(Value::Null),
                        "result": {
                            "kind": "task",
                            "id": "tsk_0123456789abcdef0123456789abcdef",
                            "contextId": hit.body.pointer("/params/message/contextId").cloned().unwrap_or(Value::Null),
                            "status": {"state": "submitted"},
                        },
                    })
                    .to_string();
                    h.lock().unwrap().push(hit);
                    let _ = c.write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                            answer.len()
                        )
                        .as_bytes(),
                    );
                }
            }
        });
        FakeDoor {
            port,
            hits,
            stop,
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn hits(&self) -> Vec<DoorHit> {
        self.hits.lock().unwrap().clone()
    }
}

impl Drop for FakeDoor {
    fn drop(&mut self) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            let _ = TcpStream::connect(("127.0.0.1", self.port));
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One HTTP request off `c`: its head's fields and its JSON body (by `content-length`).
fn read_request(c: &mut TcpStream) -> Option<DoorHit> {
    c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match c.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    };
    let head = String::from_utf8_lossy(&got[..end]).into_owned();
    let headers: Vec<(String, String)> = head
        .split("\r\n")
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while got.len() < end + len {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    let body = serde_json::from_slice(&got[end..]).unwrap_or(Value::Null);
    Some(DoorHit { headers, body })
}

/// A `MURMUR_SPAWNER` value, compact JSON in the spec's order.
pub fn spawner_handle(url: &str, parent: &str, context: &str, trust: &str, dlg: &str) -> String {
    json!({"url": url, "session_id": parent, "context_id": context, "trust": trust, "delegation_id": dlg})
        .to_string()
}

/// A fresh id: `prefix` and 32 lowercase hex digits.
pub fn fresh_id(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let n = N.fetch_add(1, Ordering::SeqCst) as u128;
    format!(
        "{prefix}{:032x}",
        (nanos << 16) ^ n ^ ((std::process::id() as u128) << 100)
    )
}
