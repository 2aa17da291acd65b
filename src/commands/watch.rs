//! `mur watch SESSION`: a live view of a running session of this user, a line per turn,
//! tool or shell call, task and delegation as its trace grows, each with the session's
//! progress (turns and tokens so far); it ends when the session does (`session_end`, or its
//! lock released). The trace is tailed as `mur trace --follow` tails it ([`Tail`]) and each
//! event parsed and rendered by the same [`Timeline`]; only the line differs.

use super::sessions;
use super::trace::Tail;
use crate::diag::{code, Diagnostic};
use crate::trace_view::{Event, Line, Timeline};
use std::io::Write;
use std::time::Duration;

/// How often the trace is looked at for new lines.
const POLL: Duration = Duration::from_millis(200);

/// The events a watch shows; the rest (resource reads, peer handles, network decisions) are
/// `mur trace`'s.
const SHOWN: &[&str] = &[
    "session_start",
    "session_end",
    "task_start",
    "task_end",
    "task_reopened",
    "inference",
    "tool_call",
    "shell",
    "compaction",
    "delegation_start",
    "delegation",
    "completion_refused",
    "trap",
    "spend_ceiling",
    "trace_dropped",
    // A person in the loop: what the task waits for, and the answer.
    "approval_requested",
    "approval_answered",
    "input_requested",
    "input_received",
];

/// Run `mur watch`: the lines as they come on `out`; the exit status.
pub fn watch(session: &str, out: &mut dyn Write, err: &mut dyn Write) -> Result<u8, Diagnostic> {
    let live = sessions::open(session)?;
    let path = live.dir.proc_path().join("trace.jsonl");
    let mut tail = Tail::open(&path)?;
    let mut timeline = Timeline::new();
    let io = |e: std::io::Error| {
        Diagnostic::new(
            code::IO_READ,
            "SESSION",
            format!("cannot read the trace of session {session}: {e}"),
        )
    };
    loop {
        // Looked at before reading, so what the session wrote before it let go is read.
        let alive = live.alive();
        while let Some(lines) = tail.step().map_err(io)? {
            for line in lines {
                show(&mut timeline, line, out);
            }
        }
        if timeline.summary().ended || tail.cut || !alive {
            break;
        }
        std::thread::sleep(POLL);
    }
    if let Some(last) = tail.finish() {
        show(&mut timeline, last, out);
    }
    let s = timeline.summary();
    if s.problem_count > 0 {
        let _ = writeln!(
            err,
            "mur watch: {} malformed trace lines skipped",
            s.problem_count
        );
    }
    let end = match &s.exit_status {
        Some(status) => format!("session {session} ended {status}"),
        None => format!("session {session} ended without a session_end (its mur was killed)"),
    };
    let _ = writeln!(
        out,
        "{end}: {} tasks, {} turns, {} tokens",
        s.tasks,
        s.turns,
        s.input_tokens.saturating_add(s.output_tokens)
    );
    let _ = out.flush();
    Ok(0)
}

/// One trace line: the watch's line for a shown event, with the progress after it.
fn show(timeline: &mut Timeline, line: Line, out: &mut dyn Write) {
    let Some(Event {
        at_ms, kind, rows, ..
    }) = timeline.push_event(line)
    else {
        return;
    };
    let when = match at_ms {
        Some(t) => format!("{:+9.3}s", t as f64 / 1000.0),
        None => format!("{:>10}", "?"),
    };
    let lines = rows;
    if !SHOWN.contains(&kind.as_str()) {
        return;
    }
    let s = timeline.summary();
    let progress = format!(
        "turn {:<3} {:>8} tok",
        s.turns,
        s.input_tokens.saturating_add(s.output_tokens)
    );
    // The session's header only (its grants are `mur trace`'s).
    let take = if kind == "session_start" { 1 } else { lines.len() };
    for (mark, _, text) in lines.into_iter().take(take) {
        let _ = writeln!(out, "{when} {progress} {mark} {text}");
    }
    let _ = out.flush();
}
