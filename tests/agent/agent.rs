//! Agent capsules through the real `mur run` against the mock provider: a three-turn shell
//! task, `max_turns` and an unknown tool with both real drivers; each level of the tool
//! dispatch precedence; the trace of a two-turn task, event by event; a shell stream cut at
//! the records' cap, named in its `tool_call` event.

use crate::common;

use common::agent::{
    events, keys, kinds, publish_native, publish_skill, publish_zip, Drv, Spec, World, MODEL,
};
use common::capsule::repo;
use common::provider::{tool_results, usage_for, Provider, Step};
use serde_json::{json, Value};

fn call(id: &str, name: &str, input: Value) -> Step {
    Step::tool(id, name, input)
}

/// The names of the tools a model request offered, in either wire format.
fn offered(req: &common::provider::Recorded) -> Vec<String> {
    let body = req.json.as_ref().expect("a JSON request");
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t.pointer("/function/name")
                        .or_else(|| t.get("name"))
                        .and_then(Value::as_str)
                        .unwrap_or("?")
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn three_turn_shell_task(drv: Drv) {
    let w = World::new("agent-three");
    let p = Provider::start(vec![
        call("c1", "bash", json!({"command": "echo shell-says-$((6 * 7))"})),
        call("c2", "cat", json!({"command": "cat task.md"})),
        Step::text("all done: 42"),
    ]);
    let mut spec = Spec::new(drv, &p);
    spec.shell = vec!["bash".into(), "cat".into()];
    w.manifest(&spec);
    let run = w.run("find the answer", &[]);
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "all done: 42\n");

    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 3, "{drv:?}");
    assert!(tool_results(&reqs[0]).is_empty());
    let first = tool_results(&reqs[1]);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(
        first[0],
        "$ bash echo shell-says-$((6 * 7))\nexit code: 0\n--- stdout ---\nshell-says-42\n--- stderr ---\n"
    );
    let second = tool_results(&reqs[2]);
    assert_eq!(second.len(), 2, "{second:?}");
    assert_eq!(second[0], first[0], "the history is replayed");
    assert_eq!(
        second[1],
        "$ cat task.md\nexit code: 0\n--- stdout ---\nfind the answer\n--- stderr ---\n"
    );
    for r in &reqs {
        let mut tools = offered(r);
        tools.sort();
        assert_eq!(tools, ["bash", "cat"], "{drv:?}");
        let (header, value) = drv.auth();
        assert_eq!(r.header(header), Some(value.as_str()), "{drv:?}");
        assert!(r.text().contains("find the answer"));
        assert!(
            r.text().contains(&format!("session_id: {sid}")),
            "the identity block is in the system prompt"
        );
    }

    let all = w.trace(&sid);
    let inference = events(&all, "inference");
    assert_eq!(inference.len(), 3);
    for (i, e) in inference.iter().enumerate() {
        let (input, output) = usage_for(i as u64 + 1);
        assert_eq!(e["input_tokens"], input);
        assert_eq!(e["output_tokens"], output);
    }
    let calls = events(&all, "tool_call");
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c["kind"] == "shell" && c["status"] == "ok"));
    let end = events(&all, "task_end")[0];
    assert_eq!(end["exit_status"], "ok");
    assert_eq!(end["turns"], 3);
    assert_eq!(end["input_tokens"], 60);
    assert_eq!(end["output_tokens"], 15);
    assert_eq!(
        std::fs::read_to_string(w.records(&sid).join("logs/shell-1.stdout")).unwrap(),
        "shell-says-42\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.records(&sid).join("logs/shell-2.stdout")).unwrap(),
        "find the answer"
    );
    // A stream that said nothing leaves no file (it is made at its first byte).
    for silent in ["logs/shell-1.stderr", "logs/shell-2.stderr"] {
        assert!(!w.records(&sid).join(silent).exists(), "{silent}");
    }
}

#[test]
fn openai_three_turn_shell_task() {
    three_turn_shell_task(Drv::OpenAi);
}

#[test]
fn anthropic_three_turn_shell_task() {
    three_turn_shell_task(Drv::Anthropic);
}

fn max_turns_reached(drv: Drv) {
    let w = World::new("agent-maxturns");
    let p = Provider::start(vec![
        call("c1", "bash", json!({"command": "echo one"})),
        call("c2", "bash", json!({"command": "echo two"})),
        call("c3", "bash", json!({"command": "echo three"})),
        Step::text("never reached"),
    ]);
    let mut spec = Spec::new(drv, &p);
    spec.max_turns = 2;
    w.manifest(&spec);
    let run = w.run("loop forever", &[]);
    run.assert_failed("the task reached inference.max_turns (2) before the model finished");
    let sid = run.sid();
    assert_eq!(p.model_requests().len(), 2, "{drv:?}");
    assert_eq!(
        w.result(&sid),
        "error: the task reached inference.max_turns (2) before the model finished\n"
    );
    let all = w.trace(&sid);
    assert_eq!(events(&all, "inference").len(), 2);
    assert_eq!(events(&all, "tool_call").len(), 2);
    let end = events(&all, "task_end")[0];
    assert_eq!(end["exit_status"], "max_turns_reached");
    assert_eq!(end["turns"], 2);
    assert_eq!(events(&all, "session_end")[0]["exit_status"], "max_turns_reached");
}

#[test]
fn openai_max_turns_is_exactly_that_many_requests() {
    max_turns_reached(Drv::OpenAi);
}

#[test]
fn anthropic_max_turns_is_exactly_that_many_requests() {
    max_turns_reached(Drv::Anthropic);
}

fn unknown_tool_fed_back(drv: Drv) {
    let w = World::new("agent-unknown");
    let p = Provider::start(vec![
        call("c1", "teleport", json!({"to": "mars"})),
        Step::text("recovered"),
    ]);
    w.manifest(&Spec::new(drv, &p));
    let run = w.run("go", &[]);
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "recovered\n");
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        tool_results(&reqs[1]),
        ["error: unknown tool 'teleport'; the tools are: bash"],
        "{drv:?}"
    );
    if drv == Drv::Anthropic {
        let body = reqs[1].json.as_ref().unwrap();
        let result = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .find(|b| b["type"] == "tool_result")
            .unwrap();
        assert_eq!(result["is_error"], true);
        assert_eq!(result["tool_use_id"], "c1");
    }
    let all = w.trace(&sid);
    let c = events(&all, "tool_call")[0];
    assert_eq!(c["kind"], "unknown");
    assert_eq!(c["status"], "error");
    assert_eq!(c["tool_name"], "teleport");
    assert!(events(&all, "shell").is_empty());
}

#[test]
fn openai_unknown_tool_is_an_error_result_and_the_session_goes_on() {
    unknown_tool_fed_back(Drv::OpenAi);
}

#[test]
fn anthropic_unknown_tool_is_an_error_result_and_the_session_goes_on() {
    unknown_tool_fed_back(Drv::Anthropic);
}

/// One tool call `name(input)` then a final answer; the tool result and the trace.
fn one_call(w: &World, mut spec: Spec, p: &Provider, name: &str) -> (String, Vec<Value>) {
    spec.max_turns = 2;
    w.manifest(&spec);
    let run = w.run("use the tool", &[]);
    run.assert_ok();
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        offered(&reqs[0]).contains(&name.to_string()),
        "{:?}",
        offered(&reqs[0])
    );
    let results = tool_results(&reqs[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    (results[0].clone(), w.trace(&run.sid()))
}

#[test]
fn a_native_tool_wins_over_a_shell_binary_of_the_same_name() {
    let w = World::new("agent-native");
    publish_native(
        &w.reg,
        "cat",
        "#!/bin/sh\necho native-cat-ran\nread -r line\necho \"got $line\"\n",
    );
    let p = Provider::start(vec![
        call("c1", "cat", json!({"command": "task.md"})),
        Step::text("done"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.shell = vec!["cat".into()];
    spec.artifacts = vec!["{name: cat, version: 1.0.0, runtime: tool}".into()];
    let (result, all) = one_call(&w, spec, &p, "cat");
    assert!(result.contains("native-cat-ran"), "{result}");
    assert!(
        result.contains(r#"got {"command":"task.md"}"#),
        "the input JSON on stdin: {result}"
    );
    assert!(
        !result.contains("use the tool"),
        "the shell cat did not run: {result}"
    );
    let c = events(&all, "tool_call")[0];
    assert_eq!(c["kind"], "native");
    assert_eq!(c["status"], "ok");
    assert!(events(&all, "shell").is_empty());
    assert_eq!(events(&all, "session_start")[0]["tools_declared"], json!(["cat"]));
}

#[test]
fn a_shell_binary_wins_over_a_skill_of_the_same_name() {
    let w = World::new("agent-shell-skill");
    publish_skill(
        &w.reg,
        "bash",
        "a skill shadowed by the shell",
        "SKILL TEXT, never returned",
    );
    let p = Provider::start(vec![
        call("c1", "bash", json!({"command": "echo from-the-shell"})),
        Step::text("done"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec!["{name: bash, version: 1.0.0, runtime: skill}".into()];
    let (result, all) = one_call(&w, spec, &p, "bash");
    assert!(result.contains("--- stdout ---\nfrom-the-shell\n"), "{result}");
    assert!(!result.contains("SKILL TEXT"), "{result}");
    assert_eq!(events(&all, "tool_call")[0]["kind"], "shell");
    assert_eq!(events(&all, "shell")[0]["exit_code"], 0);
}

#[test]
fn a_skill_returns_its_skill_md_verbatim() {
    let w = World::new("agent-skill");
    let guide = "# How to deploy\n\n1. Run `make` — twice.\n2. *Never* skip tests.\n\n\tindented ünïcode ✓\n";
    publish_skill(&w.reg, "deploy-guide", "how to deploy", guide);
    let p = Provider::start(vec![call("c1", "deploy-guide", json!({})), Step::text("done")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec!["{name: deploy-guide, version: 1.0.0, runtime: skill}".into()];
    let (result, all) = one_call(&w, spec, &p, "deploy-guide");
    assert_eq!(result, guide);
    let c = events(&all, "tool_call")[0];
    assert_eq!(c["kind"], "skill");
    assert_eq!(c["status"], "ok");
    let sid = all[0]["session_id"].as_str().unwrap();
    assert_eq!(
        std::fs::read_to_string(w.workdir(sid).join("tools/deploy-guide/skill.md")).unwrap(),
        guide
    );
}

#[test]
fn a_wasm_tool_reply_reaches_the_model() {
    let w = World::new("agent-wasm");
    publish_zip(&w.reg, &repo("tests/fixtures/echo-tool/echo-tool-1.0.0.mur.zip"));
    let p = Provider::start(vec![
        call("c1", "echo-tool", json!({"text": "ping"})),
        Step::text("done"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec!["{name: echo-tool, version: 1.0.0, runtime: tool}".into()];
    let (result, all) = one_call(&w, spec, &p, "echo-tool");
    assert_eq!(result, "echoed\necho: {\"text\":\"ping\"}");
    let c = events(&all, "tool_call")[0];
    assert_eq!(c["kind"], "wasm");
    assert_eq!(c["status"], "ok");
    assert_eq!(c["input"], json!({"text": "ping"}));
    // The spec the model got: the artifact's description and input_schema.
    let body = p.model_requests()[0].json.clone().unwrap();
    let tool = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "echo-tool")
        .unwrap()["function"]
        .clone();
    assert_eq!(tool["description"], "Echoes its input");
    assert_eq!(
        tool["parameters"],
        json!({"type": "object", "properties": {"text": {"type": "string"}}})
    );
}

fn hex_id(v: &Value, prefix: &str) -> bool {
    v.as_str()
        .and_then(|s| s.strip_prefix(prefix))
        .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn sorted(k: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = k
        .iter()
        .chain(["event_type", "session_id", "timestamp"].iter())
        .map(|s| s.to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn a_two_turn_task_traces_each_event_with_its_exact_fields() {
    let w = World::new("agent-trace");
    let p = Provider::start(vec![
        call("c1", "bash", json!({"command": "echo traced"})),
        Step::text("finished"),
    ]);
    w.manifest(&Spec::new(Drv::OpenAi, &p));
    let run = w.run("trace me", &[]);
    run.assert_ok();
    let sid = run.sid();
    let all = w.trace(&sid);
    assert_eq!(
        kinds(&all),
        [
            "session_start",
            "task_start",
            "inference",
            "tool_call",
            "shell",
            "inference",
            "task_end",
            "session_end"
        ]
    );
    let mut last = 0;
    for e in &all {
        assert_eq!(e["session_id"], sid.as_str());
        let ts = e["timestamp"].as_u64().unwrap();
        assert!(ts >= last, "timestamps never go back");
        last = ts;
    }

    let s = &all[0];
    assert_eq!(
        keys(s),
        sorted(&[
            "capsule_name",
            "capsule_version",
            "model",
            "max_turns",
            "tools_declared",
            "containment_declared",
            "containment_achieved",
            "workdir_exec",
            "effective_grants"
        ])
    );
    assert_eq!(s["capsule_name"], "agent-x");
    assert_eq!(s["capsule_version"], "0.1.0");
    assert_eq!(s["model"], MODEL);
    assert_eq!(s["max_turns"], 3);
    assert_eq!(s["tools_declared"], json!(["bash"]));
    assert_eq!(s["containment_declared"], "advisory");
    assert_eq!(s["containment_achieved"], "advisory");
    assert_eq!(s["workdir_exec"], false);
    assert!(s["effective_grants"].is_object());

    let t = &all[1];
    assert_eq!(
        keys(t),
        sorted(&["task_id", "context_id", "source", "origin", "trust"])
    );
    assert_eq!(
        (&t["origin"], &t["trust"]),
        (&json!("user"), &json!("trusted")),
        "{t}"
    );
    assert!(hex_id(&t["task_id"], "tsk_"), "{t}");
    assert!(hex_id(&t["context_id"], "ctx_"), "{t}");
    assert_eq!(t["source"], "file");

    let inference_keys = sorted(&[
        "turn",
        "input_tokens",
        "output_tokens",
        "decision",
        "tool_name",
        "tool_calls",
    ]);
    let i1 = &all[2];
    assert_eq!(keys(i1), inference_keys);
    assert_eq!(
        (&i1["turn"], &i1["input_tokens"], &i1["output_tokens"]),
        (&json!(1), &json!(10), &json!(5))
    );
    assert_eq!(i1["decision"], "tool_call");
    assert_eq!(i1["tool_name"], "bash");
    assert_eq!(i1["tool_calls"], 1);

    let c = &all[3];
    assert_eq!(
        keys(c),
        sorted(&["turn", "tool_name", "kind", "input", "duration_ms", "status"])
    );
    assert_eq!(c["turn"], 1);
    assert_eq!(c["tool_name"], "bash");
    assert_eq!(c["kind"], "shell");
    assert_eq!(c["input"], json!({"command": "echo traced"}));
    assert!(c["duration_ms"].is_u64());
    assert_eq!(c["status"], "ok");

    let sh = &all[4];
    assert_eq!(keys(sh), sorted(&["turn", "binary", "exit_code", "duration_ms"]));
    assert_eq!(sh["turn"], 1);
    assert_eq!(sh["binary"], "bash");
    assert_eq!(sh["exit_code"], 0);
    assert!(sh["duration_ms"].is_u64());

    let i2 = &all[5];
    assert_eq!(keys(i2), inference_keys);
    assert_eq!(
        (&i2["turn"], &i2["input_tokens"], &i2["output_tokens"]),
        (&json!(2), &json!(20), &json!(5))
    );
    assert_eq!(i2["decision"], "end_turn");
    assert_eq!(i2["tool_name"], Value::Null);
    assert_eq!(i2["tool_calls"], 0);

    let te = &all[6];
    assert_eq!(
        keys(te),
        sorted(&[
            "task_id",
            "exit_status",
            "turns",
            "tool_calls",
            "shell_calls",
            "duration_ms",
            "reopen_count",
            "input_tokens",
            "output_tokens"
        ])
    );
    assert_eq!(te["task_id"], t["task_id"]);
    assert_eq!(te["exit_status"], "ok");
    assert_eq!(te["turns"], 2);
    assert_eq!(te["tool_calls"], 1);
    assert_eq!(te["shell_calls"], 1);
    assert!(te["duration_ms"].is_u64());
    assert_eq!(te["reopen_count"], 0);
    assert_eq!(te["input_tokens"], 30);
    assert_eq!(te["output_tokens"], 10);

    let se = &all[7];
    assert_eq!(
        keys(se),
        sorted(&[
            "exit_status",
            "duration_ms",
            "turns",
            "tool_calls",
            "shell_calls",
            "input_tokens",
            "output_tokens"
        ])
    );
    assert_eq!(se["exit_status"], "ok");
    assert!(se["duration_ms"].is_u64());
    assert_eq!(se["turns"], 2);
    assert_eq!(se["tool_calls"], 1);
    assert_eq!(se["shell_calls"], 1);
    assert_eq!(se["input_tokens"], 30);
    assert_eq!(se["output_tokens"], 10);
}

/// A shell call printing 20 MiB: the records keep its first 16 MiB (the cap per stream), and
/// the cut is named where it happens: the `tool_call` event, the model's tool result, and
/// `mur trace`'s timeline.
#[test]
fn a_stream_cut_at_the_records_cap_is_named_in_the_trace() {
    const ALL: u64 = 20 << 20;
    const CAP: u64 = 16 << 20;
    let w = World::new("agent-output-cap");
    let command = "s=$(printf '%*s' 1048576 ''); for i in {1..20}; do printf '%s' \"$s\"; done";
    let p = Provider::start(vec![
        call("c1", "bash", json!({ "command": command })),
        Step::text("done"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.shell = vec!["bash".into()];
    let (result, all) = one_call(&w, spec, &p, "bash");
    let c = events(&all, "tool_call")[0];
    assert_eq!(
        c["truncated_at_cap"],
        json!({"stdout": {"bytes": ALL, "cap": CAP}}),
        "{c}"
    );
    assert!(
        result.contains(&format!(
            "[stdout truncated: {ALL} bytes in all, the first 16384 shown; the first {CAP} saved in the session records as logs/"
        )),
        "{}",
        &result[result.len().saturating_sub(400)..]
    );
    let sid = all[0]["session_id"].as_str().unwrap().to_string();
    let logs = w.records(&sid).join("logs");
    let saved: Vec<u64> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".stdout"))
        .map(|e| e.metadata().unwrap().len())
        .collect();
    assert_eq!(saved, [CAP]);
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["trace", w.records(&sid).to_str().unwrap()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("tool bash ok in ")
            && shown.contains(&format!(" ms, stdout cut at {CAP} of {ALL} bytes input ")),
        "{shown}"
    );
}
