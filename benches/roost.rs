//! Roost load figures, printed and never asserted: `/health` requests/s, full delegation
//! cycles/s (register parent, spawn, register child with the approval, deregister child,
//! deregister parent) at 1 and 32 clients with p50/p99, and RSS and threads while 2,000
//! idle connections are held. Set MURMUR_REF_ROOST to the reference `mur-roost` 0.8.0
//! binary to measure it in the same run. Run: `cargo bench --bench roost`.

mod support;

use murmur::http::client::{get, request, Options};
use murmur::registry::{self, archive};
use std::io::BufRead;
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::{load, ms, rss_kib, threads};

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

fn post(base: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Option<serde_json::Value> {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    let r = request(
        "POST",
        &format!("{base}{path}"),
        &all,
        body.as_bytes(),
        &Options::default(),
    )
    .ok()?;
    if r.status != 200 {
        return None;
    }
    serde_json::from_slice(&r.body).ok()
}

fn cycle(base: &str, client: usize, n: u64) -> bool {
    let sid = |role: u64| format!("ses_{:08x}{:08x}{:016x}", client, role, n);
    let body =
        |sid: &str, name: &str| format!(r#"{{"session_id":"{sid}","name":"{name}","version":"0.1.0"}}"#);
    let Some(p) = post(base, "/register", &[], &body(&sid(1), "local/orch")) else {
        return false;
    };
    let pc = p["credential"].as_str().unwrap_or_default().to_string();
    let Some(s) = post(
        base,
        "/spawn",
        &[("x-murmur-spawn-credential", &pc)],
        r#"{"name":"local/worker","version":"0.1.0"}"#,
    ) else {
        return false;
    };
    let a = s["approval"].as_str().unwrap_or_default().to_string();
    let Some(c) = post(
        base,
        "/register",
        &[("x-murmur-spawn-approval", &a)],
        &body(&sid(2), "local/worker"),
    ) else {
        return false;
    };
    let cc = c["credential"].as_str().unwrap_or_default().to_string();
    post(
        base,
        "/deregister",
        &[("x-murmur-spawn-credential", &cc)],
        r#"{"outcome":"complete"}"#,
    )
    .is_some()
        && post(
            base,
            "/deregister",
            &[("x-murmur-spawn-credential", &pc)],
            r#"{"outcome":"complete"}"#,
        )
        .is_some()
}

/// The same cycle for the event-driven generator: raw requests, one per connection.
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

fn measure(label: &str, bin: &str, reg: &std::path::Path) {
    let port = free_port();
    let mut child = start(bin, reg, port);
    let base = format!("http://127.0.0.1:{port}");
    println!("{label} ({bin})");
    for clients in [1, 32] {
        let b = base.clone();
        let h = load(clients, RUN_FOR, move |_, _| {
            get(&format!("{b}/health"), &[], &Options::default()).is_ok_and(|r| r.status == 200)
        });
        println!(
            "  /health   {clients:>2} clients: {:>8.0} req/s   p50 {:.2} ms  p99 {:.2} ms  ({} failed)",
            h.per_sec,
            ms(h.p50),
            ms(h.p99),
            h.failed
        );
    }
    for clients in [1, 32] {
        let b = base.clone();
        // Session ids are unique across runs against the same daemon.
        let c = load(clients, RUN_FOR, move |client, n| {
            cycle(&b, clients * 1000 + client, n)
        });
        println!(
            "  cycles    {clients:>2} clients: {:>8.0} cyc/s   p50 {:.2} ms  p99 {:.2} ms  ({} failed)",
            c.per_sec,
            ms(c.p50),
            ms(c.p99),
            c.failed
        );
    }
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let c = support::driver::drive(addr, 32, RUN_FOR, move |client, n| {
        Cycle::new(addr, 5000 + client, n)
    });
    println!(
        "  cycles    32 in flight, one event-driven generator thread: {:>8.0} cyc/s   p50 {:.2} ms  p99 {:.2} ms  ({} failed)",
        c.per_sec,
        ms(c.p50),
        ms(c.p99),
        c.failed
    );
    let pid = child.id();
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

fn main() {
    murmur::http::raise_fd_limit(16_384);
    let reg = registry();
    measure("ours: mur-roost", env!("CARGO_BIN_EXE_mur-roost"), &reg);
    match std::env::var("MURMUR_REF_ROOST") {
        Ok(bin) if !bin.is_empty() => measure("reference: mur-roost 0.8.0", &bin, &reg),
        _ => println!("reference: set MURMUR_REF_ROOST to a mur-roost 0.8.0 binary to compare"),
    }
    let _ = std::fs::remove_dir_all(&reg);
}
