//! The evaluation hook (`artifacts/murmur-hook-eval`) through the real `mur run` against the
//! mock provider: granted `records: own`, it scores the session with the scorers its entry's
//! `config` names and writes `eval.jsonl` in `hooks/murmur-hook-eval/` of the session's
//! records, which `mur eval show --session` then finds; without the grant it writes nothing,
//! its log says why and the launch warns W-RUN-005; `records: own` on anything but a hook is refused.

use crate::common;

use common::agent::{hook_example, log_text, publish_zip, Drv, Spec, World};
use common::capsule::MUR;
use common::provider::{Provider, Step};
use serde_json::{json, Value};
use std::process::Command;

const CONFIG: &str = "{scorers: {exit_ok: true, turn_limit: 1, tool_errors: 0, result_matches: done, file_exists: result.txt}, dataset_id: smoke, case_id: c1}";

fn eval_run(label: &str, entry: &str) -> (World, common::agent::Run) {
    let w = World::new(label);
    publish_zip(&w.reg, &hook_example("murmur-hook-eval"));
    let p = Provider::start(vec![
        Step::tool("c1", "no-such-tool", json!({})),
        Step::text("all done"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec![entry.to_string()];
    w.manifest(&spec);
    let run = w.run("do the work", &[]);
    (w, run)
}

#[test]
fn the_eval_hook_scores_the_session_into_its_own_records_directory() {
    let entry = format!(
        "{{name: murmur-hook-eval, version: 1.0.0, runtime: hook, records: own, capabilities: {{filesystem: {{scope: out}}}}, config: {CONFIG}}}"
    );
    let (w, run) = eval_run("eval-hook", &entry);
    run.assert_ok();
    assert!(!run.stderr().contains("W-RUN-005"), "{}", run.both());
    let sid = run.sid();
    let dir = w.records(&sid).join("hooks/murmur-hook-eval");
    let text = std::fs::read_to_string(dir.join("eval.jsonl")).unwrap_or_else(|e| {
        panic!(
            "{e}; hook log: {}",
            log_text(&w, &sid, "hook-murmur-hook-eval.log")
        )
    });
    assert!(
        !dir.join("observed.jsonl").exists(),
        "the hook's working file stays behind"
    );
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let brief: Vec<(String, String, String)> = lines
        .iter()
        .filter(|l| l["type"] == "event_score")
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap_or("").to_string();
            (s("scorer"), s("result"), s("reason"))
        })
        .collect();
    let own = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        brief,
        [
            own("exit_ok", "pass", "the task ended ok"),
            own("turn_limit", "fail", "2 turns (at most 1)"),
            own("result_matches", "pass", "the result contains \"done\""),
            own(
                "tool_errors",
                "fail",
                "1 failed tool calls (at most 0): no-such-tool"
            ),
            own("file_exists", "pass", "result.txt exists"),
        ],
        "{text}"
    );
    let run_line = lines.last().unwrap();
    assert_eq!(run_line["type"], "dataset_run");
    assert_eq!(
        (
            run_line["dataset_id"].as_str(),
            run_line["case_id"].as_str(),
            run_line["overall"].as_str()
        ),
        (Some("smoke"), Some("c1"), Some("fail"))
    );
    assert_eq!(
        run_line["scores"],
        json!({"exit_ok": 1.0, "turn_limit": 0.0, "result_matches": 1.0, "tool_errors": 0.0, "file_exists": 1.0})
    );

    // `mur eval show --session` finds it where the hook wrote it.
    let out = Command::new(MUR)
        .args(["eval", "show", "--json", "--session", &sid])
        .env("MURMUR_RECORDS_DIR", w.t.path().join("records"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["scorers"]["turn_limit"]["pass_rate"], 0.0);
    assert_eq!(v["datasets"]["smoke"]["fail"], 1);
}

#[test]
fn without_a_records_grant_the_eval_hook_writes_nothing_and_says_why() {
    let entry = format!("{{name: murmur-hook-eval, version: 1.0.0, runtime: hook, config: {CONFIG}}}");
    let (w, run) = eval_run("eval-hook-nogrant", &entry);
    run.assert_ok();
    // The launch says so, not only the hook's log.
    assert!(
        run.stderr().contains(
            "warning[W-RUN-005]: hook murmur-hook-eval is declared without a records directory: it writes its scores (eval.jsonl) there, so this session will not be scored\n  hint: add `records: own` to its entry (artifacts[murmur-hook-eval])"
        ),
        "{}",
        run.both()
    );
    let sid = run.sid();
    assert!(!w.records(&sid).join("hooks").exists());
    let log = log_text(&w, &sid, "hook-murmur-hook-eval.log");
    assert!(
        log.contains("murmur-hook-eval has no records directory to write: grant its entry `records: own`"),
        "{log}"
    );
}

#[test]
fn a_records_grant_is_for_hooks_only() {
    let w = World::new("eval-grant-tool");
    let p = Provider::start(vec![Step::text("never asked")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec!["{name: some-tool, version: 1.0.0, runtime: tool, records: own}".into()];
    w.manifest(&spec);
    let run = w.run("x", &[]);
    assert_eq!(run.code(), Some(1), "{}", run.both());
    assert!(
        run.stderr().starts_with(
            "error[E-MAN-003]: murmur.yaml: invalid artifact config for 'artifacts[1].records': only a hook entry may be granted a records directory"
        ),
        "{}",
        run.both()
    );
}
