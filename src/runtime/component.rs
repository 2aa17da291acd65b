//! The tasks of a WASM capsule: each one runs the component's `run` once, under the
//! session's grants and limits, on a fresh store. An A2A task's text is written to
//! `task.md` and any previous `out/result.txt` removed first (through the workdir's
//! descriptor); the task's answer is what `out/result.txt` then holds.

use super::door::tasks::Taken;
use super::launch::Bootstrap;
use super::lifecycle::{self, Lifecycle};
use super::session::Layout;
use super::trace::Trace;
use super::wasm::{self, host, Interrupt, Outcome, TrapKind};
use crate::a2a::shapes::State;
use crate::diag::{code, Diagnostic};
use crate::manifest::model::Capabilities;
use serde_json::json;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wasmtime::component::Component;
use wasmtime::Engine;

/// What every run of the component gets.
pub struct Runner<'a> {
    pub engine: &'a Engine,
    pub component: &'a Component,
    pub layout: &'a Layout,
    pub env: &'a [(String, String)],
    pub caps: &'a Capabilities,
    pub stdout: &'a std::fs::File,
    pub stderr: &'a std::fs::File,
}

/// How the session's tasks went.
#[derive(Debug, Default)]
pub struct Ended {
    pub tasks: u64,
    /// The last task's state.
    pub last: Option<State>,
    /// The last task's trap.
    pub trapped: Option<(TrapKind, String)>,
    /// A signal ended the session.
    pub signal: i32,
    /// A `queue` session's exit does not hang on the last task's outcome.
    pub queue: bool,
    /// The workdir could not be made ready for a task (what the guest left in the way of
    /// `task.md` or `out/result.txt`): the session ended rather than fail every task after.
    pub broken: Option<String>,
}

impl Ended {
    pub fn exit_status(&self) -> &'static str {
        if self.broken.is_some() {
            return "failed";
        }
        match self.last {
            Some(State::Completed) | None => "ok",
            Some(State::Canceled) => "canceled",
            Some(_) => "failed",
        }
    }

    pub fn status_word(&self) -> &'static str {
        match (&self.trapped, self.last) {
            (Some(_), _) => "trapped",
            (None, None) => "idle",
            (None, Some(State::Completed)) => "ok",
            (None, Some(State::Canceled)) => "canceled",
            (None, Some(_)) => "failed",
        }
    }

    /// The exit: the last task's trap, unless the session is a queue's.
    pub fn into_exit(self) -> Result<u8, Diagnostic> {
        if let Some(why) = self.broken {
            return Err(Diagnostic::new(
                code::IO_READ,
                "",
                format!(
                    "the workdir cannot take another task, so the session ended: {}",
                    why.trim_end()
                ),
            ));
        }
        match self.trapped {
            Some((kind, message)) if !self.queue => Err(Diagnostic::new(
                code::RUN_TRAP,
                "",
                format!("guest trapped ({}): {message}", kind.as_str()),
            )),
            _ => Ok(0),
        }
    }
}

/// Run the session's tasks until the lifecycle ends it.
pub(crate) fn serve(
    mut life: Lifecycle,
    r: &Runner<'_>,
    trace: &mut Trace,
    bootstrap: &mut Bootstrap,
    stop: Arc<AtomicI32>,
) -> Result<Ended, Diagnostic> {
    // The running task's id and the Interrupt of its run: a cancel fires it only while that
    // task is still the one running; a signal fires whatever runs.
    let current = Arc::new(Mutex::new((String::new(), Interrupt::default())));
    let fire = |c: &Mutex<(String, Interrupt)>, only: Option<&str>| {
        let cur = c.lock().unwrap_or_else(|p| p.into_inner());
        if only.is_none_or(|id| id == cur.0) {
            cur.1.fire();
        }
    };
    {
        let c = current.clone();
        life.tasks.on_cancel(Box::new(move |id| fire(&c, Some(id))));
    }
    {
        let (c, stop, tasks) = (current.clone(), stop.clone(), life.tasks.clone());
        std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                if let Ok(sig) = crate::signals::wait_for_termination() {
                    stop.store(sig, Ordering::SeqCst);
                    fire(&c, None);
                    tasks.wake();
                }
            })
            .map_err(|e| {
                Diagnostic::new(code::RUN_TRAP, "", format!("cannot start the signal thread: {e}"))
            })?;
    }
    let mut ended = Ended {
        queue: matches!(life.tasks.acceptance(), super::door::tasks::Acceptance::Queue(_)),
        ..Ended::default()
    };
    let tw = |e: std::io::Error| {
        Diagnostic::new(code::RUN_AGENT_LOOP, "", format!("cannot write trace.jsonl: {e}"))
    };
    while let Some(task) = life.next_task() {
        let started = Instant::now();
        ended.tasks += 1;
        if task.source == "a2a" {
            trace.event("a2a_task_received", received(&task)).map_err(tw)?;
        }
        trace
            .event(
                "task_start",
                json!({"task_id": task.id, "context_id": task.context_id, "source": task.source,
                       "origin": task.origin.origin, "trust": task.origin.trust,
                       "message_parts_bytes": task.text.len()}),
            )
            .map_err(tw)?;
        let interrupt = Interrupt::default();
        *current.lock().unwrap_or_else(|p| p.into_inner()) = (task.id.clone(), interrupt.clone());
        // A signal that came before the Interrupt was in place fired the previous one.
        if stop.load(Ordering::SeqCst) != 0 {
            interrupt.fire();
        }
        let (state, fallback, ran) = run_one(r, &task, &interrupt, &stop, trace, bootstrap, &mut ended)?;
        // A run that never happened has no out/result.txt of its own to report.
        let read = ran.then_some(&r.layout.work);
        life.finish(&task, lifecycle::outcome(state, read, &fallback));
        let status = match state {
            State::Completed => "ok",
            State::Canceled => "canceled",
            _ => "failed",
        };
        trace
            .event(
                "task_end",
                json!({"task_id": task.id, "exit_status": status, "duration_ms": started.elapsed().as_millis() as u64}),
            )
            .map_err(tw)?;
        ended.last = Some(state);
        if state == State::Failed && !ran {
            bootstrap.line(&format!(
                "the workdir cannot take another task: {}",
                fallback.trim_end()
            ));
            ended.broken = Some(fallback);
            break;
        }
        if stop.load(Ordering::SeqCst) != 0 {
            break;
        }
    }
    life.close();
    ended.signal = stop.load(Ordering::SeqCst);
    if life.ran() == 0 {
        bootstrap.line("no task arrived: the session ends idle");
    }
    Ok(ended)
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

/// One run of the component for `task`: its state, the text for `out/result.txt` when the
/// component left none, and whether the component ran (else its answer is that text).
fn run_one(
    r: &Runner<'_>,
    task: &Taken,
    interrupt: &Interrupt,
    stop: &AtomicI32,
    trace: &mut Trace,
    bootstrap: &mut Bootstrap,
    ended: &mut Ended,
) -> Result<(State, String, bool), Diagnostic> {
    let work = &r.layout.work;
    ended.trapped = None;
    if task.source == "a2a" {
        // What the previous run left in the way (a directory named task.md, out/ gone or a
        // symlink) fails this task, not the session.
        if let Err(e) = work.replace("task.md", task.text.as_bytes()) {
            return Ok((
                State::Failed,
                format!("error: cannot write task.md: {e}\n"),
                false,
            ));
        }
        let cleared = work
            .mkdirs("out", 0o755)
            .and_then(|_| work.remove_file("out/result.txt"));
        if let Err(e) = cleared {
            return Ok((
                State::Failed,
                format!("error: cannot clear out/result.txt: {e}\n"),
                false,
            ));
        }
    }
    if task.cancel.load(Ordering::SeqCst) {
        return Ok((
            State::Canceled,
            "error: canceled before it started\n".into(),
            false,
        ));
    }
    let preopen = r.layout.preopen_dir.proc_path();
    let clone = |f: &std::fs::File| {
        f.try_clone()
            .map_err(|e| Diagnostic::new(code::IO_READ, "", format!("guest log: {e}")))
    };
    let h = host::Host::new(host::Grants {
        preopen: Some(&preopen),
        env: r.env,
        network_allow: &r.caps.network_allow,
        limits: &r.caps.limits,
        stdout: clone(r.stdout)?,
        stderr: clone(r.stderr)?,
        credential: None,
        observer: None,
    })
    .map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "",
            format!("cannot prepare the guest's grants: {e:#}"),
        )
    })?;
    let outcome = wasm::call_run(
        r.engine,
        r.component,
        h,
        r.caps.limits.deadline(),
        Some(interrupt),
    )?;
    if interrupt.is_fired() {
        if task.cancel.load(Ordering::SeqCst) {
            return Ok((State::Canceled, "error: canceled\n".into(), true));
        }
        let why = format!("error: interrupted by signal {}\n", stop.load(Ordering::SeqCst));
        if let Err(e) = work.replace("out/result.txt", why.as_bytes()) {
            bootstrap.line(&format!("cannot record the interruption in out/result.txt: {e}"));
        }
        return Ok((State::Failed, why, true));
    }
    match outcome {
        Outcome::Returned => Ok((State::Completed, String::new(), true)),
        Outcome::Trapped { kind, message } => {
            trace
                .event(
                    "trap",
                    json!({"trap_kind": kind.as_str(), "message": message, "task_id": task.id}),
                )
                .map_err(|e| {
                    Diagnostic::new(code::RUN_AGENT_LOOP, "", format!("cannot write trace.jsonl: {e}"))
                })?;
            let text = format!("error: {message}\n");
            if let Err(e) = work.replace("out/result.txt", text.as_bytes()) {
                bootstrap.line(&format!("cannot record the trap in out/result.txt: {e}"));
            }
            ended.trapped = Some((kind, message));
            Ok((State::Failed, text, true))
        }
    }
}
