//! JSON-RPC 2.0 for the A2A door: the request envelope (untrusted bytes, capped), the
//! method table of both A2A generations, the `A2A-Version` check, typed params, and the
//! rendering of responses and errors. Every failure is an `RpcError`, never a panic.

use super::params::{list_params, send_params, task_params, Refusal};
pub use super::params::{Call, ListRequest, Op, SendRequest, TaskRequest};
pub use super::params::{DEFAULT_PAGE_SIZE, MAX_ID, MAX_PAGE_SIZE, MAX_PARTS, MAX_TEXT};
use super::push::Kind as PushKind;
use super::Generation;
use serde_json::{json, Value};

/// The largest request body parsed, bytes (a door is not an upload endpoint).
pub const MAX_BODY: usize = 1 << 20;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const TASK_NOT_FOUND: i64 = -32001;
pub const TASK_NOT_CANCELABLE: i64 = -32002;
pub const PUSH_NOT_SUPPORTED: i64 = -32003;
pub const UNSUPPORTED_OPERATION: i64 = -32004;
pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
pub const EXTENDED_CARD_NOT_CONFIGURED: i64 = -32007;
pub const VERSION_NOT_SUPPORTED: i64 = -32009;

/// Every code this layer (and the door above it) answers with.
pub const CODES: [i64; 12] = [
    PARSE_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    INVALID_PARAMS,
    INTERNAL_ERROR,
    TASK_NOT_FOUND,
    TASK_NOT_CANCELABLE,
    PUSH_NOT_SUPPORTED,
    UNSUPPORTED_OPERATION,
    CONTENT_TYPE_NOT_SUPPORTED,
    EXTENDED_CARD_NOT_CONFIGURED,
    VERSION_NOT_SUPPORTED,
];

/// The `domain` of the `google.rpc.ErrorInfo` A2A 1.0 errors carry.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// The A2A 1.0 error type of an A2A-specific code, as ErrorInfo's `reason` names it (the
/// type in UPPER_SNAKE_CASE without "Error"); `None` for the JSON-RPC codes and others.
pub fn error_reason(code: i64) -> Option<&'static str> {
    Some(match code {
        -32001 => "TASK_NOT_FOUND",
        -32002 => "TASK_NOT_CANCELABLE",
        -32003 => "PUSH_NOTIFICATION_NOT_SUPPORTED",
        -32004 => "UNSUPPORTED_OPERATION",
        -32005 => "CONTENT_TYPE_NOT_SUPPORTED",
        -32006 => "INVALID_AGENT_RESPONSE",
        -32007 => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        -32008 => "EXTENSION_SUPPORT_REQUIRED",
        -32009 => "VERSION_NOT_SUPPORTED",
        _ => return None,
    })
}

/// A JSON-RPC error answer: `id` is the request's when it was read, else null. An
/// A2A-specific error answering a 1.0 call carries `error.data`: an array holding a
/// `google.rpc.ErrorInfo` (A2A 1.0 §9.5); 0.3 answers and JSON-RPC's own errors carry none.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub id: Value,
    pub code: i64,
    pub message: String,
    /// The generation of the call it answers, when that was read.
    pub generation: Option<Generation>,
    /// It answers a streaming method (send streaming, subscribe), when that was read.
    pub streaming: bool,
}

impl RpcError {
    pub fn new(id: &Value, code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            id: id.clone(),
            code,
            message: message.into(),
            generation: None,
            streaming: false,
        }
    }

    /// The same error, answering a call of `generation`.
    pub fn answering(mut self, generation: Generation) -> RpcError {
        self.generation = Some(generation);
        self
    }

    /// The same error, answering a streaming call when `streaming`.
    pub fn on_stream(mut self, streaming: bool) -> RpcError {
        self.streaming = streaming;
        self
    }

    /// Whether it goes as a server-sent event: an error of a 0.3 streaming call (the 0.3
    /// clients read a stream's errors only from its events; 1.0 clients read a JSON body).
    pub fn as_event(&self) -> bool {
        self.streaming && self.generation == Some(Generation::V03)
    }

    /// The whole response value.
    pub fn to_json(&self) -> Value {
        let data = match (self.generation, error_reason(self.code)) {
            (Some(Generation::V10), Some(reason)) => Some(json!([{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": reason,
                "domain": ERROR_DOMAIN,
            }])),
            _ => None,
        };
        error_response(&self.id, self.code, &self.message, data)
    }
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
pub fn result_response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// `{"jsonrpc":"2.0","id":…,"error":{code,message,data?}}`.
pub fn error_response(id: &Value, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut e = json!({"code": code, "message": message});
    if let Some(d) = data {
        e["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": e})
}

/// A response value as body bytes.
pub fn to_body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_else(|_| {
        br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}"#.to_vec()
    })
}

/// The envelope of a well-formed request.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// A string, a number, or null (also when absent: the door answers every request).
    pub id: Value,
    pub method: String,
    pub params: Value,
}

/// Parse a request body's envelope. Batches (arrays) are not supported: -32600.
pub fn parse_envelope(body: &[u8]) -> Result<Envelope, RpcError> {
    let null = Value::Null;
    if body.len() > MAX_BODY {
        return Err(RpcError::new(
            &null,
            INVALID_REQUEST,
            format!("Invalid Request: body exceeds {MAX_BODY} bytes"),
        ));
    }
    let v: Value =
        serde_json::from_slice(body).map_err(|_| RpcError::new(&null, PARSE_ERROR, "Parse error"))?;
    let Value::Object(mut o) = v else {
        return Err(RpcError::new(
            &null,
            INVALID_REQUEST,
            "Invalid Request: not a JSON object",
        ));
    };
    let id = match o.remove("id") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.len() <= MAX_ID => Value::String(s),
        Some(Value::Number(n)) => Value::Number(n),
        Some(_) => {
            return Err(RpcError::new(
                &null,
                INVALID_REQUEST,
                "Invalid Request: id must be a string, a number or null",
            ))
        }
    };
    if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::new(
            &id,
            INVALID_REQUEST,
            "Invalid Request: jsonrpc must be \"2.0\"",
        ));
    }
    let Some(Value::String(method)) = o.remove("method") else {
        return Err(RpcError::new(
            &id,
            INVALID_REQUEST,
            "Invalid Request: method must be a string",
        ));
    };
    let params = o.remove("params").unwrap_or(Value::Null);
    Ok(Envelope { id, method, params })
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Send,
    Stream,
    Get,
    Cancel,
    Subscribe,
    List,
    /// The extended agent card (served only by an authenticated door).
    ExtendedCard,
    /// A push-notification config method.
    Push(super::push::Kind),
}

impl Method {
    /// The method's A2A 1.0 name: the scope a door credential needs to call it in
    /// either generation.
    pub fn scope(self) -> &'static str {
        match self {
            Method::Send => "SendMessage",
            Method::Stream => "SendStreamingMessage",
            Method::Get => "GetTask",
            Method::Cancel => "CancelTask",
            Method::Subscribe => "SubscribeToTask",
            Method::List => "ListTasks",
            Method::ExtendedCard => "GetExtendedAgentCard",
            Method::Push(k) => match k {
                PushKind::Set => "CreateTaskPushNotificationConfig",
                PushKind::Get => "GetTaskPushNotificationConfig",
                PushKind::List => "ListTaskPushNotificationConfigs",
                PushKind::Delete => "DeleteTaskPushNotificationConfig",
            },
        }
    }
}

/// The method table: `Ok` for a method the door knows, `Err(code, message)` otherwise
/// (unknown -32601). The push-notification config methods are known here; a door whose
/// capsule allows no webhook answers them -32003 itself.
pub fn classify(method: &str) -> Result<(Generation, Method), (i64, &'static str)> {
    use Generation::*;
    Ok(match method {
        "message/send" => (V03, Method::Send),
        "message/stream" => (V03, Method::Stream),
        "tasks/get" => (V03, Method::Get),
        "tasks/cancel" => (V03, Method::Cancel),
        "tasks/resubscribe" => (V03, Method::Subscribe),
        "SendMessage" => (V10, Method::Send),
        "SendStreamingMessage" => (V10, Method::Stream),
        "GetTask" => (V10, Method::Get),
        "CancelTask" => (V10, Method::Cancel),
        "ListTasks" => (V10, Method::List),
        "SubscribeToTask" => (V10, Method::Subscribe),
        "tasks/pushNotificationConfig/set" => (V03, Method::Push(PushKind::Set)),
        "tasks/pushNotificationConfig/get" => (V03, Method::Push(PushKind::Get)),
        "tasks/pushNotificationConfig/list" => (V03, Method::Push(PushKind::List)),
        "tasks/pushNotificationConfig/delete" => (V03, Method::Push(PushKind::Delete)),
        "CreateTaskPushNotificationConfig" => (V10, Method::Push(PushKind::Set)),
        "GetTaskPushNotificationConfig" => (V10, Method::Push(PushKind::Get)),
        "ListTaskPushNotificationConfigs" | "ListTaskPushNotificationConfig" => {
            (V10, Method::Push(PushKind::List))
        }
        "DeleteTaskPushNotificationConfig" => (V10, Method::Push(PushKind::Delete)),
        m if m.starts_with("tasks/pushNotificationConfig/") => {
            return Err((METHOD_NOT_FOUND, "Method not found"))
        }
        "agent/getAuthenticatedExtendedCard" => (V03, Method::ExtendedCard),
        "GetExtendedAgentCard" => (V10, Method::ExtendedCard),
        _ => return Err((METHOD_NOT_FOUND, "Method not found")),
    })
}

/// Whether an `A2A-Version` header value names 1.0 (`1.0`, `1.0.x`).
pub fn is_supported_v10(header: &str) -> bool {
    let mut it = header.trim().split('.');
    let major = it.next().and_then(|p| p.parse::<u32>().ok());
    let minor = it.next().and_then(|p| p.parse::<u32>().ok());
    let rest_ok = it.all(|p| p.parse::<u32>().is_ok());
    major == Some(1) && minor == Some(0) && rest_ok
}

/// Parse a POST body into a call. `a2a_version` is the `A2A-Version` header. A 1.0
/// method needs it to name 1.0: a missing header counts as 0.3, as the SDK server has it,
/// so a 1.0 method without it is -32009 (the SDK client always sends it). 0.3 methods
/// are not version-checked (the card GET and old clients carry `1.0` or nothing).
pub fn parse_call(body: &[u8], a2a_version: Option<&str>) -> Result<Call, RpcError> {
    parse_envelope(body)?.call(a2a_version)
}

impl Envelope {
    /// The method this envelope asks for, if the door serves it (its generation and
    /// kind), before any of its params are read.
    pub fn served(&self) -> Option<(Generation, Method)> {
        classify(&self.method).ok()
    }

    /// The call: the method classified, the version checked and the params parsed (the
    /// second step of [`parse_call`]).
    pub fn call(self, a2a_version: Option<&str>) -> Result<Call, RpcError> {
        call(self, a2a_version)
    }
}

fn call(env: Envelope, a2a_version: Option<&str>) -> Result<Call, RpcError> {
    let id = env.id;
    let (generation, method) = classify(&env.method)
        .map_err(|(c, m)| RpcError::new(&id, c, m).answering(generation_of_name(&env.method)))?;
    // The extended card reads nothing and is answered before any check, as a door without
    // one always answered it (-32007): no version, no params needed.
    if method == Method::ExtendedCard {
        return Ok(Call {
            id,
            generation,
            op: Op::ExtendedCard,
        });
    }
    if generation == Generation::V10 && !a2a_version.is_some_and(is_supported_v10) {
        let named = a2a_version.map_or("0.3 (no A2A-Version header)".to_string(), |v| {
            format!("{:?}", clip(v))
        });
        return Err(RpcError::new(
            &id,
            VERSION_NOT_SUPPORTED,
            format!("A2A version {named} is not supported by {}", env.method),
        )
        .answering(generation));
    }
    let streaming = matches!(method, Method::Stream | Method::Subscribe);
    let bad = |m: String| {
        RpcError::new(&id, INVALID_PARAMS, format!("Invalid params: {m}"))
            .answering(generation)
            .on_stream(streaming)
    };
    let refused = |r: Refusal| match r {
        Refusal::Invalid(m) => bad(m),
        Refusal::ContentType(m) => RpcError::new(
            &id,
            CONTENT_TYPE_NOT_SUPPORTED,
            format!("Content type not supported: {m}"),
        )
        .answering(generation)
        .on_stream(streaming),
    };
    let Value::Object(p) = env.params else {
        return Err(bad("params must be an object".into()));
    };
    let op = match method {
        Method::Send => Op::Send(send_params(&p, generation).map_err(refused)?),
        Method::Stream => Op::Stream(send_params(&p, generation).map_err(refused)?),
        Method::Get => Op::Get(task_params(&p).map_err(bad)?),
        Method::Cancel => Op::Cancel(task_params(&p).map_err(bad)?),
        Method::Subscribe => Op::Subscribe(task_params(&p).map_err(bad)?),
        Method::List => Op::List(list_params(&p).map_err(bad)?),
        Method::ExtendedCard => Op::ExtendedCard,
        Method::Push(k) => Op::Push(super::push::params(k, &p, generation).map_err(bad)?),
    };
    Ok(Call { id, generation, op })
}

/// The generation a method name belongs to, served or not: 0.3 names hold a `/`
/// (`message/send`, `tasks/pushNotificationConfig/set`), 1.0 names are one word.
fn generation_of_name(method: &str) -> Generation {
    if method.contains('/') {
        Generation::V03
    } else {
        Generation::V10
    }
}

fn clip(s: &str) -> String {
    s.chars().take(32).collect()
}
#[cfg(test)]
#[path = "rpc_tests.rs"]
mod tests;
