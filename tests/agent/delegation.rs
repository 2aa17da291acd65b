//! Delegation end to end through the real binaries: `mur-roost` on a temp registry, a
//! top-level capsule started from that registry with `mur run --capsule .. --json`, and the
//! children its runtime launches through `delegate-task`, every capsule answered by one
//! responder mock. Here: a three-level formation that completes by itself, completions
//! arriving upward in order, and no roost token in any process or file of a formation. The
//! roost's bounds and the envelope are in tests/agent/delegation/bounds.rs; approvals presented by
//! hand (replay, a republished artifact, the completion on the wire) in approvals.rs; the
//! child watch (crash, deadline, the parent ending) in watch.rs; the launch refusals and the
//! tool's absence in launch.rs; `mur ps` and `mur stop` on a formation in operate.rs.

use crate::common;

mod approvals;
mod bounds;
mod launch;
mod operate;
mod pins;
mod watch;

use common::agent::request_bytes;
use common::delegation::*;
use common::provider::{last_user_text, Provider};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// One completion.json written by the child for an `ok` session, checked field by field.
fn assert_child_completion(f: &Formation, sid: &str, dlg: &str, capsule: &str, dir: &Path, result: &str) {
    let (raw, c) = f.settled_completion(sid, true);
    assert!(
        raw.ends_with("}\n") && raw.contains("\n  \""),
        "not pretty JSON: {raw:?}"
    );
    assert_eq!(
        keys_of(&c),
        [
            "capsule_name",
            "capsule_version",
            "delegation_id",
            "delivered",
            "duration_ms",
            "reported_by",
            "result_path",
            "session_id",
            "status",
            "workdir"
        ],
        "{raw}"
    );
    assert_eq!(c["delegation_id"], dlg, "{raw}");
    assert_eq!(c["capsule_name"], capsule, "{raw}");
    assert_eq!(c["capsule_version"], V, "{raw}");
    assert_eq!(c["session_id"], sid, "{raw}");
    assert_eq!(c["status"], "ok", "{raw}");
    assert_eq!(c["result_path"], "out/result.txt", "{raw}");
    assert_eq!(c["reported_by"], "child", "{raw}");
    assert_eq!(c["delivered"], true, "{raw}");
    assert!(c["duration_ms"].is_u64(), "{raw}");
    let workdir = Path::new(sv(&c, "workdir"));
    assert!(workdir.is_absolute(), "{raw}");
    assert_eq!(canonical(workdir), canonical(dir), "{raw}");
    let written = std::fs::read_to_string(dir.join("out/result.txt")).unwrap();
    assert_eq!(written.trim_end(), result, "{}", dir.display());
}

/// The `delegation` events of a parent for one child: started, then closed by the child ok.
fn assert_delegated(trace: &[Value], start: &Value) {
    let d = events_of(trace, "delegation");
    assert_eq!(d.len(), 2, "{d:#?}");
    let (dlg, child) = (sv(start, "delegation_id"), sv(start, "session_id"));
    for (k, want) in [
        ("delegation_id", json!(dlg)),
        ("capsule", start["capsule"].clone()),
        ("version", json!(V)),
        ("status", json!("started")),
        ("child_session_id", json!(child)),
        ("child_workdir", start["child_workdir"].clone()),
    ] {
        assert_eq!(d[0][k], want, "{k} of {}", d[0]);
    }
    for (k, want) in [
        ("delegation_id", json!(dlg)),
        ("capsule", start["capsule"].clone()),
        ("version", json!(V)),
        ("child_session_id", json!(child)),
        ("status", json!("ok")),
        ("reported_by", json!("child")),
    ] {
        assert_eq!(d[1][k], want, "{k} of {}", d[1]);
    }
    assert!(ts(d[0]) <= ts(d[1]), "{d:#?}");
}

#[test]
fn a_three_level_formation_completes_by_itself_and_completions_climb_in_order() {
    let p = Provider::start_responder(responder(&[
        ("orchestrator", Plan::delegate(&[("worker", "TASK-FOR-WORKER")])),
        ("worker", Plan::delegate(&[("helper", "TASK-FOR-HELPER")])),
        ("helper", Plan::answer("OUTPUT-helper")),
    ]));
    let mut f = Formation::new("dlg-three");
    f.publish(&p, &Cap::delegating("orchestrator", &["worker", "helper"]));
    f.publish(&p, &Cap::delegating("worker", &["helper"]));
    f.publish(&p, &Cap::leaf("helper"));
    f.start_roost(&["orchestrator"], &[]);
    let mut top = f.start("orchestrator", Some("TASK-FOR-ORCHESTRATOR"), &f.env());
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());
    let orch = top.sid.clone();

    // The tool exists, is declared, and offers exactly the granted names.
    let o_trace = f.trace(&orch);
    let declared = &session_start(&o_trace)["tools_declared"];
    assert!(declared.as_array().unwrap().contains(&json!(TOOL)), "{declared}");
    let first = &requests_of(&p, "orchestrator")[0];
    assert_eq!(last_user_text(first), "TASK-FOR-ORCHESTRATOR");
    let schema =
        tool_schema(first, TOOL).unwrap_or_else(|| panic!("{TOOL} not offered: {:?}", offered(first)));
    let mut names: Vec<String> = schema["properties"]["capsule"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("no enum: {schema}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["helper", "worker"], "{schema}");
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort();
    assert_eq!(required, ["capsule", "task", "version"], "{schema}");

    // Each delegation started: ids, the child's directory (0700, under the parent's).
    let o_results = results_of(&p, "orchestrator");
    assert_eq!(o_results.len(), 1, "{o_results:?}");
    assert_eq!(o_results[0].len(), 1, "{o_results:?}");
    let w_start = started(&o_results[0][0], "worker");
    let worker = sv(&w_start, "session_id").to_string();
    let w_dir = top.workdir.join(sv(&w_start, "child_workdir"));
    let w_results = results_of(&p, "worker");
    assert_eq!(w_results.len(), 1, "{w_results:?}");
    let h_start = started(&w_results[0][0], "helper");
    let helper = sv(&h_start, "session_id").to_string();
    let h_dir = w_dir.join(sv(&h_start, "child_workdir"));
    for d in [&w_dir, &h_dir] {
        let mode = std::fs::metadata(d)
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{}", d.display());
    }
    assert_ne!(sv(&w_start, "delegation_id"), sv(&h_start, "delegation_id"));

    // Each child knows who spawned it, under which delegation, and got its task verbatim.
    let w_trace = f.trace(&worker);
    let h_trace = f.trace(&helper);
    for (trace, parent, start) in [(&w_trace, &orch, &w_start), (&h_trace, &worker, &h_start)] {
        let s = session_start(trace);
        assert_eq!(s["spawned_by"], json!(parent), "{s}");
        assert_eq!(s["delegation_id"], start["delegation_id"], "{s}");
    }
    assert_eq!(last_user_text(&requests_of(&p, "worker")[0]), "TASK-FOR-WORKER");
    assert_eq!(last_user_text(&requests_of(&p, "helper")[0]), "TASK-FOR-HELPER");
    assert_eq!(requests_of(&p, "helper").len(), 1, "the helper ran one turn");

    // The parents' delegation lines: started, then ok as the child reported it.
    assert_delegated(&o_trace, &w_start);
    assert_delegated(&w_trace, &h_start);
    assert!(events_of(&h_trace, "delegation").is_empty());

    // Completions: the identity, the outcome and where the result is, never the output.
    let w_got = completions_to(&p, "worker");
    assert_eq!(w_got.len(), 1, "{w_got:?}");
    assert_eq!(
        message_lines(&w_got[0]),
        completion_lines(
            sv(&h_start, "delegation_id"),
            "helper",
            &helper,
            "ok",
            &canonical(&h_dir),
            Some("out/result.txt")
        )
    );
    assert!(!w_got[0].contains("OUTPUT-helper"), "{}", w_got[0]);
    let o_got = completions_to(&p, "orchestrator");
    assert_eq!(o_got.len(), 1, "{o_got:?}");
    assert_eq!(
        message_lines(&o_got[0]),
        completion_lines(
            sv(&w_start, "delegation_id"),
            "worker",
            &worker,
            "ok",
            &canonical(&w_dir),
            Some("out/result.txt")
        )
    );
    assert!(!o_got[0].contains("OUTPUT-worker"), "{}", o_got[0]);

    // Upward in order: the helper's completion reached the worker (its second task) before
    // the worker's reached the orchestrator.
    let h_tasks = events_of(&h_trace, "task_start");
    let w_tasks = events_of(&w_trace, "task_start");
    let o_tasks = events_of(&o_trace, "task_start");
    assert_eq!((h_tasks.len(), w_tasks.len(), o_tasks.len()), (1, 2, 2));
    assert_eq!(w_tasks[1]["source"], "a2a", "{}", w_tasks[1]);
    assert_eq!(o_tasks[1]["source"], "a2a", "{}", o_tasks[1]);
    assert!(ts(h_tasks[0]) < ts(w_tasks[1]));
    assert!(
        ts(w_tasks[1]) < ts(o_tasks[1]),
        "worker {} orchestrator {}",
        w_tasks[1],
        o_tasks[1]
    );
    let w_ok = events_of(&w_trace, "delegation")[1];
    let o_ok = events_of(&o_trace, "delegation")[1];
    assert!(ts(w_ok) < ts(o_ok), "{w_ok} {o_ok}");

    // Each child's completion.json; the top-level capsule, delegated by nobody, writes none.
    assert_child_completion(
        &f,
        &helper,
        sv(&h_start, "delegation_id"),
        "helper",
        &h_dir,
        "OUTPUT-helper",
    );
    // A parent's out/result.txt holds the answer to the task its delegator gave, never the
    // answer to the completion that came after it; that one is in its own task file.
    assert_child_completion(
        &f,
        &worker,
        sv(&w_start, "delegation_id"),
        "worker",
        &w_dir,
        &delegated_text("worker"),
    );
    for (dir, tasks, model) in [
        (&w_dir, &w_tasks, "worker"),
        (&top.workdir, &o_tasks, "orchestrator"),
    ] {
        let result = std::fs::read_to_string(dir.join("out/result.txt")).unwrap();
        assert_eq!(result.trim_end(), delegated_text(model), "{}", dir.display());
        let own = |t: &Value| dir.join("out/tasks").join(format!("{}.txt", sv(t, "task_id")));
        let first = std::fs::read_to_string(own(tasks[0])).unwrap();
        assert_eq!(first.trim_end(), delegated_text(model), "{}", dir.display());
        let completion = std::fs::read_to_string(own(tasks[1])).unwrap();
        assert_eq!(
            completion.trim_end(),
            after_completion_text(model),
            "{}",
            dir.display()
        );
    }
    assert!(
        f.completion(&orch).is_none(),
        "the top-level capsule wrote a completion"
    );

    // The roost saw all three end well, and holds nothing now.
    for (sid, depth) in [(&orch, 3), (&worker, 2), (&helper, 1)] {
        let s = f.roost_status(sid, "complete");
        assert_eq!(s["depth_remaining"], depth, "{sid}: {s}");
    }
    let s = f.roost().status(&orch);
    assert_eq!(
        (s["live_children"].clone(), s["live_capsules"].clone()),
        (json!(0), json!(0)),
        "{s}"
    );
    f.assert_nothing_left();
}

#[test]
#[cfg_attr(
    not(murmur_test_root),
    ignore = "needs root: reads the environment of a process that is not dumpable"
)]
fn a_child_holds_only_its_environment_and_no_token_reaches_a_process_or_a_file() {
    let p = Provider::start_responder(responder(&[
        ("boss", Plan::delegate(&[("courier", "carry it")])),
        (
            "courier",
            Plan::answer_after(Duration::from_secs(4), "OUTPUT-courier"),
        ),
    ]));
    let mut f = Formation::new("dlg-tokens");
    f.publish(
        &p,
        &Cap::delegating("boss", &["courier"]).env(&["BOTH_DECLARED", "PARENT_ONLY"]),
    );
    f.publish(&p, &Cap::leaf("courier").env(&["BOTH_DECLARED"]));
    f.start_roost(&["boss"], &[]);
    let mut env = f.env();
    for (k, v) in [
        ("BOTH_DECLARED", "shared-value"),
        ("PARENT_ONLY", "parent-value"),
        ("UNDECLARED", "nobody-declares-this"),
    ] {
        env.insert(k.into(), v.into());
    }
    let mut top = f.start("boss", Some("send the courier"), &env);

    // While the formation runs: every process's arguments and environment, token-free.
    let mut most = 0;
    let mut courier: Option<Proc> = None;
    while top.wait_exit(Duration::from_millis(100)).is_none() {
        assert!(
            top.started.elapsed() < FORMATION,
            "the formation ran past {FORMATION:?}\n{}",
            f.dump()
        );
        let procs = f.procs();
        most = most.max(procs.len());
        for pr in &procs {
            assert!(
                !holds_token(pr.cmdline().as_bytes()),
                "a token in {}",
                pr.cmdline()
            );
            assert!(
                !holds_token(&pr.environ),
                "a token in the environment of {}",
                pr.cmdline()
            );
            if courier.is_none() && pr.ppid == top.pid() && pr.has_pair("--capsule", "courier") {
                courier = Some(pr.clone());
            }
        }
    }
    assert_eq!(
        top.try_exit().and_then(|s| s.code()),
        Some(0),
        "{}\n{}",
        top.both(),
        f.dump()
    );
    assert!(most >= 2, "never saw the parent and its child at once ({most})");

    // The child's launch: the contract's arguments, and an environment built from nothing.
    let courier = courier.expect("the courier, a child of the boss, was never seen running");
    let start = started(&results_of(&p, "boss")[0][0], "courier");
    let dir = top.workdir.join(sv(&start, "child_workdir"));
    assert_eq!(
        courier.args.get(1).map(String::as_str),
        Some("run"),
        "{}",
        courier.cmdline()
    );
    assert!(courier.has_pair("--capsule-version", V), "{}", courier.cmdline());
    assert!(
        courier.has_pair("--registry-path", f.reg.to_str().unwrap()),
        "{}",
        courier.cmdline()
    );
    let wd = courier
        .args
        .windows(2)
        .find(|w| w[0] == "--workdir")
        .map(|w| w[1].clone())
        .unwrap_or_else(|| panic!("no --workdir: {}", courier.cmdline()));
    assert_eq!(canonical(Path::new(&wd)), canonical(&dir));
    assert!(
        courier.args.iter().any(|a| a == "--json"),
        "{}",
        courier.cmdline()
    );
    let cenv = courier.env();
    let names: Vec<&str> = cenv.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "BOTH_DECLARED",
            "HOME",
            "MOCK_API_KEY",
            "MURMUR_RECORDS_DIR",
            "MURMUR_ROOST_URL",
            "MURMUR_SPAWNER",
            "MURMUR_SPEND_CHAIN",
            "MURMUR_WORKDIR_IDENTITY",
            "PATH"
        ],
        "{cenv:?}"
    );
    assert_eq!(cenv["BOTH_DECLARED"], "shared-value");
    for k in ["HOME", "PATH", "MURMUR_RECORDS_DIR", "MURMUR_ROOST_URL"] {
        assert_eq!(cenv[k], env[k], "{k}");
    }
    // The child spends under its parent's ceiling (the default here), never beside it.
    assert_eq!(cenv["MURMUR_SPEND_CHAIN"], format!("{}=2000000", top.sid));
    let handle: Value = serde_json::from_str(&cenv["MURMUR_SPAWNER"]).unwrap();
    assert_eq!(
        keys_of(&handle),
        ["context_id", "delegation_id", "session_id", "trust", "url"],
        "{handle}"
    );
    assert_eq!(handle["session_id"], top.sid.as_str(), "{handle}");
    assert_eq!(handle["delegation_id"], start["delegation_id"], "{handle}");
    let url = sv(&handle, "url");
    assert!(
        url == format!("http://127.0.0.1:{}", top.port) || url == format!("http://localhost:{}", top.port),
        "{handle}"
    );
    assert!(
        matches!(sv(&handle, "trust"), "trusted" | "untrusted"),
        "{handle}"
    );
    assert!(!sv(&handle, "context_id").is_empty(), "{handle}");

    // Afterwards: no file the formation left, and nothing the model saw, holds a token.
    f.assert_nothing_left();
    f.assert_no_token_in_files();
    for r in p.requests() {
        assert!(!holds_token(&request_bytes(&r)), "a token went to the provider");
    }
    let sessions = f.sessions();
    assert_eq!(sessions.len(), 2, "{sessions:?}");
}

/// A completion waits in the background lane: the parent is still on its first task when
/// its child's completion arrives, and a person's task sent after that runs before it. The
/// same delegation reported a second time is refused (-31002) and traced.
#[test]
fn a_completion_waits_behind_a_persons_task_that_arrived_after_it() {
    use common::provider::{last_is_tool_result, model_of, Step};
    // The parent's turn after its delegation: long enough for the child to run and report.
    const THINK: Duration = Duration::from_secs(12);
    const PERSON: &str = "A PERSON'S TASK";
    let plans = responder(&[
        ("boss", Plan::delegate(&[("quick", "TASK-FOR-QUICK")])),
        ("quick", Plan::answer("OUTPUT-quick")),
    ]);
    let p = Provider::start_responder(move |req| {
        if model_of(req) == "boss" && last_is_tool_result(req) {
            return Step::slow(THINK, Step::text(&delegated_text("boss")));
        }
        if model_of(req) == "boss" && last_user_text(req) == PERSON {
            return Step::text("OUTPUT-person");
        }
        plans(req)
    });
    let mut f = Formation::new("dlg-lanes");
    f.publish(&p, &Cap::delegating("boss", &["quick"]));
    f.publish(&p, &Cap::leaf("quick"));
    f.start_roost(&["boss"], &[]);
    let mut top = f.start("boss", Some("TASK-FOR-BOSS"), &f.env());
    let child = wait_for(FORMATION, "the boss's delegation result", || {
        results_of(&p, "boss").first().map(|r| started(&r[0], "quick"))
    });
    let child_sid = sv(&child, "session_id").to_string();
    f.settled_completion(&child_sid, true);
    let boss_trace = f.trace(&top.sid);
    assert!(
        events_of(&boss_trace, "task_end").is_empty(),
        "the child reported after the boss's first task ended (it took longer than {THINK:?})"
    );
    // The same delegation reported again (as a process that read the child's handle
    // could): refused, the one completion already taken.
    let dlg = sv(&child, "delegation_id").to_string();
    let again = json!({"jsonrpc": "2.0", "id": 2, "method": "message/send",
        "params": {"message": {"kind": "message", "messageId": "m-again", "role": "user",
            "parts": [{"kind": "text", "text": "Delegated capsule finished."}]}}});
    let refused = murmur::http::client::post_json(
        &format!("http://127.0.0.1:{}/", top.port),
        &[
            ("x-murmur-task-origin", "completion"),
            ("x-murmur-task-trust", "trusted"),
            ("x-murmur-delegation-id", dlg.as_str()),
            ("x-murmur-completion-session", top.sid.as_str()),
        ],
        &again.to_string(),
        &murmur::http::client::Options::default(),
    )
    .unwrap();
    let refused: Value = serde_json::from_slice(&refused.body).unwrap();
    assert_eq!(
        refused["error"],
        json!({"code": -31002,
            "message": format!("completion for delegation {dlg} refused: its completion was already taken")}),
        "{refused}"
    );
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m-person", "role": "ROLE_USER",
            "parts": [{"text": PERSON}]}, "configuration": {"returnImmediately": true}}});
    let sent = murmur::http::client::post_json(
        &format!("http://127.0.0.1:{}/", top.port),
        &[("a2a-version", "1.0")],
        &send.to_string(),
        &murmur::http::client::Options::default(),
    )
    .unwrap();
    assert_eq!(sent.status, 200);
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());
    let starts: Vec<String> = events_of(&f.trace(&top.sid), "task_start")
        .iter()
        .map(|e| sv(e, "origin").to_string())
        .collect();
    assert_eq!(starts, ["user", "event", "completion"], "{}", f.dump());
    assert_eq!(completions_to(&p, "boss").len(), 1);
    let refusals = events_of(&f.trace(&top.sid), "completion_refused").len();
    assert_eq!(refusals, 1, "{}", f.dump());
    // `mur trace` shows the refused completion and why.
    let shown = f.trace_text(&top.sid);
    assert!(
        shown.contains(&format!(
            "completion for delegation {dlg} refused: its completion was already taken"
        )),
        "{shown}"
    );
}

/// Whether `bytes` hold a door token's tag.
fn holds_door_token(bytes: &[u8]) -> bool {
    bytes.windows(5).any(|w| w == b"mdt1.")
}

#[test]
fn delegation_works_through_an_authenticated_parent_and_child() {
    let p = Provider::start_responder(responder(&[
        ("orchestrator", Plan::delegate(&[("worker", "TASK-FOR-WORKER")])),
        ("worker", Plan::answer("OUTPUT-worker")),
    ]));
    let mut f = Formation::new("dlg-auth");
    f.publish(&p, &Cap::delegating("orchestrator", &["worker"]).authenticated());
    f.publish(&p, &Cap::leaf("worker").authenticated());
    f.start_roost(&["orchestrator"], &[]);
    let mut top = f.start("orchestrator", Some("TASK-FOR-ORCHESTRATOR"), &f.env());
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());
    let orch = top.sid.clone();

    // The child took its task through its authenticated door (the parent held its spawner
    // token), and its completion reached the authenticated parent by its delegation id.
    let started_line = started(&results_of(&p, "orchestrator")[0][0], "worker");
    let worker = sv(&started_line, "session_id").to_string();
    assert_eq!(last_user_text(&requests_of(&p, "worker")[0]), "TASK-FOR-WORKER");
    let got = completions_to(&p, "orchestrator");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains(sv(&started_line, "delegation_id")), "{}", got[0]);
    let o_tasks: Vec<Value> = f
        .trace(&orch)
        .into_iter()
        .filter(|e| e["event_type"] == "task_start")
        .collect();
    assert_eq!(o_tasks.len(), 2, "{o_tasks:?}");
    assert_eq!(o_tasks[1]["origin"], "completion", "{}", o_tasks[1]);
    let (_, completion) = f.settled_completion(&worker, true);
    assert_eq!(completion["status"], "ok", "{completion}");

    // Neither session left a token behind: the tokens file goes with its session, and no
    // other record, workdir file or output ever held one.
    for sid in [&orch, &worker] {
        let dir = f.records_of(sid);
        assert!(!dir.join("door-tokens.json").exists(), "{sid}");
    }
    let mut stack = vec![f.t.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_none_or(|x| x != "wasm" && x != "zip") {
                let bytes = std::fs::read(&path).unwrap_or_default();
                assert!(!holds_door_token(&bytes), "{} holds a door token", path.display());
            }
        }
    }
    assert!(!holds_door_token(top.both().as_bytes()));
    f.assert_nothing_left();
}
