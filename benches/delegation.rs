//! Delegation figures, printed and never asserted: a three-level formation (an orchestrator
//! delegates to a worker, which delegates to a helper) through the real `mur run` and
//! `mur-roost`, every capsule's model answered at once by the mock provider.
//!
//! - call to child running: from the moment the parent's runtime starts the `delegate-task`
//!   call (its `tool_call` line's timestamp less its duration) to the child's `task_start`
//!   (the child process started, probed, registered with the roost, announced, took its task
//!   over A2A): both levels of each run, p50 and max;
//! - the formation end to end: from starting the orchestrator's process to its exit, after
//!   the helper's completion reached the worker and the worker's reached the orchestrator;
//!   the p50 over the runs, and that divided by three levels, against the goal of 50 ms per
//!   level.
//!
//! Every process's compiled driver comes from the compile cache (a warm-up run fills it),
//! as on a host where `mur` has run before.
//!
//! Run: `cargo bench --bench delegation` (`MURMUR_BENCH_RUNS=N`, default 10;
//! `MURMUR_BENCH_DETAIL=1` prints each call's steps).

#[path = "../tests/common/mod.rs"]
mod common;

use common::delegation::{responder, Cap, Formation, Plan};
use common::provider::Provider;
use serde_json::Value;
use std::time::{Duration, Instant};

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn events<'a>(trace: &'a [Value], kind: &str) -> Vec<&'a Value> {
    trace.iter().filter(|e| e["event_type"] == kind).collect()
}

fn num(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("no {k} in {v}"))
}

/// For the session `sid`'s one delegation: (the child's session, ms from the call's start
/// to the child's task_start).
fn call_to_running(f: &Formation, sid: &str) -> (String, Duration) {
    let t = f.trace(sid);
    let call = events(&t, "tool_call")
        .into_iter()
        .find(|e| e["tool_name"] == "delegate-task")
        .unwrap_or_else(|| panic!("{sid} made no delegate-task call"));
    let began = num(call, "timestamp") - num(call, "duration_ms");
    let started = events(&t, "delegation")
        .into_iter()
        .find(|e| e["status"] == "started")
        .unwrap_or_else(|| panic!("{sid} started no child"));
    let child = started["child_session_id"].as_str().unwrap().to_string();
    let ct = f.trace(&child);
    let task = events(&ct, "task_start")
        .first()
        .map(|e| num(e, "timestamp"))
        .unwrap_or_else(|| panic!("{child} ran no task"));
    if std::env::var_os("MURMUR_BENCH_DETAIL").is_some() {
        let start = num(events(&ct, "session_start")[0], "timestamp");
        eprintln!(
            "  call {began}: child session_start +{} ms, task_start +{} ms, parent's started line +{} ms",
            start - began,
            task - began,
            num(started, "timestamp") - began
        );
    }
    (child, Duration::from_millis(task.saturating_sub(began)))
}

fn main() {
    let runs: usize = std::env::var("MURMUR_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let p = Provider::start_responder(responder(&[
        ("orchestrator", Plan::delegate(&[("worker", "work")])),
        ("worker", Plan::delegate(&[("helper", "help")])),
        ("helper", Plan::answer("done")),
    ]));
    let mut f = Formation::new("bench-delegation");
    f.publish(&p, &Cap::delegating("orchestrator", &["worker", "helper"]));
    f.publish(&p, &Cap::delegating("worker", &["helper"]));
    f.publish(&p, &Cap::leaf("helper"));
    f.start_roost(&["orchestrator"], &["--max-live-capsules", "64"]);
    // Every `mur` of the formation keeps its compiled driver under `$HOME/.cache`, which the
    // runtime trusts only where no other user can write an ancestor (so not under /tmp,
    // where the formation's own files are): HOME is a directory of the build tree instead.
    let mut env = f.env();
    let home = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-delegation-home");
    std::fs::create_dir_all(&home).expect("bench home");
    env.insert("HOME".into(), home.display().to_string());

    let mut end_to_end = Vec::new();
    let mut calls = Vec::new();
    // One warm-up run fills the compile cache; it is not counted.
    for run in 0..=runs {
        let t0 = Instant::now();
        let mut top = f.start("orchestrator", Some("orchestrate"), &env);
        let status = top.child.wait().expect("wait for the orchestrator");
        let took = t0.elapsed();
        assert!(status.success(), "run {run}: {}\n{}", top.both(), f.dump());
        let (worker, c1) = call_to_running(&f, &top.sid);
        let (_, c2) = call_to_running(&f, &worker);
        if run > 0 {
            end_to_end.push(took);
            calls.extend([c1, c2]);
        }
    }
    f.assert_nothing_left();

    let e2e = pct(&mut end_to_end, 0.5);
    println!("delegation, {runs} runs of a 3-level formation (zero-latency mock provider)");
    println!(
        "  delegate-task call to child's task running: p50 {}, max {} ({} calls)",
        ms(pct(&mut calls, 0.5)),
        ms(pct(&mut calls, 1.0)),
        calls.len()
    );
    println!(
        "  formation end to end: p50 {}, max {}",
        ms(e2e),
        ms(pct(&mut end_to_end, 1.0))
    );
    let per_level = e2e / 3;
    println!(
        "  per level (end to end / 3): {} (goal <= 50 ms: {})",
        ms(per_level),
        if per_level <= Duration::from_millis(50) {
            "met"
        } else {
            "not met"
        }
    );
}
