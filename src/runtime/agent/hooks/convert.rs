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

fn same(a: &hook::Message, b: &hook::Message) -> bool {
    a.role == b.role && a.content == b.content && a.tool_call_id == b.tool_call_id && a.is_error == b.is_error
}

/// The history a compaction hook returned, normalised; `before` is the history it was
/// given (a tool message survives only if it is one of those, unchanged).
pub fn from_hook(returned: &[hook::Message], before: &[Message]) -> Vec<Message> {
    let sent_tools: Vec<hook::Message> = before
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(to_hook)
        .collect();
    let mut out = Vec::new();
    for m in returned.iter().take(MAX_RETURNED) {
        let role = match m.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => {
                if sent_tools.iter().any(|t| same(t, m)) {
                    if let Some(orig) = before
                        .iter()
                        .find(|o| o.role == Role::Tool && same(&to_hook(o), m))
                    {
                        out.push(orig.clone());
                    }
                }
                continue;
            }
            _ => continue,
        };
        out.push(Message {
            role,
            content: blocks_of(&m.content),
            tool_call_id: None,
            is_error: false,
        });
    }
    out
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
        let got = from_hook(&returned, &before);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].content, vec![Block::Text("a summary".into())]);
        assert_eq!(got[1].content, vec![Block::Text("ok".into())]);
        assert_eq!(got[2], before[1]);
    }
}
