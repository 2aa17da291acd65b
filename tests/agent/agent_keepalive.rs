//! A session's model calls through the real `mur run` and the OpenAI driver against a
//! provider that keeps its connections open (HTTP/1.1 keep-alive, which the scripted mock
//! does not do: it closes after each answer): the calls go over one connection (three before
//! kept connections); against one that drops each connection after its answer without saying
//! so, each call gets a new one and the session is not disturbed.

use crate::common;

use common::agent::{Drv, Spec, World};
use common::provider::Provider;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A provider answering OpenAI chat completions over kept connections: the first `calls`
/// requests get a `bash` call of `true`, the rest the text `done`.
struct KeptProvider {
    port: u16,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

impl KeptProvider {
    /// `drop_after_answer`: close each connection right after its first answer, with no
    /// `connection: close` to warn of it (a server whose idle timeout is shorter than a turn).
    fn start(calls: usize, drop_after_answer: bool) -> KeptProvider {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (c, r) = (Arc::clone(&connections), Arc::clone(&requests));
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                c.fetch_add(1, Ordering::SeqCst);
                let r = Arc::clone(&r);
                std::thread::spawn(move || serve(stream, calls, drop_after_answer, &r));
            }
        });
        KeptProvider {
            port,
            connections,
            requests,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

/// Answer requests on `stream` until the client closes it (or after one, when dropping).
fn serve(stream: TcpStream, calls: usize, drop_after_answer: bool, requests: &AtomicUsize) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    loop {
        let mut length = 0usize;
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
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let n = requests.fetch_add(1, Ordering::SeqCst) + 1;
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
        if drop_after_answer {
            let _ = writer.shutdown(std::net::Shutdown::Both);
            return;
        }
    }
}

/// A three-turn session (two `bash` calls, then `done`) against `p`.
fn session(label: &str, p: &KeptProvider) {
    let w = World::new(label);
    // The scripted mock only stands in for `Spec::new`'s endpoint, replaced by `p`'s.
    let unused = Provider::start(Vec::new());
    let mut spec = Spec::new(Drv::OpenAi, &unused);
    spec.endpoint = p.endpoint();
    w.manifest(&spec);
    let run = w.run("run true twice", &[]);
    run.assert_ok();
    assert_eq!(w.result(&run.sid()), "done\n");
    assert_eq!(p.requests.load(Ordering::SeqCst), 3, "one request per turn");
}

#[test]
fn a_sessions_model_calls_go_over_one_kept_connection() {
    let p = KeptProvider::start(2, false);
    session("agent-keepalive", &p);
    assert_eq!(
        p.connections.load(Ordering::SeqCst),
        1,
        "three model calls, one connection"
    );
}

#[test]
fn a_provider_that_drops_each_connection_unannounced_gets_a_new_one_per_call() {
    let p = KeptProvider::start(2, true);
    session("agent-keepalive-dropped", &p);
    assert_eq!(
        p.connections.load(Ordering::SeqCst),
        3,
        "a dropped connection is never reused"
    );
}
