//! The capsule lifecycle and cancellation over the A2A door of a WASM capsule, through the
//! real `mur run`: `none`, `single` (busy rejection, exit after the task, idle exit),
//! `queue` (serial runs, overflow, SIGTERM with tasks waiting, idle exit), and canceling a
//! running or a waiting task.

use crate::common;

use common::capsule::capsule;
use common::door::{self, lifecycle, secs, send_params, state_of, status_text, task_of, Door, Ev, SLOW};
use common::TempDir;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const BUSY: &str = "task rejected: capsule is busy";
const ENDED: &str = "task rejected: the session ended before this task started";

fn id_of(task: &Value) -> String {
    task["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {task}"))
        .to_string()
}

/// The task ids of the trace's `task_start` events, in order, and their timestamps.
fn starts(d: &Door) -> Vec<(String, u64)> {
    d.events("task_start")
        .iter()
        .map(|e| {
            (
                e["task_id"].as_str().unwrap().to_string(),
                e["timestamp"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn queue_door(t: &TempDir, depth: u32, after: &str, env: &[(&str, &str)]) -> Door {
    let depth = format!("queue_depth: {depth}");
    let after = format!("after_task: {after}");
    let dir = capsule(t, SLOW, &lifecycle(&["task_acceptance: queue", &after, &depth]));
    door::start(t, &dir, &[], env)
}

#[test]
fn none_runs_its_task_once_and_refuses_every_message() {
    let t = TempDir::new("life-none");
    let dir = capsule(&t, SLOW, &lifecycle(&["task_acceptance: none"]));
    let mut d = door::start(&t, &dir, &["--task", "sleep 3"], &[]);
    let why = "this capsule accepts no tasks (lifecycle.task_acceptance: none)";
    for m in ["message/send", "SendMessage"] {
        let p = send_params(m, "hello", json!(null));
        assert_eq!(d.error(m, p), (-32601, format!("Method not found: {why}")), "{m}");
    }
    for m in ["message/stream", "SendStreamingMessage"] {
        let p = send_params(m, "hello", json!(null));
        assert_eq!(
            d.error(m, p),
            (-32004, format!("Unsupported operation: {why}")),
            "{m}"
        );
    }
    // Its own task (task.md) holds the slot but is no client's to see.
    let list = d.result("ListTasks", json!({}));
    assert_eq!(
        (list["tasks"].clone(), list["totalSize"].clone()),
        (json!([]), json!(0)),
        "{list}"
    );
    assert_eq!(d.card_status(), 200);
    // It runs once and exits.
    let status = d.wait_exit(secs(15));
    assert_eq!(status.code(), Some(0));
    assert_eq!(d.workfile("out/result.txt").as_deref(), Some("done: sleep 3\n"));
    let starts = d.events("task_start");
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0]["source"], "file");
    assert_eq!(
        (starts[0]["origin"].as_str(), starts[0]["trust"].as_str()),
        (Some("user"), Some("trusted"))
    );
    assert!(d.events("a2a_task_received").is_empty());
    let trace = d.trace();
    assert_eq!(trace.last().unwrap()["event_type"], "session_end");
    assert_eq!(trace.last().unwrap()["exit_status"], "ok");
}

#[test]
fn single_takes_one_task_rejects_a_second_while_busy_and_exits_after_it() {
    let t = TempDir::new("life-single");
    let dir = capsule(&t, SLOW, &lifecycle(&["task_acceptance: single"]));
    let mut d = door::start(&t, &dir, &[], &[("MURMUR_A2A_TIMEOUT_SECS", "20")]);
    let first = d.submit("SendMessage", "sleep 3");
    assert_eq!(state_of(&first), "TASK_STATE_SUBMITTED");
    let first_id = id_of(&first);
    d.wait_state(&first_id, "TASK_STATE_WORKING", secs(5));

    // A second send while it runs: a result, in state rejected, answered at once.
    let began = Instant::now();
    let second = d.result("SendMessage", send_params("SendMessage", "second", json!(null)));
    assert!(began.elapsed() < secs(1));
    let second = task_of(&second);
    assert_eq!(state_of(second), "TASK_STATE_REJECTED", "{second}");
    assert_eq!(status_text(second), BUSY);
    assert_eq!(second["status"]["message"]["role"], "ROLE_AGENT");
    assert_ne!(id_of(second), first_id);
    let old = d.result(
        "message/send",
        send_params("message/send", "third", json!({"blocking": false})),
    );
    assert_eq!((state_of(&old), status_text(&old)), ("rejected", BUSY), "{old}");
    assert_eq!(old["kind"], "task");
    // A stream refused the same way: the rejected task, its final status, the end.
    let mut s = d.stream(
        "message/stream",
        send_params("message/stream", "fourth", json!(null)),
    );
    let ev = s.result(secs(5));
    assert_eq!(
        (ev["kind"].as_str(), state_of(&ev)),
        (Some("task"), "rejected"),
        "{ev}"
    );
    let ev = s.result(secs(5));
    assert_eq!(
        (ev["kind"].as_str(), state_of(&ev), ev["final"].as_bool()),
        (Some("status-update"), "rejected", Some(true))
    );
    assert_eq!(status_text(&ev), BUSY);
    s.expect_end(secs(5));
    assert_eq!(state_of(&d.task(&id_of(second))), "TASK_STATE_REJECTED");

    // The one task completes (seen through a subscription) and the process exits by itself.
    let mut sub = d.stream("SubscribeToTask", json!({ "id": first_id }));
    assert_eq!(state_of(&sub.result(secs(5))["task"]), "TASK_STATE_WORKING");
    let art = sub.result(secs(10));
    assert_eq!(
        art["artifactUpdate"]["artifact"]["parts"][0]["text"], "done: sleep 3\n",
        "{art}"
    );
    assert_eq!(
        state_of(&sub.result(secs(5))["statusUpdate"]),
        "TASK_STATE_COMPLETED"
    );
    sub.expect_end(secs(5));
    let status = d.wait_exit(secs(10));
    assert_eq!(status.code(), Some(0));
    let starts = starts(&d);
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(starts[0].0, first_id);
    let trace = d.trace();
    assert_eq!(trace.last().unwrap()["event_type"], "session_end");
    assert_eq!(trace.last().unwrap()["exit_status"], "ok");
    assert_eq!(trace.last().unwrap()["tasks"], 1);
}

#[test]
fn single_with_no_task_ends_idle_after_the_timeout() {
    let t = TempDir::new("life-idle");
    let dir = capsule(&t, SLOW, &lifecycle(&["task_acceptance: single"]));
    let began = Instant::now();
    let mut d = door::start(&t, &dir, &[], &[("MURMUR_A2A_TIMEOUT_SECS", "1")]);
    let status = d.wait_exit(secs(10));
    let took = began.elapsed();
    assert_eq!(status.code(), Some(0));
    assert!(took >= Duration::from_millis(900) && took < secs(8), "{took:?}");
    assert!(
        std::net::TcpStream::connect(d.addr).is_err(),
        "the door outlived the session"
    );
    let trace = d.trace();
    assert!(d.events("task_start").is_empty(), "{trace:?}");
    let end = trace.last().unwrap();
    assert_eq!(
        (end["event_type"].as_str(), end["tasks"].as_u64()),
        (Some("session_end"), Some(0)),
        "{end}"
    );
    let log = std::fs::read_to_string(d.records.join("logs/bootstrap.log")).unwrap();
    assert!(log.contains("no task arrived: the session ends idle"), "{log}");
}

#[test]
fn queue_runs_tasks_serially_rejects_overflow_and_ends_waiting_tasks_at_sigterm() {
    let t = TempDir::new("life-queue");
    let mut d = queue_door(&t, 2, "sleep", &[]);
    let t1 = id_of(&d.submit("SendMessage", "sleep 2"));
    d.wait_state(&t1, "TASK_STATE_WORKING", secs(5));
    let t2 = d.submit("SendMessage", "second");
    assert_eq!(state_of(&t2), "TASK_STATE_SUBMITTED");
    let t3 = d.submit("message/send", "third");
    assert_eq!(state_of(&t3), "submitted");
    let (t2, t3) = (id_of(&t2), id_of(&t3));
    // Two wait: the queue is full.
    for m in ["SendMessage", "message/send"] {
        let over = d.result(m, send_params(m, "overflow", json!(null)));
        let over = task_of(&over);
        assert!(
            matches!(state_of(over), "rejected" | "TASK_STATE_REJECTED"),
            "{m}: {over}"
        );
        assert_eq!(status_text(over), BUSY);
    }
    assert_eq!(state_of(&d.task(&t2)), "TASK_STATE_SUBMITTED");
    d.wait_state(&t3, "TASK_STATE_COMPLETED", secs(10));
    for id in [&t1, &t2] {
        assert_eq!(state_of(&d.task(id)), "TASK_STATE_COMPLETED");
    }
    // One at a time, in order: each starts after the one before it ended.
    let order = starts(&d);
    assert_eq!(
        order.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        [t1.as_str(), &t2, &t3]
    );
    let ends: Vec<u64> = [&t1, &t2]
        .iter()
        .map(|id| d.event_of("task_end", id)["timestamp"].as_u64().unwrap())
        .collect();
    assert!(
        order[1].1 >= ends[0] && order[2].1 >= ends[1],
        "{order:?} {ends:?}"
    );

    // SIGTERM with one task running and two waiting: the waiting ones are rejected.
    let t5 = id_of(&d.submit("SendMessage", "sleep 30"));
    d.wait_state(&t5, "TASK_STATE_WORKING", secs(5));
    let mut running = d.stream("tasks/resubscribe", json!({ "id": t5 }));
    assert_eq!(state_of(&running.result(secs(5))), "working");
    let mut waiting = d.stream(
        "message/stream",
        send_params("message/stream", "sixth", json!(null)),
    );
    let first = waiting.result(secs(5));
    assert_eq!(state_of(&first), "submitted");
    let t6 = id_of(&first);
    let (_, body) = d.envelope("SendMessage", &send_params("SendMessage", "seventh", json!(null)));
    let request = d.post_bytes(&body, &[("A2A-Version", "1.0")]);
    let addr = d.addr;
    let blocked = std::thread::spawn(move || common::exchange(addr, &request));
    common::door::wait_for(secs(3), "the blocking send to be queued", || {
        let l = d.result("ListTasks", json!({"status": "TASK_STATE_SUBMITTED"}));
        (l["totalSize"] == 2).then_some(())
    });
    assert_eq!(d.term().code(), Some(0));

    let ev = waiting.result(secs(5));
    assert_eq!(
        (ev["kind"].as_str(), state_of(&ev), ev["final"].as_bool()),
        (Some("status-update"), "rejected", Some(true)),
        "{ev}"
    );
    assert_eq!(ev["taskId"], t6.as_str());
    assert_eq!(status_text(&ev), ENDED);
    waiting.expect_end(secs(5));
    let answer = blocked.join().unwrap();
    assert_eq!(common::status_of(&answer), 200, "{answer}");
    let v: Value = serde_json::from_str(common::body_of(&answer)).unwrap();
    assert_eq!(state_of(&v["result"]["task"]), "TASK_STATE_REJECTED", "{v}");
    assert_eq!(status_text(&v["result"]["task"]), ENDED);
    // The running one was cut by the signal: failed, and its stream says so.
    let rest: Vec<Value> = running
        .rest(secs(5))
        .into_iter()
        .filter_map(|e| match e {
            Ev::Data(v) => Some(v["result"].clone()),
            Ev::Comment(_) => None,
        })
        .collect();
    let last = rest
        .last()
        .unwrap_or_else(|| panic!("no final event for the running task"));
    assert_eq!(
        (state_of(last), last["final"].as_bool()),
        ("failed", Some(true)),
        "{rest:?}"
    );
    assert!(status_text(last).contains("interrupted by signal 15"), "{last}");
    assert_eq!(d.event_of("task_end", &t5)["exit_status"], "failed");
    assert_eq!(starts(&d).len(), 4, "only the running task started");
    assert_eq!(d.trace().last().unwrap()["event_type"], "session_end");
}

#[test]
fn queue_with_exit_after_task_runs_its_tasks_then_ends_when_idle() {
    let t = TempDir::new("life-queue-exit");
    let mut d = queue_door(&t, 2, "exit", &[("MURMUR_A2A_TIMEOUT_SECS", "2")]);
    let mut s = d.stream(
        "message/stream",
        send_params("message/stream", "sleep 1", json!(null)),
    );
    let t1 = id_of(&s.result(secs(5)));
    let t2 = id_of(&d.submit("SendMessage", "second"));
    let events: Vec<Value> = s
        .rest(secs(10))
        .into_iter()
        .filter_map(|e| match e {
            Ev::Data(v) => Some(v["result"].clone()),
            Ev::Comment(_) => None,
        })
        .collect();
    assert_eq!(state_of(events.last().unwrap()), "completed", "{events:?}");
    let status = d.wait_exit(secs(15));
    assert_eq!(status.code(), Some(0));
    let order: Vec<String> = starts(&d).into_iter().map(|(id, _)| id).collect();
    assert_eq!(order, [t1.clone(), t2.clone()]);
    for id in [&t1, &t2] {
        assert_eq!(d.event_of("task_end", id)["exit_status"], "ok");
    }
    let trace = d.trace();
    let end = trace.last().unwrap();
    assert_eq!(
        (end["event_type"].as_str(), end["tasks"].as_u64()),
        (Some("session_end"), Some(2)),
        "{end}"
    );
    assert_eq!(d.workfile("out/result.txt").as_deref(), Some("done: second\n"));
}

#[test]
fn canceling_a_running_task_cuts_it_and_the_next_one_starts() {
    let t = TempDir::new("cancel-running");
    let mut d = queue_door(&t, 2, "sleep", &[]);
    let t1 = id_of(&d.submit("SendMessage", "sleep 30"));
    d.wait_state(&t1, "TASK_STATE_WORKING", secs(5));
    let t2 = id_of(&d.submit("SendMessage", "next"));
    let began = Instant::now();
    let canceled = d.result("CancelTask", json!({ "id": t1 }));
    assert!(began.elapsed() < secs(1), "{:?}", began.elapsed());
    assert_eq!(state_of(&canceled), "TASK_STATE_CANCELED", "{canceled}");
    assert_eq!(status_text(&canceled), "canceled by request");
    // The run is cut: the next task starts and completes within a couple of seconds.
    let done = d.wait_state(&t2, "TASK_STATE_COMPLETED", secs(3));
    assert!(began.elapsed() < secs(3), "{:?}", began.elapsed());
    assert_eq!(done["artifacts"][0]["parts"][0]["text"], "done: next\n");
    let t1_now = d.task(&t1);
    assert_eq!(state_of(&t1_now), "TASK_STATE_CANCELED", "{t1_now}");
    assert!(t1_now.get("artifacts").is_none(), "{t1_now}");
    assert_eq!(
        d.error("CancelTask", json!({ "id": t1 })),
        (-32002, "Task cannot be canceled: it is canceled".into())
    );
    assert_eq!(d.term().code(), Some(0));
    let end = d.event_of("task_end", &t1);
    assert_eq!(end["exit_status"], "canceled", "{end}");
    assert!(end["duration_ms"].as_u64().unwrap() < 5000, "{end}");
    assert_eq!(d.event_of("task_end", &t2)["exit_status"], "ok");
}

#[test]
fn canceling_a_waiting_task_means_it_never_starts() {
    let t = TempDir::new("cancel-pending");
    let mut d = queue_door(&t, 2, "sleep", &[]);
    let t1 = id_of(&d.submit("SendMessage", "sleep 2"));
    d.wait_state(&t1, "TASK_STATE_WORKING", secs(5));
    let t2 = id_of(&d.submit("message/send", "never runs"));
    let mut watch = d.stream("tasks/resubscribe", json!({ "id": t2 }));
    let first = watch.result(secs(5));
    assert_eq!(
        (first["kind"].as_str(), state_of(&first)),
        (Some("task"), "submitted"),
        "{first}"
    );
    let canceled = d.result("tasks/cancel", json!({ "id": t2 }));
    assert_eq!(
        (canceled["kind"].as_str(), state_of(&canceled)),
        (Some("task"), "canceled"),
        "{canceled}"
    );
    assert_eq!(status_text(&canceled), "canceled by request");
    let ev = watch.result(secs(5));
    assert_eq!(
        (ev["kind"].as_str(), state_of(&ev), ev["final"].as_bool()),
        (Some("status-update"), "canceled", Some(true)),
        "{ev}"
    );
    watch.expect_end(secs(5));
    assert_eq!(
        d.error("tasks/cancel", json!({ "id": t2 })),
        (-32002, "Task cannot be canceled: it is canceled".into())
    );
    let t3 = id_of(&d.submit("SendMessage", "after"));
    d.wait_state(&t3, "TASK_STATE_COMPLETED", secs(8));
    assert_eq!(state_of(&d.task(&t1)), "TASK_STATE_COMPLETED");
    assert_eq!(state_of(&d.task(&t2)), "TASK_STATE_CANCELED");
    assert_eq!(d.term().code(), Some(0));
    let order: Vec<String> = starts(&d).into_iter().map(|(id, _)| id).collect();
    assert_eq!(order, [t1, t3]);
    assert!(d
        .events("a2a_task_received")
        .iter()
        .all(|e| e["task_id"] != t2.as_str()));
}
