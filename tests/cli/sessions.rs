//! The operator's commands on live sessions through the real binaries, against `queue`
//! sessions of the slow fixture (open until stopped): `mur ps` lists the live and forgets
//! one killed outright; `mur cancel` ends one task through the door and the session goes
//! on; `mur watch` follows a session to its end, which `mur stop` brings; another user's
//! session is refused by each (E-RUN-061). A delegated child stopped with its parent is in
//! tests/agent/delegation/operate.rs.

use crate::common::capsule::{capsule, text, MUR};
use crate::common::door::{self, at_once, lifecycle, secs, send_params, state_of, task_of, wait_for, SLOW};
use crate::common::TempDir;
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A queue + sleep capsule of the slow fixture in `t` (the same one for every session).
fn queue_capsule(t: &TempDir) -> PathBuf {
    capsule(
        t,
        SLOW,
        &lifecycle(&["task_acceptance: queue", "after_task: sleep", "queue_depth: 4"]),
    )
}

use crate::common::capsule::{mur_over as mur, ps_rows as ps};

fn ids(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["session_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn ps_lists_the_live_sessions_and_forgets_one_killed_outright() {
    let t = TempDir::new("ops-ps");
    let dir = queue_capsule(&t);
    let records = t.path().join("records");
    let a = door::start(&t, &dir, &[], &[]);
    let b = door::start(&t, &dir, &[], &[]);
    let mut killed = door::start(&t, &dir, &[], &[]);
    let mut want = vec![
        a.session_id.clone(),
        b.session_id.clone(),
        killed.session_id.clone(),
    ];
    want.sort();
    assert_eq!(ids(&ps(&records)), want);

    killed.running.child.kill().unwrap();
    killed.wait_exit(secs(10));
    let rows = ps(&records);
    let mut live = vec![a.session_id.clone(), b.session_id.clone()];
    live.sort();
    assert_eq!(ids(&rows), live, "the killed session is forgotten: {rows:#?}");
    assert!(killed.records.join("trace.jsonl").exists(), "its records stay");
    for (row, d) in rows
        .iter()
        .map(|r| (r, if r["session_id"] == a.session_id { &a } else { &b }))
    {
        assert_eq!(row["capsule"], "probe", "{row}");
        assert_eq!(row["version"], "0.2.0", "{row}");
        assert_eq!(row["state"], "idle", "{row}");
        assert_eq!(row["tasks"], serde_json::json!({"open": 0, "total": 0}), "{row}");
        assert_eq!(row["url"], format!("http://localhost:{}", d.port), "{row}");
        assert_eq!(row["parent"], Value::Null, "{row}");
        assert_eq!(row["pid"], d.running.child.id(), "{row}");
        assert!(row["class"].is_string() && row["age_secs"].is_u64(), "{row}");
    }

    // The table: a header, then a row per live session.
    let out = mur(&records, &["ps"]);
    let table = text(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("SESSION") && lines[0].contains("PARENT"),
        "{table}"
    );
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        table.contains(&a.session_id) && !table.contains(&killed.session_id),
        "{table}"
    );
    assert!(
        lines[1].contains("probe@0.2.0") && lines[1].contains(" 0/0 "),
        "{table}"
    );

    // A status file that is not one: the session is still listed, as unreadable.
    std::fs::write(b.records.join("session.json"), "{not json").unwrap();
    let rows = ps(&records);
    let row = rows.iter().find(|r| r["session_id"] == b.session_id).unwrap();
    assert_eq!(row["state"], "unreadable", "{row}");
    assert!(
        row["error"].as_str().unwrap().contains("is not a session status"),
        "{row}"
    );

    // --all: every live session of this user, each said how it ended.
    let (mut a, mut b) = (a, b);
    let out = mur(&records, &["stop", "--all"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said: Vec<String> = text(&out.stdout).lines().map(String::from).collect();
    let want: Vec<String> = live.iter().map(|id| format!("{id}: ended ok")).collect();
    assert_eq!(said, want);
    assert!(a.wait_exit(secs(5)).success() && b.wait_exit(secs(5)).success());
    assert!(ps(&records).is_empty());
}

#[test]
fn cancel_ends_one_task_of_a_queue_session_that_goes_on() {
    let t = TempDir::new("ops-cancel");
    let dir = queue_capsule(&t);
    let records = t.path().join("records");
    let mut d = door::start(&t, &dir, &[], &[]);
    let running = d.submit("SendMessage", "sleep 60");
    let waiting = d.submit("SendMessage", "sleep 60");
    let (run_id, wait_id) = (running["id"].as_str().unwrap(), waiting["id"].as_str().unwrap());
    d.wait_state(run_id, "TASK_STATE_WORKING", secs(30));
    let row = wait_for(secs(10), "ps to count both tasks", || {
        ps(&records).into_iter().find(|r| r["tasks"]["total"] == 2)
    });
    assert_eq!(row["tasks"]["open"], 2, "{row}");
    assert_eq!(row["state"], "working", "{row}");

    let out = mur(&records, &["cancel", &d.session_id, wait_id]);
    assert_eq!(
        text(&out.stdout),
        format!("{wait_id}: canceled\n"),
        "{}",
        text(&out.stderr)
    );
    assert!(out.status.success());
    assert_eq!(state_of(&d.task(wait_id)), "TASK_STATE_CANCELED");
    assert_eq!(
        state_of(&d.task(run_id)),
        "TASK_STATE_WORKING",
        "the other task runs on"
    );

    // Twice, or a task the door does not know: the door's own A2A error, coded.
    let again = mur(&records, &["cancel", &d.session_id, wait_id]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("error[E-RUN-062]"),
        "{}",
        text(&again.stderr)
    );
    assert!(
        text(&again.stderr).contains("(A2A error -32002)"),
        "{}",
        text(&again.stderr)
    );
    let unknown = mur(&records, &["cancel", &d.session_id, "tsk_nosuch"]);
    assert!(
        text(&unknown.stderr).contains("Task not found (A2A error -32001)"),
        "{}",
        text(&unknown.stderr)
    );

    // The running one too; the session goes on and takes the next.
    let out = mur(&records, &["cancel", &d.session_id, run_id]);
    assert_eq!(
        text(&out.stdout),
        format!("{run_id}: canceled\n"),
        "{}",
        text(&out.stderr)
    );
    let next = d.submit("SendMessage", "after the cancels");
    d.wait_state(next["id"].as_str().unwrap(), "TASK_STATE_COMPLETED", secs(30));
    assert!(d.alive(), "the session went on");
    assert_eq!(ids(&ps(&records)), vec![d.session_id.clone()]);
    assert!(mur(&records, &["stop", &d.session_id]).status.success());
    assert!(d.wait_exit(secs(15)).code().is_some());
}

#[test]
fn cancel_calls_an_authenticated_door_with_the_sessions_own_token() {
    let t = TempDir::new("ops-cancel-auth");
    let yaml = format!(
        "{}capabilities:\n  network:\n    authentication:\n      scheme: bearer\n      credentials:\n        - {{name: operator, scopes: ['*']}}\n",
        lifecycle(&["task_acceptance: queue", "after_task: sleep", "queue_depth: 4"])
    );
    let dir = capsule(&t, SLOW, &yaml);
    let records = t.path().join("records");
    let mut d = door::start(&t, &dir, &[], &[]);
    let tokens: Value =
        serde_json::from_slice(&std::fs::read(d.records.join("door-tokens.json")).unwrap()).unwrap();
    let bearer = format!("Bearer {}", tokens["tokens"]["operator"].as_str().unwrap());
    let auth = [("authorization", bearer.as_str())];
    let sent = d.call_with(
        "SendMessage",
        send_params("SendMessage", "sleep 60", at_once("SendMessage")),
        &auth,
    );
    let id = task_of(&sent["result"])["id"].as_str().unwrap().to_string();

    let out = mur(&records, &["cancel", &d.session_id, &id]);
    assert_eq!(
        text(&out.stdout),
        format!("{id}: canceled\n"),
        "{}",
        text(&out.stderr)
    );
    let got = d.call_with("GetTask", serde_json::json!({"id": id}), &auth);
    assert_eq!(state_of(&got["result"]), "TASK_STATE_CANCELED", "{got}");
    assert!(d.alive());
    assert!(mur(&records, &["stop", &d.session_id]).status.success());
    assert!(d.wait_exit(secs(5)).success());
}

#[test]
fn watch_follows_a_session_to_the_end_stop_brings() {
    let t = TempDir::new("ops-watch");
    let dir = queue_capsule(&t);
    let records = t.path().join("records");
    let mut d = door::start(&t, &dir, &[], &[]);
    let mut watch = Command::new(MUR)
        .args(["watch", &d.session_id])
        .env("MURMUR_RECORDS_DIR", &records)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let task = d.submit("SendMessage", "watched");
    let id = task["id"].as_str().unwrap().to_string();
    d.wait_state(&id, "TASK_STATE_COMPLETED", secs(30));

    let stop = mur(&records, &["stop", &d.session_id]);
    assert!(stop.status.success(), "{}", text(&stop.stderr));
    assert_eq!(text(&stop.stdout), format!("{}: ended ok\n", d.session_id));
    assert!(
        d.wait_exit(secs(5)).success(),
        "the session ended as SIGTERM ends it"
    );
    assert!(ps(&records).is_empty(), "nothing is listed once it ended");

    wait_for(secs(15), "mur watch to end with the session", || {
        watch.try_wait().unwrap()
    });
    let out = watch.wait_with_output().unwrap();
    let shown = text(&out.stdout);
    assert!(out.status.success(), "{shown}{}", text(&out.stderr));
    let lines: Vec<&str> = shown.lines().collect();
    assert!(lines[0].contains(&format!("session {}", d.session_id)), "{shown}");
    assert!(
        lines.iter().any(|l| l.contains(&format!("task {id} from a2a"))),
        "{shown}"
    );
    assert!(
        lines.iter().any(|l| l.contains(&format!("task {id} ended ok"))),
        "{shown}"
    );
    assert!(lines.iter().any(|l| l.contains("session ended ok")), "{shown}");
    assert!(
        lines
            .iter()
            .all(|l| l.contains(" tok ") || l.starts_with("session ")),
        "{shown}"
    );
    assert_eq!(
        lines.last().unwrap(),
        &format!("session {} ended ok: 1 tasks, 0 turns, 0 tokens", d.session_id),
        "{shown}"
    );

    // Once ended, each command refuses it.
    for args in [
        vec!["stop", d.session_id.as_str()],
        vec!["watch", d.session_id.as_str()],
        vec!["cancel", d.session_id.as_str(), id.as_str()],
    ] {
        let out = mur(&records, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains("error[E-RUN-061]"),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(
            text(&out.stderr).contains("is not alive"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
#[cfg_attr(
    not(murmur_test_root),
    ignore = "needs root: runs a session as a second account"
)]
fn another_users_session_is_refused() {
    use crate::common::unprivileged::{chown_tree, Account};
    let t = TempDir::new("ops-other");
    let dir = queue_capsule(&t);
    let records = t.path().join("records");
    std::fs::create_dir_all(&records).unwrap();
    std::fs::set_permissions(&records, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    chown_tree(t.path());
    let account = Account::without_cgroup();
    let mut cmd = Command::new(MUR);
    cmd.args(["run", "--json", "--manifest"])
        .arg(dir.join("murmur.yaml"))
        .env_clear()
        .env("HOME", t.path())
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", &records)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut theirs = crate::common::Running::spawn(account.command(cmd));
    let line = theirs.line();
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
    let sid = v["session_id"].as_str().unwrap().to_string();

    // Root reads the account's records root: the session is not listed, and not root's to stop,
    // cancel or watch.
    assert!(ps(&records).is_empty(), "another user's session is not listed");
    for args in [
        vec!["stop", sid.as_str()],
        vec!["watch", sid.as_str()],
        vec!["cancel", sid.as_str(), "tsk_any"],
    ] {
        let out = mur(&records, &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("error[E-RUN-061]") && err.contains("is not yours"),
            "{args:?}: {err}"
        );
    }
    // Its control socket answers only its own user, whoever else connects.
    let sock = records.join(&sid).join("control.sock");
    let mut conn = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    std::io::Write::write_all(&mut conn, b"stop\n").unwrap();
    let mut answer = String::new();
    std::io::Read::read_to_string(&mut conn, &mut answer).unwrap();
    assert_eq!(answer, "refused: not this session's user\n");
    assert!(theirs.child.try_wait().unwrap().is_none(), "it runs on");

    // Its own user stops it.
    let mut stop = Command::new(MUR);
    stop.args(["stop", &sid])
        .env_clear()
        .env("MURMUR_RECORDS_DIR", &records)
        .stdin(Stdio::null());
    let out = account.command(stop).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status = wait_for(secs(10), "the account's session to end", || {
        theirs.child.try_wait().unwrap()
    });
    assert!(status.success());
}
