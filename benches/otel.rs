//! The OpenTelemetry hook's cost, printed and never asserted: sessions of 20 turns (19 tool
//! calls of a tool that does not exist, then a text answer) of an agent capsule on the shipped
//! OpenAI-compatible driver against the zero-latency mock provider, run without the hook,
//! with `murmur-hook-otel` sending to a loopback collector that answers, to one that is down
//! (nothing listens) and to one that accepts and never answers (the default 1000 ms wait).
//! For each: the median of the task's own time (`task_start` to `task_end` in the trace,
//! what a caller waits for its answer) and of the session's wall time (the process, its
//! end-of-session export included), over 9 sessions each, run interleaved; the hook's cost
//! per turn is the difference of the task times over the turns.
//!
//! Run: `cargo bench --bench otel` (`MURMUR_BENCH_MUR=PATH` measures another build of `mur`).

#[path = "../tests/common/provider.rs"]
mod provider;
mod support;

use provider::{Provider, Step};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const TURNS: usize = 20;
const RUNS: usize = 9;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn script() -> Vec<Step> {
    let mut steps: Vec<Step> = (0..TURNS - 1)
        .map(|i| Step::tool(&format!("c{i}"), "no-such-tool", json!({})))
        .collect();
    steps.push(Step::text("done"));
    steps
}

/// The manifest: the driver, and the hook sending to `collector` when given.
fn manifest(mock: &Provider, collector: Option<(u16, &str)>) -> String {
    let mut allow = vec![format!("\"http://127.0.0.1:{}\"", mock.port())];
    let mut y = String::from("name: bench-otel\nversion: 0.1.0\nartifacts:\n  - {name: murmur-driver-openai, version: 1.0.0, runtime: driver}\n");
    if let Some((port, extra)) = collector {
        let origin = format!("http://127.0.0.1:{port}");
        allow.push(format!("\"{origin}\""));
        y.push_str(&format!("  - {{name: murmur-hook-otel, version: 1.0.0, runtime: hook, records: own, capabilities: {{network: {{allow: [\"{origin}\"]}}}}, config: {{endpoint: \"{origin}\"{extra}}}}}\n"));
    }
    y.push_str(&format!(
        "capabilities:\n  network: {{allow: [{}]}}\ninference:\n  endpoint: {}\n  model: mock\n  api_key: none\n  driver: {{artifact: murmur-driver-openai}}\n  max_turns: {}\n",
        allow.join(", "),
        mock.base_openai(),
        TURNS + 1
    ));
    y
}

/// (task ms from the trace, wall ms) of one session.
fn session(
    base: &Path,
    registry: &Path,
    label: &str,
    n: usize,
    collector: Option<(u16, &str)>,
) -> (f64, f64) {
    let mock = Provider::start(script());
    let dir = base.join(format!("{label}-{n}"));
    std::fs::create_dir_all(dir.join("work")).unwrap();
    std::fs::write(dir.join("murmur.yaml"), manifest(&mock, collector)).unwrap();
    let records = base.join("records");
    let started = Instant::now();
    let out = Command::new(support::mur_binary())
        .args(["run", "--json", "--manifest"])
        .arg(dir.join("murmur.yaml"))
        .arg("--registry-path")
        .arg(registry)
        .arg("--workdir")
        .arg(dir.join("work"))
        .args(["--task", "go"])
        .env("MURMUR_RECORDS_DIR", &records)
        .env("MURMUR_CACHE_DIR", base.join("cache"))
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let wall = started.elapsed().as_secs_f64() * 1000.0;
    let text = String::from_utf8_lossy(&out.stdout);
    let sid = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find_map(|v| v["session_id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{label}: no session id in {text}"));
    let trace = std::fs::read_to_string(records.join(&sid).join("trace.jsonl")).unwrap();
    let at = |kind: &str| {
        trace
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["event_type"] == kind)
            .and_then(|v| v["timestamp"].as_f64())
            .unwrap_or_else(|| panic!("{label}: no {kind} in the trace"))
    };
    (at("task_end") - at("task_start"), wall)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let base = std::env::temp_dir().join(format!("murmur-bench-otel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let registry = base.join("registry");
    std::fs::create_dir_all(&registry).unwrap();
    for zip in [
        "murmur-driver-openai-1.0.0.mur.zip",
        "murmur-hook-otel-1.0.0.mur.zip",
    ] {
        let bytes = std::fs::read(repo(&format!("artifacts/{zip}"))).expect("a shipped artifact");
        murmur::registry::publish(&registry, &bytes, None).unwrap();
    }
    let sink = Provider::start_sink();
    let down = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // Accepts (the kernel's backlog) and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let variants: [(&str, Option<(u16, &str)>); 4] = [
        ("no hook", None),
        ("otel, collector answering", Some((sink.port(), ""))),
        ("otel, collector down", Some((down, ""))),
        ("otel, collector silent", Some((silent_port, ""))),
    ];
    // Warm the compile cache (the driver and the hook).
    session(&base, &registry, "warm", 0, Some((sink.port(), "")));
    let mut times: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); variants.len()];
    for n in 0..RUNS {
        for (i, (label, collector)) in variants.iter().enumerate() {
            let (task, wall) = session(&base, &registry, &label.replace([' ', ','], "-"), n, *collector);
            times[i].0.push(task);
            times[i].1.push(wall);
        }
    }
    println!("otel bench: {TURNS}-turn sessions, zero-latency mock, murmur-driver-openai, median of {RUNS}");
    let base_task = median(times[0].0.clone());
    for ((label, _), (task, wall)) in variants.iter().zip(times) {
        let (task, wall) = (median(task), median(wall));
        println!(
            "  {label:<28} task {task:7.1} ms ({:+.2} ms per turn)   session wall {wall:7.1} ms",
            (task - base_task) / TURNS as f64
        );
    }
    println!(
        "  spans received by the answering collector: {} requests",
        sink.requests().len()
    );
    drop(silent);
    let _ = std::fs::remove_dir_all(&base);
}
