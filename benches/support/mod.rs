//! Shared by the benchmarks: a bounded concurrent load loop with latencies, and `/proc`
//! readers for a server's resident memory and thread count.
#![allow(dead_code)]

pub mod driver;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a load run measured.
pub struct Load {
    pub per_sec: f64,
    pub failed: u64,
    pub p50: Duration,
    pub p99: Duration,
}

/// Run `op` from `clients` threads for `run_for`; `op` returns whether it succeeded.
pub fn load<F>(clients: usize, run_for: Duration, op: F) -> Load
where
    F: Fn(usize, u64) -> bool + Send + Sync + 'static,
{
    let op = Arc::new(op);
    let failed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let times = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|client| {
            let (op, failed, stop, times) = (
                Arc::clone(&op),
                Arc::clone(&failed),
                Arc::clone(&stop),
                Arc::clone(&times),
            );
            std::thread::spawn(move || {
                let mut mine = Vec::new();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    if op(client, n) {
                        mine.push(t.elapsed());
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    n += 1;
                }
                times.lock().unwrap().extend(mine);
            })
        })
        .collect();
    std::thread::sleep(run_for);
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    let secs = start.elapsed().as_secs_f64();
    let mut times = Arc::try_unwrap(times).unwrap().into_inner().unwrap();
    times.sort();
    let pick = |q: f64| {
        times
            .get(((times.len() as f64 * q) as usize).min(times.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Load {
        per_sec: times.len() as f64 / secs,
        failed: failed.load(Ordering::Relaxed),
        p50: pick(0.50),
        p99: pick(0.99),
    }
}

fn status_field(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resident memory of `pid` in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
}

/// Threads of `pid`.
pub fn threads(pid: u32) -> u64 {
    status_field(pid, "Threads:")
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
