//! The egress relay's cost, printed and never asserted. Upstream servers run on host threads
//! at 127.0.0.1; each figure is taken once directly (a host thread connects) and once through
//! the relay (a thread that has moved into the session's network namespace connects to the
//! same address, which the relay accepts, decides by the rules `localhost:PORT` and relays
//! from the host namespace):
//! - download: the server writes 100 MiB in 256 KiB writes, then closes; connect to EOF,
//!   median MiB/s of 5 runs (after one warm-up) and the ratio relay/direct (goal >= 0.8);
//! - upload: the client writes 100 MiB and half-closes, the server reads to EOF and answers
//!   the byte count; connect to that answer's EOF, likewise;
//! - connection setup: 1,000 sequential connections, each connect, 1-byte write, 1-byte
//!   echo, close; p50 and p99 per connection and the p50 the relay adds (goal <= 0.3 ms);
//! - this process's peak RSS (VmHWM), relay included.
//!
//! Needs root (a thread can join the namespace only then). `cargo bench --bench egress`

use murmur::containment::egress::{self, event::Decision};
use murmur::manifest::netrule::NetRule;
use rustix::thread::{move_into_link_name_space, LinkNameSpaceType};
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::Path;
use std::time::{Duration, Instant};

const MIB: usize = 1 << 20;
const TRANSFER: usize = 100 * MIB;
const CHUNK: usize = 256 << 10;
const RUNS: usize = 5;
const CONNS: usize = 1000;
const CONN_WARMUP: usize = 50;
/// A stalled transfer fails instead of hanging the bench.
const STALL: Duration = Duration::from_secs(30);

static DATA: [u8; CHUNK] = [0xa5; CHUNK];

/// Serve each connection of a fresh 127.0.0.1 listener, one at a time, on a host thread.
/// Returns the port.
fn serve(each: fn(TcpStream) -> std::io::Result<()>) -> u16 {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let _ = (s.set_read_timeout(Some(STALL)), s.set_write_timeout(Some(STALL)));
            let _ = each(s);
        }
    });
    port
}

fn send_all(mut s: TcpStream) -> std::io::Result<()> {
    for _ in 0..TRANSFER / CHUNK {
        s.write_all(&DATA)?;
    }
    Ok(())
}

/// Read `s` to EOF; the bytes read.
fn count(s: &mut TcpStream) -> std::io::Result<u64> {
    let (mut buf, mut n) = (vec![0u8; CHUNK], 0);
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Ok(n),
            Ok(k) => n += k as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn count_and_answer(mut s: TcpStream) -> std::io::Result<()> {
    let n = count(&mut s)?;
    s.write_all(&n.to_le_bytes())
}

fn echo(mut s: TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b)?;
    s.write_all(&b)
}

fn connect(port: u16) -> std::io::Result<TcpStream> {
    let s = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    s.set_read_timeout(Some(STALL))?;
    s.set_write_timeout(Some(STALL))?;
    Ok(s)
}

/// One 100 MiB download from `port`, connect to EOF.
fn download(port: u16) -> std::io::Result<Duration> {
    let t = Instant::now();
    let n = count(&mut connect(port)?)?;
    let took = t.elapsed();
    if n != TRANSFER as u64 {
        return Err(std::io::Error::other(format!("{n} of {TRANSFER} bytes arrived")));
    }
    Ok(took)
}

/// One 100 MiB upload to `port`, connect to the EOF after the server's byte count.
fn upload(port: u16) -> std::io::Result<Duration> {
    let mut answer = Vec::with_capacity(16);
    let t = Instant::now();
    let mut s = connect(port)?;
    for _ in 0..TRANSFER / CHUNK {
        s.write_all(&DATA)?;
    }
    s.shutdown(Shutdown::Write)?;
    s.read_to_end(&mut answer)?;
    let took = t.elapsed();
    let got = <[u8; 8]>::try_from(answer.as_slice())
        .ok()
        .map(u64::from_le_bytes);
    if got != Some(TRANSFER as u64) {
        return Err(std::io::Error::other(format!(
            "the server counted {got:?} of {TRANSFER} bytes"
        )));
    }
    Ok(took)
}

/// Connect, write one byte, read its echo, close.
fn echo_once(port: u16) -> std::io::Result<Duration> {
    let t = Instant::now();
    let mut s = connect(port)?;
    s.set_nodelay(true)?;
    s.write_all(&[7])?;
    let mut b = [0u8; 1];
    s.read_exact(&mut b)?;
    drop(s);
    Ok(t.elapsed())
}

/// Run `f` on a fresh thread; with `net`, the thread first moves into that network
/// namespace, so the sockets it opens live there.
fn on_thread<T: Send>(net: Option<BorrowedFd<'_>>, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(move || {
            if let Some(fd) = net {
                move_into_link_name_space(fd, Some(LinkNameSpaceType::Network))
                    .unwrap_or_else(|e| panic!("setns into the egress namespace: {e}"));
            }
            f()
        })
        .join()
        .unwrap()
    })
}

type Transfer = fn(u16) -> std::io::Result<Duration>;

/// Median MiB/s of `RUNS` transfers (after one warm-up), direct and through the relay,
/// alternated so drift hits both alike.
fn throughput(net: BorrowedFd<'_>, what: &str, run: Transfer, port: u16) -> (f64, f64) {
    let mut rates = [Vec::new(), Vec::new()];
    for i in 0..=RUNS {
        for (side, ns) in [None, Some(net)].into_iter().enumerate() {
            let label = if side == 0 { "direct" } else { "relay" };
            let took = on_thread(ns, || run(port)).unwrap_or_else(|e| panic!("{what} {label}: {e}"));
            if i > 0 {
                rates[side].push(TRANSFER as f64 / MIB as f64 / took.as_secs_f64());
            }
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let [d, r] = rates;
    (median(d), median(r))
}

/// p50 and p99 of `CONNS` echo connections (after a warm-up), and how many failed.
fn setup(net: Option<BorrowedFd<'_>>, port: u16) -> (Duration, Duration, usize) {
    let mut times: Vec<Duration> = on_thread(net, || {
        for _ in 0..CONN_WARMUP {
            let _ = echo_once(port);
        }
        (0..CONNS).filter_map(|_| echo_once(port).ok()).collect()
    });
    let failed = CONNS - times.len();
    times.sort();
    let pick = |q: f64| times.get((times.len() as f64 * q) as usize).copied();
    let pick = |q: f64| pick(q).unwrap_or_default();
    (pick(0.50), pick(0.99), failed)
}

fn row(what: &str, cells: [String; 3]) {
    let [a, b, c] = cells;
    println!("  {what:<36} {a:>14} {b:>14} {c:>14}");
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn main() {
    let down = serve(send_all);
    let up = serve(count_and_answer);
    let echoed = serve(echo);
    let rules: Vec<NetRule> = [down, up, echoed]
        .iter()
        .map(|p| NetRule::parse(&format!("localhost:{p}")).unwrap())
        .collect();
    let (egress, events) = match egress::start(Path::new(env!("CARGO_BIN_EXE_mur")), &rules) {
        Ok(e) => e,
        Err(d) => {
            println!("egress bench skipped: {d}");
            return;
        }
    };
    if egress.join.user.is_some() {
        println!("egress bench skipped: needs root (a threaded process cannot join a user namespace)");
        return;
    }
    // Keep what the relay reports other than clean closes: a refusal or failure here means a
    // broken figure, not a slow one.
    let drained = std::thread::spawn(move || {
        let odd = events
            .into_iter()
            .filter(|e| !matches!(e.decision, Decision::Closed { error: None, .. }));
        odd.map(|e| e.line()).collect::<Vec<_>>()
    });
    let net = egress.join.net.as_fd();

    println!("egress relay: upstreams on the host at 127.0.0.1; clients direct, or in the namespace");
    let (dl_direct, dl_relay) = throughput(net, "download", download, down);
    let (ul_direct, ul_relay) = throughput(net, "upload", upload, up);
    let (d50, d99, d_failed) = setup(None, echoed);
    let (r50, r99, r_failed) = setup(Some(net), echoed);

    row("", ["direct", "relay", "relay/direct"].map(String::from));
    let rate = |v: f64| format!("{v:.0} MiB/s");
    for (what, d, r) in [("download", dl_direct, dl_relay), ("upload", ul_direct, ul_relay)] {
        row(
            &format!("{what} 100 MiB, median of {RUNS}"),
            [rate(d), rate(r), format!("{:.2}", r / d)],
        );
    }
    for (q, d, r) in [("p50", d50, r50), ("p99", d99, r99)] {
        row(
            &format!("connect+echo+close {q} of {CONNS}"),
            [ms(d), ms(r), String::new()],
        );
    }
    let added = ms(r50.saturating_sub(d50));
    println!("  goals: relay/direct >= 0.80 both ways; added p50 {added} (<= 0.300 ms)");
    if d_failed + r_failed > 0 {
        println!("  failed connections: {d_failed} direct, {r_failed} relay");
    }
    let peak = peak_rss_kib();
    println!("  peak RSS of this process (relay included): {peak} KiB");

    drop(egress);
    let odd = drained.join().unwrap();
    if let Some(first) = odd.first() {
        let n = odd.len();
        println!("  the relay reported {n} refusals or failures, first: {first}");
    }
}
