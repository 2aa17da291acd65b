//! The HTTP layer over real loopback sockets, through a test-only server built on
//! `http::serve`.

use crate::common;

use common::{body_of, exchange, read_all, status_of};
use murmur::http::{Body, Controller, Exchange, Limits, Reply, Request, Response, Server, Stream, Ticket};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn route(req: &Request, ex: &Exchange<'_>) -> Reply {
    match req.path() {
        "/hello" => Response::new(200).body("hello").into(),
        "/echo" => Response::new(200).body(req.body.clone()).into(),
        "/defer" => {
            let ticket = ex.defer(Duration::from_secs(5));
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                ticket.complete(Response::new(200).body("from another thread"));
            });
            Reply::Later
        }
        "/never" => {
            drop(ex.defer(Duration::from_millis(300)));
            Reply::Later
        }
        "/pulled" | "/pulled-cut" => {
            let ticket = ex.defer(Duration::from_secs(5));
            let cut = req.path() == "/pulled-cut";
            ticket.complete_body(
                Response::new(200).header("x-kind", "pulled"),
                PULLED_LEN as u64,
                Box::new(Pulled { at: 0, cut }),
            );
            Reply::Later
        }
        // Unwinding as a panic does, without the panic hook: a backtrace of this test binary
        // (RUST_BACKTRACE=1) takes seconds to symbolise, on the server's thread.
        "/panic" => std::panic::resume_unwind(Box::new("handler bug")),
        _ => Response::error(404, "not found").into(),
    }
}

/// Every byte until the peer closes (a reset counts as a close).
fn read_bytes(s: &mut TcpStream) -> Vec<u8> {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// A body of `PULLED_LEN` bytes (`i % 251`) the loop pulls; the cut one fails before its
/// last chunk.
const PULLED_LEN: usize = 1_000_000;

struct Pulled {
    at: usize,
    cut: bool,
}

impl Body for Pulled {
    fn fill(&mut self, out: &mut Vec<u8>, max: usize) -> std::io::Result<bool> {
        let n = (PULLED_LEN - self.at).min(max);
        if self.cut && self.at + n == PULLED_LEN {
            return Err(std::io::Error::other("cut"));
        }
        out.extend((self.at..self.at + n).map(|i| (i % 251) as u8));
        self.at += n;
        Ok(self.at == PULLED_LEN)
    }
}

fn start(limits: Limits) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = Server::bind(listener, limits).unwrap();
    let addr = server.local_addr().unwrap();
    std::thread::spawn(move || server.run(route));
    addr
}

fn default_server() -> SocketAddr {
    start(Limits::default())
}

/// `raw` with `host: <addr>` added after its first line: the host the loopback guard wants.
fn with_host(addr: SocketAddr, raw: &[u8]) -> Vec<u8> {
    let at = raw
        .windows(2)
        .position(|w| w == b"\r\n")
        .map_or(raw.len(), |i| i + 2);
    let mut out = raw[..at].to_vec();
    out.extend_from_slice(format!("host: {addr}\r\n").as_bytes());
    out.extend_from_slice(&raw[at..]);
    out
}

/// Send `raw` (given its host) on a fresh connection; the whole answer.
fn ask(addr: SocketAddr, raw: &[u8]) -> String {
    exchange(addr, &with_host(addr, raw))
}

#[test]
fn a_pulled_body_arrives_whole_after_its_length_and_a_cut_one_short() {
    let addr = default_server();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&with_host(addr, b"GET /pulled HTTP/1.1\r\n\r\n"))
        .unwrap();
    let all = read_bytes(&mut s);
    let head_end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&all[..head_end]);
    assert_eq!(
        head,
        format!(
            "HTTP/1.1 200 OK\r\nx-kind: pulled\r\ncontent-length: {PULLED_LEN}\r\nconnection: close\r\n\r\n"
        )
    );
    let want: Vec<u8> = (0..PULLED_LEN).map(|i| (i % 251) as u8).collect();
    assert!(all[head_end..] == want[..], "the body is every byte, in order");

    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&with_host(addr, b"GET /pulled-cut HTTP/1.1\r\n\r\n"))
        .unwrap();
    let all = read_bytes(&mut s);
    let head_end = all.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let body = &all[head_end..];
    assert!(body.len() < PULLED_LEN, "a failed body ends short of its length");
    assert!(
        body == &want[..body.len()],
        "what was sent is a prefix of the body"
    );
}

#[test]
fn answers_with_exact_framing_headers() {
    let addr = default_server();
    let answer = ask(addr, b"GET /hello HTTP/1.1\r\n\r\n");
    assert_eq!(
        answer,
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello"
    );
    let missing = ask(addr, b"GET /nope HTTP/1.0\r\n\r\n");
    assert_eq!(status_of(&missing), 404);
    assert!(missing.contains("content-type: application/json\r\n"));
    assert_eq!(body_of(&missing), r#"{"error":"not found"}"#);
}

#[test]
fn request_delivered_one_byte_at_a_time_is_parsed() {
    let addr = default_server();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    for b in &with_host(addr, b"POST /echo HTTP/1.1\r\nContent-Length: 7\r\n\r\npayload") {
        s.write_all(std::slice::from_ref(b)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let answer = read_all(&mut s);
    assert_eq!(status_of(&answer), 200);
    assert_eq!(body_of(&answer), "payload");
}

fn head_of_len(addr: SocketAddr, total: usize) -> Vec<u8> {
    let mut raw = format!("GET /hello HTTP/1.1\r\nhost: {addr}\r\nx-pad: ").into_bytes();
    let pad = total - raw.len() - 4;
    raw.extend(std::iter::repeat_n(b'p', pad));
    raw.extend_from_slice(b"\r\n\r\n");
    assert_eq!(raw.len(), total);
    raw
}

#[test]
fn head_over_16_kib_gets_431() {
    let addr = default_server();
    assert_eq!(status_of(&exchange(addr, &head_of_len(addr, 16 * 1024))), 200);
    let answer = exchange(addr, &head_of_len(addr, 16 * 1024 + 1));
    assert_eq!(status_of(&answer), 431);
    assert_eq!(body_of(&answer), r#"{"error":"request header fields too large"}"#);
    let mut many = b"GET /hello HTTP/1.1\r\n".to_vec();
    for i in 0..65 {
        many.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(status_of(&exchange(addr, &many)), 431);
}

#[test]
fn oversized_body_gets_413_without_reading_it() {
    let addr = default_server();
    let answer = ask(addr, b"POST /echo HTTP/1.1\r\ncontent-length: 1048577\r\n\r\n");
    assert_eq!(status_of(&answer), 413);
    assert_eq!(body_of(&answer), r#"{"error":"request body too large"}"#);
}

#[test]
fn ambiguous_framing_gets_400() {
    let addr = default_server();
    let cases: [&[u8]; 4] = [
        b"POST /echo HTTP/1.1\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\nok",
        b"POST /echo HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok",
        b"POST /echo HTTP/1.1\r\ncontent-length: two\r\n\r\nok",
        b"GET  /hello HTTP/1.1\r\n\r\n",
    ];
    for raw in cases {
        let answer = ask(addr, raw);
        assert_eq!(status_of(&answer), 400, "{}", String::from_utf8_lossy(raw));
    }
    // Without content-length a request has no body (RFC 9112 section 6.3): bytes after the
    // head are never taken as one, and the connection closes after the answer.
    let answer = ask(addr, b"POST /echo HTTP/1.1\r\n\r\nok");
    assert_eq!(status_of(&answer), 200);
    assert_eq!(body_of(&answer), "");
}

#[test]
fn stalled_client_is_cut_while_others_are_served() {
    let limits = Limits {
        request_timeout: Duration::from_millis(800),
        ..Limits::default()
    };
    let addr = start(limits);
    let mut stalled = TcpStream::connect(addr).unwrap();
    stalled.write_all(b"GET /hello HTTP/1.1\r\nhost:").unwrap();
    // Served while the stalled one is still open.
    let answer = ask(addr, b"GET /hello HTTP/1.1\r\n\r\n");
    assert_eq!(body_of(&answer), "hello");
    stalled.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
    let mut probe = [0u8; 1];
    let still_open = matches!(stalled.read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    assert!(still_open, "the stalled client was cut before its deadline");
    let cut = read_all(&mut stalled);
    assert_eq!(status_of(&cut), 408);
}

#[test]
fn expect_100_continue_with_a_raw_client() {
    let addr = default_server();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(&with_host(
        addr,
        b"POST /echo HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 4\r\n\r\n",
    ))
    .unwrap();
    let mut interim = [0u8; 25];
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.read_exact(&mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    s.write_all(b"body").unwrap();
    let answer = read_all(&mut s);
    assert_eq!(body_of(&answer), "body");
}

#[test]
fn expect_100_continue_with_curl_data_binary() {
    let addr = default_server();
    let dir = std::env::temp_dir().join(format!("murmur-http-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("payload.bin");
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&file, &payload).unwrap();
    let out = Command::new("curl")
        .args([
            "-sS",
            "-v",
            "--max-time",
            "20",
            "-H",
            "Expect: 100-continue",
            "--data-binary",
        ])
        .arg(format!("@{}", file.display()))
        .arg(format!("http://{addr}/echo"))
        .output()
        .expect("curl is installed");
    std::fs::remove_dir_all(&dir).unwrap();
    let trace = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{trace}");
    assert!(trace.contains("< HTTP/1.1 100 Continue"), "{trace}");
    assert!(trace.contains("< HTTP/1.1 200 OK"), "{trace}");
    assert_eq!(out.stdout, payload);
}

#[test]
fn connection_cap_answers_503_and_the_loop_keeps_serving() {
    let limits = Limits {
        max_connections: 4,
        ..Limits::default()
    };
    let addr = start(limits);
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let answer = ask(addr, b"GET /hello HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&answer), 503);
    assert_eq!(body_of(&answer), r#"{"error":"too many connections"}"#);
    drop(idle);
    let mut served = None;
    for _ in 0..100 {
        let answer = ask(addr, b"GET /hello HTTP/1.1\r\n\r\n");
        if status_of(&answer) == 200 {
            served = Some(answer);
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        body_of(&served.expect("never served after the idle clients left")),
        "hello"
    );
}

#[test]
fn deferred_answer_completed_from_another_thread_arrives() {
    let addr = default_server();
    let answer = ask(addr, b"GET /defer HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&answer), 200);
    assert_eq!(body_of(&answer), "from another thread");
}

#[test]
fn deferred_answer_that_never_comes_gets_503() {
    let addr = default_server();
    let answer = ask(addr, b"GET /never HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&answer), 503);
    assert_eq!(body_of(&answer), r#"{"error":"no answer in time"}"#);
}

#[test]
fn pipelined_bytes_are_ignored_and_http_1_0_is_accepted() {
    let addr = default_server();
    let answer = ask(addr, b"GET /hello HTTP/1.0\r\n\r\nGET /echo HTTP/1.1\r\n\r\n");
    assert_eq!(answer.matches("HTTP/1.1 ").count(), 1);
    assert_eq!(body_of(&answer), "hello");
}

#[test]
fn an_answer_survives_a_flood_of_unread_bytes_after_the_request() {
    let addr = default_server();
    let mut bytes = b"GET /hello HTTP/1.1\r\n\r\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 50_000));
    let answer = ask(addr, &bytes);
    assert_eq!(status_of(&answer), 200);
    assert_eq!(body_of(&answer), "hello");
}

#[test]
fn head_request_gets_headers_only() {
    let addr = default_server();
    let answer = ask(addr, b"HEAD /hello HTTP/1.1\r\n\r\n");
    assert_eq!(
        answer,
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\n"
    );
}

#[test]
fn a_panicking_handler_answers_500_and_the_loop_survives() {
    let addr = default_server();
    assert_eq!(status_of(&ask(addr, b"GET /panic HTTP/1.1\r\n\r\n")), 500);
    assert_eq!(body_of(&ask(addr, b"GET /hello HTTP/1.1\r\n\r\n")), "hello");
}

#[test]
fn the_client_talks_to_the_server() {
    use murmur::http::client::{get, post_json, Options};
    let addr = default_server();
    let opts = Options::default();
    let resp = post_json(
        &format!("http://{addr}/echo"),
        &[("x-a", "1")],
        r#"{"k":1}"#,
        &opts,
    )
    .unwrap();
    assert_eq!((resp.status, resp.body.as_slice()), (200, &br#"{"k":1}"#[..]));
    assert_eq!(resp.header("connection"), Some("close"));
    let small = Options {
        max_response: 40,
        ..Options::default()
    };
    assert!(get(&format!("http://{addr}/hello"), &[], &small).is_err());
    let resp = get(&format!("http://{addr}/never"), &[], &opts).unwrap();
    assert_eq!(resp.status, 503);
}

#[test]
fn the_loopback_guard_sits_before_every_handler() {
    let addr = default_server();
    let port = addr.port();
    let refused = |raw: String| {
        let answer = exchange(addr, raw.as_bytes());
        (status_of(&answer), body_of(&answer).to_string())
    };
    assert_eq!(
        refused(format!("GET /hello HTTP/1.1\r\nhost: evil.example:{port}\r\n\r\n")),
        (
            421,
            r#"{"error":"misdirected request: the host header does not name this server; it answers only 127.0.0.1 or localhost at its own port"}"#.into()
        )
    );
    assert_eq!(
        refused(format!("GET /hello HTTP/1.1\r\nhost: localhost:{port}\r\norigin: null\r\n\r\n")),
        (
            403,
            r#"{"error":"cross-origin request refused: this server answers no request that carries an Origin header"}"#.into()
        )
    );
    assert_eq!(
        refused("GET /hello HTTP/1.0\r\n\r\n".into()),
        (
            400,
            r#"{"error":"missing host header: this server answers only requests addressed to 127.0.0.1 or localhost at its own port"}"#.into()
        )
    );
    // Refused on the head: a misdirected upload is answered without its body being read,
    // and a handler that panics is never reached.
    let answer = exchange(
        addr,
        format!("POST /panic HTTP/1.1\r\nhost: evil.example:{port}\r\ncontent-length: 900000\r\n\r\n")
            .as_bytes(),
    );
    assert_eq!(status_of(&answer), 421);
    for host in [
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        format!("127.0.0.1:{port}"),
    ] {
        let answer = exchange(
            addr,
            format!("GET /hello HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes(),
        );
        assert_eq!(body_of(&answer), "hello", "{host}");
    }
    // A server that opts out answers without a host.
    let open = start(Limits {
        loopback_only: false,
        ..Limits::default()
    });
    assert_eq!(body_of(&exchange(open, b"GET /hello HTTP/1.0\r\n\r\n")), "hello");
}

#[test]
fn the_body_budget_refuses_with_503_and_gives_bytes_back() {
    let limits = Limits {
        max_body: 8000,
        max_buffered: 10_000,
        ..Limits::default()
    };
    let addr = start(limits);
    let upload = |declared: usize, sent: usize| {
        let mut s = TcpStream::connect(addr).unwrap();
        let mut raw = with_host(
            addr,
            format!("POST /echo HTTP/1.1\r\ncontent-length: {declared}\r\n\r\n").as_bytes(),
        );
        raw.extend(std::iter::repeat_n(b'a', sent));
        s.write_all(&raw).unwrap();
        s
    };
    // 6,000 bytes held; a bodiless request is still answered.
    let first = upload(8000, 6000);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(body_of(&ask(addr, b"GET /hello HTTP/1.1\r\n\r\n")), "hello");
    // 6,000 more would pass the 10,000-byte budget: 503, and that connection closes.
    let mut second = upload(8000, 6000);
    let answer = read_all(&mut second);
    assert_eq!(
        answer,
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 105\r\nconnection: close\r\n\r\n\
         {\"error\":\"server busy: request bodies in flight have reached this server's buffer budget; retry shortly\"}"
    );
    // An upload the budget still holds is not answered until its body is complete.
    let held_then_finished = |mut s: TcpStream, rest: usize| {
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let mut probe = [0u8; 1];
        let waiting = matches!(
            s.read(&mut probe),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
        );
        assert!(waiting, "the upload was answered before its body was complete");
        s.write_all(&vec![b'a'; rest]).unwrap();
        body_of(&read_all(&mut s)).len()
    };
    // The held upload completes normally and gives its 6,000 bytes back, so another
    // 6,000-byte upload is held rather than refused.
    assert_eq!(held_then_finished(first, 2000), 8000);
    assert_eq!(held_then_finished(upload(8000, 6000), 2000), 8000);
    // An upload abandoned by its client gives its bytes back too.
    drop(upload(8000, 7000));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(held_then_finished(upload(8000, 6000), 2000), 8000);
}

// ---- Streamed responses, fallbacks and finishing -------------------------------------

/// What the streaming routes hand to the test: tickets and stream handles, by path.
#[derive(Default)]
struct Held {
    tickets: Vec<(String, Ticket)>,
    streams: Vec<(String, Stream)>,
    /// `/burst`: bytes the stream took before it was refused, and whether it was closed.
    burst: Option<(usize, bool)>,
}

type Shared = Arc<Mutex<Held>>;

fn event_stream() -> Response {
    Response::new(200).header("content-type", "text/event-stream")
}

/// A server whose routes stream, defer with fallbacks, or hold their tickets and streams in
/// `Held` for the test to use; its controller and the thread running it.
fn start_streaming(
    limits: Limits,
) -> (
    SocketAddr,
    Shared,
    Controller,
    std::thread::JoinHandle<std::io::Result<()>>,
) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let server = Server::bind(listener, limits).unwrap();
    let addr = server.local_addr().unwrap();
    let controller = server.controller();
    let held: Shared = Arc::default();
    let mine = Arc::clone(&held);
    let handler = move |req: &Request, ex: &Exchange<'_>| -> Reply {
        let path = req.path().to_string();
        match path.as_str() {
            "/hello" => Response::new(200).body("hello").into(),
            "/chunks" => {
                let s = ex.stream();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        assert!(s.send(format!("data: {i}\n\n").into_bytes()));
                    }
                    s.end();
                });
                Reply::Stream(event_stream())
            }
            "/late" => {
                let s = ex.stream();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(700));
                    s.send(b"data: late\n\n".to_vec());
                    s.end();
                });
                Reply::Stream(event_stream())
            }
            "/fallback" => {
                let ticket = ex.defer_or(Duration::from_millis(300), || Response::new(200).body("fallback"));
                mine.lock().unwrap().tickets.push((path, ticket));
                Reply::Later
            }
            "/beaten" => {
                let ticket = ex.defer_or(Duration::from_secs(5), || Response::new(200).body("fallback"));
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50));
                    ticket.complete(Response::new(200).body("the real answer"));
                });
                Reply::Later
            }
            "/fallback-panics" => {
                drop(ex.defer_or(Duration::from_millis(100), || {
                    std::panic::resume_unwind(Box::new("a fallback bug"))
                }));
                Reply::Later
            }
            p if p.starts_with("/held") => {
                let ticket = if p == "/held-or" {
                    ex.defer_or(Duration::from_secs(30), || {
                        Response::new(200).body("fallback at close")
                    })
                } else {
                    ex.defer(Duration::from_secs(30))
                };
                mine.lock().unwrap().tickets.push((path, ticket));
                Reply::Later
            }
            "/burst" => {
                // Sent from the handler, on the loop's own thread: nothing is taken off the
                // channel until it returns, so the in-flight budget is what stops this.
                let s = ex.stream();
                let mut taken = 0usize;
                while taken < 64 << 20 && s.send(vec![b'x'; 16 * 1024]) {
                    taken += 16 * 1024;
                }
                mine.lock().unwrap().burst = Some((taken, s.is_closed()));
                Reply::Stream(event_stream())
            }
            "/big-then-small" => {
                // A frame larger than the stream's whole budget, then a small one at once
                // (the loop takes neither until this returns): both are taken.
                let s = ex.stream();
                let big = s.send(vec![b'x'; 2 << 20]);
                let small = s.send(b"data: end\n\n".to_vec());
                mine.lock().unwrap().burst = Some((usize::from(big) + usize::from(small), s.is_closed()));
                s.end();
                Reply::Stream(event_stream())
            }
            p if p.starts_with("/stream") => {
                mine.lock().unwrap().streams.push((path, ex.stream()));
                Reply::Stream(event_stream())
            }
            _ => Response::error(404, "not found").into(),
        }
    };
    let thread = std::thread::spawn(move || server.run(handler));
    (addr, held, controller, thread)
}

/// Send a GET of `path` and read the response head (up to the blank line).
fn open_get(addr: SocketAddr, path: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes())
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).unwrap(),
            1,
            "closed before the head ended: {head:?}"
        );
        head.push(byte[0]);
    }
    (s, String::from_utf8(head).unwrap())
}

/// Poll until `f` is true (5 s at most).
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn held_count(held: &Shared) -> (usize, usize) {
    let h = held.lock().unwrap();
    (h.tickets.len(), h.streams.len())
}

#[test]
fn a_streamed_response_has_no_length_closes_and_keeps_its_chunks_in_order() {
    let (addr, ..) = start_streaming(Limits::default());
    let answer = ask(addr, b"GET /chunks HTTP/1.1\r\n\r\n");
    let body: String = (0..500).map(|i| format!("data: {i}\n\n")).collect();
    assert_eq!(
        answer,
        format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}")
    );
}

#[test]
fn a_quiet_stream_gets_keep_alive_comments() {
    let limits = Limits {
        keepalive: Duration::from_millis(200),
        ..Limits::default()
    };
    let (addr, ..) = start_streaming(limits);
    let began = Instant::now();
    let answer = ask(addr, b"GET /late HTTP/1.1\r\n\r\n");
    assert!(
        began.elapsed() >= Duration::from_millis(650),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(status_of(&answer), 200);
    let body = body_of(&answer);
    let rest = body.trim_start_matches(": keep-alive\n\n");
    let comments = (body.len() - rest.len()) / ": keep-alive\n\n".len();
    assert_eq!(rest, "data: late\n\n", "{body:?}");
    assert!(
        (2..=4).contains(&comments),
        "{comments} keep-alives in 700 ms at 200 ms: {body:?}"
    );
}

#[test]
fn a_stream_handle_sees_its_client_leave() {
    let (addr, held, ..) = start_streaming(Limits::default());
    let (mut client, head) = open_get(addr, "/stream-watch");
    assert_eq!(status_of(&head), 200);
    assert!(!head.contains("content-length"), "{head}");
    eventually("the stream to be held", || held_count(&held).1 == 1);
    let stream = held.lock().unwrap().streams.pop().unwrap().1;
    assert!(!stream.is_closed());
    assert!(stream.send(b"data: hi\n\n".to_vec()));
    let mut got = [0u8; 10];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"data: hi\n\n");
    drop(client);
    eventually("the stream to see its client gone", || stream.is_closed());
    assert!(
        !stream.send(b"data: nobody\n\n".to_vec()),
        "a send to a closed stream was taken"
    );
    assert_eq!(body_of(&ask(addr, b"GET /hello HTTP/1.1\r\n\r\n")), "hello");
}

#[test]
fn a_stream_whose_client_never_reads_is_dropped_at_its_backlog() {
    let limits = Limits {
        max_stream_backlog: 64 * 1024,
        ..Limits::default()
    };
    let (addr, held, ..) = start_streaming(limits);
    let (_client, _) = open_get(addr, "/stream-unread");
    eventually("the stream to be held", || held_count(&held).1 == 1);
    let stream = held.lock().unwrap().streams.pop().unwrap().1;
    let chunk = vec![b'x'; 16 * 1024];
    let mut taken = 0usize;
    let until = Instant::now() + Duration::from_secs(10);
    while stream.send(chunk.clone()) {
        taken += chunk.len();
        assert!(
            Instant::now() < until && taken < 256 << 20,
            "still taking chunks after {taken} bytes"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    eventually("the unread stream to be closed", || stream.is_closed());
    assert_eq!(body_of(&ask(addr, b"GET /hello HTTP/1.1\r\n\r\n")), "hello");
}

#[test]
fn chunks_beyond_the_in_flight_budget_close_the_stream() {
    // Per stream: a chunk is taken unless more than 8 x the backlog cap is on its way.
    let limits = Limits {
        max_stream_backlog: 64 * 1024,
        ..Limits::default()
    };
    let (addr, held, ..) = start_streaming(limits);
    let (mut client, head) = open_get(addr, "/burst");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let (taken, closed) = held.lock().unwrap().burst.unwrap();
    // Chunks are taken while at most 8 x 64 KiB are on their way: the last makes 528 KiB.
    assert_eq!((taken, closed), (528 * 1024, true));
    // The refused stream's connection is dropped, whatever it had been sent.
    let mut rest = Vec::new();
    let _ = client.read_to_end(&mut rest);
    assert!(rest.len() <= 528 * 1024, "{} bytes after the head", rest.len());
    // Across all streams: the server-wide cap stops one that stays under its own.
    let limits = Limits {
        max_stream_backlog: 1 << 30,
        max_unsent: 256 * 1024,
        ..Limits::default()
    };
    let (addr, held, ..) = start_streaming(limits);
    let _ = open_get(addr, "/burst");
    let (taken, closed) = held.lock().unwrap().burst.unwrap();
    assert_eq!((taken, closed), (256 * 1024, true));
    assert_eq!(body_of(&ask(addr, b"GET /hello HTTP/1.1\r\n\r\n")), "hello");
}

#[test]
fn a_frame_larger_than_the_budget_is_taken_and_so_is_the_one_after() {
    let (addr, held, ..) = start_streaming(Limits::default());
    let (mut client, head) = open_get(addr, "/big-then-small");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert_eq!(held.lock().unwrap().burst, Some((2, false)));
    let mut body = Vec::new();
    client.read_to_end(&mut body).unwrap();
    assert_eq!(body.len(), (2 << 20) + b"data: end\n\n".len());
    assert!(body.ends_with(b"data: end\n\n"));
}

#[test]
fn defer_or_answers_with_its_fallback_at_the_deadline() {
    let (addr, held, ..) = start_streaming(Limits::default());
    let began = Instant::now();
    let answer = ask(addr, b"GET /fallback HTTP/1.1\r\n\r\n");
    let took = began.elapsed();
    assert_eq!((status_of(&answer), body_of(&answer)), (200, "fallback"));
    assert!(
        took >= Duration::from_millis(280) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // The ticket completed after the fallback went out is dropped, harmlessly.
    let (_, ticket) = held.lock().unwrap().tickets.pop().unwrap();
    ticket.complete(Response::new(200).body("too late"));
    // An answer that comes first wins; a fallback that panics is a 500.
    assert_eq!(
        body_of(&ask(addr, b"GET /beaten HTTP/1.1\r\n\r\n")),
        "the real answer"
    );
    let answer = ask(addr, b"GET /fallback-panics HTTP/1.1\r\n\r\n");
    assert_eq!(
        (status_of(&answer), body_of(&answer)),
        (500, r#"{"error":"internal error"}"#)
    );
    assert_eq!(body_of(&ask(addr, b"GET /hello HTTP/1.1\r\n\r\n")), "hello");
}

#[test]
fn finish_delivers_what_was_sent_ends_streams_and_returns() {
    let (addr, held, controller, thread) = start_streaming(Limits::default());
    let open = |path: &str| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes())
            .unwrap();
        s
    };
    let mut answered = open("/held-answered");
    let mut with_fallback = open("/held-or");
    let mut plain = open("/held-plain");
    let (mut stream_client, head) = open_get(addr, "/stream-final");
    assert_eq!(status_of(&head), 200);
    let mut reading = TcpStream::connect(addr).unwrap();
    reading.write_all(b"GET /hello HTTP/1.1\r\nhost: ").unwrap();
    eventually("three deferred requests and a stream", || {
        held_count(&held) == (3, 1)
    });

    // An answer and a chunk sent just before finishing are still delivered.
    {
        let mut h = held.lock().unwrap();
        let i = h.tickets.iter().position(|(p, _)| p == "/held-answered").unwrap();
        let (_, ticket) = h.tickets.remove(i);
        assert!(ticket.complete(Response::new(200).body("answered before finish")));
        assert!(h.streams[0].1.send(b"data: last\n\n".to_vec()));
    }
    let began = Instant::now();
    controller.finish(Duration::from_secs(2));

    let answer = read_all(&mut answered);
    assert_eq!(
        (status_of(&answer), body_of(&answer)),
        (200, "answered before finish")
    );
    let answer = read_all(&mut with_fallback);
    assert_eq!((status_of(&answer), body_of(&answer)), (200, "fallback at close"));
    let answer = read_all(&mut plain);
    assert_eq!(
        (status_of(&answer), body_of(&answer)),
        (503, r#"{"error":"the server is closing"}"#)
    );
    assert_eq!(read_all(&mut stream_client), "data: last\n\n");
    // Dropped unanswered: a close, or a reset when its bytes were still unread.
    let mut dropped = Vec::new();
    reading.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    match reading.read_to_end(&mut dropped) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    assert!(
        dropped.is_empty(),
        "a request still being read was answered: {dropped:?}"
    );
    eventually("run to return", || thread.is_finished());
    assert!(began.elapsed() < Duration::from_secs(3), "{:?}", began.elapsed());
    thread.join().unwrap().unwrap();
    assert!(
        TcpStream::connect(addr).is_err(),
        "the listener outlived the server"
    );
    // Handles outliving the server are harmless.
    let h = held.lock().unwrap();
    assert!(h.streams[0].1.is_closed());
    assert!(!h.streams[0].1.send(b"data: after\n\n".to_vec()));
}
