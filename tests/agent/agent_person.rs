//! A person in the loop through the real `mur run --json` and the mock provider: calls
//! `approvals` names wait in `input-required` for the task's caller, and the `ask` tool puts
//! a question to it; the caller answers with a follow-up message on the same task. Driven by
//! the official A2A SDK (both generations, tests/sdk/a2a_person.py: granted, denied, timed
//! out, a question answered, another credential refused) and over raw JSON-RPC (a waiting
//! task holds no model call and no child process; the trace and the hooks see the request
//! and the answer).

use crate::common;

use common::agent::{events, publish_hook, Drv, Spec, World};
use common::agent_door::door_kit::*;
use common::agent_door::{message_id, send_params_03, send_params_10, Served};
use common::provider::{last_is_tool_result, last_user_text, tool_results, turns, Provider, Step};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The mock model: after a tool result, `final: <that result>`; for a task starting with
/// `ask`, the `ask` tool; otherwise `bash` with `echo <task text>`.
pub fn model() -> Provider {
    Provider::start_responder(|req| {
        if last_is_tool_result(req) {
            let last = tool_results(req).pop().unwrap_or_default();
            return Step::text(&format!("final: {last}"));
        }
        let text = last_user_text(req);
        if text.starts_with("ask") {
            return Step::tool("c1", "ask", json!({"question": "which colour?"}));
        }
        Step::tool("c1", "bash", json!({"command": format!("echo {text}")}))
    })
}

/// `approvals` for `bash` commands that contain `approve-me` (3 s, deny), and `ask`.
pub const PERSON: &str =
    "approvals:\n  shell: ['bash *approve-me*']\n  timeout_secs: 3\nask: {timeout_secs: 30}\n";

/// The capsule's manifest: `spec`, queue + sleep, the person blocks, and door credentials
/// `alice` and `mallory` when `auth`.
fn manifest(w: &World, p: &Provider, auth: bool) {
    let mut yaml = Spec::new(Drv::OpenAi, p).yaml();
    if auth {
        let creds = "authentication: {scheme: bearer, credentials: [{name: alice, scopes: ['*']}, {name: mallory, scopes: ['*']}]}";
        let at = yaml.find("  network: {allow: [").unwrap();
        let end = at + yaml[at..].find("}\n").unwrap();
        yaml.insert_str(end, &format!(", {creds}"));
    }
    w.manifest_text(&format!("{yaml}{}{PERSON}", queue_sleep(8)));
}

/// `mur token --session SID NAME`.
fn token(w: &World, sid: &str, name: &str) -> String {
    let out = Command::new(common::capsule::MUR)
        .args(["token", "--session", sid, name])
        .env("MURMUR_RECORDS_DIR", w.t.path().join("records"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// `python tests/sdk/a2a_person.py BASE GEN` with the two tokens in its environment.
fn script(python: &Path, base: &str, generation: &str, tokens: (&str, &str)) -> (bool, String) {
    let out = Command::new(python)
        .arg(common::capsule::repo("tests/sdk/a2a_person.py"))
        .args([base, generation])
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env("A2A_DOOR_TOKEN", tokens.0)
        .env("A2A_OTHER_TOKEN", tokens.1)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// With the official SDK as the caller, over 1.0 and 0.3 on an authenticated door: an
/// approval granted (data part), one denied (the word, over a stream), one timed out
/// (denied), a question answered, and a second credential refused as `Task not found`.
/// The trace records each request and its answer, with who answered.
#[test]
fn the_official_sdk_grants_denies_times_out_and_answers_questions_in_both_generations() {
    let python = common::sdk::python();
    let p = model();
    let w = World::new("person-sdk");
    manifest(&w, &p, true);
    let mut s = w.serve(None, &[]);
    let (alice, mallory) = (token(&w, &s.sid, "alice"), token(&w, &s.sid, "mallory"));
    let base = format!("http://127.0.0.1:{}", s.port);
    let mut failures = Vec::new();
    for generation in ["1.0", "0.3"] {
        let (ok, text) = script(&python, &base, generation, (&alice, &mallory));
        println!("--- a2a_person.py {generation}\n{text}");
        if !ok {
            failures.push(format!("a2a_person.py {generation}:\n{text}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n--- mur run\n{}",
        failures.join("\n"),
        s.both()
    );
    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let trace = w.trace(&s.sid);
    let answered: Vec<(String, String, Value)> = events(&trace, "approval_answered")
        .iter()
        .map(|e| {
            (
                e["decision"].as_str().unwrap().to_string(),
                e["by"].as_str().unwrap().to_string(),
                e["credential"].clone(),
            )
        })
        .collect();
    let per_generation = [
        ("approved", "caller", json!("alice")),
        ("denied", "caller", json!("alice")),
        ("denied", "timeout", Value::Null),
        ("denied", "caller", json!("alice")),
    ];
    let expected: Vec<(String, String, Value)> = per_generation
        .iter()
        .chain(per_generation.iter())
        .map(|(d, b, c)| (d.to_string(), b.to_string(), c.clone()))
        .collect();
    assert_eq!(answered, expected);
    let requested = events(&trace, "approval_requested");
    assert_eq!(requested.len(), 8);
    assert_eq!(requested[0]["kind"], "shell");
    assert_eq!(requested[0]["tool_name"], "bash");
    assert_eq!(
        requested[0]["input"],
        json!({"command": "echo approve-me grant 1.0"})
    );
    let asked: Vec<&str> = events(&trace, "input_received")
        .iter()
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(asked, ["answered", "answered"]);
}

/// The command lines of `pid`'s children (every thread's) but the session's warden
/// (`mur __warden`, which lives as long as the session and runs nothing).
fn children(pid: u32) -> Vec<String> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for child in list.split_whitespace() {
            let cmd = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if !cmd.contains(" __warden") {
                out.push(format!("{child}: {cmd}"));
            }
        }
    }
    out
}

/// 0.3 `message/send` answering `task` with `parts`, blocking: the task as it stands.
fn answer_03(s: &Served, task: &Value, parts: Value) -> Value {
    let params = json!({"message": {"kind": "message", "messageId": message_id(), "role": "user",
        "taskId": task["id"], "contextId": task["contextId"], "parts": parts}});
    s.rpc("message/send", params, &[])
}

/// A task waiting for approval holds no model call and no child: while it waits the mock
/// gets no request and `mur run` has no child process. A reply that is neither yes nor no
/// is invalid params and leaves it waiting; a message naming another task's context too;
/// the 0.3 data part `{"approve": true}` runs the call. A call the pattern does not match
/// runs at once. Hooks see `approval` requested, then approved with the wait's length.
#[test]
fn a_waiting_task_holds_no_model_call_and_no_child_until_its_caller_approves() {
    let p = model();
    let w = World::new("person-wait");
    publish_hook(&w.reg, "hook-recorder");
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec![common::agent::hook_entry(
        "hook-recorder",
        Some("{filesystem: {scope: hook-state}}"),
    )];
    w.manifest_text(&format!("{}{}{PERSON}", spec.yaml(), queue_sleep(4)));
    let mut s = w.serve(None, &[]);

    let plain = submit(&s, "plain words", &[]);
    let plain = s.settled(&id(&plain), SETTLE);
    assert_eq!(plain["status"]["state"], "TASK_STATE_COMPLETED", "{plain}");
    assert!(response_10(&plain).contains("plain words"), "{plain}");

    // Arguments too long to show whole are denied without asking.
    let long = submit(&s, &format!("approve-me {}", "x".repeat(2100)), &[]);
    let long = s.settled(&id(&long), SETTLE);
    assert!(
        response_10(&long).contains("error: the arguments of this call of bash are too long to show for approval (at most 2000 characters); it did not run"),
        "{long}"
    );

    let sent = s.result("message/send", send_params_03("approve-me now", false), &[]);
    let task_id = sent["id"].as_str().unwrap().to_string();
    let waiting = s.wait_state(&task_id, "TASK_STATE_INPUT_REQUIRED", SETTLE);
    let asked = waiting["status"]["message"]["parts"][0]["text"].as_str().unwrap();
    assert!(
        asked.starts_with("approval required: the agent wants to call shell bash with {\"command\":\"echo approve-me now\"}."),
        "{asked}"
    );
    let before = p.model_requests().len();
    let pid = s.child.id();
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        assert_eq!(
            children(pid),
            Vec::<String>::new(),
            "a child runs while the task waits"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        p.model_requests().len(),
        before,
        "a model call was made while the task waited"
    );

    let task = s.rpc("tasks/get", json!({"id": task_id}), &[])["result"].clone();
    let (code, message) = rpc_error(&answer_03(&s, &task, json!([{"kind": "text", "text": "maybe"}])));
    assert_eq!(code, -32602);
    assert!(message.contains("waits for an approval"), "{message}");
    let mut elsewhere = task.clone();
    elsewhere["contextId"] = json!("ctx_other");
    let (code, _) = rpc_error(&answer_03(
        &s,
        &elsewhere,
        json!([{"kind": "data", "data": {"approve": true}}]),
    ));
    assert_eq!(code, -32602);
    assert_eq!(
        s.get_task(&task_id)["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );

    // A message already sent on the task (a retry, a replay: its id and its words) answers
    // nothing.
    let first = &task["history"][0];
    assert!(first["messageId"].is_string(), "{task}");
    let replay = json!({"message": {"kind": "message", "messageId": first["messageId"], "role": "user",
        "taskId": task["id"], "contextId": task["contextId"], "parts": first["parts"]}});
    let (code, message) = rpc_error(&s.rpc("message/send", replay, &[]));
    assert_eq!(code, -32602);
    assert!(
        message.contains("this message was already sent on task"),
        "{message}"
    );
    assert_eq!(
        s.get_task(&task_id)["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );

    let answered = answer_03(&s, &task, json!([{"kind": "data", "data": {"approve": true}}]));
    assert!(answered.get("error").is_none(), "{answered}");
    let done = s.settled(&task_id, SETTLE);
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert!(response_10(&done).contains("approve-me now"), "{done}");
    let again = s.rpc(
        "SendMessage",
        {
            let mut p = send_params_10("approve", true);
            p["message"]["taskId"] = json!(task_id);
            p
        },
        &[],
    );
    assert_eq!(rpc_error(&again).0, -32004, "a finished task takes no answer");

    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let lines = recorded(&w, &s.sid, "hook-state");
    let approvals: Vec<&String> = lines.iter().filter(|l| l.contains("name=approval")).collect();
    assert_eq!(approvals.len(), 4, "{lines:#?}");
    assert!(approvals[0].contains("outcome=requested"), "{approvals:?}");
    assert!(approvals[1].contains("outcome=denied"), "{approvals:?}");
    assert!(approvals[2].contains("outcome=requested"), "{approvals:?}");
    assert!(approvals[3].contains("outcome=approved"), "{approvals:?}");
    let trace = w.trace(&s.sid);
    let answered = events(&trace, "approval_answered");
    assert_eq!((answered.len(), &answered[0]["by"]), (2, &json!("too_long")));
    assert!(
        answered[1]["duration_ms"].as_u64().unwrap() >= 1000,
        "{}",
        answered[1]
    );
}

/// A blocking send (1.0, no `returnImmediately`) is answered as soon as its task waits, with
/// the task in input-required; `CancelTask` ends the wait at once, the task is canceled
/// without its call running and the next queued task runs. A task from `task.md` has
/// nobody to ask: its approval is denied at once, its `ask` answered so.
#[test]
fn a_blocking_send_returns_at_input_required_and_a_cancel_ends_the_wait() {
    let p = model();
    let w = World::new("person-cancel");
    w.manifest_text(&format!(
        "{}{}{}",
        Spec::new(Drv::OpenAi, &p).yaml(),
        queue_sleep(4),
        PERSON.replace("timeout_secs: 3", "timeout_secs: 60")
    ));
    let mut s = w.serve(Some("approve-me from the file"), &[]);

    let started = Instant::now();
    let sent = s.result("SendMessage", send_params_10("approve-me blocking", false), &[]);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the send held past its wait"
    );
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{sent}");
    let history: Vec<&str> = task["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(history, ["ROLE_USER", "ROLE_AGENT"], "{task}");
    let queued = submit(&s, "plain after", &[]);

    let canceled = s.result("CancelTask", json!({"id": task["id"]}), &[]);
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    let after = s.settled(&id(&queued), SETTLE);
    assert_eq!(after["status"]["state"], "TASK_STATE_COMPLETED", "{after}");
    assert!(response_10(&after).contains("plain after"), "{after}");

    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let trace = w.trace(&s.sid);
    let answered: Vec<(&str, &str)> = events(&trace, "approval_answered")
        .iter()
        .map(|e| (e["decision"].as_str().unwrap(), e["by"].as_str().unwrap()))
        .collect();
    assert_eq!(answered, [("denied", "no_caller"), ("canceled", "cancel")]);
    let shells: Vec<&str> = events(&trace, "shell")
        .iter()
        .map(|e| e["binary"].as_str().unwrap())
        .collect();
    assert_eq!(shells, ["bash"], "only the plain task's call ran");
    let first = std::fs::read_to_string(w.workdir(&s.sid).join("out/tasks").join(format!(
        "{}.txt",
        events(&trace, "task_start")[0]["task_id"].as_str().unwrap()
    )))
    .unwrap();
    assert!(
        first.contains("this task came from task.md: there is nobody to approve"),
        "{first}"
    );
}

/// `approvals.delegations` names the capsules whose delegations wait: of two delegations in
/// one turn, the one to `worker` waits (a task from `task.md` has nobody to ask, so it is
/// denied at once and nothing is launched), the one to `helper` runs.
#[test]
fn a_delegation_approvals_name_waits_and_another_runs() {
    use common::delegation::*;
    let p = Provider::start_responder(responder(&[
        (
            "orch",
            Plan::delegate(&[("worker", "TASK-W"), ("helper", "TASK-H")]),
        ),
        ("worker", Plan::answer("OUTPUT-worker")),
        ("helper", Plan::answer("OUTPUT-helper")),
    ]));
    let mut f = Formation::new("person-dlg");
    let orch = Cap::delegating("orch", &["worker", "helper"]);
    f.publish_yaml(
        &format!("{}approvals: {{delegations: [worker]}}\n", orch.yaml(&p)),
        &[],
    );
    f.publish(&p, &Cap::leaf("worker"));
    f.publish(&p, &Cap::leaf("helper"));
    f.start_roost(&["orch"], &[]);
    let mut env = f.env();
    env.insert("MURMUR_A2A_TIMEOUT_SECS".into(), "1".into());
    let ended = f.run_to_end(
        &run_args(&f.reg, "orch", &f.workdir("orch"), Some("go")),
        &env,
        None,
    );
    let sid = ended.sid();
    let trace = f.trace(&sid);
    let asked = events_of(&trace, "approval_requested");
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(
        (sv(asked[0], "kind"), sv(asked[0], "tool_name")),
        ("delegation", "delegate-task")
    );
    assert_eq!(asked[0]["input"]["capsule"], "worker");
    let answered = events_of(&trace, "approval_answered");
    assert_eq!(
        (sv(answered[0], "decision"), sv(answered[0], "by")),
        ("denied", "no_caller")
    );
    let delegated: Vec<(&str, &str)> = events_of(&trace, "delegation")
        .iter()
        .map(|d| (sv(d, "capsule"), sv(d, "status")))
        .collect();
    assert_eq!(
        delegated,
        [("helper", "started"), ("helper", "ok")],
        "{}",
        f.trace_text(&sid)
    );
    assert!(
        requests_of(&p, "worker").is_empty(),
        "the denied delegation was launched"
    );
    assert_eq!(requests_of(&p, "helper").len(), 1);
    let results = results_of(&p, "orch");
    assert!(
        results[0][0].contains("nobody to approve this call of delegate-task"),
        "{results:?}"
    );
}

/// On an authenticated door a conversation is its sender's: mallory naming alice's
/// `contextId` reaches the model with its own text alone, while alice's next task on it
/// carries her earlier exchange.
#[test]
fn another_credential_naming_a_context_does_not_continue_its_conversation() {
    let p = Provider::start(vec![
        Step::text("noted"),
        Step::text("I do not know"),
        Step::text("it is 42"),
    ]);
    let w = World::new("person-contexts");
    manifest(&w, &p, true);
    let mut s = w.serve(None, &[]);
    let (alice, mallory) = (token(&w, &s.sid, "alice"), token(&w, &s.sid, "mallory"));
    let send = |s: &mut Served, who: &str, text: &str| {
        let mut params = send_params_10(text, false);
        params["message"]["contextId"] = json!("ctx-alice");
        let auth = format!("Bearer {who}");
        let t = s.result("SendMessage", params, &[("authorization", auth.as_str())]);
        assert_eq!(t["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
    };
    send(&mut s, &alice, "my secret is 42");
    send(&mut s, &mallory, "what is the secret?");
    send(&mut s, &alice, "what is my secret?");
    let users = |i: usize| turns(&p.model_requests()[i]);
    assert_eq!(users(1), ["user: what is the secret?"]);
    assert_eq!(
        users(2),
        [
            "user: my secret is 42",
            "assistant: noted",
            "user: what is my secret?"
        ]
    );
    assert_eq!(s.stop(), Some(0), "{}", s.both());
}
