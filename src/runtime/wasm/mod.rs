//! The WASM guest: wasmtime engine and compilation cache, the host state a guest sees (WASI
//! grants, the HTTP gate, the tool registry, the resource limiter), and one call of `run`.

pub mod cache;
pub mod credential;
pub mod hook;
mod hook_v1;
mod hook_world;
pub mod host;
pub mod invoke;
pub mod keepalive;
pub mod sink;
pub mod tool;

pub use invoke::{call_run, Interrupt, Outcome, TrapKind};

/// Epoch ticks happen every 100 ms; a deadline is counted in ticks.
pub const EPOCH_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// The engine every guest of this process runs on: component model on, epoch interruption
/// on, everything else at wasmtime's defaults for the enabled features.
pub fn engine() -> wasmtime::Result<wasmtime::Engine> {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    wasmtime::Engine::new(&config)
}

/// Link `component` against the host interfaces (WASI, `wasi:http` behind the gate, the
/// tool registry); what a tool, driver or hook is instantiated from on every call.
pub fn link(
    engine: &wasmtime::Engine,
    component: &wasmtime::component::Component,
    what: &str,
) -> Result<wasmtime::component::InstancePre<host::Host>, String> {
    let linker = host::linker(engine).map_err(|e| format!("cannot link the host interfaces: {e:#}"))?;
    linker
        .instantiate_pre(component)
        .map_err(|e| format!("{what}: {e:#}"))
}

/// A fresh store for one guest call: `host`'s grants, its limiter, and an epoch deadline
/// of `deadline_secs`.
pub fn store(engine: &wasmtime::Engine, host: host::Host, deadline_secs: u64) -> wasmtime::Store<host::Host> {
    let mut store = wasmtime::Store::new(engine, host);
    store.limiter(|h| &mut h.limiter);
    let ticks = deadline_secs.saturating_mul(1000) / EPOCH_TICK.as_millis() as u64;
    store.set_epoch_deadline(ticks.max(1));
    store
}
