//! What a driver call ends in, independent of the per-crate generated WIT types: each driver
//! copies an [`Outcome`] into its `tool-result`.

/// `murmur:tool/run` status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    Error,
}

/// A `tool-result` without the fields drivers never set (`data-path`, `truncated`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    pub summary: Option<String>,
    pub data: Option<String>,
    pub metadata: Vec<(String, String)>,
}

/// Metadata key: the provider's HTTP status, when a response arrived.
pub const META_HTTP_STATUS: &str = "http_status";
/// Metadata key: `true` when retrying the same request may succeed.
pub const META_TRANSIENT: &str = "transient";
/// Metadata key: seconds the provider asked to wait (from its `retry-after` header).
pub const META_RETRY_AFTER: &str = "retry_after";

impl Outcome {
    /// A successful turn: `data` is the response JSON.
    pub fn passed(summary: impl Into<String>, data: String) -> Outcome {
        Outcome {
            status: Status::Passed,
            summary: Some(summary.into()),
            data: Some(data),
            metadata: Vec::new(),
        }
    }

    /// A failed call; `transient` says whether a retry may help.
    pub fn error(summary: impl Into<String>, transient: bool) -> Outcome {
        Outcome {
            status: Status::Error,
            summary: Some(summary.into()),
            data: None,
            metadata: vec![(META_TRANSIENT.into(), transient.to_string())],
        }
    }

    /// The same outcome with the provider's HTTP status first in the metadata.
    pub fn with_http_status(mut self, status: u16) -> Outcome {
        self.metadata
            .insert(0, (META_HTTP_STATUS.into(), status.to_string()));
        self
    }

    /// The value of one metadata key.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Whether an HTTP error status is worth retrying: timeouts, rate limits, server errors
/// (which include Anthropic's 529 overloaded).
pub fn transient_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500..=599)
}

/// `s` on one line (control characters as spaces), at most `max` characters (then `…`).
pub fn one_line(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.trim().chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        out.push(if c.is_control() { ' ' } else { c });
    }
    out
}
