//! A session's model calls through the real `mur run` and the OpenAI driver against a
//! provider that keeps its connections open (HTTP/1.1 keep-alive, which the scripted mock
//! does not do: it closes after each answer): the calls go over one connection (three before
//! kept connections), with the provider key on each or with none; against one that drops
//! each connection after its answer without saying so, each call gets a new one and the
//! session is not disturbed; a connection whose call was answered with an error (here a 503
//! the runtime retries) is not kept.

use crate::common;

use common::agent::{Drv, Spec, World, KEY, KEY_VAR};
use common::provider::Provider;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A provider answering OpenAI chat completions over kept connections: the first `calls`
/// requests get a `bash` call of `true`, the rest the text `done`.
struct KeptProvider {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    /// Each request's `authorization` header, in arrival order.
    auth: Arc<Mutex<Vec<Option<String>>>>,
}

/// How the provider treats its connections.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Kept open for the client's next request.
    Keep,
    /// Closed right after each answer, with no `connection: close` to warn of it (a server
    /// whose idle timeout is shorter than a turn).
    DropAfterAnswer,
    /// Kept open, and the first request answered 503 (retried by the runtime).
    FirstBusy,
}

impl KeptProvider {
    fn start(calls: usize, mode: Mode) -> KeptProvider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let auth = Arc::new(Mutex::new(Vec::new()));
        let (c, r, a) = (Arc::clone(&connections), Arc::clone(&requests), Arc::clone(&auth));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let (r, a) = (Arc::clone(&r), Arc::clone(&a));
                std::thread::spawn(move || serve(stream, calls, mode, &r, &a));
            }
        });
        KeptProvider {
            port,
            connections,
            requests,
            auth,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

/// Answer requests on `stream` until the client closes it (or after one, when dropping).
fn serve(
    stream: TcpStream,
    calls: usize,
    mode: Mode,
    requests: &AtomicUsize,
    auth: &Mutex<Vec<Option<String>>>,
) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut length = 0usize;
        let mut authorization = None;
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
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
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        auth.lock().unwrap().push(authorization);
        let mut n = requests.fetch_add(1, Ordering::SeqCst) + 1;
        if mode == Mode::FirstBusy {
            if n == 1 {
                let busy = r#"{"error":{"message":"busy","type":"server_error"}}"#;
                let head = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 0\r\ncontent-length: {}\r\n\r\n",
                    busy.len()
                );
                if writer.write_all(head.as_bytes()).is_err() || writer.write_all(busy.as_bytes()).is_err() {
                    return;
                }
                continue;
            }
            n -= 1;
        }
        let message = if n <= calls {
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{n}"), "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"true\"}"}}]})
        } else {
            json!({"role": "assistant", "content": "done"})
        };
        let finish = if n <= calls { "tool_calls" } else { "stop" };
        let answer = json!({
            "id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        })
        .to_string();
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        if writer.write_all(head.as_bytes()).is_err() || writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
        if mode == Mode::DropAfterAnswer {
            let _ = writer.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// A three-turn session (two `bash` calls, then `done`) against `p`, with the provider key
/// or (`keyed` false) with no `inference.api_key`.
fn session(label: &str, p: &KeptProvider, keyed: bool, requests: usize) {
    let w = World::new(label);
    // The scripted mock only stands in for `Spec::new`'s endpoint, replaced by `p`'s.
    let unused = Provider::start(Vec::new());
    let mut spec = Spec::new(Drv::OpenAi, &unused);
    spec.endpoint = p.endpoint();
    let yaml = spec.yaml();
    let key_line = format!("  api_key: ${{{KEY_VAR}}}\n");
    assert!(yaml.contains(&key_line));
    w.manifest_text(&if keyed { yaml } else { yaml.replace(&key_line, "") });
    let run = w.run("run true twice", &[]);
    run.assert_ok();
    assert_eq!(w.result(&run.sid()), "done\n");
    assert_eq!(
        p.requests.load(Ordering::SeqCst),
        requests,
        "one request per turn, and each retry"
    );
}

#[test]
fn a_sessions_model_calls_go_over_one_kept_connection_each_with_the_key() {
    let p = KeptProvider::start(2, Mode::Keep);
    session("agent-keepalive", &p, true, 3);
    assert_eq!(
        p.connections.load(Ordering::SeqCst),
        1,
        "three model calls, one connection"
    );
    let bearer = Some(format!("Bearer {KEY}"));
    assert_eq!(
        *p.auth.lock().unwrap(),
        vec![bearer.clone(), bearer.clone(), bearer]
    );
}

#[test]
fn without_a_provider_key_the_calls_share_one_connection_too() {
    let p = KeptProvider::start(2, Mode::Keep);
    session("agent-keepalive-keyless", &p, false, 3);
    assert_eq!(
        p.connections.load(Ordering::SeqCst),
        1,
        "three model calls, one connection"
    );
    assert_eq!(*p.auth.lock().unwrap(), vec![None, None, None]);
}

#[test]
fn a_provider_that_drops_each_connection_unannounced_gets_a_new_one_per_call() {
    let p = KeptProvider::start(2, Mode::DropAfterAnswer);
    session("agent-keepalive-dropped", &p, true, 3);
    assert_eq!(
        p.connections.load(Ordering::SeqCst),
        3,
        "a dropped connection is never reused"
    );
}

#[test]
fn a_connection_whose_call_was_answered_with_an_error_is_not_kept() {
    let p = KeptProvider::start(2, Mode::FirstBusy);
    session("agent-keepalive-busy", &p, true, 4);
    assert_eq!(
        p.connections.load(Ordering::SeqCst),
        2,
        "the 503's connection closed; the retry and the two calls after it on a new one"
    );
}
