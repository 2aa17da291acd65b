//! The operator plane under load, through the real `mur run`: large reads are capped at 64
//! bodies in flight, one more is answered `503 busy` at once (and traced) instead of
//! queueing, and while every slot is held by a client that does not read, small files,
//! listings and the card are still answered promptly; the slots come back when those
//! clients leave.

use crate::common;

use common::door::wait_for;
use common::resources::{assert_refused, assert_served, capsule, exports, put, up, workdir};
use common::TempDir;
use rustix::net::{sockopt, AddressFamily, SocketType};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A connection whose receive buffer is set before connecting, so the kernel does not grow
/// it to tens of MiB while nobody reads: what an idle client holds stays small and the test
/// does not depend on the host's TCP autotuning limits.
fn small_window(addr: SocketAddr) -> TcpStream {
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).unwrap();
    sockopt::set_socket_recv_buffer_size(&fd, 16 * 1024).unwrap();
    rustix::net::connect(&fd, &addr).unwrap();
    TcpStream::from(fd)
}

/// Far larger than what one connection buffers when its client reads nothing (a client
/// socket with a small receive buffer, and the server's send buffer): a client that does
/// not read holds its body.
const BIG: usize = 16 * 1024 * 1024;
const SLOTS: usize = 64;

#[test]
fn sixty_four_unread_bodies_hold_every_slot_and_the_next_large_read_is_busy() {
    let t = TempDir::new("res-load");
    let w = workdir(&t);
    put(&w.join("out/big.bin"), &vec![7u8; BIG]);
    put(&w.join("out/small.txt"), b"small\n");
    let dir = capsule(&t, &exports("out/", "64Mi"));
    let p = up(&t, &dir, &w);
    // One whole read first: the file's digest is known, so the 64 below start at once.
    assert_eq!(p.read("big.bin").status, 200);
    // Its slot is back once its trace line is written (the reader may stop early, and the
    // door notices that a moment later).
    wait_for(Duration::from_secs(30), "the first read's trace line", || {
        (p.events("resource_read").len() == 1).then_some(())
    });
    std::thread::sleep(Duration::from_millis(50));

    // 64 clients ask for the big file and never read.
    let mut idle = Vec::new();
    for _ in 0..SLOTS {
        let mut s = small_window(p.addr);
        let req = format!(
            "GET /resources/files/big.bin HTTP/1.1\r\nhost: {}\r\n\r\n",
            p.host()
        );
        s.write_all(req.as_bytes()).unwrap();
        idle.push(s);
    }
    // Each of the 64 has its answer started (a slot held) before the 65th asks: had the
    // 65th been read first, it would have taken a slot and one of the 64 been turned away.
    for (i, s) in idle.iter_mut().enumerate() {
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let mut status = [0u8; 12];
        s.read_exact(&mut status).unwrap();
        assert_eq!(&status, b"HTTP/1.1 200", "idle client {i}");
    }
    // Every slot is taken now (the bodies' traces come at their end).
    let busy = wait_for(
        Duration::from_secs(30),
        "a 65th large read to be refused busy",
        || {
            let r = p.read("big.bin");
            (r.status == 503).then_some(r)
        },
    );
    assert_refused(&busy, 503, "busy", "the 65th large read");

    // Small files, listings and the card do not wait behind the held bodies (each request
    // has its helper's own deadline).
    assert_served(
        &p.read("small.txt"),
        b"small\n",
        0,
        "advisory",
        "out/",
        "a small file",
    );
    assert_eq!(p.list()["entries"].as_array().unwrap().len(), 2);
    assert_eq!(p.card_status(), 200);
    let traced = p.read_event("big.bin", "busy");
    assert!(traced["bytes"].is_null() && traced["sha256"].is_null());

    // The clients leave: their slots come back and the file is served whole.
    drop(idle);
    let whole = wait_for(
        Duration::from_secs(30),
        "a large read once the slots are free",
        || {
            let r = p.read("big.bin");
            (r.status == 200).then_some(r)
        },
    );
    assert_served(&whole, &vec![7u8; BIG], 0, "advisory", "out/", "the big file");
}
