//! What a launch settles before any task runs: a capsule that may spawn, or that was launched
//! under an approval, cannot start without a roost that registers it (E-RUN-019); a
//! `MURMUR_SPAWNER` that is not a handle refuses the launch (E-RUN-020); neither leaves
//! records or runs a turn. A capsule that may spawn nothing has no `delegate-task` and needs
//! no roost.

use crate::common::delegation::*;
use crate::common::peer::free_port;
use crate::common::provider::Provider;
use serde_json::Value;

fn solo_provider() -> Provider {
    Provider::start_responder(responder(&[
        ("orch", Plan::answer("OUTPUT-orch")),
        ("solo", Plan::answer("OUTPUT-solo")),
    ]))
}

#[test]
fn a_capsule_that_may_spawn_is_refused_without_a_roost_that_registers_it() {
    let p = solo_provider();
    let mut f = Formation::new("dlg-no-roost");
    f.publish(&p, &Cap::delegating("orch", &["solo"]));
    f.publish(&p, &Cap::leaf("solo"));
    let run = |f: &Formation, env: &std::collections::BTreeMap<String, String>| {
        f.run_to_end(
            &run_args(&f.reg, "orch", &f.workdir("orch"), Some("go")),
            env,
            None,
        )
    };

    // MURMUR_ROOST_URL unset, empty or blank.
    for url in [None, Some(""), Some("   ")] {
        let mut env = f.env();
        assert!(!env.contains_key("MURMUR_ROOST_URL"));
        if let Some(u) = url {
            env.insert("MURMUR_ROOST_URL".into(), u.into());
        }
        run(&f, &env).assert_refused("E-RUN-019", &["MURMUR_ROOST_URL"]);
    }

    // Nothing listening there.
    let mut env = f.env();
    env.insert(
        "MURMUR_ROOST_URL".into(),
        format!("http://127.0.0.1:{}", free_port()),
    );
    run(&f, &env).assert_refused("E-RUN-019", &[]);

    // A child launched under an approval registers too, spawn.allow or not.
    let mut env = f.env();
    env.insert(
        "MURMUR_SPAWNER".into(),
        spawner_handle(
            "http://127.0.0.1:9",
            &fresh_id("ses_"),
            "ctx_x",
            "trusted",
            &fresh_id("dlg_"),
        ),
    );
    f.run_to_end(
        &run_args(&f.reg, "solo", &f.workdir("solo"), Some("go")),
        &env,
        Some("msa1.not-a-real-approval.at-all\n"),
    )
    .assert_refused("E-RUN-019", &["MURMUR_ROOST_URL"]);

    // The roost refuses: the name is not on its --spawn-allow list; its sentence is shown.
    f.start_roost(&["someone-else"], &[]);
    run(&f, &f.env()).assert_refused("E-RUN-019", &[&not_in_spawn_allow("orch")]);

    assert_eq!(
        f.sessions(),
        Vec::<String>::new(),
        "a refused launch made records"
    );
    assert!(p.model_requests().is_empty(), "a refused launch ran a turn");
}

#[test]
fn an_unreadable_spawner_handle_is_refused_with_e_run_020() {
    let p = solo_provider();
    let mut f = Formation::new("dlg-bad-spawner");
    f.publish(&p, &Cap::leaf("solo"));
    f.start_roost(&[], &[]);
    let (ses, dlg) = (fresh_id("ses_"), fresh_id("dlg_"));
    let loopback = "http://127.0.0.1:9";
    for bad in [
        "not json".to_string(),
        "{}".into(),
        "[]".into(),
        spawner_handle("http://example.com:80", &ses, "ctx_x", "trusted", &dlg),
        spawner_handle(loopback, &ses, "ctx_x", "sometimes", &dlg),
        spawner_handle(loopback, "ses_short", "ctx_x", "trusted", &dlg),
        spawner_handle(loopback, &ses, "ctx_x", "trusted", "dlg_not-hex"),
        spawner_handle("", &ses, "ctx_x", "trusted", &dlg),
    ] {
        let mut env = f.env();
        env.insert("MURMUR_SPAWNER".into(), bad.clone());
        let r = f.run_to_end(
            &run_args(&f.reg, "solo", &f.workdir("solo"), Some("go")),
            &env,
            Some("msa1.not-a-real-approval.at-all\n"),
        );
        assert_eq!(r.code, Some(1), "MURMUR_SPAWNER={bad}\n{}", r.both());
        r.assert_refused("E-RUN-020", &["MURMUR_SPAWNER"]);
    }
    assert_eq!(
        f.sessions(),
        Vec::<String>::new(),
        "a refused launch made records"
    );
    assert!(p.model_requests().is_empty(), "a refused launch ran a turn");
}

#[test]
fn without_spawn_allow_there_is_no_delegate_tool_and_no_roost_is_needed() {
    let p = solo_provider();
    let f = Formation::new("dlg-no-tool");
    f.publish(&p, &Cap::leaf("solo"));
    let env = f.env();
    assert!(!env.contains_key("MURMUR_ROOST_URL"));
    let r = f.run_to_end(
        &run_args(&f.reg, "solo", &f.workdir("solo"), Some("just answer")),
        &env,
        None,
    );
    assert_eq!(r.code, Some(0), "{}", r.both());
    let sid = r.sid();
    let trace = f.trace(&sid);
    let s = session_start(&trace);
    let declared = s["tools_declared"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools_declared: {s}"));
    assert!(!declared.contains(&Value::from(TOOL)), "{s}");
    for k in ["spawned_by", "delegation_id"] {
        assert!(
            s.get(k).is_none_or(Value::is_null),
            "{k} on an undelegated session: {s}"
        );
    }
    let reqs = requests_of(&p, "solo");
    assert_eq!(reqs.len(), 1);
    assert!(
        !offered(&reqs[0]).contains(&TOOL.to_string()),
        "{:?}",
        offered(&reqs[0])
    );
    assert!(events_of(&trace, "delegation").is_empty());
    assert!(
        f.completion(&sid).is_none(),
        "an undelegated session wrote a completion"
    );
}

#[test]
fn a_task_whose_context_a_child_could_not_read_is_refused_before_the_roost_is_asked() {
    let p = Provider::start_responder(responder(&[
        ("orch", Plan::delegate(&[("solo", "TASK-FOR-SOLO")])),
        ("solo", Plan::answer("OUTPUT-solo")),
    ]));
    let mut f = Formation::new("dlg-bad-context");
    f.publish(&p, &Cap::delegating("orch", &["solo"]));
    f.publish(&p, &Cap::leaf("solo"));
    f.start_roost(&["orch"], &[]);
    let mut env = f.env();
    env.insert("MURMUR_A2A_TIMEOUT_SECS".into(), "3".into());
    let mut top = f.start("orch", None, &env);
    // An A2A task whose contextId holds a control character, which the door takes but a
    // child's MURMUR_SPAWNER could not carry.
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "message/send",
        "params": {
            "message": {"kind": "message", "role": "user", "messageId": "m1",
                        "contextId": "ctx\u{1}x", "parts": [{"kind": "text", "text": "TASK-FOR-ORCH"}]},
            "configuration": {"blocking": false}
        }
    })
    .to_string();
    let req = format!(
        "POST / HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        top.port,
        body.len()
    );
    let answer = crate::common::exchange(
        std::net::SocketAddr::from(([127, 0, 0, 1], top.port)),
        req.as_bytes(),
    );
    assert!(
        answer.starts_with("HTTP/1.1 200") && !answer.contains("\"error\""),
        "{answer}"
    );
    let code = top.finish(FORMATION, || f.dump());
    assert_eq!(code, Some(0), "{}\n{}", top.both(), f.dump());
    let results = results_of(&p, "orch");
    assert_eq!(results.len(), 1, "{results:?}");
    let r: Value = serde_json::from_str(&results[0][0]).unwrap_or_else(|_| panic!("{results:?}"));
    assert_eq!(r["status"], "failed", "{r}");
    assert!(
        r["output"]
            .as_str()
            .unwrap_or_default()
            .contains("cannot be handed to a child"),
        "{r}"
    );
    // Nothing was reserved at the roost and nothing was made or started.
    assert_eq!(f.roost().status(&top.sid)["live_children"], 0);
    assert!(!top.workdir.join(".murmur/children").exists());
    assert!(requests_of(&p, "solo").is_empty());
}

/// A delegation to a capsule that takes no task (`task_acceptance: none`) is refused with a
/// sentence of its own before the roost holds a slot, not with a concurrency error from
/// the child; the trace and `mur trace` name it, and no child session exists.
#[test]
fn a_delegation_to_a_capsule_that_takes_no_task_is_refused_with_its_own_sentence() {
    let p = Provider::start_responder(responder(&[
        ("orch", Plan::delegate(&[("idle", "do it")])),
        ("idle", Plan::answer("never")),
    ]));
    let mut f = Formation::new("dlg-no-task");
    f.publish(&p, &Cap::delegating("orch", &["idle"]));
    let mut idle = Cap::leaf("idle");
    idle.lifecycle = "lifecycle:\n  task_acceptance: none\n".into();
    f.publish(&p, &idle);
    f.start_roost(&["orch"], &[]);
    let mut env = f.env();
    env.insert("MURMUR_A2A_TIMEOUT_SECS".into(), "1".into());
    let ended = f.run_to_end(
        &run_args(&f.reg, "orch", &f.workdir("orch"), Some("go")),
        &env,
        None,
    );
    let sid = ended.sid();
    let sentence = "capsule idle declares lifecycle.task_acceptance: none and takes no task";
    let trace = f.trace(&sid);
    let d = events_of(&trace, "delegation");
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(
        (sv(d[0], "status"), sv(d[0], "output")),
        ("refused", sentence),
        "{}",
        d[0]
    );
    assert_eq!(f.sessions(), vec![sid.clone()], "a child session was started");
    let shown = f.trace_text(&sid);
    assert!(shown.contains(sentence), "{shown}");
}
