//! The OpenAI-compatible `/chat/completions` mapping, both ways. Pure; tested natively.

use driver_common::request::{count, Message, ToolSpec};
use driver_common::{Block, Provider, Request, Response, StopReason, ToolCall, Usage};
use serde_json::{json, Map, Value};

/// The OpenAI chat-completions provider (OpenAI, Ollama, vLLM, llama.cpp server).
pub struct OpenAi;

impl Provider for OpenAi {
    fn path(&self) -> &'static str {
        "/chat/completions"
    }

    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    fn protected(&self) -> &'static [&'static str] {
        // `stream` too: the driver reads one JSON body, not server-sent events.
        &["model", "messages", "tools", "stream"]
    }

    fn body(&self, req: &Request) -> Map<String, Value> {
        let mut body = Map::new();
        body.insert("model".into(), req.model.clone().into());
        body.insert("messages".into(), Value::Array(messages(req)));
        if let Some(n) = req.max_tokens {
            body.insert("max_tokens".into(), n.into());
        }
        if !req.tools.is_empty() {
            body.insert("tools".into(), req.tools.iter().map(tool).collect());
        }
        body
    }

    fn parse(&self, body: &Value) -> Result<Response, String> {
        parse_response(body)
    }
}

fn messages(req: &Request) -> Vec<Value> {
    let mut out = Vec::new();
    if !req.system.is_empty() {
        out.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        out.push(match m {
            Message::System(text) => json!({"role": "system", "content": text}),
            Message::User(texts) => json!({"role": "user", "content": texts.join("\n")}),
            Message::Assistant { text, calls } => {
                let mut msg = Map::new();
                msg.insert("role".into(), "assistant".into());
                let content = if text.iter().all(String::is_empty) {
                    Value::Null
                } else {
                    text.join("\n").into()
                };
                msg.insert("content".into(), content);
                if !calls.is_empty() {
                    msg.insert("tool_calls".into(), calls.iter().map(call).collect());
                }
                Value::Object(msg)
            }
            Message::Tool { call_id, text, .. } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": text})
            }
        });
    }
    out
}

fn call(c: &ToolCall) -> Value {
    json!({
        "id": c.id,
        "type": "function",
        "function": {"name": c.name, "arguments": c.input.to_string()},
    })
}

fn tool(t: &ToolSpec) -> Value {
    let mut function = Map::new();
    function.insert("name".into(), t.name.clone().into());
    if let Some(d) = &t.description {
        function.insert("description".into(), d.clone().into());
    }
    function.insert("parameters".into(), t.parameters.clone());
    json!({"type": "function", "function": function})
}

/// A chat-completions response body as the runtime's response.
pub fn parse_response(body: &Value) -> Result<Response, String> {
    let choice = match body.get("choices").and_then(Value::as_array) {
        Some(choices) => choices.first().ok_or("empty choices")?,
        None => {
            return Err(match body.get("error") {
                Some(e) => {
                    let msg = e
                        .get("message")
                        .and_then(Value::as_str)
                        .map_or_else(|| e.to_string(), String::from);
                    format!(
                        "an error in a 2xx body: {}",
                        driver_common::outcome::one_line(&msg, 300)
                    )
                }
                None => "no choices array".into(),
            })
        }
    };
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or("choices[0] has no message object")?;
    let mut content = Vec::new();
    let text = match message.get("content") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        // Some servers answer with content parts.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        Some(_) => return Err("message.content is neither a string, parts nor null".into()),
    };
    let text = if text.is_empty() {
        // A refusal stands in for the content it replaced.
        message
            .get("refusal")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    } else {
        text
    };
    if !text.is_empty() {
        content.push(Block::Text(text));
    }
    let calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(i, c)| parse_call(i, c).map_err(|e| format!("tool_calls[{i}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err("message.tool_calls is not an array".into()),
    };
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let stop_reason = if !calls.is_empty() {
        StopReason::ToolCall
    } else if finish == "length" {
        StopReason::MaxTokens
    } else {
        // `tool_calls` without any call to make cannot continue as a tool turn.
        StopReason::EndTurn
    };
    content.extend(calls.into_iter().map(Block::ToolCall));
    Ok(Response {
        stop_reason,
        content,
        usage: body.get("usage").filter(|u| u.is_object()).map(usage),
    })
}

fn parse_call(i: usize, c: &Value) -> Result<ToolCall, String> {
    let function = c
        .get("function")
        .filter(|f| f.is_object())
        .ok_or("no function object")?;
    let name = function
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or("no function name")?;
    let id = match c.get("id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_string(),
        // Some local servers leave the id out; the runtime needs one to pair the result.
        _ => format!("call_{i}"),
    };
    let input = match function.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(Value::String(s)) => arguments(s),
        // Some servers (Ollama's native shape) send the object itself.
        Some(v @ Value::Object(_)) => v.clone(),
        Some(other) => json!({"_raw": other.to_string()}),
    };
    Ok(ToolCall {
        id,
        name: name.to_string(),
        input,
    })
}

/// A function call's arguments string as the tool's input: the JSON object it encodes,
/// `{}` when blank, else `{"_raw": <the string>}` for the tool to make sense of.
pub fn arguments(s: &str) -> Value {
    if s.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(s) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({"_raw": s}),
    }
}

fn usage(u: &Value) -> Usage {
    Usage {
        input_tokens: count(u, "prompt_tokens").unwrap_or(0),
        output_tokens: count(u, "completion_tokens").unwrap_or(0),
        cached_tokens: u
            .get("prompt_tokens_details")
            .and_then(|d| count(d, "cached_tokens")),
        cache_write_tokens: None,
    }
}
