//! `mur records prune` over a records root of 50,000 session directories (each a
//! `trace.jsonl` and `logs/bootstrap.log`, all ended, written between 1 and 50,000 minutes
//! ago): the wall time of a dry run (measure everything, remove nothing) and of the real
//! prune down to the default 1,000 sessions. Then `mur ps` over a root of 200 live sessions
//! (`MURMUR_BENCH_LIVE=N`) beside 1,000 ended ones: each live one a records directory with
//! its `session.json` and a 1 MiB `trace.jsonl`, held by the `flock` a session holds, taken
//! here by this process rather than 200 real `mur run`s (which would cost a wasmtime each on
//! a shared 2-core machine; `mur ps` reads only the lock and `session.json` either way).
//! And reading one session's records back as a page: `mur trace --html` on a synthetic trace
//! of the default 64 MiB budget (tasks, turns, tool calls with their inputs, some failing),
//! its wall time and the page's size beside those of the plain `mur trace`, and (when
//! Debian's `chromium` is installed) how long headless Chromium takes to draw that page
//! beside an empty one. Printed, never asserted.
//! Run: `cargo bench --bench records` (`MURMUR_BENCH_SESSIONS=N` for another size; 0 leaves
//! only the `ps` and trace figures).

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

/// A trace.jsonl of about `bytes`: tasks of 40 turns, each turn a tool call with a
/// 200-byte input, one call in 25 failing with its reason; the number of events.
fn synthetic_trace(path: &Path, bytes: u64) -> u64 {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(File::create(path).unwrap());
    let (mut written, mut events, mut ts) = (0u64, 0u64, 1_765_000_000_000u64);
    let sid = "ses_0123456789abcdef0123456789abcdef";
    let mut line = |out: &mut std::io::BufWriter<File>, text: String| {
        out.write_all(text.as_bytes()).unwrap();
        out.write_all(b"\n").unwrap();
        written += text.len() as u64 + 1;
        events += 1;
        written
    };
    line(&mut out, format!("{{\"event_type\":\"session_start\",\"session_id\":\"{sid}\",\"timestamp\":{ts},\"capsule_name\":\"bench\",\"capsule_version\":\"1.0.0\"}}"));
    let mut task = 0;
    'tasks: loop {
        task += 1;
        line(&mut out, format!("{{\"event_type\":\"task_start\",\"session_id\":\"{sid}\",\"timestamp\":{ts},\"task_id\":\"task-{task}\",\"source\":\"a2a\"}}"));
        for turn in 1..=40u64 {
            ts += 700;
            line(&mut out, format!("{{\"event_type\":\"inference\",\"session_id\":\"{sid}\",\"timestamp\":{ts},\"turn\":{turn},\"input_tokens\":{},\"output_tokens\":40,\"decision\":\"tool_call\",\"tool_name\":\"bash\"}}", 1000 + turn * 50));
            ts += 120;
            let failed = (task * 40 + turn) % 25 == 0;
            let (status, error) = if failed {
                (
                    "error",
                    ",\"error\":\"exit 1: grep: out/report.md: No such file or directory\"",
                )
            } else {
                ("ok", "")
            };
            let input = "x".repeat(200);
            let n = line(&mut out, format!("{{\"event_type\":\"tool_call\",\"session_id\":\"{sid}\",\"timestamp\":{ts},\"turn\":{turn},\"tool_name\":\"bash\",\"input\":{{\"command\":\"grep -n {input} out/report.md\"}},\"duration_ms\":118,\"status\":\"{status}\"{error}}}"));
            if n + 4096 > bytes {
                break 'tasks;
            }
        }
        line(&mut out, format!("{{\"event_type\":\"task_end\",\"session_id\":\"{sid}\",\"timestamp\":{ts},\"task_id\":\"task-{task}\",\"exit_status\":\"ok\",\"turns\":40}}"));
    }
    line(&mut out, format!("{{\"event_type\":\"session_end\",\"session_id\":\"{sid}\",\"timestamp\":{ts},\"exit_status\":\"ok\"}}"));
    out.flush().unwrap();
    events
}

/// `mur trace` on a 64 MiB trace, as text and as a page: wall time and output size.
fn trace_page(base: &Path) {
    let trace = base.join("trace.jsonl");
    let events = synthetic_trace(&trace, 64 << 20);
    let size = std::fs::metadata(&trace).unwrap().len();
    let page = base.join("trace.html");
    let t = Instant::now();
    let out = Command::new(MUR)
        .args(["trace", trace.to_str().unwrap(), "--html", page.to_str().unwrap()])
        .output()
        .unwrap();
    let html = t.elapsed();
    assert!(out.status.success(), "{out:?}");
    let page_bytes = std::fs::metadata(&page).unwrap().len();
    let t = Instant::now();
    let out = Command::new(MUR).arg("trace").arg(&trace).output().unwrap();
    let text = t.elapsed();
    assert!(out.status.success(), "{out:?}");
    println!(
        "mur trace --html on a {:.1} MiB trace ({events} events): {:.2} s, page {:.1} MiB",
        size as f64 / 1048576.0,
        html.as_secs_f64(),
        page_bytes as f64 / 1048576.0
    );
    println!(
        "mur trace (text) on the same trace: {:.2} s, {:.1} MiB printed",
        text.as_secs_f64(),
        out.stdout.len() as f64 / 1048576.0
    );
    let empty = base.join("empty.html");
    std::fs::write(&empty, "<!DOCTYPE html><title>empty</title>").unwrap();
    if let (Some(big), Some(none)) = (draw(base, &page), draw(base, &empty)) {
        println!(
            "headless Chromium draws that page in {:.2} s (an empty page: {:.2} s, the browser's start)",
            big.as_secs_f64(),
            none.as_secs_f64()
        );
    }
}

/// How long headless Chromium takes to load `page` and take its screenshot, with no network
/// (a dead loopback proxy, no host resolves); `None` without a `chromium`.
fn draw(base: &Path, page: &Path) -> Option<Duration> {
    let t = Instant::now();
    let status = Command::new("chromium")
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--window-size=1100,900",
        ])
        .arg(format!("--user-data-dir={}", base.join("chromium").display()))
        .arg(format!("--screenshot={}", base.join("shot.png").display()))
        .arg(format!("file://{}", page.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .ok()?;
    status.success().then(|| t.elapsed())
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
    trace_page(&base);
    let _ = std::fs::remove_dir_all(&base);
}
