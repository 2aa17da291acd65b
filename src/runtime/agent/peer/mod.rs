//! The peer plane's two agent-loop tools: `share-file` (offered only when
//! `exports.peer_files` is declared) mints an `mh1` handle over one exported file for one
//! named peer; `fetch-peer-file` (offered only when `capabilities.peer_fetch` is declared)
//! redeems a handle a peer sent and lands the bytes as a file under `peer-in/`. Each call
//! yields the model's result and one trace event (`peer_handle_mint`, `peer_file_fetch`);
//! the session writes the event through [`redact_value`], so no token reaches a trace.

mod fetch;
mod share;

use crate::agent::wire::ToolSpec;
use crate::containment::class::Class;
use crate::fsx::Dir;
use crate::manifest::model::Manifest;
use crate::manifest::netrule::NetRule;
use crate::token::Key;
use serde_json::{json, Value};
use std::sync::Arc;

/// The tool that mints a handle.
pub const SHARE: &str = "share-file";
/// The tool that redeems one.
pub const FETCH: &str = "fetch-peer-file";
/// The longest text of a caller's value (a path, a peer) kept in a trace event.
const MAX_SHOWN: usize = 1024;

/// `exports.peer_files` and what minting needs beside it.
pub struct Share {
    pub key: Arc<Key>,
    /// Normalised root relative to the accessible workdir ("" is the workdir).
    pub root: String,
    pub max_ttl_secs: u64,
    pub max_bytes: u64,
    /// `capabilities.network.allow`: the card fetch is an ordinary outbound request.
    pub network_allow: Vec<NetRule>,
}

/// The session's peer tools.
pub struct PeerTools {
    pub session_id: String,
    /// This capsule's name and door port: its own card identity, asserted on a fetch.
    pub name: String,
    pub port: u16,
    /// The accessible workdir (what the agent's tools see as `.`).
    pub work: Dir,
    pub class: Class,
    pub share: Option<Share>,
    /// `capabilities.peer_fetch.allow`.
    pub fetch: Option<Vec<NetRule>>,
}

/// What one call produced: the model's text, whether it is an error, and the trace event.
pub struct Outcome {
    pub text: String,
    pub is_error: bool,
    pub event: (&'static str, Value),
}

/// A refusal: the spec's error code (or the peer's) and a one-line reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub code: String,
    pub message: String,
}

impl Refused {
    pub(crate) fn new(code: &str, message: impl Into<String>) -> Refused {
        Refused {
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// The model's text for this refusal.
    fn text(&self) -> String {
        json!({"error": self.code, "message": self.message}).to_string()
    }
}

impl PeerTools {
    /// The peer tools `m` grants, or `None` when it declares neither half. `key` is the
    /// session's minting key (present exactly when `exports.peer_files` is declared).
    pub fn new(
        m: &Manifest,
        session_id: &str,
        port: u16,
        work: Dir,
        class: Class,
        key: Option<Arc<Key>>,
    ) -> Option<PeerTools> {
        let share = match (&m.exports.peer_files, key) {
            (Some(p), Some(key)) => Some(Share {
                key,
                root: p.root.clone(),
                max_ttl_secs: p.max_ttl_secs,
                max_bytes: p.max_bytes,
                network_allow: m.capabilities.network_allow.clone(),
            }),
            _ => None,
        };
        let fetch = m.capabilities.peer_fetch_allow.clone();
        if share.is_none() && fetch.is_none() {
            return None;
        }
        Some(PeerTools {
            session_id: session_id.to_string(),
            name: m.name.clone(),
            port,
            work,
            class,
            share,
            fetch,
        })
    }

    /// The tools this session offers, in a fixed order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut out = Vec::new();
        if self.share.is_some() {
            out.push(ToolSpec {
                name: SHARE.into(),
                description: "Let one named peer capsule read one file under the export root: returns an opaque handle (with handle_id, expires_at_ms and audience) to send to that peer in a message. The handle works only for that peer and only while this session lives.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "the file, relative to the export root (exports.peer_files.root)"},
                        "peer": {"type": "string", "description": "the peer's address, host:port or http://host:port"},
                        "ttl": {"type": "string", "description": "how long the handle lives, such as 90s, 10m or 1h (at most the export's max_ttl, which is also the default)"}
                    },
                    "required": ["path", "peer"]
                }),
            });
        }
        if self.fetch.is_some() {
            out.push(ToolSpec {
                name: FETCH.into(),
                description: "Fetch a file a peer capsule shared with you, by the handle it sent: the bytes are stored as a file under peer-in/ in your working directory, never returned as text. Returns path, bytes, sha256, generation and peer.".into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "peer": {"type": "string", "description": "the peer's address, host:port or http://host:port"},
                        "handle": {"type": "string", "description": "the handle the peer sent (mh1....)"}
                    },
                    "required": ["peer", "handle"]
                }),
            });
        }
        out
    }

    /// Run `name` when it is one of this session's peer tools.
    pub fn call(&self, name: &str, input: &Value) -> Option<Outcome> {
        match name {
            SHARE => self.share.as_ref().map(|s| share::run(self, s, input)),
            FETCH => self.fetch.as_ref().map(|allow| fetch::run(self, allow, input)),
            _ => None,
        }
    }
}

/// A peer's address: the host (lowercased) and port a request goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Peer {
    pub host: String,
    pub port: u16,
}

impl Peer {
    /// `host:port`.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Parse `host:port`, `host` (port 80) or `http://host[:port][/path]`. An `https://`
    /// peer is refused: the runtime's client speaks plain HTTP to loopback doors only.
    pub fn parse(text: &str) -> Result<Peer, String> {
        let t = text.trim();
        let authority = if let Some(rest) = t.strip_prefix("http://") {
            rest.split(['/', '?', '#']).next().unwrap_or_default()
        } else if t.starts_with("https://") {
            return Err("an https:// peer cannot be reached: capsule doors speak plain HTTP".into());
        } else if t.contains("://") {
            return Err("a peer address is host:port or an http:// URL".into());
        } else {
            t
        };
        let rule = NetRule::parse(authority).map_err(|e| format!("not a peer address: {e}"))?;
        Ok(Peer {
            host: rule.host,
            port: rule.port.unwrap_or(80),
        })
    }
}

/// `text` cut to at most [`MAX_SHOWN`] bytes (on a character boundary), for an event.
pub(crate) fn shown(text: &str) -> String {
    let mut end = text.len().min(MAX_SHOWN);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// A string field of the call's input.
pub(crate) fn field<'a>(input: &'a Value, name: &str) -> Result<&'a str, Refused> {
    match input.get(name) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(Refused::new(
            "invalid_input",
            format!("'{name}' must be a string"),
        )),
        None => Err(Refused::new("invalid_input", format!("'{name}' is required"))),
    }
}

/// `v` with every handle-shaped substring of every string (keys included) replaced by
/// `<handle:HANDLE_ID>` ([`crate::resources::peer::redact`]): for anything bound for a trace.
pub fn redact_value(v: &Value) -> Value {
    use crate::resources::peer::redact;
    match v {
        Value::String(s) => Value::String(redact(s)),
        Value::Array(a) => Value::Array(a.iter().map(redact_value).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (redact(k), redact_value(v))).collect()),
        other => other.clone(),
    }
}

use crate::clock::now_ms;

#[cfg(test)]
mod tests;
