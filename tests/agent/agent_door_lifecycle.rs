//! Agent capsules' A2A lifecycle through the real `mur run --json`, against the mock
//! provider: a running task canceled (in a shell call and in a slow model turn); `single`
//! rejecting a second task and exiting after its one; the idle wait; `none`; and the
//! `completion` origin's session check. The task interface itself is in agent_door.rs.

use crate::common;

use common::agent::{events, kinds};
use common::agent_door::door_kit::*;
use common::agent_door::{lifecycle_yaml, send_params_03, send_params_10};
use common::provider::{last_user_text, Provider, Step};
use serde_json::json;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// 3. Canceling a running agent task.
// ---------------------------------------------------------------------------------------

/// CancelTask of a task whose shell call (`sleep`) runs: canceled at once, the command
/// killed, no further turn; the trace's task_end says `canceled` and on-task-end fires for
/// it; a waiting task canceled never runs; the next queued task then runs and completes.
#[test]
fn canceling_a_task_in_a_shell_call_kills_the_call_and_the_next_queued_task_runs() {
    let sleeper = "sleep 9876512";
    let p = Provider::start(vec![
        Step::tool("c1", "bash", json!({"command": sleeper})),
        Step::text("after the cancel"),
    ]);
    let w = recorded_world("door-cancel", &p, &queue_sleep(2));
    let mut s = w.serve(None, &[]);
    let a = submit(&s, "sleep for a long time", &[]);
    assert!(
        until(SETTLE, || alive(sleeper)),
        "the shell call never started\n{}",
        s.both()
    );
    let b = submit(&s, "then this", &[]);
    let c = submit(&s, "never this", &[]);

    // A waiting task: canceled, dropped from the queue.
    let c_canceled = s.result("CancelTask", json!({"id": id(&c)}), &[]);
    assert_eq!(
        c_canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{c_canceled}"
    );

    let asked = Instant::now();
    let a_canceled = s.result("CancelTask", json!({"id": id(&a)}), &[]);
    assert!(asked.elapsed() < Duration::from_secs(2), "{:?}", asked.elapsed());
    assert_eq!(
        a_canceled["status"]["state"], "TASK_STATE_CANCELED",
        "canceled at once: {a_canceled}"
    );
    assert_eq!(
        a_canceled["status"]["message"]["role"], "ROLE_AGENT",
        "{a_canceled}"
    );
    assert_eq!(
        a_canceled["status"]["message"]["parts"],
        json!([{"text": "canceled by request"}]),
        "{a_canceled}"
    );
    assert!(
        until(Duration::from_secs(10), || !alive(sleeper)),
        "the canceled task's shell call still runs"
    );
    let b_done = s.settled(&id(&b), SETTLE);
    assert!(
        asked.elapsed() < Duration::from_secs(20),
        "the next task waited for the canceled call: {:?}",
        asked.elapsed()
    );
    assert_eq!(b_done["status"]["state"], "TASK_STATE_COMPLETED", "{b_done}");
    assert_eq!(response_10(&b_done), "after the cancel\n");
    assert_eq!(w.result(&s.sid), "after the cancel\n");
    // The canceled task stays canceled, with no answer; it cannot be canceled again.
    let a_after = s.get_task(&id(&a));
    assert_eq!(a_after["status"]["state"], "TASK_STATE_CANCELED", "{a_after}");
    assert!(a_after.get("artifacts").is_none(), "{a_after}");
    let again = s.rpc("CancelTask", json!({"id": id(&a)}), &[]);
    assert_eq!(rpc_error(&again).0, -32002, "{again}");
    assert_eq!(s.stop(), Some(0), "{}", s.both());

    // No second turn for the canceled task: the provider saw alpha's turn and bravo's.
    let reqs = p.model_requests();
    let asked_texts: Vec<String> = reqs.iter().map(last_user_text).collect();
    assert_eq!(asked_texts, ["sleep for a long time", "then this"]);

    let all = w.trace(&s.sid);
    let ends = events(&all, "task_end");
    assert_eq!(ends.len(), 2, "the waiting canceled task never ran: {all:?}");
    assert_eq!(ends[0]["task_id"], a["id"]);
    assert_eq!(ends[0]["exit_status"], "canceled", "{}", ends[0]);
    assert_eq!(
        (&ends[0]["turns"], &ends[0]["shell_calls"]),
        (&json!(1), &json!(1)),
        "{}",
        ends[0]
    );
    assert_eq!(
        (&ends[1]["task_id"], &ends[1]["exit_status"]),
        (&b["id"], &json!("ok"))
    );
    assert!(
        events(&all, "task_start").iter().all(|e| e["task_id"] != c["id"]),
        "{all:?}"
    );
    let a_id = id(&a);
    let b_id = id(&b);
    assert_eq!(
        recorded(&w, &s.sid, "end-state"),
        [
            format!(
                "task-end status=canceled turns=1 task={a_id} result_bytes={}",
                "error: canceled".len()
            ),
            format!(
                "task-end status=ok turns=1 task={b_id} result_bytes={}",
                "after the cancel".len()
            ),
        ]
    );
}

/// CancelTask while the model's answer is in flight (a slow provider step): the task is
/// canceled at once, and when the answer arrives the loop stops there. The trace's task_end
/// and on-task-end say `canceled`, the late answer is not taken as the task's result, and
/// the next task runs.
#[test]
fn canceling_a_task_during_a_slow_model_turn_ends_it_canceled_in_the_trace() {
    let p = Provider::start(vec![
        Step::slow(Duration::from_secs(4), Step::text("too late")),
        Step::text("next one"),
    ]);
    let w = recorded_world("door-cancel-slow", &p, &queue_sleep(2));
    let mut s = w.serve(None, &[]);
    let a = submit(&s, "think slowly", &[]);
    assert!(
        p.wait_requests(1, SETTLE),
        "the first turn never reached the provider"
    );
    let b = submit(&s, "next", &[]);
    let canceled = s.result("CancelTask", json!({"id": id(&a)}), &[]);
    assert_eq!(canceled["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    let b_done = s.settled(&id(&b), SETTLE);
    assert_eq!(response_10(&b_done), "next one\n");
    let a_after = s.get_task(&id(&a));
    assert_eq!(a_after["status"]["state"], "TASK_STATE_CANCELED", "{a_after}");
    assert!(a_after.get("artifacts").is_none(), "{a_after}");
    assert_eq!(s.stop(), Some(0), "{}", s.both());

    let all = w.trace(&s.sid);
    let ends = events(&all, "task_end");
    assert_eq!(ends.len(), 2, "{all:?}");
    assert_eq!(ends[0]["task_id"], a["id"]);
    assert_eq!(
        ends[0]["exit_status"], "canceled",
        "a canceled task's task_end: {}",
        ends[0]
    );
    assert_eq!(ends[1]["exit_status"], "ok", "{}", ends[1]);
    let a_id = id(&a);
    assert_eq!(
        recorded(&w, &s.sid, "end-state")[0],
        format!(
            "task-end status=canceled turns=1 task={a_id} result_bytes={}",
            "error: canceled".len()
        )
    );
}

// ---------------------------------------------------------------------------------------
// 4. single: one task, then the process ends; the idle wait.
// ---------------------------------------------------------------------------------------

/// `single` (the default) with no --task: the first A2A task runs (a blocking 1.0 send holds
/// until it completes), a second send while it runs is a result in state rejected with
/// `task rejected: capsule is busy` (1.0 and 0.3), and after the first the process exits
/// by itself with 0 and the door is closed.
#[test]
fn single_runs_one_a2a_task_rejects_a_second_while_busy_then_exits_0() {
    let p = Provider::start(vec![Step::slow(
        Duration::from_secs(2),
        Step::text("the only answer"),
    )]);
    let w = world("door-single", &p, "");
    let mut s = w.serve(None, &[("MURMUR_A2A_TIMEOUT_SECS", "20")]);
    let (first, busy_10, busy_03) = std::thread::scope(|scope| {
        let first = scope.spawn(|| s.result("SendMessage", send_params_10("the one task", false), &[]));
        assert!(
            p.wait_requests(1, SETTLE),
            "the first task never reached the provider"
        );
        let busy_10 = submit(&s, "a second task", &[]);
        let busy_03 = s.result("message/send", send_params_03("a third task", true), &[]);
        (first.join().unwrap(), busy_10, busy_03)
    });
    let first = &first["task"];
    assert_eq!(first["status"]["state"], "TASK_STATE_COMPLETED", "{first}");
    assert_eq!(response_10(first), "the only answer\n");
    assert_eq!(busy_10["status"]["state"], "TASK_STATE_REJECTED", "{busy_10}");
    assert_eq!(
        busy_10["status"]["message"]["parts"],
        json!([{"text": BUSY}]),
        "{busy_10}"
    );
    assert_eq!(busy_10["status"]["message"]["role"], "ROLE_AGENT", "{busy_10}");
    assert_eq!(busy_03["kind"], "task", "{busy_03}");
    assert_eq!(busy_03["status"]["state"], "rejected", "{busy_03}");
    assert_eq!(
        busy_03["status"]["message"]["parts"],
        json!([{"kind": "text", "text": BUSY}]),
        "{busy_03}"
    );

    let settled_at = Instant::now();
    let status = s.wait_exit(Duration::from_secs(60));
    assert!(
        status.is_some(),
        "single did not exit after its task\n{}",
        s.both()
    );
    assert!(
        settled_at.elapsed() < Duration::from_secs(15),
        "single waited after its task: {:?}",
        settled_at.elapsed()
    );
    assert_eq!(status.unwrap().code(), Some(0), "{}", s.both());
    assert!(
        std::net::TcpStream::connect(s.addr()).is_err(),
        "the door still accepts connections"
    );
    assert_eq!(w.result(&s.sid), "the only answer\n");
    assert_eq!(p.model_requests().len(), 1);
    let all = w.trace(&s.sid);
    assert_eq!(
        outline(&all),
        [
            "session_start",
            "a2a_task_received",
            "task_start",
            "task_end",
            "session_end"
        ],
        "{all:?}"
    );
    assert_eq!(events(&all, "task_start")[0]["task_id"], first["id"]);
    assert_eq!(events(&all, "session_end")[0]["exit_status"], "ok");
}

/// `single` with no task at all: `MURMUR_A2A_TIMEOUT_SECS=1` later the process exits 0,
/// its trace a session_start and a session_end with no task between.
#[test]
fn single_with_no_task_exits_0_after_the_idle_wait() {
    let p = Provider::start(Vec::new());
    let w = world("door-idle", &p, "");
    let mut s = w.serve(None, &[("MURMUR_A2A_TIMEOUT_SECS", "1")]);
    let status = s.wait_exit(Duration::from_secs(60));
    let waited = s.announced_at.elapsed();
    assert!(status.is_some(), "the idle capsule never exited\n{}", s.both());
    assert_eq!(status.unwrap().code(), Some(0), "{}", s.both());
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(15),
        "exited {waited:?} after the announcement"
    );
    let all = w.trace(&s.sid);
    assert_eq!(kinds(&all), ["session_start", "session_end"], "{all:?}");
    let end = events(&all, "session_end")[0];
    assert_eq!(
        (&end["exit_status"], &end["turns"]),
        (&json!("ok"), &json!(0)),
        "{end}"
    );
    assert!(p.requests().is_empty());
    assert!(
        std::net::TcpStream::connect(s.addr()).is_err(),
        "the door is still open"
    );
}

// ---------------------------------------------------------------------------------------
// 5. none: the file task only.
// ---------------------------------------------------------------------------------------

/// `none` with --task: the file task runs, every message meanwhile is refused (-32601 on a
/// send, -32004 on a stream), and the process exits 0 after its task.
#[test]
fn none_runs_its_file_task_refuses_every_message_and_exits() {
    let p = Provider::start(vec![Step::slow(Duration::from_secs(1), Step::text("file only"))]);
    let w = world("door-none", &p, &lifecycle_yaml("none", None, None));
    let mut s = w.serve(Some("the file task"), &[]);
    let why = "this capsule accepts no tasks (lifecycle.task_acceptance: none)";
    let refused = [
        (
            "SendMessage",
            send_params_10("no", true),
            -32601,
            format!("Method not found: {why}"),
        ),
        (
            "message/send",
            send_params_03("no", true),
            -32601,
            format!("Method not found: {why}"),
        ),
        (
            "SendStreamingMessage",
            send_params_10("no", true),
            -32004,
            format!("Unsupported operation: {why}"),
        ),
        (
            "message/stream",
            send_params_03("no", true),
            -32004,
            format!("Unsupported operation: {why}"),
        ),
    ];
    for (method, params, code, message) in refused {
        let v = s.rpc(method, params, &[]);
        assert_eq!(rpc_error(&v), (code, message), "{method}: {v}");
    }
    let status = s.wait_exit(SETTLE);
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{}", s.both());
    assert_eq!(w.result(&s.sid), "file only\n");
    let all = w.trace(&s.sid);
    assert_eq!(
        outline(&all),
        ["session_start", "task_start", "task_end", "session_end"],
        "{all:?}"
    );
    assert_eq!(events(&all, "task_start")[0]["source"], "file");
    assert_eq!(
        p.model_requests().iter().map(last_user_text).collect::<Vec<_>>(),
        ["the file task"]
    );
}

/// `none` without --task (no task.md): refused with a diagnostic naming `no task`.
#[test]
fn none_without_a_task_is_refused_with_no_task() {
    let p = Provider::start(Vec::new());
    let w = world("door-none-empty", &p, &lifecycle_yaml("none", None, None));
    let run = w.run_without_task(&[]);
    assert_eq!(run.code(), Some(1), "{}", run.both());
    // The first launch pins the driver (a line of its own) before the task is looked for.
    assert!(
        run.stderr()
            .lines()
            .any(|l| l.starts_with("error[E-RUN-007]: no task: ")),
        "{}",
        run.both()
    );
    assert!(p.requests().is_empty());
}

// ---------------------------------------------------------------------------------------
// 6. The completion origin names the running session.
// ---------------------------------------------------------------------------------------

/// A `completion` whose `x-murmur-completion-session` is not the running session is a
/// JSON-RPC error -31001 (no task made); addressed to the right session but naming no
/// delegation it started, -31002.
#[test]
fn a_completion_for_another_session_or_no_delegation_of_its_own_is_refused() {
    let p = Provider::start(vec![Step::text("completed the completion")]);
    let w = world("door-completion", &p, &queue_sleep(2));
    let mut s = w.serve(None, &[]);
    let other = "ses_0123456789abcdef0123456789abcdef";
    assert_ne!(other, s.sid);
    let wrong = [
        ("x-murmur-task-origin", "completion"),
        ("x-murmur-completion-session", other),
    ];
    let want = (
        -31001,
        format!("completion is addressed to session {other}, which is not the session running here"),
    );
    for (method, params) in [
        ("SendMessage", send_params_10("wrong", true)),
        ("message/send", send_params_03("wrong", true)),
        ("SendStreamingMessage", send_params_10("wrong", true)),
    ] {
        let v = s.rpc(method, params, &wrong);
        assert_eq!(rpc_error(&v), want, "{method}: {v}");
    }
    let listed = s.result("ListTasks", json!({}), &[]);
    assert_eq!(
        listed["tasks"],
        json!([]),
        "a refused completion made no task: {listed}"
    );

    // The right session, but no delegation of this session's: refused too (-31002), no
    // task. A completion of a delegation this session started runs: the delegation tests.
    let sid = s.sid.clone();
    let right = [
        ("x-murmur-task-origin", "completion"),
        ("x-murmur-completion-session", sid.as_str()),
        ("x-murmur-task-trust", "trusted"),
        ("x-murmur-delegation-id", "dlg_made_up"),
    ];
    let v = s.rpc("SendMessage", send_params_10("the right session", true), &right);
    assert_eq!(
        rpc_error(&v),
        (
            -31002,
            "completion for delegation dlg_made_up refused: this session started no delegation with that id"
                .to_string()
        ),
        "{v}"
    );
    let listed = s.result("ListTasks", json!({}), &[]);
    assert_eq!(listed["tasks"], json!([]), "{listed}");
    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let all = w.trace(&s.sid);
    assert_eq!(events(&all, "a2a_task_received").len(), 0, "{all:?}");
    assert_eq!(events(&all, "completion_refused").len(), 1, "{all:?}");
}
