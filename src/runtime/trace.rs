//! `trace.jsonl`: one JSON object per line, each written with a single `write` on a file
//! opened for appending, so a crash never leaves half a line. Every string in an event is
//! passed through the peer-handle redaction first, so no `mh1` token is ever written. The
//! trace has a byte budget (`MURMUR_TRACE_BUDGET_BYTES`, else [`DEFAULT_BUDGET`]): past it,
//! events are counted, not written, and the session's closing lines (`trace_dropped` with
//! the count, then `session_end`) are written whatever the budget. A failed write is
//! reported to the records' [`Health`]. Beside it, `logs/bootstrap.log`: the runtime's
//! decisions, in words.

use super::records::{Health, Watched};
use serde_json::{json, Map, Value};
use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

pub use crate::trace_view::DEFAULT_TRACE_BUDGET as DEFAULT_BUDGET;

/// The session's trace; clones are writers onto the same file, budget and count.
#[derive(Debug, Clone)]
pub struct Trace(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    file: File,
    session_id: String,
    watched: Watched,
    /// Bytes of ordinary events the trace may hold.
    budget: u64,
    /// Bytes of ordinary events written so far.
    written: AtomicU64,
    /// An event did not fit: every later ordinary event is counted, not written.
    full: AtomicBool,
    /// Events counted, not written.
    dropped: AtomicU64,
}

use crate::clock::now_ms;

/// The events written whatever the budget: the session's closing lines.
const CLOSING: [&str; 2] = ["trace_dropped", "session_end"];

impl Trace {
    /// Trace into `file` (opened for appending in the records directory) for `session_id`,
    /// at most `budget` bytes of events before the closing lines; failed writes are
    /// reported to `health`.
    pub fn new(file: File, session_id: &str, budget: u64, health: &Health) -> Trace {
        Trace(Arc::new(Shared {
            file,
            session_id: session_id.to_string(),
            watched: health.watch("trace.jsonl"),
            budget,
            written: AtomicU64::new(0),
            full: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        }))
    }

    /// The health of the records this trace is part of.
    pub fn health(&self) -> &Health {
        self.0.watched.health()
    }

    /// Append one event: `event_type`, `session_id`, `timestamp`, then `fields`. Past the
    /// budget an ordinary event is counted and `Ok` (it was handled as the budget says).
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
        if !CLOSING.contains(&event_type) && !self.fits(bytes.len() as u64) {
            s.dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
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

    /// Whether an ordinary event of `len` bytes is within the budget (counted as written
    /// when it is); once one is not, none after it is.
    fn fits(&self, len: u64) -> bool {
        let s = &*self.0;
        if s.full.load(Ordering::Relaxed) {
            return false;
        }
        let took = s
            .written
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                (w.saturating_add(len) <= s.budget).then_some(w + len)
            })
            .is_ok();
        if !took {
            s.full.store(true, Ordering::Relaxed);
        }
        took
    }

    /// The closing lines: `trace_dropped` when events were counted past the budget, then
    /// `session_end` with `fields`.
    pub fn end(&mut self, fields: Value) -> io::Result<()> {
        let dropped = self.0.dropped.load(Ordering::Relaxed);
        let counted = if dropped > 0 {
            self.event(
                "trace_dropped",
                json!({"dropped_events": dropped, "budget_bytes": self.0.budget}),
            )
        } else {
            Ok(())
        };
        let ended = self.event("session_end", fields);
        counted.and(ended)
    }
}

/// The trace's byte budget: `MURMUR_TRACE_BUDGET_BYTES` (a positive whole number of bytes),
/// else [`DEFAULT_BUDGET`]; a bad value is reported in the second field.
pub fn budget() -> (u64, Option<String>) {
    match std::env::var("MURMUR_TRACE_BUDGET_BYTES") {
        Err(_) => (DEFAULT_BUDGET, None),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => (n, None),
            _ => (
                DEFAULT_BUDGET,
                Some(format!(
                    "warning: MURMUR_TRACE_BUDGET_BYTES={v:?} is not a positive whole number of bytes; the trace's budget is {DEFAULT_BUDGET} bytes"
                )),
            ),
        },
    }
}

/// `logs/bootstrap.log`: what the runtime decided, line by line.
pub type Bootstrap = super::records::Log;

#[cfg(test)]
mod tests {
    use super::*;

    fn trace_in(dir: &std::path::Path, budget: u64) -> Trace {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("trace.jsonl"))
            .unwrap();
        Trace::new(f, "ses_1", budget, &Health::new(dir))
    }

    #[test]
    fn past_the_budget_events_are_counted_and_the_closing_lines_still_written() {
        let dir = std::env::temp_dir().join(format!("murmur-trace-budget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut t = trace_in(&dir, 1000);
        let mut other = t.clone();
        for i in 0..100 {
            t.event("network", json!({"i": i})).unwrap();
            other.event("resource_read", json!({"i": i})).unwrap();
        }
        t.end(json!({"exit_status": "ok"})).unwrap();
        let text = std::fs::read_to_string(dir.join("trace.jsonl")).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let n = lines.len();
        let before_end: usize = text.lines().take(n - 2).map(|l| l.len() + 1).sum();
        assert!(before_end <= 1000, "{before_end}");
        assert_eq!(lines[n - 2]["event_type"], "trace_dropped");
        assert_eq!(lines[n - 2]["dropped_events"], (200 - (n - 2)) as u64);
        assert_eq!(lines[n - 2]["budget_bytes"], 1000);
        assert_eq!(lines[n - 1]["event_type"], "session_end");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
