//! murmur-hook-gatekeeper: the reference `on-task-end` hook with `commit_policy: reopen-task`.
//! A component exporting `murmur:hook/lifecycle@0.1.0` that, on `task-end(info)`, accepts the
//! result (`ok(none)`) when `info.result-text` contains the word `APPROVED`, and otherwise
//! asks the runtime to run the task again (`ok(reopen-task(FEEDBACK))`). Every other event
//! gets `ok(none)`. The decision is pure ([`gate::decide`]) and unit-tested natively; the WIT
//! glue only builds for wasm32.

pub mod gate;

#[cfg(target_arch = "wasm32")]
mod guest;

#[cfg(test)]
mod tests;
