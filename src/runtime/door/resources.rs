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

use super::peer::PeerPlane;
use super::tasks::Tasks;
use crate::containment::class::Class;
use crate::fsx::Dir;
use crate::http::{Exchange, Reply, Request, Response, Ticket};
use crate::resources::body::{self, FileBody, OnEnd, Served};
use crate::resources::open::{open_file, open_root, Ident, Opened};
use crate::resources::{list, path, Refusal, Symlinks};
use crate::runtime::trace::Trace;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::os::fd::AsFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Threads that open, list and hash.
const READERS: usize = 4;
/// Listings walked at once: the other readers stay free for reads and redeems.
const MAX_LISTINGS: usize = READERS / 2;
/// Large-file bodies being sent at once.
pub const MAX_BODIES: usize = 64;
/// How long a read may wait for a reader and a body slot before it is answered 503.
const READ_WAIT: Duration = Duration::from_secs(60);
/// Cached digests, keyed by inode identity, size and timestamps; cleared when full.
const MAX_CACHED: usize = 4096;

/// `exports.files` as the door serves it.
#[derive(Debug, Clone)]
pub struct FilesPlane {
    /// Normalised root, relative to the accessible workdir.
    pub root: String,
    /// The root as written, echoed in `x-murmur-export-root`.
    pub root_written: String,
    pub max_bytes: u64,
}

/// What every reader thread shares.
pub struct Shared {
    /// The accessible workdir (the directory the agent's tools see as `.`).
    pub work: Dir,
    pub class: Class,
    pub tasks: Arc<Tasks>,
    trace: Option<Mutex<Trace>>,
    cache: Mutex<HashMap<Ident, [u8; 32]>>,
    bodies: Permits,
    /// Listings being walked (each hashes every file it lists).
    listings: std::sync::atomic::AtomicUsize,
}

impl Shared {
    pub fn new(work: Dir, class: Class, tasks: Arc<Tasks>, trace: Option<Trace>) -> Shared {
        Shared {
            work,
            class,
            tasks,
            trace: trace.map(Mutex::new),
            cache: Mutex::new(HashMap::new()),
            bodies: Permits::new(MAX_BODIES),
            listings: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub fn symlinks(&self) -> Symlinks {
        Symlinks::for_class(self.class)
    }

    /// Append one trace event; a failed write is not the reader's to report.
    pub fn trace(&self, event: &str, fields: Value) {
        if let Some(t) = &self.trace {
            if let Ok(mut t) = t.lock() {
                let _ = t.event(event, fields);
            }
        }
    }

    /// The head every successful read carries (the plane adds its own header).
    fn head(&self, etag_hex: &str, mtime_ms: u64) -> Response {
        Response::new(200)
            .header("content-type", "application/octet-stream")
            .header("etag", &format!("\"sha256:{etag_hex}\""))
            .header("x-murmur-mtime-ms", &mtime_ms.to_string())
            .header("x-murmur-generation", &self.tasks.generation().to_string())
            .header("x-murmur-containment", self.class.as_str())
    }
}

/// A counting semaphore: large-file bodies in flight.
struct Permits {
    free: Mutex<usize>,
}

/// One body slot, given back when dropped.
pub struct Permit(Arc<Shared>);

impl Permits {
    fn new(n: usize) -> Permits {
        Permits { free: Mutex::new(n) }
    }
}

/// A body slot, or `busy` when all are taken: a reader never waits for one, so listings,
/// small files and redeems are never queued behind large bodies.
fn try_acquire(shared: &Arc<Shared>) -> Result<Permit, Refusal> {
    let p = &shared.bodies;
    let mut free = p.free.lock().unwrap_or_else(|e| e.into_inner());
    if *free == 0 {
        return Err(Refusal::Busy);
    }
    *free -= 1;
    Ok(Permit(Arc::clone(shared)))
}

impl Drop for Permit {
    fn drop(&mut self) {
        *self.0.bodies.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    }
}

/// A refusal as the wire carries it: `{"error","message"}` with the row's status.
pub fn refusal_response(status: u16, code: &str, message: &str) -> Response {
    let resp = Response::json_value(status, &json!({"error": code, "message": message}));
    if status == 405 {
        resp.header("allow", "GET")
    } else {
        resp
    }
}

fn refused(r: &Refusal) -> Response {
    refusal_response(r.status(), r.code(), &r.message())
}

/// What a successful read hands back: the response (head and body) to send, and how it
/// ended once sent.
pub enum Read {
    /// A small file, read whole: the response and its `(bytes, sha256)`.
    Whole(Response, u64, String),
    /// A large file: the head, its length and the body the loop pulls.
    Pulled(Response, u64, FileBody),
}

/// What a read reports to its trace when it ends: bytes and sha256 on success.
pub type Outcome = Result<(u64, String), (String, String)>;

/// Open `rel` beneath `root` and make its response, `headers` adding the plane's own
/// fields to the common head. `on_end` learns how it ended (for a pulled body, once the
/// loop is done with it).
pub fn read(
    shared: &Arc<Shared>,
    root: &str,
    max_bytes: u64,
    rel: &str,
    headers: impl FnOnce(Response) -> Response,
    on_end: Box<dyn FnOnce(Outcome) + Send>,
) -> Result<Read, Refusal> {
    let symlinks = shared.symlinks();
    let dir = open_root(&shared.work, root, symlinks)?.ok_or(Refusal::NotFound)?;
    let Opened {
        file,
        size,
        mtime_ms,
        ident,
    } = open_file(dir.as_fd(), rel, symlinks, max_bytes)?;
    if size <= crate::http::BODY_CHUNK as u64 {
        let bytes = body::read_small(&file, size)?;
        let sha = body::hex(&sha2::Sha256::digest_of(&bytes));
        let n = bytes.len() as u64;
        let resp = headers(shared.head(&sha, mtime_ms)).body(bytes);
        return Ok(Read::Whole(resp, n, sha));
    }
    let permit = try_acquire(shared)?;
    let cached = shared.cache.lock().ok().and_then(|c| c.get(&ident).copied());
    let expected = match cached {
        Some(d) => d,
        None => {
            let d = body::hash_prefix(&file, size)?;
            if let Ok(mut c) = shared.cache.lock() {
                if c.len() >= MAX_CACHED {
                    c.clear();
                }
                c.insert(ident, d);
            }
            d
        }
    };
    let sha = body::hex(&expected);
    let head = headers(shared.head(&sha, mtime_ms));
    let cache_owner = Arc::clone(shared);
    let end: OnEnd = Box::new(move |how: Served| {
        let _permit = permit;
        let outcome = match how {
            Served::Whole => Ok((size, sha)),
            Served::Changed => {
                if let Ok(mut c) = cache_owner.cache.lock() {
                    c.remove(&ident);
                }
                Err((
                    "io_error".into(),
                    "the file changed while it was sent; the body was cut".into(),
                ))
            }
            Served::Failed(e) => Err(("io_error".into(), format!("the read failed mid-body: {e}"))),
            Served::Gone(n) => Err((
                "io_error".into(),
                format!("the client left after {n} of {size} bytes"),
            )),
        };
        on_end(outcome);
    });
    Ok(Read::Pulled(head, size, FileBody::new(file, size, expected, end)))
}

/// Send a finished read through `ticket`, or its refusal; `report` records the outcome.
pub fn answer(ticket: Ticket, result: Result<Read, Refusal>, report: impl FnOnce(Outcome)) {
    match result {
        Ok(Read::Whole(resp, n, sha)) => {
            report(Ok((n, sha)));
            ticket.complete(resp);
        }
        Ok(Read::Pulled(head, len, body)) => {
            ticket.complete_body(head, len, Box::new(body));
        }
        Err(r) => {
            report(Err((r.code().to_string(), r.message())));
            ticket.complete(refused(&r));
        }
    }
}

/// One listing's place among [`MAX_LISTINGS`]; `.0` is false when there was none. Given
/// back when dropped, however the walk ends.
struct Walking<'a>(bool, &'a std::sync::atomic::AtomicUsize);

impl<'a> Walking<'a> {
    fn enter(count: &'a std::sync::atomic::AtomicUsize) -> Walking<'a> {
        Walking(count.fetch_add(1, Ordering::SeqCst) < MAX_LISTINGS, count)
    }
}

impl Drop for Walking<'_> {
    fn drop(&mut self) {
        self.1.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A little helper so the digest of a buffer reads as one call.
trait DigestOf {
    fn digest_of(bytes: &[u8]) -> [u8; 32];
}

impl DigestOf for sha2::Sha256 {
    fn digest_of(bytes: &[u8]) -> [u8; 32] {
        use sha2::Digest;
        sha2::Sha256::digest(bytes).into()
    }
}

type Job = Box<dyn FnOnce() + Send>;
/// A job answering one request through its ticket.
pub(super) type Job1 = Box<dyn FnOnce(Ticket) + Send>;
/// What records a request that timed out waiting for a reader.
pub(super) type OnTimeout = Box<dyn FnOnce(&str) + Send>;

/// The reader threads; they end when the route (the jobs' only sender) is dropped.
fn start_readers() -> Sender<Job> {
    let (tx, rx) = channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    for i in 0..READERS {
        let rx: Arc<Mutex<Receiver<Job>>> = Arc::clone(&rx);
        let _ = std::thread::Builder::new()
            .name(format!("door-reader-{i}"))
            .spawn(move || loop {
                let job = match rx.lock() {
                    Ok(r) => r.recv(),
                    Err(_) => return,
                };
                match job {
                    Ok(job) => job(),
                    Err(_) => return,
                }
            });
    }
    tx
}

/// The `/resources/` route.
pub struct Resources {
    files: Option<FilesPlane>,
    peer: Option<PeerPlane>,
    shared: Arc<Shared>,
    jobs: Sender<Job>,
}

impl Resources {
    pub fn new(files: Option<FilesPlane>, peer: Option<PeerPlane>, shared: Shared) -> Resources {
        Resources {
            files,
            peer,
            shared: Arc::new(shared),
            jobs: start_readers(),
        }
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

/// Text a client chose, as a trace records it: at most [`SHOWN_MAX`] bytes, any peer
/// handle in it written as its id.
pub fn shown(text: &str) -> String {
    let mut end = text.len().min(SHOWN_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    crate::resources::peer::redact(&text[..end])
}

/// The longest client-chosen text a trace line carries.
const SHOWN_MAX: usize = 1024;

fn read_event(shared: &Shared, path: &str, outcome: Outcome) {
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
