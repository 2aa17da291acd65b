//! A provider that keeps its connections open (HTTP/1.1 keep-alive, which the scripted mock
//! in `provider.rs` does not do: its server closes after each answer), answering OpenAI chat
//! completions: the first `calls` requests with one call of a tool, the rest with `done`.
//! It counts connections and requests, and keeps each request's `authorization` header and
//! arrival time; over plain HTTP, or over TLS with a certificate and key in PEM files. Used
//! by the keep-alive tests and by the agent bench's turn over a kept connection.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How the provider treats its connections.
#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    /// Kept open for the client's next request.
    Keep,
    /// Closed right after each answer, with no `connection: close` to warn of it (a server
    /// whose idle timeout is shorter than a turn).
    DropAfterAnswer,
    /// Kept open, and the first request answered 503 (retried by the runtime).
    FirstBusy,
}

/// What the provider has seen.
#[derive(Default)]
struct Seen {
    /// Each request's `authorization` header and arrival time, in arrival order.
    requests: Vec<(Option<String>, Instant)>,
}

/// A running provider (its threads end with the test process).
pub struct KeptProvider {
    port: u16,
    tls: bool,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Seen>>,
}

/// What every connection's thread answers with.
#[derive(Clone)]
struct Answers {
    calls: usize,
    tool: String,
    input: Value,
    mode: Mode,
}

impl KeptProvider {
    /// Answer the first `calls` requests with a call of `tool` with `input`, then `done`.
    pub fn start(calls: usize, tool: &str, input: Value, mode: Mode) -> KeptProvider {
        KeptProvider::launch(calls, tool, input, mode, None)
    }

    /// The same over TLS, with the certificate `cert` and its key `key` (PEM files); only
    /// with the crate's `tls` feature (rustls), which builds without it do not link.
    #[cfg(feature = "tls")]
    pub fn start_tls(
        calls: usize,
        tool: &str,
        input: Value,
        mode: Mode,
        cert: &std::path::Path,
        key: &std::path::Path,
    ) -> KeptProvider {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("the certificate file")
            .map(|c| c.expect("a certificate"))
            .collect();
        let key = PrivateKeyDer::from_pem_file(key).expect("the key file");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("the certificate and key");
        KeptProvider::launch(calls, tool, input, mode, Some(Arc::new(config)))
    }

    fn launch(calls: usize, tool: &str, input: Value, mode: Mode, tls: Option<ServerTls>) -> KeptProvider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Seen::default()));
        let answers = Answers {
            calls,
            tool: tool.to_string(),
            input,
            mode,
        };
        let (c, s) = (Arc::clone(&connections), Arc::clone(&seen));
        let over_tls = tls.is_some();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let (s, a, tls) = (Arc::clone(&s), answers.clone(), tls.clone());
                let _ = stream.set_nodelay(true);
                std::thread::spawn(move || match tls {
                    None => serve(stream, &a, &s),
                    Some(config) => serve_tls(stream, config, &a, &s),
                });
            }
        });
        KeptProvider {
            port,
            tls: over_tls,
            connections,
            seen,
        }
    }

    /// `http://127.0.0.1:P/v1` (`https://` over TLS): the OpenAI-compatible base.
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/v1", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Each request's `authorization` header, in arrival order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.requests.iter().map(|(a, _)| a.clone()).collect()
    }

    /// When each request had arrived whole, in arrival order.
    pub fn arrivals(&self) -> Vec<Instant> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.requests.iter().map(|(_, at)| *at).collect()
    }
}

/// A TLS server's configuration (nothing without the `tls` feature).
#[cfg(feature = "tls")]
type ServerTls = Arc<rustls::ServerConfig>;
#[cfg(not(feature = "tls"))]
type ServerTls = Arc<std::convert::Infallible>;

/// [`serve`] over TLS on `stream`.
#[cfg(feature = "tls")]
fn serve_tls(stream: std::net::TcpStream, config: ServerTls, a: &Answers, seen: &Mutex<Seen>) {
    let Ok(server) = rustls::ServerConnection::new(config) else {
        return;
    };
    serve(rustls::StreamOwned::new(server, stream), a, seen)
}

#[cfg(not(feature = "tls"))]
fn serve_tls(_: std::net::TcpStream, never: ServerTls, _: &Answers, _: &Mutex<Seen>) {
    match *never {}
}

/// One request's head fields the provider reads: its body's length and `authorization`.
/// `None` when the client closed the connection.
fn read_head(reader: &mut impl BufRead) -> Option<(usize, Option<String>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let (mut length, mut authorization) = (0usize, None);
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            return Some((length, authorization));
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
            if name.eq_ignore_ascii_case("authorization") {
                authorization = Some(value.trim().to_string());
            }
        }
    }
}

/// The `n`-th answer (1-based), as a whole HTTP/1.1 response.
fn answer(a: &Answers, n: usize) -> String {
    let message = if n <= a.calls {
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{n}"), "type": "function", "function": {"name": a.tool, "arguments": a.input.to_string()}}]})
    } else {
        json!({"role": "assistant", "content": "done"})
    };
    let finish = if n <= a.calls { "tool_calls" } else { "stop" };
    let body = json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
    .to_string();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Answer requests on `stream` until the client closes it (or after one, when dropping:
/// the stream is closed with no warning, TLS's close_notify included).
fn serve(stream: impl Read + Write, a: &Answers, seen: &Mutex<Seen>) {
    let mut reader = BufReader::new(stream);
    while let Some((length, authorization)) = read_head(&mut reader) {
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let n = {
            let mut seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.requests.push((authorization, Instant::now()));
            seen.requests.len()
        };
        let reply = match (a.mode, n) {
            (Mode::FirstBusy, 1) => {
                let busy = r#"{"error":{"message":"busy","type":"server_error"}}"#;
                format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 0\r\ncontent-length: {}\r\n\r\n{busy}",
                    busy.len()
                )
            }
            (Mode::FirstBusy, n) => answer(a, n - 1),
            (_, n) => answer(a, n),
        };
        // One write: a head and body in two would meet Nagle and delayed ACK on a kept
        // connection (tens of ms a turn), which real servers avoid.
        let writer = reader.get_mut();
        if writer.write_all(reply.as_bytes()).is_err() || writer.flush().is_err() {
            return;
        }
        if a.mode == Mode::DropAfterAnswer {
            return;
        }
    }
}
