//! Roost load figures, printed and never asserted: `/health` requests/s and full delegation
//! cycles/s (register parent, spawn, register child with the approval, deregister child,
//! deregister parent) at 1 and 16 clients from one event-driven generator (one request per
//! connection; the cycles at 16 clients again from 16 blocking threads, a second
//! generator), each with p50/p99 and the daemon's own CPU per request or cycle and the
//! kernel's share of it (from `/proc/<pid>/stat`), medians of two rounds; `/health` latency while another client
//! resolves a 100 MiB artifact (and one of 15 MiB, inside the roost's bound) in a loop; RSS
//! after 10,000, 50,000 and 100,000 top-level register/deregister pairs; RSS and threads while
//! 2,000 idle connections are held; first, the cost of the per-account census alone (one
//! `NETLINK_SOCK_DIAG` lookup per top-level registration). Set MURMUR_REF_ROOST to the
//! reference `mur-roost` 0.8.0 binary (or an earlier build of ours) to measure it in the same
//! run. Run: `cargo bench --bench roost`.

mod support;

use murmur::http::client::{get, request, Options};
use murmur::registry::{self, archive};
use std::io::BufRead;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{ms, rss_kib, threads};

const RUN_FOR: Duration = Duration::from_secs(3);

fn registry() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("murmur-bench-roost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (name, body) in [
        ("orch", "capabilities:\n  spawn: {allow: [local/worker]}\n"),
        ("worker", ""),
    ] {
        let yaml = format!("name: {name}\nversion: 0.1.0\n{body}");
        let wasm = b"\0asm\x01\0\0\0".to_vec();
        let bytes = archive::write(&[
            ("murmur.yaml".into(), yaml.into_bytes()),
            ("capsule.wasm".into(), wasm),
        ])
        .unwrap();
        registry::publish(&dir, &bytes, Some("local")).unwrap();
    }
    dir
}

fn start(bin: &str, reg: &std::path::Path, port: u16) -> Child {
    let mut child = Command::new(bin)
        .args([
            "--port",
            &port.to_string(),
            "--registry-path",
            reg.to_str().unwrap(),
        ])
        .args([
            "--spawn-allow",
            "local/orch",
            "--spawn-allow",
            "local/big",
            "--spawn-allow",
            "local/bound",
            "--max-live-capsules",
            "256",
            "--max-concurrent",
            "64",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the port (the reference prints its lines on stderr, ours on stdout).
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return child;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let mut err = String::new();
    let _ = std::io::BufReader::new(child.stderr.take().unwrap()).read_line(&mut err);
    panic!("{bin} did not start: {err}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One delegation cycle for the event-driven generator: raw requests, one per connection.
struct Cycle {
    /// `host` for every request: the daemon's own `127.0.0.1:<port>`.
    host: String,
    sids: [String; 2],
    step: usize,
    parent: String,
    child: String,
}

impl Cycle {
    fn new(addr: SocketAddr, client: usize, n: u64) -> Cycle {
        let sid = |role: u64| format!("ses_{:08x}{:08x}{:016x}", client, role, n);
        Cycle {
            host: addr.to_string(),
            sids: [sid(1), sid(2)],
            step: 0,
            parent: String::new(),
            child: String::new(),
        }
    }
}

fn raw_post(host: &str, path: &str, header: Option<(&str, &str)>, body: &str) -> Vec<u8> {
    let extra = header.map(|(n, v)| format!("{n}: {v}\r\n")).unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl support::driver::Script for Cycle {
    fn next(&mut self, last: Option<(u16, &[u8])>) -> Result<Option<Vec<u8>>, ()> {
        let reply: serde_json::Value = match last {
            None => serde_json::Value::Null,
            Some((200, body)) => serde_json::from_slice(body).map_err(|_| ())?,
            Some(_) => return Err(()),
        };
        let field = |k: &str| reply[k].as_str().map(str::to_string).ok_or(());
        let register =
            |sid: &str, name: &str| format!(r#"{{"session_id":"{sid}","name":"{name}","version":"0.1.0"}}"#);
        const DONE: &str = r#"{"outcome":"complete"}"#;
        let host = self.host.as_str();
        self.step += 1;
        Ok(Some(match self.step {
            1 => raw_post(host, "/register", None, &register(&self.sids[0], "local/orch")),
            2 => {
                self.parent = field("credential")?;
                raw_post(
                    host,
                    "/spawn",
                    Some(("x-murmur-spawn-credential", &self.parent)),
                    r#"{"name":"local/worker","version":"0.1.0"}"#,
                )
            }
            3 => raw_post(
                host,
                "/register",
                Some(("x-murmur-spawn-approval", &field("approval")?)),
                &register(&self.sids[1], "local/worker"),
            ),
            4 => {
                self.child = field("credential")?;
                raw_post(
                    host,
                    "/deregister",
                    Some(("x-murmur-spawn-credential", &self.child)),
                    DONE,
                )
            }
            5 => raw_post(
                host,
                "/deregister",
                Some(("x-murmur-spawn-credential", &self.parent)),
                DONE,
            ),
            _ => return Ok(None),
        }))
    }
}

/// One top-level session that comes and goes: register, then deregister.
struct Pair {
    host: String,
    sid: String,
    step: usize,
}

impl support::driver::Script for Pair {
    fn next(&mut self, last: Option<(u16, &[u8])>) -> Result<Option<Vec<u8>>, ()> {
        self.step += 1;
        Ok(Some(match (self.step, last) {
            (1, None) => raw_post(
                &self.host,
                "/register",
                None,
                &format!(
                    r#"{{"session_id":"{}","name":"local/orch","version":"0.1.0"}}"#,
                    self.sid
                ),
            ),
            (2, Some((200, body))) => {
                let reply: serde_json::Value = serde_json::from_slice(body).map_err(|_| ())?;
                let credential = reply["credential"].as_str().ok_or(())?;
                raw_post(
                    &self.host,
                    "/deregister",
                    Some(("x-murmur-spawn-credential", credential)),
                    r#"{"outcome":"complete"}"#,
                )
            }
            (3, Some((200, _))) => return Ok(None),
            _ => return Err(()),
        }))
    }
}

/// The daemon's RSS (KiB) at each of [`MARKS`] register/deregister pairs and after
/// `PAIRS`, from 16 clients (pairs begun, RSS), and the failures.
fn memory_over_pairs(pid: u32, addr: SocketAddr) -> (Vec<(u64, u64)>, u64) {
    const PAIRS: u64 = 100_000;
    let made = std::rc::Rc::new(std::cell::Cell::new(0u64));
    let (mut marks, mut failed) = (Vec::new(), 0);
    while made.get() < PAIRS {
        let counter = std::rc::Rc::clone(&made);
        let l = support::driver::drive(addr, 16, Duration::from_millis(500), move |client, _| {
            counter.set(counter.get() + 1);
            Pair {
                host: addr.to_string(),
                sid: format!("ses_feed{:012x}{:016x}", client, counter.get()),
                step: 0,
            }
        });
        failed += l.failed;
        if marks.len() < MARKS.len() && made.get() >= MARKS[marks.len()] {
            marks.push((made.get(), rss_kib(pid)));
        }
    }
    marks.push((made.get(), rss_kib(pid)));
    (marks, failed)
}

/// Where [`memory_over_pairs`] reads the RSS before the end: once the ended-session history
/// is full (4,096) and the hold deadlines of the last 10 s are all in their heap.
const MARKS: [u64; 2] = [10_000, 50_000];

/// One `GET /health`, one request per connection, for the event-driven generator.
struct Health(String, bool);

impl support::driver::Script for Health {
    fn next(&mut self, last: Option<(u16, &[u8])>) -> Result<Option<Vec<u8>>, ()> {
        match last {
            None if !self.1 => {
                self.1 = true;
                Ok(Some(
                    format!(
                        "GET /health HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
                        self.0
                    )
                    .into_bytes(),
                ))
            }
            Some((200, _)) => Ok(None),
            _ => Err(()),
        }
    }
}

/// Rounds per level; the figures printed are their medians.
const ROUNDS: usize = 2;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// `rounds` runs of `run`, each with the daemon CPU (µs) it cost: medians of the rate, the
/// p50 and p99 (ms), the failures, and the CPU per completed unit (µs).
/// What [`rounds`] measured: medians of the rate, p50 and p99 (ms), the failures, the CPU
/// per completed unit (µs) and the kernel's share of it (%).
struct Rounds {
    rate: f64,
    p50: f64,
    p99: f64,
    failed: u64,
    cpu: f64,
    kernel_pct: f64,
}

fn rounds(pid: u32, run: &mut dyn FnMut() -> support::Load) -> Rounds {
    let (mut rate, mut p50, mut p99, mut failed) = (vec![], vec![], vec![], 0);
    let (mut cpu, mut kernel) = (vec![], vec![]);
    for _ in 0..ROUNDS {
        let (user0, sys0) = cpu_us(pid);
        let t = std::time::Instant::now();
        let l = run();
        let (user1, sys1) = cpu_us(pid);
        let (user, sys) = (
            user1.saturating_sub(user0) as f64,
            sys1.saturating_sub(sys0) as f64,
        );
        let done = (l.per_sec * t.elapsed().as_secs_f64()).max(1.0);
        rate.push(l.per_sec);
        p50.push(ms(l.p50));
        p99.push(ms(l.p99));
        failed += l.failed;
        cpu.push((user + sys) / done);
        kernel.push(100.0 * sys / (user + sys).max(1.0));
    }
    Rounds {
        rate: median(rate),
        p50: median(p50),
        p99: median(p99),
        failed,
        cpu: median(cpu),
        kernel_pct: median(kernel),
    }
}

/// `/health` latency from one client while another resolves `artifact` in a loop with
/// `POST /register`: (health p50 ms, p99 ms, max ms, resolves done, their statuses).
fn health_under_resolve(base: &str, artifact: &str) -> (f64, f64, f64, usize, Vec<u16>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let (b, a, s) = (base.to_string(), artifact.to_string(), Arc::clone(&stop));
    let resolver = std::thread::spawn(move || {
        let mut statuses = Vec::new();
        let opts = Options {
            read_timeout: Duration::from_secs(60),
            ..Options::default()
        };
        // Session ids unique across every call against the same daemon.
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        while !s.load(Ordering::Relaxed) {
            let n = N.fetch_add(1, Ordering::Relaxed) + 1;
            let body = format!(r#"{{"session_id":"ses_b{n:031x}","name":"{a}","version":"0.1.0"}}"#);
            let headers = [("content-type", "application/json")];
            let st = request("POST", &format!("{b}/register"), &headers, body.as_bytes(), &opts)
                .map(|r| r.status)
                .unwrap_or(0);
            statuses.push(st);
        }
        statuses
    });
    std::thread::sleep(Duration::from_millis(200));
    let mut times = Vec::new();
    let end = std::time::Instant::now() + RUN_FOR;
    while std::time::Instant::now() < end {
        let t = std::time::Instant::now();
        let ok = get(&format!("{base}/health"), &[], &Options::default()).is_ok_and(|r| r.status == 200);
        if ok {
            times.push(ms(t.elapsed()));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Relaxed);
    let mut statuses = resolver.join().unwrap();
    let done = statuses.len();
    statuses.sort_unstable();
    statuses.dedup();
    times.sort_by(f64::total_cmp);
    let pick = |q: f64| {
        times
            .get(((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    (
        pick(0.5),
        pick(0.99),
        times.last().copied().unwrap_or_default(),
        done,
        statuses,
    )
}

/// User and system CPU of `pid` so far, in microseconds.
fn cpu_us(pid: u32) -> (u64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest.split_whitespace().map(|x| x.parse().unwrap_or(0)).collect();
    let hz = rustix::param::clock_ticks_per_second().max(1);
    let us = |i: usize| f.get(i).copied().unwrap_or(0) * 1_000_000 / hz;
    (us(11), us(12))
}

fn measure(label: &str, bin: &str, reg: &std::path::Path, big: &[(&str, u64)]) {
    let port = free_port();
    let mut child = start(bin, reg, port);
    let base = format!("http://127.0.0.1:{port}");
    let pid = child.id();
    println!("{label} ({bin})");
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    for clients in [1, 16] {
        let r = rounds(pid, &mut || {
            support::driver::drive(addr, clients, RUN_FOR, move |_, _| {
                Health(addr.to_string(), false)
            })
        });
        println!(
            "  /health   {clients:>2} clients: {:>8.0} req/s   p50 {:.2} ms  p99 {:.2} ms  daemon CPU {:.0} µs/req, kernel {:.0} %  ({} failed)",
            r.rate, r.p50, r.p99, r.cpu, r.kernel_pct, r.failed
        );
    }
    let mut round = 0usize;
    for clients in [1, 16] {
        let r = rounds(pid, &mut || {
            round += 1;
            // Session ids are unique across runs against the same daemon.
            let base_id = round * 10_000;
            support::driver::drive(addr, clients, RUN_FOR, move |client, n| {
                Cycle::new(addr, base_id + client, n)
            })
        });
        println!(
            "  cycles    {clients:>2} clients: {:>8.0} cyc/s   p50 {:.2} ms  p99 {:.2} ms  daemon CPU {:.0} µs/cycle, kernel {:.0} %  ({} failed)",
            r.rate, r.p50, r.p99, r.cpu, r.kernel_pct, r.failed
        );
    }
    // The second generator: one blocking thread per client.
    let r = rounds(pid, &mut || {
        round += 1;
        let base_id = round * 10_000;
        support::driver::drive_blocking(addr, 16, RUN_FOR, move |client, n| {
            Cycle::new(addr, base_id + client, n)
        })
    });
    println!(
        "  cycles    16 threads: {:>8.0} cyc/s   p50 {:.2} ms  p99 {:.2} ms  daemon CPU {:.0} µs/cycle, kernel {:.0} %  ({} failed)  (one blocking thread per client)",
        r.rate, r.p50, r.p99, r.cpu, r.kernel_pct, r.failed
    );
    for (name, size) in big {
        let (p50, p99, max, done, statuses) = health_under_resolve(&base, name);
        println!(
            "  /health while one client resolves a {} MiB artifact in a loop: p50 {p50:.2} ms  p99 {p99:.2} ms  max {max:.2} ms  ({done} resolves, status {statuses:?})",
            size >> 20
        );
    }
    let (marks, failed) = memory_over_pairs(pid, addr);
    let marks: Vec<String> = marks
        .iter()
        .map(|(n, rss)| format!("{rss} KiB after {n}"))
        .collect();
    println!(
        "  pairs     register/deregister from 16 clients: rss {}  ({failed} failed)",
        marks.join(", ")
    );
    let (rss0, thr0) = (rss_kib(pid), threads(pid));
    let idle: Vec<TcpStream> = (0..2000).filter_map(|_| TcpStream::connect(addr).ok()).collect();
    std::thread::sleep(Duration::from_millis(500));
    let health = get(
        &format!("{base}/health"),
        &[],
        &Options {
            read_timeout: Duration::from_secs(5),
            ..Options::default()
        },
    )
    .map(|r| r.status)
    .unwrap_or(0);
    println!(
        "  idle      {} connections: rss {rss0} -> {} KiB, threads {thr0} -> {}, /health while held: {health}",
        idle.len(),
        rss_kib(pid),
        threads(pid)
    );
    drop(idle);
    let _ = child.kill();
    let _ = child.wait();
}

/// Publish `local/<name>@0.1.0` carrying `size` bytes of incompressible payload.
fn publish_big(reg: &std::path::Path, name: &str, size: u64) {
    let mut payload = vec![0u8; size as usize];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for chunk in payload.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
    let yaml = format!("name: {name}\nversion: 0.1.0\n");
    let bytes = archive::write(&[
        ("murmur.yaml".into(), yaml.into_bytes()),
        ("capsule.wasm".into(), b"\0asm\x01\0\0\0".to_vec()),
        ("payload.bin".into(), payload),
    ])
    .unwrap();
    registry::publish(reg, &bytes, Some("local")).unwrap();
}

/// What the per-account census adds to a delegation cycle: one `NETLINK_SOCK_DIAG` lookup
/// for its top-level registration, timed alone (µs per lookup, median of 5 runs of 20,000).
fn account_lookup_us() -> Option<f64> {
    let accounts = murmur::http::PeerAccounts::open().ok()?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
    let _client = TcpStream::connect(listener.local_addr().ok()?).ok()?;
    let (accepted, peer) = listener.accept().ok()?;
    let local = accepted.local_addr().ok()?;
    let runs: Vec<f64> = (0..5)
        .map(|_| {
            let t = std::time::Instant::now();
            for _ in 0..20_000 {
                let _ = accounts.owner(peer, local);
            }
            t.elapsed().as_secs_f64() * 1e6 / 20_000.0
        })
        .collect();
    Some(median(runs))
}

fn main() {
    murmur::http::raise_fd_limit(16_384);
    match account_lookup_us() {
        Some(us) => println!(
            "account lookup (NETLINK_SOCK_DIAG, once per top-level registration, so once per cycle): {us:.1} µs"
        ),
        None => println!("account lookup: NETLINK_SOCK_DIAG is not available here"),
    }
    let reg = registry();
    // One beyond the roost's per-request bound, one just inside it.
    let mut big = vec![("local/big", 100u64 << 20), ("local/bound", (15u64 << 20))];
    // MURMUR_BENCH_NO_BIG=1 leaves the large-artifact runs out (for profiling the cycles).
    if std::env::var_os("MURMUR_BENCH_NO_BIG").is_some() {
        big.clear();
    }
    for &(name, size) in &big {
        publish_big(&reg, name.trim_start_matches("local/"), size);
    }
    measure("ours: mur-roost", env!("CARGO_BIN_EXE_mur-roost"), &reg, &big);
    match std::env::var("MURMUR_REF_ROOST") {
        Ok(bin) if !bin.is_empty() => measure("reference: mur-roost 0.8.0", &bin, &reg, &big),
        _ => println!("reference: set MURMUR_REF_ROOST to a mur-roost 0.8.0 binary to compare"),
    }
    let _ = std::fs::remove_dir_all(&reg);
}
