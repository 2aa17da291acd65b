//! The egress relay: one mio event loop on one thread serving a session's namespace. Each
//! accepted connection's original destination (`getsockname`) is decided by the policy;
//! an allowed one is joined to a connection opened from the host namespace and bytes are
//! copied both ways through two bounded buffers, half-close passed on, with connect, idle
//! and total timeouts. Nothing is parsed and nothing is terminated. A refused one is closed
//! at once. DNS questions on the namespace's UDP port 53 are answered here: allowed names
//! from the resolver worker, everything else `REFUSED` without leaving the machine.

use super::dns;
use super::event::{Decision, Event};
use super::policy::{self, Policy, ANSWER_TTL};
use super::resolve::{self, Failure, Resolver};
use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token, Waker};
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Bytes buffered per direction of a new connection.
const BUF_START: usize = 16 << 10;
/// A direction whose reads keep filling its buffer doubles it, up to this.
const BUF_MAX: usize = 1 << 20;
/// All connections' buffers together stay within this (growth past it is declined), so a
/// child holding the most connections open cannot make the relay hold more.
const BUF_BUDGET: usize = 32 << 20;
/// Connections relayed at once; more are refused until one ends.
pub const MAX_CONNS: usize = 128;
/// DNS questions waiting for the resolver at once; more get `SERVFAIL`.
const MAX_PENDING_DNS: usize = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
const TOTAL_TIMEOUT: Duration = Duration::from_secs(3600);
/// How long a resolved name is answered from the cache.
const CACHE_TTL: Duration = Duration::from_secs(ANSWER_TTL as u64);
/// How long a failed lookup is answered from the cache.
const NEGATIVE_TTL: Duration = Duration::from_secs(5);
/// Refusals and failures reported per second at most; the rest are counted and reported
/// as one `suppressed` event a second, so a child that floods refusals cannot fill the
/// disk through the trace.
const EVENTS_PER_SECOND: u32 = 200;
/// Allowed decisions (answers, closed connections) reported per second at most, counted
/// apart from refusals so that a flood of refusals never hides an allowed connection, and
/// capped too: the same allowed name asked again and again is answered from the cache as
/// fast as a child can ask.
const ALLOWED_PER_SECOND: u32 = 1000;
/// Events waiting for the trace at most; past it they are counted, never waited for (the
/// relay never blocks on its reader).
pub const EVENT_BACKLOG: usize = 4096;

const WAKER: Token = Token(0);
const UDP: Token = Token(1);
/// Listeners take the tokens from here; connections from [`FIRST_CONN`].
const FIRST_LISTENER: usize = 2;
const FIRST_CONN: usize = 1 << 16;

/// The running relay; dropping it stops the loop and closes every connection.
pub struct Relay {
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Start the relay on `listeners` (port, listener) and `udp`, deciding with `policy`,
/// answering names only with what `stand` lets stand for them, resolving with `resolver`,
/// reporting every decision to `events`.
pub fn start(
    listeners: Vec<(u16, std::net::TcpListener)>,
    udp: std::net::UdpSocket,
    policy: Policy,
    stand: policy::Stand,
    resolver: Resolver,
    events: mpsc::SyncSender<Event>,
) -> io::Result<Relay> {
    let poll = Poll::new()?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let mut udp = UdpSocket::from_std(udp);
    poll.registry().register(&mut udp, UDP, Interest::READABLE)?;
    let mut tcp = Vec::new();
    for (i, (_, l)) in listeners.into_iter().enumerate() {
        let mut l = TcpListener::from_std(l);
        poll.registry()
            .register(&mut l, Token(FIRST_LISTENER + i), Interest::READABLE)?;
        tcp.push(l);
    }
    // Only names the policy allows are ever asked: a session allowed none starts no thread.
    let (ask, done) = resolve::worker(resolver, waker.clone(), policy.name_count());
    let stop = Arc::new(AtomicBool::new(false));
    let mut state = Loop {
        poll,
        udp,
        tcp,
        conns: Vec::new(),
        free: Vec::new(),
        live: 0,
        policy,
        events,
        ask,
        done,
        pending: HashMap::new(),
        pending_count: 0,
        cache: HashMap::new(),
        stand,
        reported: 0,
        reported_allowed: 0,
        suppressed: 0,
        budget: BUF_BUDGET,
    };
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("egress".into())
        .spawn(move || state.run(&flag))?;
    Ok(Relay {
        stop,
        waker,
        thread: Some(thread),
    })
}

/// One direction of a connection: bytes `start..end` of the buffer wait to be written. The
/// buffer starts small and doubles while reads fill it (a bulk transfer), within the
/// relay's budget: fewer, larger reads and writes are what brings a relayed transfer near
/// a direct one. (A kernel pipe moved with `splice` was measured too: no faster here, since
/// the cost is the second TCP hop, not the copy, and it takes two descriptors a direction.)
struct Pipe {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// The source sent EOF.
    eof: bool,
    /// The EOF was passed on (`shutdown(Write)` on the destination).
    shut: bool,
    bytes: u64,
}

impl Pipe {
    fn new() -> Pipe {
        Pipe {
            buf: vec![0u8; BUF_START].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            shut: false,
            bytes: 0,
        }
    }

    fn done(&self) -> bool {
        self.eof && self.shut
    }

    /// Move bytes from `src` to `dst` until one would block; `dst_ready` false holds the
    /// writes (the upstream is still connecting). Returns whether anything moved.
    fn pump(
        &mut self,
        src: &mut TcpStream,
        dst: &mut TcpStream,
        dst_ready: bool,
        budget: &mut usize,
    ) -> io::Result<bool> {
        let mut moved = false;
        loop {
            while self.start < self.end {
                if !dst_ready {
                    return Ok(moved);
                }
                match dst.write(&self.buf[self.start..self.end]) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => {
                        self.start += n;
                        moved = true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(moved),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            (self.start, self.end) = (0, 0);
            if self.eof {
                if !self.shut && dst_ready {
                    let _ = dst.shutdown(std::net::Shutdown::Write);
                    self.shut = true;
                }
                return Ok(moved);
            }
            match src.read(&mut self.buf) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    if n == self.buf.len() && n < BUF_MAX && *budget >= n {
                        // Full: the source has more than the buffer holds. Double it, keeping
                        // what was read.
                        let mut bigger = vec![0u8; 2 * n].into_boxed_slice();
                        bigger[..n].copy_from_slice(&self.buf);
                        self.buf = bigger;
                        *budget -= n;
                    }
                    self.end = n;
                    self.bytes += n as u64;
                    moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(moved),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

struct Conn {
    down: TcpStream,
    up: TcpStream,
    connected: bool,
    d2u: Pipe,
    u2d: Pipe,
    dest: SocketAddrV4,
    name: String,
    opened: Instant,
    last: Instant,
}

struct Loop {
    poll: Poll,
    udp: UdpSocket,
    tcp: Vec<TcpListener>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    live: usize,
    policy: Policy,
    events: mpsc::SyncSender<Event>,
    ask: mpsc::Sender<String>,
    done: mpsc::Receiver<resolve::Done>,
    /// Questions waiting for a name's lookup: (query, who asked).
    pending: HashMap<String, Vec<(dns::Query, SocketAddr)>>,
    pending_count: usize,
    cache: HashMap<String, (Result<Vec<Ipv4Addr>, Failure>, Instant)>,
    /// The operator named the resolver (`MURMUR_EGRESS_RESOLVER`).
    stand: policy::Stand,
    /// Refusals and allowed decisions reported in the current second, and the events held
    /// back (over either cap, or a full backlog).
    reported: u32,
    reported_allowed: u32,
    suppressed: u64,
    /// Buffer bytes connections may still grow by ([`BUF_BUDGET`] less what they took).
    budget: usize,
}

impl Loop {
    fn run(&mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(256);
        let mut last_sweep = Instant::now();
        while !stop.load(Ordering::SeqCst) {
            if let Err(e) = self.poll.poll(&mut events, Some(Duration::from_secs(1))) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKER => self.answer_resolved(),
                    UDP => self.serve_dns(),
                    Token(t) if (FIRST_LISTENER..FIRST_CONN).contains(&t) => self.accept(t - FIRST_LISTENER),
                    Token(t) => self.service((t - FIRST_CONN) / 2),
                }
            }
            if last_sweep.elapsed() >= Duration::from_secs(1) {
                self.new_window();
                self.sweep();
                last_sweep = Instant::now();
            }
        }
        for i in 0..self.conns.len() {
            self.close(i, Some("session ended"));
        }
        self.new_window();
    }

    /// Report a decision. Refusals and failures past [`EVENTS_PER_SECOND`], and allowed
    /// decisions past [`ALLOWED_PER_SECOND`] (each budget its own, so a flood of refusals
    /// never buries an allowed connection), are counted instead; so is an event the trace's
    /// backlog has no room for.
    fn emit(&mut self, e: Event) {
        let allowed = matches!(e.decision, Decision::Closed { .. } | Decision::Answered(_));
        let (count, cap) = if allowed {
            (&mut self.reported_allowed, ALLOWED_PER_SECOND)
        } else {
            (&mut self.reported, EVENTS_PER_SECOND)
        };
        if *count >= cap {
            self.suppressed += 1;
            return;
        }
        *count += 1;
        if self.events.try_send(e).is_err() {
            self.suppressed += 1;
        }
    }

    /// Start a new second of reporting, first saying how many decisions were held back
    /// (kept for the next second when even that event finds the backlog full).
    fn new_window(&mut self) {
        if self.suppressed > 0 && self.events.try_send(Event::suppressed(self.suppressed)).is_ok() {
            self.suppressed = 0;
        }
        self.reported = 0;
        self.reported_allowed = 0;
    }

    fn accept(&mut self, listener: usize) {
        loop {
            let Some(l) = self.tcp.get(listener) else { return };
            let (down, _) = match l.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A connection that died in the backlog, or descriptors run out: skip it.
                Err(_) => return,
            };
            let dest = match down.local_addr() {
                Ok(SocketAddr::V4(d)) => d,
                _ => continue,
            };
            // A refusal resets the connection (no lingering, so the close sends RST): the
            // child sees ECONNRESET rather than an empty reply.
            let refuse = |s: &mut Self, reason: &str| {
                let _ = rustix::net::sockopt::set_socket_linger(&down, Some(Duration::ZERO));
                s.emit(Event::tcp(None, dest, Decision::Refused(reason.to_string())));
            };
            let name = match self.policy.decide(*dest.ip(), dest.port(), Instant::now()) {
                Ok(n) => n,
                Err(why) => {
                    refuse(self, why);
                    continue;
                }
            };
            if self.live >= MAX_CONNS {
                refuse(self, "too many connections at once");
                continue;
            }
            let up = match TcpStream::connect(SocketAddr::V4(dest)) {
                Ok(s) => s,
                Err(e) => {
                    self.emit(Event::tcp(
                        Some(name),
                        dest,
                        Decision::Failed(format!("connect: {e}")),
                    ));
                    continue;
                }
            };
            let now = Instant::now();
            let conn = Conn {
                down,
                up,
                connected: false,
                d2u: Pipe::new(),
                u2d: Pipe::new(),
                dest,
                name,
                opened: now,
                last: now,
            };
            let i = self.free.pop().unwrap_or(self.conns.len());
            if i == self.conns.len() {
                self.conns.push(None);
            }
            let both = Interest::READABLE | Interest::WRITABLE;
            let c = self.conns[i].insert(conn);
            let r = self.poll.registry();
            let ok = r.register(&mut c.down, Token(FIRST_CONN + 2 * i), both).is_ok()
                && r.register(&mut c.up, Token(FIRST_CONN + 2 * i + 1), both).is_ok();
            self.live += 1;
            if !ok {
                self.close(i, Some("cannot watch the connection"));
            }
        }
    }

    /// Move what can move on connection `i`; close it when both directions are done or
    /// either side failed.
    fn service(&mut self, i: usize) {
        let Some(Some(c)) = self.conns.get_mut(i) else {
            return;
        };
        if !c.connected {
            match c.up.take_error() {
                Ok(Some(e)) | Err(e) => return self.close(i, Some(&format!("upstream connect: {e}"))),
                Ok(None) => {}
            }
            match c.up.peer_addr() {
                Ok(_) => c.connected = true,
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {}
                Err(e) => return self.close(i, Some(&format!("upstream connect: {e}"))),
            }
        }
        let ready = c.connected;
        let budget = &mut self.budget;
        let a = c.d2u.pump(&mut c.down, &mut c.up, ready, budget);
        let b = if ready {
            c.u2d.pump(&mut c.up, &mut c.down, true, budget)
        } else {
            Ok(false)
        };
        match (a, b) {
            (Ok(x), Ok(y)) => {
                if x || y {
                    c.last = Instant::now();
                }
                if c.d2u.done() && c.u2d.done() {
                    self.close(i, None);
                }
            }
            (Err(e), _) | (_, Err(e)) => self.close(i, Some(&e.to_string())),
        }
    }

    fn close(&mut self, i: usize, why: Option<&str>) {
        let Some(slot) = self.conns.get_mut(i) else { return };
        let Some(mut c) = slot.take() else { return };
        let r = self.poll.registry();
        let _ = r.deregister(&mut c.down);
        let _ = r.deregister(&mut c.up);
        self.free.push(i);
        self.live = self.live.saturating_sub(1);
        self.budget += (c.d2u.buf.len() - BUF_START) + (c.u2d.buf.len() - BUF_START);
        self.emit(Event::tcp(
            Some(c.name),
            c.dest,
            Decision::Closed {
                bytes_up: c.d2u.bytes,
                bytes_down: c.u2d.bytes,
                error: why.map(str::to_string),
            },
        ));
    }

    /// Close connections past their connect, idle or total time.
    fn sweep(&mut self) {
        let now = Instant::now();
        for i in 0..self.conns.len() {
            let why = match &self.conns[i] {
                Some(c) if !c.connected && now - c.opened > CONNECT_TIMEOUT => "upstream connect timed out",
                Some(c) if now - c.last > IDLE_TIMEOUT => "idle timeout",
                Some(c) if now - c.opened > TOTAL_TIMEOUT => "total time limit",
                _ => continue,
            };
            self.close(i, Some(why));
        }
    }

    fn serve_dns(&mut self) {
        let mut buf = [0u8; dns::MAX_PACKET + 1];
        let mut errors = 0;
        loop {
            let (n, from) = match self.udp.recv_from(&mut buf) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // A one-off error (an ICMP report on an earlier reply): read on.
                Err(_) if errors < 64 => {
                    errors += 1;
                    continue;
                }
                Err(_) => return,
            };
            if n > dns::MAX_PACKET {
                continue;
            }
            let Ok(q) = dns::parse_query(&buf[..n]) else {
                continue;
            };
            self.question(q, from);
        }
    }

    fn question(&mut self, q: dns::Query, from: SocketAddr) {
        if q.qclass != dns::CLASS_IN || !self.policy.name_allowed(&q.name) {
            self.emit(Event::dns(
                &q.name,
                Decision::Refused(super::policy::NOT_ALLOWED.into()),
            ));
            return self.reply(&dns::answer_empty(&q, dns::REFUSED), from);
        }
        if q.qtype != dns::TYPE_A {
            // IPv4 only: AAAA (and every other type) is answered empty.
            return self.reply(&dns::answer_empty(&q, dns::NOERROR), from);
        }
        if let Some((result, until)) = self.cache.get(&q.name) {
            if *until > Instant::now() {
                let result = result.clone();
                return self.answer(&q, result, from);
            }
        }
        if self.pending_count >= MAX_PENDING_DNS {
            return self.reply(&dns::answer_empty(&q, dns::SERVFAIL), from);
        }
        let first = !self.pending.contains_key(&q.name);
        let name = q.name.clone();
        self.pending.entry(name.clone()).or_default().push((q, from));
        self.pending_count += 1;
        if first && self.ask.send(name.clone()).is_err() {
            // No resolver thread is left to answer: every question waiting on the name is
            // answered SERVFAIL now rather than left to time out in the child.
            for (q, from) in self.pending.remove(&name).unwrap_or_default() {
                self.pending_count = self.pending_count.saturating_sub(1);
                self.reply(&dns::answer_empty(&q, dns::SERVFAIL), from);
            }
        }
    }

    fn answer(&mut self, q: &dns::Query, result: Result<Vec<Ipv4Addr>, Failure>, from: SocketAddr) {
        let result = result.and_then(|a| {
            let a = self.stand.usable(&q.name, &a);
            if a.is_empty() {
                Err(Failure::NotFound)
            } else {
                Ok(a)
            }
        });
        let packet = match &result {
            Ok(addrs) => {
                self.policy.bind(&q.name, addrs, Instant::now());
                dns::answer_a(q, addrs, ANSWER_TTL)
            }
            Err(Failure::NotFound) => dns::answer_empty(q, dns::NXDOMAIN),
            Err(Failure::Failed) => dns::answer_empty(q, dns::SERVFAIL),
        };
        self.emit(Event::dns(
            &q.name,
            match result {
                Ok(a) => Decision::Answered(a),
                Err(Failure::NotFound) => Decision::Failed("no IPv4 address".into()),
                Err(Failure::Failed) => Decision::Failed("the resolver failed".into()),
            },
        ));
        self.reply(&packet, from);
    }

    fn reply(&mut self, packet: &[u8], to: SocketAddr) {
        let _ = self.udp.send_to(packet, to);
    }

    /// Answer every question waiting on a lookup that finished.
    fn answer_resolved(&mut self) {
        while let Ok(d) = self.done.try_recv() {
            // A failure is remembered briefly too, so a child asking again and again for a
            // name that does not resolve does not ask the host's resolver each time.
            let ttl = if d.result.is_ok() { CACHE_TTL } else { NEGATIVE_TTL };
            self.cache
                .insert(d.name.clone(), (d.result.clone(), Instant::now() + ttl));
            for (q, from) in self.pending.remove(&d.name).unwrap_or_default() {
                self.pending_count = self.pending_count.saturating_sub(1);
                self.answer(&q, d.result.clone(), from);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener as StdListener;

    /// A connected loopback pair: (ours, non-blocking mio side; the peer, blocking std).
    fn pair() -> (TcpStream, std::net::TcpStream) {
        let l = StdListener::bind("127.0.0.1:0").unwrap();
        let peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ours, _) = l.accept().unwrap();
        ours.set_nonblocking(true).unwrap();
        (TcpStream::from_std(ours), peer)
    }

    /// Push `total` bytes through one pipe: what its buffer grew to and the budget left.
    fn bulk(total: usize, budget: usize) -> (usize, usize, u64) {
        let (mut src, mut writer) = pair();
        let (mut dst, mut reader) = pair();
        let feed = std::thread::spawn(move || {
            writer.write_all(&vec![7u8; total]).unwrap();
        });
        let drain = std::thread::spawn(move || {
            let mut got = 0usize;
            let mut b = vec![0u8; 1 << 16];
            while got < total {
                got += reader.read(&mut b).unwrap();
            }
        });
        let mut p = Pipe::new();
        let mut left = budget;
        while p.bytes < total as u64 {
            p.pump(&mut src, &mut dst, true, &mut left).unwrap();
            std::thread::sleep(Duration::from_micros(200));
        }
        while p.start < p.end {
            p.pump(&mut src, &mut dst, true, &mut left).unwrap();
        }
        feed.join().unwrap();
        drain.join().unwrap();
        (p.buf.len(), left, p.bytes)
    }

    #[test]
    fn a_bulk_direction_grows_its_buffer_within_the_budget() {
        let (size, left, bytes) = bulk(8 << 20, BUF_BUDGET);
        assert_eq!(bytes, 8 << 20);
        assert!(size > BUF_START && size <= BUF_MAX, "{size}");
        assert_eq!(left, BUF_BUDGET - (size - BUF_START));
        let (size, left, bytes) = bulk(2 << 20, 0);
        assert_eq!((size, left, bytes), (BUF_START, 0, 2 << 20));
    }
}
