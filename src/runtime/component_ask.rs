//! A WASM capsule's question to its caller (`ask:` in its manifest): a run that leaves
//! `out/ask.txt` puts that text to the caller, the task waits in `input-required` on the
//! door's task table (the same wait as an agent's `ask` tool), and the caller's next
//! message on the task is appended to `task.md` under `## Answer` before `run` is called
//! again (with that message's id in `MURMUR_MESSAGE_ID`). No answer within
//! `ask.timeout_secs` fails the task; a cancel cancels it. The trace records
//! `input_requested` and `input_received`, as for an agent's `ask`.

use super::door::tasks::input::{Awaited, Kind};
use super::door::tasks::{Taken, Tasks};
use super::trace::Trace;
use crate::a2a::shapes::State;
use crate::agent::sanitize;
use crate::fsx::Dir;
use serde_json::json;
use std::sync::atomic::AtomicI32;
use std::time::{Duration, Instant};

/// Where a run leaves its question, in the workdir.
pub const ASK_FILE: &str = "out/ask.txt";
/// The longest question read, bytes; the most characters of it shown in the status.
const MAX_QUESTION: u64 = 8 << 10;
const MAX_SHOWN: usize = 2000;

/// What a finished run's question came to.
pub enum Asked {
    /// It asked nothing: the run's end is the task's.
    Nothing,
    /// The caller answered: run again, with this message id.
    Answered { message_id: String },
    /// The task ends here: its state and why.
    Ended(State, String),
}

/// The question `work` holds after a run of `task` (removed as it is read), put to the
/// caller and waited for; `timeout_secs` None when the manifest declares no `ask`.
pub fn ask(
    (work, trace): (&Dir, &mut Trace),
    (tasks, timeout_secs): (&Tasks, Option<u64>),
    task: &Taken,
    stop: &AtomicI32,
    text: &mut String,
) -> Asked {
    let question = match work.read(ASK_FILE, MAX_QUESTION) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(crate::fsx::FsError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Asked::Nothing
        }
        Err(e) => return failed(format!("cannot read {ASK_FILE}: {e}")),
    };
    if let Err(e) = work.remove_file(ASK_FILE) {
        return failed(format!("cannot remove {ASK_FILE}: {e}"));
    }
    let Some(secs) = timeout_secs else {
        return failed(format!(
            "the run left {ASK_FILE}, and the manifest declares no ask"
        ));
    };
    // A task from task.md, and a delegation's completion report (no credential sees it),
    // has nobody to ask.
    if task.source != "a2a" || task.origin.origin == "completion" {
        let from = if task.source == "a2a" {
            "a delegation's completion"
        } else {
            task.source
        };
        return failed(format!("this task came from {from}: there is nobody to ask"));
    }
    let shown = sanitize::one_line(question.trim(), MAX_SHOWN);
    let started = Instant::now();
    let asked = json!({"task_id": task.id, "question": shown, "timeout_secs": secs});
    if let Err(e) = trace.event("input_requested", asked) {
        return failed(format!("cannot write trace.jsonl: {e}"));
    }
    let waited = tasks.await_input(
        &task.id,
        (Kind::Question, &shown),
        Duration::from_secs(secs),
        (&task.cancel, stop),
    );
    let (outcome, credential) = match &waited {
        Awaited::Answered(r) => ("answered", r.by.clone()),
        Awaited::TimedOut => ("timed_out", None),
        Awaited::Canceled => ("canceled", None),
        Awaited::Stopped => ("interrupted", None),
    };
    let received = json!({"task_id": task.id, "outcome": outcome, "credential": credential,
                          "duration_ms": started.elapsed().as_millis() as u64});
    if let Err(e) = trace.event("input_received", received) {
        return failed(format!("cannot write trace.jsonl: {e}"));
    }
    match waited {
        Awaited::Answered(reply) => {
            text.push_str(&format!("\n\n## Answer\n\n{}\n", reply.answer()));
            if let Err(e) = work.replace("task.md", text.as_bytes()) {
                return failed(format!("cannot write task.md: {e}"));
            }
            Asked::Answered {
                message_id: reply.message_id,
            }
        }
        Awaited::TimedOut => failed(format!("no answer within {secs} s")),
        Awaited::Canceled => Asked::Ended(State::Canceled, "error: canceled\n".into()),
        Awaited::Stopped => failed("the session is stopping".into()),
    }
}

fn failed(why: String) -> Asked {
    Asked::Ended(State::Failed, format!("error: {why}\n"))
}
