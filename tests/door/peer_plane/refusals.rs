//! The tools' own refusals, under `scoped` containment (symlinks under the export root are
//! refused): share-file refuses an escaping, missing, irregular, symlinked or oversized
//! path, a peer `network.allow` does not cover (without connecting), a peer without a card,
//! and a bad ttl, and clamps a long one; fetch-peer-file refuses a peer outside
//! `peer_fetch.allow` (without connecting), a malformed handle, and bytes that do not match
//! the etag (leaving nothing behind). Each refusal is traced with its code.

use crate::common::agent::{events, host_backs};
use crate::common::agent_door::door_kit::queue_sleep;
use crate::common::peer::*;
use crate::common::provider::{Provider, Step};
use serde_json::{json, Value};

#[test]
fn the_tools_refuse_and_trace_every_refusal() {
    if !host_backs("scoped") {
        eprintln!("skipped: this host cannot back scoped containment");
        return;
    }
    let good = FakePeer::card("Prober");
    let no_url = FakePeer::start(json!({"name": "nameless"}));
    let unlisted = FakePeer::card("Unlisted");
    let closed = format!("localhost:{}", free_port());
    let key = murmur::token::Key::generate().unwrap();
    let foreign = murmur::resources::peer::mint(&key, "ses_x", "x.md", now_ms() + 60_000, "a@localhost:1")
        .unwrap()
        .token;
    let g = good.addr();
    let calls = vec![
        share("c0", "../secret.txt", &g, None),
        share("c1", "/etc/passwd", &g, None),
        share("c2", "%2e%2e/secret.txt", &g, None),
        share("c3", "missing.txt", &g, None),
        share("c4", "sub", &g, None),
        share("c5", "link.txt", &g, None),
        share("c6", "big.txt", &g, None),
        share("c7", "ok.txt", &unlisted.addr(), None),
        share("c8", "ok.txt", &no_url.addr(), None),
        share("c9", "ok.txt", &closed, None),
        share("c10", "ok.txt", "https://localhost:1", None),
        share("c11", "ok.txt", &g, Some("0s")),
        share("c12", "ok.txt", &g, Some("1h")),
        fetch("c13", &unlisted.addr(), &foreign),
        fetch("c14", &g, "not-a-handle"),
        fetch("c15", &g, &foreign),
    ];
    let p = Provider::start(vec![Step::Tools(calls), Step::text("done")]);
    let caps = format!("  containment: scoped\n{}", peer_fetch(&[&g]));
    let tail = format!(
        "{}{}",
        peer_files("share", Some("10m"), Some("1Ki")),
        queue_sleep(1)
    );
    let (nu, gs) = (no_url.addr(), g.as_str());
    let network = [gs, nu.as_str(), closed.as_str()];
    let w = peer_world("peer-refusals", "capsule-r", &p, &network, &caps, &tail);
    let work = w.t.path().join("work");
    let share_dir = work.join("share");
    std::fs::create_dir_all(share_dir.join("sub")).unwrap();
    std::fs::write(share_dir.join("ok.txt"), "ok\n").unwrap();
    std::fs::write(share_dir.join("real.txt"), "real\n").unwrap();
    std::fs::write(share_dir.join("big.txt"), vec![b'x'; 2000]).unwrap();
    std::fs::write(work.join("secret.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink("real.txt", share_dir.join("link.txt")).unwrap();
    let mut s = serve_in(&w, &work);
    run_task(&s, "try everything");

    let got = results(&p, 1);
    let codes: Vec<&str> = got.iter().map(|r| r["error"].as_str().unwrap_or("ok")).collect();
    let want = [
        "outside_root",
        "outside_root",
        "outside_root",
        "not_found",
        "not_a_regular_file",
        "symlink_refused",
        "too_large",
        "peer_unreachable",
        "peer_unreachable",
        "peer_unreachable",
        "peer_unreachable",
        "invalid_ttl",
        "ok",
        "peer_not_allowed",
        "malformed_handle",
        "digest_mismatch",
    ];
    assert_eq!(codes, want, "{got:#?}");
    for r in got.iter().filter(|r| r.get("error").is_some()) {
        assert!(r["message"].as_str().is_some_and(|m| !m.is_empty()), "{r}");
    }
    // A long ttl is clamped to max_ttl; the peers no rule covers were never contacted.
    let clamped = &got[12];
    assert!(
        clamped["expires_at_ms"]
            .as_u64()
            .unwrap()
            .abs_diff(now_ms() + 600_000)
            < 60_000,
        "{clamped}"
    );
    assert_eq!(unlisted.hits(), 0, "a peer outside the allow-lists was contacted");
    assert_eq!(good.hits(), 2, "one card fetch, one redeem attempt");
    assert!(
        names_in(&work.join("peer-in")).is_empty(),
        "a refused fetch left something behind"
    );

    // Under scoped a symlink is refused at redeem too.
    let handle = sv(clamped, "handle").to_string();
    let aud = format!("prober@localhost:{}", good.port);
    assert_eq!(redeem(s.port, &handle, Some(&aud)).status, 200);
    std::fs::remove_file(share_dir.join("ok.txt")).unwrap();
    std::os::unix::fs::symlink("real.txt", share_dir.join("ok.txt")).unwrap();
    let a = redeem(s.port, &handle, Some(&aud));
    assert_eq!((a.status, a.code().as_str()), (403, "symlink_refused"));
    assert_eq!(s.stop(), Some(0), "{}", s.both());

    let all = w.trace(&s.sid);
    let mints = events(&all, "peer_handle_mint");
    let outcomes: Vec<&Value> = mints.iter().map(|e| &e["outcome"]).collect();
    assert_eq!(outcomes, want[..13].to_vec());
    for (i, m) in mints.iter().enumerate() {
        assert_eq!(m["handle_id"].is_null(), i != 12, "{m}");
        assert_eq!(m["expires_at_ms"].is_null(), i != 12, "{m}");
        assert_eq!(m["reason"].is_null(), i == 12, "{m}");
    }
    assert_eq!(mints[0]["path"], "../secret.txt");
    assert!(mints[7]["audience"].is_null());
    assert_eq!(mints[12]["audience"], aud.as_str());
    let fetches = events(&all, "peer_file_fetch");
    let outcomes: Vec<&Value> = fetches.iter().map(|e| &e["outcome"]).collect();
    assert_eq!(outcomes, want[13..].to_vec());
    let foreign_id = murmur::token::token_id(&foreign);
    assert_eq!(fetches[0]["handle_id"], foreign_id.as_str());
    assert!(fetches
        .iter()
        .all(|f| f["stored_path"].is_null() && f["sha256"].is_null()));
    assert_no_token(&w, &s.sid, false);
}
