//! `mur-roost` as a black box: the real binary on an OS-assigned loopback port, a temporary
//! registry filled through the registry library, every route, table row and message.

use crate::common;

use common::roost::{error, json, publish, publish_files, snapshot, Daemon, ROOST};
use common::TempDir;
use murmur::roost::IDENTITY;
use std::process::Command;

const V: &str = "0.1.0";

/// A registry with an orchestrator that may spawn worker-a and worker-b.
fn registry() -> TempDir {
    let tmp = TempDir::new("roost-reg");
    let reg = tmp.path();
    publish(reg, "orch", V, "capabilities:\n  spawn: {allow: [worker-a, worker-b, ghost]}\n  network: {allow: [api.example.com]}\n");
    publish(
        reg,
        "worker-a",
        V,
        "capabilities:\n  network: {allow: ['https://api.example.com']}\n",
    );
    publish(reg, "worker-b", V, "");
    tmp
}

fn ses(n: u32) -> String {
    format!("ses_{n:032x}")
}

#[test]
fn flags_and_startup_lines() {
    let tmp = registry();
    let d = Daemon::start(tmp.path(), &["--max-live-capsules", "5"], &[]);
    assert_eq!(
        d.ceiling_line,
        "mur-roost: machine ceiling 5 live capsules (--max-live-capsules)"
    );
    let cores = std::thread::available_parallelism().map(usize::from).unwrap_or(2);
    let expected = (cores * 8).clamp(16, 256);
    let d = Daemon::start(tmp.path(), &[], &[]);
    assert_eq!(
        d.ceiling_line,
        format!("mur-roost: machine ceiling {expected} live capsules (--max-live-capsules)")
    );
    let run = |args: &[&str]| {
        let out = Command::new(ROOST).args(args).output().unwrap();
        (
            out.status.code().unwrap(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(
        run(&["--version"]).1,
        format!("mur-roost {}\n", env!("CARGO_PKG_VERSION"))
    );
    let (code, _, err) = run(&["--max-total", "10"]);
    assert_ne!(code, 0);
    // The spec's sentence, then the pointer to --help that every command gives.
    assert_eq!(
        err,
        "mur-roost: unknown argument: --max-total\nrun 'mur-roost --help' for usage\n"
    );
    for (args, mention) in [
        (&["--port", "70000"][..], "--port"),
        (&["--max-depth", "-1"], "--max-depth"),
        (&["--max-concurrent", "two"], "--max-concurrent"),
        (&["--max-live-capsules", "1.5"], "--max-live-capsules"),
        (&["--spawn-allow"], "--spawn-allow needs a value"),
        (&["--spawn-allow", "a,b"], "--spawn-allow"),
        (&["--registry-path"], "--registry-path needs a value"),
        (&["serve"], "unknown argument: serve"),
    ] {
        let (code, out, err) = run(args);
        assert_ne!(code, 0, "{args:?}");
        assert_eq!(out, "", "{args:?} must not bind");
        assert!(
            err.starts_with("mur-roost: ") && err.contains(mention),
            "{args:?}: {err}"
        );
    }
    // A port in use is a clear error.
    let (code, _, err) = run(&["--port", &d.addr.port().to_string()]);
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{}", d.addr.port())),
        "{err}"
    );
    // --spawn-allow=NAME and repeated flags both work.
    let d = Daemon::start(
        tmp.path(),
        &["--spawn-allow=worker-a", "--spawn-allow", "orch"],
        &[],
    );
    assert_eq!(d.register(&ses(1), "worker-a", V, None).0, 200);
    assert_eq!(d.register(&ses(2), "orch", V, None).0, 200);
}

#[test]
fn health_and_unknown_routes() {
    let tmp = registry();
    let d = Daemon::start(tmp.path(), &[], &[]);
    assert_eq!(d.call("GET", "/health", &[], ""), (200, "{}".into()));
    for (m, p) in [
        ("GET", "/"),
        ("POST", "/health"),
        ("GET", "/status"),
        ("GET", "/status/"),
        ("DELETE", "/register"),
        ("GET", "/spawn"),
    ] {
        assert_eq!(
            d.call(m, p, &[], ""),
            (404, r#"{"error":"not found"}"#.into()),
            "{m} {p}"
        );
    }
    let (status, body) = d.call("GET", &format!("/status/{}", ses(9)), &[], "");
    assert_eq!((status, body.as_str()), (404, r#"{"error":"session not found"}"#));
}

#[test]
fn register_error_table() {
    let tmp = registry();
    let d = Daemon::start(
        tmp.path(),
        &["--spawn-allow", "orch", "--spawn-allow", "ghost"],
        &[],
    );
    let (s, b) = d.call("POST", "/register", &[], "{not json");
    assert_eq!(s, 400, "{b}");
    let (s, b) = d.call(
        "POST",
        "/register",
        &[],
        r#"{"session_id":"","name":"orch","version":"0.1.0"}"#,
    );
    assert_eq!(s, 400, "{b}");
    let (s, b) = d.call("POST", "/register", &[], r#"{"name":"orch","version":"0.1.0"}"#);
    assert_eq!(s, 400, "{b}");
    // Not in --spawn-allow, published or not.
    for name in ["worker-a", "never-published"] {
        let (s, b) = d.register(&ses(1), name, V, None);
        assert_eq!(
            (s, error(&b)),
            (403, format!("capsule '{name}' is not in --spawn-allow"))
        );
    }
    // In the list but not in the registry: 500.
    let (s, b) = d.register(&ses(1), "ghost", V, None);
    assert_eq!(s, 500);
    assert_eq!(
        error(&b),
        "capsule 'ghost@0.1.0' could not be resolved from the registry: not installed"
    );
    // Success, then the same session_id again is the identity refusal.
    let cred = d.credential(&ses(1), "orch", V, None);
    assert!(cred.starts_with("msc1."));
    // Extra keys change nothing: a body claiming its own grants gets the registry's.
    let body = format!(
        r#"{{"session_id":"{}","name":"orch","version":"0.1.0","capabilities":{{"spawn":{{"allow":["x"]}}}},"depth_remaining":99}}"#,
        ses(2)
    );
    assert_eq!(d.call("POST", "/register", &[], &body).0, 200);
    assert_eq!(d.status(&ses(2))["depth_remaining"], 3);
    let (s, b) = d.register(&ses(1), "orch", V, None);
    assert_eq!((s, error(&b)), (403, IDENTITY.to_string()));
}

#[test]
fn spawn_error_table_and_success_shape() {
    let tmp = registry();
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let cred = d.credential(&ses(1), "orch", V, None);
    let headers = [("x-murmur-spawn-credential", cred.as_str())];
    assert_eq!(d.call("POST", "/spawn", &headers, "[1,2").0, 400);
    assert_eq!(
        d.call("POST", "/spawn", &headers, r#"{"name":"worker-a"}"#).0,
        400
    );
    assert_eq!(
        d.call("POST", "/spawn", &headers, r#"{"version":"0.1.0"}"#).0,
        400
    );
    let (s, b) = d.call("POST", "/spawn", &[], r#"{"name":"worker-a","version":"0.1.0"}"#);
    assert_eq!((s, error(&b)), (403, IDENTITY.to_string()));
    let (s, b) = d.spawn("msc1.garbage.garbage", "worker-a", V);
    assert_eq!((s, error(&b)), (403, IDENTITY.to_string()));
    let (s, b) = d.spawn(&cred, "worker-c", V);
    assert_eq!(
        (s, error(&b)),
        (
            403,
            "capsule 'worker-c' is not in parent's spawn_allow".to_string()
        )
    );
    let (s, b) = d.spawn(&cred, "ghost", V);
    assert_eq!(
        (s, error(&b)),
        (
            500,
            "capsule 'ghost@0.1.0' could not be resolved from the registry: not installed".to_string()
        )
    );
    let before = d.status(&ses(1));
    let (s, b) = d.spawn(&cred, "worker-a", V);
    assert_eq!(s, 200, "{b}");
    let v = json(&b);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["approval", "expires_at_ms", "name", "sha256", "version"]);
    assert!(v["approval"].as_str().unwrap().starts_with("msa1."));
    assert_eq!(
        (v["name"].as_str(), v["version"].as_str()),
        (Some("worker-a"), Some(V))
    );
    let sha = murmur::registry::resolve(tmp.path(), "worker-a", V, murmur::manifest::Resolve::Nothing)
        .unwrap()
        .sha256;
    assert_eq!(v["sha256"], sha);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let exp = v["expires_at_ms"].as_u64().unwrap();
    assert!(
        exp > now + 50_000 && exp <= now + 60_000,
        "expires 60 s after the grant: {exp} vs {now}"
    );
    let after = d.status(&ses(1));
    assert_eq!(
        after["live_children"],
        before["live_children"].as_u64().unwrap() + 1
    );
    assert_eq!(
        after["live_capsules"],
        before["live_capsules"].as_u64().unwrap() + 1
    );
}

#[test]
fn deregister_error_table_and_a_spent_credential() {
    let tmp = registry();
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let cred = d.credential(&ses(1), "orch", V, None);
    let h = [("x-murmur-spawn-credential", cred.as_str())];
    assert_eq!(d.call("POST", "/deregister", &h, "nope").0, 400);
    assert_eq!(d.call("POST", "/deregister", &h, r#"{"outcome":"done"}"#).0, 400);
    // The outcome is validated before the credential.
    assert_eq!(d.call("POST", "/deregister", &[], r#"{"outcome":"done"}"#).0, 400);
    let (s, b) = d.call("POST", "/deregister", &[], r#"{"outcome":"complete"}"#);
    assert_eq!((s, error(&b)), (403, IDENTITY.to_string()));
    assert_eq!(d.deregister(&cred, "failed"), (200, "{}".into()));
    let st = d.status(&ses(1));
    assert_eq!(
        st,
        serde_json::json!({"status": "failed", "depth_remaining": 3, "live_children": 0, "live_capsules": 0})
    );
    // The credential still has a valid MAC but authorises nothing now.
    assert_eq!(error(&d.spawn(&cred, "worker-a", V).1), IDENTITY);
    assert_eq!(error(&d.deregister(&cred, "complete").1), IDENTITY);
    assert_eq!(d.status(&ses(1))["status"], "failed");
    let c2 = d.credential(&ses(2), "orch", V, None);
    d.deregister(&c2, "complete");
    assert_eq!(d.status(&ses(2))["status"], "complete");
}

#[test]
fn a_full_delegation_cycle_and_status_fields() {
    let tmp = registry();
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let parent = d.credential(&ses(1), "orch", V, None);
    assert_eq!(
        d.status(&ses(1)),
        serde_json::json!({"status": "running", "depth_remaining": 3, "live_children": 0, "live_capsules": 1})
    );
    let approval = d.approval(&parent, "worker-a", V);
    assert_eq!(
        d.status(&ses(1))["live_children"],
        1,
        "the approval reserves a slot"
    );
    let child = d.credential(&ses(2), "worker-a", V, Some(&approval));
    assert_eq!(
        d.status(&ses(2)),
        serde_json::json!({"status": "running", "depth_remaining": 2, "live_children": 0, "live_capsules": 2})
    );
    assert_eq!(
        d.status(&ses(1))["live_children"],
        1,
        "redeeming leaves the count unchanged"
    );
    assert_eq!(d.status(&ses(1))["live_capsules"], 2);
    assert_eq!(d.deregister(&child, "complete").0, 200);
    assert_eq!(
        d.status(&ses(1))["live_children"],
        0,
        "the child's deregister releases the slot"
    );
    // The parent's deregister releases the reservations it holds.
    d.approval(&parent, "worker-a", V);
    d.approval(&parent, "worker-b", V);
    assert_eq!(d.status(&ses(1))["live_capsules"], 3);
    assert_eq!(d.deregister(&parent, "complete").0, 200);
    assert_eq!(d.status(&ses(1))["live_capsules"], 0);
}

#[test]
fn bounds_messages_and_order() {
    let tmp = registry();
    let reg = tmp.path();
    publish(reg, "selfish", V, "capabilities:\n  spawn: {allow: [selfish]}\n");
    // Depth: a capsule naming itself runs at max-depth + 1 levels, then stops.
    let d = Daemon::start(reg, &["--spawn-allow", "selfish", "--max-depth", "2"], &[]);
    let mut cred = d.credential(&ses(1), "selfish", V, None);
    for level in 2..=3 {
        let a = d.approval(&cred, "selfish", V);
        cred = d.credential(&ses(level), "selfish", V, Some(&a));
    }
    assert_eq!(d.status(&ses(3))["depth_remaining"], 0);
    let (s, b) = d.spawn(&cred, "selfish", V);
    assert_eq!((s, error(&b)), (403, "delegation depth bound reached: this daemon allows 2 levels of delegation below a top-level capsule (--max-depth 2), and this session has none left to spend — a capsule whose capabilities.spawn.allow names itself terminates here rather than recursing".to_string()));

    // Concurrency.
    let d = Daemon::start(reg, &["--spawn-allow", "orch", "--max-concurrent", "2"], &[]);
    let cred = d.credential(&ses(1), "orch", V, None);
    d.approval(&cred, "worker-a", V);
    d.approval(&cred, "worker-b", V);
    let (s, b) = d.spawn(&cred, "worker-a", V);
    assert_eq!((s, error(&b)), (403, "delegation concurrency bound reached: this daemon allows a capsule 2 live children at a time (--max-concurrent 2), and this session already holds 2 — wait for one to finish, or raise --max-concurrent".to_string()));

    // Machine ceiling, asked before concurrency; a top-level registration is never refused
    // by the ceiling but is counted.
    let d = Daemon::start(
        reg,
        &[
            "--spawn-allow",
            "orch",
            "--max-live-capsules",
            "3",
            "--max-concurrent",
            "1",
        ],
        &[],
    );
    let creds: Vec<String> = (1..=4).map(|i| d.credential(&ses(i), "orch", V, None)).collect();
    assert_eq!(
        d.status(&ses(1))["live_capsules"],
        4,
        "four roots over a ceiling of three, all admitted"
    );
    let (s, b) = d.spawn(&creds[0], "worker-a", V);
    assert_eq!((s, error(&b)), (403, "machine capsule ceiling reached: this daemon allows 3 live capsules on this host across every formation (--max-live-capsules 3), and it is already holding 4 — this is the host's ceiling rather than this capsule's own --max-concurrent, so narrowing the formation does not help; the same request may be granted once other capsules finish".to_string()));
    d.deregister(&creds[3], "complete");
    d.deregister(&creds[2], "complete");
    d.approval(&creds[0], "worker-a", V);
    // Both the ceiling (3 of 3) and concurrency (1 of 1) now apply: the ceiling is asked first.
    let (_, b) = d.spawn(&creds[0], "worker-b", V);
    assert!(error(&b).starts_with("machine capsule ceiling reached"), "{b}");
    d.deregister(&creds[1], "complete");
    let (_, b) = d.spawn(&creds[0], "worker-b", V);
    assert!(
        error(&b).starts_with("delegation concurrency bound reached"),
        "{b}"
    );

    // Depth is asked before the ceiling, and 0 refuses every delegation.
    let d = Daemon::start(
        reg,
        &[
            "--spawn-allow",
            "orch",
            "--max-depth",
            "0",
            "--max-live-capsules",
            "0",
            "--max-concurrent",
            "0",
        ],
        &[],
    );
    let cred = d.credential(&ses(1), "orch", V, None);
    assert!(error(&d.spawn(&cred, "worker-a", V).1).starts_with("delegation depth bound reached"));
    let d = Daemon::start(
        reg,
        &[
            "--spawn-allow",
            "orch",
            "--max-live-capsules",
            "0",
            "--max-concurrent",
            "0",
        ],
        &[],
    );
    let cred = d.credential(&ses(1), "orch", V, None);
    assert!(error(&d.spawn(&cred, "worker-a", V).1).starts_with("machine capsule ceiling reached"));
    let d = Daemon::start(reg, &["--spawn-allow", "orch", "--max-concurrent", "0"], &[]);
    let cred = d.credential(&ses(1), "orch", V, None);
    assert!(error(&d.spawn(&cred, "worker-a", V).1).starts_with("delegation concurrency bound reached"));
    // The name check comes before every bound.
    assert!(error(&d.spawn(&cred, "worker-c", V).1)
        .starts_with("capsule 'worker-c' is not in parent's spawn_allow"));
}

#[test]
fn a_refused_spawn_leaves_no_trace() {
    let tmp = registry();
    publish(
        tmp.path(),
        "wide",
        V,
        "capabilities:\n  network: {allow: [evil.example]}\n",
    );
    publish(
        tmp.path(),
        "orch2",
        V,
        "capabilities:\n  spawn: {allow: [wide, worker-b]}\n",
    );
    let d = Daemon::start(
        tmp.path(),
        &["--spawn-allow", "orch2", "--max-concurrent", "1"],
        &[],
    );
    let cred = d.credential(&ses(1), "orch2", V, None);
    let reg_before = snapshot(tmp.path());
    let status_before = d.status(&ses(1));
    for _ in 0..3 {
        assert_eq!(d.spawn(&cred, "wide", V).0, 403);
        assert_eq!(d.spawn(&cred, "nope", V).0, 403);
    }
    assert_eq!(d.status(&ses(1)), status_before);
    d.approval(&cred, "worker-b", V);
    let status_full = d.status(&ses(1));
    assert_eq!(d.spawn(&cred, "worker-b", V).0, 403);
    assert_eq!(d.status(&ses(1)), status_full);
    assert_eq!(snapshot(tmp.path()), reg_before, "the registry is untouched");
    assert!(
        snapshot(d.cwd.path()).is_empty(),
        "the daemon wrote nothing in its working directory"
    );
}

#[test]
fn the_envelope_on_all_ten_axes() {
    let tmp = registry();
    let reg = tmp.path();
    let parent = "capabilities:\n  network: {allow: [api.example.com], unix_sockets: true}\n  peer_fetch: {allow: [localhost]}\n  shell: {allow: [git]}\n  spawn: {allow: [c-net-ok, c-net-bad, c-unix-ok, c-unix-bad, c-peer-ok, c-peer-bad, c-shell-ok, c-shell-bad, c-spawn-ok, c-spawn-bad, c-env-ok, c-env-bad, c-fs-ok, c-fs-bad, c-exec-ok, c-exec-bad, c-state-ok, c-state-bad, c-floor-ok, c-floor-bad, worker-b]}\n  env: {allow: [LANG]}\n  filesystem: {scope: data, workdir_exec: true}\n  state: {store: shared}\n  containment: scoped\n";
    publish(reg, "envparent", V, parent);
    let axes: [(&str, &str, &str, &str); 10] = [
        (
            "net",
            "network: {allow: ['https://api.example.com']}",
            "network: {allow: [other.example.com]}",
            "capabilities.network.allow: the child declares 'other.example.com'",
        ),
        (
            "unix",
            "network: {unix_sockets: true}",
            "network: {unix_sockets: true}",
            "",
        ),
        (
            "peer",
            "peer_fetch: {allow: ['localhost:41234']}",
            "peer_fetch: {allow: [otherhost]}",
            "capabilities.peer_fetch.allow: the child declares 'otherhost'",
        ),
        (
            "shell",
            "shell: {allow: [git]}",
            "shell: {allow: [curl]}",
            "capabilities.shell.allow: the child declares 'curl'",
        ),
        (
            "spawn",
            "spawn: {allow: [worker-b]}",
            "spawn: {allow: [worker-z]}",
            "capabilities.spawn.allow: the child declares 'worker-z'",
        ),
        (
            "env",
            "env: {allow: [LANG]}",
            "env: {allow: [HOME]}",
            "capabilities.env.allow: the child declares 'HOME'",
        ),
        (
            "fs",
            "filesystem: {scope: data/sub}",
            "filesystem: {scope: other}",
            "capabilities.filesystem.scope: the child declares 'other'",
        ),
        (
            "exec",
            "filesystem: {scope: data, workdir_exec: true}",
            "filesystem: {scope: data, workdir_exec: true}",
            "",
        ),
        (
            "state",
            "state: {store: shared}",
            "state: {store: private}",
            "capabilities.state.store: the child declares 'private'",
        ),
        (
            "floor",
            "containment: sealed",
            "containment: advisory",
            "capabilities.containment: the child declares 'advisory', below its parent's floor 'scoped'",
        ),
    ];
    for (axis, ok, bad, _) in axes {
        let fs = if axis == "fs" || axis == "exec" {
            ""
        } else {
            "\n  filesystem: {scope: data}"
        };
        let floor = if axis == "floor" {
            ""
        } else {
            "\n  containment: scoped"
        };
        publish(
            reg,
            &format!("c-{axis}-ok"),
            V,
            &format!("capabilities:\n  {ok}{fs}{floor}\n"),
        );
        publish(
            reg,
            &format!("c-{axis}-bad"),
            V,
            &format!("capabilities:\n  {bad}{fs}{floor}\n"),
        );
    }
    let d = Daemon::start(
        reg,
        &["--spawn-allow", "envparent", "--max-concurrent", "50"],
        &[],
    );
    let cred = d.credential(&ses(1), "envparent", V, None);
    // unix_sockets and workdir_exec: a parent without them refuses, this one passes.
    publish(
        reg,
        "narrow",
        V,
        "capabilities:\n  spawn: {allow: [c-unix-bad, c-exec-bad]}\n",
    );
    let narrow = Daemon::start(reg, &["--spawn-allow", "narrow"], &[]);
    let ncred = narrow.credential(&ses(1), "narrow", V, None);
    for (axis, _, _, refusal) in axes {
        let (s, b) = d.spawn(&cred, &format!("c-{axis}-ok"), V);
        assert_eq!(s, 200, "{axis} within the envelope: {b}");
        let tail = "a spawned capsule can never hold more capability than the capsule that spawned it";
        match axis {
            "unix" | "exec" => {
                let (s, b) = narrow.spawn(&ncred, &format!("c-{axis}-bad"), V);
                let key = if axis == "unix" {
                    "capabilities.network.unix_sockets"
                } else {
                    "capabilities.filesystem.workdir_exec"
                };
                assert_eq!(
                    (s, error(&b)),
                    (
                        403,
                        format!("{key}: the child declares 'true', which its parent does not hold — {tail}")
                    )
                );
            }
            _ => {
                let (s, b) = d.spawn(&cred, &format!("c-{axis}-bad"), V);
                assert_eq!(s, 403, "{axis}: {b}");
                assert!(error(&b).starts_with(refusal), "{axis}: {b}");
                if axis != "floor" {
                    assert!(error(&b).ends_with(tail), "{axis}: {b}");
                }
            }
        }
    }
}

#[test]
fn approval_abuse_is_refused() {
    let tmp = registry();
    let reg = tmp.path();
    let d = Daemon::start(reg, &["--spawn-allow", "orch", "--spawn-allow", "worker-b"], &[]);
    let parent = d.credential(&ses(1), "orch", V, None);

    // Replay.
    let a = d.approval(&parent, "worker-a", V);
    d.credential(&ses(2), "worker-a", V, Some(&a));
    let (s, b) = d.register(&ses(3), "worker-a", V, Some(&a));
    assert_eq!((s, error(&b)), (403, "this spawn approval has already been redeemed; an approval covers one launch, so ask POST /spawn for another".into()));

    // Wrong coordinates consume the approval.
    let a = d.approval(&parent, "worker-a", V);
    let (s, b) = d.register(&ses(4), "worker-b", V, Some(&a));
    assert_eq!(
        (s, error(&b)),
        (
            403,
            "this spawn approval was granted for 'worker-a@0.1.0', not 'worker-b@0.1.0'".into()
        )
    );
    let (s, b) = d.register(&ses(4), "worker-a", V, Some(&a));
    assert_eq!((s, error(&b)), (403, "this spawn approval has already been redeemed; an approval covers one launch, so ask POST /spawn for another".into()));

    // Republished bytes at the same coordinates.
    publish(reg, "worker-c", V, "");
    publish(reg, "orch3", V, "capabilities:\n  spawn: {allow: [worker-c]}\n");
    let d3 = Daemon::start(reg, &["--spawn-allow", "orch3"], &[]);
    let p3 = d3.credential(&ses(1), "orch3", V, None);
    let a = d3.approval(&p3, "worker-c", V);
    let old = json(&d3.spawn(&p3, "worker-c", V).1)["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::remove_dir_all(reg.join("worker-c").join(V)).unwrap();
    let new = publish_files(reg, "worker-c", V, "", &[("notes.md", b"different bytes")]);
    let (s, b) = d3.register(&ses(2), "worker-c", V, Some(&a));
    assert_eq!((s, error(&b)), (403, format!("'worker-c@0.1.0' now resolves to a different artifact than the one this spawn approval was granted for (approved sha256 {old}, resolved sha256 {new})")));

    // Credential and approval swapped.
    let a = d.approval(&parent, "worker-a", V);
    let (s, b) = d.register(&ses(5), "worker-a", V, Some(&parent));
    assert_eq!((s, error(&b)), (403, IDENTITY.into()));
    assert_eq!(error(&d.spawn(&a, "worker-a", V).1), IDENTITY);

    // A tampered payload: the depth raised, re-encoded, original MAC kept.
    let parts: Vec<&str> = a.split('.').collect();
    let payload = murmur::b64::decode(parts[1].as_bytes()).unwrap();
    let mut v: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    v["depth"] = serde_json::json!(99);
    let forged = format!(
        "msa1.{}.{}",
        murmur::b64::encode(v.to_string().as_bytes()),
        parts[2]
    );
    let (s, b) = d.register(&ses(6), "worker-a", V, Some(&forged));
    assert_eq!((s, error(&b)), (403, IDENTITY.into()));
    // ...and the genuine approval still works (the forgery did not spend it).
    d.credential(&ses(6), "worker-a", V, Some(&a));

    // An approval whose granting session has deregistered.
    let p2 = d.credential(&ses(7), "orch", V, None);
    let a = d.approval(&p2, "worker-a", V);
    d.deregister(&p2, "complete");
    let (s, b) = d.register(&ses(8), "worker-a", V, Some(&a));
    assert_eq!((s, error(&b)), (403, IDENTITY.into()));

    // An invalid approval never falls back to --spawn-allow (worker-b is in it).
    let (s, b) = d.register(&ses(9), "worker-b", V, Some("msa1.bogus.bogus"));
    assert_eq!((s, error(&b)), (403, IDENTITY.into()));
    let (s, b) = d.register(&ses(9), "worker-b", V, Some(""));
    assert_eq!((s, error(&b)), (403, IDENTITY.into()));
    assert_eq!(
        d.register(&ses(9), "worker-b", V, None).0,
        200,
        "the same name without a header is admitted"
    );
}

#[test]
fn identity_refusals_are_byte_identical() {
    let tmp = registry();
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let live = d.credential(&ses(1), "orch", V, None);
    let ended = d.credential(&ses(2), "orch", V, None);
    d.deregister(&ended, "complete");
    let body = r#"{"name":"worker-c","version":"0.1.0"}"#;
    let h = |c: &str| vec![("x-murmur-spawn-credential", c.to_string())];
    let raw = |headers: Vec<(&str, String)>, path: &str, body: &str| {
        let hs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        d.raw("POST", path, &hs, body)
    };
    let reference = raw(h(&ended), "/spawn", body);
    assert!(reference.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{reference}");
    let variants = [
        raw(vec![], "/spawn", body),
        raw(h("msc1.x.y"), "/spawn", body),
        raw(h(&live.replace("msc1", "msa1")), "/spawn", body),
        raw(h(&format!("{live}x")), "/spawn", body),
        raw(h(&ended), "/deregister", r#"{"outcome":"complete"}"#),
        raw(
            vec![("x-murmur-spawn-approval", live.clone())],
            "/register",
            &format!(r#"{{"session_id":"{}","name":"orch","version":"0.1.0"}}"#, ses(3)),
        ),
        raw(
            vec![],
            "/register",
            &format!(r#"{{"session_id":"{}","name":"orch","version":"0.1.0"}}"#, ses(1)),
        ),
    ];
    for v in variants {
        assert_eq!(v, reference);
    }
    assert_eq!(
        json(reference.split_once("\r\n\r\n").unwrap().1)["error"],
        IDENTITY
    );
}

#[test]
fn daemon_env_resolves_references_but_never_the_api_key() {
    let tmp = registry();
    let reg = tmp.path();
    publish(reg, "keyed", V, "inference:\n  transport: process\n  api_key: ${PROVIDER_SECRET}\ncapabilities:\n  state: {store: '${STORE_NAME}'}\n");
    publish(
        reg,
        "orchk",
        V,
        "capabilities:\n  spawn: {allow: [keyed]}\n  state: {store: notes}\n",
    );
    // No STORE_NAME in the daemon's environment: the spawn fails naming the variable.
    let d = Daemon::start(reg, &["--spawn-allow", "orchk"], &[]);
    let cred = d.credential(&ses(1), "orchk", V, None);
    let (s, b) = d.spawn(&cred, "keyed", V);
    assert_eq!(s, 500);
    assert!(
        error(&b).contains("references ${STORE_NAME} but the environment variable is not set"),
        "{b}"
    );
    // With it, the envelope is judged on the resolved value; the key is never needed.
    let d = Daemon::start(reg, &["--spawn-allow", "orchk"], &[("STORE_NAME", "notes")]);
    let cred = d.credential(&ses(1), "orchk", V, None);
    assert_eq!(d.spawn(&cred, "keyed", V).0, 200);
}

#[test]
fn a_restart_forgets_every_session_and_token() {
    let tmp = registry();
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    let cred = d.credential(&ses(1), "orch", V, None);
    let approval = d.approval(&cred, "worker-a", V);
    drop(d);
    let d = Daemon::start(tmp.path(), &["--spawn-allow", "orch"], &[]);
    assert_eq!(d.call("GET", &format!("/status/{}", ses(1)), &[], "").0, 404);
    assert_eq!(error(&d.spawn(&cred, "worker-a", V).1), IDENTITY);
    assert_eq!(
        error(&d.register(&ses(2), "worker-a", V, Some(&approval)).1),
        IDENTITY
    );
}

#[test]
fn the_running_daemon_is_confined() {
    let reg = registry();
    let d = Daemon::start(reg.path(), &[], &[]);
    // It still serves, and resolves from the registry it may read.
    assert_eq!(d.call("GET", "/health", &[], ""), (200, "{}".into()));
    let status = std::fs::read_to_string(format!("/proc/{}/status", d.run.child.id())).unwrap();
    let field = |k: &str| common::status_field(&status, k);
    assert_eq!(field("NoNewPrivs:"), "1", "{status}");
    assert_eq!(field("Seccomp:"), "2", "{status}");
}
