//! What a shell tool call starts does not outlive it: a command that leaves processes in
//! the background (in its own group, or in a new session of their own) still ends its
//! call at once, the background is killed, and the session goes on to its end.

use crate::common;

use common::agent::{assert_floor_refusal, host_backs, Drv, Spec, World};
use common::provider::{tool_results, Provider, Step};
use serde_json::json;
use std::time::Duration;

fn alive(pattern: &str) -> bool {
    let out = std::process::Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    !out.stdout.is_empty()
}

fn background_is_killed(class: &str, tag: u32) {
    let w = World::new(&format!("agent-background-{class}"));
    let (a, b) = (format!("sleep {tag}1"), format!("sleep {tag}2"));
    let p = Provider::start(vec![
        Step::tool(
            "c1",
            "bash",
            json!({"command": format!("{a} & setsid {b} & echo started")}),
        ),
        Step::text("back"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.containment = Some(class.into());
    w.manifest(&spec);
    let run = w.run("start something in the background", &[]);
    if !host_backs(class) {
        assert_floor_refusal(&run);
        return;
    }
    run.assert_ok();
    assert!(
        run.elapsed < Duration::from_secs(20),
        "the session waited for its background: {:?}",
        run.elapsed
    );
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 2);
    let result = &tool_results(&reqs[1])[0];
    assert!(result.contains("exit code: 0"), "{result}");
    assert!(result.contains("started"), "{result}");
    assert!(!alive(&a), "{a} outlived its tool call");
    assert!(!alive(&b), "{b} (its own session) outlived its tool call");
}

#[test]
fn advisory_background_processes_end_with_their_call() {
    background_is_killed("advisory", 987_650);
}

#[test]
fn scoped_background_processes_end_with_their_call() {
    background_is_killed("scoped", 987_660);
}

#[test]
fn sealed_background_processes_end_with_their_call() {
    background_is_killed("sealed", 987_670);
}

/// SIGTERM while a tool call runs: the command (and anything it started) is killed, the
/// task ends failed with the signal named, and the trace still ends.
#[test]
fn sigterm_during_a_tool_call_kills_it_and_ends_the_session() {
    use common::capsule::trace;
    let w = World::new("agent-sigterm");
    // An on-task-end hook that would block for its whole 30 s deadline: after the signal
    // it gets a few seconds only.
    common::agent::publish_hook_as(&w.reg, "sleepy-end", "hook-sleep", "binding: on-task-end\n");
    let p = Provider::start(vec![
        Step::tool("c1", "bash", json!({"command": "sleep 9876801"})),
        Step::text("never"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec![common::agent::hook_entry("sleepy-end", None)];
    w.manifest(&spec);
    let child = w.start_piped("wait");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !alive("sleep 9876801") {
        assert!(
            std::time::Instant::now() < deadline,
            "the tool call never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = w.stop(child);
    run.assert_failed("interrupted by signal 15");
    assert!(!alive("sleep 9876801"), "the tool call outlived the session");
    assert_eq!(p.model_requests().len(), 1, "no turn after the signal");
    let sid = run.sid();
    assert_eq!(w.result(&sid), "error: interrupted by signal 15\n");
    let events = trace(&w.t, &sid);
    let last = events.last().unwrap();
    assert_eq!(last["event_type"], "session_end");
    assert_eq!(last["exit_status"], "failed");
    let call = events
        .iter()
        .find(|e| e["event_type"] == "tool_call")
        .expect("the tool call is traced");
    assert_eq!(call["status"], "interrupted", "{call}");
}

/// SIGTERM while the driver waits on a model that never answers: the session ends within a
/// few seconds, not at the driver's deadline, and the result names the signal.
#[test]
fn sigterm_while_the_model_never_answers_ends_the_session_promptly() {
    use common::capsule::trace;
    let w = World::new("agent-sigterm-model");
    let p = Provider::start(vec![Step::slow(Duration::from_secs(600), Step::text("too late"))]);
    let spec = Spec::new(Drv::OpenAi, &p);
    w.manifest(&spec);
    let child = w.start_piped("wait for the model");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while p.model_requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the model was never asked");
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = w.stop(child);
    run.assert_failed("interrupted by signal 15");
    assert!(
        !run.stderr().contains("deadline"),
        "the deadline is blamed: {}",
        run.both()
    );
    let sid = run.sid();
    assert_eq!(w.result(&sid), "error: interrupted by signal 15\n");
    let events = trace(&w.t, &sid);
    let last = events.last().unwrap();
    assert_eq!(last["event_type"], "session_end", "{last}");
    assert_eq!(last["exit_status"], "failed", "{last}");
}
