//! The parent's watch over a child that cannot report for itself: a child killed mid-task is
//! recorded `crashed` by the launcher, one past `lifecycle.delegation_deadline_secs` is ended
//! and recorded `terminated`, both posted to the parent, whose session ends cleanly; a parent
//! that is itself ended takes its live child with it (recorded, not posted). Afterwards no
//! process mentions the test's directory.

use crate::common::delegation::*;
use crate::common::provider::Provider;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// How long the mock keeps the child's model call waiting: far past every test's end.
const STUCK: Duration = Duration::from_secs(240);

/// A boss delegating to a victim whose model answer takes [`STUCK`]; the formation's roost
/// admits the boss. `boss` may add a deadline.
pub(super) fn stuck_formation(label: &str, boss: Cap) -> (Provider, Formation) {
    let p = Provider::start_responder(responder(&[
        ("boss", Plan::delegate(&[("victim", "work very slowly")])),
        ("victim", Plan::answer_after(STUCK, "OUTPUT-victim")),
    ]));
    let mut f = Formation::new(label);
    f.publish(&p, &boss);
    f.publish(&p, &Cap::leaf("victim"));
    f.start_roost(&["boss"], &[]);
    (p, f)
}

/// Wait until the victim is mid-task (its model call has reached the mock) and the boss has
/// had its delegation's result.
pub(super) fn victim_mid_task(p: &Provider, f: &Formation) {
    wait_for(FORMATION, "the victim's model call", || {
        (!requests_of(p, "victim").is_empty()).then_some(())
    });
    wait_for(WAIT, "the boss's turn after the delegation", || {
        (!results_of(p, "boss").is_empty()).then_some(())
    });
    assert!(
        f.procs().iter().any(|pr| pr.has_pair("--capsule", "victim")),
        "no victim process\n{}",
        f.dump()
    );
}

/// The boss's one started delegation: (its result, the victim's session, the victim's dir).
pub(super) fn the_delegation(p: &Provider, top: &Capsule) -> (Value, String, std::path::PathBuf) {
    let r = results_of(p, "boss");
    assert_eq!(r.len(), 1, "{r:#?}");
    let start = started(&r[0][0], "victim");
    let sid = sv(&start, "session_id").to_string();
    let dir = top.workdir.join(sv(&start, "child_workdir"));
    (start, sid, dir)
}

/// A launcher-written completion.json for an outcome with no result.
pub(super) fn assert_launcher_completion(
    c: &Value,
    raw: &str,
    start: &Value,
    sid: &str,
    dir: &Path,
    status: &str,
) {
    assert_eq!(c["delegation_id"], start["delegation_id"], "{raw}");
    assert_eq!(c["capsule_name"], "victim", "{raw}");
    assert_eq!(c["capsule_version"], V, "{raw}");
    assert_eq!(c["session_id"], json!(sid), "{raw}");
    assert_eq!(c["status"], status, "{raw}");
    assert_eq!(c["reported_by"], "launcher", "{raw}");
    // A child killed outright wrote no result; one that was stopped may have written its
    // error (then `result_path` names it).
    match c.get("result_path") {
        None => {}
        Some(r) if status != "crashed" => assert_eq!(r, "out/result.txt", "{raw}"),
        Some(_) => panic!("a crashed child wrote no result: {raw}"),
    }
    assert!(c.get("delivery_error").is_none(), "{raw}");
    assert!(c["duration_ms"].is_u64(), "{raw}");
    assert!(
        !c["detail"].as_str().unwrap_or_default().is_empty(),
        "a {status} completion carries a detail: {raw}"
    );
    assert_eq!(canonical(Path::new(sv(c, "workdir"))), canonical(dir), "{raw}");
    assert!(raw.ends_with("}\n"), "{raw:?}");
}

/// The boss's closing `delegation` line for the victim.
pub(super) fn assert_closed(trace: &[Value], start: &Value, sid: &str, status: &str) {
    let d = events_of(trace, "delegation");
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!(d[0]["status"], "started", "{}", d[0]);
    for (k, want) in [
        ("delegation_id", start["delegation_id"].clone()),
        ("capsule", json!("victim")),
        ("version", json!(V)),
        ("child_session_id", json!(sid)),
        ("status", json!(status)),
        ("reported_by", json!("launcher")),
    ] {
        assert_eq!(d[1][k], want, "{k} of {}", d[1]);
    }
}

/// The completion message the boss's model was given for the completion.json `c`: the
/// outcome, and a detail line last.
fn assert_posted(p: &Provider, start: &Value, c: &Value, dir: &Path) {
    let (sid, status) = (sv(c, "session_id"), sv(c, "status"));
    let got = completions_to(p, "boss");
    assert_eq!(got.len(), 1, "{got:#?}");
    let lines = message_lines(&got[0]);
    let want = completion_lines(
        sv(start, "delegation_id"),
        "victim",
        sid,
        status,
        &canonical(dir),
        c.get("result_path").and_then(Value::as_str),
    );
    assert_eq!(lines[..want.len()], want[..], "{lines:#?}");
    assert_eq!(lines.len(), want.len() + 1, "{lines:#?}");
    assert!(lines[want.len()].starts_with("detail: "), "{lines:#?}");
}

#[test]
fn a_child_killed_mid_task_is_recorded_crashed_and_the_parent_ends_cleanly() {
    let (p, f) = stuck_formation("dlg-crash", Cap::delegating("boss", &["victim"]));
    let mut top = f.start("boss", Some("delegate and wait"), &f.env());
    victim_mid_task(&p, &f);
    let (start, sid, dir) = the_delegation(&p, &top);
    for pr in f.procs() {
        if pr.has_pair("--capsule", "victim") {
            sigkill(pr.pid);
        }
    }
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());

    let (raw, c) = f.settled_completion(&sid, true);
    assert_launcher_completion(&c, &raw, &start, &sid, &dir, "crashed");
    assert_closed(&f.trace(&top.sid), &start, &sid, "crashed");
    assert_posted(&p, &start, &c, &dir);
    f.roost_status(&top.sid, "complete");
    f.assert_nothing_left();
}

#[test]
fn a_child_past_its_deadline_is_terminated_and_the_parent_ends_cleanly() {
    let (p, f) = stuck_formation("dlg-deadline", Cap::delegating("boss", &["victim"]).deadline(2));
    let mut top = f.start("boss", Some("delegate with a short leash"), &f.env());
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());
    assert!(
        top.started.elapsed() < STUCK,
        "the parent waited for the child's answer"
    );
    let (start, sid, dir) = the_delegation(&p, &top);

    let (raw, c) = f.settled_completion(&sid, true);
    assert_launcher_completion(&c, &raw, &start, &sid, &dir, "terminated");
    assert!(
        sv(&c, "detail").contains('2'),
        "the detail names the 2 s bound: {raw}"
    );
    assert_closed(&f.trace(&top.sid), &start, &sid, "terminated");
    assert_posted(&p, &start, &c, &dir);
    f.roost_status(&top.sid, "complete");
    f.assert_nothing_left();
}

#[test]
fn a_parent_that_is_ended_takes_its_live_child_with_it() {
    let (p, f) = stuck_formation("dlg-parent-ends", Cap::delegating("boss", &["victim"]));
    let mut top = f.start("boss", Some("delegate, then be stopped"), &f.env());
    victim_mid_task(&p, &f);
    let (start, sid, dir) = the_delegation(&p, &top);
    top.sigterm();
    assert!(
        top.wait_exit(WAIT).is_some(),
        "the parent outlived SIGTERM by {WAIT:?}\n{}",
        top.both()
    );
    f.assert_nothing_left();

    // Recorded by the launcher, posted to nobody.
    let (raw, c) = wait_for(WAIT, "the victim's completion.json", || f.completion(&sid));
    assert_eq!(c["delivered"], false, "{raw}");
    assert_launcher_completion(&c, &raw, &start, &sid, &dir, "terminated");
    assert!(completions_to(&p, "boss").is_empty(), "a completion was posted");
    assert_closed(&f.trace(&top.sid), &start, &sid, "terminated");
}

#[test]
#[cfg_attr(
    not(murmur_test_root),
    ignore = "needs root: reads the environment of a process that is not dumpable"
)]
fn a_parent_killed_outright_takes_its_live_child_with_it_and_records_the_delegation() {
    let (p, f) = stuck_formation("dlg-parent-killed", Cap::delegating("boss", &["victim"]));
    let mut top = f.start("boss", Some("delegate, then be killed"), &f.env());
    victim_mid_task(&p, &f);
    let (start, sid, dir) = the_delegation(&p, &top);
    // The child was told which directory is its own, by device and inode.
    let victim = f
        .procs()
        .into_iter()
        .find(|pr| pr.has_pair("--capsule", "victim"))
        .unwrap();
    let meta = std::fs::metadata(&dir).unwrap();
    let want = format!(
        "{}:{}",
        std::os::unix::fs::MetadataExt::dev(&meta),
        std::os::unix::fs::MetadataExt::ino(&meta)
    );
    assert_eq!(victim.env().get("MURMUR_WORKDIR_IDENTITY"), Some(&want));
    sigkill(top.pid());
    assert!(top.wait_exit(WAIT).is_some(), "the parent outlived SIGKILL");
    // Within a second no runtime of the formation runs: the parent's warden killed the
    // child (whose own warden ended what the child had started).
    let until = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        let left: Vec<String> = f
            .procs()
            .iter()
            .filter(|pr| pr.has_pair("--capsule", "victim") || pr.cmdline().contains("boss"))
            .map(Proc::cmdline)
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "still running a second after kill -9 of the parent: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // The launcher died with the parent: the warden had the delegation recorded for it,
    // `terminated`, posted to nobody.
    let (raw, c) = wait_for(WAIT, "the victim's completion.json", || f.completion(&sid));
    assert_eq!(c["delivered"], false, "{raw}");
    assert_launcher_completion(&c, &raw, &start, &sid, &dir, "terminated");
    assert!(sv(&c, "detail").contains("runtime died"), "{raw}");
    assert!(completions_to(&p, "boss").is_empty(), "a completion was posted");
}

/// A roost with `--max-live-capsules 2` whose delegating parents were killed outright twice
/// (each with its child mid-task): within 5 s of each kill it reports the parent `failed`
/// and counts nothing of that formation, and it still admits a healthy formation after.
#[test]
fn the_roost_forgets_parents_killed_outright_and_still_admits_a_healthy_formation() {
    let p = Provider::start_responder(responder(&[
        ("boss", Plan::delegate(&[("victim", "work very slowly")])),
        ("victim", Plan::answer_after(STUCK, "OUTPUT-victim")),
        ("fanout", Plan::delegate(&[("leaf", "FIRST-TASK")])),
        ("leaf", Plan::answer("OUTPUT-leaf")),
    ]));
    let mut f = Formation::new("dlg-forgets");
    f.publish(&p, &Cap::delegating("boss", &["victim"]));
    f.publish(&p, &Cap::leaf("victim"));
    f.publish(&p, &Cap::delegating("fanout", &["leaf"]));
    f.publish(&p, &Cap::leaf("leaf"));
    f.start_roost(&["boss", "fanout"], &["--max-live-capsules", "2"]);
    for round in 1..=2 {
        let mut top = f.start("boss", Some("delegate, then be killed"), &f.env());
        wait_for(FORMATION, "the victim's model call", || {
            (requests_of(&p, "victim").len() >= round).then_some(())
        });
        assert_eq!(f.roost().status(&top.sid)["live_capsules"], 2, "round {round}");
        sigkill(top.pid());
        assert!(top.wait_exit(WAIT).is_some(), "the parent outlived SIGKILL");
        let killed = std::time::Instant::now();
        loop {
            let s = f.roost().status(&top.sid);
            if s["status"] == "failed" && s["live_capsules"] == 0 {
                break;
            }
            assert!(
                killed.elapsed() < Duration::from_secs(5),
                "round {round}: the roost still counts the dead 5 s on: {s}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let mut top = f.start("fanout", Some("delegate once"), &f.env());
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());
    let r = results_of(&p, "fanout");
    assert_eq!(r.len(), 1, "{r:#?}");
    let _ = started(&r[0][0], "leaf");
    f.roost_status(&top.sid, "complete");
}
