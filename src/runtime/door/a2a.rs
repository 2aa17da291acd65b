//! `POST /`: the A2A task interface of both protocol generations over JSON-RPC 2.0, on the
//! door's task table. Every answer is HTTP 200 (JSON-RPC errors included, as A2A clients
//! read them only from a 2xx), except what the HTTP layer refuses before the body is read
//! (413, 431, the loopback guard), a body not declared as JSON (415, its body still a
//! JSON-RPC error: -32005), and on an authenticated door a caller without a good token (401)
//! or calling outside its credential's scopes (403): see [`super::auth`]. A message that
//! names its `taskId` answers a task waiting for input (`a2a_follow.rs`).

use super::auth::{Denied, Gate};
use super::tasks::{self, answer, Origin, Tasks, Viewer, Watch};
use super::Route;
use crate::a2a::params::{Call, Op, SendRequest};
use crate::a2a::rpc::{self, RpcError, INVALID_PARAMS, METHOD_NOT_FOUND, UNSUPPORTED_OPERATION};
use crate::a2a::shapes;
use crate::a2a::Generation;
use crate::http::{Exchange, Reply, Request, Response};
use crate::runtime::trace::Trace;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// How long a send without `returnImmediately` (0.3: `blocking: true`) holds for the task to
/// settle before it answers with the task as it stands. Below the 5 s an A2A SDK client
/// waits by default.
pub const BLOCKING_WAIT: Duration = Duration::from_secs(4);
/// The JSON-RPC error of a completion addressed to another session (the reference's code).
pub const COMPLETION_MISADDRESSED: i64 = -31001;
/// The JSON-RPC error of a stream refused because [`tasks::MAX_STREAMS`] are open.
pub const TOO_MANY_STREAMS: i64 = -32603;

/// The JSON-RPC error of a completion for a delegation this session did not start, or a
/// second one for the same delegation.
pub const COMPLETION_REFUSED: i64 = -31002;

/// The A2A route.
pub struct A2a {
    pub tasks: Arc<Tasks>,
    pub session_id: String,
    /// The door's writer onto the session's trace (refused completions are recorded).
    pub trace: Option<std::sync::Mutex<Trace>>,
    /// The door's authentication, when the manifest declares it.
    pub gate: Option<Arc<Gate>>,
    /// The extended card (0.3 form, 1.0 form), served to authenticated callers.
    pub extended: Option<(Value, Value)>,
    /// The parts the capsule's tasks take, and how a waiting send is answered.
    pub takes: super::parts::Takes,
    /// Push deliveries, when the manifest allows a webhook (else the config methods and a
    /// send's config are PushNotificationNotSupported).
    pub pusher: Option<super::push::Pusher>,
}

/// Who is calling, as the gate decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// An unauthenticated door: anyone, seeing every task.
    Open,
    /// A verified credential, by name.
    Credential(String),
    /// A completion with no token, admitted by the delegation id it reports (one this
    /// session issued and has not taken): it may send that completion and nothing else.
    Completion,
}

impl Caller {
    /// Whose tasks this caller sees.
    fn viewer(&self) -> Viewer<'_> {
        match self {
            Caller::Open => None,
            Caller::Credential(n) => Some(n),
            // No task is a completion's own: it sees none.
            Caller::Completion => Some(""),
        }
    }

    /// The task owner this caller's sends record.
    fn owner(&self) -> Option<String> {
        match self {
            Caller::Credential(n) => Some(n.clone()),
            _ => None,
        }
    }
}

pub use crate::clock::now_ms;

/// A JSON-RPC error answering a call of `gen` (a 1.0 A2A error carries its ErrorInfo).
fn err_to(gen: Generation, id: &Value, code: i64, message: impl Into<String>) -> Reply {
    refuse(RpcError::new(id, code, message).answering(gen))
}

/// [`err_to`] answering a streaming call.
fn stream_err(gen: Generation, id: &Value, code: i64, message: impl Into<String>) -> Reply {
    refuse(RpcError::new(id, code, message).answering(gen).on_stream(true))
}

/// An error's answer: a JSON body, or for a 0.3 streaming call an event stream of the one
/// error event (HTTP 200 either way).
fn refuse(e: RpcError) -> Reply {
    if !e.as_event() {
        return Reply::Now(answer(&e.to_json()));
    }
    let mut body = b"data: ".to_vec();
    body.extend_from_slice(&rpc::to_body(&e.to_json()));
    body.extend_from_slice(b"\n\n");
    Reply::Now(sse_head().body(body))
}

fn ok(id: &Value, result: Value) -> Reply {
    Reply::Now(answer(&rpc::result_response(id, result)))
}

fn sse_head() -> Response {
    Response::new(200)
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-store")
}

/// A W3C `traceparent` as Trace Context level 1 has it valid, or nothing: a version of two
/// lowercase hex digits but `ff`, a trace id of 32 and a span id of 16, not all zeros, and
/// flags of 2; version `00` has exactly these four fields, a later one may carry more after
/// them. Anything else is ignored (not recorded, not given to a hook).
fn traceparent(req: &Request) -> Option<String> {
    let v = req.header("traceparent")?.trim();
    let parts: Vec<&str> = v.split('-').collect();
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let id = |s: &str, n: usize| hex(s, n) && s.bytes().any(|b| b != b'0');
    let fields = match parts.first() {
        Some(&"00") => parts.len() == 4,
        Some(&"ff") => false,
        _ => parts.len() >= 4,
    };
    let ok = fields && hex(parts[0], 2) && id(parts[1], 32) && id(parts[2], 16) && hex(parts[3], 2);
    ok.then(|| v.to_string())
}

/// The task's origin and trust from the murmur headers: only `peer` and `completion` are
/// taken from the wire (their trust claim `trusted` or else `untrusted`); anything else is
/// an `event`, untrusted.
pub fn origin_of(req: &Request) -> Origin {
    let claimed = req.header("x-murmur-task-origin").map(str::trim);
    let (origin, trust) = match claimed {
        Some(o @ ("peer" | "completion")) => {
            let trust = match req.header("x-murmur-task-trust").map(str::trim) {
                Some("trusted") => "trusted",
                _ => "untrusted",
            };
            (o, trust)
        }
        _ => ("event", "untrusted"),
    };
    Origin {
        origin: origin.into(),
        trust: trust.into(),
        traceparent: traceparent(req),
        owner: None,
    }
}

impl A2a {
    /// A `completion` must name this session in `x-murmur-completion-session`.
    fn misaddressed(&self, req: &Request, origin: &Origin) -> Option<String> {
        if origin.origin != "completion" {
            return None;
        }
        let named = req.header("x-murmur-completion-session").unwrap_or("").trim();
        if named == self.session_id {
            return None;
        }
        let shown: String = named.chars().filter(|c| !c.is_control()).take(64).collect();
        Some(format!(
            "completion is addressed to session {shown}, which is not the session running here"
        ))
    }

    /// A completion is taken once, for a delegation this session started
    /// (`x-murmur-delegation-id`); a refusal is traced. `Ok` names the delegation taken.
    fn take_completion(&self, req: &Request, origin: &Origin) -> Result<Option<String>, String> {
        if origin.origin != "completion" {
            return Ok(None);
        }
        let id = req.header("x-murmur-delegation-id").unwrap_or("").trim();
        let Err(why) = self.tasks.completions.take(id) else {
            return Ok(Some(id.to_string()));
        };
        let shown: String = id.chars().filter(|c| !c.is_control()).take(64).collect();
        if let Some(t) = &self.trace {
            let mut t = t.lock().unwrap_or_else(|p| p.into_inner());
            let _ = t.event(
                "completion_refused",
                serde_json::json!({"delegation_id": shown, "reason": why}),
            );
        }
        Err(format!("completion for delegation {shown} refused: {why}"))
    }

    /// Submit `s`; a completion the table rejected (busy) is not taken, so its reporter's
    /// retry can still be.
    fn submit(&self, s: &SendRequest, origin: Origin, watch: Watch, taken: &Option<String>) -> shapes::Task {
        let t = self.tasks.submit(s, origin, watch, now_ms());
        if let (shapes::State::Rejected, Some(id)) = (t.state, taken) {
            self.tasks.completions.give_back(id);
        }
        t
    }

    fn send(
        &self,
        req: &Request,
        ex: &Exchange<'_>,
        (call, caller): (&Call, &Caller),
        s: &SendRequest,
        stream: bool,
    ) -> Reply {
        let id = &call.id;
        let gen = call.generation;
        let fail = |code: i64, m: String| refuse(RpcError::new(id, code, m).answering(gen).on_stream(stream));
        if self.tasks.acceptance() == tasks::Acceptance::None {
            let why = "this capsule accepts no tasks (lifecycle.task_acceptance: none)";
            return if stream {
                fail(UNSUPPORTED_OPERATION, format!("Unsupported operation: {why}"))
            } else {
                fail(METHOD_NOT_FOUND, format!("Method not found: {why}"))
            };
        }
        let origin = Origin {
            owner: caller.owner(),
            ..origin_of(req)
        };
        if let Some(m) = self.misaddressed(req, &origin) {
            return fail(COMPLETION_MISADDRESSED, m);
        }
        if let Err((code, m)) = self.takes.check(&s.parts) {
            return fail(code, m);
        }
        if let Some(c) = &s.push {
            if let Err((code, m)) = self.admit(c) {
                return fail(code, m);
            }
        }
        if let Some(t) = &s.task_id {
            return self.follow_up(ex, (call, caller), (t, s), stream);
        }
        if stream && !self.tasks.stream_room() {
            return too_many_streams(gen, id);
        }
        // Last of the checks: a completion taken here is admitted or given back.
        let taken = match self.take_completion(req, &origin) {
            Ok(t) => t,
            Err(m) => return fail(COMPLETION_REFUSED, m),
        };
        if stream {
            self.submit(s, origin, self.stream_watch(ex, (id, gen)), &taken);
            return Reply::Stream(sse_head());
        }
        if s.return_immediately {
            let t = self.submit(s, origin, Watch::None, &taken);
            return ok(id, shapes::render_send_result(&t, gen, s.history_length));
        }
        self.send_blocking(ex, (id, gen), s, origin, &taken)
    }

    /// A send that holds for the task to settle, within [`BLOCKING_WAIT`]: then (or at once,
    /// when it is already settled) the task as it stands, to the request that sent it.
    fn send_blocking(
        &self,
        ex: &Exchange<'_>,
        (id, gen): (&Value, Generation),
        s: &SendRequest,
        origin: Origin,
        taken: &Option<String>,
    ) -> Reply {
        let history = s.history_length;
        let task_id = Arc::new(std::sync::OnceLock::<String>::new());
        let watch = self.held_watch(ex, (id, gen), history, task_id.clone());
        let t = self.submit(s, origin, watch, taken);
        let _ = task_id.set(t.id.clone());
        if t.state.is_terminal() {
            return ok(id, shapes::render_send_result(&t, gen, history));
        }
        Reply::Later
    }

    /// A send that waits: answered when the task settles, or after [`BLOCKING_WAIT`] with the
    /// task `task_id` names by then, as it stands (an internal error if it is gone).
    pub(super) fn held_watch(
        &self,
        ex: &Exchange<'_>,
        (id, gen): (&Value, Generation),
        history: Option<u32>,
        task_id: Arc<std::sync::OnceLock<String>>,
    ) -> Watch {
        let (tasks, rid) = (self.tasks.clone(), id.clone());
        let ticket = ex.defer_or(BLOCKING_WAIT, move || {
            match task_id.get().and_then(|t| tasks.sent(t)) {
                Some(t) => answer(&rpc::result_response(
                    &rid,
                    shapes::render_send_result(&t, gen, history),
                )),
                None => answer(
                    &RpcError::new(&rid, rpc::INTERNAL_ERROR, "Internal error: the task is gone").to_json(),
                ),
            }
        });
        Watch::Wait {
            ticket,
            id: id.clone(),
            gen,
            history,
            message: self.takes.message,
        }
    }

    /// A stream of the task's events (one Message under `a2a.answer: message`).
    pub(super) fn stream_watch(&self, ex: &Exchange<'_>, (id, gen): (&Value, Generation)) -> Watch {
        Watch::Stream {
            stream: ex.stream(),
            id: id.clone(),
            gen,
            message: self.takes.message,
        }
    }

    fn call(&self, req: &Request, ex: &Exchange<'_>, call: Call, caller: &Caller) -> Reply {
        let id = &call.id;
        let gen = call.generation;
        let viewer = caller.viewer();
        match &call.op {
            Op::Send(s) => self.send(req, ex, (&call, caller), s, false),
            Op::Stream(s) => self.send(req, ex, (&call, caller), s, true),
            Op::Get(t) => match self.tasks.get(&t.id, viewer) {
                Some(task) => ok(id, shapes::render_task(&task, gen, t.history_length)),
                None => err_to(gen, id, rpc::TASK_NOT_FOUND, "Task not found"),
            },
            Op::Cancel(t) => match self.tasks.cancel(&t.id, viewer, now_ms()) {
                Ok(task) => ok(id, shapes::render_task(&task, gen, t.history_length)),
                Err((code, m)) => err_to(gen, id, code, m),
            },
            Op::Subscribe(t) => {
                if !self.tasks.stream_room() {
                    return too_many_streams(gen, id);
                }
                match self.tasks.subscribe(&t.id, viewer, ex.stream(), id.clone(), gen) {
                    Ok(()) => Reply::Stream(sse_head()),
                    Err((code, m)) => stream_err(gen, id, code, m),
                }
            }
            Op::List(l) => match self.tasks.list(l, viewer) {
                Ok(v) => ok(id, v),
                Err(m) => err_to(gen, id, INVALID_PARAMS, format!("Invalid params: {m}")),
            },
            Op::Push(op) => {
                if let crate::a2a::push::Op::Set { config, .. } = op {
                    if let Err((code, m)) = self.admit(config) {
                        return err_to(gen, id, code, m);
                    }
                }
                match self.tasks.push_config(op, viewer, gen) {
                    Ok(v) => ok(id, v),
                    Err((code, m)) => err_to(gen, id, code, m),
                }
            }
            Op::ExtendedCard => match &self.extended {
                Some((v03, v10)) => ok(
                    id,
                    if gen == Generation::V10 {
                        v10.clone()
                    } else {
                        v03.clone()
                    },
                ),
                None => err_to(
                    gen,
                    id,
                    rpc::EXTENDED_CARD_NOT_CONFIGURED,
                    "Extended agent card is not configured",
                ),
            },
        }
    }

    /// Whether a push config names a webhook this capsule allows: -32003 when it allows
    /// none, invalid params for a destination it does not list (nothing is ever sent there).
    fn admit(&self, c: &crate::a2a::push::Config) -> Result<(), (i64, String)> {
        let Some(p) = &self.pusher else {
            return Err((
                rpc::PUSH_NOT_SUPPORTED,
                "Push notifications are not supported".into(),
            ));
        };
        p.admit(c)
            .map_err(|why| (INVALID_PARAMS, format!("Invalid params: {why}")))
    }

    /// Who calls: anyone on an open door; on an authenticated one a verified credential,
    /// or a token-less completion for a delegation still pending here; else 401.
    fn caller(&self, req: &Request) -> Result<Caller, Denied> {
        let Some(gate) = &self.gate else {
            return Ok(Caller::Open);
        };
        match gate.authenticate(req) {
            Ok(name) => Ok(Caller::Credential(name.to_string())),
            Err(denied) => {
                // No authorization header at all (one that is not UTF-8 is not "none").
                let completion = !req.headers.iter().any(|(n, _)| n == "authorization")
                    && req.header("x-murmur-task-origin").map(str::trim) == Some("completion")
                    && self
                        .tasks
                        .completions
                        .pending(req.header("x-murmur-delegation-id").unwrap_or("").trim());
                if completion {
                    Ok(Caller::Completion)
                } else {
                    Err(denied)
                }
            }
        }
    }

    /// Whether `caller` may call `method` (403 if not).
    fn permits(&self, caller: &Caller, method: rpc::Method) -> Result<(), Denied> {
        let allowed = match (caller, &self.gate) {
            (Caller::Open, _) => true,
            (Caller::Completion, _) => method == rpc::Method::Send,
            (Caller::Credential(n), Some(g)) => g.allows(n, method.scope()),
            (Caller::Credential(_), None) => false,
        };
        if allowed {
            Ok(())
        } else {
            Err(Denied::Forbidden)
        }
    }
}

/// 415 for a body not declared as JSON, its body a JSON-RPC error (id null, not read):
/// ContentTypeNotSupported, with its ErrorInfo when the request names A2A 1.0.
fn not_json(version: Option<&str>) -> Response {
    let mut e = RpcError::new(
        &Value::Null,
        rpc::CONTENT_TYPE_NOT_SUPPORTED,
        "Content type not supported: a POST body must be sent with content-type: application/json",
    );
    if version.is_some_and(rpc::is_supported_v10) {
        e = e.answering(Generation::V10);
    }
    Response::json(415, rpc::to_body(&e.to_json()))
}

fn too_many_streams(gen: Generation, id: &Value) -> Reply {
    stream_err(
        gen,
        id,
        TOO_MANY_STREAMS,
        format!(
            "too many open streams: this capsule holds at most {}; poll with tasks/get (GetTask) instead",
            tasks::MAX_STREAMS
        ),
    )
}

impl Route for A2a {
    fn answer(&self, req: &Request, ex: &Exchange<'_>) -> Option<Reply> {
        if !matches!(req.path(), "/" | "") {
            return None;
        }
        let caller = match self.caller(req) {
            Ok(c) => c,
            Err(denied) => return Some(Reply::Now(denied.response())),
        };
        if req.method != "POST" {
            return Some(Reply::Now(
                Response::error(405, "method not allowed: A2A calls are POST /").header("allow", "POST"),
            ));
        }
        let version = req.header("a2a-version");
        if crate::http::require_json(req).is_err() {
            return Some(Reply::Now(not_json(version)));
        }
        let envelope = match rpc::parse_envelope(&req.body) {
            Ok(e) => e,
            Err(e) => return Some(refuse(e)),
        };
        if let Some((gen, method)) = envelope.served() {
            if let Err(denied) = self.permits(&caller, method) {
                return Some(Reply::Now(denied.response()));
            }
            if matches!(method, rpc::Method::Push(_)) && self.pusher.is_none() {
                let e = RpcError::new(
                    &envelope.id,
                    rpc::PUSH_NOT_SUPPORTED,
                    "Push notifications are not supported",
                );
                return Some(refuse(e.answering(gen)));
            }
        }
        Some(match envelope.call(version) {
            Ok(call) => self.call(req, ex, call, &caller),
            Err(e) => refuse(e),
        })
    }
}

#[path = "a2a_follow.rs"]
mod follow;

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request {
        Request::new("POST", "/", headers, b"{}")
    }

    #[test]
    fn only_peer_and_completion_origins_come_from_the_wire() {
        let o = origin_of(&req(&[
            ("x-murmur-task-origin", "user"),
            ("x-murmur-task-trust", "trusted"),
        ]));
        assert_eq!((o.origin.as_str(), o.trust.as_str()), ("event", "untrusted"));
        let o = origin_of(&req(&[
            ("x-murmur-task-origin", "peer"),
            ("x-murmur-task-trust", "trusted"),
        ]));
        assert_eq!((o.origin.as_str(), o.trust.as_str()), ("peer", "trusted"));
        let o = origin_of(&req(&[
            ("x-murmur-task-origin", "completion"),
            ("x-murmur-task-trust", "yes"),
        ]));
        assert_eq!((o.origin.as_str(), o.trust.as_str()), ("completion", "untrusted"));
        let o = origin_of(&req(&[]));
        assert_eq!((o.origin.as_str(), o.trust.as_str()), ("event", "untrusted"));
    }

    #[test]
    fn only_a_well_formed_traceparent_is_recorded() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(
            origin_of(&req(&[("traceparent", good)])).traceparent.as_deref(),
            Some(good)
        );
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more";
        assert_eq!(
            origin_of(&req(&[("traceparent", later)])).traceparent.as_deref(),
            Some(later),
            "a later version may carry more fields"
        );
        for bad in [
            "00-xyz-00f067aa0ba902b7-01",
            "junk",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "",
        ] {
            assert_eq!(
                origin_of(&req(&[("traceparent", bad)])).traceparent,
                None,
                "{bad}"
            );
        }
    }

    #[test]
    fn only_a_completion_of_a_pending_delegation_and_no_authorization_skips_the_token() {
        use crate::manifest::model::{DoorAuth, DoorCredential};
        let auth = DoorAuth {
            credentials: vec![DoorCredential {
                name: "ops".into(),
                scopes: vec!["*".into()],
            }],
        };
        let a = A2a {
            tasks: Tasks::new(tasks::Acceptance::Queue(2)),
            session_id: "ses_1".into(),
            trace: None,
            gate: Some(Arc::new(Gate::new(&auth, "ses_1", false).unwrap())),
            extended: None,
            takes: Default::default(),
            pusher: None,
        };
        a.tasks.completions.expect("dlg_a");
        let completion = |id: &str| {
            req(&[
                ("x-murmur-task-origin", "completion"),
                ("x-murmur-delegation-id", id),
            ])
        };
        assert_eq!(a.caller(&completion("dlg_a")), Ok(Caller::Completion));
        assert_eq!(a.caller(&completion("dlg_b")), Err(Denied::Unauthenticated));
        assert_eq!(a.caller(&req(&[])), Err(Denied::Unauthenticated));
        let mut garbled = completion("dlg_a");
        garbled.headers.push(("authorization".into(), vec![0xff, 0xfe]));
        assert_eq!(a.caller(&garbled), Err(Denied::Unauthenticated));
        assert_eq!(a.permits(&Caller::Completion, rpc::Method::Send), Ok(()));
        assert_eq!(
            a.permits(&Caller::Completion, rpc::Method::Get),
            Err(Denied::Forbidden)
        );
        a.tasks.completions.take("dlg_a").unwrap();
        assert_eq!(a.caller(&completion("dlg_a")), Err(Denied::Unauthenticated));
    }

    #[test]
    fn a_completion_must_name_the_running_session() {
        let a = A2a {
            tasks: Tasks::new(tasks::Acceptance::Single),
            session_id: "ses_1".into(),
            trace: None,
            gate: None,
            extended: None,
            takes: Default::default(),
            pusher: None,
        };
        let r = req(&[
            ("x-murmur-task-origin", "completion"),
            ("x-murmur-completion-session", "ses_2"),
        ]);
        assert_eq!(
            a.misaddressed(&r, &origin_of(&r)).as_deref(),
            Some("completion is addressed to session ses_2, which is not the session running here")
        );
        let r = req(&[
            ("x-murmur-task-origin", "completion"),
            ("x-murmur-completion-session", "ses_1"),
        ]);
        assert_eq!(a.misaddressed(&r, &origin_of(&r)), None);
        let r = req(&[("x-murmur-completion-session", "ses_2")]);
        assert_eq!(
            a.misaddressed(&r, &origin_of(&r)),
            None,
            "only a completion is checked"
        );
    }
}
