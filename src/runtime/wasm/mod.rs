//! The WASM guest: wasmtime engine and compilation cache, the host state a guest sees (WASI
//! grants, the HTTP gate, the tool registry, the resource limiter), and one call of `run`.

pub mod cache;
pub mod credential;
pub mod hook;
pub mod host;
pub mod invoke;
pub mod sink;
pub mod tool;

pub use invoke::{call_run, Outcome, TrapKind};

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
