//! A session's workdir path swapped for a symlink while the session runs (what a delegating
//! parent's own tools can do to its child's directory, which sits in the parent's tree)
//! does not move the session's shell tools: their current directory and, under `scoped`,
//! their landlock tree come from the descriptor the session opened at its start.

use crate::common;

use common::agent::{Drv, Run, Spec, World};
use common::provider::{tool_results, Provider, Step};
use serde_json::json;
use std::path::PathBuf;
use std::thread::ScopedJoinHandle;
use std::time::Duration;

/// The session `run` once it sent its first model request; `None` when it never did, which
/// must be because it was refused (a host that cannot back the class: E-CAP-003).
fn reached_the_model<'s>(p: &Provider, run: ScopedJoinHandle<'s, Run>) -> Option<ScopedJoinHandle<'s, Run>> {
    if p.wait_requests(1, Duration::from_secs(60)) {
        return Some(run);
    }
    let r = run.join().unwrap();
    let err = String::from_utf8_lossy(&r.out.stderr).into_owned();
    assert!(
        err.contains("E-CAP-003"),
        "no model request and no refusal: {err}"
    );
    None
}

fn swapped_under(class: &str) {
    let p = Provider::start(vec![
        Step::slow(
            Duration::from_secs(3),
            Step::tool("c1", "sh", json!({"command": "echo written > marker"})),
        ),
        Step::text("done"),
    ]);
    let w = World::new(&format!("swap-{class}"));
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.shell = vec!["sh".into()];
    spec.containment = Some(class.into());
    w.manifest(&spec);
    let elsewhere = w.t.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::thread::scope(|s| {
        let Some(run) = reached_the_model(&p, s.spawn(|| w.run("write the marker", &[]))) else {
            return;
        };
        // The session is running with its workdir open: move it away, plant a symlink.
        let parent = w.dir.join("workdir");
        let wd: PathBuf = std::fs::read_dir(&parent)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let moved = parent.join("moved");
        std::fs::rename(&wd, &moved).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &wd).unwrap();
        let r = run.join().unwrap();
        // Under sealed the session's one contained call is refused (below), so the session
        // ends `containment_failed`: nothing it was asked to run ran.
        let code = if class == "sealed" { 1 } else { 0 };
        assert_eq!(r.code(), Some(code), "{}", String::from_utf8_lossy(&r.out.stderr));
        assert!(
            !elsewhere.join("marker").exists(),
            "the shell followed the planted symlink"
        );
        let marker = std::fs::read_to_string(moved.join("marker")).unwrap_or_default();
        if class == "sealed" {
            // The sealed root binds the workdir by path inside its own mount namespace (a
            // descriptor from the host's cannot be a bind source there), then checks the
            // bound directory is the session's: a swapped path refuses the call instead.
            let results = tool_results(&p.model_requests()[1]);
            assert!(
                marker.is_empty() && results[0].contains("the session's workdir"),
                "{results:?}"
            );
        } else {
            assert_eq!(
                marker, "written\n",
                "the shell did not run in the session's own directory"
            );
        }
        assert_eq!(
            std::fs::read_to_string(moved.join("out/result.txt")).unwrap(),
            "done\n"
        );
    });
}

#[test]
fn an_advisory_shell_stays_in_the_directory_the_session_opened() {
    swapped_under("advisory");
}

#[test]
fn a_scoped_shell_stays_in_the_directory_the_session_opened() {
    swapped_under("scoped");
}

#[test]
fn a_sealed_shell_refuses_a_workdir_swapped_under_it() {
    swapped_under("sealed");
}

#[test]
fn an_allowed_binary_swapped_for_a_symlink_to_the_root_shows_nothing_of_the_host() {
    // `shell.allow` names are resolved once, at the session's start; whoever can write the
    // directory of one can swap it for a symlink to `/` while the session runs. A sealed
    // call must then neither bind the host's root over its own (which would show the
    // host's `/tmp` and everything else) nor fail open.
    let w = World::new("binary-swap");
    let tools = w.t.path().join("tools");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::copy("/bin/true", tools.join("mytool")).unwrap();
    // Host paths the sealed root never shows (it has no /var and an allow-list of /etc).
    let command =
        "for p in /var /etc/shadow /etc/os-release; do [ -e $p ] && echo \"host: $p\"; done; echo checked";
    let p = Provider::start(vec![
        Step::slow(
            Duration::from_secs(3),
            Step::tool("c1", "sh", json!({ "command": command })),
        ),
        Step::text("done"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.shell = vec!["sh".into(), "mytool".into()];
    spec.containment = Some("sealed".into());
    w.manifest(&spec);
    let path = format!("{}:/usr/bin:/bin", tools.display());
    std::thread::scope(|s| {
        let Some(run) = reached_the_model(&p, s.spawn(|| w.run("look around", &[("PATH", path.as_str())])))
        else {
            return;
        };
        std::fs::remove_file(tools.join("mytool")).unwrap();
        std::os::unix::fs::symlink("/", tools.join("mytool")).unwrap();
        let r = run.join().unwrap();
        assert_eq!(r.code(), Some(0), "{}", String::from_utf8_lossy(&r.out.stderr));
        let results = tool_results(&p.model_requests()[1]);
        assert!(
            results[0].contains("exit code: 0\n--- stdout ---\nchecked\n"),
            "{results:?}"
        );
    });
}
