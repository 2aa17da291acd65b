//! What a contained agent session leaves on the host when it ends: no pids cgroup of its
//! own (one used to stay behind for every session, held by the signal thread).

use crate::common;

use common::agent::{assert_floor_refusal, host_backs, Drv, Spec, World};
use common::provider::{Provider, Step};
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
