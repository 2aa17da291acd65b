//! The driver protocol's JSON: the conversation the runtime keeps, the request it sends a
//! driver each turn, and the parser of the driver's response (untrusted: a driver is a
//! registry artifact, and its response carries the model's words).

use serde_json::{json, Map, Value};

/// The largest driver response parsed, bytes.
pub const MAX_RESPONSE_BYTES: usize = 16 << 20;
/// The most tool calls one response may ask for.
pub const MAX_TOOL_CALLS: usize = 64;
/// The longest tool name or call id kept.
pub const MAX_NAME: usize = 256;

/// One content block.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    ToolCall { id: String, name: String, input: Value },
}

/// Who spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub content: Vec<Block>,
    /// For a tool message: the call it answers.
    pub tool_call_id: Option<String>,
    pub is_error: bool,
}

impl Message {
    pub fn user(text: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![Block::Text(text.to_string())],
            tool_call_id: None,
            is_error: false,
        }
    }

    /// The model's earlier answer, as text.
    pub fn assistant(text: &str) -> Message {
        Message {
            role: Role::Assistant,
            content: vec![Block::Text(text.to_string())],
            tool_call_id: None,
            is_error: false,
        }
    }

    pub fn tool(call_id: &str, text: String, is_error: bool) -> Message {
        Message {
            role: Role::Tool,
            content: vec![Block::Text(text)],
            tool_call_id: Some(call_id.to_string()),
            is_error,
        }
    }

    /// The message in the driver protocol's shape.
    pub fn to_json(&self) -> Value {
        let content: Vec<Value> = self
            .content
            .iter()
            .map(|b| match b {
                Block::Text(t) => json!({"type": "text", "text": t}),
                Block::ToolCall { id, name, input } => {
                    json!({"type": "tool_call", "id": id, "name": name, "input": input})
                }
            })
            .collect();
        let mut m = Map::new();
        m.insert("role".into(), self.role.as_str().into());
        if let Some(id) = &self.tool_call_id {
            m.insert("tool_call_id".into(), id.clone().into());
            m.insert("is_error".into(), self.is_error.into());
        }
        m.insert("content".into(), Value::Array(content));
        Value::Object(m)
    }

    /// The text blocks, joined by newlines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// The conversation of one task as its driver is sent it. What does not change between
/// turns (model, token limit, system prompt, tool schemas, parameters) is encoded once, and
/// each message once, when it joins; a turn's request is those pieces joined, so its cost
/// does not grow with re-encoding the history. The bytes are those of the request as one
/// JSON object with its keys in order (`max_tokens`, `messages`, `model`, `params`,
/// `system`, `tools`), as `serde_json` writes a map.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// `{"max_tokens":N,"messages":[`
    head: String,
    /// `],"model":..,"params":..,"system":..,"tools":[..]}`
    tail: String,
    messages: Vec<Message>,
    /// The messages encoded, comma-separated.
    encoded: String,
}

impl Conversation {
    /// An empty conversation with the request's fixed parts encoded.
    pub fn new(
        model: &str,
        max_tokens: u64,
        system: &str,
        tools: &[ToolSpec],
        params: &Value,
    ) -> Conversation {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        let tail = json!({"model": model, "params": params, "system": system, "tools": tools}).to_string();
        Conversation {
            head: format!("{{\"max_tokens\":{max_tokens},\"messages\":["),
            tail: format!("],{}", &tail[1..]),
            messages: Vec::new(),
            encoded: String::new(),
        }
    }

    /// Add `m` at the end.
    pub fn push(&mut self, m: Message) {
        if !self.messages.is_empty() {
            self.encoded.push(',');
        }
        self.encoded.push_str(&m.to_json().to_string());
        self.messages.push(m);
    }

    /// Replace the whole history (a compaction's answer).
    pub fn replace(&mut self, messages: Vec<Message>) {
        self.messages.clear();
        self.encoded.clear();
        for m in messages {
            self.push(m);
        }
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// This turn's request.
    pub fn request(&self) -> String {
        let mut r = String::with_capacity(self.head.len() + self.encoded.len() + self.tail.len());
        r.push_str(&self.head);
        r.push_str(&self.encoded);
        r.push_str(&self.tail);
        r
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    ToolCall,
    EndTurn,
    MaxTokens,
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

/// Token counts a driver reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_tokens: u64,
}

/// A parsed driver response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub stop_reason: StopReason,
    pub content: Vec<Block>,
    pub usage: Usage,
}

impl Response {
    /// The tool calls, in order.
    pub fn calls(&self) -> Vec<(&str, &str, &Value)> {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::ToolCall { id, name, input } => Some((id.as_str(), name.as_str(), input)),
                _ => None,
            })
            .collect()
    }
}

fn clip(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// Parse a driver's response `data`. A `stop_reason` of `tool_call` with no call, or tool
/// calls under another stop reason, are taken as what the content shows: calls present
/// means a tool turn.
pub fn parse_response(data: &str) -> Result<Response, String> {
    if data.len() > MAX_RESPONSE_BYTES {
        return Err(format!(
            "the driver's response is larger than {MAX_RESPONSE_BYTES} bytes"
        ));
    }
    let v: Value =
        serde_json::from_str(data).map_err(|e| format!("the driver's response is not JSON: {e}"))?;
    let obj = v
        .as_object()
        .ok_or("the driver's response is not a JSON object")?;
    let stop = match obj.get("stop_reason").and_then(Value::as_str) {
        Some("tool_call") | Some("tool_use") => StopReason::ToolCall,
        Some("end_turn") | Some("stop") => StopReason::EndTurn,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("error") => return Err(error_text(obj)),
        Some(other) => {
            return Err(format!(
                "unknown stop_reason '{}'",
                clip(other, 64).escape_debug()
            ))
        }
        None => return Err("the driver's response has no stop_reason".into()),
    };
    let mut content = Vec::new();
    let blocks = match obj.get("content") {
        Some(Value::Array(a)) => a.as_slice(),
        Some(Value::String(s)) => {
            content.push(Block::Text(s.clone()));
            &[]
        }
        None | Some(Value::Null) => &[],
        Some(_) => return Err("content is neither a list of blocks nor a string".into()),
    };
    let mut calls = 0usize;
    for (i, b) in blocks.iter().enumerate() {
        match b.get("type").and_then(Value::as_str) {
            Some("text") => {
                let t = b.get("text").and_then(Value::as_str).unwrap_or("");
                content.push(Block::Text(t.to_string()));
            }
            Some("tool_call") | Some("tool_use") => {
                calls += 1;
                if calls > MAX_TOOL_CALLS {
                    return Err(format!("more than {MAX_TOOL_CALLS} tool calls in one response"));
                }
                let name = b
                    .get("name")
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty())
                    .ok_or(format!("content[{i}]: a tool call without a name"))?;
                let id = match b.get("id").and_then(Value::as_str) {
                    Some(id) if !id.is_empty() => clip(id, MAX_NAME),
                    _ => format!("call_{i}"),
                };
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                content.push(Block::ToolCall {
                    id,
                    name: clip(name, MAX_NAME),
                    input,
                });
            }
            // Other block kinds (thinking, images) are not replayed.
            _ => {}
        }
    }
    let stop_reason = match (stop, calls) {
        (_, n) if n > 0 => StopReason::ToolCall,
        (StopReason::ToolCall, 0) => StopReason::EndTurn,
        (s, _) => s,
    };
    let n = |k: &str| {
        obj.get("usage")
            .and_then(|u| u.get(k))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(Response {
        stop_reason,
        content,
        usage: Usage {
            input_tokens: n("input_tokens"),
            output_tokens: n("output_tokens"),
            cached_tokens: n("cached_tokens"),
        },
    })
}

fn error_text(obj: &Map<String, Value>) -> String {
    let msg = obj
        .get("error")
        .and_then(|e| e.as_str().or_else(|| e.get("message").and_then(Value::as_str)))
        .unwrap_or("the driver reported an error");
    crate::agent::sanitize::one_line(msg, 2000)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request as one JSON value, built whole: what [`Conversation`] must equal.
    fn whole(
        model: &str,
        max: u64,
        system: &str,
        messages: &[Message],
        tools: &[ToolSpec],
        params: &Value,
    ) -> String {
        let tools: Vec<Value> = tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "parameters": t.parameters}))
            .collect();
        json!({
            "model": model,
            "max_tokens": max,
            "system": system,
            "messages": messages.iter().map(Message::to_json).collect::<Vec<_>>(),
            "tools": tools,
            "params": params,
        })
        .to_string()
    }

    #[test]
    fn a_conversation_built_turn_by_turn_is_the_request_built_whole() {
        let tools = vec![ToolSpec {
            name: "bash".into(),
            description: "a \"shell\"\n".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        }];
        let params = json!({"temperature": 0.5, "z": [1, 2]});
        let system = "be brief \u{2028} </script>";
        let mut c = Conversation::new("m-1", 4096, system, &tools, &params);
        assert_eq!(c.request(), whole("m-1", 4096, system, &[], &tools, &params));
        let mut all = Vec::new();
        for m in [
            Message::user("hi \"there\""),
            Message {
                role: Role::Assistant,
                content: vec![
                    Block::Text("let me".into()),
                    Block::ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        input: json!({"command": "ls\t-l"}),
                    },
                ],
                tool_call_id: None,
                is_error: false,
            },
            Message::tool("c1", "a\u{0}b".into(), true),
        ] {
            all.push(m.clone());
            c.push(m);
            assert_eq!(c.request(), whole("m-1", 4096, system, &all, &tools, &params));
            let _: Value = serde_json::from_str(&c.request()).unwrap();
        }
        c.replace(vec![Message::user("summary")]);
        assert_eq!(c.messages(), &[Message::user("summary")]);
        assert_eq!(
            c.request(),
            whole("m-1", 4096, system, &[Message::user("summary")], &tools, &params)
        );
        let empty = Conversation::new("m", 1, "", &[], &Value::Null);
        assert_eq!(empty.request(), whole("m", 1, "", &[], &[], &Value::Null));
    }

    #[test]
    fn a_tool_turn_and_a_final_turn_parse() {
        let r = parse_response(r#"{"stop_reason":"tool_call","content":[{"type":"text","text":"let me"},{"type":"tool_call","id":"c1","name":"bash","input":{"command":"ls"}}],"usage":{"input_tokens":12,"output_tokens":3}}"#).unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolCall);
        assert_eq!(r.calls(), vec![("c1", "bash", &json!({"command": "ls"}))]);
        assert_eq!(r.usage.input_tokens, 12);
        let r = parse_response(r#"{"stop_reason":"end_turn","content":[{"type":"text","text":"done"}]}"#)
            .unwrap();
        assert_eq!(r.stop_reason, StopReason::EndTurn);
        assert_eq!(r.usage, Usage::default());
    }

    #[test]
    fn calls_decide_the_turn_kind() {
        let r = parse_response(r#"{"stop_reason":"end_turn","content":[{"type":"tool_call","name":"x"}]}"#)
            .unwrap();
        assert_eq!(r.stop_reason, StopReason::ToolCall);
        assert_eq!(r.calls()[0].0, "call_0");
        let r = parse_response(r#"{"stop_reason":"tool_call","content":[]}"#).unwrap();
        assert_eq!(r.stop_reason, StopReason::EndTurn);
    }

    #[test]
    fn bad_responses_are_errors_not_panics() {
        for bad in [
            "",
            "null",
            "[]",
            "{}",
            r#"{"stop_reason":7}"#,
            r#"{"stop_reason":"weird"}"#,
            r#"{"stop_reason":"end_turn","content":5}"#,
            r#"{"stop_reason":"tool_call","content":[{"type":"tool_call"}]}"#,
            r#"{"stop_reason":"error","error":{"message":"boom"}}"#,
        ] {
            assert!(parse_response(bad).is_err(), "{bad}");
        }
        let many: Vec<Value> = (0..=MAX_TOOL_CALLS)
            .map(|i| json!({"type": "tool_call", "name": format!("t{i}")}))
            .collect();
        let text = json!({"stop_reason": "tool_call", "content": many}).to_string();
        assert!(parse_response(&text).is_err());
    }

    #[test]
    fn messages_render_in_the_driver_shape() {
        let m = Message::tool("c1", "out".into(), true);
        assert_eq!(
            m.to_json(),
            json!({"role": "tool", "tool_call_id": "c1", "is_error": true, "content": [{"type": "text", "text": "out"}]})
        );
        let mut c = Conversation::new("m", 10, "sys", &[], &json!({}));
        c.push(Message::user("hi"));
        let req: Value = serde_json::from_str(&c.request()).unwrap();
        assert_eq!(
            req["messages"][0],
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}]})
        );
        assert_eq!(req["tools"], json!([]));
    }
}
