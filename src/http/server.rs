//! The event loop: accepts, drives each connection's state machine, runs the handler, and
//! completes deferred answers and stream chunks that other threads send back through a
//! channel and a waker.

use super::conn::{refuse_over_capacity, Body, Budget, Conn, Fallback, Phase, Step};
use super::{Limits, Request, Response};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token, Waker};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
/// How long accepting pauses when the process is out of descriptors.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// What a handler does with a request.
pub enum Reply {
    /// Answer now.
    Now(Response),
    /// Answer later through the [`Ticket`] from [`Exchange::defer`]. Without one, or if it is
    /// never completed, the client gets a 503 (or the fallback of [`Exchange::defer_or`]) at
    /// the deadline.
    Later,
    /// Start a streamed response with this head (its body is ignored); chunks follow through
    /// the [`Stream`] from [`Exchange::stream`].
    Stream(Response),
}

impl From<Response> for Reply {
    fn from(resp: Response) -> Reply {
        Reply::Now(resp)
    }
}

/// Answers requests. Runs on the loop thread, so it must not block: work that blocks goes to
/// another thread through [`Exchange::defer`].
pub trait Handler {
    /// Answer one request.
    fn handle(&mut self, req: &Request, ex: &Exchange<'_>) -> Reply;
}

impl<F: FnMut(&Request, &Exchange<'_>) -> Reply> Handler for F {
    fn handle(&mut self, req: &Request, ex: &Exchange<'_>) -> Reply {
        self(req, ex)
    }
}

enum Delivery {
    Answer(Response),
    /// A head and the body the loop pulls after it.
    Body(Response, u64, Box<dyn Body>),
    Chunk(Vec<u8>),
    End,
    /// The stream was refused a chunk (its client is too far behind): close at once.
    Abort,
}

struct Completion {
    slot: usize,
    generation: u64,
    what: Delivery,
}

/// The context of one request: who sent it, and how to answer it later.
pub struct Exchange<'a> {
    slot: usize,
    generation: u64,
    peer: Option<SocketAddr>,
    /// The listener's address: the server's end of every connection it accepted.
    local: Option<SocketAddr>,
    tx: &'a Sender<Completion>,
    waker: &'a Arc<Waker>,
    deferred: Cell<Option<Duration>>,
    fallback: Cell<Option<Fallback>>,
    closed: Cell<Option<(Arc<AtomicBool>, Arc<AtomicUsize>)>>,
    /// Stream bytes sent into the channel and not yet taken by the loop, server-wide.
    in_flight: &'a Arc<AtomicUsize>,
    limits: &'a super::Limits,
}

impl Exchange<'_> {
    /// The client's address.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// The server's end of the connection (the listener's address).
    pub fn local(&self) -> Option<SocketAddr> {
        self.local
    }

    /// Defer this request for at most `timeout`; return [`Reply::Later`] and complete the
    /// ticket from any thread.
    pub fn defer(&self, timeout: Duration) -> Ticket {
        self.deferred.set(Some(timeout));
        Ticket {
            slot: self.slot,
            generation: self.generation,
            tx: self.tx.clone(),
            waker: Arc::clone(self.waker),
        }
    }

    /// [`Exchange::defer`], and when `timeout` passes without an answer the loop answers
    /// with what `fallback` makes then (run on the loop thread: it must not block).
    pub fn defer_or(
        &self,
        timeout: Duration,
        fallback: impl FnOnce() -> Response + Send + 'static,
    ) -> Ticket {
        self.fallback.set(Some(Box::new(fallback)));
        self.defer(timeout)
    }

    /// A handle to push the chunks of a streamed response from any thread; return
    /// [`Reply::Stream`] with the head.
    pub fn stream(&self) -> Stream {
        let closed = Arc::new(AtomicBool::new(false));
        let mine = Arc::new(AtomicUsize::new(0));
        self.closed.set(Some((Arc::clone(&closed), Arc::clone(&mine))));
        Stream {
            slot: self.slot,
            generation: self.generation,
            tx: self.tx.clone(),
            waker: Arc::clone(self.waker),
            closed,
            mine,
            all: Arc::clone(self.in_flight),
            max_mine: self.limits.max_stream_backlog.saturating_mul(IN_FLIGHT_FACTOR),
            max_all: self.limits.max_unsent,
        }
    }
}

/// A stream may have this many times `Limits::max_stream_backlog` on its way from its
/// handle to the loop: bytes the loop has not picked up yet are no sign of a slow client
/// (an answer and the final status sent back to back), a backlog in the connection is.
const IN_FLIGHT_FACTOR: usize = 8;

/// The sending end of one streamed response. `Send`; each call wakes the loop.
pub struct Stream {
    slot: usize,
    generation: u64,
    tx: Sender<Completion>,
    waker: Arc<Waker>,
    closed: Arc<AtomicBool>,
    /// This stream's bytes on their way to the loop, and every stream's.
    mine: Arc<AtomicUsize>,
    all: Arc<AtomicUsize>,
    max_mine: usize,
    max_all: usize,
}

impl Stream {
    fn deliver(&self, what: Delivery) -> bool {
        if self.is_closed() {
            return false;
        }
        let c = Completion {
            slot: self.slot,
            generation: self.generation,
            what,
        };
        self.tx.send(c).is_ok() && self.waker.wake().is_ok()
    }

    /// Queue `chunk`; false once the connection is gone.
    pub fn send(&self, chunk: Vec<u8>) -> bool {
        let len = chunk.len();
        self.send_with(len, || chunk)
    }

    /// Queue the `len` bytes `build` makes, building them only if there is room: a stream
    /// with more than 8 × `Limits::max_stream_backlog` already on its way to the loop, or
    /// whose bytes would take every stream's on their way past `Limits::max_unsent` (unless
    /// none are), is closed instead. False when nothing was queued.
    pub fn send_with(&self, len: usize, build: impl FnOnce() -> Vec<u8>) -> bool {
        if self.is_closed() {
            return false;
        }
        // Behind means more than the cap already on its way: a frame is never refused
        // for its own size, so a client that keeps up gets an answer of any size whole.
        let mine = self.mine.load(Ordering::SeqCst);
        let all = self.all.fetch_add(len, Ordering::SeqCst);
        if mine > self.max_mine || (all > 0 && all + len > self.max_all) {
            self.all.fetch_sub(len, Ordering::SeqCst);
            self.abort();
            return false;
        }
        self.mine.fetch_add(len, Ordering::SeqCst);
        let c = Completion {
            slot: self.slot,
            generation: self.generation,
            what: Delivery::Chunk(build()),
        };
        if self.tx.send(c).is_err() {
            // The loop is gone: nothing will take these bytes off the count.
            self.all.fetch_sub(len, Ordering::SeqCst);
            return false;
        }
        let _ = self.waker.wake();
        true
    }

    fn abort(&self) {
        if !self.closed.swap(true, Ordering::SeqCst) {
            let c = Completion {
                slot: self.slot,
                generation: self.generation,
                what: Delivery::Abort,
            };
            let _ = self.tx.send(c).is_ok() && self.waker.wake().is_ok();
        }
    }

    /// End the response: what is queued is written, then the connection closes.
    pub fn end(self) {
        self.deliver(Delivery::End);
    }

    /// Whether the connection has closed (the client left, or the stream ended).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

/// A promise to answer one deferred request. `Send`; completing it wakes the loop. A
/// clone answers the same request: the first answer to arrive is sent, later ones dropped.
#[derive(Clone)]
pub struct Ticket {
    slot: usize,
    generation: u64,
    tx: Sender<Completion>,
    waker: Arc<Waker>,
}

impl Ticket {
    /// Send the answer. Returns false if the server is gone; an answer that arrives after
    /// the deadline (when the client already got its 503) is dropped by the loop.
    pub fn complete(self, resp: Response) -> bool {
        let sent = self
            .tx
            .send(Completion {
                slot: self.slot,
                generation: self.generation,
                what: Delivery::Answer(resp),
            })
            .is_ok();
        sent && self.waker.wake().is_ok()
    }
}

impl Ticket {
    /// Answer with `head` and a body of `len` bytes that the loop pulls from `body` as the
    /// client reads (see [`Body`]). False if the server is gone.
    pub fn complete_body(self, head: Response, len: u64, body: Box<dyn Body>) -> bool {
        let sent = self
            .tx
            .send(Completion {
                slot: self.slot,
                generation: self.generation,
                what: Delivery::Body(head, len, body),
            })
            .is_ok();
        sent && self.waker.wake().is_ok()
    }
}

/// A handle that stops the server from another thread.
#[derive(Clone)]
pub struct Controller {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    finish: Arc<Mutex<Option<Instant>>>,
}

impl Controller {
    /// Ask the loop to return; open connections are dropped.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
    }

    /// Ask the loop to finish within `grace`: answers and stream chunks already sent are
    /// delivered, no new connection is accepted, a request still being read is dropped, a
    /// deferred one gets its fallback (or a 503) and a stream ends; the loop returns once
    /// every connection is closed or `grace` has passed.
    pub fn finish(&self, grace: Duration) {
        if let Ok(mut f) = self.finish.lock() {
            f.get_or_insert(Instant::now() + grace);
        }
        let _ = self.waker.wake();
    }
}

/// A bound server, not yet running.
pub struct Server {
    poll: Poll,
    listener: TcpListener,
    /// The bound port, which the loopback guard expects in `host`.
    port: u16,
    /// The bound address (the server's end of each connection, unless it is a wildcard).
    local: Option<SocketAddr>,
    limits: Limits,
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    finish: Arc<Mutex<Option<Instant>>>,
    tx: Sender<Completion>,
    rx: Receiver<Completion>,
    in_flight: Arc<AtomicUsize>,
}

/// Run `handler` on `listener` with `limits` until an I/O error of the poller itself.
pub fn serve<H: Handler>(listener: std::net::TcpListener, limits: Limits, handler: H) -> io::Result<()> {
    Server::bind(listener, limits)?.run(handler)
}

impl Server {
    /// Take over `listener` (made non-blocking here).
    pub fn bind(listener: std::net::TcpListener, limits: Limits) -> io::Result<Server> {
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        let port = bound.port();
        let local = (!bound.ip().is_unspecified()).then_some(bound);
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (tx, rx) = channel();
        Ok(Server {
            poll,
            listener,
            port,
            local,
            limits,
            waker,
            stop: Arc::new(AtomicBool::new(false)),
            finish: Arc::new(Mutex::new(None)),
            in_flight: Arc::new(AtomicUsize::new(0)),
            tx,
            rx,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle to stop the loop from another thread.
    pub fn controller(&self) -> Controller {
        Controller {
            waker: Arc::clone(&self.waker),
            stop: Arc::clone(&self.stop),
            finish: Arc::clone(&self.finish),
        }
    }

    /// Serve until stopped.
    pub fn run<H: Handler>(mut self, mut handler: H) -> io::Result<()> {
        let mut state = Loop::new(self.limits.max_buffered);
        let mut events = Events::with_capacity(1024);
        let mut finishing: Option<Instant> = None;
        while !self.stop.load(Ordering::SeqCst) {
            if finishing.is_none() {
                finishing = self.finish.lock().ok().and_then(|f| *f);
                if let Some(until) = finishing {
                    self.complete_deferred(&mut state);
                    self.wind_down(&mut state, until);
                }
            }
            if let Some(until) = finishing {
                if state.open == 0 || Instant::now() >= until {
                    break;
                }
            }
            let timeout = if state.again.is_empty() {
                state
                    .next_wakeup()
                    .map(|at| at.saturating_duration_since(Instant::now()))
            } else {
                Some(Duration::ZERO)
            };
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER if finishing.is_some() => {}
                    LISTENER => self.accept_all(&mut state),
                    WAKER => self.complete_deferred(&mut state),
                    Token(slot) => {
                        let Some(conn) = state.conns.get_mut(slot).and_then(Option::as_mut) else {
                            continue;
                        };
                        let before = conn.deadline;
                        let mut step = Step::Idle;
                        if event.is_writable() || event.is_write_closed() {
                            step = conn.flush();
                        }
                        if !matches!(step, Step::Close) && (event.is_readable() || event.is_read_closed()) {
                            step = conn.on_readable(&mut state.budget);
                        }
                        self.after(&mut state, slot, step, before, &mut handler);
                    }
                }
            }
            // Bodies that stopped at their pull cap with room left: another turn each.
            for (slot, generation) in std::mem::take(&mut state.again) {
                let Some(conn) = state.conns.get_mut(slot).and_then(Option::as_mut) else {
                    continue;
                };
                if conn.generation != generation || !conn.more {
                    continue;
                }
                let before = conn.deadline;
                let step = conn.flush();
                self.settle(&mut state, slot, step, before);
            }
            self.expire(&mut state);
            state.compact_timers();
            if finishing.is_none() && state.accept_paused_until.is_some_and(|t| Instant::now() >= t) {
                state.accept_paused_until = None;
                self.accept_all(&mut state);
            }
        }
        Ok(())
    }

    fn accept_all(&self, state: &mut Loop) {
        if state.accept_paused_until.is_some() {
            return;
        }
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    if state.open - state.streams >= self.limits.max_connections {
                        let _ = refuse_over_capacity(stream);
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let slot = state.free.pop().unwrap_or_else(|| {
                        state.conns.push(None);
                        state.conns.len() - 1
                    });
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, Token(slot), interest)
                        .is_err()
                    {
                        state.free.push(slot);
                        continue;
                    }
                    state.next_generation += 1;
                    let generation = state.next_generation;
                    let conn = Conn::new(
                        (stream, peer),
                        generation,
                        &self.limits,
                        self.port,
                        Instant::now(),
                    );
                    state.timers.push(Reverse((conn.deadline, slot, conn.generation)));
                    state.conns[slot] = Some(conn);
                    state.open += 1;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted || e.kind() == ErrorKind::ConnectionAborted => {}
                Err(_) => {
                    // Out of descriptors or memory: back off rather than spin.
                    state.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    fn complete_deferred(&self, state: &mut Loop) {
        let mut done = Vec::new();
        while let Ok(c) = self.rx.try_recv() {
            done.push(c);
        }
        for c in done {
            if let Delivery::Chunk(bytes) = &c.what {
                self.in_flight.fetch_sub(bytes.len(), Ordering::SeqCst);
            }
            let Some(conn) = state.conns.get_mut(c.slot).and_then(Option::as_mut) else {
                continue;
            };
            if conn.generation != c.generation {
                continue;
            }
            let before = conn.deadline;
            let now = Instant::now();
            let step = match (c.what, conn.phase) {
                (Delivery::Answer(resp), Phase::Waiting) => {
                    conn.fallback = None;
                    conn.respond(&resp, now)
                }
                (Delivery::Body(head, len, body), Phase::Waiting) => {
                    conn.fallback = None;
                    conn.respond_body(&head, len, body, now)
                }
                (Delivery::Chunk(bytes), Phase::Streaming) => {
                    if let Some(mine) = &conn.in_flight {
                        mine.fetch_sub(bytes.len(), Ordering::SeqCst);
                    }
                    conn.push(&bytes, now)
                }
                (Delivery::End, Phase::Streaming) => conn.end_stream(now),
                (Delivery::Abort, Phase::Streaming) => Step::Close,
                _ => continue,
            };
            self.settle(state, c.slot, step, before);
        }
    }

    /// Start finishing: stop accepting, drop requests being read, answer deferred ones
    /// (fallback or 503), end streams; each connection then closes once written.
    fn wind_down(&self, state: &mut Loop, until: Instant) {
        let now = Instant::now();
        for slot in 0..state.conns.len() {
            let Some(conn) = state.conns[slot].as_mut() else {
                continue;
            };
            let before = conn.deadline;
            let step = match conn.phase {
                Phase::Reading => Step::Close,
                Phase::Waiting => give_up(conn, "the server is closing", now),
                Phase::Streaming => conn.end_stream(now),
                Phase::Writing | Phase::Lingering => Step::Idle,
            };
            if let Some(conn) = state.conns[slot].as_mut() {
                conn.deadline = conn.deadline.min(until);
            }
            self.settle(state, slot, step, before);
        }
    }

    /// Act on a connection's step, running the handler for a complete request.
    fn after<H: Handler>(&self, state: &mut Loop, slot: usize, step: Step, before: Instant, handler: &mut H) {
        let Step::Dispatch(req) = step else {
            return self.settle(state, slot, step, before);
        };
        let streams_full = state.streams >= self.limits.max_streams;
        let mut started_stream = false;
        let Some(conn) = state.conns[slot].as_mut() else {
            return;
        };
        let ex = Exchange {
            slot,
            generation: conn.generation,
            peer: Some(conn.peer),
            local: self.local,
            tx: &self.tx,
            waker: &self.waker,
            deferred: Cell::new(None),
            fallback: Cell::new(None),
            closed: Cell::new(None),
            in_flight: &self.in_flight,
            limits: &self.limits,
        };
        let reply = catch_unwind(AssertUnwindSafe(|| handler.handle(&req, &ex)))
            .unwrap_or_else(|_| Reply::Now(Response::error(500, "internal error")));
        let now = Instant::now();
        let step = match reply {
            Reply::Now(resp) => conn.respond(&resp, now),
            Reply::Later => {
                conn.phase = Phase::Waiting;
                conn.deadline = now + ex.deferred.get().unwrap_or(self.limits.defer_timeout);
                conn.fallback = ex.fallback.take();
                Step::Idle
            }
            Reply::Stream(_) if streams_full => {
                // No place for another stream: refused, and its handle reads closed.
                if let Some((closed, _)) = ex.closed.take() {
                    closed.store(true, std::sync::atomic::Ordering::SeqCst);
                }
                conn.respond(&Response::error(503, "too many streams are open"), now)
            }
            Reply::Stream(head) => {
                let (closed, mine) = ex.closed.take().unwrap_or_default();
                conn.in_flight = Some(mine);
                conn.counted_stream = true;
                started_stream = true;
                conn.start_stream(&head, closed, now)
            }
        };
        if started_stream {
            state.streams += 1;
        }
        self.settle(state, slot, step, before);
    }

    /// Close a finished connection, or arm its timer if its deadline moved.
    fn settle(&self, state: &mut Loop, slot: usize, step: Step, before: Instant) {
        match step {
            Step::Close => {
                // Dropping the stream closes its only descriptor, which also removes it
                // from the epoll set: no separate deregister call is needed.
                if let Some(mut conn) = state.conns[slot].take() {
                    conn.release(&mut state.budget);
                    state.unsent = state.unsent.saturating_sub(conn.queued);
                    state.free.push(slot);
                    state.open -= 1;
                    if conn.counted_stream {
                        state.streams -= 1;
                    }
                }
            }
            Step::Idle | Step::Dispatch(_) => {
                let Some(conn) = state.conns[slot].as_mut() else {
                    return;
                };
                // Bytes queued for clients that do not read count against one total.
                let now = conn.unsent();
                state.unsent = state.unsent.saturating_sub(conn.queued).saturating_add(now);
                conn.queued = now;
                if now > 0 && state.unsent > self.limits.max_unsent {
                    return self.settle(state, slot, Step::Close, before);
                }
                if conn.more {
                    state.again.push((slot, conn.generation));
                }
                if conn.deadline != before {
                    state.timers.push(Reverse((conn.deadline, slot, conn.generation)));
                }
            }
        }
    }

    fn expire(&self, state: &mut Loop) {
        let now = Instant::now();
        while let Some(&Reverse((at, slot, generation))) = state.timers.peek() {
            if at > now {
                break;
            }
            state.timers.pop();
            let Some(conn) = state.conns.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            if conn.generation != generation || conn.deadline != at {
                continue;
            }
            let before = conn.deadline;
            let step = match conn.phase {
                Phase::Reading => {
                    conn.release(&mut state.budget);
                    conn.respond(&Response::error(408, "request timeout"), now)
                }
                Phase::Waiting => give_up(conn, "no answer in time", now),
                Phase::Streaming => conn.keep_alive(now),
                Phase::Writing => conn.write_deadline(now),
                Phase::Lingering => Step::Close,
            };
            self.settle(state, slot, step, before);
        }
    }
}

/// A deferred request whose wait is over: its fallback's answer, else a 503 saying `why`.
fn give_up(conn: &mut Conn, why: &str, now: Instant) -> Step {
    let resp = match conn.fallback.take() {
        Some(f) => {
            catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| Response::error(500, "internal error"))
        }
        None => Response::error(503, why),
    };
    conn.respond(&resp, now)
}

struct Loop {
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    open: usize,
    /// Of `open`, the connections that are streams (against `Limits::max_streams`).
    streams: usize,
    next_generation: u64,
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    accept_paused_until: Option<Instant>,
    /// Request-body bytes held across all connections, against `Limits::max_buffered`.
    budget: Budget,
    /// Unsent response bytes across all connections, against `Limits::max_unsent`.
    unsent: usize,
    /// Connections to flush again on the next turn (see `Conn::more`).
    again: Vec<(usize, u64)>,
}

impl Loop {
    fn new(max_buffered: usize) -> Loop {
        Loop {
            conns: Vec::new(),
            free: Vec::new(),
            open: 0,
            streams: 0,
            next_generation: 0,
            timers: BinaryHeap::new(),
            accept_paused_until: None,
            budget: Budget::new(max_buffered),
            unsent: 0,
            again: Vec::new(),
        }
    }

    /// Timers are deleted lazily: a closed connection's or a moved deadline's entry stays in
    /// the heap until it comes due, so under many short connections the heap would hold every
    /// connection of the last timeout period. Once it holds more than twice the live
    /// connections (plus slack), rebuild it from them: each live connection has exactly one
    /// entry, for its current deadline, before and after. Amortised O(1) per push.
    fn compact_timers(&mut self) {
        if self.timers.len() <= 2 * self.open + 64 {
            return;
        }
        let live: Vec<_> = self
            .conns
            .iter()
            .enumerate()
            .filter_map(|(slot, c)| c.as_ref().map(|c| Reverse((c.deadline, slot, c.generation))))
            .collect();
        self.timers = BinaryHeap::from(live);
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let timer = self.timers.peek().map(|Reverse((at, _, _))| *at);
        match (timer, self.accept_paused_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_timers_are_dropped_once_they_outnumber_live_connections() {
        let mut state = Loop::new(0);
        let now = Instant::now();
        for i in 0..64u64 {
            state.timers.push(Reverse((now, i as usize, i)));
        }
        state.compact_timers();
        assert_eq!(state.timers.len(), 64, "within the slack nothing is rebuilt");
        for i in 64..10_000u64 {
            state.timers.push(Reverse((now, i as usize, i)));
        }
        state.compact_timers();
        assert_eq!(state.timers.len(), 0, "no live connection, so no timer is kept");
        assert_eq!(state.next_wakeup(), None);
    }
}
