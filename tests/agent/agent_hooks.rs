//! Hooks through the real `mur run` against the mock provider: a recording hook (blocking
//! and async) writes one line per session event in its granted scope, in order; each
//! invalid hook contract is refused at launch; `write-manifests` takes effect on `on-stage`
//! only; a hook that traps, runs past its deadline or returns an error is logged and the
//! session still ends ok.

use crate::common;

use common::agent::{
    events, hook_entry, hook_log_lines, log_text, publish_hook, publish_hook_as, publish_zip, Drv, Spec,
    World,
};
use common::capsule::repo;
use common::provider::{Provider, Step};
use serde_json::{json, Value};
use std::time::Duration;

/// The description and parameters of tool `name` in an OpenAI-format model request.
fn offered_tool(req: &common::provider::Recorded, name: &str) -> Option<(Value, Value)> {
    let body = req.json.as_ref()?;
    body["tools"].as_array()?.iter().find_map(|t| {
        (t["function"]["name"] == name).then(|| {
            (
                t["function"]["description"].clone(),
                t["function"]["parameters"].clone(),
            )
        })
    })
}

/// The names of the tools an OpenAI-format model request offered, in order.
fn offered_names(req: &common::provider::Recorded) -> Vec<String> {
    req.json.as_ref().unwrap()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_string())
        .collect()
}

/// `events.log` lines with the (timing dependent) `ms=N` of a call line made `ms=_`.
fn normalised(log: &str) -> Vec<String> {
    log.lines()
        .map(|l| match l.rfind(" ms=") {
            Some(at) if l[at + 4..].bytes().all(|b| b.is_ascii_digit()) && l.len() > at + 4 => {
                format!("{} ms=_", &l[..at])
            }
            _ => l.to_string(),
        })
        .collect()
}

#[test]
fn a_recording_hook_bound_to_nothing_writes_one_line_per_session_event_in_order() {
    let w = World::new("hooks-record");
    publish_hook(&w.reg, "hook-recorder");
    publish_hook(&w.reg, "hook-async-recorder");
    publish_zip(&w.reg, &repo("tests/fixtures/echo-tool/echo-tool-1.0.0.mur.zip"));
    let p = Provider::start(vec![
        Step::Tools(vec![
            ("c1".into(), "echo-tool".into(), json!({"text": "ping"})),
            ("c2".into(), "bash".into(), json!({"command": "echo hi; exit 3"})),
        ]),
        Step::text("finished"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec![
        "{name: echo-tool, version: 1.0.0, runtime: tool}".into(),
        hook_entry("hook-recorder", Some("{filesystem: {scope: hook-state}}")),
        hook_entry("hook-async-recorder", Some("{filesystem: {scope: async/state}}")),
    ];
    w.manifest(&spec);
    let task = "record me";
    let run = w.run(task, &[]);
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "finished\n");

    let all = w.trace(&sid);
    let task_id = events(&all, "task_start")[0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    let context_id = events(&all, "task_start")[0]["context_id"]
        .as_str()
        .unwrap()
        .to_string();
    let want = [
        "session-start".to_string(),
        format!(
            "task-start task={task_id} context={context_id} source=file bytes={}",
            task.len()
        ),
        "inference turn=1 decision=tool_call input_tokens=10 output_tokens=5".into(),
        "tool-call name=echo-tool outcome=ok turn=1 ms=_".into(),
        "shell name=bash outcome=ok turn=1 exit=3 ms=_".into(),
        "inference turn=2 decision=end_turn input_tokens=20 output_tokens=5".into(),
        format!(
            "task-end status=ok turns=2 task={task_id} result_bytes={}",
            "finished".len()
        ),
        "session-end".into(),
    ];
    let work = w.workdir(&sid);
    // The blocking recorder, and the async one (the session waits for its queue to drain).
    for (dir, file) in [("hook-state", "events.log"), ("async/state", "async-events.log")] {
        let log = std::fs::read_to_string(work.join(dir).join(file))
            .unwrap_or_else(|e| panic!("{dir}/{file}: {e}"));
        assert_eq!(normalised(&log), want, "{dir}/{file}:\n{log}");
        let mut names: Vec<String> = std::fs::read_dir(work.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, [file], "the scope holds the hook's file only");
    }
    assert!(!work.join("events.log").exists() && !work.join("async-events.log").exists());
    for hook in ["hook-recorder", "hook-async-recorder"] {
        assert!(
            hook_log_lines(&w, &sid, hook).is_empty(),
            "{hook}: {:?}",
            hook_log_lines(&w, &sid, hook)
        );
    }
    assert!(events(&all, "hook_error").is_empty(), "{all:?}");
    // Hooks are not tools: the model is offered the tool and the shell binary only.
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(offered_names(&reqs[0]), ["echo-tool", "bash"]);
    assert_eq!(
        events(&all, "session_start")[0]["tools_declared"],
        json!(["echo-tool", "bash"])
    );
}

#[test]
fn each_invalid_hook_contract_is_refused_at_launch_before_any_session() {
    let w = World::new("hooks-invalid");
    let p = Provider::start(Vec::new());
    // (hook name, its contract, the key named, the reason)
    let table = [
        (
            "async-replace",
            "binding: on-compaction\nexecution_mode: async\ncommit_policy: replace-context\n",
            "execution_mode",
            "async is only valid with commit_policy: none, not replace-context",
        ),
        (
            "async-manifests",
            "execution_mode: async\ncommit_policy: write-manifests\n",
            "execution_mode",
            "async is only valid with commit_policy: none, not write-manifests",
        ),
        (
            "async-reopen",
            "binding: on-task-end\nexecution_mode: async\ncommit_policy: reopen-task\n",
            "execution_mode",
            "async is only valid with commit_policy: none, not reopen-task",
        ),
        (
            "async-stage",
            "binding: on-stage\nexecution_mode: async\ncommit_policy: none\n",
            "execution_mode",
            "on-stage must be blocking",
        ),
        (
            "bad-binding",
            "binding: on-lunch\n",
            "binding",
            "unknown binding 'on-lunch'",
        ),
        (
            "list-binding",
            "binding: [on-stage]\n",
            "binding",
            "expected a string",
        ),
        (
            "bad-mode",
            "execution_mode: sometimes\n",
            "execution_mode",
            "unknown value 'sometimes'",
        ),
        (
            "bad-policy",
            "commit_policy: everything\n",
            "commit_policy",
            "unknown value 'everything'",
        ),
    ];
    for (name, contract, key, why) in table {
        publish_hook_as(&w.reg, name, "hook-noop", contract);
        let mut spec = Spec::new(Drv::OpenAi, &p);
        spec.artifacts = vec![hook_entry(name, Some("{filesystem: {scope: hook-state}}"))];
        w.manifest(&spec);
        let run = w.run("never runs", &[]);
        assert_eq!(run.code(), Some(1), "{name}: {}", run.both());
        let want = format!("error[E-MAN-003]: hook {name}: invalid hook config for '{key}': ");
        assert!(
            run.stderr().starts_with(&want),
            "{name}: want {want:?}\n{}",
            run.both()
        );
        let first = run.stderr().lines().next().unwrap_or_default().to_string();
        assert!(first.contains(why), "{name}: want {why:?} in {first:?}");
        assert!(!run.stdout().contains("session:"), "{name}: {}", run.both());
        w.assert_no_session();
    }
    assert!(p.requests().is_empty(), "no model request for a refused capsule");
}

#[test]
fn write_manifests_is_committed_on_stage_for_allowed_binaries_only() {
    let w = World::new("hooks-stage");
    publish_hook(&w.reg, "hook-stage-manifests");
    let p = Provider::start(vec![Step::text("done")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.shell = vec!["bash".into(), "cat".into()];
    spec.artifacts = vec![hook_entry("hook-stage-manifests", None)];
    w.manifest(&spec);
    let run = w.run("look at the tools", &[]);
    run.assert_ok();
    let sid = run.sid();
    let work = w.workdir(&sid);
    for b in ["bash", "cat"] {
        let text = std::fs::read_to_string(work.join(format!("tools/{b}/murmur.yaml")))
            .unwrap_or_else(|e| panic!("tools/{b}/murmur.yaml: {e}"));
        assert!(
            text.contains(&format!("description: \"Staged by hook: {b}\"")),
            "{text}"
        );
    }
    assert!(
        !work.join("tools/not-allowed").exists(),
        "a binary outside shell.allow"
    );
    let boot = log_text(&w, &sid, "bootstrap.log");
    assert!(
        boot.contains(
            "hook hook-stage-manifests: manifest for 'not-allowed' ignored: not in capabilities.shell.allow"
        ),
        "{boot}"
    );
    // The staged description and schema are what the model is offered for each binary.
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 1);
    for b in ["bash", "cat"] {
        let (desc, params) = offered_tool(&reqs[0], b).unwrap_or_else(|| panic!("{b} not offered"));
        assert_eq!(desc, format!("Staged by hook: {b}"));
        assert_eq!(
            params,
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
        );
    }
    assert!(offered_tool(&reqs[0], "not-allowed").is_none());
}

#[test]
fn write_manifests_on_another_binding_is_accepted_and_has_no_effect() {
    let w = World::new("hooks-stage-late");
    // The stage fixture's component, bound where a write-manifests answer cannot be honoured.
    publish_hook_as(
        &w.reg,
        "late-manifests",
        "hook-stage-manifests",
        "binding: on-session-start\nexecution_mode: blocking\ncommit_policy: write-manifests\n",
    );
    let p = Provider::start(vec![Step::text("done")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec![hook_entry("late-manifests", None)];
    w.manifest(&spec);
    let run = w.run("look at the tools", &[]);
    run.assert_ok();
    let sid = run.sid();
    assert!(!w.workdir(&sid).join("tools/bash").exists(), "nothing staged");
    let reqs = p.model_requests();
    let (desc, params) = offered_tool(&reqs[0], "bash").unwrap();
    assert_eq!(
        desc,
        "Run bash in the capsule's working directory, contained; returns the exit code, stdout and stderr"
    );
    assert_eq!(params["required"], json!(["command"]));
    assert!(
        params["properties"]["command"]["description"].is_string(),
        "the default schema: {params}"
    );
    assert!(hook_log_lines(&w, &sid, "late-manifests").is_empty());
    assert!(events(&w.trace(&sid), "hook_error").is_empty());
}

#[test]
fn write_manifests_on_another_binding_is_noted_in_the_bootstrap_log() {
    let w = World::new("hooks-stage-note");
    publish_hook_as(
        &w.reg,
        "late-manifests",
        "hook-stage-manifests",
        "binding: on-task-end\nexecution_mode: blocking\ncommit_policy: write-manifests\n",
    );
    let p = Provider::start(vec![Step::text("done")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec![hook_entry("late-manifests", None)];
    w.manifest(&spec);
    let run = w.run("look at the tools", &[]);
    run.assert_ok();
    let boot = log_text(&w, &run.sid(), "bootstrap.log");
    assert!(
        boot.lines().any(|l| l.contains("late-manifests")
            && l.contains("write-manifests")
            && l.contains("on-task-end")),
        "a note says the policy has no effect on on-task-end:\n{boot}"
    );
}

/// A capsule with hook fixture `hook` (bound `on-session-start`) and the capsule deadline
/// `deadline`; the run, which must end ok with one line in the hook's log and one
/// `hook_error` trace event; the error text.
fn failing_hook(label: &str, hook: &str, deadline: Option<u64>) -> (String, Duration) {
    let w = World::new(label);
    publish_hook(&w.reg, hook);
    let p = Provider::start(vec![Step::text("all good")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.deadline_seconds = deadline;
    spec.artifacts = vec![hook_entry(hook, None)];
    w.manifest(&spec);
    let run = w.run("carry on", &[]);
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "all good\n");
    assert_eq!(p.model_requests().len(), 1, "the task ran after the failure");
    let lines = hook_log_lines(&w, &sid, hook);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let error = lines[0]
        .strip_prefix("on-session-start: ")
        .unwrap_or_else(|| panic!("{lines:?}"))
        .to_string();
    let all = w.trace(&sid);
    let errs = events(&all, "hook_error");
    assert_eq!(errs.len(), 1, "{all:?}");
    assert_eq!(errs[0]["hook_name"], hook);
    assert_eq!(errs[0]["binding"], "on-session-start");
    assert_eq!(errs[0]["error"], error.as_str());
    // hook_error comes between session_start and task_start.
    let kinds = common::agent::kinds(&all);
    assert_eq!(
        kinds[..3],
        ["session_start", "hook_error", "task_start"],
        "{kinds:?}"
    );
    assert_eq!(events(&all, "session_end")[0]["exit_status"], "ok");
    (error, run.elapsed)
}

#[test]
fn a_trapping_hook_is_logged_and_the_session_ends_ok() {
    let (error, _) = failing_hook("hooks-trap", "hook-trap", None);
    assert!(error.starts_with("guest trapped ("), "{error}");
}

#[test]
fn a_hook_returning_an_error_is_logged_and_the_session_ends_ok() {
    let (error, _) = failing_hook("hooks-error", "hook-error", None);
    assert_eq!(error, "the hook returned an error: deliberate failure");
}

#[test]
fn a_hook_blocked_past_its_deadline_is_cut_at_it_and_the_session_ends_ok() {
    let (error, elapsed) = failing_hook("hooks-sleep", "hook-sleep", Some(2));
    assert!(
        error.contains("deadline of 2 s exceeded, blocked in a host call"),
        "{error}"
    );
    assert!(elapsed >= Duration::from_secs(2), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(15),
        "cut at 2 s, not at the 30 s default: {elapsed:?}"
    );
}

/// A hook's own entry may lower its deadline below the capsule's (never raise it): a
/// sleeping hook granted `limits: {deadline_seconds: 1}` is cut after about a second while
/// the capsule keeps the 30 s hook default.
#[test]
fn a_hook_entry_lowers_its_own_deadline() {
    let w = World::new("hooks-own-deadline");
    publish_hook(&w.reg, "hook-sleep");
    let p = Provider::start(vec![Step::text("all good")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec![hook_entry("hook-sleep", Some("{limits: {deadline_seconds: 1}}"))];
    w.manifest(&spec);
    let run = w.run("carry on", &[]);
    run.assert_ok();
    assert!(run.elapsed < Duration::from_secs(10), "{:?}", run.elapsed);
    let lines = hook_log_lines(&w, &run.sid(), "hook-sleep");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("deadline of 1 s exceeded"), "{lines:?}");
}
