//! The capsule door's A2A figures, printed and never asserted, through the real `mur run`:
//!
//! - round trips per second of a send that answers at once (0.3 `message/send` with
//!   `blocking: false`, 1.0 `SendMessage` with `returnImmediately`) followed by a get of the
//!   returned task (`tasks/get`, `GetTask`), against the hello WASM capsule under a
//!   `queue`/`sleep` lifecycle, from 1 and 2 blocking client threads, one connection per
//!   request; p50 and p99 of one round trip; how many sends the full queue rejected; and the
//!   CPU the door thread, the rest of the capsule process and this client spent per round
//!   trip, so a missed goal says where the time went. The 1.0 figure is taken twice: on
//!   the spec's open door and on an authenticated one (`capabilities.network.authentication`,
//!   every request carrying `Authorization: Bearer`), in turn and twice each in one run, so
//!   the gate's cost (its goal: at most 5 %) is read off the same machine at the same time.
//! - the door's resident memory before and while 1,000 `tasks/resubscribe` streams hang on
//!   one long task of the slow fixture, that keep-alive comments arrive on them, and that
//!   they end when the task is canceled.
//!
//! - an agent capsule's blocking round trip with `approvals` configured and no approval
//!   needed, against none configured ([`approvals`]).
//!
//! Run: `cargo bench --bench door` (`MURMUR_BENCH_MUR=PATH` measures another build of `mur`).

#[path = "door_approvals.rs"]
mod approvals;
#[path = "../tests/common/provider.rs"]
mod provider;
mod support;

use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{ms, rss_kib};

const WARM_UP: Duration = Duration::from_secs(1);
const RUN_FOR: Duration = Duration::from_secs(5);
const STREAMS: usize = 1000;
const BENCH_MANIFEST: &str = "name: bench\nversion: 1.0.0\nlifecycle:\n  task_acceptance: queue\n  after_task: sleep\n  queue_depth: 1024\n";
/// The authenticated door's block: one credential with every scope.
const AUTH_BLOCK: &str = "capabilities:\n  network:\n    authentication:\n      scheme: bearer\n      credentials:\n        - {name: bench, scopes: ['*']}\n";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A served capsule: the `mur run` child, the pid it announced and its door.
struct Capsule {
    child: Child,
    pid: u32,
    addr: SocketAddr,
    host: String,
    /// `authorization: Bearer <token>\r\n` on an authenticated door, else empty.
    auth: String,
}

fn launch(base: &Path, label: &str, wasm: &str) -> Capsule {
    launch_with(base, label, wasm, false)
}

/// [`launch`], with an authenticated door when `authenticated` (its token read from the
/// session's `door-tokens.json`).
fn launch_with(base: &Path, label: &str, wasm: &str, authenticated: bool) -> Capsule {
    let dir = base.join(label);
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::copy(repo(wasm), dir.join("capsule.wasm")).unwrap();
    let manifest = if authenticated {
        format!("{BENCH_MANIFEST}{AUTH_BLOCK}")
    } else {
        BENCH_MANIFEST.to_string()
    };
    std::fs::write(dir.join("murmur.yaml"), manifest).unwrap();
    let stderr = std::fs::File::create(dir.join("stderr.log")).unwrap();
    let mut child = Command::new(support::mur_binary())
        .args(["run", "--json", "--manifest"])
        .arg(dir.join("murmur.yaml"))
        .arg("--workdir")
        .arg(&work)
        .env("MURMUR_CACHE_DIR", base.join("cache"))
        .env("MURMUR_RECORDS_DIR", base.join("records"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let (port, pid, v) = support::announced(&mut child).unwrap_or_else(|e| panic!("{e}"));
    let auth = if authenticated {
        let sid = v["session_id"].as_str().unwrap();
        let file = base.join("records").join(sid).join("door-tokens.json");
        let tokens: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        format!(
            "authorization: Bearer {}\r\n",
            tokens["tokens"]["bench"].as_str().unwrap()
        )
    } else {
        String::new()
    };
    Capsule {
        child,
        pid,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        host: format!("127.0.0.1:{port}"),
        auth,
    }
}

fn stop(mut c: Capsule, label: &str, base: &Path) {
    // SIGTERM to the pid of a child this bench started and has not yet reaped.
    if let Some(pid) = rustix::process::Pid::from_raw(c.pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let t = Instant::now();
    loop {
        match c.child.try_wait() {
            Ok(Some(status)) => {
                if !status.success() {
                    let log =
                        std::fs::read_to_string(base.join(label).join("stderr.log")).unwrap_or_default();
                    println!("  note: {label} capsule exited {status} after SIGTERM; stderr:\n{log}");
                }
                return;
            }
            _ if t.elapsed() > Duration::from_secs(10) => {
                println!("  note: {label} capsule still running 10 s after SIGTERM; killed");
                let _ = c.child.kill();
                let _ = c.child.wait();
                return;
            }
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// One request on its own connection, read to the server's close: status and body.
fn post(c: &Capsule, body: &[u8], v10: bool, buf: &mut Vec<u8>) -> Option<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(c.addr).ok()?;
    let _ = s.set_nodelay(true);
    let version = if v10 { "a2a-version: 1.0\r\n" } else { "" };
    let mut req = format!(
        "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\n{version}{}content-length: {}\r\n\r\n",
        c.host,
        c.auth,
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req).ok()?;
    buf.clear();
    s.read_to_end(buf).ok()?;
    let status = buf.get(9..12)?;
    let status: u16 = std::str::from_utf8(status).ok()?.parse().ok()?;
    let at = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    Some((status, buf[at..].to_vec()))
}

fn rpc(c: &Capsule, v10: bool, method: &str, id: u64, params: Value) -> Option<(u16, Value)> {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let (status, body) = post(c, &serde_json::to_vec(&body).unwrap(), v10, &mut Vec::new())?;
    Some((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

/// The task of a send result or a get result, per generation.
fn task_of(v10: bool, result: &Value, is_send: bool) -> &Value {
    if v10 && is_send {
        &result["task"]
    } else {
        result
    }
}

fn state_of(v10: bool, task: &Value) -> String {
    let s = task["status"]["state"].as_str().unwrap_or("");
    if v10 {
        s.trim_start_matches("TASK_STATE_").to_ascii_lowercase()
    } else {
        s.to_string()
    }
}

/// Counters of one load run beyond what `support::load` keeps.
#[derive(Default)]
struct Odd {
    rejected: AtomicU64,
    non_200: AtomicU64,
    rpc_errors: AtomicU64,
    /// Gets that failed with -32001 (task not found) after a send.
    not_found: AtomicU64,
    /// ... of them, after a send that was rejected.
    not_found_rejected: AtomicU64,
    io_errors: AtomicU64,
    last_error: std::sync::Mutex<Option<String>>,
}

impl Odd {
    fn note(&self, counter: &AtomicU64, what: String) {
        counter.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap() = Some(what);
    }
}

/// One send + get round trip; whether it made a whole protocol round trip.
fn round_trip(c: &Capsule, v10: bool, client: usize, n: u64, odd: &Odd, buf: &mut Vec<u8>) -> bool {
    let message_id = format!("bench-{client}-{n}");
    let (send, get) = if v10 {
        (
            json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": {
                "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "bench"}]},
                "configuration": {"returnImmediately": true}}}),
            "GetTask",
        )
    } else {
        (
            json!({"jsonrpc": "2.0", "id": n, "method": "message/send", "params": {
                "message": {"kind": "message", "messageId": message_id, "role": "user",
                            "parts": [{"kind": "text", "text": "bench"}]},
                "configuration": {"blocking": false}}}),
            "tasks/get",
        )
    };
    let call = |body: &Value, buf: &mut Vec<u8>| -> Option<Value> {
        let Some((status, body)) = post(c, &serde_json::to_vec(body).unwrap(), v10, buf) else {
            odd.note(&odd.io_errors, "connect/write/read failed".into());
            return None;
        };
        if status != 200 {
            odd.note(
                &odd.non_200,
                format!("HTTP {status}: {}", String::from_utf8_lossy(&body)),
            );
            return None;
        }
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if v.get("result").is_none() {
            if v["error"]["code"] == -32001 {
                odd.not_found.fetch_add(1, Ordering::Relaxed);
            }
            odd.note(&odd.rpc_errors, format!("no result: {v}"));
            return None;
        }
        Some(v)
    };
    let Some(sent) = call(&send, buf) else {
        return false;
    };
    let task = task_of(v10, &sent["result"], true);
    let Some(id) = task["id"].as_str() else {
        odd.note(&odd.rpc_errors, format!("no task id: {sent}"));
        return false;
    };
    let rejected = state_of(v10, task) == "rejected";
    if rejected {
        odd.rejected.fetch_add(1, Ordering::Relaxed);
    }
    let get = json!({"jsonrpc": "2.0", "id": n, "method": get, "params": {"id": id}});
    let before = odd.not_found.load(Ordering::Relaxed);
    let Some(got) = call(&get, buf) else {
        if rejected && odd.not_found.load(Ordering::Relaxed) > before {
            odd.not_found_rejected.fetch_add(1, Ordering::Relaxed);
        }
        return false;
    };
    if got["result"]["id"].as_str() != Some(id) {
        odd.note(&odd.rpc_errors, format!("get answered another task: {got}"));
        return false;
    }
    true
}

/// utime + stime of a `stat` line, clock ticks.
fn stat_ticks(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat[open + 1..close].to_string();
    let f: Vec<&str> = stat[close + 2..].split(' ').collect();
    // Fields 14 and 15 (utime, stime) of proc(5), `state` (field 3) being f[0].
    Some((
        name,
        f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
    ))
}

/// CPU seconds: (door thread, rest of the capsule process, this bench process). Process
/// totals include threads that already exited (per-task deadline and log threads, the load
/// loop's clients).
fn cpu(pid: u32) -> (f64, f64, f64) {
    let hz = rustix::param::clock_ticks_per_second() as f64;
    let total = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| stat_ticks(&s))
            .map_or(0, |t| t.1)
    };
    let door: u64 = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|e| stat_ticks(&std::fs::read_to_string(e.ok()?.path().join("stat")).ok()?))
        .filter(|(n, _)| n == "door")
        .map(|t| t.1)
        .sum();
    let all = total(pid);
    (
        door as f64 / hz,
        all.saturating_sub(door) as f64 / hz,
        total(std::process::id()) as f64 / hz,
    )
}

/// Machine-wide (busy, all) CPU ticks from `/proc/stat`.
fn busy_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let all: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    (all - idle, all)
}

/// Wait until the capsule has nothing queued: a fresh task sent last settles. How long that
/// took, and, when it waited behind at least 100 others (counted by a 1.0 ListTasks of
/// submitted tasks), the rate at which the capsule ran its tasks meanwhile.
fn drain(c: &Capsule, v10: bool) -> (Duration, Option<f64>) {
    let t = Instant::now();
    let (send, get) = if v10 {
        ("SendMessage", "GetTask")
    } else {
        ("message/send", "tasks/get")
    };
    loop {
        let params = if v10 {
            json!({"message": {"messageId": format!("drain-{}", t.elapsed().as_nanos()),
                   "role": "ROLE_USER", "parts": [{"text": "drain"}]},
                   "configuration": {"returnImmediately": true}})
        } else {
            json!({"message": {"kind": "message", "messageId": format!("drain-{}", t.elapsed().as_nanos()),
                   "role": "user", "parts": [{"kind": "text", "text": "drain"}]},
                   "configuration": {"blocking": false}})
        };
        let Some((_, v)) = rpc(c, v10, send, 1, params) else {
            return (t.elapsed(), None);
        };
        let task = task_of(v10, &v["result"], true);
        let id = task["id"].as_str().unwrap_or("").to_string();
        if state_of(v10, task) == "rejected" {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let accepted = Instant::now();
        let list = json!({"status": "TASK_STATE_SUBMITTED", "pageSize": 1});
        let waiting = rpc(c, true, "ListTasks", 3, list)
            .and_then(|(_, v)| v["result"]["totalSize"].as_u64())
            .unwrap_or(0);
        loop {
            let Some((_, v)) = rpc(c, v10, get, 2, json!({"id": id})) else {
                return (t.elapsed(), None);
            };
            let s = state_of(v10, &v["result"]);
            if matches!(s.as_str(), "completed" | "failed" | "canceled" | "rejected" | "") {
                // It and those before it, and the one running when it was accepted.
                let rate = (waiting >= 100).then(|| (waiting + 1) as f64 / accepted.elapsed().as_secs_f64());
                return (t.elapsed(), rate);
            }
            if t.elapsed() > Duration::from_secs(120) {
                println!("  note: the queue did not drain in 120 s");
                return (t.elapsed(), None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn throughput(c: &Arc<Capsule>, v10: bool) {
    let label = if v10 {
        "1.0 SendMessage(returnImmediately) + GetTask (a2a-version: 1.0)"
    } else {
        "0.3 message/send(blocking: false) + tasks/get"
    };
    let door = if c.auth.is_empty() {
        "open door"
    } else {
        "authenticated door, a bearer token on every request"
    };
    println!("{label}, {door}:");
    for clients in [1, 2] {
        let warm = Arc::new(Odd::default());
        let (cc, w) = (Arc::clone(c), Arc::clone(&warm));
        support::load(clients, WARM_UP, move |client, n| {
            round_trip(&cc, v10, client, n, &w, &mut Vec::with_capacity(1024))
        });
        let (drained, task_rate) = drain(c, v10);
        let odd = Arc::new(Odd::default());
        let (cc, o) = (Arc::clone(c), Arc::clone(&odd));
        let before = cpu(c.pid);
        let machine = busy_ticks();
        let l = support::load(clients, RUN_FOR, move |client, n| {
            round_trip(&cc, v10, client, n, &o, &mut Vec::with_capacity(1024))
        });
        let after = cpu(c.pid);
        let now = busy_ticks();
        let machine = now.0.saturating_sub(machine.0) as f64 / now.1.saturating_sub(machine.1).max(1) as f64;
        let trips = l.per_sec * RUN_FOR.as_secs_f64();
        let per = |a: f64, b: f64| (b - a) * 1e6 / trips.max(1.0);
        let rejected = odd.rejected.load(Ordering::Relaxed);
        println!(
            "  {clients} client thread(s): {:>7.0} round trips/s  p50 {:.3} ms  p99 {:.3} ms   (goal: >= 5,000 round trips/s)",
            l.per_sec,
            ms(l.p50),
            ms(l.p99)
        );
        println!(
            "    {:.0} round trips, {rejected} sends rejected (queue full, {:.1}% of sends), {} failed: {} non-200, {} JSON-RPC errors ({} gets -32001 task not found, {} of them of a rejected task), {} I/O errors",
            trips,
            rejected as f64 * 100.0 / (trips + l.failed as f64).max(1.0),
            l.failed,
            odd.non_200.load(Ordering::Relaxed),
            odd.rpc_errors.load(Ordering::Relaxed),
            odd.not_found.load(Ordering::Relaxed),
            odd.not_found_rejected.load(Ordering::Relaxed),
            odd.io_errors.load(Ordering::Relaxed),
        );
        println!(
            "    before the run the queue drained in {:.1} s{}",
            drained.as_secs_f64(),
            task_rate.map_or(String::new(), |r| format!(
                " (the capsule ran {r:.0} tasks/s meanwhile)"
            ))
        );
        println!(
            "    CPU per round trip: door thread {:.0} µs, rest of the capsule (task runs) {:.0} µs, client {:.0} µs; both cores {:.0}% busy (all processes)",
            per(before.0, after.0),
            per(before.1, after.1),
            per(before.2, after.2),
            machine * 100.0
        );
        let last = odd.last_error.lock().unwrap().clone();
        if let Some(e) = last {
            println!("    last failure: {}", short(&e));
        }
    }
}

/// Read from `s` until `done(bytes)` or the timeout; what was read.
fn read_until(s: &mut TcpStream, timeout: Duration, done: impl Fn(&[u8]) -> bool) -> (Vec<u8>, bool) {
    let end = Instant::now() + timeout;
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    while !done(&got) {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (got, false);
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut chunk) {
            Ok(0) => return (got, false),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return (got, false),
        }
    }
    (got, true)
}

/// At most 300 characters of `s`, for a note.
fn short(s: &str) -> String {
    s.chars().take(300).collect()
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Whether the bytes after the response head hold one whole `data: …\n\n` event.
fn has_event(b: &[u8]) -> bool {
    let Some(head) = b.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let body = &b[head + 4..];
    body.windows(6)
        .position(|w| w == b"data: ")
        .is_some_and(|at| contains(&body[at..], b"\n\n"))
}

fn streams(c: &Capsule) {
    println!(
        "memory with {STREAMS} open streams (tests/fixtures/slow, one `sleep 60` task, tasks/resubscribe):"
    );
    let send = json!({"message": {"kind": "message", "messageId": "bench-sleep", "role": "user",
                      "parts": [{"kind": "text", "text": "sleep 60"}]},
                      "configuration": {"blocking": false}});
    let (status, v) = rpc(c, false, "message/send", 1, send).expect("send the long task");
    let id = v["result"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("HTTP {status}: {v}"))
        .to_string();
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        let (_, v) = rpc(c, false, "tasks/get", 2, json!({"id": id})).expect("get");
        if v["result"]["status"]["state"] == "working" {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let before = rss_kib(c.pid);
    let body = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/resubscribe",
                                          "params": {"id": id}}))
    .unwrap();
    let req = [
        format!(
            "POST / HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            c.host,
            body.len()
        )
        .into_bytes(),
        body,
    ]
    .concat();
    let opened = Instant::now();
    let mut open = Vec::with_capacity(STREAMS);
    let (mut refused, mut first_error) = (0, None);
    for _ in 0..STREAMS {
        let attached = TcpStream::connect(c.addr).ok().and_then(|mut s| {
            s.write_all(&req).ok()?;
            let (got, ok) = read_until(&mut s, Duration::from_secs(5), has_event);
            if ok && got.starts_with(b"HTTP/1.1 200") && contains(&got, b"text/event-stream") {
                Some(s)
            } else {
                first_error.get_or_insert_with(|| String::from_utf8_lossy(&got).into_owned());
                None
            }
        });
        match attached {
            Some(s) => open.push(s),
            None => refused += 1,
        }
    }
    let open_took = opened.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let holding = rss_kib(c.pid);
    let delta = holding.saturating_sub(before);
    println!(
        "  rss: {before} KiB before, {holding} KiB holding {} streams: +{:.2} MiB, {:.2} KiB per stream   (goal: <= 20 MiB for 1,000 streams)",
        open.len(),
        delta as f64 / 1024.0,
        delta as f64 / open.len().max(1) as f64
    );
    println!(
        "  {} streams attached (first event read) in {:.2} s, {refused} not attached",
        open.len(),
        open_took.as_secs_f64()
    );
    if let Some(e) = first_error {
        println!("    first failure: {}", short(&e));
    }
    // A keep-alive comment on a sample of streams: the door writes one after 3 s quiet.
    let sample: Vec<usize> = (0..open.len()).step_by(100).collect();
    let mut alive = 0;
    let mut latest = Duration::ZERO;
    for &i in &sample {
        let (got, ok) = read_until(&mut open[i], Duration::from_secs(6), |b| {
            contains(b, b": keep-alive")
        });
        if ok {
            alive += 1;
            latest = latest.max(opened.elapsed());
        } else if alive == 0 {
            println!(
                "    no keep-alive on stream {i}: {:?}",
                String::from_utf8_lossy(&got)
            );
        }
    }
    println!(
        "  keep-alive comment seen on {alive}/{} sampled streams (all within {:.1} s of the first open)",
        sample.len(),
        latest.as_secs_f64()
    );
    let during = rss_kib(c.pid);
    let cancel_at = Instant::now();
    let (_, v) = rpc(c, false, "tasks/cancel", 4, json!({"id": id})).expect("cancel");
    let canceled = v["result"]["status"]["state"].as_str().unwrap_or("?").to_string();
    let (mut ended, mut with_final, mut not_ended) = (0, 0, 0);
    for s in open.iter_mut() {
        let end = Instant::now() + Duration::from_secs(10);
        let mut got = Vec::new();
        let _ = s.set_read_timeout(Some(
            end.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1)),
        ));
        match s.read_to_end(&mut got) {
            Ok(_) => {
                ended += 1;
                if contains(&got, b"\"final\":true") && contains(&got, b"canceled") {
                    with_final += 1;
                }
            }
            Err(_) => not_ended += 1,
        }
    }
    println!(
        "  tasks/cancel answered {canceled}; {ended} streams ended ({with_final} with a final canceled status-update), {not_ended} still open after 10 s; all read in {:.2} s",
        cancel_at.elapsed().as_secs_f64()
    );
    drop(open);
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "  rss: {during} KiB just before the cancel, {} KiB after the streams closed",
        rss_kib(c.pid)
    );
}

fn main() {
    murmur::http::raise_fd_limit(8192);
    let base = std::env::temp_dir().join(format!("murmur-bench-door-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();

    let hello = Arc::new(launch(&base, "hello", "examples/hello/capsule.wasm"));
    println!(
        "door bench: mur run (pid {}) at {}, hello capsule, queue_depth 1024, one connection per request, {} s per figure after {} s warm-up",
        hello.pid,
        hello.host,
        RUN_FOR.as_secs(),
        WARM_UP.as_secs()
    );
    throughput(&hello, false);
    // Open and authenticated 1.0 doors taken in turn, twice, so the machine's drift during
    // the run falls on both alike.
    let guarded = Arc::new(launch_with(
        &base,
        "hello-auth",
        "examples/hello/capsule.wasm",
        true,
    ));
    for _ in 0..2 {
        throughput(&hello, true);
        throughput(&guarded, true);
    }
    for (c, label) in [(hello, "hello"), (guarded, "hello-auth")] {
        stop(
            Arc::try_unwrap(c).ok().expect("no client holds the capsule"),
            label,
            &base,
        );
    }

    let slow = launch(&base, "slow", "tests/fixtures/slow/capsule.wasm");
    streams(&slow);
    stop(slow, "slow", &base);
    approvals::approvals(&base);
    let _ = std::fs::remove_dir_all(&base);
}
