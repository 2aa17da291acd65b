//! The peer plane end to end through the real `mur run --json`, against the mock provider:
//! capsule A mints a handle with `share-file` for capsule B, B redeems it with
//! `fetch-peer-file` and the bytes land under its `peer-in/`; a third capsule, an expired
//! handle and a handle of A's previous session are refused; no trace holds a token. The
//! door's error table, the tools' refusals, the inventory and E-CAP-008 are in
//! tests/door/peer_plane/.

use crate::common;

mod inventory;
mod refusals;
mod table;

use common::agent::events;
use common::agent_door::door_kit::queue_sleep;
use common::peer::*;
use common::provider::{Provider, Step};
use serde_json::{json, Value};
use std::time::Duration;

const REPORT: &[u8] = b"# Report\nquarterly numbers: 4, 8, 15, 16, 23, 42\n";

/// The `n` events of `kind` whose `handle_id` is `id` and whose outcome is `outcome`.
fn events_of<'a>(all: &'a [Value], kind: &str, id: &str, outcome: &str, n: usize) -> Vec<&'a Value> {
    let found: Vec<&Value> = events(all, kind)
        .into_iter()
        .filter(|e| e["handle_id"] == id && e["outcome"] == outcome)
        .collect();
    assert_eq!(found.len(), n, "{kind} {id} {outcome}: {found:#?}");
    found
}

#[test]
fn a_file_shared_by_a_lands_at_b_and_redeems_nowhere_else() {
    let a_port = free_port();
    let a_addr = format!("localhost:{a_port}");
    // B fetches from A's door; its model's turns are pushed once the handles exist.
    let pb = Provider::start(Vec::new());
    let wb = peer_world(
        "peer-b",
        "capsule-b",
        &pb,
        &[],
        &peer_fetch(&[&a_addr]),
        &queue_sleep(4),
    );
    let mut sb = wb.serve(None, &[]);
    let b_addr = format!("localhost:{}", sb.port);
    let b_audience = format!("capsule-b@localhost:{}", sb.port);

    // A exports share/ and may reach B's door for its card.
    let pa = Provider::start(vec![
        Step::Tools(vec![share("s1", "report.md", &b_addr, None)]),
        Step::text("shared"),
        Step::Tools(vec![share("s2", "report.md", &b_addr, Some("1s"))]),
        Step::text("shared briefly"),
    ]);
    let tail = format!(
        "{}{}{}",
        peer_files("share/", Some("10m"), None),
        internal_port(a_port),
        queue_sleep(4)
    );
    let wa = peer_world("peer-a", "capsule-a", &pa, &[&b_addr], "", &tail);
    let work_a = wa.t.path().join("a-work");
    std::fs::create_dir_all(work_a.join("share")).unwrap();
    std::fs::write(work_a.join("share/report.md"), REPORT).unwrap();
    let mut sa = serve_in(&wa, &work_a);
    assert_eq!(sa.port, a_port);

    // share-file: the model gets the real handle, bound to B's card identity.
    run_task(&sa, "share the report with capsule-b");
    let minted = results(&pa, 1);
    let h1 = &minted[0];
    let mut fields: Vec<&String> = h1.as_object().unwrap().keys().collect();
    fields.sort();
    assert_eq!(
        fields,
        ["audience", "expires_at_ms", "handle", "handle_id"],
        "{h1}"
    );
    let handle = sv(h1, "handle").to_string();
    let id1 = sv(h1, "handle_id").to_string();
    assert!(handle.starts_with("mh1."), "{h1}");
    assert_eq!(id1, murmur::token::token_id(&handle));
    assert_eq!(sv(h1, "audience"), b_audience);
    let exp1 = h1["expires_at_ms"].as_u64().unwrap();
    assert!(
        exp1.abs_diff(now_ms() + 600_000) < 60_000,
        "max_ttl is the default: {h1}"
    );
    run_task(&sa, "share it again, briefly");
    let h2 = results(&pa, 3)[0].clone();
    let (short, id2) = (sv(&h2, "handle").to_string(), sv(&h2, "handle_id").to_string());
    assert!(h2["expires_at_ms"].as_u64().unwrap() <= now_ms() + 1_000, "{h2}");

    // The door serves B's identity, with the validator headers and no path.
    let ok = redeem(a_port, &handle, Some(&b_audience));
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.raw));
    assert_eq!(ok.body, REPORT);
    let etag = format!("\"sha256:{}\"", sha256_hex(REPORT));
    let mtime = std::fs::metadata(work_a.join("share/report.md"))
        .unwrap()
        .modified()
        .unwrap();
    let mtime_ms = mtime
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    let a_trace = wa.trace(&sa.sid);
    let class = events(&a_trace, "session_start")[0]["containment_achieved"].clone();
    for (name, want) in [
        ("content-type", "application/octet-stream"),
        ("etag", &etag),
        ("content-length", &REPORT.len().to_string()),
        ("x-murmur-mtime-ms", &mtime_ms),
        ("x-murmur-generation", "2"),
        ("x-murmur-containment", class.as_str().unwrap()),
        ("x-murmur-handle-id", &id1),
    ] {
        assert_eq!(ok.header(name), Some(want), "{name}: {:?}", ok.headers);
    }
    assert!(ok.header("x-murmur-export-root").is_none(), "{:?}", ok.headers);

    // fetch-peer-file at B: the bytes land as a file, never as text.
    pb.push(Step::Tools(vec![fetch("f1", &a_addr, &handle)]));
    pb.push(Step::text("fetched"));
    run_task(&sb, "fetch the report capsule-a shared");
    let stored = format!("peer-in/{id1}-report.md");
    assert_eq!(
        results(&pb, 1)[0],
        json!({"path": stored, "bytes": REPORT.len(), "sha256": sha256_hex(REPORT), "generation": 2, "peer": a_addr})
    );
    let b_work = wb.workdir(&sb.sid);
    assert_eq!(std::fs::read(b_work.join(&stored)).unwrap(), REPORT);
    assert_eq!(names_in(&b_work.join("peer-in")), [format!("{id1}-report.md")]);

    // The short handle has expired by now.
    let wait = h2["expires_at_ms"].as_u64().unwrap().saturating_sub(now_ms()) + 100;
    std::thread::sleep(Duration::from_millis(wait));
    pb.push(Step::Tools(vec![fetch("f2", &a_addr, &short)]));
    pb.push(Step::text("expired"));
    run_task(&sb, "fetch the short one");
    assert_eq!(results(&pb, 3)[0]["error"], "handle_expired");

    // A third capsule, with its own identity, holding B's handle: refused, nothing stored.
    let pc = Provider::start(vec![
        Step::Tools(vec![fetch("f1", &a_addr, &handle)]),
        Step::text("refused"),
    ]);
    let wc = peer_world("peer-c", "capsule-c", &pc, &[], &peer_fetch(&[&a_addr]), "");
    let rc = wc.run("fetch the report", &[]);
    rc.assert_ok();
    let c_sid = rc.sid();
    assert_eq!(results(&pc, 1)[0]["error"], "handle_not_valid");
    assert!(names_in(&wc.workdir(&c_sid).join("peer-in")).is_empty());

    // A's trace: the mints, and redeems under the same handle ids.
    assert_eq!(sa.stop(), Some(0), "{}", sa.both());
    let a_trace = wa.trace(&sa.sid);
    let mints = events(&a_trace, "peer_handle_mint");
    assert_eq!(mints.len(), 2, "{mints:?}");
    assert_eq!(
        *mints[0],
        json!({
            "event_type": "peer_handle_mint", "session_id": sa.sid, "timestamp": mints[0]["timestamp"],
            "handle_id": id1, "path": "report.md", "audience": b_audience, "expires_at_ms": exp1,
            "outcome": "ok", "reason": null,
        })
    );
    assert_eq!(mints[1]["handle_id"], id2);
    // The raw redeem above and B's fetch.
    for served in events_of(&a_trace, "peer_handle_redeem", &id1, "ok", 2) {
        assert_eq!(served["path"], "report.md");
        assert_eq!(served["audience_asserted"], b_audience);
        assert_eq!(served["sha256"], sha256_hex(REPORT));
        assert_eq!(served["generation"], 2);
    }
    let third = events_of(&a_trace, "peer_handle_redeem", &id1, "handle_not_valid", 1)[0];
    assert!(third["path"].is_null(), "{third}");
    assert!(
        sv(third, "audience_asserted").starts_with("capsule-c@localhost:"),
        "{third}"
    );
    events_of(&a_trace, "peer_handle_redeem", &id2, "handle_expired", 1);
    let share_calls: Vec<&Value> = events(&a_trace, "tool_call")
        .into_iter()
        .filter(|e| e["tool_name"] == "share-file")
        .collect();
    assert_eq!(share_calls.len(), 2);
    assert_eq!(share_calls[0]["kind"], "peer");

    // A's next session over the same workdir: A's old handle no longer verifies.
    pa.push(Step::Tools(vec![share("s3", "report.md", &b_addr, None)]));
    pa.push(Step::text("shared anew"));
    let mut sa2 = serve_in(&wa, &work_a);
    assert_ne!(sa2.sid, sa.sid);
    run_task(&sa2, "share the report again");
    let fresh = sv(&results(&pa, 5)[0], "handle").to_string();
    assert_eq!(redeem(a_port, &fresh, Some(&b_audience)).status, 200);
    let old = redeem(a_port, &handle, Some(&b_audience));
    let forged = redeem(a_port, &tampered(&fresh, "other.md"), Some(&b_audience));
    let stranger = redeem(a_port, &fresh, Some("capsule-c@localhost:1"));
    assert_eq!((old.status, old.code().as_str()), (403, "handle_not_valid"));
    assert_eq!(
        old.raw, forged.raw,
        "a tampered payload answers like another session"
    );
    assert_eq!(
        old.raw, stranger.raw,
        "a wrong audience answers like another session"
    );
    pb.push(Step::Tools(vec![fetch("f3", &a_addr, &handle)]));
    pb.push(Step::text("stale"));
    run_task(&sb, "fetch the old handle");
    assert_eq!(results(&pb, 5)[0]["error"], "handle_not_valid");
    assert_eq!(sa2.stop(), Some(0), "{}", sa2.both());
    assert_eq!(sb.stop(), Some(0), "{}", sb.both());

    // B's trace: each fetch, the handle named by its id only.
    let b_trace = wb.trace(&sb.sid);
    let fetches = events(&b_trace, "peer_file_fetch");
    let outcomes: Vec<&Value> = fetches.iter().map(|e| &e["outcome"]).collect();
    assert_eq!(outcomes, ["ok", "handle_expired", "handle_not_valid"]);
    assert_eq!(
        *fetches[0],
        json!({
            "event_type": "peer_file_fetch", "session_id": sb.sid, "timestamp": fetches[0]["timestamp"],
            "peer": a_addr, "handle_id": id1, "stored_path": stored, "bytes": REPORT.len(),
            "sha256": sha256_hex(REPORT), "outcome": "ok", "reason": null,
        })
    );
    assert!(fetches[1]["stored_path"].is_null() && fetches[1]["bytes"].is_null());
    assert_eq!(fetches[1]["handle_id"], id2);
    let call = events(&b_trace, "tool_call")[0];
    assert_eq!(call["tool_name"], "fetch-peer-file");
    assert_eq!(
        call["input"],
        json!({"peer": a_addr, "handle": format!("<handle:{id1}>")})
    );
    let c_trace = wc.trace(&c_sid);
    assert_eq!(
        events(&c_trace, "peer_file_fetch")[0]["outcome"],
        "handle_not_valid"
    );
    for (w, sid) in [(&wa, &sa.sid), (&wa, &sa2.sid), (&wb, &sb.sid), (&wc, &c_sid)] {
        assert_no_token(w, sid, true);
    }
}
