//! One driver call, provider-independent: parse the runtime's request, build and send the
//! provider body, classify the answer. The sending is a parameter so the whole flow runs
//! natively in tests; on wasm32 it is [`crate::http::post`].

use crate::outcome::{one_line, transient_status, Outcome, META_RETRY_AFTER};
use crate::request::{Request, Response};
use crate::retry::retry_after_seconds;
use crate::url::Url;
use serde_json::{Map, Value};

/// The most response body a driver reads; a longer body is an error.
pub const BODY_CAP: usize = 16 * 1024 * 1024;

/// Environment variable: the provider API base.
pub const ENV_ENDPOINT: &str = "MURMUR_INFERENCE_ENDPOINT";
/// Environment variable: the model, used when the request names none.
pub const ENV_MODEL: &str = "MURMUR_INFERENCE_MODEL";
/// Environment variable: a JSON object of extra provider body fields.
pub const ENV_DRIVER_CONFIG: &str = "MURMUR_INFERENCE_DRIVER_CONFIG";

/// A provider's HTTP answer, body read in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    /// The raw `retry-after` header, if any.
    pub retry_after: Option<String>,
    pub body: Vec<u8>,
}

/// Why no complete response arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// The host refused the request (not in the network allow-list); retrying will not help.
    Denied(String),
    /// The connection or the body failed; a retry may succeed.
    Failed(String),
    /// The body exceeded [`BODY_CAP`].
    TooLarge { status: u16 },
}

/// What differs between providers.
pub trait Provider {
    /// Appended to the endpoint (after dropping its trailing slash).
    fn path(&self) -> &'static str;
    /// Headers besides `content-type` and `accept` (never an auth header: the host adds it).
    fn headers(&self) -> &'static [(&'static str, &'static str)];
    /// Body keys the driver owns; `params` and driver config cannot replace or remove them.
    fn protected(&self) -> &'static [&'static str];
    /// The provider body for a request, before extras are merged in.
    fn body(&self, req: &Request) -> Map<String, Value>;
    /// A 2xx body in the provider's format, as the runtime's response.
    fn parse(&self, body: &Value) -> Result<Response, String>;
}

/// The driver's environment, as read from WASI env.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub endpoint: Option<String>,
    pub model: Option<String>,
    pub config: Option<String>,
}

impl Env {
    /// Read from the process (WASI) environment; empty values count as unset.
    pub fn from_process() -> Env {
        let get = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Env {
            endpoint: get(ENV_ENDPOINT),
            model: get(ENV_MODEL),
            config: get(ENV_DRIVER_CONFIG),
        }
    }
}

/// Merge extra body fields into `body`: a `null` value removes the key; protected keys are
/// left alone.
pub fn merge_extras(body: &mut Map<String, Value>, extras: &Map<String, Value>, protected: &[&str]) {
    for (k, v) in extras {
        if protected.contains(&k.as_str()) {
            continue;
        }
        if v.is_null() {
            body.remove(k);
        } else {
            body.insert(k.clone(), v.clone());
        }
    }
}

/// The provider body for `input` under `env`: the request, then the driver config merged in,
/// then `params` over it. Errors are the summary of a bad-input outcome.
pub fn provider_body<P: Provider>(provider: &P, input: Option<&str>, env: &Env) -> Result<Vec<u8>, String> {
    let data = input.ok_or("no request data")?;
    let mut req = Request::parse(data).map_err(|e| format!("bad request: {e}"))?;
    if req.model.trim().is_empty() {
        req.model = env.model.clone().unwrap_or_default();
    }
    if req.model.trim().is_empty() {
        return Err(format!(
            "bad request: no model (neither request.model nor {ENV_MODEL})"
        ));
    }
    let config = match env.config.as_deref() {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(format!("{ENV_DRIVER_CONFIG} is not a JSON object")),
            Err(e) => return Err(format!("{ENV_DRIVER_CONFIG} is not JSON: {e}")),
        },
    };
    let mut body = provider.body(&req);
    merge_extras(&mut body, &config, provider.protected());
    merge_extras(&mut body, &req.params, provider.protected());
    Ok(Value::Object(body).to_string().into_bytes())
}

/// The whole call. `send` posts a body to a URL with headers; `now_unix` dates a
/// `retry-after` given as an HTTP-date.
pub fn drive<P, S>(provider: &P, input: Option<&str>, env: &Env, now_unix: u64, send: S) -> Outcome
where
    P: Provider,
    S: FnOnce(&Url, &[(&str, &str)], &[u8]) -> Result<HttpResponse, TransportError>,
{
    let body = match provider_body(provider, input, env) {
        Ok(b) => b,
        Err(why) => return Outcome::error(why, false),
    };
    let url = match env.endpoint.as_deref() {
        None => return Outcome::error(format!("{ENV_ENDPOINT} is not set"), false),
        Some(e) => match Url::parse(e) {
            Ok(u) => u.join(provider.path()),
            Err(why) => return Outcome::error(format!("{ENV_ENDPOINT}: {why}"), false),
        },
    };
    let mut headers: Vec<(&str, &str)> = vec![
        ("content-type", "application/json"),
        ("accept", "application/json"),
    ];
    headers.extend_from_slice(provider.headers());
    match send(&url, &headers, &body) {
        Err(TransportError::Denied(why)) => {
            Outcome::error(format!("request to {url} refused by the host: {why}"), false)
        }
        Err(TransportError::Failed(why)) => {
            Outcome::error(format!("transport failure calling {url}: {why}"), true)
        }
        Err(TransportError::TooLarge { status }) => {
            Outcome::error(format!("provider response exceeds {} MiB", BODY_CAP >> 20), false)
                .with_http_status(status)
        }
        Ok(resp) => classify(provider, resp, now_unix),
    }
}

/// A response that arrived: an HTTP error, an unparsable body, or the turn.
pub fn classify<P: Provider>(provider: &P, resp: HttpResponse, now_unix: u64) -> Outcome {
    if !(200..300).contains(&resp.status) {
        let mut out = Outcome::error(
            format!("provider returned {}: {}", resp.status, error_message(&resp.body)),
            transient_status(resp.status),
        )
        .with_http_status(resp.status);
        if let Some(secs) = resp
            .retry_after
            .as_deref()
            .and_then(|v| retry_after_seconds(v, now_unix))
        {
            out.metadata.push((META_RETRY_AFTER.into(), secs.to_string()));
        }
        return out;
    }
    let parsed = serde_json::from_slice::<Value>(&resp.body)
        .map_err(|e| format!("not JSON ({e}): {}", body_prefix(&resp.body)))
        .and_then(|v| provider.parse(&v));
    match parsed {
        Ok(r) => Outcome::passed(r.stop_reason.as_str(), r.to_json()),
        Err(why) => Outcome::error(format!("unparsable provider response: {why}"), false)
            .with_http_status(resp.status),
    }
}

/// The provider's error message from an error body (`error.message`, a string `error`,
/// `message` or `detail`), else a short prefix of the body.
pub fn error_message(body: &[u8]) -> String {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        let candidates = [
            v.pointer("/error/message"),
            v.get("error"),
            v.get("message"),
            v.get("detail"),
        ];
        for c in candidates.into_iter().flatten() {
            if let Some(s) = c.as_str().filter(|s| !s.trim().is_empty()) {
                return one_line(s, 500);
            }
        }
    }
    body_prefix(body)
}

/// The first 200 characters of a body, on one line; `(empty body)` when there is nothing.
pub fn body_prefix(body: &[u8]) -> String {
    let head = &body[..body.len().min(800)];
    let text = one_line(&String::from_utf8_lossy(head), 200);
    if text.is_empty() {
        "(empty body)".into()
    } else {
        text
    }
}
