//! The `/resources/` planes on the door: the operator plane (`exports.files`: a listing and
//! file reads by path) here, the peer plane (`exports.peer_files`: reads by handle) in
//! [`super::peer`]. Both use the one path check, resolver and reader of
//! [`crate::resources`].
//!
//! Opening, listing and the first hash of a large file run on a small pool of reader
//! threads (a job that panics is answered 500; the reader goes on). A large file's bytes are
//! then pulled by the loop from the file's descriptor as the client reads, at most 1 MiB per
//! connection per turn of the loop (see [`crate::resources::body`] and `http::Body`), so a
//! read holds one chunk of memory, not the file. At most [`MAX_BODIES`] such bodies are in
//! flight; one more is answered `503 busy` at once rather than queued, so small files,
//! listings and redeems never wait behind large bodies, and a body whose client stops
//! reading, or reads slower than 64 KiB/s on average, is cut. At most [`MAX_LISTINGS`]
//! listings walk at once. Every request, refusals included, lands in the trace; text a
//! client chose is cut to 1 KiB there and any peer handle in it written as its id.

use super::auth::Gate;
use super::peer::PeerPlane;
pub use super::reading::shown;
pub use super::reading::Shared;
use super::reading::{
    answer, read, refusal_response, refused, start_readers, Job, Job1, OnTimeout, ReadOutcome, Walking,
    READ_WAIT,
};
use crate::http::{Exchange, Reply, Request, Response};
use crate::resources::open::open_root;
use crate::resources::{list, path, Refusal};
use serde_json::{json, Value};
use std::os::fd::AsFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::Sender;
use std::sync::Arc;

/// `exports.files` as the door serves it.
#[derive(Debug, Clone)]
pub struct FilesPlane {
    /// Normalised root, relative to the accessible workdir.
    pub root: String,
    /// The root as written, echoed in `x-murmur-export-root`.
    pub root_written: String,
    pub max_bytes: u64,
}

/// The `/resources/` route.
pub struct Resources {
    files: Option<FilesPlane>,
    peer: Option<PeerPlane>,
    shared: Arc<Shared>,
    jobs: Sender<Job>,
    /// An authenticated door's gate: the operator plane needs `resources.files`.
    gate: Option<Arc<Gate>>,
}

impl Resources {
    pub fn new(
        files: Option<FilesPlane>,
        peer: Option<PeerPlane>,
        shared: Shared,
        gate: Option<Arc<Gate>>,
    ) -> Resources {
        Resources {
            files,
            peer,
            shared: Arc::new(shared),
            jobs: start_readers(),
            gate,
        }
    }

    /// On an authenticated door, the operator plane's refusal for a caller without a
    /// credential holding `resources.files` (traced like every other refusal).
    fn denied(&self, req: &Request, p: &str) -> Option<Reply> {
        let denied = self.gate.as_ref()?.admit(req, "resources.files").err()?;
        let why = "the door's authentication refused the request";
        if p == "/resources/files" {
            self.list_event(denied.outcome(), Some(why));
        } else {
            self.read_event(
                p.strip_prefix("/resources/files/").unwrap_or(p),
                denied.outcome(),
                why,
            );
        }
        Some(Reply::Now(denied.response()))
    }

    /// Run `job` on a reader, the request answered through its ticket (503 if no reader
    /// gets to it in time).
    /// `on_timeout` records a request no reader got to in time (answered 503 `busy` on
    /// the loop). A job that panics is answered 500 and its reader goes on.
    pub(super) fn defer(&self, ex: &Exchange<'_>, on_timeout: OnTimeout, job: Job1) -> Reply {
        let ticket = ex.defer_or(READ_WAIT, move || {
            let msg = "no reader got to this request in time; retry shortly";
            on_timeout(msg);
            refusal_response(503, "busy", msg)
        });
        let spare = ticket.clone();
        let run = move || {
            if catch_unwind(AssertUnwindSafe(|| job(ticket))).is_err() {
                spare.complete(refusal_response(500, "io_error", "the read failed unexpectedly"));
            }
        };
        match self.jobs.send(Box::new(run)) {
            Ok(()) => Reply::Later,
            Err(_) => Reply::Now(refusal_response(503, "busy", "the door is closing")),
        }
    }

    fn list_event(&self, outcome: &str, reason: Option<&str>) {
        let root = self.files.as_ref().map_or("", |f| f.root_written.as_str());
        list_refused(&self.shared, root, outcome, reason);
    }

    fn read_event(&self, path: &str, outcome: &str, reason: &str) {
        read_event(&self.shared, path, Err((outcome.into(), reason.into())));
    }

    fn list(&self, ex: &Exchange<'_>, plane: &FilesPlane) -> Reply {
        let (shared, plane) = (Arc::clone(&self.shared), plane.clone());
        let (late, root) = (Arc::clone(&self.shared), plane.root_written.clone());
        let on_timeout: OnTimeout = Box::new(move |why| list_refused(&late, &root, "busy", Some(why)));
        self.defer(ex, on_timeout, Box::new(move |ticket| {
            let symlinks = shared.symlinks();
            let walking = Walking::enter(&shared.listings);
            let entries = if walking.0 {
                open_root(&shared.work, &plane.root, symlinks).and_then(|root| match root {
                    None => Ok(Vec::new()),
                    Some(fd) => list::list(fd.as_fd(), symlinks, plane.max_bytes),
                })
            } else {
                Err(Refusal::Busy)
            };
            drop(walking);
            let generation = shared.tasks.generation();
            let class = shared.class.as_str();
            let mut fields = json!({
                "root": plane.root_written, "entry_count": 0, "total_bytes": 0,
                "generation": generation, "containment_achieved": class,
            });
            let resp = match entries {
                Ok(entries) => {
                    fields["entry_count"] = entries.len().into();
                    fields["total_bytes"] = entries.iter().fold(0u64, |n, e| n.saturating_add(e.size)).into();
                    fields["outcome"] = "ok".into();
                    fields["reason"] = Value::Null;
                    let listed: Vec<Value> = entries
                        .into_iter()
                        .map(|e| json!({"path": e.path, "size_bytes": e.size, "mtime_ms": e.mtime_ms, "sha256": e.sha256}))
                        .collect();
                    Response::json_value(
                        200,
                        &json!({
                            "root": plane.root_written, "mode": "read-only", "max_bytes": plane.max_bytes,
                            "generation": generation, "containment_achieved": class, "entries": listed,
                        }),
                    )
                }
                Err(r) => {
                    fields["outcome"] = r.code().into();
                    fields["reason"] = r.message().into();
                    refused(&r)
                }
            };
            shared.trace("resource_list", fields);
            ticket.complete(resp);
        }))
    }

    fn file(&self, ex: &Exchange<'_>, plane: &FilesPlane, raw: &str) -> Reply {
        let shown = path::decode(raw).unwrap_or_else(|_| raw.to_string());
        let rel = match path::request_path(raw) {
            Ok(p) => p,
            Err(r) => {
                self.read_event(&shown, r.code(), &r.message());
                return Reply::Now(refused(&r));
            }
        };
        let (shared, plane) = (Arc::clone(&self.shared), plane.clone());
        let (late, late_path) = (Arc::clone(&self.shared), shown.clone());
        let on_timeout: OnTimeout =
            Box::new(move |why| read_event(&late, &late_path, Err(("busy".into(), why.into()))));
        self.defer(
            ex,
            on_timeout,
            Box::new(move |ticket| {
                let (s1, s2, p1, p2) = (Arc::clone(&shared), Arc::clone(&shared), shown.clone(), shown);
                let root_written = plane.root_written.clone();
                let result = read(
                    &shared,
                    &plane.root,
                    plane.max_bytes,
                    &rel,
                    move |h| h.header("x-murmur-export-root", &root_written),
                    Box::new(move |o| read_event(&s1, &p1, o)),
                );
                answer(ticket, result, move |o| read_event(&s2, &p2, o));
            }),
        )
    }
}

/// A `resource_list` for a listing refused before it was walked.
fn list_refused(shared: &Shared, root: &str, outcome: &str, reason: Option<&str>) {
    shared.trace(
        "resource_list",
        json!({
            "root": root, "entry_count": 0, "total_bytes": 0,
            "generation": shared.tasks.generation(),
            "containment_achieved": shared.class.as_str(),
            "outcome": outcome, "reason": reason,
        }),
    );
}

fn read_event(shared: &Shared, path: &str, outcome: ReadOutcome) {
    let path = shown(path);
    let (bytes, sha, code, reason) = match outcome {
        Ok((n, sha)) => (Value::from(n), Value::from(sha), "ok".to_string(), Value::Null),
        Err((code, reason)) => (Value::Null, Value::Null, code, Value::from(reason)),
    };
    shared.trace(
        "resource_read",
        json!({
            "path": path, "outcome": code, "bytes": bytes, "sha256": sha,
            "generation": shared.tasks.generation(),
            "containment_achieved": shared.class.as_str(), "reason": reason,
        }),
    );
}

impl super::Route for Resources {
    fn answer(&self, req: &Request, ex: &Exchange<'_>) -> Option<Reply> {
        let p = req.path();
        if p != "/resources" && !p.starts_with("/resources/") {
            return None;
        }
        let is_peer = p == "/resources/peer" || p.starts_with("/resources/peer/");
        // The peer plane's credential is its handle; everything else here is the operator's.
        if !is_peer {
            if let Some(r) = self.denied(req, p) {
                return Some(r);
            }
        }
        if req.method != "GET" {
            let msg = format!(
                "{} is not allowed under /resources/; the only verb is GET",
                req.method
            );
            if is_peer {
                super::peer::method_event(&self.shared, p);
            } else if p == "/resources/files" {
                self.list_event("method_not_allowed", Some(&msg));
            } else {
                self.read_event(
                    p.strip_prefix("/resources/files/").unwrap_or(p),
                    "method_not_allowed",
                    &msg,
                );
            }
            return Some(Reply::Now(refusal_response(405, "method_not_allowed", &msg)));
        }
        if is_peer {
            return Some(super::peer::answer(
                self.peer.as_ref(),
                &self.shared,
                req,
                ex,
                |ex, on_timeout, job| self.defer(ex, on_timeout, job),
            ));
        }
        let Some(plane) = &self.files else {
            let msg = "this capsule declares no exports.files";
            if p == "/resources/files" {
                self.list_event("no_resource_plane", Some(msg));
            } else {
                self.read_event(
                    p.strip_prefix("/resources/files/").unwrap_or(p),
                    "no_resource_plane",
                    msg,
                );
            }
            return Some(Reply::Now(refusal_response(404, "no_resource_plane", msg)));
        };
        Some(if p == "/resources/files" {
            self.list(ex, plane)
        } else if let Some(rest) = p.strip_prefix("/resources/files/") {
            self.file(ex, plane, rest)
        } else {
            let r = Refusal::NotFound;
            self.read_event(p, r.code(), &r.message());
            Reply::Now(refused(&r))
        })
    }
}
