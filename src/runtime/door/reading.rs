//! The one-open file reads both `/resources/` planes share: the state every reader thread
//! shares (the held workdir, the digest cache, the body slots), the small pool of reader
//! threads, a read by path beneath an export root ([`read`]) and its answer ([`answer`]).

use super::tasks::Tasks;
use crate::containment::class::Class;
use crate::fsx::Dir;
use crate::http::{Response, Ticket};
use crate::resources::body::{self, FileBody, OnEnd, Served};
use crate::resources::open::{open_file, open_root, Ident, Opened};
use crate::resources::{Refusal, Symlinks};
use crate::runtime::trace::Trace;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::os::fd::AsFd;
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
pub const READ_WAIT: Duration = Duration::from_secs(60);
/// Cached digests, keyed by inode identity, size and timestamps; cleared when full.
const MAX_CACHED: usize = 4096;

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
    pub listings: std::sync::atomic::AtomicUsize,
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

pub fn refused(r: &Refusal) -> Response {
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
pub type ReadOutcome = Result<(u64, String), (String, String)>;

/// Open `rel` beneath `root` and make its response, `headers` adding the plane's own
/// fields to the common head. `on_end` learns how it ended (for a pulled body, once the
/// loop is done with it).
pub fn read(
    shared: &Arc<Shared>,
    root: &str,
    max_bytes: u64,
    rel: &str,
    headers: impl FnOnce(Response) -> Response,
    on_end: Box<dyn FnOnce(ReadOutcome) + Send>,
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
pub fn answer(ticket: Ticket, result: Result<Read, Refusal>, report: impl FnOnce(ReadOutcome)) {
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
pub struct Walking<'a>(pub bool, &'a std::sync::atomic::AtomicUsize);

impl<'a> Walking<'a> {
    pub fn enter(count: &'a std::sync::atomic::AtomicUsize) -> Walking<'a> {
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

pub type Job = Box<dyn FnOnce() + Send>;
/// A job answering one request through its ticket.
pub type Job1 = Box<dyn FnOnce(Ticket) + Send>;
/// What records a request that timed out waiting for a reader.
pub type OnTimeout = Box<dyn FnOnce(&str) + Send>;

/// The reader threads; they end when the route (the jobs' only sender) is dropped.
pub fn start_readers() -> Sender<Job> {
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
