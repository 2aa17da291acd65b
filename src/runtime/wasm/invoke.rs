//! One call of the capsule's `run`, bounded by the epoch deadline and the limiter, and the
//! three ways it can trap told apart.

use super::host::{self, Capsule, Host, LimitExceeded};
use super::EPOCH_TICK;
use crate::diag::{code, Diagnostic};
use std::sync::mpsc::{self, RecvTimeoutError};
use wasmtime::component::Component;
use wasmtime::{Engine, Store, Trap};

/// Why a guest trapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrapKind {
    /// The epoch deadline (`capabilities.limits.deadline_seconds`) elapsed.
    Deadline,
    /// The resource limiter refused a grow (memory or table) or an instance.
    ResourceLimit,
    /// Anything else: a Rust panic, `unreachable`, a bad memory access.
    GuestPanic,
}

impl TrapKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TrapKind::Deadline => "deadline",
            TrapKind::ResourceLimit => "resource_limit",
            TrapKind::GuestPanic => "guest_panic",
        }
    }
}

/// How `run` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Returned,
    Trapped { kind: TrapKind, message: String },
}

fn classify(e: &wasmtime::Error, deadline_secs: u64) -> Outcome {
    if let Some(limit) = e.downcast_ref::<LimitExceeded>() {
        return Outcome::Trapped {
            kind: TrapKind::ResourceLimit,
            message: limit.0.clone(),
        };
    }
    if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return Outcome::Trapped {
            kind: TrapKind::Deadline,
            message: format!("deadline of {deadline_secs} s exceeded (capabilities.limits.deadline_seconds)"),
        };
    }
    let first = format!("{e:#}");
    Outcome::Trapped {
        kind: TrapKind::GuestPanic,
        message: first.lines().next().unwrap_or("guest trapped").to_string(),
    }
}

/// Instantiate `component` with `host` and call its `run`.
pub fn call_run(
    engine: &Engine,
    component: &Component,
    host: Host,
    deadline_secs: u64,
) -> Result<Outcome, Diagnostic> {
    let bad = |what: &str, e: wasmtime::Error| {
        Diagnostic::new(code::RUN_COMPONENT, "", format!("{what}: {e:#}"))
            .with_hint("a capsule component exports murmur:capsule/run@0.1.0 and imports only WASI preview 2, wasi:http and murmur:tool-registry")
    };
    let linker = host::linker(engine).map_err(|e| bad("cannot link the host interfaces", e))?;
    let mut store = Store::new(engine, host);
    store.limiter(|h| &mut h.limiter);
    let ticks = deadline_secs.saturating_mul(1000) / EPOCH_TICK.as_millis() as u64;
    store.set_epoch_deadline(ticks.max(1));
    // The ticker stops the moment its sender is dropped, not at the end of a tick.
    let (stop, ticks_rx) = mpsc::channel::<()>();
    let ticker = {
        let engine = engine.clone();
        std::thread::Builder::new()
            .name("epoch".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = ticks_rx.recv_timeout(EPOCH_TICK) {
                    engine.increment_epoch();
                }
            })
            .map_err(|e| Diagnostic::new(code::RUN_TRAP, "", format!("cannot start the epoch ticker: {e}")))?
    };
    let result = match Capsule::instantiate(&mut store, component, &linker) {
        Ok(capsule) => capsule
            .murmur_capsule_run()
            .call_run(&mut store)
            .map_err(|e| classify(&e, deadline_secs)),
        Err(e) => match classify(&e, deadline_secs) {
            Outcome::Trapped {
                kind: TrapKind::GuestPanic,
                ..
            } => {
                drop(stop);
                let _ = ticker.join();
                return Err(bad("the component does not fit the capsule world", e));
            }
            trapped => Err(trapped),
        },
    };
    drop(stop);
    let _ = ticker.join();
    Ok(result.err().unwrap_or(Outcome::Returned))
}
