//! Shared by the benchmarks: a bounded concurrent load loop with latencies, `/proc`
//! readers for a server's resident memory and thread count, a command's wall time and CPU
//! through `perf stat`, and the bubblewrap run a contained start is compared with.
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

/// Run `args` under `perf stat`: its wall time and the CPU of its whole process tree
/// (task-clock), in ms.
pub fn perf_stat(args: &[&str], env: &[(&str, &str)]) -> (f64, f64) {
    let t = Instant::now();
    let out = std::process::Command::new("perf")
        .args(["stat", "-x", ",", "-e", "task-clock", "--"])
        .args(args)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .output()
        .expect("perf (apt-get install linux-perf)");
    let wall = t.elapsed().as_secs_f64() * 1e3;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    let cpu = err
        .lines()
        .find(|l| l.contains(",task-clock"))
        .and_then(|l| l.split(',').next())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("perf's task-clock");
    (wall, cpu)
}

/// The median of `v` (not empty).
pub fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Whether bubblewrap runs here, installed with apt-get when missing.
pub fn have_bwrap() -> bool {
    let runs = || {
        std::process::Command::new("bwrap")
            .arg("--version")
            .output()
            .is_ok()
    };
    if !runs() {
        let _ = std::process::Command::new("apt-get")
            .args(["install", "-y", "-qq", "bubblewrap"])
            .output();
    }
    runs()
}

/// The plain bubblewrap line the ratios are taken against: `bwrap --unshare-all
/// --die-with-parent --ro-bind /usr /usr --proc /proc --dev /dev` running `true`, with
/// `/bin`, `/lib` and `/lib64` as symlinks into `/usr` (so `true` and its loader are
/// found on a merged-`/usr` host) and nothing else bound.
pub fn bwrap_plain() -> Vec<String> {
    [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/usr",
        "/usr",
        "--symlink",
        "usr/bin",
        "/bin",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The median CPU (ms, the whole process tree under `perf stat`) of `runs` runs of
/// [`bwrap_plain`].
pub fn bwrap_plain_cpu(runs: usize) -> f64 {
    let args = bwrap_plain();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    median_f64((0..runs).map(|_| perf_stat(&a, &[]).1).collect())
}

/// `bwrap --unshare-all --die-with-parent` running `true` with `/usr` read-only, `/proc`,
/// `/dev`, and `dir` bound read-write as its working directory: the sandbox an operator
/// would build instead of a sealed call.
pub fn bwrap_true(dir: &str) -> Vec<String> {
    let mut args = bwrap_plain();
    let program = args.pop().unwrap_or_else(|| "true".into());
    args.extend(["--bind", dir, dir, "--chdir", dir].map(String::from));
    args.push(program);
    args
}

/// The line `mur run --json` announces its session with, read from `child`'s stdout: the
/// door's port (its `url`, `localhost:<port>`), the pid it names (the child's if none) and
/// the whole announcement; an error quoting what it printed.
pub fn announced(child: &mut std::process::Child) -> Result<(u16, u32, serde_json::Value), String> {
    use std::io::BufRead;
    let mut line = String::new();
    let out = child.stdout.take().ok_or("mur run's stdout is not piped")?;
    std::io::BufReader::new(out)
        .read_line(&mut line)
        .map_err(|e| format!("reading mur run's announcement: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).map_err(|e| format!("mur run announced {line:?}: {e}"))?;
    let port: u16 = v["url"]
        .as_str()
        .and_then(|u| u.strip_prefix("localhost:"))
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| format!("no localhost:<port> url in {v}"))?;
    Ok((port, v["pid"].as_u64().map_or(child.id(), |p| p as u32), v))
}

/// File the shipped OpenAI driver and a one-file skill, `note`, in `registry`.
pub fn publish_driver_and_note(registry: &std::path::Path) {
    std::fs::create_dir_all(registry).unwrap();
    let shipped =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("artifacts/murmur-driver-openai-1.0.0.mur.zip");
    let driver = std::fs::read(shipped).expect("the shipped driver");
    murmur::registry::publish(registry, &driver, None).unwrap();
    let skill = murmur::registry::archive::write(&[
        (
            "murmur.yaml".into(),
            b"name: note\nversion: 1.0.0\nruntime: skill\ndescription: a note\n".to_vec(),
        ),
        ("skill.md".into(), b"Nothing to see.\n".to_vec()),
    ])
    .unwrap();
    murmur::registry::publish(registry, &skill, None).unwrap();
}

/// The `mur` measured: this build's, or `MURMUR_BENCH_MUR` (another build, such as an
/// earlier commit's, to compare in the same run on the same machine).
pub fn mur_binary() -> String {
    std::env::var("MURMUR_BENCH_MUR")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_mur").to_string())
}

/// Clock ticks per second (the unit of /proc's CPU times).
pub fn clock_ticks() -> Option<f64> {
    Some(rustix::param::clock_ticks_per_second() as f64).filter(|t| *t > 0.0)
}

/// The machine's busy ticks so far: user, nice, system, irq and softirq of /proc/stat's
/// first line.
pub fn machine_busy() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let v: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    Some(v.first()? + v.get(1)? + v.get(2)? + v.get(5)? + v.get(6)?)
}

/// The CPU ticks of this process's waited children so far (`cutime + cstime`, fields 16
/// and 17 of /proc/self/stat).
pub fn children_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name's closing parenthesis, from field 3 on.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(f.get(13)?.parse::<u64>().ok()? + f.get(14)?.parse::<u64>().ok()?)
}

/// The machine's busy ticks per second while this process sleeps for a second: the
/// background to take out of a count of the machine's busy time.
pub fn background_rate() -> f64 {
    let (b0, t0) = (machine_busy().unwrap_or(0), std::time::Instant::now());
    std::thread::sleep(std::time::Duration::from_secs(1));
    machine_busy().unwrap_or(0).saturating_sub(b0) as f64 / t0.elapsed().as_secs_f64()
}

/// The machine's busy time (ms) while `f` runs, less `background` ticks a second.
pub fn machine_ms<T>(background: f64, f: impl FnOnce() -> T) -> (T, f64) {
    let hz = clock_ticks().unwrap_or(100.0);
    let (b0, t0) = (machine_busy().unwrap_or(0), std::time::Instant::now());
    let out = f();
    let busy =
        machine_busy().unwrap_or(0).saturating_sub(b0) as f64 - background * t0.elapsed().as_secs_f64();
    (out, busy.max(0.0) / hz * 1e3)
}
