//! Bad input never stops the daemon: malformed HTTP, invalid JSON, oversized bodies,
//! 2,000 idle connections and slow clients, with `/health` answering throughout.

mod common;

use common::roost::{publish, Daemon};
use common::{status_of, TempDir};
use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

fn health(d: &Daemon) {
    assert_eq!(d.call("GET", "/health", &[], ""), (200, "{}".to_string()));
}

#[test]
fn hostile_clients_do_not_stop_the_daemon() {
    murmur::http::raise_fd_limit(8192);
    let tmp = TempDir::new("roost-survival");
    publish(tmp.path(), "orch", "0.1.0", "");
    let mut d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);

    let idle: Vec<TcpStream> = (0..2000).map(|_| TcpStream::connect(d.addr).unwrap()).collect();
    health(&d);
    let mut slow: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(d.addr).unwrap()).collect();
    for round in 0..5 {
        for s in &mut slow {
            let _ = s.write_all(&[b"POST /register HTTP/1.1\r\n"[round]]);
        }
        std::thread::sleep(Duration::from_millis(50));
        health(&d);
    }

    let garbage: [&[u8]; 6] = [
        b"\x00\x01\x02\x03\r\n\r\n",
        b"GET /health HTTP/9.9\r\n\r\n",
        b"POST /register HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\nhello",
        b"POST /register HTTP/1.1\r\ncontent-length: nope\r\n\r\n",
        b"POST /spawn HTTP/1.1\r\ncontent-length: 65537\r\n\r\n",
        b"POST /register HTTP/1.1\r\ncontent-length: 8\r\n\r\n{\"a\":\x00}}",
    ];
    let expected = [400, 400, 400, 400, 413, 400];
    for (raw, want) in garbage.iter().zip(expected) {
        assert_eq!(
            status_of(&common::exchange(d.addr, raw)),
            want,
            "{}",
            String::from_utf8_lossy(raw)
        );
        health(&d);
    }
    for body in ["", "null", "[]", "{\"session_id\":1}", &"{".repeat(60_000)] {
        assert_eq!(d.call("POST", "/register", &[], body).0, 400, "{body:.40}");
        health(&d);
    }
    // A body at the 64 KiB cap is read and judged; one byte more is refused unread.
    let at_cap = format!("{{\"pad\":\"{}\"}}", "x".repeat(64 * 1024 - 10));
    assert_eq!(at_cap.len(), 64 * 1024);
    assert_eq!(d.call("POST", "/register", &[], &at_cap).0, 400);
    assert_eq!(d.call("POST", "/register", &[], &format!("{at_cap} ")).0, 413);
    drop(idle);
    drop(slow);
    health(&d);
    assert!(
        d.run.child.try_wait().unwrap().is_none(),
        "the daemon is still running"
    );
}
