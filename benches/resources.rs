//! The operator resource plane's figures (`exports.files`), printed and never asserted (only
//! the bytes and counts are), through the real `mur run` serving the slow WASM fixture kept
//! up between tasks (`queue`/`sleep`) over a workdir the bench fills beforehand:
//!
//! - `GET /resources/files/big.bin` of a 10 MiB file of random bytes: reads per second and
//!   MiB/s from 1 and from 4 blocking client threads, one connection per read, each read
//!   to the server's close; the length of every 200 is checked (a wrong one stops the
//!   bench), and for the first read of each run that sha256(body) is the file's digest and
//!   the `etag`; reads that fail (I/O error, or not 200 such as a 408 or 503) are counted.
//! - The same against nginx (`sendfile on`, 2 workers) serving a copy of the file from a
//!   static root, and the ratio mur/nginx of the MiB/s (goal: >= 0.7). nginx is installed
//!   with apt-get when it is missing and the bench runs as root; otherwise the comparison is
//!   skipped and the reason printed.
//! - mur's resident memory (VmRSS, VmHWM; VmHWM reset through `clear_refs` first) before
//!   and at its peak while 64 clients read the file at once, 3 rounds, with mur's open
//!   descriptors as evidence of how many reads were in flight together.
//! - `GET /resources/files` of a 10,000-file tree (100 directories of 100 files of 1 KiB):
//!   the first listing and the median of 5 more, the entry count checked.
//!
//! Run: `cargo bench --bench resources` (`MURMUR_BENCH_MUR=PATH` measures another build of `mur`).

mod support;

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};
use support::{ms, rss_kib};

const MIB: f64 = 1024.0 * 1024.0;
/// The big file's size.
const BIG: usize = 10 * 1024 * 1024;
const WARM_UP: Duration = Duration::from_millis(500);
const RUN_FOR: Duration = Duration::from_secs(3);
/// Concurrent readers of the memory figure, and how many reads each makes.
const MEM_CLIENTS: usize = 64;
const MEM_ROUNDS: usize = 3;
/// The listed tree: directories × files of `TREE_FILE_BYTES`.
const TREE_DIRS: usize = 100;
const TREE_FILES: usize = 100;
const TREE_FILE_BYTES: usize = 1024;
const LISTINGS: usize = 5;
/// Each client thread's read buffer.
const READ_BUF: usize = 256 * 1024;
const MANIFEST: &str = "name: bench-resources\nversion: 1.0.0\nlifecycle:\n  task_acceptance: queue\n  after_task: sleep\nexports:\n  files:\n    root: out/\n    mode: read-only\n    max_bytes: 20Mi\n";

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The bench's scratch directory, removed when dropped (after the servers, declared later).
struct Base(PathBuf);

impl Drop for Base {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where a server listens, as the client threads need it.
#[derive(Clone)]
struct Target {
    name: &'static str,
    addr: SocketAddr,
    host: String,
    /// Where it serves the exported files: `/resources/files` for mur, `` for nginx.
    prefix: &'static str,
}

/// A server child (`mur run` or nginx), owned by `main` alone and stopped by pid when
/// dropped, so a failed check does not leave it running.
struct Server {
    at: Target,
    child: Child,
    pid: u32,
    /// Its stderr or error log, shown when it ends badly.
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM to the pid of a child this bench started and has not yet reaped.
        if let Some(pid) = rustix::process::Pid::from_raw(self.pid as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let t = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    if !status.success() {
                        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                        println!(
                            "  note: {} exited {status} after SIGTERM; log:\n{}",
                            self.at.name,
                            tail(&log)
                        );
                    }
                    return;
                }
                Ok(None) if t.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    println!(
                        "  note: {} still running 10 s after SIGTERM; killed",
                        self.at.name
                    );
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return;
                }
            }
        }
    }
}

/// The last 2,000 characters of a log, for a note.
fn tail(s: &str) -> &str {
    let mut at = s.len().saturating_sub(2000);
    while !s.is_char_boundary(at) {
        at += 1;
    }
    &s[at..]
}

/// `mur run --json` of the slow fixture with the `exports.files` manifest over `work`
/// (already filled), its records and cache under `base`.
fn launch_mur(base: &Path, label: &str, work: &Path) -> Server {
    let dir = base.join(label);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo("tests/fixtures/slow/capsule.wasm"), dir.join("capsule.wasm")).unwrap();
    std::fs::write(dir.join("murmur.yaml"), MANIFEST).unwrap();
    let log = dir.join("stderr.log");
    let mut child = Command::new(support::mur_binary())
        .args(["run", "--json", "--manifest"])
        .arg(dir.join("murmur.yaml"))
        .arg("--workdir")
        .arg(work)
        .env("MURMUR_CACHE_DIR", base.join("cache"))
        .env("MURMUR_RECORDS_DIR", base.join("records"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let (port, pid, _) = support::announced(&mut child).unwrap_or_else(|e| {
        let _ = child.kill();
        let _ = child.wait();
        let err = std::fs::read_to_string(&log).unwrap_or_default();
        panic!("{e}; stderr:\n{}", tail(&err))
    });
    Server {
        at: Target {
            name: "mur",
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            host: format!("127.0.0.1:{port}"),
            prefix: "/resources/files",
        },
        child,
        pid,
        log,
    }
}

fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/local/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The nginx binary, installed quietly with apt-get when it is missing and this is root.
fn nginx_binary() -> Result<PathBuf, String> {
    if let Some(p) = in_path("nginx") {
        return Ok(p);
    }
    if !rustix::process::geteuid().is_root() {
        return Err("nginx is not on PATH, and the bench installs it only when run as root".into());
    }
    let Some(apt) = in_path("apt-get") else {
        return Err("nginx is not on PATH and there is no apt-get to install it".into());
    };
    println!("  nginx is not on PATH: installing it with apt-get ...");
    let apt_get = |args: &[&str]| {
        Command::new(&apt)
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("apt-get {}: {e}", args.join(" ")))
            .and_then(|o| {
                if o.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "apt-get {} exited {}: {}",
                        args.join(" "),
                        o.status,
                        tail(String::from_utf8_lossy(&o.stderr).trim())
                    ))
                }
            })
    };
    let mut last = String::new();
    // The package lists may be missing or stale: a second round after an update.
    for round in 0..2 {
        if round == 1 {
            if let Err(e) = apt_get(&["update", "-qq"]) {
                last = e;
                break;
            }
        }
        for pkg in ["nginx-light", "nginx"] {
            match apt_get(&["install", "-y", "-qq", "--no-install-recommends", pkg]) {
                Ok(()) => {
                    if let Some(p) = in_path("nginx") {
                        println!("  installed {pkg}: {}", p.display());
                        return Ok(p);
                    }
                    last = format!("apt-get installed {pkg} but no nginx binary is on PATH");
                }
                Err(e) => last = e,
            }
        }
    }
    Err(format!("nginx could not be installed: {last}"))
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nginx in the foreground (master and 2 workers) serving `<dir>/out` with sendfile.
fn launch_nginx(dir: &Path) -> Result<Server, String> {
    let bin = nginx_binary()?;
    let port = free_port();
    let d = dir.display();
    let conf = format!(
        "daemon off;\nmaster_process on;\nworker_processes 2;\nerror_log {d}/error.log warn;\npid {d}/nginx.pid;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n    sendfile on;\n    client_body_temp_path {d}/client_body;\n\
         \x20   server {{\n        listen 127.0.0.1:{port};\n        root {d}/out;\n    }}\n}}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let log = dir.join("error.log");
    let mut child = Command::new(&bin)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .arg("-p")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
        .spawn()
        .map_err(|e| format!("{} did not start: {e}", bin.display()))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let t = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            let err = std::fs::read_to_string(dir.join("stderr.log")).unwrap_or_default();
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!(
                "nginx exited {status} at start: {}{}",
                tail(&err),
                tail(&log)
            ));
        }
        if TcpStream::connect(addr).is_ok() {
            break;
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("nginx did not listen on {addr} within 10 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id();
    Ok(Server {
        at: Target {
            name: "nginx",
            addr,
            host: format!("127.0.0.1:{port}"),
            prefix: "",
        },
        child,
        pid,
        log,
    })
}

/// One answer: its head, the body's length, and the body when asked to keep it.
struct Fetched {
    status: u16,
    head: String,
    len: u64,
    body: Vec<u8>,
}

impl Fetched {
    fn header(&self, name: &str) -> Option<&str> {
        self.head
            .split("\r\n")
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, v)| v.trim())
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `GET target` on a fresh connection (`connection: close`), read to the server's close.
fn fetch(s: &Target, target: &str, keep: bool, buf: &mut [u8]) -> std::io::Result<Fetched> {
    let mut c = TcpStream::connect(s.addr)?;
    c.set_nodelay(true)?;
    c.set_read_timeout(Some(Duration::from_secs(60)))?;
    let req = format!(
        "GET {target} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n",
        s.host
    );
    c.write_all(req.as_bytes())?;
    let mut head = Vec::new();
    let mut body = Vec::new();
    let mut len = 0u64;
    let mut in_body = false;
    loop {
        let n = match c.read(buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if in_body {
            len += n as u64;
            if keep {
                body.extend_from_slice(&buf[..n]);
            }
            continue;
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(at) = find(&head, b"\r\n\r\n") {
            let rest = head.split_off(at + 4);
            len += rest.len() as u64;
            if keep {
                body = rest;
            }
            in_body = true;
        } else if head.len() > 64 * 1024 {
            return Err(std::io::Error::other("no end of head in 64 KiB"));
        }
    }
    if !in_body {
        return Err(std::io::Error::other(format!(
            "closed before a whole head: {:?}",
            String::from_utf8_lossy(&head)
        )));
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok(Fetched {
        status,
        head,
        len,
        body,
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// How a read of the big file went wrong.
enum Bad {
    /// No whole answer (an I/O error) or a refusal (not 200): counted and shown.
    Failed(String),
    /// A 200 whose length, digest or etag is not the file's: the bench stops.
    Wrong(String),
}

/// Judge a read of the big file: a 200 must carry its length and, for a kept body, its
/// digest (and, from mur, the etag that names it).
fn judge(s: &Target, got: std::io::Result<Fetched>, sha: &str) -> Result<(), Bad> {
    let f = got.map_err(|e| Bad::Failed(e.to_string()))?;
    if f.status != 200 {
        let line = f.head.lines().next().unwrap_or("").to_string();
        return Err(Bad::Failed(line));
    }
    check_big(s, &f, sha).map_err(Bad::Wrong)
}

fn check_big(s: &Target, f: &Fetched, sha: &str) -> Result<(), String> {
    let name = s.name;
    if f.header("content-length").and_then(|v| v.parse::<u64>().ok()) != Some(BIG as u64) {
        return Err(format!("{name}: content-length is not {BIG}: {}", f.head));
    }
    if f.len != BIG as u64 {
        return Err(format!("{name} sent {} body bytes of {BIG}", f.len));
    }
    if f.body.is_empty() {
        return Ok(());
    }
    let got = hex(&Sha256::digest(&f.body));
    if got != sha {
        return Err(format!("{name}: the body's sha256 is {got}, the file's {sha}"));
    }
    if name == "mur" && f.header("etag") != Some(format!("\"sha256:{got}\"").as_str()) {
        return Err(format!(
            "mur's etag does not name the body's sha256 {got}: {}",
            f.head
        ));
    }
    Ok(())
}

thread_local! {
    static BUF: RefCell<Vec<u8>> = RefCell::new(vec![0; READ_BUF]);
}

/// What a throughput run measured.
struct Rate {
    per_sec: f64,
    mib_s: f64,
}

/// Reads of the big file from `clients` threads for `RUN_FOR` after a warm-up.
fn throughput(s: &Target, clients: usize, sha: &Arc<String>) -> Rate {
    let run = |run_for: Duration| {
        let first = Arc::new(AtomicBool::new(true));
        let io_errors = Arc::new(AtomicU64::new(0));
        let last_error = Arc::new(Mutex::new(None::<String>));
        let wrong = Arc::new(Mutex::new(None::<String>));
        let (s2, sha2, e2, l2, w2) = (
            s.clone(),
            Arc::clone(sha),
            Arc::clone(&io_errors),
            Arc::clone(&last_error),
            Arc::clone(&wrong),
        );
        let target = format!("{}/big.bin", s.prefix);
        let load = support::load(clients, run_for, move |_, _| {
            let keep = first.swap(false, Ordering::Relaxed);
            let got = BUF.with(|b| fetch(&s2, &target, keep, &mut b.borrow_mut()));
            match judge(&s2, got, &sha2) {
                Ok(()) => true,
                Err(Bad::Wrong(e)) => {
                    w2.lock().unwrap().get_or_insert(e);
                    false
                }
                Err(Bad::Failed(e)) => {
                    e2.fetch_add(1, Ordering::Relaxed);
                    *l2.lock().unwrap() = Some(e);
                    false
                }
            }
        });
        if let Some(e) = wrong.lock().unwrap().take() {
            panic!("a wrong read of {} with {clients} client(s): {e}", s.name);
        }
        let last = last_error.lock().unwrap().clone();
        (load, io_errors.load(Ordering::Relaxed), last)
    };
    let _ = run(WARM_UP);
    let (l, errors, last) = run(RUN_FOR);
    let rate = Rate {
        per_sec: l.per_sec,
        mib_s: l.per_sec * BIG as f64 / MIB,
    };
    println!(
        "  {:<5} {clients} client(s): {:>7.1} reads/s  {:>8.1} MiB/s  p50 {:.1} ms  p99 {:.1} ms  ({errors} failed: I/O error or not 200{})",
        s.name,
        rate.per_sec,
        rate.mib_s,
        ms(l.p50),
        ms(l.p99),
        last.map_or(String::new(), |e| format!("; last: {e}"))
    );
    rate
}

/// A field of `/proc/<pid>/status` in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Open descriptors of `pid`.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// mur's memory before and while `MEM_CLIENTS` threads read the big file at once.
fn memory(server: &Server, sha: &Arc<String>) {
    let s = &server.at;
    println!("memory with {MEM_CLIENTS} concurrent 10 MiB reads ({MEM_ROUNDS} rounds, all clients starting together):");
    std::thread::sleep(Duration::from_millis(300));
    // Reset VmHWM to the current RSS (proc(5) clear_refs "5"), so the peak is this run's.
    let pid = server.pid;
    let reset = std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok();
    let (rss0, hwm0, fds0) = (rss_kib(pid), status_kib(pid, "VmHWM:"), open_fds(pid));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let (mut peak, mut fds) = (0, 0);
            while !stop.load(Ordering::Relaxed) {
                peak = peak.max(rss_kib(pid));
                fds = fds.max(open_fds(pid));
                std::thread::sleep(Duration::from_millis(2));
            }
            (peak, fds)
        })
    };
    let barrier = Arc::new(Barrier::new(MEM_CLIENTS));
    let t = Instant::now();
    let clients: Vec<_> = (0..MEM_CLIENTS)
        .map(|i| {
            let (s, sha, barrier) = (s.clone(), Arc::clone(sha), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut buf = vec![0u8; READ_BUF];
                let (mut failed, mut wrong) = (Vec::new(), Vec::new());
                let target = format!("{}/big.bin", s.prefix);
                for round in 0..MEM_ROUNDS {
                    barrier.wait();
                    let got = fetch(&s, &target, i == 0 && round == 0, &mut buf);
                    match judge(&s, got, &sha) {
                        Ok(()) => {}
                        Err(Bad::Failed(e)) => failed.push(e),
                        Err(Bad::Wrong(e)) => wrong.push(e),
                    }
                }
                (failed, wrong)
            })
        })
        .collect();
    let (mut failed, mut wrong) = (Vec::new(), Vec::new());
    for c in clients {
        let (f, w) = c.join().expect("a client thread");
        failed.extend(f);
        wrong.extend(w);
    }
    let took = t.elapsed();
    stop.store(true, Ordering::Relaxed);
    let (peak, fds) = sampler.join().unwrap();
    let hwm = status_kib(pid, "VmHWM:");
    assert!(
        wrong.is_empty(),
        "{} wrong reads; the first: {}",
        wrong.len(),
        wrong[0]
    );
    let reads = MEM_CLIENTS * MEM_ROUNDS - failed.len();
    println!(
        "  before: VmRSS {:.1} MiB, VmHWM {:.1} MiB{}",
        mib(rss0),
        mib(hwm0),
        if reset {
            " (VmHWM reset through clear_refs)"
        } else {
            " (VmHWM could not be reset: it is the peak since mur started)"
        }
    );
    println!(
        "  while reading: peak VmRSS {:.1} MiB (sampled every 2 ms), VmHWM {:.1} MiB; delta {:+.1} MiB (VmHWM - VmRSS before)",
        mib(peak),
        mib(hwm),
        mib(hwm.max(peak)) - mib(rss0)
    );
    println!(
        "  open descriptors of mur: {fds0} before, at most {fds} while reading (each read in flight holds a socket and the file)"
    );
    println!(
        "  {reads} reads of 10 MiB in {:.2} s ({:.1} MiB/s), {} failed (I/O error or not 200){}; after: VmRSS {:.1} MiB",
        took.as_secs_f64(),
        reads as f64 * BIG as f64 / MIB / took.as_secs_f64(),
        failed.len(),
        kinds(&failed),
        mib(rss_kib(pid))
    );
}

/// `failed` grouped by message: ` (9x HTTP/1.1 408 Request Timeout, ...)`, or nothing.
fn kinds(failed: &[String]) -> String {
    if failed.is_empty() {
        return String::new();
    }
    let mut by = std::collections::BTreeMap::new();
    for f in failed {
        *by.entry(f.as_str()).or_insert(0) += 1;
    }
    let list: Vec<String> = by.iter().map(|(f, n)| format!("{n}x {f}")).collect();
    format!(" ({})", list.join(", "))
}

/// 100 directories of 100 files of 1 KiB under `out`.
fn write_tree(out: &Path) {
    for d in 0..TREE_DIRS {
        let dir = out.join(format!("d{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..TREE_FILES {
            let mut bytes = format!("file {d:03}/{f:03}\n").into_bytes();
            bytes.resize(TREE_FILE_BYTES, b'.');
            std::fs::write(dir.join(format!("f{f:03}.txt")), bytes).unwrap();
        }
    }
}

/// Time `GET /resources/files` and check the listing: every file, each of its size.
fn listing(s: &Target) {
    let want = TREE_DIRS * TREE_FILES;
    let mut buf = vec![0u8; READ_BUF];
    let mut once = || {
        let t = Instant::now();
        let f = fetch(s, "/resources/files", true, &mut buf).expect("GET /resources/files");
        let took = t.elapsed();
        assert_eq!(f.status, 200, "{}", f.head);
        let v: Value = serde_json::from_slice(&f.body).expect("the listing is JSON");
        let entries = v["entries"].as_array().expect("a listing with entries");
        assert_eq!(entries.len(), want, "entries listed");
        let bytes: u64 = entries.iter().filter_map(|e| e["size_bytes"].as_u64()).sum();
        assert_eq!(bytes, (want * TREE_FILE_BYTES) as u64, "total size listed");
        (took, f.len)
    };
    let (first, len) = once();
    let mut times: Vec<Duration> = (0..LISTINGS).map(|_| once().0).collect();
    times.sort();
    println!(
        "  first {:.1} ms, median of {LISTINGS} more {:.1} ms (min {:.1}, max {:.1}); {want} entries, {:.0} KiB of JSON",
        ms(first),
        ms(times[LISTINGS / 2]),
        ms(times[0]),
        ms(times[LISTINGS - 1]),
        len as f64 / 1024.0
    );
}

fn main() {
    murmur::http::raise_fd_limit(8192);
    let base = Base(std::env::temp_dir().join(format!("murmur-bench-resources-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&base.0);
    std::fs::create_dir_all(&base.0).unwrap();

    let mut big = vec![0u8; BIG];
    getrandom::fill(&mut big).expect("random bytes");
    let sha = Arc::new(hex(&Sha256::digest(&big)));
    let work = base.0.join("big-work");
    std::fs::create_dir_all(work.join("out")).unwrap();
    std::fs::write(work.join("out/big.bin"), &big).unwrap();
    let web = base.0.join("nginx");
    std::fs::create_dir_all(web.join("out")).unwrap();
    std::fs::write(web.join("out/big.bin"), &big).unwrap();
    drop(big);

    let mur = launch_mur(&base.0, "big", &work);
    println!(
        "resources bench: mur run (pid {}) at {}, slow fixture, exports.files out/ (max_bytes 20Mi), one connection per read, {} s per figure after {:.1} s warm-up",
        mur.pid,
        mur.at.host,
        RUN_FOR.as_secs(),
        WARM_UP.as_secs_f64()
    );
    println!("GET of a 10 MiB file of random bytes (sha256 {}…):", &sha[..16]);
    let mur_rates: Vec<Rate> = [1, 4].iter().map(|&c| throughput(&mur.at, c, &sha)).collect();

    match launch_nginx(&web) {
        Ok(nginx) => {
            let rates: Vec<Rate> = [1, 4].iter().map(|&c| throughput(&nginx.at, c, &sha)).collect();
            for (c, (m, n)) in [1, 4].iter().zip(mur_rates.iter().zip(&rates)) {
                println!(
                    "  mur/nginx MiB/s with {c} client(s): {:.2}x   (goal: >= 0.7x)",
                    m.mib_s / n.mib_s.max(f64::MIN_POSITIVE)
                );
            }
            drop(nginx);
        }
        Err(why) => println!("  nginx comparison skipped: {why}"),
    }

    memory(&mur, &sha);
    drop(mur);

    println!(
        "listing a {}-file tree ({TREE_DIRS} dirs x {TREE_FILES} files of {TREE_FILE_BYTES} B), GET /resources/files:",
        TREE_DIRS * TREE_FILES
    );
    let tree = base.0.join("tree-work");
    let made = Instant::now();
    write_tree(&tree.join("out"));
    let made = made.elapsed();
    let lister = launch_mur(&base.0, "tree", &tree);
    println!(
        "  (tree written in {:.2} s; mur run pid {} at {})",
        made.as_secs_f64(),
        lister.pid,
        lister.at.host
    );
    listing(&lister.at);
    drop(lister);
}
