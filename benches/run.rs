//! `mur run` start-up figures, printed and never asserted: cold start (first launch, compile
//! included) and warm start (compiled component cached) of the hello capsule, from process
//! start to exit, median of 10 runs; and the same work as a plain WASI command under
//! `wasmtime run` when MURMUR_WASMTIME names a wasmtime-cli binary; and, when
//! MURMUR_BASELINE_MUR names another build of `mur` (an earlier commit's), its cold and warm
//! start interleaved with ours, so a change is measured against its parent in one run.
//! Run: `cargo bench --bench run`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::ms;

const RUNS: usize = 10;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn timed(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let status = cmd.stdout(Stdio::null()).stderr(Stdio::null()).status().unwrap();
    let d = t.elapsed();
    assert!(status.success(), "{cmd:?} failed");
    d
}

fn main() {
    let base = std::env::temp_dir().join(format!("murmur-bench-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let capsule = base.join("hello");
    let work = base.join("work");
    std::fs::create_dir_all(&capsule).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    for f in ["murmur.yaml", "capsule.wasm"] {
        std::fs::copy(repo("examples/hello").join(f), capsule.join(f)).unwrap();
    }
    std::fs::write(work.join("task.md"), "bench").unwrap();
    let manifest = capsule.join("murmur.yaml");
    let records = base.join("records");
    let launch = |bin: &str, cache: &Path| {
        let mut c = Command::new(bin);
        c.args([
            "run",
            "--manifest",
            manifest.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
        ])
        .env("MURMUR_CACHE_DIR", cache)
        .env("MURMUR_RECORDS_DIR", &records);
        c
    };
    let ours = env!("CARGO_BIN_EXE_mur").to_string();
    let baseline = std::env::var("MURMUR_BASELINE_MUR")
        .ok()
        .filter(|b| !b.is_empty());
    let mut bins = vec![("this build", ours)];
    if let Some(b) = baseline {
        bins.push(("baseline", b));
    }
    // Interleaved, so both builds see the same machine noise.
    let mut cold = vec![Vec::new(); bins.len()];
    let mut warm = vec![Vec::new(); bins.len()];
    for (i, (_, bin)) in bins.iter().enumerate() {
        timed(&mut launch(bin, &base.join(format!("warm-cache-{i}"))));
    }
    for r in 0..RUNS {
        for (i, (_, bin)) in bins.iter().enumerate() {
            cold[i].push(timed(&mut launch(bin, &base.join(format!("cold-cache-{i}-{r}")))));
            warm[i].push(timed(&mut launch(bin, &base.join(format!("warm-cache-{i}")))));
        }
    }
    println!("mur run, hello capsule, median of {RUNS}, process start to exit:");
    for (i, (label, bin)) in bins.iter().enumerate() {
        println!("{label} ({bin}):");
        println!(
            "  cold (compile included): {:>8.1} ms",
            ms(median(cold[i].clone()))
        );
        println!(
            "  warm (cached component): {:>8.1} ms",
            ms(median(warm[i].clone()))
        );
    }
    let warm = median(warm[0].clone());
    match std::env::var("MURMUR_WASMTIME") {
        Ok(bin) if !bin.is_empty() => {
            let wasm = repo("benches/hello-command/hello-command.wasm");
            let dir = format!("{}::.", work.display());
            let run = |extra: &[&str]| {
                let mut c = Command::new(&bin);
                c.arg("run")
                    .args(extra)
                    .args(["--dir", &dir, "--env", "MURMUR_CAPSULE_NAME=hello"]);
                c.arg(&wasm).current_dir(&work);
                c
            };
            let plain = median((0..RUNS).map(|_| timed(&mut run(&[]))).collect());
            let cfg = base.join("wasmtime-cache.toml");
            std::fs::write(
                &cfg,
                format!("[cache]\ndirectory = \"{}\"\n", base.join("wt-cache").display()),
            )
            .unwrap();
            let cache_flag = format!("cache-config={}", cfg.display());
            timed(&mut run(&["-C", &cache_flag]));
            let cached = median((0..RUNS).map(|_| timed(&mut run(&["-C", &cache_flag]))).collect());
            println!("wasmtime run, the same work as a WASI command ({bin}):");
            println!("  no cache:                {:>8.1} ms", ms(plain));
            println!("  with its cache, warm:    {:>8.1} ms", ms(cached));
            println!(
                "ratio mur warm / wasmtime warm: {:.2} (goal: <= 1.5, and mur warm under 50 ms)",
                ms(warm) / ms(cached)
            );
        }
        _ => println!("wasmtime: set MURMUR_WASMTIME to a wasmtime-cli binary to compare"),
    }
    let _ = std::fs::remove_dir_all(&base);
}
