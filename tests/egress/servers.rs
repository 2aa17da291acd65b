//! The host side of the egress tests, all on loopback: an upstream TCP server that reads each
//! connection to its end and answers `pong:<bytes received>` (or, as a firehose, a fixed
//! number of bytes), counting connections, optionally also listening on a second loopback
//! address as a witness; a fake DNS server that logs every query it receives and answers
//! the names it was given with an A record; and a UDP receiver that must stay silent.
//! Each is stopped (and its threads joined) when dropped.

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a server waits on a connection that neither sends nor closes.
const STALL: Duration = Duration::from_secs(30);

/// What an upstream answers once a connection's request has ended.
#[derive(Clone, Copy)]
enum Answer {
    Pong,
    Firehose(usize),
}

struct Shared {
    answer: Answer,
    connections: AtomicUsize,
    stop: AtomicBool,
    handlers: Mutex<Vec<JoinHandle<()>>>,
}

/// An upstream TCP server on 127.0.0.1 (and any witness addresses added).
pub struct Upstream {
    port: u16,
    shared: Arc<Shared>,
    acceptors: Vec<JoinHandle<()>>,
}

impl Upstream {
    /// Answers `pong:<bytes received>` once the client has half-closed.
    pub fn pong() -> Upstream {
        Upstream::start(Answer::Pong)
    }

    /// Answers `bytes` bytes once the client has half-closed.
    pub fn firehose(bytes: usize) -> Upstream {
        Upstream::start(Answer::Firehose(bytes))
    }

    fn start(answer: Answer) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            answer,
            connections: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            handlers: Mutex::new(Vec::new()),
        });
        let mut up = Upstream {
            port,
            shared,
            acceptors: Vec::new(),
        };
        up.serve(listener);
        up
    }

    /// Also listen on `ip` at the same port, counting into the same total (a witness that a
    /// refused destination never arrives). False, with a note, if the host cannot bind it.
    pub fn also_on(&mut self, ip: IpAddr) -> bool {
        let addr = SocketAddr::new(ip, self.port);
        match TcpListener::bind(addr) {
            Ok(l) => {
                self.serve(l);
                true
            }
            Err(e) => {
                println!("note: no witness listener on {addr}: {e}");
                false
            }
        }
    }

    fn serve(&mut self, listener: TcpListener) {
        listener.set_nonblocking(true).unwrap();
        let shared = self.shared.clone();
        self.acceptors.push(std::thread::spawn(move || {
            while !shared.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        shared.connections.fetch_add(1, Ordering::SeqCst);
                        let answer = shared.answer;
                        let h = std::thread::spawn(move || handle(stream, answer));
                        shared.handlers.lock().unwrap().push(h);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5))
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }));
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connections accepted so far, on every address it listens on.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

/// Read the request to its end, then answer.
fn handle(mut s: TcpStream, answer: Answer) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(STALL));
    let _ = s.set_write_timeout(Some(STALL));
    let mut received = 0usize;
    let mut buf = [0u8; 16384];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => received += n,
            Err(_) => return,
        }
    }
    let _ = match answer {
        Answer::Pong => s.write_all(format!("pong:{received}").as_bytes()),
        Answer::Firehose(total) => {
            let chunk = vec![b'f'; 65536];
            let mut left = total;
            let mut r = Ok(());
            while left > 0 && r.is_ok() {
                let n = left.min(chunk.len());
                r = s.write_all(&chunk[..n]);
                left -= n;
            }
            r
        }
    };
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for a in self.acceptors.drain(..) {
            let _ = a.join();
        }
        let handlers: Vec<_> = self.shared.handlers.lock().unwrap().drain(..).collect();
        for h in handlers {
            let _ = h.join();
        }
    }
}

/// One query as the fake DNS server received it.
pub struct Query {
    /// The question's name, lowercased, no trailing dot (empty if it could not be parsed).
    pub name: String,
    /// The whole packet.
    pub raw: Vec<u8>,
}

/// A fake DNS server on 127.0.0.1 (UDP): logs every query; answers a name it was given with
/// an A record (TTL 60) for an A question and NOERROR with no record for any other type,
/// and NXDOMAIN for every other name.
pub struct FakeDns {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<Query>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeDns {
    pub fn start(names: &[(&str, Ipv4Addr)]) -> FakeDns {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let addr = sock.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let names: Vec<(String, Ipv4Addr)> = names.iter().map(|(n, a)| (n.to_string(), *a)).collect();
        let (l, s) = (log.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while !s.load(Ordering::SeqCst) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let packet = &buf[..n];
                let question = parse_question(packet);
                l.lock().unwrap().push(Query {
                    name: question.as_ref().map_or(String::new(), |q| q.0.clone()),
                    raw: packet.to_vec(),
                });
                if let Some((name, qtype, end)) = question {
                    let address = names.iter().find(|(n, _)| *n == name).map(|(_, a)| *a);
                    let _ = sock.send_to(&answer(packet, end, qtype, address), from);
                }
            }
        });
        FakeDns {
            addr,
            log,
            stop,
            thread: Some(thread),
        }
    }

    /// `127.0.0.1:PORT`, for `MURMUR_EGRESS_RESOLVER`.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// The names asked so far.
    pub fn names(&self) -> Vec<String> {
        self.log.lock().unwrap().iter().map(|q| q.name.clone()).collect()
    }

    /// Whether any packet received so far contains `needle` (ASCII, any case) anywhere.
    pub fn saw(&self, needle: &str) -> bool {
        let needle = needle.to_ascii_lowercase();
        self.log.lock().unwrap().iter().any(|q| {
            String::from_utf8_lossy(&q.raw)
                .to_ascii_lowercase()
                .contains(&needle)
        })
    }
}

impl Drop for FakeDns {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The question of a query: its name (lowercased), its type, and where the question ends.
fn parse_question(p: &[u8]) -> Option<(String, u16, usize)> {
    if p.len() < 12 || p[2] & 0x80 != 0 || u16::from_be_bytes([p[4], p[5]]) == 0 {
        return None;
    }
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *p.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None;
        }
        labels.push(String::from_utf8_lossy(p.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?]);
    p.get(at + 3)?;
    Some((labels.join("."), qtype, at + 4))
}

/// The answer to the query `q` whose question ends at `end`.
fn answer(q: &[u8], end: usize, qtype: u16, address: Option<Ipv4Addr>) -> Vec<u8> {
    let rcode = if address.is_some() { 0 } else { 3 };
    let record = address.filter(|_| qtype == 1);
    let mut r = Vec::with_capacity(end + 16);
    r.extend_from_slice(&q[..2]);
    r.push(0x84 | (q[2] & 0x01)); // QR, AA, RD as asked
    r.push(0x80 | rcode); // RA
    r.extend_from_slice(&[0, 1, 0, record.is_some() as u8, 0, 0, 0, 0]);
    r.extend_from_slice(&q[12..end]);
    if let Some(a) = record {
        r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
        r.extend_from_slice(&a.octets());
    }
    r
}

/// A host UDP socket on 127.0.0.1 that nothing from a contained child may reach.
pub struct Silent(UdpSocket);

impl Silent {
    pub fn bind() -> Silent {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        Silent(s)
    }

    pub fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }

    /// The first datagram that arrives within a second, if any.
    pub fn received(&self) -> Option<(Vec<u8>, SocketAddr)> {
        let mut b = [0u8; 2048];
        self.0
            .recv_from(&mut b)
            .ok()
            .map(|(n, from)| (b[..n].to_vec(), from))
    }
}
