//! One `eval.jsonl` line: an `event_score` (one scorer's verdict on one session event) or a
//! `dataset_run` (one dataset case's verdict). Parsed strictly: a line that is not a JSON
//! object with a known `type` and that type's fields, of their types and in range, is
//! refused with why; nothing here panics on any bytes.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The longest scorer, event type, dataset or case name kept, in bytes.
pub const MAX_NAME: usize = 200;
/// The most scorers one `dataset_run` names.
pub const MAX_SCORES: usize = 256;

/// A scorer's verdict on one event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventScore {
    pub ts: u64,
    /// The turn the event belongs to (null for a session-level event).
    pub turn: Option<u64>,
    pub event_type: String,
    pub scorer: String,
    pub pass: bool,
    /// 0 to 1.
    pub score: f64,
    pub reason: Option<String>,
}

/// A dataset case's overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overall {
    Pass,
    Fail,
    /// No scorer applied to the case.
    NoScores,
}

/// One dataset case's run.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetRun {
    pub ts: u64,
    pub dataset_id: String,
    pub case_id: String,
    pub overall: Overall,
    /// Each scorer's score, 0 to 1.
    pub scores: BTreeMap<String, f64>,
}

/// A parsed line.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    EventScore(EventScore),
    DatasetRun(DatasetRun),
}

/// Why a line was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// Not a JSON object of a known record's shape.
    Malformed(String),
    /// A well-formed object whose `type` is not a record this reader knows.
    UnknownType(String),
}

/// Parse one line (without its newline).
pub fn parse(bytes: &[u8]) -> Result<Record, LineError> {
    let Ok(Value::Object(o)) = serde_json::from_slice::<Value>(bytes) else {
        return Err(LineError::Malformed("not a JSON object".into()));
    };
    let kind = o
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| LineError::Malformed("no string field 'type'".into()))?;
    match kind {
        "event_score" => event_score(&o).map(Record::EventScore),
        "dataset_run" => dataset_run(&o).map(Record::DatasetRun),
        other => Err(LineError::UnknownType(super::clean(other, 64))),
    }
}

fn bad(why: String) -> LineError {
    LineError::Malformed(why)
}

fn whole(o: &Map<String, Value>, key: &str) -> Result<u64, LineError> {
    o.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| bad(format!("'{key}' is not a whole number")))
}

fn name(o: &Map<String, Value>, key: &str) -> Result<String, LineError> {
    match o.get(key).and_then(Value::as_str) {
        Some(s) if !s.is_empty() && s.len() <= MAX_NAME => Ok(s.to_string()),
        Some(_) => Err(bad(format!("'{key}' is empty or longer than {MAX_NAME} bytes"))),
        None => Err(bad(format!("'{key}' is not a string"))),
    }
}

fn unit(v: Option<&Value>, key: &str) -> Result<f64, LineError> {
    match v.and_then(Value::as_f64) {
        Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
        _ => Err(bad(format!("'{key}' is not a number from 0 to 1"))),
    }
}

fn event_score(o: &Map<String, Value>) -> Result<EventScore, LineError> {
    let turn = match o.get("turn") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| bad("'turn' is not a whole number or null".into()))?,
        ),
    };
    let pass = match o.get("result").and_then(Value::as_str) {
        Some("pass") => true,
        Some("fail") => false,
        _ => return Err(bad("'result' is not \"pass\" or \"fail\"".into())),
    };
    let reason = match o.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(super::clean(s, 1000)),
        Some(_) => return Err(bad("'reason' is not a string".into())),
    };
    Ok(EventScore {
        ts: whole(o, "ts")?,
        turn,
        event_type: name(o, "event_type")?,
        scorer: name(o, "scorer")?,
        pass,
        score: unit(o.get("score"), "score")?,
        reason,
    })
}

fn dataset_run(o: &Map<String, Value>) -> Result<DatasetRun, LineError> {
    let overall = match o.get("overall").and_then(Value::as_str) {
        Some("pass") => Overall::Pass,
        Some("fail") => Overall::Fail,
        Some("no_scores") => Overall::NoScores,
        _ => return Err(bad("'overall' is not \"pass\", \"fail\" or \"no_scores\"".into())),
    };
    let Some(Value::Object(raw)) = o.get("scores") else {
        return Err(bad("'scores' is not an object".into()));
    };
    if raw.len() > MAX_SCORES {
        return Err(bad(format!("'scores' names more than {MAX_SCORES} scorers")));
    }
    let mut scores = BTreeMap::new();
    for (k, v) in raw {
        if k.is_empty() || k.len() > MAX_NAME {
            return Err(bad(format!(
                "a scorer name in 'scores' is empty or longer than {MAX_NAME} bytes"
            )));
        }
        scores.insert(
            k.clone(),
            unit(Some(v), &format!("scores.{}", super::clean(k, 64)))?,
        );
    }
    Ok(DatasetRun {
        ts: whole(o, "ts")?,
        dataset_id: name(o, "dataset_id")?,
        case_id: name(o, "case_id")?,
        overall,
        scores,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_record_types_parse_and_anything_else_says_why() {
        let e = parse(br#"{"type":"event_score","ts":5,"turn":2,"event_type":"tool_call","scorer":"tool_errors","result":"fail","score":0,"reason":"2 failed"}"#);
        assert_eq!(
            e,
            Ok(Record::EventScore(EventScore {
                ts: 5,
                turn: Some(2),
                event_type: "tool_call".into(),
                scorer: "tool_errors".into(),
                pass: false,
                score: 0.0,
                reason: Some("2 failed".into()),
            }))
        );
        let d = parse(br#"{"type":"dataset_run","ts":9,"dataset_id":"ds","case_id":"c1","overall":"pass","scores":{"exit_ok":1,"turn_limit":0.5}}"#);
        let Ok(Record::DatasetRun(d)) = d else {
            panic!("{d:?}")
        };
        assert_eq!((d.overall, d.scores.len()), (Overall::Pass, 2));
        assert_eq!(
            parse(br#"{"type":"verdict","ts":1}"#),
            Err(LineError::UnknownType("verdict".into()))
        );
        for (line, why) in [
            (&b"[1]"[..], "not a JSON object"),
            (br#"{"ts":1}"#, "no string field 'type'"),
            (br#"{"type":"event_score","ts":1,"event_type":"x","scorer":"s","result":"maybe","score":1}"#, "'result' is not \"pass\" or \"fail\""),
            (br#"{"type":"event_score","ts":1,"event_type":"x","scorer":"s","result":"pass","score":1.5}"#, "'score' is not a number from 0 to 1"),
            (br#"{"type":"event_score","ts":-1,"event_type":"x","scorer":"s","result":"pass","score":1}"#, "'ts' is not a whole number"),
            (br#"{"type":"dataset_run","ts":1,"dataset_id":"d","case_id":"c","overall":"pass","scores":{"a":"x"}}"#, "'scores.a' is not a number from 0 to 1"),
            (br#"{"type":"dataset_run","ts":1,"dataset_id":"","case_id":"c","overall":"pass","scores":{}}"#, "'dataset_id' is empty or longer than 200 bytes"),
        ] {
            assert_eq!(parse(line), Err(LineError::Malformed(why.into())), "{}", String::from_utf8_lossy(line));
        }
    }
}
