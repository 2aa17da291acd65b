//! The compaction selection, pure so it runs natively in unit tests.
//!
//! `compact` keeps the first message (the task) and the last [`KEEP_TAIL`] messages, and
//! replaces everything between with one `user` message whose `content` is a JSON string:
//! `[compacted: N earlier messages summarised] role: excerpt | role: excerpt | ...`, one entry
//! per dropped message in order, each excerpt the first [`EXCERPT_CHARS`] characters of the
//! message's text (whitespace collapsed; a `tool_call` block reads `[tool_call NAME]`).
//!
//! Providers reject a tool result whose call is not in the history, so the kept tail never
//! starts with a `tool` message: while it does, the dropped range grows by one (the tool
//! result is summarised instead). As a second guard, any kept `tool` message whose
//! `tool-call-id` is not the id of a `tool_call` block in a kept `assistant` message is
//! summarised too. A history of at most `1 + KEEP_TAIL` messages comes back unchanged.

use serde_json::Value;
use std::collections::HashSet;

/// Messages kept verbatim at the end of the history.
pub const KEEP_TAIL: usize = 4;
/// Characters of each dropped message's text quoted in the summary.
pub const EXCERPT_CHARS: usize = 80;

/// One conversation message, as the WIT `message` record has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `user`, `assistant` or `tool`.
    pub role: String,
    /// JSON text: a string or an array of content blocks.
    pub content: String,
    pub tool_call_id: Option<String>,
    pub is_error: bool,
}

/// The compacted history (see the module docs).
pub fn compact(messages: Vec<Message>) -> Vec<Message> {
    let n = messages.len();
    if n <= 1 + KEEP_TAIL {
        return messages;
    }
    let mut tail_start = n - KEEP_TAIL;
    while tail_start < n && messages[tail_start].role == "tool" {
        tail_start += 1;
    }
    let kept_calls: HashSet<String> = std::iter::once(&messages[0])
        .chain(&messages[tail_start..])
        .filter(|m| m.role == "assistant")
        .flat_map(|m| tool_call_ids(&m.content))
        .collect();
    let mut rest = messages.into_iter();
    let first = rest.next().expect("more than KEEP_TAIL + 1 messages");
    let mut dropped = Vec::new();
    let mut tail = Vec::new();
    for (i, m) in rest.enumerate() {
        let orphan = m.role == "tool" && !m.tool_call_id.as_ref().is_some_and(|id| kept_calls.contains(id));
        if i + 1 < tail_start || orphan {
            dropped.push(m);
        } else {
            tail.push(m);
        }
    }
    let mut out = Vec::with_capacity(tail.len() + 2);
    out.push(first);
    out.push(Message {
        role: "user".into(),
        content: Value::String(summary(&dropped)).to_string(),
        tool_call_id: None,
        is_error: false,
    });
    out.extend(tail);
    out
}

/// The summary text for the dropped messages (before JSON encoding).
pub fn summary(dropped: &[Message]) -> String {
    let mut s = format!("[compacted: {} earlier messages summarised]", dropped.len());
    for (i, m) in dropped.iter().enumerate() {
        s.push_str(if i == 0 { " " } else { " | " });
        s.push_str(&m.role);
        if m.is_error {
            s.push_str(" (error)");
        }
        s.push_str(": ");
        s.push_str(&excerpt(&text_of(&m.content), EXCERPT_CHARS));
    }
    s
}

/// The readable text of a message's content JSON: a string as is, a block array as its
/// blocks' texts joined by spaces, anything unparsable as the raw text.
pub fn text_of(content: &str) -> String {
    match serde_json::from_str::<Value>(content) {
        Ok(Value::String(s)) => s,
        Ok(Value::Array(blocks)) => blocks
            .iter()
            .map(block_text)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        Ok(other) => other.to_string(),
        Err(_) => content.to_string(),
    }
}

fn block_text(block: &Value) -> String {
    match block.get("type").and_then(Value::as_str) {
        Some("text") => block
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        Some("tool_call") => {
            let name = block.get("name").and_then(Value::as_str).unwrap_or("?");
            format!("[tool_call {name}]")
        }
        Some(other) => format!("[{other}]"),
        None => block.as_str().unwrap_or("").to_string(),
    }
}

/// The ids of the `tool_call` blocks in a content JSON.
pub fn tool_call_ids(content: &str) -> Vec<String> {
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_call"))
            .filter_map(|b| b.get("id").and_then(Value::as_str).map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

/// `text` with whitespace runs collapsed to one space, cut to `max` characters (`...` marks
/// a cut).
pub fn excerpt(text: &str, max: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match collapsed.char_indices().nth(max) {
        Some((cut, _)) => format!("{}...", &collapsed[..cut]),
        None => collapsed,
    }
}
