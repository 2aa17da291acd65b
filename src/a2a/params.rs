//! The typed params of the A2A methods (send, get/cancel/subscribe, list), read from an
//! untrusted JSON object with caps and type checks; errors are `Invalid params` texts.

use super::parts::{self, Kind, Part};
use super::shapes::{parse_rfc3339, State};
use super::Generation;
use serde_json::{Map, Value};

/// The most message text accepted (all text parts joined), bytes.
pub const MAX_TEXT: usize = 256 << 10;
/// The most parts one message may have.
pub const MAX_PARTS: usize = 64;
/// The longest request id, message/task/context id or page token accepted, bytes.
pub const MAX_ID: usize = 256;
/// ListTasks page size: the default and the largest (1 to it, else invalid params).
pub const DEFAULT_PAGE_SIZE: u32 = 50;
pub const MAX_PAGE_SIZE: u32 = 100;

/// A message to send: its text parts joined with `\n`, and every part as sent (whether
/// the capsule takes it is the door's check).
#[derive(Debug, Clone, PartialEq)]
pub struct SendRequest {
    pub message_id: String,
    pub text: String,
    pub parts: Vec<Part>,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    /// 1.0 `configuration.returnImmediately: true`, 0.3 `configuration.blocking: false`;
    /// otherwise the call holds until the task settles (the SDK server's default).
    pub return_immediately: bool,
    pub history_length: Option<u32>,
    /// The data parts of a message that answers a task waiting for input (one that names
    /// a `taskId`), in order: the answer, never landed as input (a new task's data parts
    /// are in `parts`, taken only where the capsule declares them).
    pub data: Vec<Value>,
    /// `configuration`'s push-notification config (1.0 `taskPushNotificationConfig`, 0.3
    /// `pushNotificationConfig`): the task's first webhook.
    pub push: Option<super::push::Config>,
}

/// get/cancel/subscribe: a task id (and for get, how much history).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRequest {
    pub id: String,
    pub history_length: Option<u32>,
}

/// 1.0 ListTasks.
#[derive(Debug, Clone, PartialEq)]
pub struct ListRequest {
    pub context_id: Option<String>,
    pub status: Option<State>,
    /// 1..=MAX_PAGE_SIZE (absent: DEFAULT_PAGE_SIZE).
    pub page_size: u32,
    pub page_token: Option<String>,
    pub history_length: Option<u32>,
    /// Tasks whose status changed at or after this instant, unix ms.
    pub status_after_ms: Option<i64>,
    pub include_artifacts: bool,
}

/// A request's typed params.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    Send(SendRequest),
    Stream(SendRequest),
    Get(TaskRequest),
    Cancel(TaskRequest),
    Subscribe(TaskRequest),
    List(ListRequest),
    /// `GetExtendedAgentCard` (0.3: `agent/getAuthenticatedExtendedCard`); no params read.
    ExtendedCard,
    /// A push-notification config method.
    Push(super::push::Op),
}

/// A fully parsed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: Value,
    pub generation: Generation,
    pub op: Op,
}

/// Why a send's params were refused: invalid (-32602), or a content the door never takes
/// (-32005, ContentTypeNotSupported: a file by reference).
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    Invalid(String),
    ContentType(String),
}

impl From<String> for Refusal {
    fn from(m: String) -> Refusal {
        Refusal::Invalid(m)
    }
}

impl From<&str> for Refusal {
    fn from(m: &str) -> Refusal {
        Refusal::Invalid(m.to_string())
    }
}

fn opt_str(o: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.len() <= MAX_ID => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(format!("{key} exceeds {MAX_ID} bytes")),
        Some(_) => Err(format!("{key} must be a string")),
    }
}

fn opt_bool(o: &Map<String, Value>, key: &str) -> Result<Option<bool>, String> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("{key} must be a boolean")),
    }
}

/// A non-negative integer (ProtoJSON also allows int32 as a decimal string).
fn opt_u32(o: &Map<String, Value>, key: &str) -> Result<Option<u32>, String> {
    let n = match o.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse::<u64>().ok(),
        Some(_) => None,
    };
    match n {
        Some(n) => Ok(Some(u32::try_from(n).unwrap_or(u32::MAX))),
        None => Err(format!("{key} must be a non-negative integer")),
    }
}

fn req_id(o: &Map<String, Value>, key: &str) -> Result<String, String> {
    match opt_str(o, key)? {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(format!("{key} is required")),
    }
}

pub(crate) fn send_params(p: &Map<String, Value>, gen: Generation) -> Result<SendRequest, Refusal> {
    // `{"message": {...}}`, or (spec era) the message itself as params.
    let msg = match p.get("message") {
        Some(Value::Object(m)) => m,
        Some(_) => return Err("message must be an object".into()),
        None if p.contains_key("parts") => p,
        None => return Err("message is required".into()),
    };
    let message_id = req_id(msg, "messageId")?;
    match msg.get("role") {
        None | Some(Value::Null) => return Err("message role is required".into()),
        Some(Value::String(r)) if r == "user" || r == "ROLE_USER" => {}
        Some(_) => return Err("message role must be user".into()),
    }
    let Some(Value::Array(parts)) = msg.get("parts") else {
        return Err("message parts must be an array".into());
    };
    if parts.is_empty() || parts.len() > MAX_PARTS {
        return Err(format!("message must have 1 to {MAX_PARTS} parts").into());
    }
    let context_id = opt_str(msg, "contextId")?;
    let task_id = opt_str(msg, "taskId")?;
    let mut text = String::new();
    let mut data = Vec::new();
    let mut read = Vec::with_capacity(parts.len());
    for part in parts {
        // A data part on a message that answers a waiting task is the answer, not input.
        if let Some(d) = task_id.as_ref().and_then(|_| answer_data(part, gen)) {
            data.push(d.clone());
            continue;
        }
        let (t, p) = parts::part(part, gen)?;
        if let Some(t) = t {
            let sep = usize::from(read.iter().any(|p: &Part| p.kind == Kind::Text));
            if text.len() + t.len() + sep > MAX_TEXT {
                return Err(format!("message text exceeds {MAX_TEXT} bytes").into());
            }
            if sep == 1 {
                text.push('\n');
            }
            text.push_str(t);
        }
        read.push(p);
    }
    let (return_immediately, history_length, push) = match p.get("configuration") {
        None | Some(Value::Null) => (false, None, None),
        Some(Value::Object(c)) => {
            let ri = match gen {
                Generation::V10 => opt_bool(c, "returnImmediately")? == Some(true),
                Generation::V03 => opt_bool(c, "blocking")? == Some(false),
            };
            (ri, history_length(c)?, super::push::in_send(c, gen)?)
        }
        Some(_) => return Err("configuration must be an object".into()),
    };
    Ok(SendRequest {
        message_id,
        text,
        parts: read,
        context_id,
        task_id,
        return_immediately,
        history_length,
        data,
        push,
    })
}

/// A data part's value (0.3 `{"kind": "data", "data": …}`, 1.0 `{"data": …}`), taken only
/// on a message that answers a waiting task.
fn answer_data(part: &Value, gen: Generation) -> Option<&Value> {
    let Value::Object(part) = part else {
        return None;
    };
    match gen {
        Generation::V03 if part.get("kind").and_then(Value::as_str) != Some("data") => None,
        _ if part.contains_key("text") => None,
        _ => part.get("data"),
    }
}

pub(crate) fn task_params(p: &Map<String, Value>) -> Result<TaskRequest, String> {
    Ok(TaskRequest {
        id: req_id(p, "id")?,
        history_length: history_length(p)?,
    })
}

/// `historyLength`, else its proto field name `history_length` (ProtoJSON parsers accept
/// both, as the 1.0 SDK's does; the 1.0 TCK's JSON-RPC client sends the latter).
fn history_length(p: &Map<String, Value>) -> Result<Option<u32>, String> {
    match opt_u32(p, "historyLength")? {
        Some(n) => Ok(Some(n)),
        None => opt_u32(p, "history_length"),
    }
}

pub(crate) fn list_params(p: &Map<String, Value>) -> Result<ListRequest, String> {
    let status = match opt_str(p, "status")?.as_deref() {
        None | Some("TASK_STATE_UNSPECIFIED") | Some("") => None,
        Some(s) => Some(State::from_wire(s).ok_or("status is not a task state")?),
    };
    let page_size = match opt_u32(p, "pageSize")? {
        None => DEFAULT_PAGE_SIZE,
        Some(n @ 1..=MAX_PAGE_SIZE) => n,
        Some(n) => return Err(format!("pageSize must be between 1 and {MAX_PAGE_SIZE}, got {n}")),
    };
    let status_after_ms = match opt_str(p, "statusTimestampAfter")? {
        None => None,
        Some(s) => Some(parse_rfc3339(&s).ok_or("statusTimestampAfter must be an RFC 3339 timestamp")?),
    };
    Ok(ListRequest {
        context_id: opt_str(p, "contextId")?.filter(|s| !s.is_empty()),
        status,
        page_size,
        page_token: opt_str(p, "pageToken")?.filter(|s| !s.is_empty()),
        history_length: history_length(p)?,
        status_after_ms,
        include_artifacts: opt_bool(p, "includeArtifacts")?.unwrap_or(false),
    })
}

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
