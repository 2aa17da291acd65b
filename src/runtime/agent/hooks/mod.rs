//! Hooks at run time: each `runtime: hook` artifact linked once at launch, called at the
//! lifecycle points its binding names. Blocking hooks run on the session thread, in the
//! manifest's order, and their outputs come back to the caller to commit; async hooks run
//! on one worker thread fed by a bounded queue (a full queue drops the event, noted in the
//! hook's log: a slow async hook never delays a turn nor grows memory). Every call has the
//! hook deadline and the limiter; an error or a trap is written to `logs/hook-<name>.log`
//! and reported to the caller, never fatal here.

pub mod convert;
pub mod load;
pub mod spec;

use super::grants::GuestGrants;
use crate::runtime::records::Log;
use crate::runtime::wasm::hook::{Event, Output, PreparedHook};
use crate::runtime::wasm::tool::trap_line;
use spec::{Binding, Mode, Policy, Spec};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Events waiting for the async worker, at most.
pub const ASYNC_QUEUE: usize = 64;

/// One loaded hook.
pub struct Hook {
    pub name: String,
    pub spec: Spec,
    pub prepared: PreparedHook,
    pub grants: GuestGrants,
    /// `logs/hook-<name>.log`, appended to.
    pub log: Log,
}

impl Hook {
    fn note(&mut self, line: &str) {
        self.log.line(line);
    }

    /// One call; the output, or the error (already logged).
    fn call(&mut self, binding: Binding, event: &Event) -> Result<Output, String> {
        let outcome = match self.grants.host(None, None, None) {
            Err(e) => Err(format!("cannot prepare the hook's grants: {e}")),
            Ok(host) => match self.prepared.call(host, self.grants.deadline, event) {
                Err(d) => Err(d.message),
                Ok(Err(trap)) => Err(trap_line(&trap)),
                Ok(Ok(Err(e))) => Err(format!(
                    "the hook returned an error: {}",
                    crate::agent::sanitize::one_line(&e, 2000)
                )),
                Ok(Ok(Ok(out))) => Ok(out),
            },
        };
        if let Err(e) = &outcome {
            self.note(&format!("{}: {e}", binding.as_str()));
        }
        outcome
    }
}

/// What a blocking hook answered.
pub struct Answer {
    pub hook: String,
    pub policy: Policy,
    /// Whether the policy takes effect at this hook's binding.
    pub effective: bool,
    pub output: Output,
}

/// A blocking hook that failed (or an event the async queue dropped).
pub struct Failure {
    pub hook: String,
    pub error: String,
    /// The hook is a compactor (bound to on-compaction with replace-context).
    pub compactor: bool,
}

/// The blocking hooks' answers and failures at one lifecycle point.
#[derive(Default)]
pub struct Fired {
    pub answers: Vec<Answer>,
    pub failures: Vec<Failure>,
}

/// Every hook of a session.
pub struct Hooks {
    blocking: Vec<Hook>,
    async_specs: Vec<Spec>,
    queue: Option<SyncSender<(Binding, Event)>>,
    worker: Option<JoinHandle<()>>,
}

fn worker(mut hooks: Vec<Hook>, rx: Receiver<(Binding, Event)>) {
    while let Ok((binding, event)) = rx.recv() {
        for h in hooks.iter_mut().filter(|h| h.spec.fires_at(binding)) {
            let _ = h.call(binding, &event);
        }
    }
}

impl Hooks {
    /// No hooks at all.
    pub fn none() -> Hooks {
        Hooks {
            blocking: Vec::new(),
            async_specs: Vec::new(),
            queue: None,
            worker: None,
        }
    }

    /// Split `all` into blocking hooks and the async worker's.
    pub fn new(all: Vec<Hook>) -> Hooks {
        let (blocking, asynchronous): (Vec<Hook>, Vec<Hook>) =
            all.into_iter().partition(|h| h.spec.mode == Mode::Blocking);
        let async_specs: Vec<Spec> = asynchronous.iter().map(|h| h.spec).collect();
        let (queue, worker) = if asynchronous.is_empty() {
            (None, None)
        } else {
            let (tx, rx) = mpsc::sync_channel(ASYNC_QUEUE);
            let handle = std::thread::Builder::new()
                .name("async-hooks".into())
                .spawn(move || worker(asynchronous, rx))
                .ok();
            (handle.as_ref().map(|_| tx), handle)
        };
        Hooks {
            blocking,
            async_specs,
            queue,
            worker,
        }
    }

    /// Cut every blocking hook's deadline to at most `secs` (after SIGTERM or SIGINT: the
    /// hooks still fire, but cannot hold the shutdown for their full deadline).
    pub fn cap_deadlines(&mut self, secs: u64) {
        for h in &mut self.blocking {
            h.grants.deadline = h.grants.deadline.min(secs);
        }
    }

    /// Whether a compactor is bound (a blocking `on-compaction` hook with `replace-context`).
    pub fn has_compactor(&self) -> bool {
        self.blocking.iter().any(|h| h.spec.compacts())
    }

    /// Whether a blocking hook fires at `b`.
    pub fn blocking_at(&self, b: Binding) -> bool {
        self.blocking.iter().any(|h| h.spec.fires_at(b))
    }

    /// Fire `b`: the event is built only when some hook listens. Async hooks get it
    /// queued (dropped when the queue is full); blocking hooks are called in order.
    pub fn fire(&mut self, b: Binding, event: impl FnOnce() -> Event) -> Fired {
        let mut fired = Fired::default();
        let async_listens = self.async_specs.iter().any(|s| s.fires_at(b));
        if !async_listens && !self.blocking_at(b) {
            return fired;
        }
        let event = event();
        if async_listens {
            if let Some(q) = &self.queue {
                if let Err(TrySendError::Full(_)) = q.try_send((b, event.clone())) {
                    fired.failures.push(Failure {
                        hook: "async".into(),
                        error: format!(
                            "the async hook queue is full ({ASYNC_QUEUE} events): {} dropped",
                            b.as_str()
                        ),
                        compactor: false,
                    });
                }
            }
        }
        for h in self.blocking.iter_mut().filter(|h| h.spec.fires_at(b)) {
            match h.call(b, &event) {
                Ok(output) => fired.answers.push(Answer {
                    hook: h.name.clone(),
                    policy: h.spec.policy,
                    effective: h.spec.policy_effective(),
                    output,
                }),
                Err(error) => fired.failures.push(Failure {
                    hook: h.name.clone(),
                    error,
                    compactor: h.spec.compacts(),
                }),
            }
        }
        fired
    }

    /// End the async worker: the queue closes and the worker finishes what it holds, for
    /// at most `grace`.
    pub fn finish(mut self, grace: Duration) {
        drop(self.queue.take());
        if let Some(w) = self.worker.take() {
            let until = std::time::Instant::now() + grace;
            while !w.is_finished() && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if w.is_finished() {
                let _ = w.join();
            }
        }
    }
}
