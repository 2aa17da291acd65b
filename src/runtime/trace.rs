//! `trace.jsonl`: one JSON object per line, each written with a single `write` on a file
//! opened for appending, so a crash never leaves half a line. Every string in an event is
//! passed through the peer-handle redaction first, so no `mh1` token is ever written. A
//! failed write is reported to the records' [`Health`]. Beside it, `logs/bootstrap.log`:
//! the runtime's decisions, in words.

use super::records::{Health, Watched};
use serde_json::{Map, Value};
use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

/// The session's trace; clones are writers onto the same file.
#[derive(Debug, Clone)]
pub struct Trace(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    file: File,
    session_id: String,
    watched: Watched,
}

use crate::clock::now_ms;

impl Trace {
    /// Trace into `file` (opened for appending in the records directory) for `session_id`;
    /// failed writes are reported to `health`.
    pub fn new(file: File, session_id: &str, health: &Health) -> Trace {
        Trace(Arc::new(Shared {
            file,
            session_id: session_id.to_string(),
            watched: health.watch("trace.jsonl"),
        }))
    }

    /// The health of the records this trace is part of.
    pub fn health(&self) -> &Health {
        self.0.watched.health()
    }

    /// Append one event: `event_type`, `session_id`, `timestamp`, then `fields`.
    pub fn event(&mut self, event_type: &str, fields: Value) -> io::Result<()> {
        let s = &*self.0;
        let mut line = Map::new();
        line.insert("event_type".into(), event_type.into());
        line.insert("session_id".into(), s.session_id.clone().into());
        line.insert("timestamp".into(), now_ms().into());
        // No peer handle reaches a trace, whoever wrote the event: each is its id.
        if let Value::Object(more) = crate::runtime::agent::peer::redact_value(&fields) {
            line.extend(more);
        }
        let mut bytes = serde_json::to_vec(&Value::Object(line)).map_err(io::Error::other)?;
        bytes.push(b'\n');
        let written = (&s.file).write(&bytes).and_then(|n| {
            if n == bytes.len() {
                Ok(n)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "short write to trace.jsonl",
                ))
            }
        });
        match written {
            Ok(_) => Ok(()),
            Err(e) => {
                s.watched.failed(&e);
                Err(e)
            }
        }
    }
}

/// `logs/bootstrap.log`: what the runtime decided, line by line.
pub type Bootstrap = super::records::Log;
