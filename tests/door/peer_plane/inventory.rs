//! Each peer tool exists only under its own grant; a capsule without `exports.peer_files`
//! answers `no_peer_plane`; E-CAP-008 keeps a sleeping capsule's handles short-lived.

use crate::common::agent::{events, World};
use crate::common::agent_door::door_kit::queue_sleep;
use crate::common::agent_door::lifecycle_yaml;
use crate::common::peer::*;
use crate::common::provider::{tool_results, Provider, Step};

const PEER_TOOLS: [&str; 2] = ["share-file", "fetch-peer-file"];

#[test]
fn each_tool_is_offered_only_with_its_own_grant() {
    let fetch_line = peer_fetch(&["localhost:1"]);
    let files = peer_files("share", None, None);
    let cases: [(&str, &str, &str, &[&str]); 4] = [
        ("neither", "", "", &[]),
        ("share-only", "", &files, &["share-file"]),
        ("fetch-only", &fetch_line, "", &["fetch-peer-file"]),
        ("both", &fetch_line, &files, &["share-file", "fetch-peer-file"]),
    ];
    for (label, caps, tail, want) in cases {
        // The model calls both tools whatever it was offered: an undeclared one is unknown.
        let calls = vec![
            share("c1", "nothing.txt", "localhost:1", None),
            fetch("c2", "localhost:1", "not-a-handle"),
        ];
        let p = Provider::start(vec![Step::Tools(calls), Step::text("done")]);
        let w = peer_world(&format!("peer-inv-{label}"), "capsule-i", &p, &[], caps, tail);
        let run = w.run("look around", &[]);
        run.assert_ok();
        let reqs = p.model_requests();
        let offered: Vec<String> = offered(&reqs[0])
            .into_iter()
            .filter(|n| PEER_TOOLS.contains(&n.as_str()))
            .collect();
        assert_eq!(offered, want, "{label}");
        let all = w.trace(&run.sid());
        let declared = &events(&all, "session_start")[0]["tools_declared"];
        for t in PEER_TOOLS {
            let listed = declared.as_array().unwrap().iter().any(|d| d == t);
            assert_eq!(listed, want.contains(&t), "{label}: {t} in {declared}");
        }
        let answers = tool_results(&reqs[1]);
        for (tool, answer) in PEER_TOOLS.iter().zip(&answers) {
            if want.contains(tool) {
                assert!(!answer.starts_with("error: unknown tool"), "{label}: {answer}");
            } else {
                assert!(answer.starts_with("error: unknown tool"), "{label}: {answer}");
                let listed = answer.split("the tools are:").nth(1).unwrap_or_default();
                assert!(!listed.contains(tool), "{label}: {answer}");
            }
        }
        let md = std::fs::read_to_string(w.workdir(&run.sid()).join("MURMUR.md")).unwrap();
        for t in PEER_TOOLS {
            assert_eq!(md.contains(t), want.contains(&t), "{label}: MURMUR.md\n{md}");
        }
    }
}

#[test]
fn a_capsule_without_peer_files_answers_no_peer_plane() {
    for (label, caps) in [
        ("fetch-only", peer_fetch(&["localhost:1"])),
        ("neither", String::new()),
    ] {
        let p = Provider::start(Vec::new());
        let w = peer_world(
            &format!("peer-none-{label}"),
            "capsule-n",
            &p,
            &[],
            &caps,
            &queue_sleep(1),
        );
        let mut s = w.serve(None, &[]);
        for (path, audience) in [
            ("/resources/peer/mh1.e30.AAAA", Some("x@localhost:1")),
            ("/resources/peer/anything", None),
            ("/resources/peer", None),
            ("/resources/peer/", None),
        ] {
            let headers: Vec<(&str, &str)> = audience
                .map(|a| vec![("x-murmur-audience", a)])
                .unwrap_or_default();
            let a = request(s.port, "GET", path, &headers);
            assert_eq!(
                (a.status, a.code().as_str()),
                (404, "no_peer_plane"),
                "{label} {path}"
            );
        }
        assert_eq!(s.stop(), Some(0), "{}", s.both());
        let all = w.trace(&s.sid);
        let redeems = events(&all, "peer_handle_redeem");
        assert_eq!(redeems.len(), 4, "{label}");
        assert!(redeems.iter().all(|e| e["outcome"] == "no_peer_plane"));
    }
}

#[test]
fn a_sleeping_capsule_must_declare_a_max_ttl_of_at_most_15m() {
    for max_ttl in [None, Some("16m"), Some("901"), Some("1h")] {
        let p = Provider::start(Vec::new());
        let w = World::new("peer-ttl");
        let tail = format!("{}{}", peer_files("share", max_ttl, None), queue_sleep(1));
        w.manifest_text(&yaml(&spec_for(&p), "", &tail));
        let run = w.run("x", &[]);
        assert_eq!(run.code(), Some(1), "{max_ttl:?}: {}", run.both());
        assert!(run.stderr().contains("E-CAP-008"), "{max_ttl:?}: {}", run.both());
        assert!(
            run.stderr().contains("exports.peer_files.max_ttl"),
            "{}",
            run.both()
        );
        w.assert_no_session();
        assert!(p.model_requests().is_empty());
    }
    // At most 15m launches; `exit` needs no max_ttl at all.
    let p = Provider::start(vec![Step::text("one")]);
    let w = World::new("peer-ttl-ok");
    let tail = format!("{}{}", peer_files("share", Some("15m"), None), queue_sleep(1));
    w.manifest_text(&yaml(&spec_for(&p), "", &tail));
    let mut s = w.serve(None, &[]);
    assert_eq!(s.stop(), Some(0), "{}", s.both());
    let tail = format!(
        "{}{}",
        peer_files("share", None, None),
        lifecycle_yaml("single", Some("exit"), None)
    );
    w.manifest_text(&yaml(&spec_for(&p), "", &tail));
    w.run("x", &[]).assert_ok();
}

fn spec_for(p: &Provider) -> crate::common::agent::Spec {
    let mut spec = crate::common::agent::Spec::new(crate::common::agent::Drv::OpenAi, p);
    spec.shell = Vec::new();
    spec
}
