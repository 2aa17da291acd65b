//! `trace.jsonl`: one JSON object per line, each written with a single `write` on a file
//! opened for appending, so a crash never leaves half a line. Every string in an event is
//! passed through the peer-handle redaction first, so no `mh1` token is ever written. Beside
//! it, `logs/bootstrap.log`: the runtime's decisions, in words.

use serde_json::{Map, Value};
use std::fs::File;
use std::io::{self, Write};

pub struct Trace {
    file: File,
    session_id: String,
}

use crate::clock::now_ms;

impl Trace {
    /// Trace into `file` (opened for appending in the records directory) for `session_id`.
    pub fn new(file: File, session_id: &str) -> Trace {
        Trace {
            file,
            session_id: session_id.to_string(),
        }
    }

    /// A second writer onto the same file (another thread's), appending whole lines too.
    pub fn try_clone(&self) -> io::Result<Trace> {
        Ok(Trace {
            file: self.file.try_clone()?,
            session_id: self.session_id.clone(),
        })
    }

    /// Append one event: `event_type`, `session_id`, `timestamp`, then `fields`.
    pub fn event(&mut self, event_type: &str, fields: Value) -> io::Result<()> {
        let mut line = Map::new();
        line.insert("event_type".into(), event_type.into());
        line.insert("session_id".into(), self.session_id.clone().into());
        line.insert("timestamp".into(), now_ms().into());
        // No peer handle reaches a trace, whoever wrote the event: each is its id.
        if let Value::Object(more) = crate::runtime::agent::peer::redact_value(&fields) {
            line.extend(more);
        }
        let mut bytes = serde_json::to_vec(&Value::Object(line)).map_err(io::Error::other)?;
        bytes.push(b'\n');
        let n = self.file.write(&bytes)?;
        if n != bytes.len() {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "short write to trace.jsonl",
            ));
        }
        Ok(())
    }
}

/// `logs/bootstrap.log`: what the runtime decided, line by line; best effort.
pub struct Bootstrap(pub Option<File>);

impl Bootstrap {
    pub fn line(&mut self, text: &str) {
        if let Some(f) = self.0.as_mut() {
            let _ = f.write_all(format!("{text}\n").as_bytes());
        }
    }
}
