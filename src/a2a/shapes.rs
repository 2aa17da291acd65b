//! The protocol-neutral task model and its exact JSON in both A2A generations (1.0:
//! ProtoJSON, `TASK_STATE_*`, `ROLE_*`, no `kind`; 0.3: `kind` fields, lowercase states,
//! `final` on status updates), plus RFC 3339 timestamps from and to unix milliseconds.

use super::Generation;
use serde_json::{json, Map, Value};

/// The name of the artifact that carries a task's answer.
pub const RESPONSE_ARTIFACT: &str = "response";

/// A task's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Submitted,
    Working,
    Completed,
    Failed,
    Canceled,
    Rejected,
    InputRequired,
}

impl State {
    /// The state's name in `gen`.
    pub fn wire(self, gen: Generation) -> &'static str {
        match gen {
            Generation::V10 => match self {
                State::Submitted => "TASK_STATE_SUBMITTED",
                State::Working => "TASK_STATE_WORKING",
                State::Completed => "TASK_STATE_COMPLETED",
                State::Failed => "TASK_STATE_FAILED",
                State::Canceled => "TASK_STATE_CANCELED",
                State::Rejected => "TASK_STATE_REJECTED",
                State::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            },
            Generation::V03 => match self {
                State::Submitted => "submitted",
                State::Working => "working",
                State::Completed => "completed",
                State::Failed => "failed",
                State::Canceled => "canceled",
                State::Rejected => "rejected",
                State::InputRequired => "input-required",
            },
        }
    }

    /// The state named `s` in either generation; `None` for anything else.
    pub fn from_wire(s: &str) -> Option<State> {
        [
            State::Submitted,
            State::Working,
            State::Completed,
            State::Failed,
            State::Canceled,
            State::Rejected,
            State::InputRequired,
        ]
        .into_iter()
        .find(|st| st.wire(Generation::V10) == s || st.wire(Generation::V03) == s)
    }

    /// No further transition: completed, failed, canceled, rejected.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            State::Completed | State::Failed | State::Canceled | State::Rejected
        )
    }

    /// The stream ends after this state (0.3's `final`): terminal or input-required.
    pub fn is_final(self) -> bool {
        self.is_terminal() || self == State::InputRequired
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Agent,
}

impl Role {
    pub fn wire(self, gen: Generation) -> &'static str {
        match (gen, self) {
            (Generation::V10, Role::User) => "ROLE_USER",
            (Generation::V10, Role::Agent) => "ROLE_AGENT",
            (Generation::V03, Role::User) => "user",
            (Generation::V03, Role::Agent) => "agent",
        }
    }
}

/// A text message of a task (history entry or status message).
#[derive(Debug, Clone, PartialEq)]
pub struct Msg {
    pub message_id: String,
    pub role: Role,
    pub text: String,
}

/// An artifact: text, or (when `part` is set) one file or data part.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub artifact_id: String,
    pub name: String,
    pub text: String,
    pub part: Option<OutPart>,
}

/// What a task left in its output directories, sent back as one artifact's part.
#[derive(Debug, Clone, PartialEq)]
pub struct OutPart {
    /// Its path beneath its output directory.
    pub name: String,
    pub media_type: String,
    pub carried: Carried,
}

/// What an [`OutPart`] carries.
#[derive(Debug, Clone, PartialEq)]
pub enum Carried {
    /// A file's bytes, sent inline.
    Bytes(Vec<u8>),
    /// A file by reference: an absolute `http(s)` URL.
    Url(String),
    /// A data part: one JSON object.
    Data(Value),
}

impl OutPart {
    /// The bytes it holds in the task table (a data part's parsed tree, not its text: a
    /// JSON array of small numbers takes ~16 times its text in memory).
    pub fn weight(&self) -> usize {
        self.name.len()
            + match &self.carried {
                Carried::Bytes(b) => b.len(),
                Carried::Url(u) => u.len(),
                Carried::Data(v) => value_weight(v),
            }
    }
}

/// The memory a parsed JSON value holds, estimated: each node's own size, its strings'
/// bytes and each object key's. (The depth is serde_json's parse limit, 128.)
fn value_weight(v: &Value) -> usize {
    let node = std::mem::size_of::<Value>();
    node + match v {
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(value_weight).sum(),
        Value::Object(o) => o.iter().map(|(k, v)| node + k.len() + value_weight(v)).sum(),
        _ => 0,
    }
}

/// A file or data part. A file: 1.0 `raw` (base64) or `url`, with `mediaType` and
/// `filename`; 0.3 `kind: file` with `file.bytes` or `file.uri`, `file.mimeType` and
/// `file.name`. Data: 1.0 `data`; 0.3 `kind: data`.
fn out_part(gen: Generation, f: &OutPart) -> Value {
    match (&f.carried, gen) {
        (Carried::Bytes(b), Generation::V10) => {
            json!({"raw": crate::b64::encode_standard(b), "mediaType": f.media_type, "filename": f.name})
        }
        (Carried::Bytes(b), Generation::V03) => json!({"kind": "file", "file": {
            "bytes": crate::b64::encode_standard(b), "mimeType": f.media_type, "name": f.name}}),
        (Carried::Url(u), Generation::V10) => {
            json!({"url": u, "mediaType": f.media_type, "filename": f.name})
        }
        (Carried::Url(u), Generation::V03) => {
            json!({"kind": "file", "file": {"uri": u, "mimeType": f.media_type, "name": f.name}})
        }
        (Carried::Data(v), Generation::V10) => json!({"data": v, "mediaType": f.media_type}),
        (Carried::Data(v), Generation::V03) => json!({"kind": "data", "data": v}),
    }
}

fn artifact_part(gen: Generation, a: &Artifact) -> Value {
    match &a.part {
        Some(f) => out_part(gen, f),
        None => text_part(gen, &a.text),
    }
}

/// A task as the door keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    pub context_id: String,
    pub state: State,
    pub status_message: Option<Msg>,
    pub artifacts: Vec<Artifact>,
    pub history: Vec<Msg>,
    pub created_ms: u64,
    /// When the state last changed: the status `timestamp`.
    pub updated_ms: u64,
}

fn text_part(gen: Generation, text: &str) -> Value {
    match gen {
        Generation::V10 => json!({"text": text}),
        Generation::V03 => json!({"kind": "text", "text": text}),
    }
}

/// A message of task `task_id` in context `context_id`.
pub fn render_message(m: &Msg, task_id: &str, context_id: &str, gen: Generation) -> Value {
    let mut v = json!({
        "messageId": m.message_id,
        "role": m.role.wire(gen),
        "parts": [text_part(gen, &m.text)],
        "contextId": context_id,
        "taskId": task_id,
    });
    if gen == Generation::V03 {
        v["kind"] = json!("message");
    }
    v
}

/// An artifact (no `kind` in either generation: 0.3's Artifact has none).
pub fn render_artifact(a: &Artifact, gen: Generation) -> Value {
    json!({
        "artifactId": a.artifact_id,
        "name": a.name,
        "parts": [artifact_part(gen, a)],
    })
}

/// A completed task's answer as a Message of the agent (`a2a.answer: message`): the
/// artifacts' parts in order, in the task's context. The result of a send: 1.0
/// `{"message": Message}`, 0.3 the bare Message; and a stream's one event.
pub fn render_answer_message(t: &Task, gen: Generation) -> Value {
    let parts: Vec<Value> = t.artifacts.iter().map(|a| artifact_part(gen, a)).collect();
    let mut m = json!({
        "messageId": format!("msg_{}", t.id.trim_start_matches("tsk_")),
        "role": Role::Agent.wire(gen),
        "parts": parts,
        "contextId": t.context_id,
        // The task stays in the table (GetTask, ListTasks): the answer names it.
        "taskId": t.id,
    });
    match gen {
        Generation::V10 => json!({"message": m}),
        Generation::V03 => {
            m["kind"] = json!("message");
            m
        }
    }
}

/// A task's `TaskStatus`.
pub fn render_status(t: &Task, gen: Generation) -> Value {
    let mut s = json!({"state": t.state.wire(gen), "timestamp": rfc3339(t.updated_ms)});
    if let Some(m) = &t.status_message {
        s["message"] = render_message(m, &t.id, &t.context_id, gen);
    }
    s
}

/// The bare `Task` (GetTask/CancelTask results, 0.3 send results). `history_length`:
/// `None` all of it, `Some(n)` the last `n` messages. Empty lists are left out.
pub fn render_task(t: &Task, gen: Generation, history_length: Option<u32>) -> Value {
    let mut v = Map::new();
    v.insert("id".into(), json!(t.id));
    v.insert("contextId".into(), json!(t.context_id));
    v.insert("status".into(), render_status(t, gen));
    if !t.artifacts.is_empty() {
        let a: Vec<Value> = t.artifacts.iter().map(|a| render_artifact(a, gen)).collect();
        v.insert("artifacts".into(), Value::Array(a));
    }
    let keep = history_length.map_or(t.history.len(), |n| (n as usize).min(t.history.len()));
    let h: Vec<Value> = t.history[t.history.len() - keep..]
        .iter()
        .map(|m| render_message(m, &t.id, &t.context_id, gen))
        .collect();
    if !h.is_empty() {
        v.insert("history".into(), Value::Array(h));
    }
    if gen == Generation::V03 {
        v.insert("kind".into(), json!("task"));
    }
    Value::Object(v)
}

/// A send result, and a stream's first event: 1.0 `{"task": Task}`, 0.3 the bare task.
pub fn render_send_result(t: &Task, gen: Generation, history_length: Option<u32>) -> Value {
    let task = render_task(t, gen, history_length);
    match gen {
        Generation::V10 => json!({"task": task}),
        Generation::V03 => task,
    }
}

/// A status-update stream event for the task's current status.
pub fn render_status_update(t: &Task, gen: Generation) -> Value {
    let mut ev = json!({
        "taskId": t.id,
        "contextId": t.context_id,
        "status": render_status(t, gen),
    });
    match gen {
        Generation::V10 => json!({"statusUpdate": ev}),
        Generation::V03 => {
            ev["final"] = json!(t.state.is_final());
            ev["kind"] = json!("status-update");
            ev
        }
    }
}

/// An artifact-update stream event (the whole artifact in one chunk).
pub fn render_artifact_update(t: &Task, a: &Artifact, gen: Generation) -> Value {
    let mut ev = json!({
        "taskId": t.id,
        "contextId": t.context_id,
        "artifact": render_artifact(a, gen),
        "append": false,
        "lastChunk": true,
    });
    match gen {
        Generation::V10 => json!({"artifactUpdate": ev}),
        Generation::V03 => {
            ev["kind"] = json!("artifact-update");
            ev
        }
    }
}

/// A 1.0 `ListTasksResponse` (there is no ListTasks in 0.3).
pub fn render_list(
    tasks: &[&Task],
    history_length: Option<u32>,
    include_artifacts: bool,
    next_page_token: &str,
    page_size: u32,
    total_size: usize,
) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|t| {
            let mut v = render_task(t, Generation::V10, history_length);
            if !include_artifacts {
                if let Some(o) = v.as_object_mut() {
                    o.remove("artifacts");
                }
            }
            v
        })
        .collect();
    json!({
        "tasks": tasks,
        "nextPageToken": next_page_token,
        "pageSize": page_size,
        "totalSize": total_size,
    })
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month, day) → days since 1970-01-01, the inverse of `civil_from_days`.
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix milliseconds as an HTTP date (RFC 9110's IMF-fixdate): `Thu, 01 Jan 1970 00:00:00 GMT`.
pub fn http_date(ms: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = (ms / 1000) as i64;
    let days = secs.div_euclid(86_400);
    let (y, mo, d) = civil_from_days(days);
    let t = secs.rem_euclid(86_400);
    format!(
        "{}, {d:02} {} {y:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        MONTHS[(mo - 1) as usize],
        t / 3600,
        t / 60 % 60,
        t % 60
    )
}

/// Unix milliseconds as RFC 3339 UTC with milliseconds: `2026-01-01T00:00:00.000Z`.
pub fn rfc3339(ms: u64) -> String {
    let secs = (ms / 1000) as i64;
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60,
        ms % 1000
    )
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// An RFC 3339 timestamp (`Z` or `±HH:MM`, optional fraction) as unix milliseconds;
/// `None` when malformed or out of range. Fractions beyond milliseconds are truncated.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b.len() > 40 || !s.is_ascii() {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let t = &s[r];
        t.bytes().all(|c| c.is_ascii_digit()).then(|| t.parse().ok())?
    };
    let sep = |i: usize, c: u8| b[i] == c;
    if !(sep(4, b'-') && sep(7, b'-') && matches!(b[10], b'T' | b't') && sep(13, b':') && sep(16, b':')) {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d == 0 || d > days_in_month(y.into(), mo) {
        return None;
    }
    if h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0i64;
    if b[i] == b'.' {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return None;
        }
        let digits = &s[start..i.min(start + 3)];
        frac_ms = digits.parse::<i64>().ok()? * 10i64.pow(3 - digits.len() as u32);
    }
    let offset_min: i64 = match &s[i..] {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let oh = i64::from(num(i + 1..i + 3)?);
            let om = i64::from(num(i + 4..i + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let m = oh * 60 + om;
            if o.starts_with('-') {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    let days = days_from_civil(y.into(), mo, d);
    let secs = days * 86_400 + i64::from(h * 3600 + mi * 60 + se) - offset_min * 60;
    Some(secs * 1000 + frac_ms)
}

#[cfg(test)]
#[path = "shapes_tests.rs"]
mod tests;
