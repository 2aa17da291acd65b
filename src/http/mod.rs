//! The small HTTP/1.1 layer every listener in the project uses: the roost, the capsule's
//! A2A door and the `/resources/` planes.
//!
//! One thread runs a mio event loop ([`serve`]); a handler answers each request at once,
//! defers it with a [`Ticket`] that another thread completes (optionally with a fallback
//! answer made on the loop when the wait runs out), or opens a server-sent-event stream
//! whose chunks another thread pushes through a [`Stream`] while the loop writes keep-alive
//! comments. Every response closes its connection. [`client`] is the matching blocking client for the runtime's own calls.
//! [`guard`] keeps web pages out of every loopback listener (Host, Origin, content type).

pub mod client;
mod conn;
pub mod guard;
pub mod peer_account;
pub mod request;
pub mod response;
mod server;
pub mod tls;

pub use conn::{Body, BODY_CHUNK};
pub use peer_account::PeerAccounts;
pub use request::{Refusal, Request};
pub use response::Response;
pub use server::{serve, Controller, Exchange, Handler, Reply, Server, Stream, Ticket};

use std::time::Duration;

/// Per-server limits. The defaults are the project's: 16 KiB / 64 header fields, 1 MiB
/// body, 64 MiB of bodies buffered across all connections, 10 s to deliver a request, 1024
/// open connections, and the loopback guard on.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request head (request line, fields, blank line), bytes. Beyond: 431.
    pub max_head: usize,
    /// Most header fields. Beyond: 431.
    pub max_headers: usize,
    /// Largest body, bytes. Beyond: 413.
    pub max_body: usize,
    /// Time from accept until the whole request has arrived. Beyond: 408 and close.
    pub request_timeout: Duration,
    /// Time a deferred answer may take when the handler names none. Beyond: 503.
    pub defer_timeout: Duration,
    /// Time to hand a response to a client that reads slowly. Beyond: the connection drops.
    pub write_timeout: Duration,
    /// Most open connections that are not streams. A new one beyond this gets a 503 and is
    /// closed.
    pub max_connections: usize,
    /// Most connections held open as streams (the door's event streams, the roost's
    /// holds), counted apart from `max_connections`: streams never take the places of
    /// ordinary requests. A handler's stream beyond it is answered 503 instead (and its
    /// handle reads closed).
    pub max_streams: usize,
    /// Most request-body bytes buffered across all connections at once, so many slow
    /// uploads cannot pin `max_connections * max_body`. A connection whose bytes would take
    /// the total past it gets a 503 and is closed. Heads are not counted (each is bounded by
    /// `max_head`), so a bodiless request such as a health check is never refused by it.
    pub max_buffered: usize,
    /// Answer only requests addressed to this loopback listener and sent by no web page:
    /// `host` must be `127.0.0.1:P` or `localhost:P` (P the bound port) and there must be no
    /// `origin` (see [`guard`]). Checked on the head, before the body is read.
    pub loopback_only: bool,
    /// A stream that has written nothing for this long gets a keep-alive comment line.
    pub keepalive: Duration,
    /// Most unsent bytes a stream may hold for a client that does not read (checked before
    /// each chunk, so one chunk of any size fits); beyond it the connection is dropped.
    pub max_stream_backlog: usize,
    /// Most unsent response bytes held across all connections (responses and streams to
    /// clients that do not read); a connection that takes the total past it is dropped.
    pub max_unsent: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_head: 16 * 1024,
            max_headers: 64,
            max_body: 1024 * 1024,
            request_timeout: Duration::from_secs(10),
            defer_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(10),
            max_connections: 1024,
            max_streams: 1024,
            max_buffered: 64 * 1024 * 1024,
            loopback_only: true,
            keepalive: Duration::from_secs(3),
            max_stream_backlog: 1024 * 1024,
            max_unsent: 64 * 1024 * 1024,
        }
    }
}

/// Raise this process's soft limit on open descriptors toward `want` (never above the hard
/// limit) and return the soft limit now in force. A server that is to hold thousands of
/// connections needs this before it sets `max_connections`.
pub fn raise_fd_limit(want: u64) -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    let target = match lim.maximum {
        Some(max) => want.min(max),
        None => want,
    };
    if lim.current.is_some_and(|cur| cur < target) {
        lim.current = Some(target);
        let _ = setrlimit(Resource::Nofile, lim);
    }
    getrlimit(Resource::Nofile).current.unwrap_or(want)
}

/// The fewest file descriptors a `mur` session starts with: the door and its connections,
/// the records, the guest's async runtime, the warden's line, each child's pipes.
pub const DESCRIPTOR_FLOOR: u64 = 64;

/// Raise this process's descriptor limit as far as its hard limit allows (up to `want`),
/// then refuse (E-RUN-060) when it is still below [`DESCRIPTOR_FLOOR`]: a session that
/// would run out part-way fails now, naming the cause.
pub fn descriptor_floor(want: u64) -> Result<u64, crate::diag::Diagnostic> {
    let now = raise_fd_limit(want);
    if now < DESCRIPTOR_FLOOR {
        return Err(crate::diag::Diagnostic::new(
            crate::diag::code::RUN_DESCRIPTORS,
            "",
            format!(
                "only {now} file descriptors may be open (ulimit -n), and a session needs at least {DESCRIPTOR_FLOOR}: raise the limit (ulimit -n {DESCRIPTOR_FLOOR} or more)"
            ),
        ));
    }
    Ok(now)
}

/// Whether `e` is the process or the system running out of descriptors.
pub fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// Rule 3 of the [`guard`]: a body a route takes is `application/json`, else the 415.
pub fn require_json(req: &Request) -> Result<(), Response> {
    guard::require_json(&req.headers)
}
