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
