//! The roost answers only local clients, never a web page: a cross-site `text/plain` POST,
//! any request carrying `Origin`, and a DNS-rebound `Host` are refused through the real
//! `mur-roost` binary, while `127.0.0.1:P` and `localhost:P` are served.

use crate::common;

use common::roost::{publish, Daemon};
use common::{status_of, TempDir};

const V: &str = "0.1.0";
const NOT_JSON: &str =
    r#"{"error":"unsupported media type: a POST body must be sent with content-type: application/json"}"#;
const CROSS_ORIGIN: &str = r#"{"error":"cross-origin request refused: this server answers no request that carries an Origin header"}"#;
const MISDIRECTED: &str = r#"{"error":"misdirected request: the host header does not name this server; it answers only 127.0.0.1 or localhost at its own port"}"#;
const MISSING_HOST: &str = r#"{"error":"missing host header: this server answers only requests addressed to 127.0.0.1 or localhost at its own port"}"#;

fn daemon() -> (TempDir, Daemon) {
    let tmp = TempDir::new("roost-guard");
    publish(tmp.path(), "orch", V, "");
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    (tmp, d)
}

fn register_body(sid: &str) -> String {
    format!(r#"{{"session_id":"{sid}","name":"orch","version":"{V}"}}"#)
}

/// Whether `sid` was registered (it would be a 200 at `/status`).
fn registered(d: &Daemon, sid: &str) -> bool {
    let (status, body) = d.call("GET", &format!("/status/{sid}"), &[], "");
    match status {
        200 => true,
        404 => {
            assert_eq!(body, r#"{"error":"session not found"}"#);
            false
        }
        other => panic!("status {other}: {body}"),
    }
}

/// Item 8, content type: the CORS-simple POST a web page can send without a preflight.
#[test]
fn a_text_plain_post_register_is_refused() {
    let (_tmp, d) = daemon();
    let sid = "ses_00000000000000000000000000000001";
    let body = register_body(sid);
    for content_type in [
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let raw = match content_type {
            Some(t) => d.raw("POST", "/register", &[("content-type", t)], &body),
            None => d.send(
                format!(
                    "POST /register HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n\r\n{body}",
                    d.host(),
                    body.len()
                )
                .as_bytes(),
            ),
        };
        assert!(
            raw.starts_with("HTTP/1.1 415 Unsupported Media Type\r\n"),
            "{raw}"
        );
        assert_eq!(common::body_of(&raw), NOT_JSON, "{content_type:?}");
        assert!(!registered(&d, sid), "a refused register left a session");
    }
    // Every POST route, before its body is judged (an invalid body is still a 415).
    for path in ["/spawn", "/deregister", "/register"] {
        let (s, b) = d.call("POST", path, &[("content-type", "text/plain")], "{not json");
        assert_eq!((s, b.as_str()), (415, NOT_JSON), "{path}");
    }
    // Routing comes first: an unknown path, or a POST to a GET route, is still a 404.
    for path in ["/nowhere", "/health"] {
        let (s, b) = d.call("POST", path, &[("content-type", "text/plain")], "x");
        assert_eq!((s, b.as_str()), (404, r#"{"error":"not found"}"#), "{path}");
    }
    // JSON in any case, with parameters, is served.
    for (i, content_type) in [
        "application/json; charset=utf-8",
        "Application/JSON",
        "APPLICATION/JSON ;charset=UTF-8",
    ]
    .iter()
    .enumerate()
    {
        let sid = format!("ses_0000000000000000000000000000001{i}");
        let (s, b) = d.call(
            "POST",
            "/register",
            &[("content-type", content_type)],
            &register_body(&sid),
        );
        assert_eq!(s, 200, "{content_type}: {b}");
        assert!(registered(&d, &sid));
    }
}

/// Item 8, Origin: whatever the route and however well-formed the rest of the request.
#[test]
fn a_request_carrying_origin_is_refused() {
    let (_tmp, d) = daemon();
    let sid = "ses_00000000000000000000000000000002";
    let evil = [("origin", "http://evil.example")];
    let raw = d.raw("POST", "/register", &evil, &register_body(sid));
    assert!(raw.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{raw}");
    assert_eq!(common::body_of(&raw), CROSS_ORIGIN);
    assert!(!registered(&d, sid));
    for (method, path) in [
        ("GET", "/health"),
        ("GET", &format!("/status/{sid}") as &str),
        ("POST", "/spawn"),
        ("GET", "/nowhere"),
    ] {
        for origin in ["http://evil.example", "null", "http://127.0.0.1:1"] {
            let body = if method == "POST" { "{}" } else { "" };
            let (s, b) = d.call(method, path, &[("Origin", origin)], body);
            assert_eq!((s, b.as_str()), (403, CROSS_ORIGIN), "{method} {path} {origin}");
        }
    }
    // The browser's cross-site text/plain POST carries Origin: refused before its type is.
    let (s, b) = d.call(
        "POST",
        "/register",
        &[("origin", "http://evil.example"), ("content-type", "text/plain")],
        &register_body(sid),
    );
    assert_eq!((s, b.as_str()), (403, CROSS_ORIGIN));
    assert!(!registered(&d, sid));
}

/// Item 8, DNS rebinding: `evil.example` resolved to 127.0.0.1 reaches the port with its
/// own name in `Host`.
#[test]
fn a_rebound_host_is_refused() {
    let (_tmp, d) = daemon();
    let port = d.addr.port();
    let sid = "ses_00000000000000000000000000000003";
    let rebound = format!("evil.example:{port}");
    let raw = d.raw("POST", "/register", &[("host", &rebound)], &register_body(sid));
    assert!(raw.starts_with("HTTP/1.1 421 Misdirected Request\r\n"), "{raw}");
    assert_eq!(common::body_of(&raw), MISDIRECTED);
    assert!(!registered(&d, sid));
    let wrong = [
        rebound.clone(),
        "evil.example".to_string(),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("localhost:0{port}"),
        format!("127.0.0.2:{port}"),
        format!("0.0.0.0:{port}"),
        format!("[::1]:{port}"),
        format!("localhost.:{port}"),
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        String::new(),
    ];
    for host in &wrong {
        for (method, path) in [("GET", "/health"), ("GET", "/nowhere"), ("POST", "/spawn")] {
            let body = if method == "POST" { "{}" } else { "" };
            let (s, b) = d.call(method, path, &[("host", host)], body);
            assert_eq!(
                (s, b.as_str()),
                (421, MISDIRECTED),
                "{method} {path} host {host:?}"
            );
        }
    }
}

/// Item 8, a request that names no host at all (HTTP/1.0), or names two.
#[test]
fn a_request_without_one_host_is_refused() {
    let (_tmp, d) = daemon();
    for raw in [
        "GET /health HTTP/1.0\r\n\r\n".to_string(),
        "GET /health HTTP/1.1\r\n\r\n".to_string(),
    ] {
        let answer = d.send(raw.as_bytes());
        assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
        assert_eq!(common::body_of(&answer), MISSING_HOST);
    }
    let twice = format!("GET /health HTTP/1.1\r\nhost: {0}\r\nhost: {0}\r\n\r\n", d.host());
    let answer = d.send(twice.as_bytes());
    assert_eq!(status_of(&answer), 400);
    assert_eq!(
        common::body_of(&answer),
        r#"{"error":"more than one host header"}"#
    );
    // HTTP/1.0 with the right host is served.
    let ok = d.send(format!("GET /health HTTP/1.0\r\nhost: {}\r\n\r\n", d.host()).as_bytes());
    assert_eq!((status_of(&ok), common::body_of(&ok)), (200, "{}"));
}

/// Item 8, the accepted side: the loopback address and `localhost` at the bound port,
/// with the host part in any case.
#[test]
fn loopback_hosts_are_accepted() {
    let (_tmp, d) = daemon();
    let port = d.addr.port();
    for (i, host) in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
        format!("LOCALHOST:{port}"),
    ]
    .iter()
    .enumerate()
    {
        let h = [("host", host.as_str())];
        assert_eq!(
            d.call("GET", "/health", &h, ""),
            (200, "{}".to_string()),
            "{host}"
        );
        let sid = format!("ses_0000000000000000000000000000004{i}");
        let (s, b) = d.call("POST", "/register", &h, &register_body(&sid));
        assert_eq!(s, 200, "{host}: {b}");
        assert!(registered(&d, &sid));
    }
    // The project's own client sends the host of the URL it is given.
    let opts = murmur::http::client::Options::default();
    for base in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        let resp = murmur::http::client::get(&format!("{base}/health"), &[], &opts).unwrap();
        assert_eq!((resp.status, resp.body.as_slice()), (200, &b"{}"[..]), "{base}");
    }
    let resp = murmur::http::client::post_json(
        &format!("http://localhost:{port}/register"),
        &[],
        &register_body("ses_00000000000000000000000000000050"),
        &opts,
    )
    .unwrap();
    assert_eq!(resp.status, 200, "{}", String::from_utf8_lossy(&resp.body));
}
