//! The redeem's error table on a real door: one capsule mints handles for a stand-in peer
//! (a loopback server serving an agent card), the files behind them are changed, and every
//! row is requested raw.

use crate::common::agent::events;
use crate::common::agent_door::door_kit::queue_sleep;
use crate::common::peer::*;
use crate::common::provider::{Provider, Step};
use serde_json::Value;
use std::time::Duration;

#[test]
fn every_row_of_the_peer_error_table_answers_on_the_door() {
    let prober = FakePeer::card("Prober");
    let aud = format!("prober@localhost:{}", prober.port);
    let peer = prober.addr();
    let names = ["ok.txt", "gone.txt", "dir.txt", "link.txt", "big.txt"];
    let mut calls: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, n)| share(&format!("c{i}"), n, &peer, None))
        .collect();
    calls.push(share("c5", "short.txt", &peer, Some("1s")));
    let p = Provider::start(vec![Step::Tools(calls), Step::text("shared")]);
    let tail = format!(
        "{}{}",
        peer_files("share", Some("10m"), Some("1Ki")),
        queue_sleep(2)
    );
    let w = peer_world("peer-table", "capsule-a", &p, &[&peer], "", &tail);
    let work = w.t.path().join("work");
    let share_dir = work.join("share");
    std::fs::create_dir_all(&share_dir).unwrap();
    for n in names.iter().chain(&["short.txt", "real.txt"]) {
        std::fs::write(share_dir.join(n), format!("contents of {n}\n")).unwrap();
    }
    std::fs::write(work.join("secret.txt"), "outside the export root\n").unwrap();
    let mut s = serve_in(&w, &work);
    run_task(&s, "share the files with the prober");
    let minted = results(&p, 1);
    assert_eq!(minted.len(), 6, "{minted:?}");
    for m in &minted {
        assert_eq!(m["audience"], aud.as_str(), "{m}");
    }
    assert_eq!(prober.hits(), 6, "one card fetch per mint");
    let h: Vec<String> = minted.iter().map(|m| s_of(m, "handle")).collect();
    let class = events(&w.trace(&s.sid), "session_start")[0]["containment_achieved"].clone();

    // Change what the handles name.
    std::fs::remove_file(share_dir.join("gone.txt")).unwrap();
    std::fs::remove_file(share_dir.join("dir.txt")).unwrap();
    std::fs::create_dir(share_dir.join("dir.txt")).unwrap();
    std::fs::remove_file(share_dir.join("link.txt")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", share_dir.join("link.txt")).unwrap();
    std::fs::write(share_dir.join("big.txt"), vec![b'x'; 2000]).unwrap();
    let short_exp = minted[5]["expires_at_ms"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(short_exp.saturating_sub(now_ms()) + 100));

    let port = s.port;
    let ok = redeem(port, &h[0], Some(&aud));
    assert_eq!(
        (ok.status, ok.body.as_slice()),
        (200, &b"contents of ok.txt\n"[..])
    );
    // The audience compares lowercased.
    assert_eq!(redeem(port, &h[0], Some(&aud.to_uppercase())).status, 200);
    let link_code = if class == "scoped" {
        "symlink_refused"
    } else {
        "outside_root"
    };
    let rows: Vec<(Answer, u16, &str)> = vec![
        (redeem(port, "not-a-handle", Some(&aud)), 400, "malformed_handle"),
        (redeem(port, "mh1.e30.AAAA", Some(&aud)), 400, "malformed_handle"),
        (redeem(port, &h[0], None), 400, "missing_audience"),
        (redeem(port, &h[0], Some(" ")), 400, "missing_audience"),
        (
            redeem(port, &tampered(&h[0], "secret.txt"), Some(&aud)),
            403,
            "handle_not_valid",
        ),
        (
            redeem(port, &h[0], Some("capsule-c@localhost:1")),
            403,
            "handle_not_valid",
        ),
        (redeem(port, &h[5], Some(&aud)), 410, "handle_expired"),
        (redeem(port, &h[1], Some(&aud)), 404, "not_found"),
        (redeem(port, &h[2], Some(&aud)), 403, "not_a_regular_file"),
        (redeem(port, &h[3], Some(&aud)), 403, link_code),
        (redeem(port, &h[4], Some(&aud)), 413, "too_large"),
        (request(port, "GET", "/resources/peer", &[]), 404, "not_found"),
        (
            request(port, "GET", "/resources/peer/", &[("x-murmur-audience", &aud)]),
            404,
            "not_found",
        ),
    ];
    for (a, status, code) in &rows {
        let shown = String::from_utf8_lossy(&a.raw);
        assert_eq!((a.status, a.code().as_str()), (*status, *code), "{shown}");
        assert!(
            a.json()["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{shown}"
        );
        assert!(a.header("x-murmur-handle-id").is_none(), "{shown}");
        assert!(!holds_token(&a.raw), "a refusal echoes no token: {shown}");
    }
    assert_eq!(
        rows[4].0.raw, rows[5].0.raw,
        "one handle_not_valid, byte for byte"
    );
    for method in ["POST", "PUT", "DELETE", "PATCH", "HEAD"] {
        let a = request(
            port,
            method,
            &format!("/resources/peer/{}", h[0]),
            &[("x-murmur-audience", &aud)],
        );
        assert_eq!(a.status, 405, "{method}");
        assert_eq!(a.header("allow"), Some("GET"), "{method}");
        if method != "HEAD" {
            assert_eq!(a.code(), "method_not_allowed", "{method}");
        }
    }
    assert_eq!(s.stop(), Some(0), "{}", s.both());

    // Every redeem is traced under the handle id its mint recorded; the path only after
    // the MAC verified.
    let all = w.trace(&s.sid);
    let mint_ids: Vec<Value> = events(&all, "peer_handle_mint")
        .iter()
        .map(|e| e["handle_id"].clone())
        .collect();
    let ids: Vec<Value> = minted.iter().map(|m| m["handle_id"].clone()).collect();
    assert_eq!(mint_ids, ids);
    let redeems = events(&all, "peer_handle_redeem");
    let outcome_of = |id: &Value, outcome: &str| {
        redeems
            .iter()
            .find(|e| &e["handle_id"] == id && e["outcome"] == outcome)
            .unwrap_or_else(|| panic!("no {outcome} redeem of {id}: {redeems:#?}"))
    };
    assert_eq!(outcome_of(&ids[0], "ok")["path"], "ok.txt");
    assert!(outcome_of(&ids[0], "missing_audience")["path"].is_null());
    assert!(outcome_of(&ids[0], "handle_not_valid")["path"].is_null());
    assert_eq!(outcome_of(&ids[1], "not_found")["path"], "gone.txt");
    assert_eq!(outcome_of(&ids[4], "too_large")["path"], "big.txt");
    outcome_of(&ids[5], "handle_expired");
    outcome_of(&ids[0], "method_not_allowed");
    assert_no_token(&w, &s.sid, false);
}

fn s_of(v: &Value, key: &str) -> String {
    sv(v, key).to_string()
}
