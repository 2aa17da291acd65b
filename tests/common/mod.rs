//! Helpers for the black-box tests: raw loopback sockets and the real binaries.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Read until the server closes (or 10 s pass) and return everything as text.
pub fn read_all(stream: &mut TcpStream) -> String {
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) => panic!("read failed after {} bytes: {e}", out.len()),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Send `bytes` on a fresh connection and return the whole answer.
pub fn exchange(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(bytes).unwrap();
    read_all(&mut s)
}

/// The status code of a raw answer.
/// A finished command's exit code, stdout and stderr, for an assertion's message.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn status_of(answer: &str) -> u16 {
    answer
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"))
}

/// The body of a raw answer.
pub fn body_of(answer: &str) -> &str {
    answer.split_once("\r\n\r\n").map_or("", |(_, b)| b)
}

/// A running binary, killed by PID when dropped.
pub struct Running {
    pub child: Child,
    pub stdout: BufReader<std::process::ChildStdout>,
}

impl Running {
    /// Start `path` with `args`, stdout piped.
    pub fn start(path: &str, args: &[&str]) -> Running {
        let mut cmd = Command::new(path);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        Running::spawn(cmd)
    }

    /// Start a prepared command (its stdout must be piped).
    pub fn spawn(mut cmd: Command) -> Running {
        let mut child = cmd.spawn().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Running { child, stdout }
    }

    /// SIGTERM, and the exit status it ends with.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        self.child.wait().unwrap()
    }

    /// The next line the binary prints.
    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory under the system temp dir, removed when dropped.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let path = std::env::temp_dir().join(format!("murmur-test-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
pub mod agent;
pub mod agent_door;
pub mod capsule;
pub mod delegation;
pub mod door;
pub mod kept_provider;
pub mod oci;
pub mod peer;
pub mod probe;
pub mod provider;
pub mod resources;
pub mod roost;
pub mod sdk;
pub mod supervision;
pub mod tmpfs;
pub mod unprivileged;
pub mod webhook;

/// `len` bytes that do not compress (xorshift from `seed`, which must not be 0): an
/// archive holding them is at least that large.
pub fn incompressible(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// One field of `/proc/<pid>/status` text (`key` with its colon), trimmed; empty if absent.
pub fn status_field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// The trace at `records/trace.jsonl` so far (complete lines only).
pub fn trace_lines(records: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(records.join("trace.jsonl")).unwrap_or_default();
    let complete = text.rfind('\n').map_or("", |i| &text[..=i]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("trace line {l:?}: {e}")))
        .collect()
}

/// The events of `kind` in the trace at `records/trace.jsonl` so far.
pub fn trace_events(records: &std::path::Path, kind: &str) -> Vec<serde_json::Value> {
    trace_lines(records)
        .into_iter()
        .filter(|e| e["event_type"] == kind)
        .collect()
}

/// The first line a `mur run` wrote to its stdout file `out` (its announcement), polled
/// every 20 ms; `None` once `ended()` says the process exited first or `within` passes.
pub fn announcement(
    out: &std::path::Path,
    within: Duration,
    mut ended: impl FnMut() -> bool,
) -> Option<String> {
    let until = std::time::Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        if let Some((first, _)) = text.split_once('\n') {
            return Some(first.to_string());
        }
        if ended() || std::time::Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
