//! The roost's bounds as a delegating capsule meets them: the refusal sentence is the tool's
//! result, word for word, the session carries on and the formation still ends by itself.
//! Depth (a capsule that names itself), concurrency and the machine ceiling (two delegations
//! in one turn), and the spawn envelope (no child directory, no child process).

use crate::common::delegation::*;
use crate::common::provider::{last_user_text, Provider};
use serde_json::{json, Value};

/// The `delegation` events of `trace` with status `status`.
fn with_status<'a>(trace: &'a [Value], status: &str) -> Vec<&'a Value> {
    events_of(trace, "delegation")
        .into_iter()
        .filter(|e| e["status"] == status)
        .collect()
}

/// The refused `delegation` line of a trace: capsule, version and the sentence.
fn assert_refused_line(trace: &[Value], capsule: &str, sentence: &str) {
    let refused = with_status(trace, "refused");
    assert_eq!(refused.len(), 1, "{:#?}", events_of(trace, "delegation"));
    let e = refused[0];
    assert_eq!(e["capsule"], capsule, "{e}");
    assert_eq!(e["version"], V, "{e}");
    assert_eq!(e["output"], sentence, "{e}");
}

#[test]
fn a_capsule_that_names_itself_stops_at_the_depth_bound() {
    let p = Provider::start_responder(responder(&[(
        "looper",
        Plan::delegate(&[("looper", "go one level deeper")]),
    )]));
    let mut f = Formation::new("dlg-depth");
    f.publish(&p, &Cap::delegating("looper", &["looper"]));
    f.start_roost(&["looper"], &["--max-depth", "2"]);
    let mut top = f.start("looper", Some("start the recursion"), &f.env());
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());

    // Levels 1 and 2 started a child; level 3's call got the depth sentence, exactly.
    let all: Vec<String> = results_of(&p, "looper").into_iter().flatten().collect();
    assert_eq!(all.len(), 3, "{all:#?}");
    let (json_results, sentences): (Vec<&String>, Vec<&String>) =
        all.iter().partition(|t| serde_json::from_str::<Value>(t).is_ok());
    assert_eq!(sentences, [&depth_sentence(2)], "{all:#?}");
    assert_eq!(json_results.len(), 2, "{all:#?}");

    // Follow the chain through the traces.
    let l1 = top.sid.clone();
    let t1 = f.trace(&l1);
    let s1 = with_status(&t1, "started");
    assert_eq!(s1.len(), 1, "{t1:#?}");
    let l2 = sv(s1[0], "child_session_id").to_string();
    let t2 = f.trace(&l2);
    let s2 = with_status(&t2, "started");
    assert_eq!(s2.len(), 1, "{t2:#?}");
    let l3 = sv(s2[0], "child_session_id").to_string();
    let t3 = f.trace(&l3);
    assert_eq!(session_start(&t2)["spawned_by"], json!(l1));
    assert_eq!(session_start(&t3)["spawned_by"], json!(l2));
    assert!(with_status(&t3, "started").is_empty(), "{t3:#?}");
    assert_refused_line(&t3, "looper", &depth_sentence(2));
    for t in [&t1, &t2] {
        assert_eq!(with_status(t, "ok").len(), 1, "{t:#?}");
    }

    // Three sessions, no fourth directory, and the roost's view of the budget.
    assert_eq!(f.sessions().len(), 3, "{:?}", f.sessions());
    let d2 = top.workdir.join(sv(s1[0], "child_workdir"));
    let d3 = d2.join(sv(s2[0], "child_workdir"));
    assert!(d3.is_dir(), "{}", d3.display());
    assert_eq!(names_in(&d3.join(".murmur/children")), Vec::<String>::new());
    for (sid, depth) in [(&l1, 2), (&l2, 1), (&l3, 0)] {
        let s = f.roost_status(sid, "complete");
        assert_eq!(s["depth_remaining"], depth, "{sid}: {s}");
    }
    f.assert_nothing_left();
}

/// A capsule delegating twice in one turn under a roost started with `args`: the first
/// starts, the second is refused with `sentence`, the formation completes.
fn second_of_two_is_refused(label: &str, args: &[&str], sentence: &str) {
    let p = Provider::start_responder(responder(&[
        (
            "fanout",
            Plan::delegate(&[("leaf", "FIRST-TASK"), ("leaf", "SECOND-TASK")]),
        ),
        // The first child is still running (so still counted) when the second is asked
        // for: a leaf that answered at once could be gone by then.
        (
            "leaf",
            Plan::answer_after(std::time::Duration::from_secs(3), "OUTPUT-leaf"),
        ),
    ]));
    let mut f = Formation::new(label);
    f.publish(&p, &Cap::delegating("fanout", &["leaf"]));
    f.publish(&p, &Cap::leaf("leaf"));
    f.start_roost(&["fanout"], args);
    let mut top = f.start("fanout", Some("fan out twice"), &f.env());
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());

    let r = results_of(&p, "fanout");
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].len(), 2, "{r:#?}");
    let first = started(&r[0][0], "leaf");
    assert_eq!(r[0][1], sentence);

    // One child ran, on the first task; the session went on and took its completion.
    let leaf_reqs = requests_of(&p, "leaf");
    assert_eq!(leaf_reqs.len(), 1);
    assert_eq!(last_user_text(&leaf_reqs[0]), "FIRST-TASK");
    assert_eq!(completions_to(&p, "fanout").len(), 1);
    assert_eq!(
        names_in(&top.workdir.join(".murmur/children")).len(),
        1,
        "one child directory"
    );
    let trace = f.trace(&top.sid);
    assert_refused_line(&trace, "leaf", sentence);
    let ok = with_status(&trace, "ok");
    assert_eq!(ok.len(), 1, "{trace:#?}");
    assert_eq!(ok[0]["delegation_id"], first["delegation_id"]);
    assert_eq!(f.sessions().len(), 2, "{:?}", f.sessions());
    f.roost_status(&top.sid, "complete");
    f.assert_nothing_left();
}

#[test]
fn a_second_child_past_max_concurrent_is_refused_with_the_concurrency_sentence() {
    second_of_two_is_refused(
        "dlg-concurrent",
        &["--max-concurrent", "1"],
        &concurrency_sentence(1, 1),
    );
}

#[test]
fn a_second_child_past_the_machine_ceiling_is_refused_with_the_ceiling_sentence() {
    // The top-level session counts once registered; its first child's reservation fills it.
    second_of_two_is_refused(
        "dlg-ceiling",
        &["--max-live-capsules", "2"],
        &ceiling_sentence(2, 2),
    );
}

#[test]
fn a_child_wider_than_its_parent_is_refused_and_nothing_is_launched() {
    let p = Provider::start_responder(responder(&[
        ("narrow", Plan::delegate(&[("wide", "reach further")])),
        ("wide", Plan::answer("OUTPUT-wide")),
    ]));
    let mut f = Formation::new("dlg-envelope");
    f.publish(&p, &Cap::delegating("narrow", &["wide"]));
    f.publish(&p, &Cap::leaf("wide").network(&["api.example.com"]));
    f.start_roost(&["narrow"], &[]);
    let mut env = f.env();
    // Nothing was delegated, so the session may wait for another task: not for long.
    env.insert("MURMUR_A2A_TIMEOUT_SECS".into(), "3".into());
    let mut top = f.start("narrow", Some("delegate beyond your grants"), &env);

    // Once the refusal is back with the model, no child process exists.
    wait_for(WAIT * 2, "the refusal to reach the model", || {
        (!results_of(&p, "narrow").is_empty()).then_some(())
    });
    let children: Vec<String> = f
        .procs()
        .into_iter()
        .filter(|pr| pr.has_pair("--capsule", "wide"))
        .map(|pr| pr.cmdline())
        .collect();
    assert!(children.is_empty(), "{children:?}");
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());

    let sentence = envelope_sentence("capabilities.network.allow", "api.example.com");
    assert_eq!(results_of(&p, "narrow"), [vec![sentence.clone()]]);
    assert!(requests_of(&p, "wide").is_empty(), "the wide capsule ran");
    assert_eq!(
        names_in(&top.workdir.join(".murmur/children")),
        Vec::<String>::new()
    );
    let trace = f.trace(&top.sid);
    assert_refused_line(&trace, "wide", &sentence);
    assert_eq!(events_of(&trace, "delegation").len(), 1, "{trace:#?}");
    assert_eq!(f.sessions(), [top.sid.clone()]);
    let s = f.roost_status(&top.sid, "complete");
    assert_eq!(s["live_children"], 0, "{s}");
    f.assert_nothing_left();
}

/// A runaway orchestrator (its model delegates again on every completion) ends by itself at
/// `capabilities.spawn.max_delegations`: the delegation past it is refused as a tool result,
/// and the session ends `delegation_ceiling_reached`, exit 1, in the trace, on stderr and
/// on the status line.
#[test]
fn a_runaway_orchestrator_ends_at_its_delegation_ceiling() {
    use crate::common::provider::{last_is_tool_result, model_of, Step};
    let p = Provider::start_responder(|req| {
        let model = model_of(req);
        if model != "runaway" {
            return Step::text("done");
        }
        if last_is_tool_result(req) {
            return Step::text("delegated");
        }
        // The first task and every completion: delegate again.
        Step::Tools(vec![(
            "call_again".to_string(),
            TOOL.to_string(),
            serde_json::json!({"capsule": "w", "version": V, "task": "again"}),
        )])
    });
    let mut f = Formation::new("dlg-runaway");
    let yaml = Cap::delegating("runaway", &["w"])
        .yaml(&p)
        .replace("spawn: {allow: [w]}", "spawn: {allow: [w], max_delegations: 3}");
    f.publish_yaml(&yaml, &[]);
    f.publish(&p, &Cap::leaf("w"));
    f.start_roost(&["runaway"], &[]);
    let started = std::time::Instant::now();
    let ended = f.run_to_end(
        &run_args(&f.reg, "runaway", &f.workdir("runaway"), Some("go")),
        &f.env(),
        None,
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{}",
        ended.both()
    );
    assert_eq!(ended.code, Some(1), "{}", ended.both());
    let sid = ended.sid();
    let trace = f.trace(&sid);
    let d = events_of(&trace, "delegation");
    let started_n = d.iter().filter(|e| e["status"] == "started").count();
    let refused: Vec<_> = d.iter().filter(|e| e["status"] == "refused").collect();
    assert_eq!(started_n, 3, "{d:#?}");
    assert_eq!(refused.len(), 1, "{d:#?}");
    assert!(
        sv(refused[0], "output").contains("max_delegations"),
        "{}",
        refused[0]
    );
    let end = trace.last().unwrap();
    assert_eq!(end["event_type"], "session_end", "{end}");
    assert_eq!(end["exit_status"], "delegation_ceiling_reached", "{end}");
    assert!(
        ended.both().contains("capabilities.spawn.max_delegations"),
        "{}",
        ended.both()
    );
    // What it left is held to the records policy: the runaway's session and its children's
    // records, and the children's workdirs, pruned to one session.
    let home = f.reg.parent().unwrap().join("home");
    std::fs::create_dir_all(home.join(".config/murmur")).unwrap();
    std::fs::write(
        home.join(".config/murmur/config.yaml"),
        "records:\n  max_sessions: 1\n  max_age_days: 30\n",
    )
    .unwrap();
    let root = f.records_of(&sid).parent().unwrap().to_path_buf();
    let sessions = |root: &std::path::Path| {
        std::fs::read_dir(root)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("ses_"))
            .count()
    };
    assert_eq!(sessions(&root), 4, "the runaway and its three children");
    // Written just now: the prune leaves what is younger than a minute alone, so age them.
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        let _ = std::fs::File::open(e.path()).and_then(|f| f.set_modified(old));
        for inner in walk(&e.path()) {
            let _ = std::fs::File::open(&inner).and_then(|f| f.set_modified(old));
        }
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["records", "prune"])
        .env("HOME", &home)
        .env("MURMUR_RECORDS_DIR", &root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(sessions(&root) <= 1, "{}", String::from_utf8_lossy(&out.stdout));
}

/// Every path below `dir` (files and directories), never following a link.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// What a second account on the host runs: register `fanout` again and again (at most the
/// times asked), holding each session, until the roost refuses; print one line per answer
/// and then `end`, and keep every hold until stdin closes.
const STRANGER: &str = r#"
import http.client, json, os, sys
port, tries = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(tries):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    sid = "ses_" + os.urandom(16).hex()
    body = json.dumps({"session_id": sid, "name": "fanout", "version": "0.1.0"})
    c.request("POST", "/register", body, {"content-type": "application/json"})
    r = c.getresponse()
    text = r.read().decode()
    if r.status != 200:
        print(r.status, text, flush=True)
        break
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    cred = json.loads(text)["credential"]
    h.request("POST", "/hold", "{}", {"content-type": "application/json", "x-murmur-spawn-credential": cred})
    stream = h.getresponse()
    print(stream.status, sid, flush=True)
    held.append((h, stream))
print("end", flush=True)
sys.stdin.read()
"#;

/// The second account's process, killed if the test ends early.
struct Stranger(std::process::Child);

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: runs a second account")]
fn a_stranger_holding_all_it_can_leaves_the_operators_formation_whole() {
    use crate::common::unprivileged::{Account, USER};
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let p = Provider::start_responder(responder(&[
        ("fanout", Plan::delegate(&[("leaf", "THE-TASK")])),
        ("leaf", Plan::answer("OUTPUT-leaf")),
    ]));
    let mut f = Formation::new("dlg-stranger");
    f.publish(&p, &Cap::delegating("fanout", &["leaf"]));
    f.publish(&p, &Cap::leaf("leaf"));
    f.start_roost(&["fanout"], &["--max-live-capsules", "3"]);
    let port = f.roost().addr.port().to_string();

    // The second account registers and holds what it can: three, then the refusal.
    let mut cmd = Command::new("python3");
    cmd.args(["-c", STRANGER, &port, "10"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut stranger = Stranger(Account::without_cgroup().command(cmd).spawn().unwrap());
    let mut lines = BufReader::new(stranger.0.stdout.take().unwrap()).lines();
    let mut answers: Vec<String> = Vec::new();
    while let Some(Ok(line)) = lines.next() {
        let refused = !line.starts_with("200 ");
        answers.push(line);
        if refused {
            break;
        }
    }
    assert_eq!(answers.len(), 4, "{answers:#?}");
    let refusal = format!(
        "403 {}",
        serde_json::json!({"error": format!(
            "account capsule ceiling reached: this daemon, run by uid 0, admits at most 3 live capsules from each other local account (--max-live-capsules 3), and uid {USER} already holds 3 — the same request may be granted once that account's other capsules finish, or run a mur-roost of your own"
        )})
    );
    assert_eq!(answers[3], refusal);
    let theirs: Vec<String> = answers[..3]
        .iter()
        .map(|l| l.trim_start_matches("200 ").to_string())
        .collect();
    let status = f.roost().status(&theirs[0]);
    assert_eq!(
        (&status["status"], &status["live_capsules"]),
        (&json!("running"), &json!(3)),
        "{status}"
    );

    // The operator's formation registers, delegates and ends as if the host were its own.
    let (code, body) = f.roost().call("GET", "/health", &[], "");
    assert_eq!((code, body.as_str()), (200, "{}"));
    let mut top = f.start("fanout", Some("fan out once"), &f.env());
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());
    let r = results_of(&p, "fanout");
    assert_eq!(r.len(), 1, "{r:#?}");
    started(&r[0][0], "leaf");
    assert_eq!(completions_to(&p, "fanout").len(), 1);
    f.roost_status(&top.sid, "complete");

    // The stranger leaves: its holds close, its sessions end and its census empties.
    drop(stranger.0.stdin.take());
    let _ = stranger.0.wait();
    for sid in &theirs {
        f.roost_status(sid, "failed");
    }
    f.assert_nothing_left();
}
