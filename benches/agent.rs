//! Agent loop figures, printed and never asserted: a 20-turn task through the real `mur run`
//! and the shipped OpenAI-compatible driver against the mock provider with zero latency.
//!
//! - per turn: the gap between two consecutive model requests at the mock, with a skill
//!   call (no process, no guest) as the tool: the runtime's own cost per turn (driver
//!   instance, both JSON mappings, dispatch, trace), p50 and p99; cold (empty compile cache)
//!   and warm (driver compiled and cached), with the launch time to the first request.
//! - per shell call: the same gap with a `true` shell call per turn, under the class the host
//!   achieves for `scoped` and `sealed`, minus the skill-turn median, next to what `/bin/true`
//!   costs when started directly: the containment's overhead over the command's own time;
//!   then, in CPU (whole sessions under `perf stat`), what a sealed `true` call adds to a
//!   session (less a session whose turns call a skill) and what a scoped or sealed call
//!   adds over an advisory one, beside one plain bubblewrap run of `true`; then the sealed
//!   call and plain bwrap in the machine's busy time (/proc/stat, kernel workers included:
//!   bwrap's sandbox side, which its first process never waits for, and each one's
//!   namespace teardown), 10 ms ticks over whole sessions, so coarser.
//!
//! - the spend ledger: what each model call adds (one read of the ledger before it, one
//!   locked, durable update after it), p50 and p99 over 200 calls, and its share of the
//!   warm skill turn (which pays it once a turn); then the warm session again with the
//!   ledger on tmpfs, since inside a session its `fsync`s also wait for the session's other
//!   writes. Before and after a change: `MURMUR_BENCH_MUR` runs the same figures on another
//!   build of `mur`.
//! - hooks: the same skill turns with a blocking no-op hook bound to every session event,
//!   and with an async hook, against the warm skill-turn median.
//! - the history: a 41-turn session with an advisory `true` shell call per turn, its early
//!   turns (2 to 6) against its late ones (36 to 40), and the whole session's CPU (`perf
//!   stat`'s task-clock of `mur` and its children): the CPU of turns 7 to 41 alone (the
//!   41-turn session's less a 6-turn session's, over 35, medians of 3 rounds), without the
//!   launch, and how much of it is `/bin/true`'s own start; then the same against a
//!   provider that keeps its connection open, as real ones do (the scripted mock closes
//!   after each answer), so the driver's calls share one kept connection.
//!
//! Run: `cargo bench --bench agent` (`MURMUR_BENCH_MUR=PATH` measures another build of `mur`).

#[path = "../tests/common/kept_provider.rs"]
mod kept_provider;
#[path = "../tests/common/provider.rs"]
mod provider;
mod support;

use kept_provider::{KeptProvider, Mode};
use provider::{Provider, Step};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TURNS: usize = 20;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

struct Setup {
    base: PathBuf,
    registry: PathBuf,
}

fn setup() -> Setup {
    let base = std::env::temp_dir().join(format!("murmur-bench-agent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let registry = base.join("registry");
    support::publish_driver_and_note(&registry);
    for hook in ["hook-noop", "hook-async-recorder"] {
        let zip = repo(&format!("tests/fixtures/hooks/{hook}/{hook}-1.0.0.mur.zip"));
        murmur::registry::publish(&registry, &std::fs::read(zip).expect("the hook fixture"), None).unwrap();
    }
    Setup { base, registry }
}

/// One session of `turns` turns; the time from launch to the first request, the gaps
/// between consecutive model requests, and (with `cpu`, through `perf stat`) the CPU of
/// `mur` and its children in ms.
struct Session<'a> {
    label: &'a str,
    cache: &'a Path,
    tool: (&'a str, serde_json::Value),
    containment: &'a str,
    hooks: &'a str,
    turns: usize,
    cpu: bool,
    /// Whether the manifest allows the shell binary `true` (its launch then starts the
    /// session's egress relay, whatever the turns call).
    shell: bool,
    /// `MURMUR_SPEND_DIR` (None: the bench's own directory, on the disk of the temp dir).
    spend: Option<PathBuf>,
    /// A provider that keeps its connections open (`kept_provider`), instead of the
    /// scripted mock, which closes after each answer.
    kept: bool,
}

/// The provider a session talks to.
enum Mock {
    Scripted(Provider),
    Kept(KeptProvider),
}

impl Mock {
    fn start(turns: usize, tool: &(&str, serde_json::Value), kept: bool) -> Mock {
        if kept {
            return Mock::Kept(KeptProvider::start(turns - 1, tool.0, tool.1.clone(), Mode::Keep));
        }
        let mut script: Vec<Step> = (0..turns - 1)
            .map(|i| Step::tool(&format!("c{i}"), tool.0, tool.1.clone()))
            .collect();
        script.push(Step::text("done"));
        Mock::Scripted(Provider::start(script))
    }

    fn port(&self) -> u16 {
        match self {
            Mock::Scripted(p) => p.port(),
            Mock::Kept(p) => p.port(),
        }
    }

    fn base_openai(&self) -> String {
        match self {
            Mock::Scripted(p) => p.base_openai(),
            Mock::Kept(p) => p.endpoint(),
        }
    }

    /// When each model request had arrived.
    fn arrivals(&self) -> Vec<Instant> {
        match self {
            Mock::Scripted(p) => p.model_requests().iter().map(|r| r.at).collect(),
            Mock::Kept(p) => p.arrivals(),
        }
    }
}

/// The launch to the first request, the gaps between requests, and with `cpu` the CPU in
/// ms: `perf stat`'s count of `mur` and its children, and the machine's busy time while it
/// ran (kernel workers included, the background taken out).
type Measured = (Duration, Vec<Duration>, Option<(f64, f64)>);

/// The machine's background busy rate, measured once (see `support::background_rate`).
fn background() -> f64 {
    static RATE: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *RATE.get_or_init(support::background_rate)
}

fn session(s: &Setup, o: Session<'_>) -> Option<Measured> {
    let Session {
        label,
        cache,
        tool,
        containment,
        hooks,
        turns,
        cpu,
        shell,
        spend,
        kept,
    } = o;
    let mock = Mock::start(turns, &tool, kept);
    let dir = s.base.join(label);
    std::fs::create_dir_all(&dir).unwrap();
    let shell = if shell {
        "  shell: {allow: [\"true\"]}\n"
    } else {
        ""
    };
    std::fs::write(
        dir.join("murmur.yaml"),
        format!(
            "name: bench-agent\nversion: 0.1.0\nartifacts:\n  - {{name: murmur-driver-openai, version: 1.0.0, runtime: driver}}\n  - {{name: note, version: 1.0.0, runtime: skill}}\n{hooks}capabilities:\n  network: {{allow: [\"http://127.0.0.1:{}\"]}}\n  containment: {containment}\n{shell}inference:\n  endpoint: {}\n  model: mock\n  driver: {{artifact: murmur-driver-openai}}\n  max_turns: {turns}\n",
            mock.port(),
            mock.base_openai()
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    let mut cmd = if cpu {
        let mut c = Command::new("perf");
        c.args([
            "stat",
            "-x",
            ",",
            "-e",
            "task-clock",
            "--",
            &support::mur_binary(),
        ]);
        c
    } else {
        Command::new(support::mur_binary())
    };
    let background = if cpu { background() } else { 0.0 };
    let (out, machine) = support::machine_ms(background, || {
        cmd.args(["run", "--manifest"])
            .arg(dir.join("murmur.yaml"))
            .arg("--registry-path")
            .arg(&s.registry)
            .args(["--task", "bench"])
            .env("MURMUR_CACHE_DIR", cache)
            .env("MURMUR_RECORDS_DIR", s.base.join("records"))
            .env("MURMUR_SPEND_DIR", spend.unwrap_or_else(|| s.base.join("spend")))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    });
    if !out.status.success() {
        println!(
            "  {label}: mur run failed: {}",
            String::from_utf8_lossy(&out.stderr).lines().next().unwrap_or("")
        );
        return None;
    }
    let reqs = mock.arrivals();
    assert_eq!(reqs.len(), turns, "one request per turn");
    let first = reqs[0].duration_since(t0);
    let gaps = reqs.windows(2).map(|w| w[1].duration_since(w[0])).collect();
    let used = String::from_utf8_lossy(&out.stderr)
        .lines()
        .find(|l| l.contains(",task-clock"))
        .and_then(|l| l.split(',').next().and_then(|v| v.trim().parse::<f64>().ok()))
        .map(|perf| (perf, machine));
    Some((first, gaps, used))
}

/// Inside a session the ledger's `fsync`s also wait for the journal to take the session's
/// other writes (the trace, the logs): the warm skill session again with the ledger on
/// tmpfs, against `disk_p50` (the ledger beside the records, on the temp dir's disk).
fn ledger_in_session(s: &Setup, cache: &Path, disk_p50: Duration) {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return;
    }
    let dir = shm.join(format!("murmur-bench-spend-{}", std::process::id()));
    let o = Session {
        spend: Some(dir.clone()),
        ..plain("warm-ledger-tmpfs", cache, ("note", json!({})), "advisory", "")
    };
    if let Some((_, mut gaps, _)) = session(s, o) {
        let p50 = pct(&mut gaps, 0.5);
        println!(
            "  warm, the ledger on tmpfs: per turn p50 {}; the ledger's durable writes on the temp dir's disk cost about {} a turn",
            ms(p50),
            ms(disk_p50.saturating_sub(p50))
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The spend ledger's cost per model call, measured on the library's own store in the
/// bench's directory: a read (the check before a call) and a locked, durable update (the
/// charge after it); the p50.
fn ledger_cost(s: &Setup) -> Duration {
    use murmur::spend::store::Store;
    const CALLS: usize = 200;
    let store = Store::at(s.base.join("spend"));
    let id = "ses_0123456789abcdef0123456789abcdef";
    let now = murmur::clock::now_ms();
    let mut v: Vec<Duration> = (0..CALLS)
        .map(|_| {
            let t = Instant::now();
            let l = store.read().expect("the ledger reads");
            std::hint::black_box(l.of_session(id));
            store
                .update(now, |l| l.charge(15, &[id], now))
                .expect("the ledger updates");
            t.elapsed()
        })
        .collect();
    let p50 = pct(&mut v, 0.5);
    println!(
        "  spend ledger per model call (read before, locked durable update after): p50 {} p99 {} over {CALLS} calls, in {}",
        ms(p50),
        ms(pct(&mut v, 0.99)),
        s.base.display()
    );
    p50
}

/// The CPU of `/bin/true` started on its own (`perf stat`, median of 11): the command's
/// own share of a turn that calls it.
fn true_cpu() -> f64 {
    support::median_f64(
        (0..11)
            .map(|_| support::perf_stat(&["/bin/true"], &[]).1)
            .collect(),
    )
}

fn direct_true() -> Duration {
    let mut v: Vec<Duration> = (0..30)
        .map(|_| {
            let t = Instant::now();
            Command::new("/bin/true").status().unwrap();
            t.elapsed()
        })
        .collect();
    pct(&mut v, 0.5)
}

fn main() {
    let s = setup();
    println!("agent loop, {TURNS}-turn task, mock provider with zero latency, murmur-driver-openai");
    let ledger_p50 = ledger_cost(&s);
    let skill = ("note", json!({}));
    let cache = s.base.join("cache");
    let mut skill_p50 = Duration::ZERO;
    for (label, fresh) in [("cold", true), ("warm", false)] {
        if fresh {
            let _ = std::fs::remove_dir_all(&cache);
        }
        let Some((first, mut gaps, _)) = session(&s, plain(label, &cache, skill.clone(), "advisory", ""))
        else {
            continue;
        };
        let p50 = pct(&mut gaps, 0.5);
        let p99 = pct(&mut gaps, 0.99);
        if !fresh {
            skill_p50 = p50;
        }
        println!(
            "  {label}: launch to first request {}, per turn p50 {} p99 {}",
            ms(first),
            ms(p50),
            ms(p99)
        );
    }
    if !skill_p50.is_zero() {
        println!(
            "  the spend ledger's share of a warm turn, from the figure above: {:.1}% (the turn without it: about {})",
            100.0 * ledger_p50.as_secs_f64() / skill_p50.as_secs_f64(),
            ms(skill_p50.saturating_sub(ledger_p50))
        );
        ledger_in_session(&s, &cache, skill_p50);
    }
    // Hooks: a blocking no-op bound to every session event fires twice a turn here
    // (inference, then the skill's tool-call); an async hook only queues its events.
    for (label, hooks) in [
        ("blocking no-op hook", "  - {name: hook-noop, version: 1.0.0, runtime: hook}\n"),
        (
            "async hook",
            "  - {name: hook-async-recorder, version: 1.0.0, runtime: hook, capabilities: {filesystem: {scope: hook-state}}}\n",
        ),
    ] {
        let Some((_, mut gaps, _)) = session(&s, plain(label, &cache, skill.clone(), "advisory", hooks)) else {
            continue;
        };
        let p50 = pct(&mut gaps, 0.5);
        let added = p50.saturating_sub(skill_p50);
        println!(
            "  {label}: per turn p50 {} p99 {}; added {} per turn, {} per hook call (2 a turn)",
            ms(p50),
            ms(pct(&mut gaps, 0.99)),
            ms(added),
            ms(added / 2)
        );
    }
    let own = direct_true();
    println!(
        "  /bin/true started directly: {} (the command's own time)",
        ms(own)
    );
    for class in ["advisory", "scoped", "sealed"] {
        let label = format!("shell-{class}");
        let Some((_, mut gaps, _)) = session(
            &s,
            plain(&label, &cache, ("true", json!({"command": ""})), class, ""),
        ) else {
            continue;
        };
        let p50 = pct(&mut gaps, 0.5);
        let p99 = pct(&mut gaps, 0.99);
        println!(
            "  shell call under {class}: turn p50 {} p99 {}; over a skill turn {}, over the command's own time {}",
            ms(p50),
            ms(p99),
            ms(p50.saturating_sub(skill_p50)),
            ms(p50.saturating_sub(skill_p50).saturating_sub(own))
        );
    }
    call_cpu(&s, &cache);
    history(&s, &cache);
    let _ = std::fs::remove_dir_all(&s.base);
}

/// The CPU a shell call adds: 20-turn sessions (mur and its children, `perf stat`), medians
/// of 3 alternated rounds, over the 19 calls: a skill call a turn (no process: the
/// session without a shell call, its manifest allowing `true` as the others'), then a
/// `true` call a turn under each class. A sealed
/// call less the skill session is what a sealed `true` call adds to a session; less the
/// advisory session, what the containment adds over the command's plain start. Beside one
/// plain bubblewrap run of `true` (median of 11) and `/bin/true` started directly.
fn call_cpu(s: &Setup, cache: &Path) {
    const ROUNDS: usize = 3;
    let kinds = [
        ("skill", "advisory"),
        ("true", "advisory"),
        ("true", "scoped"),
        ("true", "sealed"),
    ];
    let mut cpu: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    let mut machine: Vec<Vec<f64>> = vec![Vec::new(); kinds.len()];
    for _ in 0..ROUNDS {
        for (i, (tool, class)) in kinds.iter().enumerate() {
            let label = format!("cpu-{tool}-{class}");
            let tool = match *tool {
                "skill" => ("note", json!({})),
                _ => ("true", json!({"command": ""})),
            };
            // Every session allows `true`, so each launches alike (the egress relay).
            let o = Session {
                cpu: true,
                shell: true,
                ..plain(&label, cache, tool, class, "")
            };
            if let Some((_, _, Some((c, m)))) = session(s, o) {
                cpu[i].push(c);
                machine[i].push(m);
            }
        }
    }
    if cpu.iter().any(Vec::is_empty) {
        println!("  CPU per shell call: perf not installed or a session failed");
        return;
    }
    let med: Vec<f64> = cpu.into_iter().map(support::median_f64).collect();
    let calls = (TURNS - 1) as f64;
    let per = |i: usize, over: usize| (med[i] - med[over]) / calls;
    let (advisory, scoped, sealed) = (per(1, 0), per(2, 1), per(3, 1));
    let sealed_in_session = per(3, 0);
    let own = true_cpu();
    println!(
        "  CPU a shell call adds to a session (over a skill call): advisory {advisory:.2} ms, sealed {sealed_in_session:.2} ms; /bin/true on its own: {own:.2} ms (sessions: skill {:.1} ms, advisory {:.1}, scoped {:.1}, sealed {:.1}; {TURNS} turns)",
        med[0], med[1], med[2], med[3]
    );
    let (bwrap, plain) = if support::have_bwrap() {
        let dir = s.base.join("bwrap");
        std::fs::create_dir_all(&dir).unwrap();
        let args = support::bwrap_true(&dir.display().to_string());
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let c: Vec<f64> = (0..11).map(|_| support::perf_stat(&a, &[]).1).collect();
        (
            format!("{:.2} ms", support::median_f64(c)),
            Some(support::bwrap_plain_cpu(11)),
        )
    } else {
        ("not installed".into(), None)
    };
    println!(
        "  CPU a shell call adds over an advisory one: scoped {scoped:.2} ms, sealed {sealed:.2} ms; one bwrap --unshare-all run of true (workdir bound): {bwrap}"
    );
    if let Some(plain) = plain {
        println!(
            "  ratio, the CPU a sealed call adds to a session / one plain bwrap run of true ({plain:.2} ms, `{}`): {:.2}x (goal <= 1.0x); over an advisory call: sealed {:.2}x, scoped {:.2}x",
            support::bwrap_plain().join(" "),
            sealed_in_session / plain,
            sealed / plain,
            scoped / plain
        );
        sealed_by_machine(&machine, calls);
    }
}

/// What a sealed call adds to a session in the machine's busy time (`machine`: the
/// sessions' counts, skill first, sealed last), against plain bwrap counted so too (its
/// sandbox's teardown in kernel workers included, as a sealed call's is).
fn sealed_by_machine(machine: &[Vec<f64>], calls: f64) {
    let m: Vec<f64> = machine.iter().cloned().map(support::median_f64).collect();
    let sealed_machine = (m[3] - m[0]) / calls;
    let args = support::bwrap_plain();
    let bwrap_machine = support::machine_ms(background(), || {
        for _ in 0..BWRAP_RUNS {
            let _ = Command::new(&args[0])
                .args(&args[1..])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    })
    .1 / BWRAP_RUNS as f64;
    println!(
        "  the same in the machine's busy time: a sealed call adds {sealed_machine:.2} ms to a session (sessions: skill {:.1} ms, sealed {:.1}), one plain bwrap run {bwrap_machine:.2} ms (of {BWRAP_RUNS}): {:.2}x",
        m[0],
        m[3],
        sealed_machine / bwrap_machine
    );
}

/// Plain bwrap runs counted in the machine's busy time at once (a tick is 10 ms).
const BWRAP_RUNS: usize = 60;

/// A 20-turn session without `perf`.
fn plain<'a>(
    label: &'a str,
    cache: &'a Path,
    tool: (&'a str, serde_json::Value),
    containment: &'a str,
    hooks: &'a str,
) -> Session<'a> {
    Session {
        label,
        cache,
        shell: tool.0 == "true",
        tool,
        containment,
        hooks,
        turns: TURNS,
        cpu: false,
        spend: None,
        kept: false,
    }
}

/// Turn cost against the history's length: 41 turns, an advisory `true` call each; and a
/// 6-turn session of the same kind, whose CPU taken from the long one's leaves the CPU of
/// the 35 turns between, without the launch's (medians of 3 alternated rounds); beside
/// the CPU of `/bin/true` itself, which each of those turns pays.
fn history(s: &Setup, cache: &Path) {
    const ROUNDS: usize = 3;
    let run = |label: &str, turns: usize, kept: bool| {
        let o = Session {
            turns,
            cpu: true,
            kept,
            ..plain(label, cache, ("true", json!({"command": ""})), "advisory", "")
        };
        session(s, o)
    };
    // Each round's pairs of sessions, both measured: against the scripted mock (a connection
    // per call: it closes after each answer), then against a provider that keeps it open.
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    let mut kept: Vec<(f64, f64)> = Vec::new();
    let mut gaps = Vec::new();
    for _ in 0..ROUNDS {
        let short = run("history-short", SHORT, false).and_then(|(_, _, c)| c);
        let Some((_, g, long)) = run("history", LONG, false) else {
            continue;
        };
        gaps = g;
        if let (Some(a), Some(b)) = (short, long) {
            pairs.push((a.0, b.0));
        }
        let short = run("history-kept-short", SHORT, true).and_then(|(_, _, c)| c);
        let long = run("history-kept", LONG, true).and_then(|(_, _, c)| c);
        if let (Some(a), Some(b)) = (short, long) {
            kept.push((a.0, b.0));
        }
    }
    if gaps.is_empty() {
        return;
    }
    let own = true_cpu();
    if let Some((turn, rounds, long, short)) = per_turn(&pairs) {
        println!(
            "  CPU per turn from turn {} to {LONG}: {turn:.2} ms (rounds: {rounds} ms; medians: {LONG}-turn session {long:.1} ms, {SHORT}-turn {short:.1} ms, mur and children; goal <= 1.0 ms); of it /bin/true's own start {own:.2} ms, the runtime's {:.2} ms",
            SHORT + 1,
            (turn - own).max(0.0)
        );
    }
    if let Some((turn, rounds, _, _)) = per_turn(&kept) {
        println!(
            "  the same against a provider that keeps its connection open (the driver's calls share one; the scripted mock closes after each answer): {turn:.2} ms (rounds: {rounds} ms); the runtime's {:.2} ms",
            (turn - own).max(0.0)
        );
    }
    // gaps[i] is the turn that follows request i + 1: turn 2 is gaps[0].
    let early = pct(&mut gaps[0..5].to_vec(), 0.5);
    let late = pct(&mut gaps[LONG - 6..LONG - 1].to_vec(), 0.5);
    println!(
        "  {LONG}-turn session, advisory `true` per turn (the last round): turns 2-6 p50 {}, turns 36-40 p50 {} ({:.2}x)",
        ms(early),
        ms(late),
        late.as_secs_f64() / early.as_secs_f64().max(1e-9),
    );
}

/// The history's long and short sessions.
const LONG: usize = 41;
const SHORT: usize = 6;

/// From rounds of (short, long) session CPU: the CPU per turn between them (of the medians),
/// each round's own figure, and the two medians.
fn per_turn(pairs: &[(f64, f64)]) -> Option<(f64, String, f64, f64)> {
    if pairs.is_empty() {
        return None;
    }
    let turns = (LONG - SHORT) as f64;
    let rounds: Vec<String> = pairs
        .iter()
        .map(|(a, b)| format!("{:.2}", (b - a) / turns))
        .collect();
    let short = support::median_f64(pairs.iter().map(|p| p.0).collect());
    let long = support::median_f64(pairs.iter().map(|p| p.1).collect());
    Some(((long - short) / turns, rounds.join(", "), long, short))
}
