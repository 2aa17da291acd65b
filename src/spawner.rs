//! `MURMUR_SPAWNER`: the handle a delegating parent injects into a child it launches, so the
//! child can post its completion back (roost API, "The completion path"). Unset or blank
//! means nobody delegated this capsule; anything else must be exactly the five fields, each
//! a non-empty string of its own shape, or the launch is refused with E-RUN-020. The
//! parent's URL is held to loopback: a child never posts anywhere else.
//!
//! Groundwork for delegation (issue 16): parsed and rendered here, not yet read by a launch.
//! Outside `runtime` so the fuzz crate (built without default features) reaches it.

use crate::diag::{code, Diagnostic};
use serde_json::{Map, Value};

/// The longest value accepted, bytes (the five fields need a few hundred).
pub const MAX_LEN: usize = 4096;
/// The longest `context_id` (a client may choose it on the parent's door).
const MAX_CONTEXT: usize = 256;
const FIELDS: [&str; 5] = ["url", "session_id", "context_id", "trust", "delegation_id"];

/// The trust class of the parent task that delegated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    Trusted,
    Untrusted,
}

impl Trust {
    pub fn as_str(self) -> &'static str {
        match self {
            Trust::Trusted => "trusted",
            Trust::Untrusted => "untrusted",
        }
    }
}

/// A parsed `MURMUR_SPAWNER`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spawner {
    /// The parent's A2A endpoint, `http://127.0.0.1:P` or `http://localhost:P`.
    pub url: String,
    /// The parent's session, `ses_` and 32 lowercase hex.
    pub session_id: String,
    pub context_id: String,
    pub trust: Trust,
    /// `dlg_` and 32 lowercase hex.
    pub delegation_id: String,
}

fn refused(why: impl Into<String>) -> Diagnostic {
    Diagnostic::new(
        code::RUN_SPAWNER,
        "MURMUR_SPAWNER",
        format!("MURMUR_SPAWNER cannot be read: {}", why.into()),
    )
    .with_hint("it is set by a delegating parent's launcher; unset it to run this capsule on its own")
}

/// Whether `v` is `prefix` and 32 lowercase hex digits (`ses_…`, `dlg_…`).
pub fn is_id(v: &str, prefix: &str) -> bool {
    v.strip_prefix(prefix).is_some_and(|h| {
        h.len() == 32
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `http://127.0.0.1:P` or `http://localhost:P`, an optional trailing `/`, P in 1..=65535.
fn loopback_url(v: &str) -> bool {
    let Some(rest) = v.strip_prefix("http://") else {
        return false;
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let Some((host, port)) = rest.split_once(':') else {
        return false;
    };
    let port_ok = !port.is_empty()
        && port.len() <= 5
        && port.bytes().all(|b| b.is_ascii_digit())
        && !port.starts_with('0')
        && port.parse::<u32>().is_ok_and(|p| (1..=65535).contains(&p));
    matches!(host, "127.0.0.1" | "localhost") && port_ok
}

impl Spawner {
    /// Read the variable's value: `None` when unset or blank, the handle when it is whole,
    /// E-RUN-020 otherwise.
    pub fn from_env(value: Option<&str>) -> Result<Option<Spawner>, Diagnostic> {
        let Some(text) = value.filter(|v| !v.trim().is_empty()) else {
            return Ok(None);
        };
        if text.len() > MAX_LEN {
            return Err(refused(format!("longer than {MAX_LEN} bytes")));
        }
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
            return Err(refused("not a JSON object"));
        };
        Spawner::from_map(&map).map(Some)
    }

    fn from_map(map: &Map<String, Value>) -> Result<Spawner, Diagnostic> {
        if let Some(extra) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(refused(format!(
                "unknown field {:?}",
                crate::agent::sanitize::one_line(extra, 64)
            )));
        }
        let field = |k: &str| -> Result<&str, Diagnostic> {
            match map.get(k) {
                Some(Value::String(s)) if !s.is_empty() => Ok(s.as_str()),
                Some(Value::String(_)) => Err(refused(format!("{k} is empty"))),
                Some(_) => Err(refused(format!("{k} is not a string"))),
                None => Err(refused(format!("{k} is missing"))),
            }
        };
        let url = field("url")?;
        if !loopback_url(url) {
            return Err(refused(
                "url must be http://127.0.0.1:PORT or http://localhost:PORT",
            ));
        }
        let session_id = field("session_id")?;
        if !is_id(session_id, "ses_") {
            return Err(refused("session_id is not ses_ and 32 lowercase hex digits"));
        }
        let context_id = field("context_id")?;
        if context_id.len() > MAX_CONTEXT || context_id.chars().any(char::is_control) {
            return Err(refused(format!(
                "context_id is longer than {MAX_CONTEXT} bytes or holds a control character"
            )));
        }
        let trust = match field("trust")? {
            "trusted" => Trust::Trusted,
            "untrusted" => Trust::Untrusted,
            _ => return Err(refused("trust is neither trusted nor untrusted")),
        };
        let delegation_id = field("delegation_id")?;
        if !is_id(delegation_id, "dlg_") {
            return Err(refused("delegation_id is not dlg_ and 32 lowercase hex digits"));
        }
        Ok(Spawner {
            url: url.trim_end_matches('/').to_string(),
            session_id: session_id.to_string(),
            context_id: context_id.to_string(),
            trust,
            delegation_id: delegation_id.to_string(),
        })
    }

    /// The compact JSON a launcher injects, fields in the spec's order.
    pub fn to_env(&self) -> String {
        let q = |s: &str| Value::from(s).to_string();
        format!(
            "{{\"url\":{},\"session_id\":{},\"context_id\":{},\"trust\":{},\"delegation_id\":{}}}",
            q(&self.url),
            q(&self.session_id),
            q(&self.context_id),
            q(self.trust.as_str()),
            q(&self.delegation_id)
        )
    }

    /// The four headers a completion carries to the parent's door.
    pub fn completion_headers(&self) -> [(&'static str, &str); 4] {
        [
            ("x-murmur-task-origin", "completion"),
            ("x-murmur-task-trust", self.trust.as_str()),
            ("x-murmur-delegation-id", &self.delegation_id),
            ("x-murmur-completion-session", &self.session_id),
        ]
    }
}

#[cfg(test)]
#[path = "spawner_tests.rs"]
mod tests;
