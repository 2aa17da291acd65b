//! murmur-hook-otel: exports a session as OpenTelemetry traces over OTLP/HTTP JSON. A
//! component exporting `murmur:hook/lifecycle@0.2.0`, bound to every session event (binding
//! omitted), `async` with `commit_policy: none`: it never delays a turn, and an event the
//! runtime's queue drops is only missing from the spans.
//!
//! A hook is instantiated afresh for each event, so what it observes is appended to its own
//! records directory (`/records`, granted by `records: own`): the session's trace context in
//! `session.jsonl`, the running task attempt's observations in `task.jsonl`. At each
//! `task-end` the attempt's spans (the task, each inference turn, each tool and shell call)
//! are sent in one request, and at `session-end` the session span, to
//! `<endpoint>/v1/traces`, the collector named by the entry's `config` and granted by its
//! `network.allow`. A collector that is down or slow costs one line in the hook's log: the
//! request gives up after `timeout_ms` (default 1000) at each wait, and after a failure the
//! collector is left alone for 30 s ([`obs::BACKOFF_NS`]; what would have gone is dropped,
//! and logged).
//!
//! Spans, ids and the OTLP JSON are built by pure code ([`obs`], [`spans`]), unit-tested
//! natively.

pub mod config;
pub mod obs;
pub mod spans;

#[cfg(target_arch = "wasm32")]
mod guest;
