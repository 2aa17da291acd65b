//! An event-driven load generator: one thread keeps `clients` scripts in flight over
//! non-blocking sockets, one connection per request, the way `wrk`-style tools do. Unlike
//! 32 blocking OS threads, it leaves the server most of the machine's cores, so the figure
//! measures the server rather than the generator's context switches. [`drive_blocking`] runs
//! the same scripts the other way, one blocking OS thread per client, as a second
//! generator whose own costs differ (a daemon's figure should not depend on which one).

use super::Load;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A sequence of requests where each may depend on the previous response.
pub trait Script {
    /// The next request's raw bytes given the last response (`None` at the start);
    /// `Ok(None)` when the script finished, `Err(())` when a response was wrong.
    fn next(&mut self, last: Option<(u16, &[u8])>) -> Result<Option<Vec<u8>>, ()>;
}

struct Slot<S> {
    script: S,
    started: Instant,
    stream: TcpStream,
    out: Vec<u8>,
    sent: usize,
    input: Vec<u8>,
}

enum Event {
    Pending,
    Response(u16, Vec<u8>),
    Broken,
}

/// Run scripts made by `make(client, n)` from `clients` concurrent slots for `run_for`.
pub fn drive<S: Script>(
    addr: SocketAddr,
    clients: usize,
    run_for: Duration,
    mut make: impl FnMut(usize, u64) -> S,
) -> Load {
    let mut poll = Poll::new().expect("poll");
    let mut events = Events::with_capacity(256);
    let mut slots: Vec<Option<Slot<S>>> = (0..clients).map(|_| None).collect();
    let mut counts = vec![0u64; clients];
    let (mut times, mut failed) = (Vec::new(), 0u64);
    let start = Instant::now();
    let end = start + run_for;
    for (i, slot) in slots.iter_mut().enumerate() {
        *slot = begin(&poll, addr, i, make(i, 0), &mut failed);
        counts[i] = 1;
    }
    while Instant::now() < end {
        poll.poll(&mut events, Some(Duration::from_millis(10)))
            .expect("poll");
        for event in events.iter() {
            let i = event.token().0;
            let Some(slot) = slots[i].as_mut() else {
                continue;
            };
            let outcome = step(slot);
            let finished = match outcome {
                Event::Pending => continue,
                Event::Broken => Err(()),
                Event::Response(status, body) => {
                    let mut old = slots[i].take().expect("slot checked above");
                    let _ = poll.registry().deregister(&mut old.stream);
                    match old.script.next(Some((status, &body))) {
                        Ok(Some(req)) => {
                            slots[i] = send(&poll, addr, i, old.script, old.started, req);
                            if slots[i].is_some() {
                                continue;
                            }
                            Err(())
                        }
                        Ok(None) => Ok(old.started.elapsed()),
                        Err(()) => Err(()),
                    }
                }
            };
            match finished {
                Ok(t) => times.push(t),
                Err(()) => failed += 1,
            }
            if Instant::now() < end {
                slots[i] = begin(&poll, addr, i, make(i, counts[i]), &mut failed);
                counts[i] += 1;
            } else {
                slots[i] = None;
            }
        }
        // A slot that could not even connect is restarted here.
        for (i, slot) in slots.iter_mut().enumerate() {
            if slot.is_none() && Instant::now() < end {
                *slot = begin(&poll, addr, i, make(i, counts[i]), &mut failed);
                counts[i] += 1;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    times.sort();
    let pick = |q: f64| {
        times
            .get(((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Load {
        per_sec: times.len() as f64 / secs,
        failed,
        p50: pick(0.50),
        p99: pick(0.99),
    }
}

/// The same scripts from `clients` OS threads, each with blocking sockets: connect, write
/// the request, read to the server's close, next request.
pub fn drive_blocking<S: Script>(
    addr: SocketAddr,
    clients: usize,
    run_for: Duration,
    make: impl Fn(usize, u64) -> S + Send + Sync + 'static,
) -> Load {
    super::load(clients, run_for, move |client, n| {
        let mut script = make(client, n);
        let mut last: Option<(u16, Vec<u8>)> = None;
        loop {
            let req = match script.next(last.as_ref().map(|(s, b)| (*s, b.as_slice()))) {
                Ok(Some(req)) => req,
                Ok(None) => return true,
                Err(()) => return false,
            };
            let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
                return false;
            };
            let mut input = Vec::new();
            if stream.write_all(&req).is_err() || stream.read_to_end(&mut input).is_err() {
                return false;
            }
            match parse(&input) {
                Event::Response(status, body) => last = Some((status, body)),
                _ => return false,
            }
        }
    })
}

fn begin<S: Script>(
    poll: &Poll,
    addr: SocketAddr,
    i: usize,
    mut script: S,
    failed: &mut u64,
) -> Option<Slot<S>> {
    match script.next(None) {
        Ok(Some(req)) => send(poll, addr, i, script, Instant::now(), req).or_else(|| {
            *failed += 1;
            None
        }),
        _ => {
            *failed += 1;
            None
        }
    }
}

fn send<S>(
    poll: &Poll,
    addr: SocketAddr,
    i: usize,
    script: S,
    started: Instant,
    req: Vec<u8>,
) -> Option<Slot<S>> {
    let mut stream = TcpStream::connect(addr).ok()?;
    poll.registry()
        .register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE)
        .ok()?;
    Some(Slot {
        script,
        started,
        stream,
        out: req,
        sent: 0,
        input: Vec::new(),
    })
}

fn step<S>(slot: &mut Slot<S>) -> Event {
    while slot.sent < slot.out.len() {
        match slot.stream.write(&slot.out[slot.sent..]) {
            Ok(n) => slot.sent += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::NotConnected => {
                return Event::Pending
            }
            Err(_) => return Event::Broken,
        }
    }
    let mut chunk = [0u8; 4096];
    loop {
        match slot.stream.read(&mut chunk) {
            Ok(0) => return parse(&slot.input),
            Ok(n) => slot.input.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Event::Pending,
            Err(_) => return Event::Broken,
        }
    }
}

/// The whole response, read to the server's close.
fn parse(bytes: &[u8]) -> Event {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut resp = httparse::Response::new(&mut fields);
    match resp.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => Event::Response(resp.code.unwrap_or(0), bytes[len..].to_vec()),
        _ => Event::Broken,
    }
}
