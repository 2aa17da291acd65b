//! One A2A `message/send` (protocol 0.3, non-blocking) to a capsule's door: how a launcher
//! hands a child its task and how a completion reaches the delegating parent.

use crate::http::client::{self, Options};
use serde_json::{json, Value};
use std::time::Duration;

/// Send `text` to the door at `url` (`http://host:port`) as a new task, with `headers`;
/// the accepted task's id, or why it was not taken (a JSON-RPC error's message, or the
/// rejection's status message).
pub fn send(
    url: &str,
    id: &str,
    message_id: &str,
    context_id: Option<&str>,
    text: &str,
    headers: &[(&str, &str)],
    timeout: Duration,
) -> Result<String, Failure> {
    let mut message = json!({
        "kind": "message",
        "role": "user",
        "messageId": message_id,
        "parts": [{"kind": "text", "text": text}],
    });
    if let Some(c) = context_id {
        message["contextId"] = c.into();
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "message/send",
        "params": {"message": message, "configuration": {"blocking": false}},
    });
    let opts = Options {
        connect_timeout: timeout,
        read_timeout: timeout,
        max_response: 1024 * 1024,
        tls: None,
        refuse_loopback: false,
    };
    let url = format!("{}/", url.trim_end_matches('/'));
    let r = client::post_json(&url, headers, &body.to_string(), &opts)
        .map_err(|e| Failure::Unreachable(e.to_string()))?;
    let v: Value = serde_json::from_slice(&r.body)
        .map_err(|_| Failure::Unreachable(format!("HTTP {} without a JSON-RPC answer", r.status)))?;
    let shown = |s: &str| crate::agent::sanitize::one_line(s, 500);
    if let Some(e) = v.get("error") {
        let m = e.get("message").and_then(Value::as_str).unwrap_or("error");
        return Err(Failure::Refused(shown(m)));
    }
    let task = v
        .get("result")
        .ok_or_else(|| Failure::Unreachable("no result".into()))?;
    let state = task
        .pointer("/status/state")
        .and_then(Value::as_str)
        .unwrap_or("");
    if state == "rejected" {
        let why = task
            .pointer("/status/message/parts/0/text")
            .and_then(Value::as_str)
            .unwrap_or("task rejected");
        return Err(Failure::Refused(shown(why)));
    }
    task.get("id")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .ok_or_else(|| Failure::Unreachable("the answer names no task".into()))
}

/// Why a send was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The door answered and said no.
    Refused(String),
    /// No answer, or not an A2A one (a listener still coming up, say).
    Unreachable(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(m) => write!(f, "refused: {m}"),
            Failure::Unreachable(m) => write!(f, "not delivered: {m}"),
        }
    }
}
