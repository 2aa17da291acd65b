//! Host-side name resolution for the egress relay: the system resolver (`getaddrinfo`), or,
//! when `MURMUR_EGRESS_RESOLVER=IP:PORT` names one, a DNS server asked directly over UDP.
//! Only allowed names ever get here. IPv4 only. The relay's lookups run on one worker
//! thread, so its event loop never blocks on a resolver.

use super::dns;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long one upstream DNS question may take.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(2);
/// Lookups run at once (at launch, and for the relay), so one name that hangs does not
/// hold up the others.
pub const POOL: usize = 4;

/// Why a name did not resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The name has no IPv4 address.
    NotFound,
    /// The resolver did not answer usefully.
    Failed,
}

/// Where allowed names are resolved.
#[derive(Debug, Clone, Copy)]
pub enum Resolver {
    System,
    Upstream(SocketAddr),
}

impl Resolver {
    /// From `MURMUR_EGRESS_RESOLVER` (an `IP:PORT`), else the system resolver.
    pub fn from_env() -> Result<Resolver, String> {
        match std::env::var("MURMUR_EGRESS_RESOLVER") {
            Ok(v) if !v.is_empty() => v
                .parse::<SocketAddr>()
                .map(Resolver::Upstream)
                .map_err(|_| format!("MURMUR_EGRESS_RESOLVER={v} is not an IP:PORT")),
            _ => Ok(Resolver::System),
        }
    }

    /// The IPv4 addresses of `name`, deduplicated, in the resolver's order.
    pub fn lookup(&self, name: &str) -> Result<Vec<Ipv4Addr>, Failure> {
        let mut addrs = match self {
            Resolver::System => (name, 0u16)
                .to_socket_addrs()
                .map_err(|_| Failure::NotFound)?
                .filter_map(|a| match a {
                    SocketAddr::V4(v4) => Some(*v4.ip()),
                    SocketAddr::V6(_) => None,
                })
                .collect::<Vec<_>>(),
            Resolver::Upstream(server) => ask(*server, name)?,
        };
        let mut seen = std::collections::HashSet::new();
        addrs.retain(|a| seen.insert(*a));
        if addrs.is_empty() {
            return Err(Failure::NotFound);
        }
        Ok(addrs)
    }

    /// Whether the operator named this resolver (its answers may map a name to loopback or
    /// link-local addresses; see `policy::may_stand_for`).
    pub fn operator_chosen(&self) -> bool {
        matches!(self, Resolver::Upstream(_))
    }

    /// Resolve every name on [`POOL`] threads, waiting at most `within`: a name still
    /// unresolved then has no launch-time addresses.
    pub fn lookup_all(&self, names: &[String], within: Duration) -> Vec<(String, Vec<Ipv4Addr>)> {
        let (tx, rx) = mpsc::channel();
        let queue = std::sync::Arc::new(std::sync::Mutex::new(names.to_vec()));
        for _ in 0..POOL.min(names.len()) {
            let (tx, queue, r) = (tx.clone(), queue.clone(), *self);
            let spawned = std::thread::Builder::new().spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let Some(n) = next else { break };
                let got = r.lookup(&n).unwrap_or_default();
                if tx.send((n, got)).is_err() {
                    break;
                }
            });
            if spawned.is_err() {
                break;
            }
        }
        drop(tx);
        let deadline = Instant::now() + within;
        let mut out = Vec::new();
        while out.len() < names.len() {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(r) => out.push(r),
                Err(_) => break,
            }
        }
        out
    }
}

/// One A question to `server`.
fn ask(server: SocketAddr, name: &str) -> Result<Vec<Ipv4Addr>, Failure> {
    let bind = if server.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" };
    let sock = UdpSocket::bind(bind).map_err(|_| Failure::Failed)?;
    sock.connect(server).map_err(|_| Failure::Failed)?;
    let _ = sock.set_read_timeout(Some(UPSTREAM_TIMEOUT));
    let mut id = [0u8; 2];
    getrandom::fill(&mut id).map_err(|_| Failure::Failed)?;
    let id = u16::from_ne_bytes(id);
    let q = dns::build_query(id, name, dns::TYPE_A).map_err(|_| Failure::Failed)?;
    sock.send(&q).map_err(|_| Failure::Failed)?;
    let deadline = Instant::now() + UPSTREAM_TIMEOUT;
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        let n = sock.recv(&mut buf).map_err(|_| Failure::Failed)?;
        // An answer to something else (a late reply) is skipped, not trusted.
        if let Ok((rcode, records)) = dns::parse_answer(&buf[..n], id, name) {
            return match rcode {
                dns::NOERROR => Ok(records.into_iter().map(|(a, _)| a).collect()),
                dns::NXDOMAIN => Err(Failure::NotFound),
                _ => Err(Failure::Failed),
            };
        }
    }
    Err(Failure::Failed)
}

/// A lookup the relay asked for, and its answer.
pub struct Done {
    pub name: String,
    pub result: Result<Vec<Ipv4Addr>, Failure>,
}

/// The relay's resolver workers (`threads` of them, at most [`POOL`]; none when no name may
/// be resolved, and then every send fails): names in, results out, then a wake of the
/// relay's loop.
pub fn worker(
    resolver: Resolver,
    waker: std::sync::Arc<mio::Waker>,
    threads: usize,
) -> (mpsc::Sender<String>, mpsc::Receiver<Done>) {
    let (ask_tx, ask_rx) = mpsc::channel::<String>();
    let (done_tx, done_rx) = mpsc::channel();
    let ask_rx = std::sync::Arc::new(std::sync::Mutex::new(ask_rx));
    for _ in 0..threads.min(POOL) {
        let (ask_rx, done_tx, waker) = (ask_rx.clone(), done_tx.clone(), waker.clone());
        let spawned = std::thread::Builder::new()
            .name("egress-dns".into())
            .spawn(move || loop {
                let next = ask_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                let Ok(name) = next else { break };
                let result = resolver.lookup(&name);
                if done_tx.send(Done { name, result }).is_err() {
                    break;
                }
                let _ = waker.wake();
            });
        if spawned.is_err() {
            break;
        }
    }
    (ask_tx, done_rx)
}
