//! The TCK capsule (examples/tck, run as committed through the real `mur run`): each
//! messageId prefix the A2A TCK sends gets the scripted agent's answer over JSON-RPC, in both
//! generations: text answers, a `text/plain` file artifact first and alone (inline or by
//! reference), a data artifact, a Message answer for one prefix beside Tasks for the others
//! (`out/message.txt`), a failed task, a slow task that can be canceled, and the default
//! echo of the id. Without a
//! messageId route (a `--task` run) the first word of `task.md` is the key. A run that
//! leaves `out/ask.txt` (the `input-required` prefix) waits for its caller: the answer on
//! the task runs it again with the answer in `task.md` and the answer's messageId; no
//! answer within `ask.timeout_secs` fails it; a cancel cancels it.

use crate::common;

use common::door::{start, task_of, Door};
use common::TempDir;
use serde_json::{json, Value};
use std::time::Duration;

fn door(t: &TempDir) -> Door {
    let dir = t.path().join("tck");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["capsule.wasm", "murmur.yaml"] {
        std::fs::copy(common::capsule::repo(&format!("examples/tck/{f}")), dir.join(f)).unwrap();
    }
    start(t, &dir, &[], &[])
}

/// A blocking 1.0 send whose messageId is `id`; the task.
fn send10(d: &Door, id: &str) -> Value {
    let r = d.result(
        "SendMessage",
        json!({"message": {"messageId": id, "role": "ROLE_USER", "parts": [{"text": "TCK artifact test"}]}}),
    );
    task_of(&r).clone()
}

#[test]
fn each_tck_prefix_gets_the_scripted_answer_in_both_generations() {
    let t = TempDir::new("tck-capsule");
    let d = door(&t);

    for (prefix, text) in [
        ("tck-complete-task-1", "Hello from TCK"),
        ("tck-artifact-text-1", "Generated text content"),
        ("tck-stream-001-1", "Stream hello from TCK"),
        ("tck-stream-003-1", "Stream task lifecycle"),
        ("tck-stream-ordering-001-1", "Ordered output"),
        ("tck-stream-artifact-text-1", "Streamed text content"),
        ("other-1", "Unhandled messageId prefix: other-1"),
    ] {
        let task = send10(&d, prefix);
        assert_eq!(
            task["status"]["state"], "TASK_STATE_COMPLETED",
            "{prefix}: {task}"
        );
        assert_eq!(task["artifacts"].as_array().unwrap().len(), 1, "{prefix}: {task}");
        assert_eq!(task["artifacts"][0]["parts"], json!([{"text": text}]), "{prefix}");
    }

    // A Message for this prefix only (the run left out/message.txt), over a blocking send.
    let r = d.result(
        "SendMessage",
        json!({"message": {"messageId": "tck-message-response-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}),
    );
    assert_eq!(r["message"]["role"], "ROLE_AGENT", "{r}");
    assert_eq!(
        r["message"]["parts"],
        json!([{"text": "Direct message response"}]),
        "{r}"
    );
    assert!(r.get("task").is_none(), "{r}");

    // A file artifact, first and alone (an empty answer beside files is no artifact).
    for prefix in ["tck-artifact-file-1", "tck-stream-artifact-file-1"] {
        let task = send10(&d, prefix);
        let id = task["id"].as_str().unwrap();
        assert_eq!(
            task["artifacts"],
            json!([{"artifactId": format!("{id}-file-1"), "name": "output.txt",
                    "parts": [{"raw": "dGNr", "mediaType": "text/plain", "filename": "output.txt"}]}]),
            "{prefix}"
        );
    }
    // By reference (out/links), and a data part (out/data).
    let task = send10(&d, "tck-artifact-file-url-1");
    assert_eq!(
        task["artifacts"][0]["parts"],
        json!([{"url": "https://example.com/output.txt", "mediaType": "text/plain", "filename": "output.txt"}]),
        "{task}"
    );
    let task = send10(&d, "tck-artifact-data-1");
    assert_eq!(
        task["artifacts"][0]["parts"],
        json!([{"data": {"key": "value", "count": 42}, "mediaType": "application/json"}]),
        "{task}"
    );
    assert_eq!(task["artifacts"].as_array().unwrap().len(), 1, "{task}");

    // A rejected task fails.
    let task = send10(&d, "tck-reject-task-1");
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");

    // 0.3 shapes: the same routing.
    let r = d.result(
        "message/send",
        json!({"message": {"kind": "message", "messageId": "tck-artifact-file-03", "role": "user",
                           "parts": [{"kind": "text", "text": "x"}]}}),
    );
    assert_eq!(r["status"]["state"], "completed", "{r}");
    assert_eq!(
        r["artifacts"][0]["parts"],
        json!([{"kind": "file", "file": {"bytes": "dGNr", "mimeType": "text/plain", "name": "output.txt"}}])
    );
    for (id, part) in [
        (
            "tck-artifact-data-03",
            json!({"kind": "data", "data": {"key": "value", "count": 42}}),
        ),
        (
            "tck-artifact-file-url-03",
            json!({"kind": "file", "file": {"uri": "https://example.com/output.txt", "mimeType": "text/plain", "name": "output.txt"}}),
        ),
    ] {
        let r = d.result(
            "message/send",
            json!({"message": {"kind": "message", "messageId": id, "role": "user",
                               "parts": [{"kind": "text", "text": "x"}]}}),
        );
        assert_eq!(r["artifacts"][0]["parts"], json!([part]), "{id}: {r}");
    }
    let r = d.result(
        "message/send",
        json!({"message": {"kind": "message", "messageId": "tck-message-response-03", "role": "user",
                           "parts": [{"kind": "text", "text": "x"}]}}),
    );
    assert_eq!(
        (r["kind"].as_str(), r["parts"].clone()),
        (
            Some("message"),
            json!([{"kind": "text", "text": "Direct message response"}])
        ),
        "{r}"
    );
    let r = d.result(
        "message/send",
        json!({"message": {"kind": "message", "messageId": "tck-complete-task-03", "role": "user",
                           "parts": [{"kind": "text", "text": "x"}]}}),
    );
    assert_eq!(
        r["artifacts"][0]["parts"],
        json!([{"kind": "text", "text": "Hello from TCK"}])
    );
}

#[test]
fn a_slow_tck_task_can_be_canceled() {
    let t = TempDir::new("tck-slow");
    let d = door(&t);
    let r = d.result(
        "SendMessage",
        json!({"message": {"messageId": "tck-slow-1", "role": "ROLE_USER", "parts": [{"text": "wait"}]},
               "configuration": {"blocking": false}}),
    );
    let id = task_of(&r)["id"].as_str().unwrap().to_string();
    d.wait_state(&id, "TASK_STATE_WORKING", Duration::from_secs(10));
    let c = d.result("CancelTask", json!({ "id": id }));
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED", "{c}");
    let got = d.wait_state(&id, "TASK_STATE_CANCELED", Duration::from_secs(10));
    assert_eq!(got["status"]["state"], "TASK_STATE_CANCELED");
}

#[test]
fn an_input_required_task_waits_for_its_caller_and_runs_again_with_the_answer() {
    let t = TempDir::new("tck-ask");
    let d = door(&t);
    let task = send10(&d, "tck-input-required-1");
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task}");
    assert_eq!(
        task["status"]["message"]["parts"],
        json!([{"text": "The TCK capsule needs more input: answer on this task."}])
    );
    let id = task["id"].as_str().unwrap().to_string();
    let ctx = task["contextId"].as_str().unwrap().to_string();

    // A file on an answer would land nowhere: refused, and the task still waits.
    let (code, msg) = d.error(
        "SendMessage",
        json!({"message": {"messageId": "tck-complete-task-f", "role": "ROLE_USER", "taskId": id,
                           "parts": [{"text": "see file"}, {"raw": "dGNr", "mediaType": "text/plain", "filename": "a.txt"}]}}),
    );
    assert_eq!(
        (code, msg.as_str()),
        (
            -32005,
            format!("Content type not supported: an answer to task {id} is text or data; send files in a new task")
                .as_str()
        )
    );

    // The answer (another prefix) runs the capsule again, routed by the answer's id.
    let r = d.result(
        "SendMessage",
        json!({"message": {"messageId": "tck-complete-task-2", "role": "ROLE_USER", "taskId": id,
                           "contextId": ctx, "parts": [{"text": "here it is"}]}}),
    );
    let done = task_of(&r);
    assert_eq!(done["id"], id.as_str());
    assert_eq!(done["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(done["artifacts"][0]["parts"], json!([{"text": "Hello from TCK"}]));
    assert_eq!(
        d.workfile("task.md").as_deref(),
        Some("TCK artifact test\n\n## Answer\n\nhere it is\n")
    );
    let asked = d.event_of("input_requested", &id);
    assert_eq!(
        asked["question"],
        "The TCK capsule needs more input: answer on this task."
    );
    assert_eq!(asked["timeout_secs"], 2);
    assert_eq!(d.event_of("input_received", &id)["outcome"], "answered");
    let got = d.result("GetTask", json!({"id": id, "history_length": 1}));
    assert_eq!(got["history"].as_array().unwrap().len(), 1, "{got}");

    // Unanswered, it fails after ask.timeout_secs (2 s); canceled, it is canceled.
    let late = send10(&d, "tck-input-required-3");
    let late_id = late["id"].as_str().unwrap();
    let failed = d.wait_state(late_id, "TASK_STATE_FAILED", Duration::from_secs(10));
    assert_eq!(
        failed["status"]["message"]["parts"],
        json!([{"text": "no answer within 2 s"}])
    );
    let waiting = send10(&d, "tck-input-required-4");
    let c = d.result("CancelTask", json!({"id": waiting["id"]}));
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED", "{c}");
}

#[test]
fn a_run_that_asks_without_ask_in_its_manifest_fails_its_task() {
    let t = TempDir::new("tck-no-ask");
    let dir = common::capsule::capsule(
        &t,
        "examples/tck/capsule.wasm",
        "lifecycle: {task_acceptance: queue, after_task: sleep}\n",
    );
    let d = start(&t, &dir, &[], &[]);
    let task = send10(&d, "tck-input-required-1");
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    assert_eq!(
        task["status"]["message"]["parts"],
        json!([{"text": "the run left out/ask.txt, and the manifest declares no ask"}])
    );
    // The next task is not taken for a question: the file went with the failed task.
    let next = send10(&d, "tck-complete-task-2");
    assert_eq!(next["status"]["state"], "TASK_STATE_COMPLETED", "{next}");
}

/// A push config on the message that answers a waiting task joins the task's webhooks from
/// there on: the webhook hears the task work again and complete, with its credentials.
#[test]
fn a_push_config_on_the_answering_message_hears_the_rest_of_the_task() {
    let t = TempDir::new("tck-ask-push");
    let hook = common::webhook::Webhook::start();
    let dir = common::capsule::capsule(
        &t,
        "examples/tck/capsule.wasm",
        &format!(
            "lifecycle: {{task_acceptance: queue, after_task: sleep}}\nask:\n  timeout_secs: 10\na2a:\n  push:\n    allow: [http://127.0.0.1:{}]\n",
            hook.port
        ),
    );
    let d = start(&t, &dir, &[], &[]);
    let task = send10(&d, "tck-input-required-1");
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{task}");
    let id = task["id"].as_str().unwrap().to_string();
    let r = d.result(
        "SendMessage",
        json!({"message": {"messageId": "tck-complete-task-2", "role": "ROLE_USER", "taskId": id,
                           "parts": [{"text": "here it is"}]},
               "configuration": {"taskPushNotificationConfig": {"url": hook.url("/answer"),
                   "authentication": {"scheme": "Bearer", "credentials": "answer-secret"}}}}),
    );
    assert_eq!(task_of(&r)["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    let hits = hook.wait("/answer", Duration::from_secs(10), |h| {
        h.body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    });
    assert!(hits
        .iter()
        .all(|h| h.header("authorization") == Some("Bearer answer-secret")));
    let last = hits.last().unwrap();
    assert_eq!(
        last.body["statusUpdate"]["taskId"],
        id.as_str(),
        "{:?}",
        last.body
    );
}
