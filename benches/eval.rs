//! `mur eval run` figures, printed and never asserted: 32 one-turn cases (no check) of an
//! agent capsule on the shipped OpenAI-compatible driver against the mock provider with zero
//! latency, with `--jobs 1` and `--jobs 2`: cases per second and wall time; and, in the same
//! run, 8 bare `mur run`s of the same capsule one after another, so the per-case overhead of
//! `mur eval run` (its workdir, the task file, reading the trace back) over a bare session
//! is the difference of the two per-case times at one job.
//!
//! Run: `cargo bench --bench eval` (`MURMUR_BENCH_MUR=PATH` measures another build of `mur`).

#[path = "../tests/common/provider.rs"]
mod provider;
mod support;

use provider::{Provider, Step};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const CASES: usize = 32;
const BARE: usize = 8;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn main() {
    let base = std::env::temp_dir().join(format!("murmur-bench-eval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let registry = base.join("registry");
    std::fs::create_dir_all(&registry).unwrap();
    let driver =
        std::fs::read(repo("artifacts/murmur-driver-openai-1.0.0.mur.zip")).expect("the shipped driver");
    murmur::registry::publish(&registry, &driver, None).unwrap();
    let mock = Provider::start_responder(|_| Step::text("done"));
    let capsule = base.join("capsule");
    std::fs::create_dir_all(&capsule).unwrap();
    let manifest = capsule.join("murmur.yaml");
    std::fs::write(
        &manifest,
        format!(
            "name: bench-eval\nversion: 0.1.0\nartifacts:\n  - {{name: murmur-driver-openai, version: 1.0.0, runtime: driver}}\ncapabilities:\n  network: {{allow: [\"http://127.0.0.1:{}\"]}}\ninference:\n  endpoint: {}\n  model: mock\n  api_key: none\n  driver: {{artifact: murmur-driver-openai}}\n  max_turns: 2\n",
            mock.port(),
            mock.base_openai()
        ),
    )
    .unwrap();
    let data = base.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("t.md"), "answer\n").unwrap();
    let lines: String = (0..CASES)
        .map(|i| format!("{{\"case_id\":\"c{i}\",\"task_path\":\"t.md\"}}\n"))
        .collect();
    std::fs::write(data.join("cases.jsonl"), lines).unwrap();
    let env = |c: &mut Command| {
        c.env("MURMUR_RECORDS_DIR", base.join("records"))
            .env("MURMUR_EVAL_DIR", base.join("eval"))
            .env("MURMUR_CACHE_DIR", base.join("cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    };
    // Warm the compile cache once.
    let work = base.join("warm");
    std::fs::create_dir_all(&work).unwrap();
    let mut warm = Command::new(support::mur_binary());
    warm.args(["run", "--manifest"])
        .arg(&manifest)
        .arg("--registry-path")
        .arg(&registry);
    warm.arg("--workdir").arg(&work).args(["--task", "warm up"]);
    env(&mut warm);
    let _ = warm.status();

    println!("eval bench: {CASES} one-turn cases, mock provider with zero latency, murmur-driver-openai");
    let bare_started = Instant::now();
    for i in 0..BARE {
        let work = base.join(format!("bare-{i}"));
        std::fs::create_dir_all(&work).unwrap();
        let mut c = Command::new(support::mur_binary());
        c.args(["run", "--manifest"])
            .arg(&manifest)
            .arg("--registry-path")
            .arg(&registry);
        c.arg("--workdir").arg(&work).args(["--task", "answer"]);
        env(&mut c);
        let _ = c.status();
    }
    let bare = bare_started.elapsed().as_secs_f64() / BARE as f64;
    println!(
        "  bare mur run, one after another: {:.1} ms per session",
        bare * 1000.0
    );
    for jobs in [1, 2] {
        let started = Instant::now();
        let mut c = Command::new(support::mur_binary());
        c.args(["eval", "run"])
            .arg(&manifest)
            .arg("--registry-path")
            .arg(&registry);
        c.arg("--dataset")
            .arg(data.join("cases.jsonl"))
            .args(["--jobs", &jobs.to_string()]);
        env(&mut c);
        let status = c.status().unwrap();
        let wall = started.elapsed().as_secs_f64();
        let per = wall / CASES as f64;
        let over = if jobs == 1 {
            format!(", {:+.1} ms per case over a bare mur run", (per - bare) * 1000.0)
        } else {
            String::new()
        };
        println!(
            "  --jobs {jobs}: {:.1} cases/s, {:.2} s wall, {:.1} ms per case{over} (exit {:?})",
            CASES as f64 / wall,
            wall,
            per * 1000.0,
            status.code()
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}
