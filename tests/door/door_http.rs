//! The capsule door answers only local clients, through the real `mur run`: the same
//! loopback guard as the roost refuses a DNS-rebound `Host`, any `Origin` and a request
//! naming no host, and serves `127.0.0.1:P` and `localhost:P`.

use crate::common;

use common::capsule::{capsule, serve};
use common::{body_of, exchange, status_of, Running, TempDir};
use std::net::SocketAddr;

const CARD: &str = "/.well-known/agent-card.json";
const MISDIRECTED: &str = r#"{"error":"misdirected request: the host header does not name this server; it answers only 127.0.0.1 or localhost at its own port"}"#;
const CROSS_ORIGIN: &str = r#"{"error":"cross-origin request refused: this server answers no request that carries an Origin header"}"#;
const MISSING_HOST: &str = r#"{"error":"missing host header: this server answers only requests addressed to 127.0.0.1 or localhost at its own port"}"#;

/// `mur run` of the hello capsule under a queue/sleep lifecycle, which keeps the door open
/// until SIGTERM; the running process and the door's port.
fn start_door(t: &TempDir) -> (Running, u16) {
    let dir = capsule(
        t,
        "examples/hello/capsule.wasm",
        "lifecycle:\n  task_acceptance: queue\n  after_task: sleep\n",
    );
    let (running, line) = serve(t, &dir);
    let url = line["url"].as_str().unwrap();
    let port = url
        .strip_prefix("localhost:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected url {url:?}"));
    (running, port)
}

/// Item 8 on the door: rebinding and cross-origin requests refused, loopback served.
#[test]
fn the_door_answers_only_its_own_loopback_host() {
    let t = TempDir::new("door-guard");
    let (mut running, port) = start_door(&t);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let get = |extra: &str| {
        let answer = exchange(addr, format!("GET {CARD} HTTP/1.1\r\n{extra}\r\n").as_bytes());
        (status_of(&answer), body_of(&answer).to_string())
    };

    // DNS rebinding: evil.example resolved to 127.0.0.1, its own name in Host.
    for host in [
        format!("evil.example:{port}"),
        "evil.example".to_string(),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(
            get(&format!("host: {host}\r\n")),
            (421, MISDIRECTED.to_string()),
            "{host}"
        );
    }
    // A web page's request carries Origin, whatever its Host.
    for origin in ["http://evil.example", "null"] {
        assert_eq!(
            get(&format!("host: localhost:{port}\r\norigin: {origin}\r\n")),
            (403, CROSS_ORIGIN.to_string()),
            "{origin}"
        );
    }
    // No host at all (HTTP/1.0 style).
    let answer = exchange(addr, format!("GET {CARD} HTTP/1.0\r\n\r\n").as_bytes());
    assert_eq!((status_of(&answer), body_of(&answer)), (400, MISSING_HOST));
    // Before routing: an unknown path with a rebound host is refused, not a 404.
    let answer = exchange(
        addr,
        format!("GET /nope HTTP/1.1\r\nhost: evil.example:{port}\r\n\r\n").as_bytes(),
    );
    assert_eq!(status_of(&answer), 421);

    // The loopback address and localhost at the door's port, host part in any case.
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LocalHost:{port}"),
    ] {
        let (status, body) = get(&format!("host: {host}\r\n"));
        assert_eq!(status, 200, "{host}: {body}");
        let card: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(card["name"], "probe");
        assert_eq!(card["url"], format!("http://localhost:{port}/"));
    }
    // The project's own client, given the URL the card advertises, is served.
    let resp = murmur::http::client::get(
        &format!("http://localhost:{port}{CARD}"),
        &[],
        &murmur::http::client::Options::default(),
    )
    .unwrap();
    assert_eq!(resp.status, 200);

    assert_eq!(running.terminate().code(), Some(0));
}

/// The header `name` of a raw answer (the first one), lowercased name.
fn header_of(answer: &str, name: &str) -> Option<String> {
    let head = answer.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// The card in the form the request's `A2A-Version` names, with caching headers: a GET
/// with no header (0.3, A2A 1.0 §3.6) gets the spec's fields and 0.3's discovery fields; a
/// GET naming 1.0 gets the 1.0 schema's fields only; each form has its own ETag, an
/// `If-None-Match` naming it is a 304 without a body, and the answer varies on the header.
#[test]
fn the_card_comes_in_the_form_asked_for_with_caching_headers() {
    let t = TempDir::new("door-card");
    let (mut running, port) = start_door(&t);
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let get = |extra: &str| {
        exchange(
            addr,
            format!("GET {CARD} HTTP/1.1\r\nhost: localhost:{port}\r\n{extra}\r\n").as_bytes(),
        )
    };
    let merged = get("");
    assert_eq!(status_of(&merged), 200, "{merged}");
    let card: serde_json::Value = serde_json::from_str(body_of(&merged)).unwrap();
    assert_eq!(card["url"], format!("http://localhost:{port}/"));
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["preferredTransport"], "JSONRPC");
    assert_eq!(
        card["additionalInterfaces"],
        serde_json::json!([{"url": format!("http://localhost:{port}/"), "transport": "JSONRPC"}])
    );
    assert_eq!(card["capabilities"]["shell"], false);
    // A 0.3 client finds the endpoint from the card alone: its `url` with the preferred
    // JSON-RPC transport takes a 0.3 message/send as it stands.
    let send = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {"message": {"kind": "message", "messageId": "m1", "role": "user",
            "parts": [{"kind": "text", "text": "from the card"}]},
            "configuration": {"blocking": false}}});
    let resp = murmur::http::client::post_json(
        card["url"].as_str().unwrap(),
        &[],
        &send.to_string(),
        &murmur::http::client::Options::default(),
    )
    .unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(answer["result"]["kind"], "task", "{answer}");
    let v10 = get("a2a-version: 1.0\r\n");
    let card10: serde_json::Value = serde_json::from_str(body_of(&v10)).unwrap();
    let mut keys: Vec<&String> = card10.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "capabilities",
            "defaultInputModes",
            "defaultOutputModes",
            "description",
            "name",
            "skills",
            "supportedInterfaces",
            "version"
        ]
    );
    let mut caps: Vec<&String> = card10["capabilities"].as_object().unwrap().keys().collect();
    caps.sort();
    assert_eq!(caps, ["extensions", "pushNotifications", "streaming"]);
    assert_eq!(card10["supportedInterfaces"], card["supportedInterfaces"]);

    for answer in [&merged, &v10] {
        assert_eq!(header_of(answer, "cache-control").as_deref(), Some("max-age=300"));
        assert_eq!(header_of(answer, "vary").as_deref(), Some("A2A-Version"));
        let modified = header_of(answer, "last-modified").unwrap();
        assert!(modified.ends_with(" GMT") && modified.len() == 29, "{modified}");
    }
    let (tag, tag10) = (
        header_of(&merged, "etag").unwrap(),
        header_of(&v10, "etag").unwrap(),
    );
    assert!(
        tag.starts_with('"') && tag.ends_with('"') && tag.len() == 34,
        "{tag}"
    );
    assert_ne!(tag, tag10, "each form has its own tag");
    assert_eq!(
        get("").split("\r\n\r\n").nth(1),
        merged.split("\r\n\r\n").nth(1),
        "the same bytes each time"
    );
    let again = get(&format!("if-none-match: {tag}\r\n"));
    assert_eq!((status_of(&again), body_of(&again)), (304, ""), "{again}");
    assert_eq!(header_of(&again, "etag"), Some(tag.clone()));
    let again = get(&format!(
        "a2a-version: 1.0\r\nif-none-match: W/{tag10}, \"x\"\r\n"
    ));
    assert_eq!(status_of(&again), 304, "{again}");
    // The other form's tag is not this form's.
    let other = get(&format!("a2a-version: 1.0\r\nif-none-match: {tag}\r\n"));
    assert_eq!(status_of(&other), 200, "{other}");

    assert_eq!(running.terminate().code(), Some(0));
}
