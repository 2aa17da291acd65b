//! The A2A task interface of agent capsules through the real `mur run --json`, against the
//! mock provider: tasks taken over the door run on the agent loop one at a time (`queue` +
//! `sleep`), their answer is the `response` artifact holding `out/result.txt`, in both protocol
//! generations (send, poll, blocking send, streams); hooks and trace per task. Cancellation
//! and the other lifecycles are in agent_door_lifecycle.rs.

use crate::common;

use common::agent::{events, keys};
use common::agent_door::door_kit::*;
use common::agent_door::{send_params_03, send_params_10};
use common::provider::{last_user_text, turns, Provider, Step};
use serde_json::{json, Value};
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// 1. queue + sleep: tasks over A2A on the agent loop.
// ---------------------------------------------------------------------------------------

/// SendMessage (returnImmediately) and GetTask over 1.0: three tasks run serially on the
/// agent loop, each against the mock provider, a fourth beyond the queue's depth is
/// rejected, each answer is the `response` artifact holding exactly `out/result.txt`, and
/// each task's result replaces the one before.
#[test]
fn queue_sleep_runs_a2a_tasks_serially_with_the_result_file_as_response_artifact() {
    let p = Provider::start(vec![
        Step::slow(Duration::from_secs(2), Step::text("alpha answer")),
        Step::slow(Duration::from_secs(2), Step::text("bravo answer")),
        Step::text("charlie answer"),
    ]);
    let w = world("door-queue", &p, &queue_sleep(2));
    let mut s = w.serve(None, &[]);
    let work = w.workdir(&s.sid);
    assert_eq!(s.announced["name"], "agent-x", "{}", s.announced);

    let params = send_params_10("task alpha", true);
    let a = s.result("SendMessage", params.clone(), &[]);
    let a = a["task"].clone();
    assert!(hex_id(&a["id"], "tsk_") && hex_id(&a["contextId"], "ctx_"), "{a}");
    assert!(rfc3339_z(&a["status"]["timestamp"]), "{a}");
    assert_eq!(
        a,
        json!({
            "id": a["id"],
            "contextId": a["contextId"],
            "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": a["status"]["timestamp"]},
            "history": [{
                "messageId": mid(&params),
                "role": "ROLE_USER",
                "parts": [{"text": "task alpha"}],
                "contextId": a["contextId"],
                "taskId": a["id"],
            }],
        })
    );
    let a_id = id(&a);
    // Alpha is on the agent loop (its model call is in flight): it is working.
    assert!(p.wait_requests(1, SETTLE), "alpha never reached the provider");
    assert_eq!(s.get_task(&a_id)["status"]["state"], "TASK_STATE_WORKING");
    // Two wait in the queue (depth 2); a third is rejected as busy.
    let b = submit(&s, "task bravo", &[]);
    let c = submit(&s, "task charlie", &[]);
    for t in [&b, &c] {
        assert_eq!(t["status"]["state"], "TASK_STATE_SUBMITTED", "{t}");
    }
    let d = submit(&s, "task delta", &[]);
    assert_eq!(d["status"]["state"], "TASK_STATE_REJECTED", "{d}");
    assert_eq!(d["status"]["message"]["role"], "ROLE_AGENT", "{d}");
    assert_eq!(d["status"]["message"]["parts"], json!([{"text": BUSY}]), "{d}");
    assert!(d.get("history").is_none() && d.get("artifacts").is_none(), "{d}");
    assert_eq!(s.get_task(&id(&d))["status"]["state"], "TASK_STATE_REJECTED");
    // Still waiting while alpha runs.
    assert_eq!(s.get_task(&id(&b))["status"]["state"], "TASK_STATE_SUBMITTED");

    // Bravo's model call arrives only after alpha ended; by then alpha is completed and
    // bravo's run has removed alpha's out/result.txt.
    assert!(p.wait_requests(2, SETTLE), "bravo never reached the provider");
    let a_done = s.get_task(&a_id);
    assert_eq!(a_done["status"]["state"], "TASK_STATE_COMPLETED", "{a_done}");
    assert!(a_done["status"].get("message").is_none(), "{a_done}");
    assert_eq!(response_10(&a_done), "alpha answer\n");
    assert!(
        !work.join("out/result.txt").exists(),
        "alpha's out/result.txt is left while bravo runs"
    );
    let b_done = s.settled(&id(&b), SETTLE);
    assert_eq!(b_done["status"]["state"], "TASK_STATE_COMPLETED", "{b_done}");
    assert_eq!(response_10(&b_done), "bravo answer\n");
    let c_done = s.settled(&id(&c), SETTLE);
    assert_eq!(c_done["status"]["state"], "TASK_STATE_COMPLETED", "{c_done}");
    assert_eq!(response_10(&c_done), "charlie answer\n");
    assert_eq!(
        w.result(&s.sid),
        "charlie answer\n",
        "the last task's answer replaced the others"
    );
    assert_eq!(
        c_done["history"][0]["parts"],
        json!([{"text": "task charlie"}]),
        "{c_done}"
    );

    // Each task went to the model as its own conversation, in order.
    let reqs = p.model_requests();
    let asked: Vec<String> = reqs.iter().map(last_user_text).collect();
    assert_eq!(asked, ["task alpha", "task bravo", "task charlie"]);

    // queue + sleep parks until SIGTERM, then ends ok.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        s.try_exit().is_none(),
        "a queue+sleep capsule exited by itself\n{}",
        s.both()
    );
    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let all = w.trace(&s.sid);
    assert_eq!(
        outline(&all),
        [
            "session_start",
            "a2a_task_received",
            "task_start",
            "task_end",
            "a2a_task_received",
            "task_start",
            "task_end",
            "a2a_task_received",
            "task_start",
            "task_end",
            "session_end"
        ],
        "{all:?}"
    );
    let started: Vec<&Value> = events(&all, "task_start")
        .into_iter()
        .map(|e| &e["task_id"])
        .collect();
    assert_eq!(started, [&a["id"], &b["id"], &c["id"]]);
    for e in events(&all, "task_end") {
        assert_eq!(e["exit_status"], "ok", "{e}");
        assert_eq!(e["turns"], 1, "{e}");
    }
    let end = events(&all, "session_end")[0];
    assert_eq!(end["exit_status"], "ok", "{end}");
    assert_eq!(end["turns"], 3, "{end}");
}

/// 0.3: a blocking `message/send` answers the completed task directly; `message/stream`
/// (and 1.0 `SendStreamingMessage`) show submitted → working → the response artifact →
/// completed (final), then the stream closes.
#[test]
fn queue_sleep_answers_a_blocking_0_3_send_and_streams_in_both_generations() {
    let p = Provider::start(vec![
        Step::text("blocking answer"),
        Step::text("streamed answer"),
        Step::text("streamed 1.0 answer"),
    ]);
    let w = world("door-03", &p, &queue_sleep(2));
    let mut s = w.serve(None, &[]);

    let params = send_params_03("block on me", true);
    let t = s.result("message/send", params.clone(), &[]);
    assert!(hex_id(&t["id"], "tsk_") && hex_id(&t["contextId"], "ctx_"), "{t}");
    assert!(rfc3339_z(&t["status"]["timestamp"]), "{t}");
    assert_eq!(
        t,
        json!({
            "kind": "task",
            "id": t["id"],
            "contextId": t["contextId"],
            "status": {"state": "completed", "timestamp": t["status"]["timestamp"]},
            "artifacts": [{
                "artifactId": format!("{}-response", id(&t)),
                "name": "response",
                "parts": [{"kind": "text", "text": "blocking answer\n"}],
            }],
            "history": [{
                "kind": "message",
                "messageId": mid(&params),
                "role": "user",
                "parts": [{"kind": "text", "text": "block on me"}],
                "contextId": t["contextId"],
                "taskId": t["id"],
            }],
        })
    );
    assert_eq!(w.result(&s.sid), "blocking answer\n");
    // tasks/get agrees.
    let got = s.result("tasks/get", json!({"id": id(&t)}), &[]);
    assert_eq!(got, t);

    // 0.3 stream, with a contextId of our own (echoed).
    let mut params = send_params_03("stream to me", true);
    params["message"]["contextId"] = json!("ctx-of-the-caller");
    let (raw, frames) = s.stream("message/stream", params, SETTLE);
    assert!(raw.starts_with("HTTP/1.1 200 "), "{raw}");
    assert!(raw.contains("content-type: text/event-stream\r\n"), "{raw}");
    assert_eq!(frames.len(), 4, "{raw}");
    for f in &frames {
        assert_eq!((&f["jsonrpc"], &f["id"]), (&json!("2.0"), &json!(9)), "{f}");
    }
    let r: Vec<&Value> = frames.iter().map(|f| &f["result"]).collect();
    let tid = r[0]["id"].as_str().unwrap().to_string();
    assert_eq!(r[0]["kind"], "task", "{}", r[0]);
    assert_eq!(r[0]["status"]["state"], "submitted", "{}", r[0]);
    assert_eq!(r[0]["contextId"], "ctx-of-the-caller", "{}", r[0]);
    assert_eq!(
        (&r[1]["kind"], &r[1]["status"]["state"], &r[1]["final"]),
        (&json!("status-update"), &json!("working"), &json!(false)),
        "{}",
        r[1]
    );
    assert_eq!(
        r[2],
        &json!({
            "kind": "artifact-update",
            "taskId": tid,
            "contextId": "ctx-of-the-caller",
            "artifact": {
                "artifactId": format!("{tid}-response"),
                "name": "response",
                "parts": [{"kind": "text", "text": "streamed answer\n"}],
            },
            "append": false,
            "lastChunk": true,
        })
    );
    assert_eq!(
        (&r[3]["kind"], &r[3]["status"]["state"], &r[3]["final"]),
        (&json!("status-update"), &json!("completed"), &json!(true)),
        "{}",
        r[3]
    );
    for u in [r[1], r[3]] {
        assert_eq!(
            (&u["taskId"], &u["contextId"]),
            (&json!(tid), &json!("ctx-of-the-caller")),
            "{u}"
        );
    }
    assert_eq!(w.result(&s.sid), "streamed answer\n");

    // 1.0 stream: the same order in 1.0 shapes.
    let (raw, frames) = s.stream(
        "SendStreamingMessage",
        send_params_10("stream 1.0", false),
        SETTLE,
    );
    assert_eq!(frames.len(), 4, "{raw}");
    let r: Vec<&Value> = frames.iter().map(|f| &f["result"]).collect();
    assert_eq!(r[0]["task"]["status"]["state"], "TASK_STATE_SUBMITTED", "{raw}");
    assert_eq!(
        r[1]["statusUpdate"]["status"]["state"], "TASK_STATE_WORKING",
        "{raw}"
    );
    assert_eq!(
        r[2]["artifactUpdate"]["artifact"]["parts"],
        json!([{"text": "streamed 1.0 answer\n"}]),
        "{raw}"
    );
    assert_eq!(
        r[3]["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{raw}"
    );
    assert!(
        r[3]["statusUpdate"].get("final").is_none(),
        "no `final` in 1.0: {raw}"
    );
    assert!(!raw.contains("\"kind\""), "no kind in 1.0: {raw}");

    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let all = w.trace(&s.sid);
    assert_eq!(events(&all, "task_start").len(), 3, "{all:?}");
    assert!(
        events(&all, "task_end").iter().all(|e| e["exit_status"] == "ok"),
        "{all:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 2. Hooks and trace per task.
// ---------------------------------------------------------------------------------------

/// Two A2A tasks: the task hooks fire once per task, the session hooks once; the trace has
/// one session_start/session_end, and per task an `a2a_task_received` with the message id
/// and the recorded origin, trust and traceparent, then `task_start` with `source: "a2a"`.
#[test]
fn task_hooks_fire_per_a2a_task_and_session_hooks_once_with_each_task_traced() {
    let p = Provider::start(vec![Step::text("first done"), Step::text("second done")]);
    let w = recorded_world("door-hooks", &p, &queue_sleep(2));
    let mut s = w.serve(None, &[]);
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    let first_params = send_params_10("first task", true);
    let first = s.result(
        "SendMessage",
        first_params.clone(),
        &[
            ("x-murmur-task-origin", "peer"),
            ("x-murmur-task-trust", "trusted"),
            ("traceparent", traceparent),
        ],
    )["task"]
        .clone();
    assert_eq!(
        s.settled(&id(&first), SETTLE)["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // 0.3, claiming an origin the wire may not set and a malformed traceparent.
    let second_params = send_params_03("the second task", true);
    let second = s.result(
        "message/send",
        second_params.clone(),
        &[
            ("x-murmur-task-origin", "user"),
            ("x-murmur-task-trust", "trusted"),
            ("traceparent", "00-not-a-trace-01"),
        ],
    );
    assert_eq!(second["status"]["state"], "completed", "{second}");
    assert_eq!(s.stop(), Some(0), "{}", s.both());

    let all = w.trace(&s.sid);
    assert_eq!(
        outline(&all),
        [
            "session_start",
            "a2a_task_received",
            "task_start",
            "task_end",
            "a2a_task_received",
            "task_start",
            "task_end",
            "session_end"
        ],
        "{all:?}"
    );
    assert!(events(&all, "hook_error").is_empty(), "{all:?}");
    let received = events(&all, "a2a_task_received");
    let starts = events(&all, "task_start");
    let mut want_keys = vec![
        "task_id",
        "context_id",
        "message_id",
        "origin",
        "trust",
        "traceparent_from_caller",
        "event_type",
        "session_id",
        "timestamp",
    ];
    want_keys.sort();
    for (i, (task, params, origin, trust, tp)) in [
        (&first, &first_params, "peer", "trusted", json!(traceparent)),
        (&second, &second_params, "event", "untrusted", Value::Null),
    ]
    .into_iter()
    .enumerate()
    {
        let r = received[i];
        assert_eq!(keys(r), want_keys, "{r}");
        assert_eq!(r["task_id"], task["id"], "{r}");
        assert_eq!(r["context_id"], task["contextId"], "{r}");
        assert_eq!(r["message_id"], json!(mid(params)), "{r}");
        assert_eq!(r["origin"], origin, "{r}");
        assert_eq!(r["trust"], trust, "{r}");
        assert_eq!(r["traceparent_from_caller"], tp, "{r}");
        assert_eq!(
            starts[i],
            &json!({
                "event_type": "task_start",
                "session_id": s.sid,
                "timestamp": starts[i]["timestamp"],
                "task_id": task["id"],
                "context_id": task["contextId"],
                "source": "a2a",
                "origin": origin,
                "trust": trust,
            })
        );
    }

    let (a, ac) = (
        first["id"].as_str().unwrap(),
        first["contextId"].as_str().unwrap(),
    );
    let (b, bc) = (
        second["id"].as_str().unwrap(),
        second["contextId"].as_str().unwrap(),
    );
    let start_a = format!(
        "task-start task={a} context={ac} source=a2a bytes={}",
        "first task".len()
    );
    let start_b = format!(
        "task-start task={b} context={bc} source=a2a bytes={}",
        "the second task".len()
    );
    let end_a = format!(
        "task-end status=ok turns=1 task={a} result_bytes={}",
        "first done".len()
    );
    let end_b = format!(
        "task-end status=ok turns=1 task={b} result_bytes={}",
        "second done".len()
    );
    assert_eq!(
        recorded(&w, &s.sid, "hook-state"),
        [
            "session-start".to_string(),
            start_a.clone(),
            "inference turn=1 decision=end_turn input_tokens=10 output_tokens=5".into(),
            end_a.clone(),
            start_b.clone(),
            "inference turn=1 decision=end_turn input_tokens=20 output_tokens=5".into(),
            end_b.clone(),
            "session-end".into(),
        ]
    );
    assert_eq!(recorded(&w, &s.sid, "start-state"), [start_a, start_b]);
    assert_eq!(recorded(&w, &s.sid, "end-state"), [end_a, end_b]);
}

/// A --task under `queue` runs first and is traced `source: "file"` (no
/// `a2a_task_received`); the A2A task after it is `a2a`; the door does not show the file task.
#[test]
fn a_file_task_is_traced_as_source_file_before_the_a2a_tasks() {
    let p = Provider::start(vec![
        Step::slow(Duration::from_secs(1), Step::text("file answer")),
        Step::text("a2a answer"),
    ]);
    let w = recorded_world("door-file", &p, &queue_sleep(1));
    let mut s = w.serve(Some("from the file"), &[]);
    let t = submit(&s, "from the door", &[]);
    assert_eq!(
        s.settled(&id(&t), SETTLE)["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // The file task holds the slot but is the operator's, not a client's: the door does
    // not show it (GetTask and CancelTask say not found, ListTasks leaves it out).
    let file_id = events(&w.trace(&s.sid), "task_start")[0]["task_id"]
        .as_str()
        .unwrap()
        .to_string();
    for method in ["GetTask", "CancelTask"] {
        let v = s.rpc(method, json!({"id": file_id}), &[]);
        assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
    }
    let listed = s.rpc("ListTasks", json!({}), &[]);
    assert!(!listed.to_string().contains(&file_id), "{listed}");
    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let all = w.trace(&s.sid);
    assert_eq!(
        outline(&all),
        [
            "session_start",
            "task_start",
            "task_end",
            "a2a_task_received",
            "task_start",
            "task_end",
            "session_end"
        ],
        "{all:?}"
    );
    let starts = events(&all, "task_start");
    assert_eq!(
        (&starts[0]["source"], &starts[1]["source"]),
        (&json!("file"), &json!("a2a"))
    );
    assert_eq!(starts[1]["task_id"], t["id"]);
    assert!(hex_id(&starts[0]["task_id"], "tsk_"), "{}", starts[0]);
    let recorded_starts = recorded(&w, &s.sid, "start-state");
    assert_eq!(recorded_starts.len(), 2, "{recorded_starts:?}");
    assert!(
        recorded_starts[0].starts_with(&format!("task-start task={file_id} "))
            && recorded_starts[0].ends_with(&format!(" source=file bytes={}", "from the file".len())),
        "{recorded_starts:?}"
    );
    let asked = [
        last_user_text(&p.model_requests()[0]),
        last_user_text(&p.model_requests()[1]),
    ];
    assert_eq!(asked, ["from the file", "from the door"]);
}

// ---------------------------------------------------------------------------------------
// 2. Files in and out (`a2a:`).
// ---------------------------------------------------------------------------------------

/// A file sent to an agent capsule lands in `in/<task id>/`, the model's first message names
/// it, and the file the agent's shell wrote to the output directory comes back as a file
/// artifact with its media type (1.0 GetTask).
#[test]
fn a_file_sent_to_an_agent_lands_is_named_to_the_model_and_its_output_file_comes_back() {
    let p = Provider::start(vec![
        Step::tool(
            "c1",
            "sh",
            json!({"command": "mkdir -p out/files && cp in/*/notes.txt out/files/summary.md"}),
        ),
        Step::text("copied"),
    ]);
    let w = common::agent::World::new("door-files");
    let mut spec = common::agent::Spec::new(common::agent::Drv::OpenAi, &p);
    spec.shell = vec!["sh".into()];
    let a2a = "a2a:\n  input:\n    parts: [text, file]\n    media_types: [text/plain]\n  output:\n    dir: out/files\n";
    manifest(&w, &spec, &format!("{}{a2a}", queue_sleep(1)));
    let mut s = w.serve(None, &[]);
    let params = json!({
        "message": {"messageId": "m-files", "role": "ROLE_USER", "parts": [
            {"text": "summarise"},
            {"raw": "b2sK", "mediaType": "text/plain", "filename": "../notes.txt"},
        ]},
        "configuration": {"returnImmediately": true},
    });
    let t = s.result("SendMessage", params, &[])["task"].clone();
    let tid = id(&t);
    let done = s.settled(&tid, SETTLE);
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let landed = w.workdir(&s.sid).join("in").join(&tid).join("notes.txt");
    assert_eq!(std::fs::read(&landed).unwrap(), b"ok\n");
    let first = &p.model_requests()[0];
    assert!(
        last_user_text(first).ends_with(&format!(
            "summarise\n\n## Files\n\n- in/{tid}/notes.txt (file part, text/plain, 3 bytes, sent as \"../notes.txt\")\n"
        )),
        "{}",
        last_user_text(first)
    );
    let arts = done["artifacts"].as_array().unwrap();
    assert_eq!(arts[0]["name"], "response");
    assert_eq!(
        arts[1],
        json!({"artifactId": format!("{tid}-file-1"), "name": "summary.md",
               "parts": [{"raw": "b2sK", "mediaType": "text/markdown", "filename": "summary.md"}]})
    );
    assert_eq!(arts.len(), 2, "{done}");
    assert_eq!(s.stop(), Some(0), "{}", s.both());
}

/// A2A multi-turn over one `contextId`, in both generations: a second task on the context
/// reaches the model after the first task's text and answer; a task on another context
/// reaches it alone; the trace's `task_start` says how many earlier tasks the model saw.
#[test]
fn a_task_on_a_context_continues_its_conversation_in_both_generations() {
    let p = Provider::start(vec![
        Step::text("Hello Ada"),
        Step::text("Your name is Ada"),
        Step::text("fresh"),
    ]);
    let w = world("door-context", &p, &queue_sleep(3));
    let mut s = w.serve(None, &[]);
    let mut first = send_params_10("my name is Ada", false);
    first["message"]["contextId"] = json!("ctx-conversation");
    let t = s.result("SendMessage", first, &[])["task"].clone();
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");
    let mut second = send_params_03("what is my name?", true);
    second["message"]["contextId"] = json!("ctx-conversation");
    let t = s.result("message/send", second, &[]);
    assert_eq!(t["status"]["state"], "completed", "{t}");
    let mut other = send_params_10("hi", false);
    other["message"]["contextId"] = json!("ctx-another");
    let t = s.result("SendMessage", other, &[])["task"].clone();
    assert_eq!(t["status"]["state"], "TASK_STATE_COMPLETED", "{t}");

    let turns = |i: usize| turns(&p.model_requests()[i]);
    assert_eq!(turns(0), ["user: my name is Ada"]);
    assert_eq!(
        turns(1),
        [
            "user: my name is Ada",
            "assistant: Hello Ada",
            "user: what is my name?"
        ]
    );
    assert_eq!(turns(2), ["user: hi"]);
    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let trace = w.trace(&s.sid);
    let starts: Vec<&Value> = events(&trace, "task_start")
        .into_iter()
        .filter(|e| e["source"] == "a2a")
        .collect();
    let earlier: Vec<Option<u64>> = starts.iter().map(|e| e["earlier_tasks"].as_u64()).collect();
    assert_eq!(earlier, [None, Some(1), None]);
}
