//! The HTTP layer over real loopback sockets, through a test-only server built on
//! `http::serve`.

mod common;

use common::{body_of, exchange, read_all, status_of};
use murmur::http::{Exchange, Limits, Reply, Request, Response, Server};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

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
        "/panic" => panic!("handler bug"),
        _ => Response::error(404, "not found").into(),
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

#[test]
fn answers_with_exact_framing_headers() {
    let addr = default_server();
    let answer = exchange(addr, b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n");
    assert_eq!(
        answer,
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello"
    );
    let missing = exchange(addr, b"GET /nope HTTP/1.0\r\n\r\n");
    assert_eq!(status_of(&missing), 404);
    assert!(missing.contains("content-type: application/json\r\n"));
    assert_eq!(body_of(&missing), r#"{"error":"not found"}"#);
}

#[test]
fn request_delivered_one_byte_at_a_time_is_parsed() {
    let addr = default_server();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    for b in b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\npayload" {
        s.write_all(std::slice::from_ref(b)).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let answer = read_all(&mut s);
    assert_eq!(status_of(&answer), 200);
    assert_eq!(body_of(&answer), "payload");
}

fn head_of_len(total: usize) -> Vec<u8> {
    let mut raw = b"GET /hello HTTP/1.1\r\nx-pad: ".to_vec();
    let pad = total - raw.len() - 4;
    raw.extend(std::iter::repeat_n(b'p', pad));
    raw.extend_from_slice(b"\r\n\r\n");
    assert_eq!(raw.len(), total);
    raw
}

#[test]
fn head_over_16_kib_gets_431() {
    let addr = default_server();
    assert_eq!(status_of(&exchange(addr, &head_of_len(16 * 1024))), 200);
    let answer = exchange(addr, &head_of_len(16 * 1024 + 1));
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
    let answer = exchange(addr, b"POST /echo HTTP/1.1\r\ncontent-length: 1048577\r\n\r\n");
    assert_eq!(status_of(&answer), 413);
    assert_eq!(body_of(&answer), r#"{"error":"request body too large"}"#);
}

#[test]
fn ambiguous_framing_gets_400() {
    let addr = default_server();
    let cases: [&[u8]; 5] = [
        b"POST /echo HTTP/1.1\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\nok",
        b"POST /echo HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok",
        b"POST /echo HTTP/1.1\r\ncontent-length: two\r\n\r\nok",
        b"POST /echo HTTP/1.1\r\n\r\nok",
        b"GET  /hello HTTP/1.1\r\n\r\n",
    ];
    for raw in cases {
        let answer = exchange(addr, raw);
        assert_eq!(status_of(&answer), 400, "{}", String::from_utf8_lossy(raw));
    }
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
    let answer = exchange(addr, b"GET /hello HTTP/1.1\r\n\r\n");
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
    s.write_all(b"POST /echo HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 4\r\n\r\n")
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
    let answer = exchange(addr, b"GET /hello HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&answer), 503);
    assert_eq!(body_of(&answer), r#"{"error":"too many connections"}"#);
    drop(idle);
    let mut served = None;
    for _ in 0..100 {
        let answer = exchange(addr, b"GET /hello HTTP/1.1\r\n\r\n");
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
    let answer = exchange(addr, b"GET /defer HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&answer), 200);
    assert_eq!(body_of(&answer), "from another thread");
}

#[test]
fn deferred_answer_that_never_comes_gets_503() {
    let addr = default_server();
    let answer = exchange(addr, b"GET /never HTTP/1.1\r\n\r\n");
    assert_eq!(status_of(&answer), 503);
    assert_eq!(body_of(&answer), r#"{"error":"no answer in time"}"#);
}

#[test]
fn pipelined_bytes_are_ignored_and_http_1_0_is_accepted() {
    let addr = default_server();
    let answer = exchange(addr, b"GET /hello HTTP/1.0\r\n\r\nGET /echo HTTP/1.1\r\n\r\n");
    assert_eq!(answer.matches("HTTP/1.1 ").count(), 1);
    assert_eq!(body_of(&answer), "hello");
}

#[test]
fn an_answer_survives_a_flood_of_unread_bytes_after_the_request() {
    let addr = default_server();
    let mut bytes = b"GET /hello HTTP/1.1\r\n\r\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 50_000));
    let answer = exchange(addr, &bytes);
    assert_eq!(status_of(&answer), 200);
    assert_eq!(body_of(&answer), "hello");
}

#[test]
fn head_request_gets_headers_only() {
    let addr = default_server();
    let answer = exchange(addr, b"HEAD /hello HTTP/1.1\r\n\r\n");
    assert_eq!(
        answer,
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\n"
    );
}

#[test]
fn a_panicking_handler_answers_500_and_the_loop_survives() {
    let addr = default_server();
    assert_eq!(status_of(&exchange(addr, b"GET /panic HTTP/1.1\r\n\r\n")), 500);
    assert_eq!(body_of(&exchange(addr, b"GET /hello HTTP/1.1\r\n\r\n")), "hello");
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
