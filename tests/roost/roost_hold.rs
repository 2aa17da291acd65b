//! `POST /hold`: a registered session's runtime holds it open for the session's lifetime;
//! when the connection closes while the session is still registered (the runtime died),
//! the roost reports it `failed` and counts it no more. A hold needs the session's own
//! credential, and a session is held by one connection.

use crate::common;

use common::roost::{publish, Daemon};
use common::TempDir;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Open a hold for `credential` on a raw connection; the connection and what it read of
/// the head.
fn hold(d: &Daemon, credential: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(d.addr).unwrap();
    let req = format!(
        "POST /hold HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\nx-murmur-spawn-credential: {credential}\r\ncontent-length: 2\r\n\r\n{{}}",
        d.host()
    );
    s.write_all(req.as_bytes()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    (s, String::from_utf8_lossy(&head).into_owned())
}

fn wait_status(d: &Daemon, sid: &str, want: &str) -> serde_json::Value {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let s = d.status(sid);
        if s["status"] == want {
            return s;
        }
        assert!(Instant::now() < until, "status of {sid} is not {want}: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_session_whose_hold_closes_is_failed_and_counted_no_more() {
    let tmp = TempDir::new("roost-hold");
    publish(tmp.path(), "orch", "0.1.0", "");
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let sid = format!("ses_{}", "a".repeat(32));
    let cred = d.credential(&sid, "orch", "0.1.0", None);

    let (s, head) = hold(&d, "msc1.forged.token");
    assert!(head.starts_with("HTTP/1.1 403 "), "{head}");
    drop(s);
    let (held, head) = hold(&d, &cred);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let (s, head) = hold(&d, &cred);
    assert!(head.starts_with("HTTP/1.1 409 "), "{head}");
    drop(s);
    let st = d.status(&sid);
    assert_eq!(
        (st["status"].as_str(), st["live_capsules"].as_u64()),
        (Some("running"), Some(1)),
        "{st}"
    );

    drop(held);
    let st = wait_status(&d, &sid, "failed");
    assert_eq!(st["live_capsules"], 0, "{st}");
}

#[test]
fn a_session_that_deregisters_before_its_hold_closes_stays_complete() {
    let tmp = TempDir::new("roost-hold-complete");
    publish(tmp.path(), "orch", "0.1.0", "");
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let sid = format!("ses_{}", "b".repeat(32));
    let cred = d.credential(&sid, "orch", "0.1.0", None);
    let (mut held, head) = hold(&d, &cred);
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    assert_eq!(d.deregister(&cred, "complete").0, 200);
    // The roost ends the stream of a session that ended; closing it changes nothing.
    let _ = d.status(&sid);
    let mut rest = Vec::new();
    let _ = held.read_to_end(&mut rest);
    drop(held);
    let st = d.status(&sid);
    assert_eq!(
        (st["status"].as_str(), st["live_capsules"].as_u64()),
        (Some("complete"), Some(0)),
        "{st}"
    );
}

/// A registration nobody keeps alive lapses: a session that never takes its hold is
/// `failed` once `HOLD_GRACE_MS` (10 s) have passed, and counts no more; one that took its
/// hold stays running. A user who registers and walks away holds no slot for good.
#[test]
fn a_registration_that_never_holds_lapses_after_the_grace() {
    let tmp = TempDir::new("roost-lapse");
    publish(tmp.path(), "orch", "0.1.0", "");
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let _walked_away = d.credential("ses_walked", "orch", "0.1.0", None);
    let kept = d.credential("ses_kept", "orch", "0.1.0", None);
    let (_held, head) = hold(&d, &kept);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(d.status("ses_walked")["status"], "running");
    assert_eq!(d.status("ses_walked")["live_capsules"], 2);
    std::thread::sleep(Duration::from_millis(murmur::roost::HOLD_GRACE_MS + 300));
    let s = wait_status(&d, "ses_walked", "failed");
    assert_eq!(s["live_capsules"], 1, "{s}");
    assert_eq!(d.status("ses_kept")["status"], "running");
}

/// Ended sessions are remembered for `GET /status` up to a bounded history, then
/// forgotten: the daemon's memory stays flat however many sessions come and go.
#[test]
fn ended_sessions_are_forgotten_past_the_bounded_history() {
    let tmp = TempDir::new("roost-history");
    publish(tmp.path(), "orch", "0.1.0", "");
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let first = d.credential("ses_first", "orch", "0.1.0", None);
    d.deregister(&first, "complete");
    assert_eq!(d.status("ses_first")["status"], "complete");
    for i in 0..murmur::roost::MAX_ENDED {
        let c = d.credential(&format!("ses_{i:032x}"), "orch", "0.1.0", None);
        d.deregister(&c, "complete");
    }
    let (code, body) = d.call("GET", "/status/ses_first", &[], "");
    assert_eq!(code, 404, "{body}");
    assert_eq!(
        d.status(&format!("ses_{:032x}", murmur::roost::MAX_ENDED - 1))["status"],
        "complete"
    );
}

/// Holds are streams, counted apart from ordinary connections: a local user who registers
/// and holds as many sessions as the roost lets it (here with 256 descriptors, 64 holds)
/// takes the places of no request. `/health`, `/register` and `/spawn` still answer, and a
/// hold past the pool is refused (503) and its session lapses as failed.
#[test]
fn holds_filling_their_pool_never_take_the_places_of_requests() {
    let tmp = TempDir::new("roost-hold-pool");
    publish(
        tmp.path(),
        "orch",
        "0.1.0",
        "capabilities:\n  spawn: {allow: [worker]}\n",
    );
    publish(tmp.path(), "worker", "0.1.0", "");
    // The machine ceiling raised out of the way: what one user's held sessions do to it is
    // another matter (they count, as the spec says every registration does).
    let d = Daemon::start_with(
        tmp.path(),
        &["--spawn-allow", "orch", "--max-live-capsules", "1000"],
        &[],
        Some(256),
    );
    let mut held = Vec::new();
    let mut refused = 0;
    for i in 0..160 {
        let (code, body) = d.register(&format!("ses_{i:032x}"), "orch", "0.1.0", None);
        assert_eq!(code, 200, "registration {i}: {body}");
        let cred = common::roost::json(&body)["credential"]
            .as_str()
            .unwrap()
            .to_string();
        let (s, head) = hold(&d, &cred);
        if head.starts_with("HTTP/1.1 200") {
            held.push(s);
        } else {
            assert!(head.starts_with("HTTP/1.1 503"), "{head}");
            refused += 1;
        }
    }
    assert!(
        refused > 0 && !held.is_empty(),
        "{} held, {refused} refused",
        held.len()
    );
    let (code, _) = d.call("GET", "/health", &[], "");
    assert_eq!(code, 200);
    let cred = d.credential("ses_operator", "orch", "0.1.0", None);
    let (code, body) = d.spawn(&cred, "worker", "0.1.0");
    assert_eq!(code, 200, "{body}");
    // A session whose hold was refused ends as if its hold had closed.
    let st = wait_status(&d, &format!("ses_{:032x}", 159), "failed");
    assert_eq!(st["status"], "failed");
}
