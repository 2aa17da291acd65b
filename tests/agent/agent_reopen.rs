//! Task reopening through the real `mur run` against the mock provider: the gatekeeper
//! example reopens a result without APPROVED once, with its feedback in the fresh attempt's
//! first user message, then accepts; a hook that always reopens runs the task
//! `1 + max_task_reopens` times and ends `reopen_budget_exhausted`; `max_task_reopens: 0`
//! never reopens; turns count across attempts against `max_turns`.

use crate::common;

use common::agent::{
    events, hook_entry, hook_example, kinds, publish_hook, publish_zip, request_messages, Drv, Spec, World,
};
use common::provider::{Provider, Recorded, Step};
use serde_json::{json, Value};

/// The gatekeeper's feedback (`hooks/murmur-hook-gatekeeper/src/gate.rs`).
const GATE_FEEDBACK: &str =
    "The result does not contain the word APPROVED; revise it and include APPROVED once it is correct.";

/// The messages of a request but the system prompt.
fn conversation(req: &Recorded) -> Vec<Value> {
    request_messages(req)
        .into_iter()
        .filter(|m| m["role"] != "system")
        .collect()
}

/// The feedback suffix of reopen `n` by `hook`.
fn feedback(n: u64, hook: &str, reason: &str) -> String {
    format!("\n\nFeedback on the previous attempt (reopen {n}, from {hook}): {reason}")
}

/// A capsule with `hooks` (entries), `max_turns` and the extra `inference:` lines, run on
/// `task`.
fn reopening(
    w: &World,
    p: &Provider,
    hooks: Vec<String>,
    max_turns: u64,
    extra: &str,
    task: &str,
) -> common::agent::Run {
    let mut spec = Spec::new(Drv::OpenAi, p);
    spec.max_turns = max_turns;
    spec.artifacts = hooks;
    spec.inference_extra = extra.to_string();
    w.manifest(&spec);
    w.run(task, &[])
}

#[test]
fn the_gatekeeper_reopens_once_with_its_feedback_then_accepts() {
    let w = World::new("reopen-gate");
    publish_zip(&w.reg, &hook_example("murmur-hook-gatekeeper"));
    let p = Provider::start(vec![
        Step::text("a first draft"),
        Step::text("the final answer: APPROVED"),
        Step::text("never asked"),
    ]);
    let task = "write the answer";
    let run = reopening(
        &w,
        &p,
        vec![hook_entry("murmur-hook-gatekeeper", None)],
        3,
        "",
        task,
    );
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "the final answer: APPROVED\n");

    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(conversation(&reqs[0]), [json!({"role": "user", "content": task})]);
    // A fresh conversation: the task with the feedback, nothing of the first attempt.
    let second = format!("{task}{}", feedback(1, "murmur-hook-gatekeeper", GATE_FEEDBACK));
    assert_eq!(
        conversation(&reqs[1]),
        [json!({"role": "user", "content": second})]
    );

    let all = w.trace(&sid);
    assert_eq!(
        kinds(&all),
        [
            "session_start",
            "task_start",
            "inference",
            "task_reopened",
            "inference",
            "task_end",
            "session_end"
        ]
    );
    let task_id = &events(&all, "task_start")[0]["task_id"];
    let r = events(&all, "task_reopened")[0];
    assert_eq!(r["task_id"], *task_id);
    assert_eq!(r["hook_name"], "murmur-hook-gatekeeper");
    assert_eq!(r["reason"], GATE_FEEDBACK);
    assert_eq!(r["reopen_number"], 1);
    let end = events(&all, "task_end")[0];
    assert_eq!(end["task_id"], *task_id);
    assert_eq!(end["exit_status"], "ok");
    assert_eq!(end["reopen_count"], 1);
    assert_eq!(end["turns"], 2);
    assert_eq!(events(&all, "session_end")[0]["exit_status"], "ok");
}

#[test]
fn a_hook_that_always_reopens_exhausts_the_budget_after_exactly_three_attempts() {
    let w = World::new("reopen-always");
    publish_hook(&w.reg, "hook-reopen-always");
    let p = Provider::start(vec![
        Step::text("attempt one"),
        Step::text("attempt two"),
        Step::text("attempt three"),
        Step::text("never asked"),
    ]);
    let hooks = vec![hook_entry("hook-reopen-always", None)];
    let run = reopening(&w, &p, hooks, 10, "  max_task_reopens: 2\n", "go");
    run.assert_failed(
        "the task ended reopen_budget_exhausted: a hook still asked to reopen the task after 2 reopen(s), its whole budget (inference.max_task_reopens = 2)",
    );
    let sid = run.sid();
    assert!(
        w.result(&sid)
            .starts_with("error: a hook still asked to reopen the task"),
        "{}",
        w.result(&sid)
    );
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 3, "1 attempt + 2 reopens");
    assert_eq!(p.remaining(), 1);
    for (k, r) in reqs.iter().enumerate() {
        let c = conversation(r);
        assert_eq!(c.len(), 1, "attempt {} is a fresh conversation: {c:?}", k + 1);
        let text = c[0]["content"].as_str().unwrap();
        assert!(text.starts_with("go"), "{text}");
        if k > 0 {
            let own = feedback(k as u64, "hook-reopen-always", "try again");
            assert!(text.ends_with(&own), "attempt {}: {text:?}", k + 1);
        } else {
            assert_eq!(text, "go");
        }
    }

    let all = w.trace(&sid);
    let reopened = events(&all, "task_reopened");
    let numbers: Vec<&Value> = reopened.iter().map(|e| &e["reopen_number"]).collect();
    assert_eq!(numbers, [&json!(1), &json!(2)]);
    assert!(reopened
        .iter()
        .all(|e| e["hook_name"] == "hook-reopen-always" && e["reason"] == "try again"));
    assert_eq!(events(&all, "task_start").len(), 1);
    let end = events(&all, "task_end");
    assert_eq!(end.len(), 1);
    assert_eq!(end[0]["exit_status"], "reopen_budget_exhausted");
    assert_eq!(end[0]["reopen_count"], 2);
    assert_eq!(end[0]["turns"], 3);
    assert_eq!(
        events(&all, "session_end")[0]["exit_status"],
        "reopen_budget_exhausted"
    );
}

#[test]
fn max_task_reopens_zero_never_reopens() {
    let w = World::new("reopen-zero");
    publish_hook(&w.reg, "hook-reopen-always");
    let p = Provider::start(vec![Step::text("the only attempt"), Step::text("never asked")]);
    let hooks = vec![hook_entry("hook-reopen-always", None)];
    let run = reopening(&w, &p, hooks, 10, "  max_task_reopens: 0\n", "go");
    // The hook still asked: with no budget, that is the end of it.
    run.assert_failed("the task ended reopen_budget_exhausted");
    let sid = run.sid();
    assert_eq!(p.model_requests().len(), 1);
    let all = w.trace(&sid);
    assert!(events(&all, "task_reopened").is_empty(), "{all:?}");
    let end = events(&all, "task_end")[0];
    assert_eq!(end["reopen_count"], 0);
    assert_eq!(end["turns"], 1);
    assert_eq!(end["exit_status"], "reopen_budget_exhausted");
    assert!(w
        .result(&sid)
        .starts_with("error: a hook still asked to reopen the task"));
}

/// Max_turns 3 and a gatekeeper with five reopens: two turns in the first attempt, then the
/// second attempt's only turn is a tool call, and the turns run out after one reopen.
fn turns_run(label: &str) -> (World, Provider, common::agent::Run) {
    let w = World::new(label);
    publish_zip(&w.reg, &hook_example("murmur-hook-gatekeeper"));
    publish_hook(&w.reg, "hook-recorder");
    let p = Provider::start(vec![
        Step::tool("c1", "bash", json!({"command": "echo first"})),
        Step::text("a draft"),
        // The second attempt has one turn left of three: its tool turn is the last.
        Step::tool("c2", "bash", json!({"command": "echo second"})),
        Step::text("APPROVED, never asked"),
    ]);
    let hooks = vec![
        hook_entry("murmur-hook-gatekeeper", None),
        hook_entry("hook-recorder", Some("{filesystem: {scope: hook-state}}")),
    ];
    let run = reopening(&w, &p, hooks, 3, "  max_task_reopens: 5\n", "count the turns");
    (w, p, run)
}

#[test]
fn turns_count_across_attempts_against_max_turns() {
    let (w, p, run) = turns_run("reopen-turns");
    run.assert_failed("the task ended reopen_budget_exhausted");
    let sid = run.sid();
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 3, "3 turns in all, not 3 per attempt");
    assert_eq!(p.remaining(), 1);
    let third = conversation(&reqs[2]);
    assert_eq!(third.len(), 1, "{third:?}");
    assert!(third[0]["content"].as_str().unwrap().ends_with(&feedback(
        1,
        "murmur-hook-gatekeeper",
        GATE_FEEDBACK
    )));

    let all = w.trace(&sid);
    let turns: Vec<&Value> = events(&all, "inference").iter().map(|e| &e["turn"]).collect();
    assert_eq!(
        turns,
        [&json!(1), &json!(2), &json!(3)],
        "turn numbers go on across attempts"
    );
    assert_eq!(events(&all, "task_reopened").len(), 1);
    let end = events(&all, "task_end")[0];
    assert_eq!(end["turns"], 3);
    assert_eq!(end["reopen_count"], 1);
    assert_eq!(end["exit_status"], "reopen_budget_exhausted");
    // What the hooks saw at each attempt's end: the cumulative turns.
    let log = std::fs::read_to_string(w.workdir(&sid).join("hook-state/events.log")).unwrap();
    let ends: Vec<String> = log
        .lines()
        .filter(|l| l.starts_with("task-end "))
        .map(|l| l.split(" task=").next().unwrap().to_string())
        .collect();
    assert_eq!(
        ends,
        [
            "task-end status=ok turns=2",
            "task-end status=max_turns_reached turns=3"
        ],
        "{log}"
    );
}

#[test]
fn the_refusal_of_a_task_out_of_turns_does_not_claim_the_whole_reopen_budget() {
    let (_w, _p, run) = turns_run("reopen-turns-message");
    assert_eq!(run.code(), Some(1), "{}", run.both());
    // One reopen happened before the turns ran out; the budget was five.
    assert!(
        run.stderr()
            .contains("error[E-RUN-007]: the task ended reopen_budget_exhausted"),
        "{}",
        run.both()
    );
    assert!(
        run.stderr().contains(
            "a hook still asked to reopen the task after 1 reopen(s), but its turns ran out (inference.max_turns = 3)"
        ),
        "{}",
        run.both()
    );
}
