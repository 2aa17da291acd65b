//! Approvals presented by hand: the test registers a parent at the roost itself, asks
//! `POST /spawn` for an approval, and launches the child as a parent's runtime would
//! (`MURMUR_SPAWNER` in the environment, the approval as one line on standard input). One
//! approval launches one child, whose completion reaches the (stand-in) parent door with the
//! completion headers and names no output; the same approval again, and an approval for an
//! artifact republished since, are refused before the session starts (E-RUN-019).

use crate::common::delegation::*;
use crate::common::provider::{last_user_text, Provider};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;

/// The environment of a hand-launched child of `parent`, reporting to `door`.
fn child_env(f: &Formation, door: &FakeDoor, parent: &str, dlg: &str) -> BTreeMap<String, String> {
    let mut env = f.env();
    env.insert(
        "MURMUR_SPAWNER".into(),
        spawner_handle(&door.url(), parent, "ctx_hand_launched", "trusted", dlg),
    );
    env
}

#[test]
fn one_approval_launches_one_child_and_its_completion_names_no_output() {
    let p = Provider::start_responder(responder(&[("courier", Plan::answer("OUTPUT-courier-secret"))]));
    let mut f = Formation::new("dlg-approval");
    f.publish(&p, &Cap::delegating("dispatch", &["courier"]));
    f.publish(&p, &Cap::leaf("courier"));
    f.start_roost(&["dispatch"], &[]);
    let parent = fresh_id("ses_");
    let cred = f.roost().credential(&parent, "dispatch", V, None);
    let approval = f.roost().approval(&cred, "courier", V);
    let door = FakeDoor::start();
    let dlg = fresh_id("dlg_");
    let wd = f.workdir("courier");
    let run = f.run_to_end(
        &run_args(&f.reg, "courier", &wd, Some("carry the parcel")),
        &child_env(&f, &door, &parent, &dlg),
        Some(&format!("{approval}\n")),
    );
    assert_eq!(run.code, Some(0), "{}", run.both());
    let sid = run.sid();
    assert_eq!(last_user_text(&requests_of(&p, "courier")[0]), "carry the parcel");

    // Registered under the approval (one level below its parent), ended complete, and the
    // parent's slot is free again.
    let s = f.roost_status(&sid, "complete");
    assert_eq!(s["depth_remaining"], 2, "{s}");
    let ps = f.roost().status(&parent);
    assert_eq!(
        (ps["status"].clone(), ps["live_children"].clone()),
        (json!("running"), json!(0)),
        "{ps}"
    );
    let start = f.trace(&sid);
    let s = session_start(&start);
    assert_eq!(s["spawned_by"], json!(parent), "{s}");
    assert_eq!(s["delegation_id"], json!(dlg), "{s}");

    // One message/send to the parent's door, with the completion headers.
    let hits = door.hits();
    assert_eq!(hits.len(), 1, "{hits:#?}");
    let hit = &hits[0];
    for (name, want) in [
        ("x-murmur-task-origin", "completion"),
        ("x-murmur-task-trust", "trusted"),
        ("x-murmur-delegation-id", dlg.as_str()),
        ("x-murmur-completion-session", parent.as_str()),
    ] {
        assert_eq!(hit.header(name), Some(want), "{name}: {:?}", hit.headers);
    }
    assert_eq!(hit.body["jsonrpc"], "2.0", "{}", hit.body);
    assert_eq!(hit.body["method"], "message/send", "{}", hit.body);
    assert_eq!(
        hit.body.pointer("/params/message/contextId"),
        Some(&json!("ctx_hand_launched")),
        "the completion runs in the delegation's conversation: {}",
        hit.body
    );
    let text = hit.text();
    assert_eq!(
        message_lines(&text),
        completion_lines(
            &dlg,
            "courier",
            &sid,
            "ok",
            &canonical(&wd),
            Some("out/result.txt")
        )
    );
    assert!(text.starts_with(FINISHED), "{text:?}");
    assert!(
        !hit.body.to_string().contains("OUTPUT-courier-secret"),
        "{}",
        hit.body
    );

    // completion.json: the child reported it, and it was delivered.
    let (raw, c) = f.settled_completion(&sid, true);
    assert_eq!(c["delegation_id"], json!(dlg), "{raw}");
    assert_eq!(c["session_id"], json!(sid), "{raw}");
    assert_eq!(c["status"], "ok", "{raw}");
    assert_eq!(c["reported_by"], "child", "{raw}");
    assert!(c.get("delivery_error").is_none(), "{raw}");
    assert!(c.get("detail").is_none(), "{raw}");
    assert_eq!(canonical(Path::new(sv(&c, "workdir"))), canonical(&wd), "{raw}");

    // The same approval for a second launch: spent, refused before any session begins.
    let before = f.sessions();
    let again = f.run_to_end(
        &run_args(&f.reg, "courier", &f.workdir("courier"), Some("carry another")),
        &child_env(&f, &door, &parent, &fresh_id("dlg_")),
        Some(&format!("{approval}\n")),
    );
    again.assert_refused("E-RUN-019", &[REPLAYED]);
    assert_eq!(f.sessions(), before, "the refused launch made records");
    assert_eq!(door.hits().len(), 1, "the refused launch posted a completion");
    assert_eq!(
        requests_of(&p, "courier").len(),
        1,
        "the refused launch ran a turn"
    );
    assert!(!holds_token(again.stderr.as_bytes()), "{}", again.stderr);
    assert!(!holds_token(run.stderr.as_bytes()), "{}", run.stderr);
}

#[test]
fn an_artifact_republished_after_its_approval_is_refused_at_registration() {
    let p = Provider::start_responder(responder(&[("courier", Plan::answer("OUTPUT-courier"))]));
    let mut f = Formation::new("dlg-republish");
    f.publish(&p, &Cap::delegating("dispatch", &["courier"]));
    let old = f.publish(&p, &Cap::leaf("courier"));
    f.start_roost(&["dispatch"], &[]);
    let parent = fresh_id("ses_");
    let cred = f.roost().credential(&parent, "dispatch", V, None);
    let (status, body) = f.roost().spawn(&cred, "courier", V);
    assert_eq!(status, 200, "{body}");
    let granted = crate::common::roost::json(&body);
    assert_eq!(granted["sha256"], json!(old), "{granted}");
    let approval = sv(&granted, "approval").to_string();

    // The same coordinates now resolve to other bytes.
    std::fs::remove_dir_all(f.reg.join("courier").join(V)).unwrap();
    let new = f.publish_yaml(
        &Cap::leaf("courier").yaml(&p),
        &[("notes.md", b"different bytes")],
    );
    assert_ne!(old, new);

    let door = FakeDoor::start();
    let first = f.run_to_end(
        &run_args(&f.reg, "courier", &f.workdir("courier"), Some("carry it")),
        &child_env(&f, &door, &parent, &fresh_id("dlg_")),
        Some(&format!("{approval}\n")),
    );
    first.assert_refused(
        "E-RUN-019",
        &[&wrong_bytes_sentence(&format!("courier@{V}"), &old, &new)],
    );
    assert_eq!(
        f.sessions(),
        Vec::<String>::new(),
        "a refused launch made records"
    );
    assert!(p.model_requests().is_empty(), "a refused launch ran a turn");
    assert!(door.hits().is_empty(), "a refused launch posted a completion");

    // Presenting it spent it: the same approval again is a replay.
    let second = f.run_to_end(
        &run_args(&f.reg, "courier", &f.workdir("courier"), Some("carry it")),
        &child_env(&f, &door, &parent, &fresh_id("dlg_")),
        Some(&format!("{approval}\n")),
    );
    second.assert_refused("E-RUN-019", &[REPLAYED]);
    assert_eq!(f.sessions(), Vec::<String>::new());
    for e in [&first, &second] {
        assert!(!holds_token(e.stderr.as_bytes()), "{}", e.stderr);
    }
}
