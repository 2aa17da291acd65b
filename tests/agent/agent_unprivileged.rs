//! A keyed agent session of an ordinary account (uid 4242, no supplementary groups), with
//! no pids cgroup of its own and with one delegated: its shell tool runs in every class the
//! account's probe backs (the command's output reaches the model), and SIGTERM or `kill -9`
//! of `mur run` during a tool call ends everything the call started.

use crate::common;
use common::agent::{Drv, Spec, World};
use common::provider::{tool_results, Provider, Step};
use common::supervision::{gone_within, live, wait_for_sleeps};
use common::unprivileged::{Account, USER};
use serde_json::json;
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn a_keyed_session_of_an_ordinary_account_runs_its_shell_tool_in_every_class() {
    for account in [Account::without_cgroup(), Account::with_delegated_cgroup()] {
        let delegated = account.cgroup().is_some();
        for class in account.classes() {
            let w = World::new(&format!("agent-user-{class}"));
            let p = Provider::start(vec![
                Step::tool("c1", "bash", json!({"command": "id -u"})),
                Step::text("done"),
            ]);
            let mut spec = Spec::new(Drv::OpenAi, &p);
            spec.containment = Some(class.into());
            spec.shell = vec!["bash".into(), "id".into()];
            w.manifest(&spec);
            let out = w.command_as(&account, "who are you").output().unwrap();
            let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
            assert_eq!(
                out.status.code(),
                Some(0),
                "{class}, delegated {delegated}: {stdout}{stderr}"
            );
            assert!(stdout.contains("status:  ok"), "{class}: {stdout}{stderr}");
            let asked = p.model_requests();
            assert_eq!(asked.len(), 2, "{class}: {stdout}{stderr}");
            let results = tool_results(&asked[1]).join("\n");
            assert!(
                results.contains(&format!("{USER}\n")),
                "{class}, delegated {delegated}: the tool's output did not reach the model: {results}"
            );
        }
    }
}

/// SIGTERM, then `kill -9`, of an ordinary account's `mur run` while a tool call's
/// processes run (one in a session of its own where the class contains it): after SIGTERM
/// the session ends within seconds, after `kill -9` nothing of it runs a second later.
#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn sigterm_and_kill_of_an_ordinary_accounts_session_end_its_tool_call_without_a_cgroup() {
    let account = Account::without_cgroup();
    for (i, class) in account.classes().into_iter().enumerate() {
        for (j, signal) in [rustix::process::Signal::TERM, rustix::process::Signal::KILL]
            .into_iter()
            .enumerate()
        {
            let marker = format!("98765{i}{j}.{}", std::process::id());
            let escaper = if class == "advisory" { "" } else { "setsid " };
            let w = World::new(&format!("agent-user-signal-{class}"));
            let p = Provider::start(vec![
                Step::tool(
                    "c1",
                    "bash",
                    json!({"command": format!("sleep {marker} & {escaper}sleep {marker} & sleep {marker}")}),
                ),
                Step::text("never"),
            ]);
            let mut spec = Spec::new(Drv::OpenAi, &p);
            spec.containment = Some(class.into());
            spec.shell = vec!["bash".into(), "sleep".into(), "setsid".into()];
            w.manifest(&spec);
            let mut child = w
                .command_as(&account, "wait")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            wait_for_sleeps(&marker, 3);
            let sent = Instant::now();
            rustix::process::kill_process(rustix::process::Pid::from_raw(child.id() as i32).unwrap(), signal)
                .unwrap();
            child.wait().unwrap();
            let ended = sent.elapsed();
            assert!(ended < Duration::from_secs(10), "{class} {signal:?}: {ended:?}");
            assert!(
                gone_within(&marker, Duration::from_secs(1)).is_some(),
                "{class} {signal:?}: still running: {:?}",
                live(&marker)
            );
        }
    }
}
