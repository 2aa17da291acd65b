//! Tests of `shapes`: both generations' exact JSON and the RFC 3339 conversions.

use super::*;
use crate::a2a::Generation::{V03, V10};

fn task(state: State) -> Task {
    Task {
        id: "tsk_1".into(),
        context_id: "ctx_1".into(),
        state,
        status_message: None,
        artifacts: vec![Artifact {
            artifact_id: "art_1".into(),
            name: RESPONSE_ARTIFACT.into(),
            text: "the answer".into(),
            part: None,
        }],
        history: vec![
            Msg {
                message_id: "m1".into(),
                role: Role::User,
                text: "hi".into(),
            },
            Msg {
                message_id: "m2".into(),
                role: Role::Agent,
                text: "hello".into(),
            },
        ],
        created_ms: 1_767_225_600_000,
        updated_ms: 1_767_225_601_234,
    }
}

const TS: &str = "2026-01-01T00:00:01.234Z";

#[test]
fn task_v10_exact() {
    assert_eq!(
        render_task(&task(State::Completed), V10, None),
        json!({
            "id": "tsk_1", "contextId": "ctx_1",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": TS},
            "artifacts": [{"artifactId": "art_1", "name": "response", "parts": [{"text": "the answer"}]}],
            "history": [
                {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}], "contextId": "ctx_1", "taskId": "tsk_1"},
                {"messageId": "m2", "role": "ROLE_AGENT", "parts": [{"text": "hello"}], "contextId": "ctx_1", "taskId": "tsk_1"},
            ],
        })
    );
}

#[test]
fn task_v03_exact() {
    assert_eq!(
        render_task(&task(State::InputRequired), V03, Some(1)),
        json!({
            "id": "tsk_1", "contextId": "ctx_1", "kind": "task",
            "status": {"state": "input-required", "timestamp": TS},
            "artifacts": [{"artifactId": "art_1", "name": "response", "parts": [{"kind": "text", "text": "the answer"}]}],
            "history": [
                {"kind": "message", "messageId": "m2", "role": "agent", "parts": [{"kind": "text", "text": "hello"}], "contextId": "ctx_1", "taskId": "tsk_1"},
            ],
        })
    );
}

#[test]
fn empty_lists_and_zero_history_left_out() {
    let mut t = task(State::Submitted);
    t.artifacts.clear();
    let v = render_task(&t, V10, Some(0));
    assert_eq!(
        v,
        json!({"id": "tsk_1", "contextId": "ctx_1", "status": {"state": "TASK_STATE_SUBMITTED", "timestamp": TS}})
    );
    assert_eq!(
        render_task(&t, V10, Some(u32::MAX))["history"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn send_result_wrapped_only_in_v10() {
    let mut t = task(State::Rejected);
    t.artifacts.clear();
    t.history.clear();
    t.status_message = Some(Msg {
        message_id: "m3".into(),
        role: Role::Agent,
        text: "task rejected: capsule is busy".into(),
    });
    assert_eq!(
        render_send_result(&t, V10, None),
        json!({"task": {"id": "tsk_1", "contextId": "ctx_1", "status": {
            "state": "TASK_STATE_REJECTED", "timestamp": TS,
            "message": {"messageId": "m3", "role": "ROLE_AGENT", "contextId": "ctx_1", "taskId": "tsk_1",
                "parts": [{"text": "task rejected: capsule is busy"}]}}}})
    );
    assert_eq!(
        render_send_result(&t, V03, None),
        json!({"kind": "task", "id": "tsk_1", "contextId": "ctx_1", "status": {
            "state": "rejected", "timestamp": TS,
            "message": {"kind": "message", "messageId": "m3", "role": "agent", "contextId": "ctx_1", "taskId": "tsk_1",
                "parts": [{"kind": "text", "text": "task rejected: capsule is busy"}]}}})
    );
}

#[test]
fn stream_events_both_generations() {
    let t = task(State::Working);
    assert_eq!(
        render_status_update(&t, V10),
        json!({"statusUpdate": {"taskId": "tsk_1", "contextId": "ctx_1",
            "status": {"state": "TASK_STATE_WORKING", "timestamp": TS}}})
    );
    assert_eq!(
        render_status_update(&t, V03),
        json!({"kind": "status-update", "taskId": "tsk_1", "contextId": "ctx_1", "final": false,
            "status": {"state": "working", "timestamp": TS}})
    );
    for (s, fin) in [
        (State::Completed, true),
        (State::Failed, true),
        (State::Canceled, true),
        (State::Rejected, true),
        (State::InputRequired, true),
        (State::Submitted, false),
    ] {
        assert_eq!(render_status_update(&task(s), V03)["final"], json!(fin));
    }
    let a = &t.artifacts[0];
    assert_eq!(
        render_artifact_update(&t, a, V10),
        json!({"artifactUpdate": {"taskId": "tsk_1", "contextId": "ctx_1", "append": false, "lastChunk": true,
            "artifact": {"artifactId": "art_1", "name": "response", "parts": [{"text": "the answer"}]}}})
    );
    assert_eq!(
        render_artifact_update(&t, a, V03),
        json!({"kind": "artifact-update", "taskId": "tsk_1", "contextId": "ctx_1", "append": false, "lastChunk": true,
            "artifact": {"artifactId": "art_1", "name": "response", "parts": [{"kind": "text", "text": "the answer"}]}})
    );
}

#[test]
fn no_kind_anywhere_in_v10() {
    fn has_kind(v: &Value) -> bool {
        match v {
            Value::Object(o) => o.contains_key("kind") || o.values().any(has_kind),
            Value::Array(a) => a.iter().any(has_kind),
            _ => false,
        }
    }
    let t = task(State::Completed);
    assert!(!has_kind(&render_send_result(&t, V10, None)));
    assert!(!has_kind(&render_status_update(&t, V10)));
    assert!(!has_kind(&render_artifact_update(&t, &t.artifacts[0], V10)));
    assert!(!has_kind(&render_list(&[&t], None, true, "", 50, 1)));
}

#[test]
fn list_shape() {
    let t = task(State::Completed);
    let v = render_list(&[&t], Some(0), false, "next", 1, 7);
    assert_eq!(
        v,
        json!({"tasks": [{"id": "tsk_1", "contextId": "ctx_1",
            "status": {"state": "TASK_STATE_COMPLETED", "timestamp": TS}}],
            "nextPageToken": "next", "pageSize": 1, "totalSize": 7})
    );
}

#[test]
fn state_names_round_trip() {
    for s in [
        State::Submitted,
        State::Working,
        State::Completed,
        State::Failed,
        State::Canceled,
        State::Rejected,
        State::InputRequired,
    ] {
        assert_eq!(State::from_wire(s.wire(V10)), Some(s));
        assert_eq!(State::from_wire(s.wire(V03)), Some(s));
    }
    assert_eq!(State::from_wire("TASK_STATE_AUTH_REQUIRED"), None);
    assert_eq!(State::from_wire(""), None);
    assert!(!State::InputRequired.is_terminal());
}

#[test]
fn rfc3339_known_dates() {
    for (secs, s) in [
        (0u64, "1970-01-01T00:00:00.000Z"),
        (951_782_400, "2000-02-29T00:00:00.000Z"),
        (1_709_164_800, "2024-02-29T00:00:00.000Z"),
        (4_107_456_000, "2100-02-28T00:00:00.000Z"),
        (4_107_542_400, "2100-03-01T00:00:00.000Z"),
        (1_767_225_600, "2026-01-01T00:00:00.000Z"),
        (946_684_799, "1999-12-31T23:59:59.000Z"),
        (2_147_483_647, "2038-01-19T03:14:07.000Z"),
    ] {
        assert_eq!(rfc3339(secs * 1000), s);
        assert_eq!(parse_rfc3339(s), Some(secs as i64 * 1000));
    }
    assert_eq!(rfc3339(1_767_225_600_999), "2026-01-01T00:00:00.999Z");
    assert_eq!(civil_from_days(-1), (1969, 12, 31));
    assert_eq!(days_from_civil(1969, 12, 31), -1);
    // Large values stay well-formed (no panic, no overflow).
    assert!(rfc3339(u64::MAX).ends_with('Z'));
}

#[test]
fn civil_days_round_trip() {
    for z in (-800_000i64..800_000).step_by(97) {
        let (y, m, d) = civil_from_days(z);
        assert!((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m));
        assert_eq!(days_from_civil(y, m, d), z);
    }
}

#[test]
fn parse_rfc3339_variants_and_rejects() {
    let base = 1_767_225_600_000i64;
    assert_eq!(parse_rfc3339("2026-01-01T00:00:00Z"), Some(base));
    assert_eq!(parse_rfc3339("2026-01-01T00:00:00.5Z"), Some(base + 500));
    assert_eq!(parse_rfc3339("2026-01-01T00:00:00.123456789Z"), Some(base + 123));
    assert_eq!(parse_rfc3339("2026-01-01T01:00:00+01:00"), Some(base));
    assert_eq!(parse_rfc3339("2025-12-31T23:00:00-01:00"), Some(base));
    for bad in [
        "",
        "2026-01-01",
        "2026-01-01T00:00:00",
        "2026-13-01T00:00:00Z",
        "2026-02-29T00:00:00Z",
        "2100-02-29T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:00:00.Z",
        "2026-01-01T00:00:00+0100",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01 00:00:00Z",
        "+026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Zjunk",
        "2026-01-01T00:00:00\u{e9}Z",
    ] {
        assert_eq!(parse_rfc3339(bad), None, "{bad}");
    }
    assert!(parse_rfc3339("2024-02-29T12:00:00Z").is_some());
}

#[test]
fn http_dates_are_imf_fixdate() {
    assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    assert_eq!(http_date(784_111_777_000), "Sun, 06 Nov 1994 08:49:37 GMT");
    assert_eq!(http_date(1_796_428_800_999), "Sat, 05 Dec 2026 00:00:00 GMT");
}

#[test]
fn a_file_artifact_and_a_message_answer_in_both_generations() {
    let mut t = task(State::Completed);
    t.artifacts.push(Artifact {
        artifact_id: "art_2".into(),
        name: "r.csv".into(),
        text: String::new(),
        part: Some(OutPart {
            name: "r.csv".into(),
            media_type: "text/csv".into(),
            carried: Carried::Bytes(b"hi".to_vec()),
        }),
    });
    assert_eq!(
        render_artifact(&t.artifacts[1], Generation::V10)["parts"],
        json!([{"raw": "aGk=", "mediaType": "text/csv", "filename": "r.csv"}])
    );
    assert_eq!(
        render_artifact(&t.artifacts[1], Generation::V03)["parts"],
        json!([{"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/csv", "name": "r.csv"}}])
    );
    let m = render_answer_message(&t, Generation::V10);
    assert_eq!(m["message"]["role"], "ROLE_AGENT");
    assert_eq!(m["message"]["parts"][0], json!({"text": "the answer"}));
    assert_eq!(m["message"]["parts"][1]["filename"], "r.csv");
    assert_eq!(m["message"]["contextId"], t.context_id);
    assert_eq!(m["message"]["taskId"], t.id);
    let m = render_answer_message(&t, Generation::V03);
    assert_eq!(
        (m["kind"].as_str(), m["role"].as_str()),
        (Some("message"), Some("agent"))
    );
    assert_eq!(m["parts"][0], json!({"kind": "text", "text": "the answer"}));
}

#[test]
fn a_data_part_and_a_file_by_reference_in_both_generations() {
    let art = |name: &str, media_type: &str, carried: Carried| Artifact {
        artifact_id: "a".into(),
        name: name.into(),
        text: String::new(),
        part: Some(OutPart {
            name: name.into(),
            media_type: media_type.into(),
            carried,
        }),
    };
    let data = art(
        "result.json",
        "application/json",
        Carried::Data(json!({"key": "value", "count": 42})),
    );
    assert_eq!(
        render_artifact(&data, V10)["parts"],
        json!([{"data": {"key": "value", "count": 42}, "mediaType": "application/json"}])
    );
    assert_eq!(
        render_artifact(&data, V03)["parts"],
        json!([{"kind": "data", "data": {"key": "value", "count": 42}}])
    );
    let link = art(
        "output.txt",
        "text/plain",
        Carried::Url("https://example.com/output.txt".into()),
    );
    assert_eq!(
        render_artifact(&link, V10)["parts"],
        json!([{"url": "https://example.com/output.txt", "mediaType": "text/plain", "filename": "output.txt"}])
    );
    assert_eq!(
        render_artifact(&link, V03)["parts"],
        json!([{"kind": "file", "file": {"uri": "https://example.com/output.txt", "mimeType": "text/plain", "name": "output.txt"}}])
    );
}
