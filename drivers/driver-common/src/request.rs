//! The runtime's side of a driver call: the request JSON it sends (parsed into typed
//! messages, rejecting what a provider mapping could not translate) and the response JSON
//! the driver returns.

use serde_json::{json, Map, Value};

/// One model turn as the runtime asks for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub model: String,
    pub max_tokens: Option<u64>,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    /// Extra provider body fields (temperature and the like).
    pub params: Map<String, Value>,
}

/// A history message, by role.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A `system` message inside the history (not the usual place; providers differ).
    System(String),
    /// The user's text blocks.
    User(Vec<String>),
    /// What the model said: text blocks and the tool calls it made.
    Assistant { text: Vec<String>, calls: Vec<ToolCall> },
    /// The result of one tool call.
    Tool {
        call_id: String,
        is_error: bool,
        text: String,
    },
}

/// A tool call: from the model in a response, or replayed in an assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: Value,
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: Option<String>,
    /// A JSON Schema; `{"type":"object","properties":{}}` when the runtime sent none.
    pub parameters: Value,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    ToolCall,
    EndTurn,
    MaxTokens,
}

/// One content block of a response.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolCall(ToolCall),
}

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
}

/// The driver's answer for one turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub stop_reason: StopReason,
    pub content: Vec<Block>,
    /// `None` when the provider reported no usage.
    pub usage: Option<Usage>,
}

/// An empty object schema: what a tool without parameters accepts.
pub fn empty_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

impl Request {
    /// Parse the runtime's request JSON; the error says what is wrong with it.
    pub fn parse(data: &str) -> Result<Request, String> {
        let v: Value = serde_json::from_str(data).map_err(|e| format!("request is not JSON: {e}"))?;
        let obj = v.as_object().ok_or("request is not a JSON object")?;
        let model = match obj.get("model") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err("request.model is not a string".into()),
        };
        let max_tokens = match obj.get("max_tokens") {
            None | Some(Value::Null) => None,
            Some(n) => Some(
                n.as_u64()
                    .ok_or("request.max_tokens is not a non-negative integer")?,
            ),
        };
        let system = match obj.get("system") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err("request.system is not a string".into()),
        };
        let messages = match obj.get("messages") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, m)| parse_message(m).map_err(|e| format!("request.messages[{i}]: {e}")))
                .collect::<Result<Vec<_>, _>>()?,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err("request.messages is not an array".into()),
        };
        let tools = match obj.get("tools") {
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, t)| parse_tool(t).map_err(|e| format!("request.tools[{i}]: {e}")))
                .collect::<Result<Vec<_>, _>>()?,
            None | Some(Value::Null) => Vec::new(),
            Some(_) => return Err("request.tools is not an array".into()),
        };
        let params = match obj.get("params") {
            Some(Value::Object(m)) => m.clone(),
            None | Some(Value::Null) => Map::new(),
            Some(_) => return Err("request.params is not an object".into()),
        };
        Ok(Request {
            model,
            max_tokens,
            system,
            messages,
            tools,
            params,
        })
    }
}

fn parse_message(m: &Value) -> Result<Message, String> {
    let obj = m.as_object().ok_or("not an object")?;
    let role = obj.get("role").and_then(Value::as_str).ok_or("no role")?;
    let content = obj.get("content").unwrap_or(&Value::Null);
    match role {
        "user" => Ok(Message::User(texts(content)?)),
        "system" => Ok(Message::System(texts(content)?.join("\n"))),
        "assistant" => {
            let mut text = Vec::new();
            let mut calls = Vec::new();
            match content {
                Value::Array(blocks) => {
                    for (i, b) in blocks.iter().enumerate() {
                        match block_type(b)? {
                            "text" => text.push(block_text(b).map_err(|e| format!("content[{i}]: {e}"))?),
                            "tool_call" => {
                                calls.push(parse_call(b).map_err(|e| format!("content[{i}]: {e}"))?)
                            }
                            _ => {} // thinking and other provider-specific blocks are not replayed
                        }
                    }
                }
                _ => text = texts(content)?,
            }
            Ok(Message::Assistant { text, calls })
        }
        "tool" => {
            let call_id = obj
                .get("tool_call_id")
                .and_then(Value::as_str)
                .ok_or("tool message without a string tool_call_id")?
                .to_string();
            let is_error = match obj.get("is_error") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(b)) => *b,
                Some(_) => return Err("is_error is not a boolean".into()),
            };
            Ok(Message::Tool {
                call_id,
                is_error,
                text: texts(content)?.join("\n"),
            })
        }
        other => Err(format!("unknown role '{other}'")),
    }
}

fn block_type(b: &Value) -> Result<&str, String> {
    b.get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| "a content block without a string type".to_string())
}

fn block_text(b: &Value) -> Result<String, String> {
    b.get("text")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| "a text block without a string text".to_string())
}

/// The text blocks of a content value: an array of blocks (non-text blocks are skipped), a
/// plain string, or nothing.
fn texts(content: &Value) -> Result<Vec<String>, String> {
    match content {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(vec![s.clone()]),
        Value::Array(blocks) => {
            let mut out = Vec::new();
            for (i, b) in blocks.iter().enumerate() {
                if block_type(b).map_err(|e| format!("content[{i}]: {e}"))? == "text" {
                    out.push(block_text(b).map_err(|e| format!("content[{i}]: {e}"))?);
                }
            }
            Ok(out)
        }
        _ => Err("content is neither a string nor an array of blocks".into()),
    }
}

fn parse_call(b: &Value) -> Result<ToolCall, String> {
    let id = b
        .get("id")
        .and_then(Value::as_str)
        .ok_or("tool_call without a string id")?;
    let name = b
        .get("name")
        .and_then(Value::as_str)
        .ok_or("tool_call without a string name")?;
    let input = match b.get("input") {
        None | Some(Value::Null) => json!({}),
        Some(v) => v.clone(),
    };
    Ok(ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        input,
    })
}

fn parse_tool(t: &Value) -> Result<ToolSpec, String> {
    let name = t
        .get("name")
        .and_then(Value::as_str)
        .ok_or("tool without a string name")?;
    let description = match t.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("description is not a string".into()),
    };
    let parameters = match t.get("parameters") {
        Some(p @ Value::Object(_)) => p.clone(),
        None | Some(Value::Null) => empty_schema(),
        Some(_) => return Err("parameters is not a JSON Schema object".into()),
    };
    Ok(ToolSpec {
        name: name.to_string(),
        description,
        parameters,
    })
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::ToolCall => "tool_call",
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
        }
    }
}

impl Response {
    /// The response JSON the runtime reads.
    pub fn to_json(&self) -> String {
        let content: Vec<Value> = self
            .content
            .iter()
            .map(|b| match b {
                Block::Text(t) => json!({"type": "text", "text": t}),
                Block::ToolCall(c) => {
                    json!({"type": "tool_call", "id": c.id, "name": c.name, "input": c.input})
                }
            })
            .collect();
        let mut out = Map::new();
        out.insert("stop_reason".into(), self.stop_reason.as_str().into());
        out.insert("content".into(), Value::Array(content));
        if let Some(u) = &self.usage {
            let mut usage = Map::new();
            usage.insert("input_tokens".into(), u.input_tokens.into());
            usage.insert("output_tokens".into(), u.output_tokens.into());
            if let Some(n) = u.cached_tokens {
                usage.insert("cached_tokens".into(), n.into());
            }
            if let Some(n) = u.cache_write_tokens {
                usage.insert("cache_write_tokens".into(), n.into());
            }
            out.insert("usage".into(), Value::Object(usage));
        }
        Value::Object(out).to_string()
    }
}

/// A non-negative integer field of a provider object, if present as one.
pub fn count(obj: &Value, key: &str) -> Option<u64> {
    obj.get(key).and_then(Value::as_u64)
}
