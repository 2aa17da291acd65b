//! `GET /resources/peer/<handle>`: the peer plane's one verb. The five checks run in the
//! spec's order (shape, audience header, MAC in constant time, expiry, then the path through
//! the operator plane's reader), and nothing after the MAC is looked at before it passes.
//! Every MAC failure, whatever its cause, is the same `handle_not_valid` answer byte for
//! byte. The token never reaches the trace: only its `handle_id`.

use super::reading::{answer as send_read, read, refusal_response, Job1, OnTimeout, ReadOutcome, Shared};
use crate::http::{Exchange, Reply, Request, Response, Ticket};
use crate::resources::peer::{check, PeerRefusal};
use crate::resources::{path, Refusal};
use crate::token::{token_id, Key};
use serde_json::{json, Value};
use std::sync::Arc;

/// `exports.peer_files` as the door serves it, with the session's minting key.
pub struct PeerPlane {
    pub root: String,
    pub max_bytes: u64,
    pub key: Arc<Key>,
}

use crate::clock::now_ms;

struct Redeem<'a> {
    handle_id: Option<String>,
    path: Option<String>,
    audience: Option<&'a str>,
}

fn event(shared: &Shared, r: &Redeem<'_>, outcome: ReadOutcome) {
    let (bytes, sha, code, reason) = match outcome {
        Ok((n, sha)) => (Value::from(n), Value::from(sha), "ok".to_string(), Value::Null),
        Err((code, reason)) => (Value::Null, Value::Null, code, Value::from(reason)),
    };
    shared.trace(
        "peer_handle_redeem",
        json!({
            "handle_id": r.handle_id, "path": r.path, "generation": shared.tasks.generation(),
            "audience_asserted": r.audience.map(super::reading::shown), "bytes": bytes, "sha256": sha,
            "outcome": code, "reason": reason,
        }),
    );
}

/// A request under `/resources/peer` with a method other than GET (already answered 405).
pub fn method_event(shared: &Shared, p: &str) {
    let r = Redeem {
        handle_id: handle_of(p).map(token_id),
        path: None,
        audience: None,
    };
    event(
        shared,
        &r,
        Err(("method_not_allowed".into(), "the only verb is GET".into())),
    );
}

fn handle_of(p: &str) -> Option<&str> {
    p.strip_prefix("/resources/peer/").filter(|h| !h.is_empty())
}

fn peer_refused(r: PeerRefusal) -> Response {
    refusal_response(r.status(), r.code(), r.message())
}

/// Answer one request under `/resources/peer`; `defer` runs a job on a reader thread.
pub fn answer(
    plane: Option<&PeerPlane>,
    shared: &Arc<Shared>,
    req: &Request,
    ex: &Exchange<'_>,
    defer: impl FnOnce(&Exchange<'_>, OnTimeout, Job1) -> Reply,
) -> Reply {
    let p = req.path();
    let audience = req.header("x-murmur-audience");
    let mut r = Redeem {
        handle_id: handle_of(p).map(token_id),
        path: None,
        audience,
    };
    let Some(plane) = plane else {
        let msg = "this capsule declares no exports.peer_files";
        event(shared, &r, Err(("no_peer_plane".into(), msg.into())));
        return Reply::Now(refusal_response(404, "no_peer_plane", msg));
    };
    let Some(handle) = handle_of(p) else {
        let nf = Refusal::NotFound;
        event(
            shared,
            &r,
            Err((nf.code().into(), "the peer plane has no listing".into())),
        );
        return Reply::Now(refusal_response(404, nf.code(), "the peer plane has no listing"));
    };
    let redeemable = match check(&plane.key, handle, audience, now_ms()) {
        Ok(ok) => ok,
        Err(e) => {
            event(shared, &r, Err((e.code().into(), e.message().into())));
            return Reply::Now(peer_refused(e));
        }
    };
    r.path = Some(redeemable.path.clone());
    // The path was canonical when minted; it is checked again, never trusted.
    let rel = match path::check(&redeemable.path) {
        Ok(rel) => rel.to_string(),
        Err(e) => {
            event(shared, &r, Err((e.code().into(), e.message())));
            return Reply::Now(refusal_response(e.status(), e.code(), &e.message()));
        }
    };
    let (root, max_bytes) = (plane.root.clone(), plane.max_bytes);
    let shared = Arc::clone(shared);
    let handle_id = r.handle_id.clone().unwrap_or_default();
    let (path_shown, asserted) = (rel.clone(), audience.map(str::to_string));
    let late = (
        Arc::clone(&shared),
        handle_id.clone(),
        path_shown.clone(),
        asserted.clone(),
    );
    let on_timeout: OnTimeout = Box::new(move |why| {
        let r = Redeem {
            handle_id: Some(late.1),
            path: Some(late.2),
            audience: late.3.as_deref(),
        };
        event(&late.0, &r, Err(("busy".into(), why.into())));
    });
    defer(
        ex,
        on_timeout,
        Box::new(move |ticket: Ticket| {
            let report = {
                let (shared, handle_id, path, asserted) = (
                    Arc::clone(&shared),
                    handle_id.clone(),
                    path_shown.clone(),
                    asserted.clone(),
                );
                move |o: ReadOutcome| {
                    let r = Redeem {
                        handle_id: Some(handle_id),
                        path: Some(path),
                        audience: asserted.as_deref(),
                    };
                    event(&shared, &r, o)
                }
            };
            let on_end = report.clone();
            let id = handle_id.clone();
            let result = read(
                &shared,
                &root,
                max_bytes,
                &rel,
                move |h| h.header("x-murmur-handle-id", &id),
                Box::new(on_end),
            );
            send_read(ticket, result, report);
        }),
    )
}
