//! The Anthropic Messages API mapping, both ways. Pure; tested natively.

use driver_common::request::{count, Message, ToolSpec};
use driver_common::{Block, Provider, Request, Response, StopReason, ToolCall, Usage};
use serde_json::{json, Map, Value};

/// `max_tokens` when the runtime sent none (the Messages API requires one).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The Anthropic Messages API provider.
pub struct Anthropic;

impl Provider for Anthropic {
    fn path(&self) -> &'static str {
        "/v1/messages"
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", "2023-06-01")]
    }

    fn protected(&self) -> &'static [&'static str] {
        // `stream` too: the driver reads one JSON body, not server-sent events.
        &["model", "messages", "system", "tools", "stream"]
    }

    fn body(&self, req: &Request) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), req.model.clone().into());
        body.insert(
            "max_tokens".into(),
            req.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS).into(),
        );
        let system = system(req);
        if !system.is_empty() {
            body.insert("system".into(), system.into());
        }
        body.insert("messages".into(), Value::Array(messages(&req.messages)));
        if !req.tools.is_empty() {
            body.insert("tools".into(), req.tools.iter().map(tool).collect());
        }
        body
    }

    fn parse(&self, body: &Value) -> Result<Response, String> {
        parse_response(body)
    }
}

/// The top-level system prompt, with any system messages of the history after it (the
/// Messages API has no system role).
fn system(req: &Request) -> String {
    let mut parts: Vec<&str> = Vec::new();
    if !req.system.is_empty() {
        parts.push(&req.system);
    }
    for m in &req.messages {
        if let Message::System(text) = m {
            if !text.is_empty() {
                parts.push(text);
            }
        }
    }
    parts.join("\n\n")
}

/// The history as alternating user/assistant messages: tool results become user messages,
/// and consecutive messages of one role merge into one (tool results first in a user
/// message, as the API requires). Messages with nothing to say are dropped.
pub fn messages(history: &[Message]) -> Vec<Value> {
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for m in history {
        let (role, blocks) = match m {
            Message::System(_) => continue,
            Message::User(texts) => ("user", text_blocks(texts)),
            Message::Assistant { text, calls } => {
                let mut blocks = text_blocks(text);
                blocks.extend(calls.iter().map(tool_use));
                ("assistant", blocks)
            }
            Message::Tool {
                call_id,
                is_error,
                text,
            } => {
                let mut result = Map::new();
                result.insert("type".into(), "tool_result".into());
                result.insert("tool_use_id".into(), call_id.clone().into());
                if !text.is_empty() {
                    result.insert("content".into(), text.clone().into());
                }
                result.insert("is_error".into(), (*is_error).into());
                ("user", vec![Value::Object(result)])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, merged)) if *last == role => merged.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    turns
        .into_iter()
        .map(|(role, mut blocks)| {
            if role == "user" {
                // Stable: tool results keep their order, then the rest keeps its order.
                blocks.sort_by_key(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"));
            }
            json!({"role": role, "content": blocks})
        })
        .collect()
}

/// Text blocks, skipping empty ones (the API refuses empty text blocks).
fn text_blocks(texts: &[String]) -> Vec<Value> {
    texts
        .iter()
        .filter(|t| !t.is_empty())
        .map(|t| json!({"type": "text", "text": t}))
        .collect()
}

fn tool_use(c: &ToolCall) -> Value {
    let input = match &c.input {
        v @ Value::Object(_) => v.clone(),
        // The API takes only an object; keep what the model sent, visibly.
        other => json!({"_raw": other}),
    };
    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input})
}

fn tool(t: &ToolSpec) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), t.name.clone().into());
    if let Some(d) = &t.description {
        out.insert("description".into(), d.clone().into());
    }
    // input_schema must name its type: a schema without one (`{}`: anything) is taken as
    // an object schema.
    let mut schema = t.parameters.as_object().cloned().unwrap_or_default();
    if !schema.contains_key("type") {
        schema.insert("type".into(), "object".into());
    }
    out.insert("input_schema".into(), Value::Object(schema));
    Value::Object(out)
}

/// A Messages API response body as the runtime's response.
pub fn parse_response(body: &Value) -> Result<Response, String> {
    if body.get("type").and_then(Value::as_str) == Some("error") {
        let msg = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("(no message)");
        return Err(format!(
            "an error in a 2xx body: {}",
            driver_common::outcome::one_line(msg, 300)
        ));
    }
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .ok_or("no content array")?;
    let mut content = Vec::new();
    let mut calls = 0;
    for (i, b) in blocks.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let text = b
                    .get("text")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("content[{i}]: a text block without text"))?;
                if !text.is_empty() {
                    content.push(Block::Text(text.to_string()));
                }
            }
            Some("tool_use") => {
                let field = |k: &str| {
                    b.get(k)
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .ok_or_else(|| format!("content[{i}]: a tool_use block without {k}"))
                };
                let input = match b.get("input") {
                    None | Some(Value::Null) => json!({}),
                    Some(v) => v.clone(),
                };
                content.push(Block::ToolCall(ToolCall {
                    id: field("id")?,
                    name: field("name")?,
                    input,
                }));
                calls += 1;
            }
            Some(_) => {} // thinking, redacted_thinking, server tool blocks: not for the runtime
            None => return Err(format!("content[{i}]: a block without a type")),
        }
    }
    let stop = body
        .get("stop_reason")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let stop_reason = match stop {
        "max_tokens" => StopReason::MaxTokens,
        _ if calls > 0 => StopReason::ToolCall,
        _ => StopReason::EndTurn,
    };
    Ok(Response {
        stop_reason,
        content,
        usage: body.get("usage").filter(|u| u.is_object()).map(usage),
    })
}

fn usage(u: &Value) -> Usage {
    Usage {
        input_tokens: count(u, "input_tokens").unwrap_or(0),
        output_tokens: count(u, "output_tokens").unwrap_or(0),
        cached_tokens: count(u, "cache_read_input_tokens"),
        cache_write_tokens: count(u, "cache_creation_input_tokens"),
    }
}
