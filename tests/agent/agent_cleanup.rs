//! What an agent session leaves on the host when it ends: no pids cgroup of its own (one
//! used to stay behind for every session, held by the signal thread), and nothing running
//! when its `mur` was killed outright in the middle of a tool call.

use crate::common;

use common::agent::{assert_floor_refusal, host_backs, publish_native, Drv, Spec, World};
use common::provider::{Provider, Step};
use common::supervision::{assert_cgroup_ended, gone_within, live, session_cgroup_of_sleeps, warden_of};
use serde_json::json;
use std::path::{Path, PathBuf};

/// Every directory named `name` under the cgroup mounts, a few levels deep.
fn cgroup_dirs_named(name: &str) -> Vec<PathBuf> {
    fn walk(dir: &Path, name: &str, depth: u32, found: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if e.file_name() == name {
                found.push(p.clone());
            }
            if depth > 0 {
                walk(&p, name, depth - 1, found);
            }
        }
    }
    let mut found = Vec::new();
    walk(Path::new("/sys/fs/cgroup"), name, 4, &mut found);
    found
}

#[test]
fn a_contained_session_leaves_no_cgroup_behind() {
    let w = World::new("cleanup-cgroup");
    let p = Provider::start(vec![
        Step::tool("c1", "bash", json!({"command": "true"})),
        Step::text("done"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.containment = Some("scoped".into());
    w.manifest(&spec);
    let run = w.run("run true", &[]);
    if !host_backs("scoped") {
        assert_floor_refusal(&run);
        return;
    }
    run.assert_ok();
    let name = format!("murmur-{}", run.sid());
    assert_eq!(
        cgroup_dirs_named(&name),
        Vec::<PathBuf>::new(),
        "the session's cgroup outlived it"
    );
}

/// `kill -9` of `mur run` while a shell tool call's command and its own children run, and
/// while a native tool's do, under every class the host backs: within a second nothing of
/// the session runs (the session's warden ended it).
#[test]
fn a_killed_mur_run_leaves_nothing_of_its_session_running() {
    let mut classes = vec!["advisory"];
    for c in ["scoped", "sealed"] {
        if host_backs(c) {
            classes.push(c);
        }
    }
    for (i, class) in classes.iter().enumerate() {
        for tool in ["bash", "nap"] {
            let marker = format!("{}.{}{i}", 5000 + i, std::process::id());
            let w = World::new(&format!("killed-{class}-{tool}"));
            publish_native(
                &w.reg,
                "nap",
                &format!("#!/bin/bash\nsleep {marker} & sleep {marker}\n"),
            );
            let script = format!("sleep {marker} & sleep {marker}; echo after");
            let p = Provider::start(vec![
                Step::tool(
                    "c1",
                    tool,
                    json!({"command": if tool == "bash" { script.as_str() } else { "" }}),
                ),
                Step::text("done"),
            ]);
            let mut spec = Spec::new(Drv::OpenAi, &p);
            spec.containment = Some(class.to_string());
            spec.shell = vec!["bash".into(), "sleep".into()];
            if tool == "nap" {
                spec.shell.push("nap".into());
                spec.artifacts = vec!["{name: nap, version: 1.0.0, runtime: tool}".into()];
            }
            w.manifest(&spec);
            let mut mur = w.start("sleep", &[]);
            let cgroup = session_cgroup_of_sleeps(&marker, 2);
            let warden = warden_of(mur.id());
            let killed = std::time::Instant::now();
            mur.kill().unwrap();
            mur.wait().unwrap();
            assert!(warden.is_some(), "{class} {tool}: mur run has no warden");
            assert!(
                cgroup.is_some() || *class == "advisory" || !rustix::process::geteuid().is_root(),
                "{class} {tool}: the session has no pids cgroup"
            );
            let took = gone_within(&marker, std::time::Duration::from_secs(1));
            assert!(
                took.is_some(),
                "{class} {tool}: still running a second after kill -9 of mur: {:?}",
                live(&marker)
            );
            assert_cgroup_ended(&format!("{class} {tool}"), cgroup.as_deref(), killed);
        }
    }
}
