//! `mur records prune` over a records root of 50,000 session directories (each a
//! `trace.jsonl` and `logs/bootstrap.log`, all ended, written between 1 and 50,000 minutes
//! ago): the wall time of a dry run (measure everything, remove nothing) and of the real
//! prune down to the default 1,000 sessions. Then `mur ps` over a root of 200 live sessions
//! (`MURMUR_BENCH_LIVE=N`) beside 1,000 ended ones: each live one a records directory with
//! its `session.json` and a 1 MiB `trace.jsonl`, held by the `flock` a session holds, taken
//! here by this process rather than 200 real `mur run`s (which would cost a wasmtime each on
//! a shared 2-core machine; `mur ps` reads only the lock and `session.json` either way).
//! Printed, never asserted.
//! Run: `cargo bench --bench records` (`MURMUR_BENCH_SESSIONS=N` for another size).

use std::fs::{File, FileTimes};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

const MUR: &str = env!("CARGO_BIN_EXE_mur");

fn make(root: &Path, n: usize) {
    let now = SystemTime::now();
    for i in 0..n {
        let dir = root.join(format!("ses_{i:032x}"));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(dir.join("trace.jsonl"), [b'{'; 600]).unwrap();
        std::fs::write(dir.join("logs/bootstrap.log"), [b'l'; 120]).unwrap();
        let when = now - Duration::from_secs(120 + 60 * i as u64);
        let times = FileTimes::new().set_modified(when).set_accessed(when);
        for p in [
            dir.join("trace.jsonl"),
            dir.join("logs/bootstrap.log"),
            dir.join("logs"),
            dir.clone(),
        ] {
            File::open(&p).unwrap().set_times(times).unwrap();
        }
    }
}

fn prune(root: &Path, config: &Path, dry: bool) -> (Duration, String) {
    let mut cmd = Command::new(MUR);
    cmd.args(["records", "prune"]);
    if dry {
        cmd.arg("--dry-run");
    }
    let t = Instant::now();
    let out = cmd
        .env("MURMUR_RECORDS_DIR", root)
        .env("XDG_CONFIG_HOME", config)
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    (took, text.lines().last().unwrap_or("").to_string())
}

/// `n` live sessions' records under `root` (each held by a lock this process takes and
/// keeps in the returned descriptors) and `dead` ended ones.
fn make_live(root: &Path, n: usize, dead: usize) -> Vec<File> {
    let mut held = Vec::new();
    for i in 0..n + dead {
        let id = format!("ses_{:032x}", 0xa000_0000_u64 + i as u64);
        let dir = root.join(&id);
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(dir.join("trace.jsonl"), vec![b'{'; 1 << 20]).unwrap();
        let status = format!(
            "{{\"session_id\":\"{id}\",\"pid\":{},\"capsule\":\"bench\",\"version\":\"0.1.0\",\"class\":\"scoped\",\"url\":\"http://localhost:{}\",\"started_ms\":0,\"parent\":null,\"state\":\"idle\",\"tasks\":{{\"open\":0,\"total\":3}}}}\n",
            std::process::id(),
            20_000 + i
        );
        std::fs::write(dir.join("session.json"), status).unwrap();
        if i < n {
            let d = File::open(&dir).unwrap();
            rustix::fs::flock(&d, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
            held.push(d);
        }
    }
    held
}

/// `mur ps --json` over `root`: its wall time and how many sessions it listed.
fn ps(root: &Path) -> (Duration, usize) {
    let t = Instant::now();
    let out = Command::new(MUR)
        .args(["ps", "--json"])
        .env("MURMUR_RECORDS_DIR", root)
        .output()
        .unwrap();
    let took = t.elapsed();
    assert!(out.status.success(), "{out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    (took, rows.as_array().map_or(0, Vec::len))
}

fn bench_ps(base: &Path) {
    let live: usize = std::env::var("MURMUR_BENCH_LIVE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let root = base.join("live");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let held = make_live(&root, live, 1000);
    let mut times: Vec<Duration> = (0..7)
        .map(|_| ps(&root))
        .map(|(t, listed)| {
            assert_eq!(listed, live, "mur ps listed {listed} of {live} live sessions");
            t
        })
        .collect();
    times.sort();
    println!(
        "mur ps over {live} live sessions (and 1000 ended): median {:.1} ms, min {:.1} ms, max {:.1} ms of 7 runs",
        times[3].as_secs_f64() * 1000.0,
        times[0].as_secs_f64() * 1000.0,
        times[6].as_secs_f64() * 1000.0
    );
    drop(held);
}

fn main() {
    let n: usize = std::env::var("MURMUR_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let base = std::env::temp_dir().join(format!("murmur-bench-records-{}", std::process::id()));
    let root = base.join("records");
    let config = base.join("config");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(config.join("murmur")).unwrap();
    std::fs::set_permissions(&root, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let t = Instant::now();
    make(&root, n);
    println!("made {n} session records in {:.2} s", t.elapsed().as_secs_f64());
    let (dry, line) = prune(&root, &config, true);
    println!("dry run over {n}: {:.3} s  ({line})", dry.as_secs_f64());
    let (real, line) = prune(&root, &config, false);
    println!("prune of {n} to 1000: {:.3} s  ({line})", real.as_secs_f64());
    let (again, line) = prune(&root, &config, false);
    println!(
        "prune of 1000 already within bounds: {:.3} s  ({line})",
        again.as_secs_f64()
    );
    bench_ps(&base);
    let _ = std::fs::remove_dir_all(&base);
}
