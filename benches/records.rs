//! `mur records prune` over a records root of 50,000 session directories (each a
//! `trace.jsonl` and `logs/bootstrap.log`, all ended, written between 1 and 50,000 minutes
//! ago): the wall time of a dry run (measure everything, remove nothing) and of the real
//! prune down to the default 1,000 sessions. Printed, never asserted.
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
    let _ = std::fs::remove_dir_all(&base);
}
