//! HTTP layer figures, printed and never asserted: requests per second of a trivial handler
//! with 1 and 32 concurrent clients, and the server's resident memory while it holds 2,000
//! idle connections. The server runs in a child process (this binary re-executed) so its
//! memory is measured alone. Run: `cargo bench --bench http`.

use murmur::http::{Limits, Reply, Request, Response, Server};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

mod support;
use support::rss_kib;

const SERVE_ENV: &str = "MURMUR_BENCH_SERVE";
const RUN_FOR: Duration = Duration::from_secs(3);
const IDLE: usize = 2000;

fn raise_fd_limit() {
    murmur::http::raise_fd_limit(16_384);
}

fn serve() {
    raise_fd_limit();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let limits = Limits {
        max_connections: 8192,
        request_timeout: Duration::from_secs(60),
        ..Limits::default()
    };
    let server = Server::bind(listener, limits).unwrap();
    println!("{}", server.local_addr().unwrap());
    server
        .run(|_req: &Request, _ex: &murmur::http::Exchange<'_>| -> Reply {
            Response::new(200).body("ok").into()
        })
        .unwrap();
}

fn one_request(addr: SocketAddr, buf: &mut Vec<u8>) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_nodelay(true);
    if s.write_all(format!("GET / HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes())
        .is_err()
    {
        return false;
    }
    buf.clear();
    s.read_to_end(buf).is_ok() && buf.starts_with(b"HTTP/1.1 200")
}

fn throughput(addr: SocketAddr, clients: usize) -> (f64, u64) {
    let l = support::load(clients, RUN_FOR, move |_, _| {
        one_request(addr, &mut Vec::with_capacity(256))
    });
    (l.per_sec, l.failed)
}

fn main() {
    if std::env::var_os(SERVE_ENV).is_some() {
        return serve();
    }
    raise_fd_limit();
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .env(SERVE_ENV, "1")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line.trim().parse().unwrap();
    let pid = child.id();

    println!(
        "http bench: trivial handler, one connection per request, {}s per figure",
        RUN_FOR.as_secs()
    );
    for clients in [1, 32] {
        let (rps, failed) = throughput(addr, clients);
        println!("  {clients:>2} concurrent client(s): {rps:>9.0} requests/s ({failed} failed)");
    }

    let before = rss_kib(pid);
    let idle: Vec<TcpStream> = (0..IDLE).filter_map(|_| TcpStream::connect(addr).ok()).collect();
    std::thread::sleep(Duration::from_millis(500));
    // Prove the server is still answering while it holds them.
    let mut buf = Vec::new();
    let serving = one_request(addr, &mut buf);
    let holding = rss_kib(pid);
    println!(
        "  rss: {before} KiB before, {holding} KiB holding {} idle connections ({:.2} KiB each); still serving: {serving}",
        idle.len(),
        (holding.saturating_sub(before)) as f64 / idle.len().max(1) as f64
    );
    drop(idle);
    let _ = child.kill();
    let _ = child.wait();
}
