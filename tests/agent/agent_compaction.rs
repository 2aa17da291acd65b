//! Context compaction through the real `mur run` against the mock provider (turn n reports
//! 10·n input and 5 output tokens, so turn n "costs" 10·n + 5): the `on-compaction` hook
//! fires after the first tool turn whose tokens reach `threshold × context.max_tokens`, and
//! not before; the next request carries the compacted history (the task, the summary, the
//! kept tail, no orphan or altered tool message); compaction is not a turn. With no hook
//! bound the history is kept and the bootstrap log says so; a compaction hook that fails
//! ends the task failed with no further request.

use crate::common;

use common::agent::{
    events, hook_entry, hook_example, hook_log_lines, log_text, publish_hook, publish_zip, request_messages,
    Drv, Run, Spec, World,
};
use common::provider::{tool_results, Provider, Step};
use serde_json::{json, Value};

const TASK: &str = "compact me";

/// A tool turn running `echo NAME` under call id `id`.
fn echo(id: &str, name: &str) -> Step {
    Step::tool(id, "bash", json!({"command": format!("echo {name}")}))
}

/// A capsule with `artifacts`, `context.max_tokens: max` and
/// `inference.compaction.threshold: threshold`, run on four tool turns then an answer.
fn compacting_run(w: &World, p: &Provider, artifacts: Vec<String>, max: u64, threshold: &str) -> Run {
    let mut spec = Spec::new(Drv::OpenAi, p);
    spec.max_turns = 6;
    spec.artifacts = artifacts;
    spec.inference_extra = format!("  compaction: {{threshold: {threshold}}}\n");
    w.manifest_text(&format!("{}context: {{max_tokens: {max}}}\n", spec.yaml()));
    w.run(TASK, &[])
}

fn four_tool_turns() -> Vec<Step> {
    vec![
        echo("c1", "one"),
        echo("c2", "two"),
        echo("c3", "three"),
        echo("c4", "four"),
        Step::text("compacted done"),
    ]
}

/// The messages of a request but the system prompt.
fn conversation(req: &common::provider::Recorded) -> Vec<Value> {
    request_messages(req)
        .into_iter()
        .filter(|m| m["role"] != "system")
        .collect()
}

/// The ids of the tool calls the assistant messages of `messages` made.
fn call_ids(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn compaction_fires_at_the_first_crossing_and_the_next_request_carries_the_compacted_history() {
    let w = World::new("compact-fires");
    publish_zip(&w.reg, &hook_example("murmur-hook-compact"));
    publish_hook(&w.reg, "hook-recorder");
    let p = Provider::start(four_tool_turns());
    // 90 × 0.5 = 45: turns 1-3 (15, 25, 35) stay below; turn 4 (45) reaches it exactly.
    let artifacts = vec![
        hook_entry("murmur-hook-compact", None),
        hook_entry("hook-recorder", Some("{filesystem: {scope: hook-state}}")),
    ];
    let run = compacting_run(&w, &p, artifacts, 90, "0.5");
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "compacted done\n");

    let all = w.trace(&sid);
    let compactions = events(&all, "compaction");
    assert_eq!(compactions.len(), 1, "{all:?}");
    assert_eq!(compactions[0]["turn"], 4);
    assert_eq!(compactions[0]["tokens_before"], 45);
    assert!(
        compactions[0]["tokens_after"].as_u64().is_some_and(|t| t > 0),
        "{}",
        compactions[0]
    );
    let kinds = common::agent::kinds(&all);
    let at = kinds.iter().position(|k| k == "compaction").unwrap();
    assert_eq!(
        &kinds[at - 2..at + 2],
        ["tool_call", "shell", "compaction", "inference"],
        "{kinds:?}"
    );
    // Compaction is not a turn: five requests, five turns.
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 5);
    let turns: Vec<&Value> = events(&all, "inference").iter().map(|e| &e["turn"]).collect();
    assert_eq!(turns, [&json!(1), &json!(2), &json!(3), &json!(4), &json!(5)]);
    let end = events(&all, "task_end")[0];
    assert_eq!((&end["turns"], &end["exit_status"]), (&json!(5), &json!("ok")));
    assert!(events(&all, "hook_error").is_empty(), "{all:?}");

    // Up to turn 4 every request replays the whole history: the task and two messages a turn.
    for (k, r) in reqs.iter().enumerate().take(4) {
        assert_eq!(conversation(r).len(), 1 + 2 * k, "request {}", k + 1);
    }
    // Turn 5: the task, the summary of the four dropped messages, then the last four kept.
    let before = conversation(&reqs[3]);
    let after = conversation(&reqs[4]);
    assert_eq!(after.len(), 6, "{after:#?}");
    assert!(
        after.len() < before.len() + 2,
        "fewer messages than the 10 of the full history"
    );
    assert_eq!(after[0], json!({"role": "user", "content": TASK}));
    assert_eq!(after[1]["role"], "user");
    let summary = after[1]["content"].as_str().unwrap();
    assert!(
        summary.starts_with(
            "[compacted: 4 earlier messages summarised] assistant: [tool_call bash] | tool: $ bash echo one"
        ),
        "{summary}"
    );
    assert!(summary.contains(" | tool: $ bash echo two"), "{summary}");
    let roles: Vec<&str> = after[2..].iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["assistant", "tool", "assistant", "tool"]);
    assert_eq!(call_ids(&after), ["c3", "c4"]);
    // No orphan tool message, and each kept one exactly as the shell produced it.
    for m in after.iter().filter(|m| m["role"] == "tool") {
        let id = m["tool_call_id"].as_str().unwrap();
        assert!(
            call_ids(&after).iter().any(|c| c == id),
            "orphan tool message {m}"
        );
    }
    assert_eq!(after[2], before[5], "the turn-3 assistant message as it was");
    assert_eq!(after[3], before[6], "the turn-3 tool message as it was");
    let result = |id: &str, word: &str| json!({"role": "tool", "tool_call_id": id, "content": format!("$ bash echo {word}\nexit code: 0\n--- stdout ---\n{word}\n--- stderr ---\n")});
    assert_eq!(after[3], result("c3", "three"));
    assert_eq!(after[5], result("c4", "four"));
    let all_results = tool_results(&reqs[3]);
    assert_eq!(all_results.len(), 3);
    let mut kept = all_results[2..].to_vec();
    kept.push("$ bash echo four\nexit code: 0\n--- stdout ---\nfour\n--- stderr ---\n".into());
    assert_eq!(
        tool_results(&reqs[4]),
        kept,
        "the results of c1 and c2 are summarised away"
    );

    // The hook saw the whole history: the task and four turns of two messages.
    let log = std::fs::read_to_string(w.workdir(&sid).join("hook-state/events.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let c = lines.iter().position(|l| l.starts_with("compaction ")).unwrap();
    assert_eq!(lines[c], "compaction messages=9 tokens=45 threshold=0.5", "{log}");
    assert!(
        lines[c - 1].starts_with("shell name=bash outcome=ok turn=4 "),
        "{log}"
    );
    assert_eq!(
        lines[c + 1],
        "inference turn=5 decision=end_turn input_tokens=50 output_tokens=5"
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("compaction ")).count(),
        1,
        "{log}"
    );
}

#[test]
fn with_no_compaction_hook_the_history_is_kept_and_the_bootstrap_log_says_so() {
    let w = World::new("compact-none");
    let p = Provider::start(four_tool_turns());
    let run = compacting_run(&w, &p, Vec::new(), 90, "0.5");
    run.assert_ok();
    let sid = run.sid();
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 5);
    for (k, r) in reqs.iter().enumerate() {
        assert_eq!(conversation(r).len(), 1 + 2 * k, "request {}", k + 1);
    }
    assert!(events(&w.trace(&sid), "compaction").is_empty());
    let boot = log_text(&w, &sid, "bootstrap.log");
    let warnings: Vec<&str> = boot.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(
        warnings,
        ["warning: turn 4: 45 tokens reach inference.compaction.threshold of context.max_tokens (90), but no hook is bound to on-compaction; the history is kept"],
        "{boot}"
    );
}

#[test]
fn a_failing_compaction_hook_ends_the_task_failed_with_no_further_request() {
    let w = World::new("compact-error");
    publish_hook(&w.reg, "hook-compact-error");
    let p = Provider::start(vec![echo("c1", "one"), Step::text("never asked")]);
    // 100 × 0.1 = 10: turn 1 (15) reaches it.
    let run = compacting_run(&w, &p, vec![hook_entry("hook-compact-error", None)], 100, "0.1");
    let error = "compaction hook hook-compact-error failed: the hook returned an error: compaction refused";
    run.assert_failed(error);
    let sid = run.sid();
    assert_eq!(w.result(&sid), format!("error: {error}\n"));
    assert_eq!(
        p.model_requests().len(),
        1,
        "no request after the failed compaction"
    );
    assert_eq!(p.remaining(), 1);
    assert_eq!(
        hook_log_lines(&w, &sid, "hook-compact-error"),
        ["on-compaction: the hook returned an error: compaction refused"]
    );
    let all = w.trace(&sid);
    let errs = events(&all, "hook_error");
    assert_eq!(errs.len(), 1, "{all:?}");
    assert_eq!(errs[0]["hook_name"], "hook-compact-error");
    assert_eq!(errs[0]["binding"], "on-compaction");
    assert_eq!(errs[0]["error"], "the hook returned an error: compaction refused");
    assert!(events(&all, "compaction").is_empty());
    assert_eq!(events(&all, "tool_call").len(), 1, "the turn's tool ran before");
    let end = events(&all, "task_end")[0];
    assert_eq!(
        (&end["exit_status"], &end["turns"]),
        (&json!("failed"), &json!(1))
    );
    assert_eq!(events(&all, "session_end")[0]["exit_status"], "failed");
}

/// A compaction hook that rewrites tool results (`hook-compact-forge`: every tool message's
/// content becomes "FORGED" but the last, returned unchanged) cannot put words in a tool's
/// mouth: the rewritten tool messages are absent from the next request, the unchanged one
/// is there as it was.
#[test]
fn a_tool_message_the_hook_modified_is_dropped_and_an_unchanged_one_kept() {
    let w = World::new("compact-forge");
    publish_zip(
        &w.reg,
        &common::capsule::repo("tests/fixtures/hooks/hook-compact-forge/hook-compact-forge-1.0.0.mur.zip"),
    );
    let p = Provider::start(four_tool_turns());
    let run = compacting_run(&w, &p, vec![hook_entry("hook-compact-forge", None)], 90, "0.5");
    run.assert_ok();
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 5);
    let after = conversation(&reqs[4]);
    let text = serde_json::to_string(&after).unwrap();
    assert!(!text.contains("FORGED"), "{after:#?}");
    let tools: Vec<&Value> = after.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(
        tools.len(),
        1,
        "only the unchanged tool message survives: {after:#?}"
    );
    assert_eq!(tools[0]["tool_call_id"], "c4");
    assert_eq!(
        tool_results(&reqs[4]),
        ["$ bash echo four\nexit code: 0\n--- stdout ---\nfour\n--- stderr ---\n"],
        "the kept tool message is byte-identical"
    );
}

/// An observer that fails at every event (bound to nothing, `commit_policy: none`) is not
/// the compactor: its failure at on-compaction is traced, and the compaction it did not do
/// still happens.
#[test]
fn an_observer_failing_at_compaction_does_not_fail_the_task() {
    let w = World::new("compact-observer");
    publish_zip(&w.reg, &hook_example("murmur-hook-compact"));
    common::agent::publish_hook_as(&w.reg, "failing-observer", "hook-error", "commit_policy: none\n");
    let p = Provider::start(four_tool_turns());
    let artifacts = vec![
        hook_entry("murmur-hook-compact", None),
        hook_entry("failing-observer", None),
    ];
    let run = compacting_run(&w, &p, artifacts, 90, "0.5");
    run.assert_ok();
    let sid = run.sid();
    let all = w.trace(&sid);
    assert_eq!(events(&all, "compaction").len(), 1, "{all:?}");
    let failures = events(&all, "hook_error");
    assert!(
        failures
            .iter()
            .any(|e| e["binding"] == "on-compaction" && e["hook_name"] == "failing-observer"),
        "{failures:?}"
    );
    assert_eq!(p.model_requests().len(), 5);
}
