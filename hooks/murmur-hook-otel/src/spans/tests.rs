use super::*;
use crate::obs::{Obs, Session};

const SES: &str = "ses_0123456789abcdef0123456789abcdef";
const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const MS: u64 = 1_000_000;

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    span["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["key"] == key)
        .map(|a| &a["value"])
        .unwrap_or_else(|| panic!("no attribute {key} in {span}"))
}

fn start(t: u64, attempt: u32, traceparent: Option<&str>) -> Obs {
    Obs::Start {
        t,
        task_id: "task-1".into(),
        context_id: "ctx-1".into(),
        source: "a2a".into(),
        attempt,
        traceparent: traceparent.map(str::to_string),
    }
}

fn attempt() -> Vec<Obs> {
    vec![
        start(1000 * MS, 1, Some(TP)),
        Obs::Inference {
            t: 1100 * MS,
            turn: 1,
            decision: "tool_call".into(),
            model: "mock-1".into(),
            input: 120,
            output: 30,
            provider: Some("openai".into()),
        },
        Obs::Call {
            t: 1150 * MS,
            shell: true,
            turn: 1,
            name: "ls".into(),
            outcome: "ok".into(),
            exit: Some(2),
            ms: 40,
        },
        Obs::Call {
            t: 1160 * MS,
            shell: false,
            turn: 1,
            name: "echo".into(),
            outcome: "error".into(),
            exit: None,
            ms: 5,
        },
        Obs::Compaction {
            t: 1170 * MS,
            tokens: 900,
            threshold: 0.5,
        },
        Obs::Inference {
            t: 1300 * MS,
            turn: 2,
            decision: "end_turn".into(),
            model: "mock-1".into(),
            input: 200,
            output: 8,
            provider: None,
        },
    ]
}

#[test]
fn an_attempt_is_a_task_span_with_a_child_per_turn_and_call() {
    let mut session = Session::new(SES, 900 * MS);
    session.task_started(Some(TP));
    let end = AttemptEnd {
        t: 1310 * MS,
        task_id: "task-1",
        exit_status: "failed",
        turns: 2,
        truncated: false,
    };
    let spans = attempt_spans(&session, SES, &attempt(), &end);
    assert_eq!(spans.len(), 5, "the task, two turns, two calls");
    let task = &spans[0];
    assert_eq!(task["name"], "mur.task");
    assert_eq!(
        task["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736",
        "the caller's trace"
    );
    assert_eq!(task["parentSpanId"], json!(session.span_id));
    assert_eq!(task["startTimeUnixNano"], "1000000000");
    assert_eq!(task["endTimeUnixNano"], "1310000000");
    assert_eq!(task["status"], json!({"code": 2, "message": "failed"}));
    assert_eq!(attr(task, "murmur.task.turns"), &json!({"intValue": "2"}));
    assert_eq!(attr(task, "murmur.context.id"), &json!({"stringValue": "ctx-1"}));
    assert!(
        task.get("links").is_none(),
        "the caller is the session's parent: no link"
    );
    let events = task["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["name"], "compaction");
    assert_eq!(events[0]["timeUnixNano"], "1170000000");
    for s in &spans[1..] {
        assert_eq!(s["parentSpanId"], task["spanId"]);
        assert_eq!(s["traceId"], task["traceId"]);
    }
    let ids: std::collections::BTreeSet<&str> = spans.iter().map(|s| s["spanId"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 5, "distinct span ids");

    let turn1 = &spans[1];
    assert_eq!(turn1["name"], "chat mock-1");
    assert_eq!(turn1["kind"], 3);
    assert_eq!(turn1["startTimeUnixNano"], "1000000000", "from the task's start");
    assert_eq!(turn1["endTimeUnixNano"], "1100000000");
    assert_eq!(
        attr(turn1, "gen_ai.usage.input_tokens"),
        &json!({"intValue": "120"})
    );
    assert_eq!(
        attr(turn1, "gen_ai.usage.output_tokens"),
        &json!({"intValue": "30"})
    );
    assert_eq!(
        attr(turn1, "gen_ai.request.model"),
        &json!({"stringValue": "mock-1"})
    );
    assert_eq!(
        attr(turn1, "gen_ai.provider.name"),
        &json!({"stringValue": "openai"})
    );
    assert!(turn1.get("status").is_none());

    let shell = &spans[2];
    assert_eq!(shell["name"], "shell ls");
    assert_eq!(
        shell["startTimeUnixNano"], "1110000000",
        "its end less its duration"
    );
    assert_eq!(attr(shell, "process.exit.code"), &json!({"intValue": "2"}));
    assert_eq!(
        shell["status"],
        json!({"code": 2, "message": "ls exited with 2"}),
        "a non-zero exit is data to the model, but the command failed"
    );

    let tool = &spans[3];
    assert_eq!(tool["name"], "execute_tool echo");
    assert_eq!(attr(tool, "gen_ai.tool.name"), &json!({"stringValue": "echo"}));
    assert_eq!(tool["status"]["code"], 2);

    let turn2 = &spans[4];
    assert_eq!(
        turn2["startTimeUnixNano"], "1160000000",
        "from the last call's end"
    );
    assert_eq!(turn2["endTimeUnixNano"], "1300000000");
    assert!(
        !keys(turn2).contains(&"gen_ai.provider.name"),
        "no provider named: none claimed"
    );
}

/// The attribute keys of span `s`.
fn keys(s: &Value) -> Vec<&str> {
    s["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["key"].as_str())
        .collect()
}

#[test]
fn a_failed_model_call_claims_no_tokens_and_a_zero_exit_is_no_error() {
    let session = Session::new(SES, 0);
    let end = AttemptEnd {
        t: 50 * MS,
        task_id: "task-1",
        exit_status: "failed",
        turns: 1,
        truncated: false,
    };
    let obs = [
        start(10 * MS, 1, None),
        Obs::Call {
            t: 20 * MS,
            shell: true,
            turn: 1,
            name: "true".into(),
            outcome: "ok".into(),
            exit: Some(0),
            ms: 1,
        },
        Obs::Inference {
            t: 40 * MS,
            turn: 1,
            decision: "error".into(),
            model: "mock-1".into(),
            input: 0,
            output: 0,
            provider: Some("anthropic".into()),
        },
    ];
    let spans = attempt_spans(&session, SES, &obs, &end);
    let shell = &spans[1];
    assert!(shell.get("status").is_none(), "exit 0: {shell}");
    let turn = &spans[2];
    assert_eq!(turn["status"]["code"], 2);
    let k = keys(turn);
    assert!(
        !k.iter().any(|k| k.starts_with("gen_ai.usage.")),
        "no tokens were counted: none claimed: {k:?}"
    );
    assert!(k.contains(&"gen_ai.provider.name"), "{k:?}");
}

#[test]
fn a_reopen_is_an_event_and_another_callers_task_is_linked() {
    let mut session = Session::new(SES, 0);
    session.task_started(None);
    let end = AttemptEnd {
        t: 50,
        task_id: "task-1",
        exit_status: "ok",
        turns: 3,
        truncated: false,
    };
    let spans = attempt_spans(&session, SES, &[start(10, 2, Some(TP))], &end);
    assert_eq!(spans.len(), 1);
    let task = &spans[0];
    assert_eq!(
        task["traceId"], "0123456789abcdef0123456789abcdef",
        "the session's own trace"
    );
    assert_eq!(task["events"][0]["name"], "reopen");
    assert_eq!(
        task["links"],
        json!([{"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7"}])
    );
    assert!(task.get("status").is_none());
    let first = attempt_spans(&session, SES, &[start(10, 1, None)], &end);
    assert_ne!(
        first[0]["spanId"], task["spanId"],
        "each attempt is a span of its own"
    );
}

#[test]
fn a_lost_start_is_made_up_and_hostile_text_is_bounded() {
    let session = Session::new(SES, 0);
    let long = "x".repeat(10_000);
    let obs = [Obs::Call {
        t: 70,
        shell: false,
        turn: 1,
        name: format!("a\u{202e}\u{200b}\nb{long}"),
        outcome: "ok".into(),
        exit: None,
        ms: u64::MAX,
    }];
    let end = AttemptEnd {
        t: 80,
        task_id: "t",
        exit_status: "ok",
        turns: 1,
        truncated: false,
    };
    let spans = attempt_spans(&session, SES, &obs, &end);
    assert_eq!(spans[0]["startTimeUnixNano"], "70");
    let name = spans[1]["name"].as_str().unwrap();
    assert!(
        name.chars().count() <= MAX_TEXT + 1 && !name.contains('\n'),
        "{name}"
    );
    assert!(
        name.starts_with("execute_tool a b"),
        "no bidi override nor zero-width space: {name:?}"
    );
    assert_eq!(
        spans[1]["startTimeUnixNano"], "70",
        "a huge duration saturates, and no call starts before its task"
    );
    assert_eq!(
        attr(&spans[1], "murmur.duration_ms"),
        &json!({"intValue": i64::MAX.to_string()})
    );
}

#[test]
fn the_session_span_is_the_callers_child_and_the_body_names_the_capsule() {
    let mut session = Session::new(SES, 5);
    session.task_started(Some(TP));
    let s = session_span(&session, SES, 99, "failed");
    assert_eq!(s["parentSpanId"], "00f067aa0ba902b7");
    assert_eq!(s["kind"], 2);
    assert_eq!(s["status"]["code"], 2);
    assert_eq!(s["startTimeUnixNano"], "5");
    let own = Session::new(SES, 5);
    let s = session_span(&own, SES, 99, "ok");
    assert!(s.get("parentSpanId").is_none() && s.get("status").is_none());
    assert_eq!(double("x", f64::NAN)["value"]["doubleValue"], "NaN");
    assert_eq!(double("x", f64::INFINITY)["value"]["doubleValue"], "Infinity");
    assert_eq!(
        double("x", f64::NEG_INFINITY)["value"]["doubleValue"],
        "-Infinity"
    );

    let body: Value = serde_json::from_str(&export(
        &Resource {
            capsule: "demo",
            version: "1.2.0",
            session_id: SES,
        },
        vec![s],
    ))
    .unwrap();
    let rs = &body["resourceSpans"][0];
    assert_eq!(
        attr(&rs["resource"], "service.name"),
        &json!({"stringValue": "demo"})
    );
    assert_eq!(
        attr(&rs["resource"], "service.version"),
        &json!({"stringValue": "1.2.0"})
    );
    assert_eq!(
        attr(&rs["resource"], "murmur.session.id"),
        &json!({"stringValue": SES})
    );
    assert_eq!(rs["scopeSpans"][0]["scope"]["name"], "murmur-hook-otel");
    assert_eq!(rs["scopeSpans"][0]["spans"].as_array().unwrap().len(), 1);
}
