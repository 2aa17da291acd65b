//! murmur-hook-eval: scores a session and writes `eval.jsonl`. A component exporting
//! `murmur:hook/lifecycle@0.1.0`, bound to every session event (binding omitted), blocking,
//! `commit_policy: none`. A hook is instantiated afresh for each event, so what it observes
//! is appended to `observed.jsonl` in its own records directory (`/records`, granted by
//! `records: own` on its entry); at `session-end` the scorers its entry's `config` names
//! ([`score::Config`]) read it back and `eval.jsonl` is written beside it. Without the
//! records grant every event is answered with an error saying so (the runtime writes it to
//! the hook's log). The scoring is pure ([`score`]) and unit-tested natively.

pub mod score;

#[cfg(target_arch = "wasm32")]
mod guest;
