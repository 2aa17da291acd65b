//! The roost and what it is built on: `mur-roost` as a black box (routes, cache, guard,
//! survival), approval expiry at the library level, the spawn envelope, the token codec and
//! the HTTP layer. One test binary; each module is a former `tests/<name>.rs`.

#[path = "../common/mod.rs"]
mod common;

mod envelope;
mod http_server;
mod roost_api;
mod roost_cache;
mod roost_clock;
mod roost_guard;
mod roost_hold;
mod roost_survival;
mod token;
