//! The WASM runner: each task runs the component's `run` once, under the session's grants
//! and limits, on a fresh store. An A2A task's text is written to `task.md` and any
//! previous `out/result.txt` (and `out/message.txt`) removed first (through the workdir's
//! descriptor); the task's answer is what the component left in `out/result.txt`, or in
//! `out/message.txt` to answer a send that waits with a Message rather than the Task.

use super::component_ask::{self, Asked};
use super::door::tasks::{Acceptance, Taken, Tasks};
use super::lifecycle;
use super::serve::{Closing, Finished, Served, TaskRunner};
use super::session::Layout;
use super::trace::{Bootstrap, Trace};
use super::wasm::{self, host, sink::Sink, Interrupt, Outcome, TrapKind};
use crate::a2a::shapes::State;
use crate::diag::{code, Diagnostic};
use crate::manifest::model::Capabilities;
use serde_json::json;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime::component::Component;
use wasmtime::Engine;

/// The running task's id and the Interrupt of its run: a cancel fires it only while that
/// task is still the one running; a signal fires whatever runs.
type Current = Arc<Mutex<(String, Interrupt)>>;

/// What every run of the component gets, and how the session's runs went.
pub struct ComponentRunner {
    p: ComponentParts,
    layout_work: crate::fsx::Dir,
    preopen: std::path::PathBuf,
    current: Current,
    /// The last task's trap.
    trapped: Option<(TrapKind, String)>,
    /// A `queue` session's exit does not hang on the last task's outcome.
    queue: bool,
    /// The workdir could not be made ready for a task (what the guest left in the way of
    /// `task.md` or `out/result.txt`): the session ended rather than fail every task after.
    broken: Option<String>,
    /// The door's task table, where a run's question waits for its answer.
    tasks: Arc<Tasks>,
}

/// What the component runner is made from.
pub struct ComponentParts {
    pub engine: Engine,
    pub component: Component,
    pub env: Vec<(String, String)>,
    pub caps: Capabilities,
    pub stdout: Sink,
    pub stderr: Sink,
    pub trace: Trace,
    pub stop: Arc<AtomicI32>,
    /// `ask.timeout_secs`: a run may ask its caller (None: the manifest declares no `ask`).
    pub ask_secs: Option<u64>,
}

impl ComponentRunner {
    /// The runner for the session laid out in `layout`; cancels of `tasks` reach the run.
    pub fn new(
        p: ComponentParts,
        layout: &Layout,
        tasks: &Arc<Tasks>,
    ) -> Result<ComponentRunner, Diagnostic> {
        let current: Current = Arc::default();
        let fire = current.clone();
        tasks.on_cancel(Box::new(move |id| fire_if(&fire, Some(id))));
        let work = layout
            .work
            .try_clone()
            .map_err(|e| Diagnostic::new(code::IO_READ, "", format!("cannot hold the workdir: {e}")))?;
        Ok(ComponentRunner {
            p,
            layout_work: work,
            preopen: layout.preopen_dir.proc_path(),
            current,
            trapped: None,
            queue: matches!(tasks.acceptance(), Acceptance::Queue(_)),
            broken: None,
            tasks: tasks.clone(),
        })
    }
}

fn fire_if(c: &Mutex<(String, Interrupt)>, only: Option<&str>) {
    let cur = c.lock().unwrap_or_else(|p| p.into_inner());
    if only.is_none_or(|id| id == cur.0) {
        cur.1.fire();
    }
}

fn trace_write(e: std::io::Error) -> Diagnostic {
    Diagnostic::new(code::RUN_AGENT_LOOP, "", format!("cannot write trace.jsonl: {e}"))
}

impl TaskRunner for ComponentRunner {
    fn run(&mut self, task: &Taken, bootstrap: &mut Bootstrap) -> Result<Finished, Diagnostic> {
        let started = Instant::now();
        if task.source == "a2a" {
            self.p
                .trace
                .event("a2a_task_received", received(task))
                .map_err(trace_write)?;
        }
        self.p
            .trace
            .event(
                "task_start",
                json!({"task_id": task.id, "context_id": task.context_id, "source": task.source,
                       "origin": task.origin.origin, "trust": task.origin.trust,
                       "message_parts_bytes": task.text.len()}),
            )
            .map_err(trace_write)?;
        let interrupt = Interrupt::default();
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = (task.id.clone(), interrupt.clone());
        // A signal that came before the Interrupt was in place fired the previous one.
        if self.p.stop.load(Ordering::SeqCst) != 0 {
            interrupt.fire();
        }
        let (state, fallback, ran) = self.run_one(task, &interrupt, bootstrap)?;
        // Only a completed run answers with its out/result.txt: a failed or canceled one
        // answers with why (what the guest left there may be cut short), and a run that
        // never happened has no file of its own.
        let (answer, as_message) = (ran && state == State::Completed)
            .then(|| lifecycle::read_answer_file(&self.layout_work, task.source == "a2a"))
            .flatten()
            .unwrap_or_else(|| (fallback.clone(), false));
        let status = match state {
            State::Completed => "ok",
            State::Canceled => "canceled",
            _ => "failed",
        };
        self.p.trace
            .event(
                "task_end",
                json!({"task_id": task.id, "exit_status": status, "duration_ms": started.elapsed().as_millis() as u64}),
            )
            .map_err(trace_write)?;
        if state == State::Failed && !ran {
            bootstrap.line(&format!(
                "the workdir cannot take another task: {}",
                fallback.trim_end()
            ));
            self.broken = Some(fallback.clone());
        }
        Ok(Finished {
            state,
            answer,
            fallback,
            as_message,
        })
    }

    fn must_end(&self) -> bool {
        self.broken.is_some()
    }

    fn on_signal(&self) -> Box<dyn Fn() + Send> {
        let c = self.current.clone();
        Box::new(move || fire_if(&c, None))
    }

    fn close(self: Box<Self>, served: Served, bootstrap: &mut Bootstrap) -> Closing {
        let r = *self;
        // The guest's stores (holding the pipes' write ends) are gone: the copiers end.
        for (name, s) in [("stdout", r.p.stdout), ("stderr", r.p.stderr)] {
            match s.finish() {
                Ok(n) if n > wasm::sink::LOG_CAP => bootstrap.line(&format!(
                    "guest {name}: {n} bytes, the first {} kept",
                    wasm::sink::LOG_CAP
                )),
                Ok(_) => {}
                Err(e) => bootstrap.line(&format!("guest {name}: log copy failed: {e}")),
            }
        }
        let exit_status = match (&r.broken, served.last) {
            (Some(_), _) => "failed",
            (None, Some(State::Completed) | None) => "ok",
            (None, Some(State::Canceled)) => "canceled",
            (None, Some(_)) => "failed",
        };
        let word = match (&r.trapped, served.last) {
            (Some(_), _) => "trapped",
            (None, None) => "idle",
            (None, Some(State::Completed)) => "ok",
            (None, Some(State::Canceled)) => "canceled",
            (None, Some(_)) => "failed",
        };
        let mut fields = json!({"tasks": served.tasks});
        if let Some((kind, _)) = &r.trapped {
            fields["trap_kind"] = kind.as_str().into();
        }
        let exit = if let Some(why) = r.broken {
            Err(Diagnostic::new(
                code::IO_READ,
                "",
                format!(
                    "the workdir cannot take another task, so the session ended: {}",
                    why.trim_end()
                ),
            ))
        } else {
            match r.trapped {
                Some((kind, message)) if !r.queue => Err(Diagnostic::new(
                    code::RUN_TRAP,
                    "",
                    format!("guest trapped ({}): {message}", kind.as_str()),
                )),
                _ => Ok(0),
            }
        };
        Closing {
            exit_status,
            fields,
            ok: exit_status == "ok",
            word,
            exit,
        }
    }
}

/// What a trap's message adds when the workdir's filesystem is full at the trap: a guest's
/// libc may have been told only `EIO` (wasi-libc's `write`), so the guest's own words (a
/// panic, `unreachable`) never name the disk, and the host, which can see it, does.
fn full_workdir(work: &crate::fsx::Dir) -> String {
    match work.room() {
        Ok((0, _)) => " — the workdir's filesystem is full (0 bytes free)".into(),
        Ok((bytes, 0)) => format!(" — the workdir's filesystem has no inode left ({bytes} bytes free)"),
        _ => String::new(),
    }
}

/// The names of the per-task variables [`task_env`] sets.
pub const TASK_VARS: [&str; 2] = ["MURMUR_TASK_ID", "MURMUR_MESSAGE_ID"];

/// The session's environment for one run of `task`: for an A2A task, `env` without any
/// [`TASK_VARS`], then `MURMUR_TASK_ID` and `MURMUR_MESSAGE_ID`, the caller's `messageId`
/// (after an answer to the run's question, the answer's `message_id`), as a capsule may
/// route on it; the caller also wrote `task.md`. A task from `task.md` runs with `env`.
fn task_env(env: &[(String, String)], task: &Taken, message_id: Option<&str>) -> Vec<(String, String)> {
    if task.source != "a2a" {
        return env.to_vec();
    }
    let mut out: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| !TASK_VARS.contains(&k.as_str()))
        .cloned()
        .collect();
    out.push((TASK_VARS[0].into(), task.id.clone()));
    if let Some(m) = message_id {
        out.push((TASK_VARS[1].into(), m.into()));
    }
    out
}

/// The `a2a_task_received` fields of `task`.
pub fn received(task: &Taken) -> serde_json::Value {
    json!({
        "task_id": task.id,
        "context_id": task.context_id,
        "message_id": task.message_id,
        "origin": task.origin.origin,
        "trust": task.origin.trust,
        "traceparent_from_caller": task.origin.traceparent,
    })
}

/// Remove the answer files a run may leave (`out/result.txt`, `out/message.txt`) through
/// the workdir's descriptor.
fn clear_answers(work: &crate::fsx::Dir) -> Result<(), String> {
    work.remove_file("out/result.txt")
        .and_then(|_| work.remove_file(lifecycle::MESSAGE_FILE))
        .map_err(|e| format!("error: cannot clear out/result.txt and out/message.txt: {e}\n"))
}

/// How one run went: its state, the text for `out/result.txt` when the component left
/// none, and whether the component ran (else its answer is that text).
type RunEnd = (State, String, bool);

impl ComponentRunner {
    /// One run of the component for `task`.
    fn run_one(
        &mut self,
        task: &Taken,
        interrupt: &Interrupt,
        bootstrap: &mut Bootstrap,
    ) -> Result<RunEnd, Diagnostic> {
        self.trapped = None;
        if task.source == "a2a" {
            if let Err(why) = self.make_ready(task) {
                return Ok((State::Failed, why, false));
            }
        }
        if task.cancel.load(Ordering::SeqCst) {
            return Ok((
                State::Canceled,
                "error: canceled before it started\n".into(),
                false,
            ));
        }
        let (mut message_id, mut text) = (task.message_id.clone(), task.text.clone());
        loop {
            let h = self.host(task, message_id.as_deref())?;
            let outcome = wasm::call_run(
                &self.p.engine,
                &self.p.component,
                h,
                self.p.caps.limits.deadline(),
                Some(interrupt),
            )?;
            if !interrupt.is_fired() && matches!(outcome, Outcome::Returned) {
                let by = (&*self.tasks, self.p.ask_secs);
                let at = (&self.layout_work, &mut self.p.trace);
                match component_ask::ask(at, by, task, &self.p.stop, &mut text) {
                    Asked::Nothing => {}
                    Asked::Answered { message_id: m } => {
                        // The next run answers afresh: nothing of this run's answer stays.
                        if let Err(why) = clear_answers(&self.layout_work) {
                            return Ok((State::Failed, why, true));
                        }
                        message_id = Some(m);
                        continue;
                    }
                    Asked::Ended(state, why) => return Ok((state, why, true)),
                }
            }
            return self.ended(task, interrupt, outcome, bootstrap);
        }
    }

    /// How a run that returned (and asked nothing), trapped or was interrupted ended.
    fn ended(
        &mut self,
        task: &Taken,
        interrupt: &Interrupt,
        outcome: Outcome,
        bootstrap: &mut Bootstrap,
    ) -> Result<RunEnd, Diagnostic> {
        if interrupt.is_fired() {
            if task.cancel.load(Ordering::SeqCst) {
                return Ok((State::Canceled, "error: canceled\n".into(), true));
            }
            let why = format!(
                "error: interrupted by signal {}\n",
                self.p.stop.load(Ordering::SeqCst)
            );
            self.record(&why, "the interruption", bootstrap);
            return Ok((State::Failed, why, true));
        }
        match outcome {
            Outcome::Returned => Ok((State::Completed, String::new(), true)),
            Outcome::Trapped { kind, message } => {
                let message = message + &full_workdir(&self.layout_work);
                self.p
                    .trace
                    .event(
                        "trap",
                        json!({"trap_kind": kind.as_str(), "message": message, "task_id": task.id}),
                    )
                    .map_err(trace_write)?;
                let text = format!("error: {message}\n");
                self.record(&text, "the trap", bootstrap);
                self.trapped = Some((kind, message));
                Ok((State::Failed, text, true))
            }
        }
    }

    /// An A2A task's text in `task.md`, and no `out/result.txt`, `out/message.txt` or
    /// `out/ask.txt` left from before. What the
    /// previous run left in the way (a directory named task.md, out/ gone or a symlink)
    /// fails this task, not the session: the error is the task's answer.
    fn make_ready(&self, task: &Taken) -> Result<(), String> {
        let work = &self.layout_work;
        work.replace("task.md", task.text.as_bytes())
            .map_err(|e| format!("error: cannot write task.md: {e}\n"))?;
        work.mkdirs("out", 0o755)
            .and_then(|_| work.remove_file(component_ask::ASK_FILE))
            .map_err(|e| format!("error: cannot clear out/ask.txt: {e}\n"))?;
        clear_answers(work)
    }

    /// The guest's host for one run: the preopen, the environment (with the task's
    /// [`task_env`]), the HTTP gate, the limits and the two log pipes.
    fn host(&self, task: &Taken, message_id: Option<&str>) -> Result<host::Host, Diagnostic> {
        let clone = |f: &std::fs::File| {
            f.try_clone()
                .map_err(|e| Diagnostic::new(code::IO_READ, "", format!("guest log: {e}")))
        };
        host::Host::new(host::Grants {
            preopen: Some(&self.preopen),
            records: None,
            env: &task_env(&self.p.env, task, message_id),
            network_allow: &self.p.caps.network_allow,
            limits: &self.p.caps.limits,
            stdout: clone(&self.p.stdout.write_end)?,
            stderr: clone(&self.p.stderr.write_end)?,
            credential: None,
            observer: None,
            endpoint: None,
        })
        .map_err(|e| {
            Diagnostic::new(
                code::IO_READ,
                "",
                format!("cannot prepare the guest's grants: {e:#}"),
            )
        })
    }

    /// Why a run failed, in `out/result.txt`. Whatever the guest left there is removed
    /// first (it may be cut short, say by a full disk, and removing it frees its space): the
    /// file holds the failure or nothing, never a truncated answer. A failed step is noted
    /// in the bootstrap log.
    fn record(&self, text: &str, what: &str, bootstrap: &mut Bootstrap) {
        if let Err(e) = self.layout_work.remove_file("out/result.txt") {
            bootstrap.line(&format!("cannot remove out/result.txt after {what}: {e}"));
        }
        if let Err(e) = self.layout_work.replace("out/result.txt", text.as_bytes()) {
            bootstrap.line(&format!("cannot record {what} in out/result.txt: {e}"));
        }
    }
}
