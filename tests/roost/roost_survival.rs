//! Bad input never stops the daemon: malformed HTTP, invalid JSON, oversized bodies,
//! 2,000 idle connections, slow clients and a flood of slow uploads, with `/health`
//! answering throughout and the daemon's memory bounded by its buffer budget.

use crate::common;

use common::roost::{publish, Daemon};
use common::{body_of, status_field, status_of, TempDir};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn health(d: &Daemon) {
    assert_eq!(d.call("GET", "/health", &[], ""), (200, "{}".to_string()));
}

/// `raw` with the daemon's own `host` added after its first line, so it reaches the check
/// it is aimed at rather than the loopback guard.
fn with_host(d: &Daemon, raw: &[u8]) -> Vec<u8> {
    let at = raw
        .windows(2)
        .position(|w| w == b"\r\n")
        .map_or(raw.len(), |i| i + 2);
    let mut out = raw[..at].to_vec();
    out.extend_from_slice(format!("host: {}\r\n", d.host()).as_bytes());
    out.extend_from_slice(&raw[at..]);
    out
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
        b"POST /register HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{\"a\":\x00}}",
    ];
    let expected = [400, 400, 400, 400, 413, 400];
    for (raw, want) in garbage.iter().zip(expected) {
        assert_eq!(
            status_of(&d.send(&with_host(&d, raw))),
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

/// One non-blocking pass writing what each socket takes of `upload`; whether any is still
/// unfinished. A connection the daemon refused and closed counts as finished.
fn send_some(uploads: &mut [(TcpStream, usize)], upload: &[u8]) -> bool {
    let mut pending = false;
    for (s, sent) in uploads.iter_mut() {
        while *sent < upload.len() {
            match s.write(&upload[*sent..]) {
                Ok(n) => *sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    pending = true;
                    break;
                }
                Err(_) => {
                    *sent = upload.len();
                }
            }
        }
    }
    pending
}

/// Resident memory of `pid`, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status_field(&status, "VmRSS:");
    rss.trim_end_matches("kB").trim().parse().unwrap()
}

/// 2,000 clients each declare a 64 KiB body and send 60 KiB of it, then stall: 117 MiB
/// the daemon would hold if each connection could buffer up to the body cap. The 16 MiB
/// budget refuses the bytes beyond it with a 503 and closes those connections; `/health`
/// (no body, so never charged) answers throughout, and resident memory stays under the
/// budget plus 64 MiB.
#[test]
fn slow_uploads_stay_within_the_buffer_budget() {
    const CLIENTS: usize = 2000;
    const DECLARED: usize = 64 * 1024;
    const SENT: usize = 60 * 1024;
    const BUDGET_KIB: u64 = 16 * 1024;
    murmur::http::raise_fd_limit(16_384);
    let tmp = TempDir::new("roost-budget");
    publish(tmp.path(), "orch", "0.1.0", "");
    let mut d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let pid = d.run.child.id();
    let before = rss_kib(pid);
    let head = format!(
        "POST /register HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {DECLARED}\r\n\r\n",
        d.host()
    );
    let mut upload = head.into_bytes();
    upload.extend(std::iter::repeat_n(b' ', SENT));
    let mut peak = before;
    // Connect and write without blocking, then keep writing in passes: on a loaded machine
    // one blocking write per client would cost a scheduler round trip each.
    let mut uploads: Vec<(TcpStream, usize)> = Vec::with_capacity(CLIENTS);
    let started = Instant::now();
    for i in 0..CLIENTS {
        let s = TcpStream::connect(d.addr).unwrap();
        s.set_nonblocking(true).unwrap();
        uploads.push((s, 0));
        // Batches below the listen backlog, each ended by a /health round trip, so the
        // daemon has accepted a batch before the next arrives and no SYN is dropped.
        if i % 100 == 99 {
            send_some(&mut uploads, &upload);
            health(&d);
            peak = peak.max(rss_kib(pid));
        }
    }
    while send_some(&mut uploads, &upload) && started.elapsed() < Duration::from_secs(7) {
        std::thread::sleep(Duration::from_millis(20));
    }
    health(&d);
    std::thread::sleep(Duration::from_millis(300));
    peak = peak.max(rss_kib(pid));
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "uploads must all be in flight before the 10 s request timeout"
    );

    // Each connection holds its upload or was answered 503 and closed.
    let (mut held, mut busy) = (0usize, 0usize);
    for (s, _) in &mut uploads {
        let mut answer = Vec::new();
        let mut chunk = [0u8; 512];
        loop {
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => answer.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && answer.is_empty() => {
                    held += 1;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => break,
            }
        }
        let text = String::from_utf8_lossy(&answer);
        if !answer.is_empty() && status_of(&text) == 408 {
            // Held until its 10 s request deadline cut it (a slow machine).
            held += 1;
        } else if !answer.is_empty() {
            assert_eq!(status_of(&text), 503, "{text}");
            assert_eq!(
                body_of(&text),
                r#"{"error":"server busy: request bodies in flight have reached this server's buffer budget; retry shortly"}"#
            );
            busy += 1;
        }
    }
    eprintln!("{held} uploads held, {busy} refused 503; rss {before} KiB before, peak {peak} KiB");
    assert!(busy > 0, "the budget refused nothing ({held} held)");
    assert!(
        (held * SENT) as u64 <= BUDGET_KIB * 1024,
        "{held} connections hold {} KiB, over the 16 MiB budget",
        held * SENT / 1024
    );
    assert!(
        peak < BUDGET_KIB + 64 * 1024,
        "rss peaked at {peak} KiB (from {before} KiB) holding {held} uploads"
    );
    drop(uploads);
    health(&d);
    // The budget was given back: a whole request with a body is served again.
    let (s, _) = d.call(
        "POST",
        "/register",
        &[],
        r#"{"session_id":"ses_budget","name":"orch","version":"0.1.0"}"#,
    );
    assert_eq!(s, 200);
    assert!(d.run.child.try_wait().unwrap().is_none());
}
