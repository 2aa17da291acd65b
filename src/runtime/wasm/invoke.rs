//! One call of the capsule's `run`, bounded by the epoch deadline and the limiter, and the
//! three ways it can trap told apart.
//!
//! The epoch deadline only interrupts a guest while it runs WebAssembly. A guest blocked in a
//! host call (`subscribe-duration(u64::MAX).block()`, a read that never completes) is not
//! running WebAssembly, so the call is driven as a future and raced against a hard deadline:
//! the epoch deadline plus [`GRACE`]. When that fires the call's future is dropped (wasmtime
//! unwinds the guest's stack and the store is discarded), whatever the guest was blocked on.
//! The process's one epoch ticker also rings these hard deadlines, at its next tick (so at
//! most one [`EPOCH_TICK`] late): no thread is made per call.

use super::host::{self, Capsule, Host, LimitExceeded};
use super::EPOCH_TICK;
use crate::diag::{code, Diagnostic};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};
use wasmtime::component::Component;
use wasmtime::{Engine, Store, Trap};

/// How long past its deadline a guest blocked in a host call may stay before it is cut off.
pub const GRACE: Duration = Duration::from_millis(500);

/// Why a guest trapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrapKind {
    /// The epoch deadline (`capabilities.limits.deadline_seconds`) elapsed.
    Deadline,
    /// The resource limiter refused a grow (memory or table) or an instance.
    ResourceLimit,
    /// Anything else: a Rust panic, `unreachable`, a bad memory access.
    GuestPanic,
    /// SIGTERM or SIGINT stopped the session while the call was in flight.
    Signal,
}

impl TrapKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TrapKind::Deadline => "deadline",
            TrapKind::ResourceLimit => "resource_limit",
            TrapKind::GuestPanic => "guest_panic",
            TrapKind::Signal => "signal",
        }
    }
}

/// How `run` ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Returned,
    Trapped { kind: TrapKind, message: String },
}

fn deadline_outcome(deadline_secs: u64, blocked: bool) -> Outcome {
    let how = if blocked { ", blocked in a host call" } else { "" };
    Outcome::Trapped {
        kind: TrapKind::Deadline,
        message: format!(
            "deadline of {deadline_secs} s exceeded{how} (capabilities.limits.deadline_seconds)"
        ),
    }
}

/// The outcome of a call dropped because a signal stopped the session.
fn signal_outcome(signal: i32) -> Outcome {
    Outcome::Trapped {
        kind: TrapKind::Signal,
        message: format!("interrupted by signal {signal}"),
    }
}

/// Why a call came back without a value: the signal that stopped every call, or else its
/// deadline.
fn dropped_outcome(deadline_secs: u64) -> Outcome {
    match IN_FLIGHT.signal.load(Ordering::SeqCst) {
        0 => deadline_outcome(deadline_secs, true),
        sig => signal_outcome(sig),
    }
}

/// Every guest call in flight, so that a SIGTERM or SIGINT ends each wherever it is
/// blocked (a driver waiting on a model that never answers, a hook in a host call).
struct InFlight {
    /// The signal that stopped the calls (0: none).
    signal: AtomicI32,
    alarms: Mutex<Vec<Weak<Mutex<Alarm>>>>,
}

static IN_FLIGHT: InFlight = InFlight {
    signal: AtomicI32::new(0),
    alarms: Mutex::new(Vec::new()),
};

/// A SIGTERM or SIGINT stops the session: every guest call in flight is dropped now, and
/// comes back as interrupted by `signal`. Calls started afterwards run under their own
/// bounds (the session's end caps what it still calls).
pub fn stop_calls(signal: i32) {
    IN_FLIGHT.signal.store(signal, Ordering::SeqCst);
    let alarms = IN_FLIGHT.alarms.lock().unwrap_or_else(|p| p.into_inner());
    for a in alarms.iter().filter_map(Weak::upgrade) {
        ring(&a);
    }
}

/// Count `alarm` among the calls in flight (forgetting those that ended).
fn in_flight(alarm: &Arc<Mutex<Alarm>>) {
    let mut alarms = IN_FLIGHT.alarms.lock().unwrap_or_else(|p| p.into_inner());
    alarms.retain(|w| w.strong_count() > 0);
    alarms.push(Arc::downgrade(alarm));
}

fn classify(e: &wasmtime::Error, deadline_secs: u64) -> Outcome {
    if let Some(limit) = e.downcast_ref::<LimitExceeded>() {
        return Outcome::Trapped {
            kind: TrapKind::ResourceLimit,
            message: limit.0.clone(),
        };
    }
    if let Some(full) = e.downcast_ref::<wasmtime::component::ResourceTableError>() {
        return Outcome::Trapped {
            kind: TrapKind::ResourceLimit,
            message: format!(
                "host resources: {full} (at most {} live at once)",
                host::MAX_RESOURCES
            ),
        };
    }
    if e.downcast_ref::<Trap>() == Some(&Trap::Interrupt) {
        return deadline_outcome(deadline_secs, false);
    }
    let first = format!("{e:#}");
    // The store's count caps (instances, memories, tables: `host::MAX_MEMORIES`, …) are
    // refused by wasmtime itself with this wording; they are the limiter's outcome too.
    if let Some(at) = first.find("resource limit exceeded: ") {
        let what = first[at..].lines().next().unwrap_or("resource limit exceeded");
        return Outcome::Trapped {
            kind: TrapKind::ResourceLimit,
            message: format!(
                "{what} (capabilities.limits, at most {} memories and {} tables)",
                host::MAX_MEMORIES,
                host::MAX_TABLES
            ),
        };
    }
    // The first line of the chain is wasmtime's "error while executing at wasm backtrace:";
    // the trap itself (a Rust panic ends in `unreachable`) says what happened.
    let message = match e.downcast_ref::<Trap>() {
        Some(trap) => {
            format!("{trap} (a guest panic's own message, if it printed one, is in logs/guest-stderr.log)")
        }
        None => e
            .root_cause()
            .to_string()
            .lines()
            .next()
            .unwrap_or("guest trapped")
            .to_string(),
    };
    Outcome::Trapped {
        kind: TrapKind::GuestPanic,
        message,
    }
}

/// The hard deadline of one call: rung once (by the epoch ticker when `hard` has passed, by
/// a signal or by an [`Interrupt`]), then wakes the call's task.
#[derive(Default)]
struct Alarm {
    fired: bool,
    waker: Option<Waker>,
    /// When the ticker rings it (None: only a signal or an interrupt does).
    hard: Option<Instant>,
}

/// A way to end a guest call early from another thread (a canceled task, a signal): firing
/// it rings the call's hard deadline now, so the call is dropped wherever it is blocked. A
/// guest spinning in WebAssembly is still ended by its epoch deadline. One per call.
#[derive(Clone, Default)]
pub struct Interrupt(Arc<Mutex<Interruption>>);

#[derive(Default)]
struct Interruption {
    fired: bool,
    alarm: Option<Arc<Mutex<Alarm>>>,
}

fn ring(alarm: &Mutex<Alarm>) {
    let mut a = alarm.lock().unwrap_or_else(|p| p.into_inner());
    a.fired = true;
    if let Some(w) = a.waker.take() {
        w.wake();
    }
}

impl Interrupt {
    /// End the call (now, or as soon as it starts).
    pub fn fire(&self) {
        let mut i = self.0.lock().unwrap_or_else(|p| p.into_inner());
        i.fired = true;
        if let Some(a) = &i.alarm {
            ring(a);
        }
    }

    /// Whether it was fired.
    pub fn is_fired(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).fired
    }

    fn arm(&self, alarm: &Arc<Mutex<Alarm>>) {
        let mut i = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if i.fired {
            ring(alarm);
        }
        i.alarm = Some(alarm.clone());
    }
}

/// Ring every call in flight whose hard deadline is past at `now`.
fn ring_due(now: Instant) {
    let alarms = IN_FLIGHT.alarms.lock().unwrap_or_else(|p| p.into_inner());
    for a in alarms.iter().filter_map(Weak::upgrade) {
        let due = {
            let a = a.lock().unwrap_or_else(|p| p.into_inner());
            !a.fired && a.hard.is_some_and(|h| h <= now)
        };
        if due {
            ring(&a);
        }
    }
}

/// The one epoch ticker of the process: every [`EPOCH_TICK`] it increments the epoch of
/// each engine that has run a guest, then rings the hard deadlines that have passed. One
/// ticker for all calls, so guests running at the same time (an async hook beside the
/// driver) do not speed up each other's deadlines, and no call pays for a thread of its own.
fn ensure_ticking(engine: &Engine) -> Result<(), Diagnostic> {
    static ENGINES: OnceLock<Mutex<Vec<Engine>>> = OnceLock::new();
    static STARTED: OnceLock<Result<(), String>> = OnceLock::new();
    let engines = ENGINES.get_or_init(|| Mutex::new(Vec::new()));
    {
        let mut list = engines.lock().unwrap_or_else(|p| p.into_inner());
        if !list.iter().any(|e| Engine::same(e, engine)) {
            list.push(engine.clone());
        }
    }
    STARTED
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("epoch".into())
                .spawn(|| loop {
                    std::thread::sleep(EPOCH_TICK);
                    if let Some(list) = ENGINES.get() {
                        for e in list.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                            e.increment_epoch();
                        }
                    }
                    ring_due(Instant::now());
                })
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(|e| Diagnostic::new(code::RUN_TRAP, "", format!("cannot start the epoch ticker: {e}")))
}

/// Start the async runtime every guest call runs on (wasmtime-wasi's, made on first use)
/// now, at the session's start: its construction panics when it cannot get its
/// descriptors, which here becomes E-RUN-060 instead of a crash part-way into a task.
pub fn ensure_async_runtime() -> Result<(), Diagnostic> {
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // Its worker threads are made here: with the session's signals blocked, as every
    // thread of a session has them.
    let made = crate::signals::with_termination_blocked(|| {
        std::panic::catch_unwind(|| wasmtime_wasi::runtime::in_tokio(async {}))
    });
    std::panic::set_hook(quiet);
    made.map_err(|_| {
        Diagnostic::new(
            code::RUN_DESCRIPTORS,
            "",
            "cannot start the guests' async runtime: the process is out of file descriptors (ulimit -n) or of threads",
        )
    })
}

/// Poll `fut` until it finishes or `alarm` fires (`None`).
async fn race<F: Future>(fut: F, alarm: &Mutex<Alarm>) -> Option<F::Output> {
    let mut fut = pin!(fut);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        let mut a = alarm.lock().unwrap_or_else(|p| p.into_inner());
        if a.fired {
            return Poll::Ready(None);
        }
        a.waker = Some(cx.waker().clone());
        Poll::Pending
    })
    .await
}

/// Drive `call` (one guest invocation on a store whose epoch deadline is `deadline_secs`)
/// to its end, or drop it at the deadline plus [`GRACE`] wherever it is blocked (`None`).
/// Every guest invocation goes through here: the capsule's `run` now, tool, driver and hook
/// calls as they land.
pub fn bounded<F: Future>(
    engine: &Engine,
    deadline_secs: u64,
    call: F,
) -> Result<Option<F::Output>, Diagnostic> {
    bounded_or(engine, deadline_secs, call, None)
}

/// [`bounded`], also ended (`None`) when `interrupt` fires.
fn bounded_or<F: Future>(
    engine: &Engine,
    deadline_secs: u64,
    call: F,
    interrupt: Option<&Interrupt>,
) -> Result<Option<F::Output>, Diagnostic> {
    let hard = Instant::now() + Duration::from_secs(deadline_secs.min(u64::from(u32::MAX))) + GRACE;
    let alarm = Arc::new(Mutex::new(Alarm {
        hard: Some(hard),
        ..Alarm::default()
    }));
    if let Some(i) = interrupt {
        i.arm(&alarm);
    }
    ensure_ticking(engine)?;
    in_flight(&alarm);
    Ok(wasmtime_wasi::runtime::in_tokio(race(call, &alarm)))
}

/// A tool, driver or hook call (`call`, one guest invocation on a store whose epoch
/// deadline is `deadline_secs`) run to its value, or to the trap that ended it: the
/// deadline (blocked in a host call or not), the limiter, or a panic.
pub fn guest_call<T, F: Future<Output = wasmtime::Result<T>>>(
    engine: &Engine,
    deadline_secs: u64,
    call: F,
) -> Result<Result<T, Outcome>, Diagnostic> {
    Ok(match bounded(engine, deadline_secs, call)? {
        None => Err(dropped_outcome(deadline_secs)),
        Some(Err(e)) => Err(classify(&e, deadline_secs)),
        Some(Ok(v)) => Ok(v),
    })
}

/// Instantiate `component` with `host` and call its `run`; `interrupt` may end it early
/// (the outcome is then the deadline's: check [`Interrupt::is_fired`]).
pub fn call_run(
    engine: &Engine,
    component: &Component,
    host: Host,
    deadline_secs: u64,
    interrupt: Option<&Interrupt>,
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
    enum Ended {
        Ran(Result<(), Outcome>),
        NotInstantiated(wasmtime::Error),
    }
    let call = async {
        match Capsule::instantiate_async(&mut store, component, &linker).await {
            Ok(capsule) => Ended::Ran(
                capsule
                    .murmur_capsule_run()
                    .call_run(&mut store)
                    .await
                    .map_err(|e| classify(&e, deadline_secs)),
            ),
            Err(e) => Ended::NotInstantiated(e),
        }
    };
    match bounded_or(engine, deadline_secs, call, interrupt)? {
        None => Ok(dropped_outcome(deadline_secs)),
        Some(Ended::Ran(r)) => Ok(r.err().unwrap_or(Outcome::Returned)),
        Some(Ended::NotInstantiated(e)) => match classify(&e, deadline_secs) {
            Outcome::Trapped {
                kind: TrapKind::GuestPanic,
                ..
            } => Err(bad("the component does not fit the capsule world", e)),
            trapped => Ok(trapped),
        },
    }
}
