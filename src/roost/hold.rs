//! How the roost learns that a session's runtime is gone without a word: after it registers,
//! a runtime holds `POST /hold` open for its session's lifetime (presenting its credential),
//! and the roost answers with a stream that never ends. The kernel closes that connection
//! when the runtime dies, however it dies; the event loop sees the close and marks the
//! stream closed, and the next request the roost answers (before anything else it does)
//! ends every session whose hold closed while it was still running as `failed`: its slot
//! under `--max-concurrent` and `--max-live-capsules` is freed and `GET /status` says
//! `failed`. No timer, no thread, no probe of the host: the one loop thread sees it all. A
//! session that never takes its hold lapses the same way once `HOLD_GRACE_MS` have passed
//! since it registered (`State::lapse`, read at the next request).

use super::state::Status;
use super::Roost;
use crate::http::{self, Exchange, Reply, Request, Response};

/// The refusal of a second hold on one session.
pub const ALREADY_HELD: &str = "this session's runtime already holds it: a session is held by one connection";

impl Roost {
    /// `POST /hold`: the caller's session is held while this connection stays open.
    pub(super) fn hold(&mut self, req: &Request, ex: &Exchange<'_>) -> Reply {
        if let Err(refusal) = http::require_json(req) {
            return refusal.into();
        }
        let Some(sid) = self.caller(req) else {
            return Response::error(403, super::messages::IDENTITY).into();
        };
        if self.holds.get(&sid).is_some_and(|s| !s.is_closed()) {
            return Response::error(409, ALREADY_HELD).into();
        }
        self.state.held(&sid);
        self.holds.insert(sid, ex.stream());
        Reply::Stream(
            Response::new(200)
                .header("content-type", "text/plain")
                .header("cache-control", "no-store"),
        )
    }

    /// End, as `failed`, every running session whose hold closed, or that never took its
    /// hold within `HOLD_GRACE_MS` of registering; forget the holds of sessions that ended
    /// (ending their streams).
    pub(super) fn reap_holds(&mut self, now_ms: u64) {
        self.state.lapse(now_ms);
        let mut done: Vec<String> = Vec::new();
        for (sid, stream) in &self.holds {
            let running = self.state.running(sid).is_some();
            if stream.is_closed() && running {
                self.state.end(sid, Status::Failed);
            }
            if stream.is_closed() || !running {
                done.push(sid.clone());
            }
        }
        for sid in done {
            if let Some(stream) = self.holds.remove(&sid) {
                stream.end();
            }
        }
    }
}
