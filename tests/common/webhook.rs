//! A webhook on 127.0.0.1 for push-notification tests: it records every POST it gets (path,
//! lowercase headers, JSON body) and answers 200 with an empty body.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the webhook got.
#[derive(Debug, Clone)]
pub struct Hit {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Hit {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

pub struct Webhook {
    pub port: u16,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Webhook {
    /// Listen on an OS-assigned loopback port, serving on a thread of its own.
    pub fn start() -> Webhook {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let keep = hits.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut s) = conn else { continue };
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                if let Some(hit) = read(&mut s) {
                    keep.lock().unwrap().push(hit);
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            }
        });
        Webhook { port, hits }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// The hits on `path`.
    pub fn on(&self, path: &str) -> Vec<Hit> {
        self.hits().into_iter().filter(|h| h.path == path).collect()
    }

    /// Wait (up to `within`) until a hit on `path` satisfies `f`; every hit on it so far.
    pub fn wait(&self, path: &str, within: Duration, f: impl Fn(&Hit) -> bool) -> Vec<Hit> {
        let until = std::time::Instant::now() + within;
        loop {
            let got = self.on(path);
            if got.iter().any(&f) {
                return got;
            }
            assert!(
                std::time::Instant::now() < until,
                "no such hit on {path}: {got:#?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn read(s: &mut std::net::TcpStream) -> Option<Hit> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut lines = head.split("\r\n");
            let path = lines.next()?.split(' ').nth(1)?.to_string();
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = s.read(&mut chunk).ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = serde_json::from_slice(&buf[end + 4..end + 4 + len]).unwrap_or(Value::Null);
            return Some(Hit { path, headers, body });
        }
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}
