//! The door's round trip of an agent capsule with `approvals` configured but no approval
//! needed, against the same capsule with none configured, in one run: a blocking 1.0
//! `SendMessage` (the task runs two model turns against the zero-latency mock and one
//! skill call, which the approvals check looks at and lets run) answered with the completed
//! task. Both capsules are measured in turn, twice each, so the machine's drift falls on
//! both alike; p50 and p99 of one round trip and how many round trips each made.

use super::provider::{last_is_tool_result, Provider, Step};
use super::{rpc, stop, Capsule, RUN_FOR, WARM_UP};
use serde_json::json;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The capsules' common manifest: the OpenAI driver, the `note` skill, shell `true`.
fn manifest(mock: &Provider, approvals: &str) -> String {
    format!(
        "name: bench-agent\nversion: 0.1.0\nartifacts:\n  - {{name: murmur-driver-openai, version: 1.0.0, runtime: driver}}\n  - {{name: note, version: 1.0.0, runtime: skill}}\ncapabilities:\n  network: {{allow: [\"http://127.0.0.1:{}\"]}}\n  shell: {{allow: [\"true\"]}}\ninference:\n  endpoint: {}\n  model: mock\n  driver: {{artifact: murmur-driver-openai}}\n  max_turns: 4\n  max_session_tokens: 1000000000000\nlifecycle: {{task_acceptance: queue, after_task: sleep, queue_depth: 1024}}\n{approvals}",
        mock.port(),
        mock.base_openai()
    )
}

/// The registry: the shipped driver and a skill.
fn registry(base: &Path) -> std::path::PathBuf {
    let registry = base.join("registry");
    super::support::publish_driver_and_note(&registry);
    registry
}

fn launch(base: &Path, label: &str, yaml: &str, registry: &Path) -> Capsule {
    let dir = base.join(label);
    std::fs::create_dir_all(dir.join("work")).unwrap();
    std::fs::write(dir.join("murmur.yaml"), yaml).unwrap();
    let stderr = std::fs::File::create(dir.join("stderr.log")).unwrap();
    let mut child = Command::new(super::support::mur_binary())
        .args(["run", "--json", "--manifest"])
        .arg(dir.join("murmur.yaml"))
        .arg("--registry-path")
        .arg(registry)
        .arg("--workdir")
        .arg(dir.join("work"))
        .env("MURMUR_CACHE_DIR", base.join("cache"))
        .env("MURMUR_RECORDS_DIR", base.join("records"))
        .env("MURMUR_SPEND_DIR", base.join("spend"))
        .env("XDG_CONFIG_HOME", base.join("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let (port, pid, _) = super::support::announced(&mut child).unwrap_or_else(|e| panic!("{e}"));
    Capsule {
        pid,
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        host: format!("127.0.0.1:{port}"),
        auth: String::new(),
    }
}

/// Blocking sends for `for_how_long`: the round trips' times, and how many did not come
/// back completed.
fn sends(c: &Capsule, for_how_long: Duration) -> (Vec<Duration>, u64) {
    let (mut times, mut odd) = (Vec::new(), 0);
    let until = Instant::now() + for_how_long;
    let mut n = 0u64;
    while Instant::now() < until {
        n += 1;
        let params = json!({"message": {"messageId": format!("b-{n}"), "role": "ROLE_USER", "parts": [{"text": "bench"}]}});
        let t = Instant::now();
        let answered = rpc(c, true, "SendMessage", n, params);
        let state = answered.as_ref().and_then(|(_, v)| {
            v["result"]["task"]["status"]["state"]
                .as_str()
                .map(str::to_string)
        });
        if state.as_deref() == Some("TASK_STATE_COMPLETED") {
            times.push(t.elapsed());
        } else {
            odd += 1;
        }
    }
    (times, odd)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v.get(((v.len().max(1) as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or_default()
}

/// The figure: approvals configured (no call needs one) against none, in turn.
pub fn approvals(base: &Path) {
    let mock = Provider::start_responder(|req| {
        if last_is_tool_result(req) {
            Step::text("done")
        } else {
            Step::tool("c1", "note", json!({}))
        }
    });
    let registry = registry(base);
    // The mock's usage grows with every request: no ceiling may end a session mid-figure.
    std::fs::create_dir_all(base.join("config/murmur")).unwrap();
    std::fs::write(
        base.join("config/murmur/config.yaml"),
        "spend:\n  machine_tokens_per_day: 1000000000000\n",
    )
    .unwrap();
    let configured = "approvals:\n  tools: []\n  shell: ['true *never*']\n";
    let plain = launch(base, "agent-plain", &manifest(&mock, ""), &registry);
    let guarded = launch(base, "agent-approvals", &manifest(&mock, configured), &registry);
    println!(
        "approvals: an agent capsule's blocking SendMessage (two model turns, one skill call), approvals configured with no approval needed against none; {} s per figure after {} s warm-up, twice each in turn",
        RUN_FOR.as_secs(),
        WARM_UP.as_secs()
    );
    for c in [&plain, &guarded] {
        sends(c, WARM_UP);
    }
    for round in 1..=2 {
        for (c, label) in [(&plain, "none configured"), (&guarded, "approvals, none needed")] {
            let (mut times, odd) = sends(c, RUN_FOR);
            let count = times.len();
            println!(
                "  round {round}, {label}: {count} round trips ({:.1}/s), p50 {:.2} ms, p99 {:.2} ms{}",
                count as f64 / RUN_FOR.as_secs_f64(),
                super::ms(pct(&mut times, 0.5)),
                super::ms(pct(&mut times, 0.99)),
                if odd > 0 {
                    format!(", {odd} not completed")
                } else {
                    String::new()
                }
            );
        }
    }
    stop(plain, "agent-plain", base);
    stop(guarded, "agent-approvals", base);
}
