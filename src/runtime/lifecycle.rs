//! The capsule lifecycle: which tasks a session runs and when it ends.
//!
//! | `task_acceptance` | runs |
//! |---|---|
//! | `none` | its `task.md` once; every A2A send is refused |
//! | `single` | its `task.md`, or else the first A2A task; then it ends |
//! | `queue` | its `task.md` if any, then A2A tasks one at a time |
//!
//! With nothing to run the session waits `MURMUR_A2A_TIMEOUT_SECS` (default 30) for a task
//! and then ends, except `queue` + `after_task: sleep`, which parks (a condition-variable
//! wait, no busy thread) until SIGTERM or SIGINT.

use super::door::tasks::{Acceptance, Next, Outcome, Taken, Tasks, MAX_RESULT_BYTES};
use crate::a2a::shapes::State;
use crate::clock::now_ms;
use crate::fsx::Dir;
use crate::manifest::model::{AfterTask, Manifest, TaskAcceptance};
use std::sync::atomic::AtomicI32;
use std::sync::Arc;
use std::time::Duration;

/// The largest task read from `task.md`, bytes.
pub const MAX_TASK_BYTES: u64 = 1 << 20;
/// The idle wait when `MURMUR_A2A_TIMEOUT_SECS` is unset.
pub const DEFAULT_IDLE_SECS: u64 = 30;

/// `MURMUR_A2A_TIMEOUT_SECS` (a positive whole number of seconds), else the default; a bad
/// value is reported in the second field.
pub fn idle_wait() -> (Duration, Option<String>) {
    match std::env::var("MURMUR_A2A_TIMEOUT_SECS") {
        Err(_) => (Duration::from_secs(DEFAULT_IDLE_SECS), None),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if n > 0 => (Duration::from_secs(n.min(u64::from(u32::MAX))), None),
            _ => (
                Duration::from_secs(DEFAULT_IDLE_SECS),
                Some(format!(
                    "warning: MURMUR_A2A_TIMEOUT_SECS={v:?} is not a positive whole number of seconds; waiting {DEFAULT_IDLE_SECS} s"
                )),
            ),
        },
    }
}

/// The acceptance rule of `m`.
pub fn acceptance(m: &Manifest) -> Acceptance {
    match m.lifecycle.task_acceptance {
        TaskAcceptance::None => Acceptance::None,
        TaskAcceptance::Single => Acceptance::Single,
        TaskAcceptance::Queue => {
            Acceptance::Queue(usize::try_from(m.lifecycle.queue_depth).unwrap_or(usize::MAX))
        }
    }
}

/// The session's source of tasks.
pub struct Lifecycle {
    pub tasks: Arc<Tasks>,
    first: Option<Taken>,
    ran: u64,
    sleeps: bool,
    idle: Duration,
    stop: Arc<AtomicI32>,
}

impl Lifecycle {
    /// The lifecycle of `m`; `file_task` (the text of `task.md`) is registered as the first
    /// task now, before the door serves, so in `single` nothing else is accepted beside it.
    pub fn new(m: &Manifest, file_task: Option<&str>, idle: Duration, stop: Arc<AtomicI32>) -> Lifecycle {
        let tasks = Tasks::new(acceptance(m));
        let first = file_task.map(|t| tasks.start_file(t, now_ms()));
        Lifecycle {
            tasks,
            first,
            ran: 0,
            sleeps: m.lifecycle.task_acceptance == TaskAcceptance::Queue
                && m.lifecycle.after_task == AfterTask::Sleep,
            idle,
            stop,
        }
    }

    /// Whether the session waits for tasks forever (`queue` + `sleep`).
    pub fn sleeps(&self) -> bool {
        self.sleeps
    }

    /// The next task to run, or `None`: the session ends.
    pub fn next_task(&mut self) -> Option<Taken> {
        if let Some(t) = self.first.take() {
            self.ran += 1;
            return Some(t);
        }
        let wait = match self.tasks.acceptance() {
            Acceptance::None => return None,
            Acceptance::Single if self.ran > 0 => return None,
            Acceptance::Single => Some(self.idle),
            Acceptance::Queue(_) if self.sleeps => None,
            // A session that delegated waits for its completions (see `Tasks::hold`), then
            // ends with the last of them: its work is done.
            Acceptance::Queue(_) if self.tasks.delegated() => Some(Duration::ZERO),
            Acceptance::Queue(_) => Some(self.idle),
        };
        match self.tasks.next(wait, &self.stop, now_ms) {
            Next::Task(t) => {
                self.ran += 1;
                Some(*t)
            }
            Next::Idle | Next::Stopped => None,
        }
    }

    /// How many tasks were handed out.
    pub fn ran(&self) -> u64 {
        self.ran
    }

    /// Report the end of `task`.
    pub fn finish(&self, task: &Taken, outcome: Outcome) {
        self.tasks.finish(&task.id, outcome, now_ms());
    }

    /// No more tasks: waiting ones are rejected, and every later send.
    pub fn close(&self) {
        self.tasks.close(now_ms());
    }
}

/// Where a component's run leaves its answer as a Message (A2A: a send that waits gets a
/// Message, not the Task).
pub const MESSAGE_FILE: &str = "out/message.txt";
const RESULT_FILE: &str = "out/result.txt";

/// The answer a completed component run left: for an A2A task (whose run found neither
/// file) `out/message.txt` (then `true`: answered as a Message), else `out/result.txt`.
pub fn read_answer_file(work: &Dir, a2a: bool) -> Option<(String, bool)> {
    match a2a.then(|| read_answer(work, MESSAGE_FILE)).flatten() {
        Some(m) => Some((m, true)),
        None => read_answer(work, RESULT_FILE).map(|r| (r, false)),
    }
}

fn read_answer(work: &Dir, path: &str) -> Option<String> {
    match work.read(path, MAX_RESULT_BYTES) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(crate::fsx::FsError::TooLarge { cap, .. }) => Some(too_large(path, cap)),
        Err(_) => None,
    }
}

fn too_large(path: &str, cap: u64) -> String {
    format!("({path} is larger than {cap} bytes: read it from the capsule's workdir)")
}

/// The outcome of a task in `state` whose answer is `answer`; a failure's first line is its
/// status message (`fallback` when that line is empty). An answer larger than the task
/// table keeps is named, not held.
pub fn outcome(state: State, answer: String, fallback: &str) -> Outcome {
    let answer = if answer.len() as u64 > MAX_RESULT_BYTES {
        too_large(RESULT_FILE, MAX_RESULT_BYTES)
    } else {
        answer
    };
    let message = match state {
        State::Completed => None,
        _ => Some(
            answer
                .lines()
                .next()
                .map(|l| l.trim_start_matches("error: ").to_string())
                .filter(|l| !l.is_empty())
                .unwrap_or_else(|| fallback.to_string()),
        ),
    };
    Outcome {
        state,
        answer: Some(answer),
        message,
        files: Vec::new(),
        as_message: false,
    }
}
