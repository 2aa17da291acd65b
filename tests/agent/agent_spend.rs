//! Spend ceilings through the real `mur run` against the mock provider: a session's
//! `inference.max_session_tokens` refuses the call that would go past it before it is sent;
//! two sessions of one user (one `HOME`) share the per-day `spend.machine_tokens_per_day`
//! of its config file and `mur doctor` shows the day's ledger; a parent's ceiling counts
//! what its delegated child spent; the ledger survives `kill -9` of sessions in the middle
//! of their runs; a corrupt ledger refuses the call, naming it.

use crate::common;

use common::agent::{events, Drv, Spec, World};
use common::provider::{usage_for, Provider, Step};
use murmur::spend::ledger::Ledger;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

fn shell_call(n: u64) -> Step {
    Step::tool(&format!("c{n}"), "bash", json!({"command": "true"}))
}

/// Tokens the mock reports for its first `turns` turns.
fn spent(turns: u64) -> u64 {
    (1..=turns).map(|t| usage_for(t).0 + usage_for(t).1).sum()
}

/// The ledger at `path`, parsed.
fn ledger(path: &Path) -> Ledger {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Ledger::parse(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn all_days(l: &Ledger) -> u64 {
    l.days.values().sum()
}

#[test]
fn agent_spend_a_session_ceiling_refuses_the_call_before_it_is_sent() {
    let w = World::new("spend-session");
    let p = Provider::start(vec![
        shell_call(1),
        shell_call(2),
        shell_call(3),
        Step::text("never"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.max_turns = 10;
    // Turn 1 reports 15 tokens and turn 2 25: after two calls the session has spent 40.
    let limit = spent(2);
    spec.inference_extra = format!("  max_session_tokens: {limit}\n");
    w.manifest(&spec);
    let run = w.run("spend", &[]);
    let reason = format!(
        "the session spent {limit} tokens and inference.max_session_tokens is {limit}: the next model call was refused before it was sent"
    );
    run.assert_failed(&format!("the task ended spend_ceiling_reached: {reason}"));
    assert_eq!(
        p.model_requests().len(),
        2,
        "the refused call never reached the provider"
    );
    let sid = run.sid();
    assert_eq!(
        w.result(&sid),
        format!("error: spend_ceiling_reached: {reason}\n")
    );
    let all = w.trace(&sid);
    let c = events(&all, "spend_ceiling");
    assert_eq!(c.len(), 1, "{all:?}");
    let c = c[0];
    assert_eq!(
        (&c["ceiling"], &c["limit"], &c["used"], &c["turn"]),
        (&json!("session"), &json!(limit), &json!(limit), &json!(3)),
        "{c}"
    );
    assert_eq!(
        (&c["ceiling_session_id"], &c["key"]),
        (&json!(sid), &json!("inference.max_session_tokens"))
    );
    assert_eq!(events(&all, "inference").len(), 2);
    assert_eq!(
        events(&all, "task_end")[0]["exit_status"],
        "spend_ceiling_reached"
    );
    assert_eq!(
        events(&all, "session_end")[0]["exit_status"],
        "spend_ceiling_reached"
    );
    // `mur trace` marks the refusal with its numbers.
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .arg("trace")
        .arg(w.records(&sid).join("trace.jsonl"))
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!(
            "spend ceiling (session) reached before turn 3: {limit} of {limit} tokens used"
        )),
        "{shown}"
    );
    // The day's total holds both calls; the session's own entry left with it.
    let l = ledger(&w.t.path().join("spend/ledger.json"));
    assert_eq!(all_days(&l), limit);
    assert!(l.sessions.is_empty(), "{l:?}");
}

/// `mur run` for `w` with `HOME` at `home` and the ledger and config found from it.
fn run_at_home(w: &World, home: &Path, task: &str) -> common::agent::Run {
    let home = home.to_str().unwrap();
    w.run(
        task,
        &[("HOME", home), ("MURMUR_SPEND_DIR", ""), ("XDG_CONFIG_HOME", "")],
    )
}

#[test]
fn agent_spend_two_sessions_of_one_user_share_the_day_and_the_second_is_refused() {
    let w = World::new("spend-machine");
    let home = w.t.path().join("home");
    let config = home.join(".config/murmur");
    std::fs::create_dir_all(&config).unwrap();
    // The first session spends 15 (one call); the second 15 more on its first call; its
    // second call would start with the day at 30.
    let ceiling = 2 * spent(1);
    std::fs::write(
        config.join("config.yaml"),
        format!("spend:\n  machine_tokens_per_day: {ceiling}\n"),
    )
    .unwrap();
    let p1 = Provider::start(vec![Step::text("first")]);
    let mut spec = Spec::new(Drv::OpenAi, &p1);
    spec.max_turns = 10;
    w.manifest(&spec);
    run_at_home(&w, &home, "one").assert_ok();

    let p2 = Provider::start(vec![shell_call(1), Step::text("never")]);
    let mut spec = Spec::new(Drv::OpenAi, &p2);
    spec.max_turns = 10;
    w.manifest(&spec);
    let run = run_at_home(&w, &home, "two");
    let reason = format!(
        "this user's sessions spent {ceiling} tokens today (UTC) and spend.machine_tokens_per_day is {ceiling}: the next model call was refused before it was sent"
    );
    run.assert_failed(&format!("the task ended spend_ceiling_reached: {reason}"));
    assert_eq!(
        p2.model_requests().len(),
        1,
        "the call past the ceiling was never sent"
    );
    let all = w.trace(&run.sid());
    let c = events(&all, "spend_ceiling")[0];
    assert_eq!(
        (&c["ceiling"], &c["limit"], &c["used"], &c["key"]),
        (
            &json!("machine"),
            &json!(ceiling),
            &json!(ceiling),
            &json!("spend.machine_tokens_per_day")
        ),
        "{c}"
    );
    let path = home.join(".murmur/spend/ledger.json");
    assert_eq!(all_days(&ledger(&path)), ceiling);

    // `mur doctor` shows the day's ledger, in JSON and in text.
    let doctor = |json: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_mur"));
        c.arg("doctor")
            .env("HOME", &home)
            .env_remove("MURMUR_SPEND_DIR")
            .env_remove("XDG_CONFIG_HOME");
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let v: Value = serde_json::from_str(&doctor(true)).unwrap();
    let s = &v["spend"];
    assert_eq!(
        (&s["used_today"], &s["machine_tokens_per_day"], &s["error"]),
        (&json!(ceiling), &json!(ceiling), &Value::Null),
        "{s}"
    );
    assert_eq!(s["ledger"], path.display().to_string());
    assert_eq!(
        s["ceiling_from"],
        config.join("config.yaml").display().to_string()
    );
    let text = doctor(false);
    assert!(
        text.contains(&format!("spend today     {ceiling} of {ceiling} tokens"))
            && text.contains(&path.display().to_string()),
        "{text}"
    );
}

#[test]
fn agent_spend_the_ledger_survives_kill_9_in_the_middle_of_sessions() {
    let w = World::new("spend-kill");
    let p = Provider::start_responder(|_| shell_call(1));
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.max_turns = 100_000;
    w.manifest(&spec);
    let path = w.t.path().join("spend/ledger.json");
    let mut before = 0;
    for round in 0..4u64 {
        let mut child = w.start("spend until killed", &[]);
        // Killed after a few of its calls were charged, at a different moment each round.
        let until = Instant::now() + Duration::from_secs(60);
        while Instant::now() < until && (!path.exists() || all_days(&ledger(&path)) < before + 30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(7 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let l = ledger(&path);
        let now = all_days(&l);
        assert!(now >= before + 30, "round {round}: {now} after {before}");
        before = now;
    }
    // A session after the crashes finds the ledger as the crashed ones left it.
    assert!(ledger(&path).sessions.len() <= 4);
}

#[test]
fn agent_spend_a_corrupt_ledger_refuses_the_call_and_names_the_file() {
    let w = World::new("spend-corrupt");
    let p = Provider::start(vec![Step::text("never")]);
    w.manifest(&Spec::new(Drv::OpenAi, &p));
    let dir = w.t.path().join("spend");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::fs::write(dir.join("ledger.json"), b"{\"version\":1,\"days\":{\"2026-").unwrap();
    let run = w.run("spend", &[]);
    run.assert_failed(&format!(
        "the spend ledger {} is unreadable",
        dir.join("ledger.json").display()
    ));
    assert_eq!(p.model_requests().len(), 0);
    assert_eq!(
        std::fs::read(dir.join("ledger.json")).unwrap(),
        b"{\"version\":1,\"days\":{\"2026-"
    );
}

#[test]
fn agent_spend_a_parent_counts_what_its_child_spent_against_its_own_ceiling() {
    use common::delegation::*;
    let p = Provider::start_responder(responder(&[
        ("orchestrator", Plan::delegate(&[("worker", "TASK-FOR-WORKER")])),
        ("worker", Plan::answer("OUTPUT-worker")),
    ]));
    let mut f = Formation::new("spend-tree");
    // The orchestrator's two calls spend 15 and then 25 or 35 (the mock's second and third
    // requests, whichever of the two sessions asks first): 40 or 50, below its ceiling. With
    // the worker's one call the three spend 75, so the first call of the completion task is
    // refused only if the worker's tokens were counted against the orchestrator's ceiling.
    let limit = 60;
    let yaml = Cap::delegating("orchestrator", &["worker"]).yaml(&p).replace(
        "  max_turns: 6\n",
        &format!("  max_turns: 6\n  max_session_tokens: {limit}\n"),
    );
    f.publish_yaml(&yaml, &[]);
    f.publish(&p, &Cap::leaf("worker"));
    f.start_roost(&["orchestrator"], &[]);
    let mut top = f.start("orchestrator", Some("TASK-FOR-ORCHESTRATOR"), &f.env());
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(1), "{}\n{}", top.both(), f.dump());
    assert_eq!(requests_of(&p, "orchestrator").len(), 2, "{}", f.dump());
    assert_eq!(requests_of(&p, "worker").len(), 1, "{}", f.dump());
    let trace = f.trace(&top.sid);
    let c = events_of(&trace, "spend_ceiling");
    assert_eq!(c.len(), 1, "{trace:#?}");
    assert_eq!(
        (
            &c[0]["ceiling"],
            &c[0]["limit"],
            &c[0]["used"],
            &c[0]["ceiling_session_id"]
        ),
        (
            &json!("session"),
            &json!(limit),
            &json!(spent(3)),
            &json!(top.sid)
        ),
        "{}",
        c[0]
    );
    let tasks = events_of(&trace, "task_end");
    let ends: Vec<&Value> = tasks.iter().map(|t| &t["exit_status"]).collect();
    assert_eq!(
        ends,
        [&json!("ok"), &json!("spend_ceiling_reached")],
        "{trace:#?}"
    );
    assert!(top.stderr().contains("spend_ceiling_reached"), "{}", top.both());
}
