//! The agent runner: each task is one run of the inference loop ([`Session::run_task`]);
//! its answer is written to `out/tasks/<task id>.txt` and, unless the task is a delegated
//! child's completion, to `out/result.txt` (the spec's place for the operator's answer),
//! and handed to the task table in memory, never read back. An A2A task continues its
//! context's conversation ([`Contexts`]). The session's hooks fire at its start and end.

use super::contexts::{Contexts, Exchange, Key as ContextKey};
use super::hooks::{self, spec::Binding};
use super::task::{Session, Task, TaskEnd, SPEND_CEILING_REACHED};
use crate::a2a::shapes::State;
use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::model::Inference;
use crate::runtime::component::received;
use crate::runtime::door::tasks::{Acceptance, Taken, Tasks};
use crate::runtime::serve::{Closing, Finished, Served, TaskRunner};
use crate::runtime::trace::Bootstrap;
use crate::runtime::wasm::{
    self,
    hook::{Event, SessionEndInfo},
    sink::Sink,
};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The agent session between its tasks.
pub struct AgentRunner {
    session: Session,
    work: Dir,
    inference: Inference,
    /// On-stage ran before the trace began: its failures are traced after `session_start`.
    stage_failures: Vec<hooks::Failure>,
    stdout: Sink,
    stderr: Sink,
    tasks: Arc<Tasks>,
    last: Option<TaskEnd>,
    /// The A2A conversations so far, per context and sender.
    contexts: Contexts,
}

impl AgentRunner {
    pub fn new(
        session: Session,
        work: Dir,
        inference: Inference,
        stage_failures: Vec<hooks::Failure>,
        stdout: Sink,
        stderr: Sink,
        tasks: Arc<Tasks>,
    ) -> AgentRunner {
        AgentRunner {
            session,
            work,
            inference,
            stage_failures,
            stdout,
            stderr,
            tasks,
            last: None,
            contexts: Contexts::default(),
        }
    }
}

/// The conversation an A2A task continues: its sender's, of its trust class, on its
/// context. A delegation's completion continues none (it is the runtime's report, sent under
/// the delegating task's context by no credential: it would mix the reports of every
/// sender's delegations on a context), nor does a task from `task.md`.
fn conversation(taken: &Taken) -> Option<ContextKey> {
    (taken.source == "a2a" && taken.origin.origin != "completion").then(|| ContextKey {
        owner: taken.origin.owner.clone(),
        trust: taken.origin.trust.clone(),
        context: taken.context_id.clone(),
    })
}

impl TaskRunner for AgentRunner {
    fn started(&mut self) {
        for f in std::mem::take(&mut self.stage_failures) {
            self.session.trace_hook_failure(Binding::Stage, f);
        }
        self.session.fire(Binding::SessionStart, || Event::SessionStart);
    }

    fn run(&mut self, taken: &Taken, bootstrap: &mut Bootstrap) -> Result<Finished, Diagnostic> {
        let task = Task {
            id: taken.id.clone(),
            context_id: taken.context_id.clone(),
            source: taken.source,
            origin: taken.origin.origin.clone(),
            trust: taken.origin.trust.clone(),
            traceparent: taken.origin.traceparent.clone(),
            text: taken.text.clone(),
            cancel: taken.cancel.clone(),
            earlier: conversation(taken)
                .map(|k| self.contexts.earlier(&k))
                .unwrap_or_default(),
        };
        // A completion is the runtime's report of a child, not a task a person or peer
        // gave: its answer goes to its own file and never over the operator's answer.
        let kind = Answer::of(taken);
        if taken.source == "a2a" {
            self.session.event("a2a_task_received", received(taken));
            // Each A2A task's answer is its own: none is left from the one before.
            if kind.replaces_result() {
                if let Err(e) = self.work.remove_file(RESULT) {
                    bootstrap.line(&format!("cannot remove {RESULT}: {e}"));
                }
            }
        }
        let mut written = (String::new(), false);
        let own = self.session.spend_id();
        let (end, _) = self.session.run_task(&task, |end| {
            let (answer, end, wrote) = write_result(&self.work, &kind, end, &self.inference, &own, bootstrap);
            written = (answer, wrote);
            end
        });
        let (answer, wrote) = written;
        if let (TaskEnd::Done { text, .. }, Some(key)) = (&end, conversation(taken)) {
            let exchange = Exchange {
                asked: taken.text.clone(),
                answered: text.clone(),
            };
            self.contexts.record(key, exchange);
        }
        let state = match &end {
            TaskEnd::Done { .. } => State::Completed,
            TaskEnd::Canceled => State::Canceled,
            _ => State::Failed,
        };
        let fallback = match &end {
            TaskEnd::Failed(e) => format!("error: {e}\n"),
            TaskEnd::SpendCeiling(c) => format!(
                "error: {SPEND_CEILING_REACHED}: {}\n",
                c.reason(&self.session.spend_id())
            ),
            _ => "error: no result\n".to_string(),
        };
        self.last = Some(end);
        Ok(Finished {
            state,
            answer: if wrote { answer } else { fallback.clone() },
            fallback,
            as_message: false,
        })
    }

    fn must_end(&self) -> bool {
        self.session.interrupted.load(Ordering::SeqCst) != 0
            || self.session.broken.is_some()
            || self.session.halted
            || self.session.spent
            || self.delegation_ceiling_reached()
    }

    fn on_signal(&self) -> Box<dyn Fn() + Send> {
        // Weak: the signal thread outlives the session, and the cgroup is removed when its
        // last holder (the child policy) drops it at the session's end.
        let cgroup = self
            .session
            .tools
            .runner
            .policy
            .cgroup
            .as_ref()
            .map(Arc::downgrade);
        // Without a cgroup, the running calls' groups (pid 1 of each PID namespace, or an
        // advisory command's group).
        let live = Arc::clone(&self.session.tools.runner.policy.live);
        Box::new(move || {
            if let Some(cg) = cgroup.as_ref().and_then(std::sync::Weak::upgrade) {
                cg.kill_all();
            }
            live.kill_all();
        })
    }

    fn close(self: Box<Self>, _served: Served, bootstrap: &mut Bootstrap) -> Closing {
        let AgentRunner {
            mut session,
            inference: inf,
            stdout,
            stderr,
            tasks,
            last,
            ..
        } = *self;
        // How the last task ended, before a queue session's exit forgets it.
        let last_ok = matches!(last, Some(TaskEnd::Done { .. }));
        let queue = matches!(tasks.acceptance(), Acceptance::Queue(_));
        // A session halted by a failed compaction ended failed, whatever its lifecycle.
        let halted = session.halted;
        // A session whose spend ceiling was reached ends so, whatever its lifecycle.
        let spent = session.spent;
        // A queue session's exit does not hang on its last task; others answer for their one.
        let end = match last {
            Some(end) if !queue || halted || spent => end,
            Some(TaskEnd::Done { text, truncated }) => TaskEnd::Done { text, truncated },
            _ => TaskEnd::Done {
                text: String::new(),
                truncated: false,
            },
        };
        // Children still running are ended with this session (recorded, posted to nobody).
        if let Some(d) = session.tools.delegate.as_ref() {
            d.launcher.watch.shutdown();
        }
        // Contained calls were made and not one could start its containment: a session that
        // would end `ok` ends `containment_failed` instead (any other end says more already).
        let contained = match (&end, halted) {
            (TaskEnd::Done { .. }, false) => session
                .tools
                .runner
                .starts
                .all_failed()
                .map(|(n, d)| (n, d.clone())),
            _ => None,
        };
        // A task asked for a delegation past the session's ceiling: the session ended there.
        let ceiling = session
            .tools
            .delegate
            .as_ref()
            .filter(|d| d.launcher.ceiling_reached() && !spent)
            .map(|d| d.launcher.parent.max_delegations);
        // The one word for how the session ended: the trace's session_end and the hooks'.
        let exit_status = match (halted, &contained, ceiling) {
            (true, _, _) => "failed",
            (false, _, Some(_)) => DELEGATION_CEILING,
            (false, Some(_), None) => CONTAINMENT_FAILED,
            (false, None, None) => end.exit_status(),
        };
        // on-session-end: after the task loop exits (and after the sleep of a queue session).
        session.fire(Binding::SessionEnd, || {
            Event::SessionEnd(SessionEndInfo {
                exit_status: exit_status.to_string(),
            })
        });
        let totals = session.totals;
        if let Err(e) = session.spend.forget(crate::clock::now_ms()) {
            bootstrap.line(&format!("spend ledger: cannot remove this session's entry: {e}"));
        }
        let own = session.spend_id();
        for n in std::mem::take(&mut session.notes) {
            bootstrap.line(&n);
        }
        let hook_set = std::mem::replace(&mut session.hooks, hooks::Hooks::none());
        drop(session);
        hook_set.finish(Duration::from_secs(5));
        for (name, s) in [("stdout", stdout), ("stderr", stderr)] {
            if let Ok(n) = s.finish() {
                if n > wasm::sink::LOG_CAP {
                    bootstrap.line(&format!(
                        "guest {name}: {n} bytes, the first {} kept",
                        wasm::sink::LOG_CAP
                    ));
                }
            }
        }
        let ok = matches!(end, TaskEnd::Done { .. }) && !halted;
        let mut fields = json!({
            "turns": totals.turns,
            "tool_calls": totals.tool_calls,
            "shell_calls": totals.shell_calls,
            "input_tokens": totals.usage.input_tokens,
            "output_tokens": totals.usage.output_tokens,
        });
        if let Some((_, first)) = &contained {
            fields["error_code"] = first.code.into();
            fields["error"] = first.message.clone().into();
        }
        if let Some(max) = ceiling {
            fields["max_delegations"] = max.into();
        }
        Closing {
            exit_status,
            fields,
            ok: last_ok && contained.is_none() && ceiling.is_none(),
            word: match (ok, &contained, ceiling) {
                (true, _, Some(_)) => DELEGATION_CEILING,
                (true, None, None) => "ok",
                (true, Some(_), None) => CONTAINMENT_FAILED,
                (false, _, _) => "failed",
            },
            exit: match (contained, ceiling) {
                (_, Some(max)) => Err(delegation_ceiling(max)),
                (Some((calls, _)), None) => Err(containment_failed(calls)),
                (None, None) => exit_of(end, &inf, &own),
            },
        }
    }
}

/// The end of a session in which a task asked for a delegation past
/// `capabilities.spawn.max_delegations`.
const DELEGATION_CEILING: &str = "delegation_ceiling_reached";

/// Why a session ended [`DELEGATION_CEILING`].
fn delegation_ceiling(max: u64) -> Diagnostic {
    Diagnostic::new(
        code::RUN_AGENT_LOOP,
        "capabilities.spawn.max_delegations",
        format!("the session started its {max} delegations and a task asked for another: it ended {DELEGATION_CEILING}"),
    )
    .with_hint("raise capabilities.spawn.max_delegations if the capsule really needs more")
}

/// The end of a session whose every contained call failed to start its containment.
const CONTAINMENT_FAILED: &str = "containment_failed";

/// Why a session ended [`CONTAINMENT_FAILED`]: its `calls` contained calls, none run.
fn containment_failed(calls: u64) -> Diagnostic {
    let what = if calls == 1 {
        "the session's one contained call failed to start: it could not install its containment".to_string()
    } else {
        format!("all {calls} of the session's contained calls failed to start: none could install its containment")
    };
    Diagnostic::new(
        code::RUN_CONTAINMENT,
        "capabilities.containment",
        format!("{what}, so nothing ran and the session ended {CONTAINMENT_FAILED}"),
    )
}

/// The exit of a session whose (last) task ended `end`.
fn exit_of(end: TaskEnd, inf: &Inference, own: &str) -> Result<u8, Diagnostic> {
    match end {
        TaskEnd::Done { .. } => Ok(0),
        TaskEnd::MaxTurns => Err(Diagnostic::new(
            code::RUN_AGENT_LOOP,
            "inference.max_turns",
            format!(
                "the task reached inference.max_turns ({}) before the model finished",
                inf.max_turns
            ),
        )),
        TaskEnd::Failed(e) => Err(Diagnostic::new(code::RUN_AGENT_LOOP, "", e)),
        TaskEnd::Canceled => Err(Diagnostic::new(code::RUN_AGENT_LOOP, "", "the task was canceled")),
        TaskEnd::SpendCeiling(c) => Err(Diagnostic::new(
            code::RUN_AGENT_LOOP,
            c.key(),
            format!("the task ended {SPEND_CEILING_REACHED}: {}", c.reason(own)),
        )),
        TaskEnd::ReopenBudgetExhausted {
            reopens,
            out_of_turns,
        } => Err(Diagnostic::new(
            code::RUN_AGENT_LOOP,
            "inference.max_task_reopens",
            format!(
                "the task ended reopen_budget_exhausted: {}",
                exhausted(reopens, out_of_turns, inf.max_task_reopens, inf.max_turns)
            ),
        )),
    }
}

/// The answer of the last task a person or peer gave (never a completion's).
const RESULT: &str = "out/result.txt";
/// Every task's own answer: `out/tasks/<task id>.txt`.
const TASKS: &str = "out/tasks";

/// Where one task's answer goes.
struct Answer {
    /// `out/tasks/<task id>.txt`, when the id is a plain name.
    own: Option<String>,
    /// Whether the task is a completion (its answer never replaces [`RESULT`]).
    completion: bool,
}

impl Answer {
    fn of(taken: &Taken) -> Answer {
        let plain = !taken.id.is_empty()
            && taken.id.len() <= 128
            && taken
                .id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        Answer {
            own: plain.then(|| format!("{TASKS}/{}.txt", taken.id)),
            completion: taken.origin.origin == "completion",
        }
    }

    fn replaces_result(&self) -> bool {
        !self.completion
    }

    /// The file whose write decides the task (a failed write fails it): [`RESULT`], or a
    /// completion's own file; and the copy kept besides, whose failure is only noted.
    fn files(&self) -> (Option<&str>, Option<&str>) {
        match (self.completion, self.own.as_deref()) {
            (true, own) => (own, None),
            (false, own) => (Some(RESULT), own),
        }
    }
}

/// Write the task's answer (or why it has none) to `out/result.txt` (a completion's only to
/// its own file) and to `out/tasks/<task id>.txt`: the answer, the end (a failed write of
/// the first fails the task), and whether it was written.
fn write_result(
    work: &Dir,
    kind: &Answer,
    end: TaskEnd,
    inf: &Inference,
    own: &str,
    bootstrap: &mut Bootstrap,
) -> (String, TaskEnd, bool) {
    let result = match &end {
        TaskEnd::Done { text, truncated } => {
            if *truncated {
                bootstrap.line("the final answer was cut at inference.max_tokens");
            }
            format!("{text}\n")
        }
        TaskEnd::MaxTurns => format!(
            "error: the task reached inference.max_turns ({}) before the model finished\n",
            inf.max_turns
        ),
        TaskEnd::Failed(e) => format!("error: {e}\n"),
        TaskEnd::Canceled => "error: the task was canceled\n".to_string(),
        TaskEnd::SpendCeiling(c) => format!("error: {SPEND_CEILING_REACHED}: {}\n", c.reason(own)),
        TaskEnd::ReopenBudgetExhausted {
            reopens,
            out_of_turns,
        } => format!(
            "error: {}\n",
            exhausted(*reopens, *out_of_turns, inf.max_task_reopens, inf.max_turns)
        ),
    };
    let (first, copy) = kind.files();
    let written = match first {
        Some(first) => write_first(work, first, result, end, bootstrap),
        None => {
            bootstrap.line("the task's id is not a plain name: its answer has no file of its own");
            (result, end, true)
        }
    };
    if let Some(copy) = copy {
        let text = match &written {
            (answer, _, true) => answer.clone(),
            (_, TaskEnd::Failed(why), false) => format!("error: {why}\n"),
            (_, _, false) => "error: no result\n".to_string(),
        };
        if let Err(e) = work.replace(copy, text.as_bytes()) {
            bootstrap.line(&format!("cannot write {copy}: {e}"));
        }
    }
    written
}

/// Write `result` to `first`, the file whose write decides the task.
fn write_first(
    work: &Dir,
    first: &str,
    result: String,
    end: TaskEnd,
    bootstrap: &mut Bootstrap,
) -> (String, TaskEnd, bool) {
    match work.replace(first, result.as_bytes()) {
        Ok(()) => (result, end, true),
        Err(e) => {
            bootstrap.line(&format!("cannot write {first}: {e}"));
            // Whatever the file held before (a shell command's bytes, say) is not this
            // task's answer: gone rather than left to be taken for one.
            if let Err(e) = work.remove_file(first) {
                bootstrap.line(&format!("cannot remove {first}: {e}"));
            }
            let why = format!("cannot write {first}: {e}");
            (String::new(), TaskEnd::Failed(why), false)
        }
    }
}

/// Why a task ended `reopen_budget_exhausted`.
fn exhausted(reopens: u64, out_of_turns: bool, budget: u64, max_turns: u64) -> String {
    if out_of_turns {
        format!("a hook still asked to reopen the task after {reopens} reopen(s), but its turns ran out (inference.max_turns = {max_turns})")
    } else {
        format!("a hook still asked to reopen the task after {reopens} reopen(s), its whole budget (inference.max_task_reopens = {budget})")
    }
}

impl AgentRunner {
    /// Whether a task asked for a delegation past the session's ceiling.
    fn delegation_ceiling_reached(&self) -> bool {
        self.session
            .tools
            .delegate
            .as_ref()
            .is_some_and(|d| d.launcher.ceiling_reached())
    }
}
