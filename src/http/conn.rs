//! One connection's state machine: read the request, wait for the answer (or stream
//! chunks of it), write it, close.

use super::request::{Progress, Reader};
use super::{Limits, Request, Response};
use mio::net::TcpStream;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const INTERIM_CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
/// After the response, unread input is drained for at most this many bytes before closing,
/// so the kernel does not answer leftovers with a reset that destroys the response.
const LINGER_BYTES: usize = 64 * 1024;
/// Longest wait for the peer to close after the response is out.
const LINGER_TIME: Duration = Duration::from_secs(2);
/// The comment line a stream writes when it has been quiet for `Limits::keepalive`.
pub const KEEPALIVE: &[u8] = b": keep-alive\n\n";

/// The answer made on the loop when a deferred request's wait runs out.
pub type Fallback = Box<dyn FnOnce() -> Response + Send>;

/// At most this many body bytes are pulled from a [`Body`] at a time: the connection holds
/// one such chunk, whatever the body's length.
pub const BODY_CHUNK: usize = 128 * 1024;
/// Chunks pulled in one go before the loop turns to other connections (this one is
/// flushed again on the next turn).
const PULLS_PER_FLUSH: usize = 8;
/// A pulled body must go at this many bytes per second on average, after the write
/// timeout's grace, or its connection is closed: a client that trickles cannot hold a
/// body (and its file and slot) for hours.
const MIN_BODY_RATE: u64 = 64 * 1024;

/// A response body the loop pulls as the socket drains (a file served from its
/// descriptor), so a large body never sits in memory whole.
pub trait Body: Send {
    /// Append the next bytes, at most `max`, to `out`; `Ok(true)` once the whole body has
    /// been appended. An error closes the connection with nothing more written, so the
    /// client sees fewer bytes than the head announced.
    fn fill(&mut self, out: &mut Vec<u8>, max: usize) -> io::Result<bool>;
}

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the head and body.
    Reading,
    /// The handler deferred; waiting for its ticket.
    Waiting,
    /// Writing a streamed response's chunks as they come; the body ends when the stream
    /// does (the connection closes).
    Streaming,
    /// Writing the response.
    Writing,
    /// Response sent and write side shut; draining input until the peer closes.
    Lingering,
}

/// 503 for bytes that would take the server past `Limits::max_buffered`.
pub const BUSY: &str =
    "server busy: request bodies in flight have reached this server's buffer budget; retry shortly";

/// Request-body bytes held across every connection of one server, against
/// `Limits::max_buffered`. Each connection charges what its reader holds and gives it back
/// when the request completes, is refused, or the connection closes.
#[derive(Debug)]
pub struct Budget {
    pub used: usize,
    pub max: usize,
}

impl Budget {
    pub fn new(max: usize) -> Budget {
        Budget { used: 0, max }
    }
}

/// What the loop must do after an event on this connection.
pub enum Step {
    /// Nothing more for now.
    Idle,
    /// A request is ready for the handler.
    Dispatch(Request),
    /// The connection is finished; drop it.
    Close,
}

pub struct Conn {
    pub stream: TcpStream,
    /// The peer's address as `accept` returned it (no `getpeername` per request).
    pub peer: SocketAddr,
    pub generation: u64,
    pub phase: Phase,
    pub deadline: Instant,
    pub head_only: bool,
    write_timeout: Duration,
    reader: Reader,
    /// Body bytes this connection has charged to the server's [`Budget`].
    pub held: usize,
    out: Vec<u8>,
    sent: usize,
    drained: usize,
    /// What a deferred request answers when its wait runs out (else a 503).
    pub fallback: Option<Fallback>,
    /// A stream's "closed" flag, shared with its [`super::Stream`] handle.
    pub closed: Option<Arc<AtomicBool>>,
    /// A stream's bytes on their way from its handle, shared with it.
    pub in_flight: Option<Arc<std::sync::atomic::AtomicUsize>>,
    /// It became a stream and is counted against `Limits::max_streams` until it closes.
    pub counted_stream: bool,
    keepalive: Duration,
    max_backlog: usize,
    /// A keep-alive found bytes still unsent and none taken since the look before.
    stalled: bool,
    /// Bytes written to the socket in all, and at the last keep-alive look.
    written: u64,
    written_at_look: u64,
    /// Unsent response bytes this connection has charged to the server's total.
    pub queued: usize,
    /// The rest of a pulled response body (see [`Body`]).
    body: Option<Box<dyn Body>>,
    /// When a pulled body must be out, at the latest.
    body_until: Option<Instant>,
    /// The last flush stopped at [`PULLS_PER_FLUSH`] with the socket still writable: the
    /// loop flushes this connection again on its next turn.
    pub more: bool,
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(c) = &self.closed {
            c.store(true, Ordering::SeqCst);
        }
    }
}

impl Conn {
    /// A connection accepted on a listener bound to `port` (for the loopback guard).
    pub fn new(
        (stream, peer): (TcpStream, SocketAddr),
        generation: u64,
        limits: &Limits,
        port: u16,
        now: Instant,
    ) -> Conn {
        Conn {
            stream,
            peer,
            generation,
            phase: Phase::Reading,
            deadline: now + limits.request_timeout,
            head_only: false,
            write_timeout: limits.write_timeout,
            reader: Reader::new(limits, port),
            held: 0,
            out: Vec::new(),
            sent: 0,
            drained: 0,
            fallback: None,
            closed: None,
            in_flight: None,
            counted_stream: false,
            keepalive: limits.keepalive,
            max_backlog: limits.max_stream_backlog,
            stalled: false,
            written: 0,
            written_at_look: 0,
            queued: 0,
            body: None,
            body_until: None,
            more: false,
        }
    }

    /// Response bytes written to this connection but not yet taken by the client.
    pub fn unsent(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Start a streamed response with `head`; chunks follow through [`Conn::push`].
    pub fn start_stream(&mut self, head: &Response, closed: Arc<AtomicBool>, now: Instant) -> Step {
        self.out.extend_from_slice(&head.encode_stream_head());
        self.closed = Some(closed);
        self.phase = Phase::Streaming;
        self.deadline = now + self.keepalive;
        self.flush()
    }

    /// Queue a chunk of a stream. A client that has left more than the backlog cap unread is
    /// dropped.
    pub fn push(&mut self, chunk: &[u8], now: Instant) -> Step {
        if self.phase != Phase::Streaming {
            return Step::Idle;
        }
        // Behind means more than the cap already waiting: a chunk is never refused for its
        // own size, so a client that reads gets an answer of any size whole.
        let waiting = self.out.len() - self.sent;
        if waiting > self.max_backlog {
            return Step::Close;
        }
        self.out.extend_from_slice(chunk);
        self.deadline = now + self.keepalive;
        self.flush()
    }

    /// The stream is over: write what is queued, then close.
    pub fn end_stream(&mut self, now: Instant) -> Step {
        if self.phase != Phase::Streaming {
            return Step::Idle;
        }
        self.phase = Phase::Writing;
        self.deadline = now + self.write_timeout;
        self.flush()
    }

    /// A stream's quiet period ran out: write a keep-alive comment, unless the client has
    /// not read the previous one either (then it is dropped).
    pub fn keep_alive(&mut self, now: Instant) -> Step {
        if self.sent < self.out.len() {
            // Behind, but reading: the client took bytes since the last look.
            let progressed = self.written != self.written_at_look;
            self.written_at_look = self.written;
            if self.stalled && !progressed {
                return Step::Close;
            }
            self.stalled = !progressed;
            self.deadline = now + self.keepalive;
            return self.flush();
        }
        self.stalled = false;
        self.push(KEEPALIVE, now)
    }

    /// Read what the socket has and advance the reader, charging the body bytes it holds
    /// to `budget`; bytes that would pass the budget get a 503 and the connection closes.
    pub fn on_readable(&mut self, budget: &mut Budget) -> Step {
        if self.phase != Phase::Reading {
            return self.drain();
        }
        let mut chunk = [0u8; 8192];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Step::Close,
                Ok(n) => {
                    let progress = self.reader.feed(&chunk[..n]);
                    if !self.charge(budget) {
                        self.release(budget);
                        return self.respond(&Response::error(503, BUSY), Instant::now());
                    }
                    match progress {
                        Progress::NeedMore => {}
                        Progress::SendContinue => {
                            self.out.extend_from_slice(INTERIM_CONTINUE);
                            if let Step::Close = self.flush() {
                                return Step::Close;
                            }
                        }
                        Progress::Done(req) => {
                            self.head_only = req.method == "HEAD";
                            return Step::Dispatch(req);
                        }
                        Progress::Refused(refusal) => {
                            let resp = Response::error(refusal.status(), refusal.reason());
                            return self.respond(&resp, Instant::now());
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Idle,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Step::Close,
            }
        }
    }

    /// Bring this connection's charge up to date with what its reader holds; false when
    /// that takes the server past its budget.
    fn charge(&mut self, budget: &mut Budget) -> bool {
        let now = self.reader.body_held();
        budget.used = budget.used.saturating_sub(self.held).saturating_add(now);
        self.held = now;
        budget.used <= budget.max
    }

    /// Drop the request being read and give its bytes back to `budget`. The loop calls this
    /// before it answers a connection it cuts (408) and when it closes one.
    pub fn release(&mut self, budget: &mut Budget) {
        budget.used = budget.used.saturating_sub(self.held);
        self.held = 0;
        if self.phase == Phase::Reading {
            self.reader.abandon();
        }
    }

    /// Read and discard input that arrives after the request: ignored while the answer is
    /// pending or being written, counted toward the linger cap after it.
    fn drain(&mut self) -> Step {
        let mut chunk = [0u8; 8192];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Step::Close,
                Ok(n) => {
                    if self.phase == Phase::Lingering {
                        self.drained += n;
                        if self.drained > LINGER_BYTES {
                            return Step::Close;
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Idle,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Step::Close,
            }
        }
    }

    /// Queue `resp` after anything still unsent (an interim 100) and start writing, with
    /// the write deadline counted from `now`.
    pub fn respond(&mut self, resp: &Response, now: Instant) -> Step {
        self.out.extend_from_slice(&resp.encode(self.head_only));
        self.phase = Phase::Writing;
        self.deadline = now + self.write_timeout;
        self.flush()
    }

    /// Queue the head of a response whose `len` body bytes `body` makes as the socket
    /// drains, and start writing.
    pub fn respond_body(&mut self, head: &Response, len: u64, body: Box<dyn Body>, now: Instant) -> Step {
        self.out.extend_from_slice(&head.encode_head(len));
        if !self.head_only {
            self.body = Some(body);
        }
        self.phase = Phase::Writing;
        self.deadline = now + self.write_timeout;
        let rate = Duration::from_secs(len / MIN_BODY_RATE);
        self.body_until = Some(self.deadline + rate);
        self.flush()
    }

    /// The write deadline passed. A pulled body whose client has taken bytes since (the
    /// socket takes more now, even if it never said so: the kernel reports room only once
    /// a third of its buffer is free) goes on, within the body's own deadline; anything
    /// else is closed.
    pub fn write_deadline(&mut self, now: Instant) -> Step {
        let Some(until) = self.body_until else {
            return Step::Close;
        };
        let before = self.written;
        if now >= until {
            return Step::Close;
        }
        let step = self.flush();
        if self.written == before {
            return Step::Close;
        }
        step
    }

    /// Write as much as the socket takes, pulling a body's next chunk each time the last is
    /// out; move on to lingering when the response is out.
    pub fn flush(&mut self) -> Step {
        self.more = false;
        let mut pulls = 0;
        loop {
            while self.sent < self.out.len() {
                match self.stream.write(&self.out[self.sent..]) {
                    Ok(0) => return Step::Close,
                    Ok(n) => {
                        self.sent += n;
                        self.written += n as u64;
                        // A body's client that keeps reading keeps its connection, up
                        // to the body's own deadline.
                        if let Some(until) = self.body_until {
                            self.deadline = (Instant::now() + self.write_timeout).min(until);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Idle,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return Step::Close,
                }
            }
            let Some(body) = self.body.as_mut() else {
                break;
            };
            if pulls == PULLS_PER_FLUSH {
                self.more = true;
                return Step::Idle;
            }
            pulls += 1;
            self.out.clear();
            self.sent = 0;
            match body.fill(&mut self.out, BODY_CHUNK) {
                Ok(false) => {}
                Ok(true) => self.body = None,
                Err(_) => {
                    self.body = None;
                    return Step::Close;
                }
            }
        }
        if self.phase == Phase::Streaming {
            self.out = Vec::new();
            self.sent = 0;
            return Step::Idle;
        }
        if self.phase == Phase::Writing {
            self.out = Vec::new();
            self.sent = 0;
            // Nothing unread: closing now sends a plain FIN, and the peer (told
            // `connection: close`) sends nothing more. Unread bytes would turn the close
            // into a reset that can destroy the response, so only then linger.
            if self.reader.is_clean() && self.nothing_pending() {
                return Step::Close;
            }
            if self.stream.shutdown(Shutdown::Write).is_err() {
                return Step::Close;
            }
            self.phase = Phase::Lingering;
            self.deadline = self.deadline.min(Instant::now() + LINGER_TIME);
            // Drain whatever is already waiting; the peer's close ends the connection.
            return self.drain();
        }
        Step::Idle
    }
}

impl Conn {
    /// Whether the socket has no input waiting (a peek that would block).
    fn nothing_pending(&self) -> bool {
        let mut one = [0u8; 1];
        matches!(self.stream.peek(&mut one), Err(e) if e.kind() == ErrorKind::WouldBlock)
    }
}

/// Answer a connection accepted beyond the cap: best-effort 503, then close.
pub fn refuse_over_capacity(mut stream: TcpStream) -> io::Result<()> {
    let resp = Response::error(503, "too many connections");
    stream.write_all(&resp.encode(false))?;
    stream.shutdown(Shutdown::Write)?;
    let mut sink = [0u8; 4096];
    for _ in 0..16 {
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    Ok(())
}
