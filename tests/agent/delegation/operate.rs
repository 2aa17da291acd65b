//! The operator's commands on a formation: `mur ps` lists a delegated child with its parent
//! named, and `mur stop` of the parent ends it as SIGTERM does, its child with it (recorded
//! `terminated` by the launcher), leaving nothing running and nothing listed.

use super::watch::{
    assert_closed, assert_launcher_completion, stuck_formation, the_delegation, victim_mid_task,
};
use crate::common::capsule::{text, MUR};
use crate::common::delegation::*;
use serde_json::Value;
use std::process::{Command, Output, Stdio};

/// `mur ARGS` over the formation's records root.
fn mur(f: &Formation, args: &[&str]) -> Output {
    crate::common::capsule::mur_over(&f.records, args)
}

fn ps(f: &Formation) -> Vec<Value> {
    crate::common::capsule::ps_rows(&f.records)
}

#[test]
fn stop_ends_a_session_with_its_delegated_child_and_leaves_nothing_running() {
    let (p, f) = stuck_formation("dlg-stop", Cap::delegating("boss", &["victim"]));
    let mut top = f.start("boss", Some("delegate, then be stopped by mur stop"), &f.env());
    victim_mid_task(&p, &f);
    let (start, child, dir) = the_delegation(&p, &top);

    let rows = ps(&f);
    let row = |sid: &str| rows.iter().find(|r| r["session_id"] == sid).cloned();
    let boss = row(&top.sid).unwrap_or_else(|| panic!("the parent is not listed: {rows:#?}"));
    let victim = row(&child).unwrap_or_else(|| panic!("the child is not listed: {rows:#?}"));
    assert_eq!(
        (boss["capsule"].as_str(), boss["parent"].clone()),
        (Some("boss"), Value::Null),
        "{boss}"
    );
    assert_eq!(victim["capsule"], "victim", "{victim}");
    assert_eq!(
        victim["parent"],
        top.sid.as_str(),
        "the child names its parent: {victim}"
    );
    assert_eq!(victim["state"], "working", "{victim}");
    assert!(
        victim["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http://localhost:")),
        "{victim}"
    );

    // A watch of the boss from here: what happened so far, then its end.
    let mut watch = Command::new(MUR)
        .args(["watch", &top.sid])
        .env("MURMUR_RECORDS_DIR", &f.records)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let out = mur(&f, &["stop", &top.sid]);
    assert!(out.status.success(), "{}\n{}", text(&out.stderr), f.dump());
    assert!(
        text(&out.stdout).starts_with(&format!("{}: ended ", top.sid)),
        "{}",
        text(&out.stdout)
    );
    assert!(
        top.wait_exit(WAIT).is_some(),
        "the parent outlived mur stop\n{}",
        top.both()
    );
    f.assert_nothing_left();
    wait_for(WAIT, "mur watch to end with the boss", || {
        watch.try_wait().unwrap()
    });
    let shown = text(&watch.wait_with_output().unwrap().stdout);
    let dlg = start["delegation_id"].as_str().unwrap();
    for want in [
        format!("session {}", top.sid),
        "turn 1: tool_call -> delegate-task".to_string(),
        "tool delegate-task ok".to_string(),
        format!("delegation to victim@{V} ({dlg}) child {child}"),
        format!("! delegation to victim@{V} ({dlg}) child {child} in "),
        "session ended".to_string(),
    ] {
        assert!(shown.contains(&want), "want {want:?} in\n{shown}");
    }
    assert!(shown.contains(": terminated\n"), "{shown}");
    assert!(
        shown.lines().any(|l| l.contains(" turn 2 ")),
        "progress counts the turns: {shown}"
    );
    assert!(ps(&f).is_empty(), "a session is still listed: {:#?}", ps(&f));

    // Ended as SIGTERM ends it: the child recorded by the launcher, posted to nobody.
    let (raw, c) = wait_for(WAIT, "the victim's completion.json", || f.completion(&child));
    assert_eq!(c["delivered"], false, "{raw}");
    assert_launcher_completion(&c, &raw, &start, &child, &dir, "terminated");
    assert_closed(&f.trace(&top.sid), &start, &child, "terminated");
}
