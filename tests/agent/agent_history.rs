//! The bytes a provider receives at turn 41 of a 41-turn session, with both real drivers,
//! against golden files under `tests/fixtures/agent-history/`: the agent turn's
//! optimisations (the request assembled incrementally, the history mapped once) must not
//! change one byte of what a model is sent. The session's id and door port, which differ
//! per run, are put back as `ses_SESSION` and `localhost:PORT` before the comparison.
//! `MURMUR_WRITE_GOLDEN=1` writes the files instead (only from a build whose requests are
//! known to be right).

use crate::common;

use common::agent::{publish_skill, Drv, Spec, World};
use common::capsule::repo;
use common::provider::{Provider, Step};
use serde_json::json;

const TURNS: usize = 41;

/// Turn `i`'s call: a shell call whose output the next turns replay, or the skill, with
/// quotes, a backslash, a tab and non-ASCII in what the history carries.
fn step(i: usize) -> Step {
    let id = format!("call_{i:02}");
    match i % 3 {
        0 => Step::tool(&id, "true", json!({"command": ""})),
        1 => Step::tool(
            &id,
            "echo",
            json!({"command": format!("echo turn {i} \"quoted\" back\\slash\ttab ünïcödé ✓")}),
        ),
        _ => Step::tool(&id, "note", json!({})),
    }
}

/// `text` with the run's session id and door port replaced by fixed names.
fn normalised(text: &str, sid: &str) -> String {
    let text = text.replace(sid, "ses_SESSION");
    let marker = "localhost:";
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(at) = rest.find(marker) {
        let after = &rest[at + marker.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        out.push_str(&rest[..at + marker.len()]);
        out.push_str(if digits > 0 { "PORT" } else { "" });
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

fn turn_41_is_the_golden_request(drv: Drv) {
    let w = World::new("agent-history");
    publish_skill(&w.reg, "note", "a note", "Nothing to see.\n");
    let mut script: Vec<Step> = (0..TURNS - 1).map(step).collect();
    script.push(Step::text("done after forty turns"));
    let p = Provider::start(script);
    let mut spec = Spec::new(drv, &p);
    spec.shell = vec!["\"true\"".into(), "echo".into()];
    spec.containment = Some("advisory".into());
    spec.artifacts = vec!["{name: note, version: 1.0.0, runtime: skill}".into()];
    spec.max_turns = TURNS as u64;
    w.manifest(&spec);
    let run = w.run("a long task: \"forty\" turns, ünïcödé ✓", &[]);
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "done after forty turns\n");
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), TURNS, "one request per turn");
    let body = String::from_utf8(reqs[TURNS - 1].body.clone()).expect("a UTF-8 body");
    assert!(body.contains(&sid), "the identity block names the session");
    let got = normalised(&body, &sid);
    let name = match drv {
        Drv::OpenAi => "turn-41-openai.json",
        Drv::Anthropic => "turn-41-anthropic.json",
    };
    let golden = repo(&format!("tests/fixtures/agent-history/{name}"));
    if std::env::var_os("MURMUR_WRITE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&golden).unwrap_or_else(|e| panic!("{}: {e}", golden.display()));
    if got != want {
        let at = got
            .bytes()
            .zip(want.bytes())
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        let near = |s: &str| {
            let b = s.as_bytes();
            String::from_utf8_lossy(&b[at.saturating_sub(80)..(at + 80).min(b.len())]).into_owned()
        };
        panic!(
            "{drv:?}: turn {TURNS}'s request differs from {} at byte {at} (lengths {} and {}):\n got: {}\nwant: {}",
            golden.display(),
            got.len(),
            want.len(),
            near(&got),
            near(&want)
        );
    }
}

#[test]
fn openai_turn_41_request_is_byte_for_byte_the_golden_one() {
    turn_41_is_the_golden_request(Drv::OpenAi);
}

#[test]
fn anthropic_turn_41_request_is_byte_for_byte_the_golden_one() {
    turn_41_is_the_golden_request(Drv::Anthropic);
}
