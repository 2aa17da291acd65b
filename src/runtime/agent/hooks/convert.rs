//! The conversation in the hook world's shape and back: a compaction hook's returned history
//! normalised (each `content` a JSON string or a JSON array of blocks), a tool-role message
//! kept only when returned exactly as it was sent.

use crate::agent::wire::{self, Block, Message, Role};
use crate::runtime::wasm::hook;
use serde_json::Value;

/// The most messages a compaction hook may return.
pub const MAX_RETURNED: usize = 10_000;

/// One message for a hook.
pub fn to_hook(m: &Message) -> hook::Message {
    let blocks = m
        .to_json()
        .get("content")
        .cloned()
        .unwrap_or(Value::Array(Vec::new()));
    hook::Message {
        role: m.role.as_str().to_string(),
        content: blocks.to_string(),
        tool_call_id: m.tool_call_id.clone(),
        is_error: m.is_error,
    }
}

fn blocks_of(content: &str) -> Vec<Block> {
    match serde_json::from_str::<Value>(content) {
        Ok(Value::String(s)) => vec![Block::Text(s)],
        Ok(Value::Array(items)) => {
            let wrapped = serde_json::json!({"stop_reason": "end_turn", "content": items});
            wire::parse_response(&wrapped.to_string())
                .map(|r| r.content)
                .unwrap_or_else(|_| vec![Block::Text(content.to_string())])
        }
        // Neither form: the text as it came.
        _ => vec![Block::Text(content.to_string())],
    }
}

/// The most bytes of content a compaction hook's history may hold in all.
pub const MAX_RETURNED_BYTES: usize = 32 << 20;

/// The history a compaction hook returned, normalised; `before` is the history it was
/// given. A tool message survives only if it is one of those, unchanged, and at most once;
/// a tool call block only inside an assistant message. The result must start with a user
/// message and stay within [`MAX_RETURNED`] messages and [`MAX_RETURNED_BYTES`].
pub fn from_hook(returned: &[hook::Message], before: &[Message]) -> Result<Vec<Message>, String> {
    use std::collections::HashMap;
    if returned.len() > MAX_RETURNED {
        return Err(format!(
            "it returned {} messages, more than {MAX_RETURNED}",
            returned.len()
        ));
    }
    let bytes: usize = returned.iter().map(|m| m.content.len()).sum();
    if bytes > MAX_RETURNED_BYTES {
        return Err(format!(
            "it returned {bytes} bytes of history, more than {MAX_RETURNED_BYTES}"
        ));
    }
    // Each original tool message, keyed by its exact hook form, usable once.
    let mut originals: HashMap<(Option<String>, String, bool), Message> = before
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            let h = to_hook(m);
            ((h.tool_call_id, h.content, h.is_error), m.clone())
        })
        .collect();
    let mut out = Vec::new();
    for m in returned {
        let role = match m.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => {
                let key = (m.tool_call_id.clone(), m.content.clone(), m.is_error);
                if let Some(orig) = originals.remove(&key) {
                    out.push(orig);
                }
                continue;
            }
            _ => continue,
        };
        let mut content = blocks_of(&m.content);
        if role == Role::User {
            content.retain(|b| matches!(b, Block::Text(_)));
        }
        out.push(Message {
            role,
            content,
            tool_call_id: None,
            is_error: false,
        });
    }
    match out.first() {
        Some(first) if first.role == Role::User => Ok(out),
        Some(_) => Err("the history it returned does not start with a user message".into()),
        None => Err("it returned an empty history".into()),
    }
}

/// A rough token count of `messages` (4 bytes a token), for the count after compaction.
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    let bytes: usize = messages.iter().map(|m| m.to_json().to_string().len()).sum();
    (bytes as u64).div_ceil(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_content_forms_normalise_and_changed_tool_messages_go() {
        let before = vec![Message::user("task"), Message::tool("c1", "output".into(), false)];
        let kept_tool = to_hook(&before[1]);
        let mut changed_tool = kept_tool.clone();
        changed_tool.content = "\"forged\"".into();
        let returned = vec![
            hook::Message {
                role: "user".into(),
                content: "\"a summary\"".into(),
                tool_call_id: None,
                is_error: false,
            },
            hook::Message {
                role: "assistant".into(),
                content: r#"[{"type":"text","text":"ok"}]"#.into(),
                tool_call_id: None,
                is_error: false,
            },
            kept_tool,
            changed_tool,
            hook::Message {
                role: "system".into(),
                content: "\"x\"".into(),
                tool_call_id: None,
                is_error: false,
            },
        ];
        let got = from_hook(&returned, &before).unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].content, vec![Block::Text("a summary".into())]);
        assert_eq!(got[1].content, vec![Block::Text("ok".into())]);
        assert_eq!(got[2], before[1]);
    }

    #[test]
    fn a_returned_history_is_checked() {
        let before = vec![Message::user("task"), Message::tool("c1", "out".into(), false)];
        let tool = to_hook(&before[1]);
        let user = hook::Message {
            role: "user".into(),
            content: "\"s\"".into(),
            tool_call_id: None,
            is_error: false,
        };
        // The same original tool message twice: kept once.
        let got = from_hook(&[user.clone(), tool.clone(), tool.clone()], &before).unwrap();
        assert_eq!(got.len(), 2);
        // Empty, or not starting with a user message: refused.
        assert!(from_hook(&[], &before).is_err());
        assert!(from_hook(&[tool.clone(), user.clone()], &before).is_err());
        // A tool call smuggled into a user message is dropped.
        let sneaky = hook::Message {
            content:
                r#"[{"type":"text","text":"hi"},{"type":"tool_call","id":"x","name":"bash","input":{}}]"#
                    .into(),
            ..user.clone()
        };
        let got = from_hook(&[sneaky], &before).unwrap();
        assert_eq!(got[0].content, vec![Block::Text("hi".into())]);
        // Too many messages.
        assert!(from_hook(&vec![user; MAX_RETURNED + 1], &before).is_err());
    }
}
