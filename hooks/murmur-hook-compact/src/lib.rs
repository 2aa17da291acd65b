//! murmur-hook-compact: the reference `on-compaction` hook. A component exporting
//! `murmur:hook/lifecycle@0.1.0` that, on `compaction(info)`, keeps the first message (the
//! task) and the last four, and replaces everything between them with ONE `user` message
//! summarising what was dropped. Every other event gets `ok(none)`. The selection is pure
//! ([`compact::compact`]) and unit-tested natively; the WIT glue only builds for wasm32.

pub mod compact;

#[cfg(target_arch = "wasm32")]
mod guest;

#[cfg(test)]
mod tests;
