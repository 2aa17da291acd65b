//! The two binaries as an operator runs them: versions, help, argument errors, and
//! `mur-roost` serving on loopback.

use crate::common;

use common::{body_of, exchange, status_of, Running};
use std::process::Command;

const MUR: &str = env!("CARGO_BIN_EXE_mur");
const ROOST: &str = env!("CARGO_BIN_EXE_mur-roost");

fn run(bin: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin).args(args).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    (
        code,
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn versions() {
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(
        run(MUR, &["--version"]),
        (0, format!("mur {version}\n"), String::new())
    );
    assert_eq!(
        run(ROOST, &["--version"]),
        (0, format!("mur-roost {version}\n"), String::new())
    );
}

/// The commit this checkout is at, when git can say.
fn head_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `mur version`: the `--version` line, then what a bug report needs; `--json` the same as
/// one object.
#[test]
fn mur_version_gives_the_build_facts_for_a_bug_report() {
    let version = env!("CARGO_PKG_VERSION");
    let (code, out, err) = run(MUR, &["version"]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(format!("mur {version}").as_str()), "{out}");
    let field = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}:")))
            .map(|v| v.trim().to_string())
            .unwrap_or_else(|| panic!("no {k}: {out}"))
    };
    let commit = field("commit");
    assert!(
        commit == "unknown" || (commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit())),
        "{out}"
    );
    if let Some(head) = head_commit() {
        assert_eq!(commit, head, "the commit the binary was built at");
    }
    assert!(field("target").contains("linux"), "{out}");
    assert!(field("rustc").starts_with("rustc "), "{out}");
    assert_eq!(field("features"), "runtime tls");
    assert!(field("wit").contains("murmur:capsule@0.1.0"), "{out}");
    assert!(field("wit").contains("murmur:hook@0.2.0"), "{out}");
    assert_eq!(field("a2a"), "0.3 1.0");

    let (code, out, err) = run(MUR, &["version", "--json"]);
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], version);
    assert_eq!(v["commit"], commit.as_str());
    assert_eq!(v["features"], serde_json::json!(["runtime", "tls"]));
    assert_eq!(v["a2a"], serde_json::json!(["0.3", "1.0"]));
    let wit: Vec<&str> = v["wit"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    assert_eq!(
        wit,
        [
            "murmur:capsule@0.1.0",
            "murmur:tool@0.1.0",
            "murmur:tool-registry@0.1.0",
            "murmur:hook@0.2.0",
            "murmur:hook@0.1.0"
        ]
    );
    // Anything else after it is a usage error.
    let (code, _, err) = run(MUR, &["version", "extra"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn mur_help_lists_the_subcommands() {
    let (code, out, _) = run(MUR, &["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("usage: mur <command>"), "{out}");
    for command in [
        "build", "publish", "inspect", "run", "exec", "doctor", "trace", "records", "help", "version",
    ] {
        assert!(
            out.lines().any(|l| l.trim_start().starts_with(command)),
            "{command} missing: {out}"
        );
    }
}

/// `mur` alone is a usage error (a script that lost its command fails): the usage on
/// stderr, nothing on stdout, exit 2; `mur --help` and `mur help` still print it on stdout.
#[test]
fn mur_without_a_command_prints_its_usage_to_stderr_and_exits_2() {
    let (code, out, err) = run(MUR, &[]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("usage: mur <command>"), "{err}");
    let (_, help, _) = run(MUR, &["--help"]);
    assert_eq!(err, help);
    for asked in [&["--help"][..], &["help"]] {
        let (code, out, err) = run(MUR, asked);
        assert_eq!((code, err.as_str()), (0, ""), "{asked:?}");
        assert!(out.contains("usage: mur <command>"), "{asked:?}: {out}");
    }
}

#[test]
fn every_command_answers_help_with_usage_flags_and_an_example() {
    let commands = [
        "build", "publish", "inspect", "run", "exec", "doctor", "trace", "records", "help", "version", "new",
        "ps", "stop", "cancel", "watch",
    ];
    for command in commands {
        for flag in ["--help", "-h"] {
            let (code, out, err) = run(MUR, &[command, flag]);
            assert_eq!((code, err.as_str()), (0, ""), "mur {command} {flag}");
            assert!(out.contains(&format!("usage: mur {command}")), "{command}: {out}");
            assert!(out.contains("\nexample:\n  mur "), "{command}: {out}");
            if !matches!(command, "help" | "version") {
                assert!(out.contains("\noptions:\n"), "{command}: {out}");
                assert!(out.contains("-h, --help"), "{command}: {out}");
            }
        }
        let (code, out, _) = run(MUR, &["help", command]);
        assert_eq!(code, 0);
        assert!(out.contains(&format!("usage: mur {command}")), "{out}");
    }
    // Flags with their defaults.
    let (_, out, _) = run(MUR, &["run", "--help"]);
    assert!(
        out.contains("--manifest PATH      the capsule's manifest (default ./murmur.yaml)"),
        "{out}"
    );
    let (_, out, _) = run(MUR, &["build", "--output=x.mur.zip", "--help"]);
    assert!(out.starts_with("build - validate a capsule directory"), "{out}");
    // After `--`, --help belongs to the command being run.
    let (code, _, err) = run(
        MUR,
        &[
            "exec",
            "--manifest",
            "/nonexistent/murmur.yaml",
            "--",
            "ls",
            "--help",
        ],
    );
    assert_eq!(code, 1, "{err}");
    for flag in ["--help", "-h"] {
        let (code, out, err) = run(ROOST, &[flag]);
        assert_eq!((code, err.as_str()), (0, ""));
        assert!(out.contains("usage: mur-roost"), "{out}");
        assert!(
            out.contains("--port N               listen on 127.0.0.1:N, 0 for any free port (default 7700)"),
            "{out}"
        );
        assert!(out.contains("\nexample:\n  mur-roost --port 7700"), "{out}");
        // The roost spec's meaning: the top-level path, not what may be spawned.
        assert!(
            out.contains("--spawn-allow NAME     a capsule that may register without an approval, as a top-level session"),
            "{out}"
        );
        assert!(!out.contains("may be spawned"), "{out}");
    }
    let (code, _, err) = run(MUR, &["help", "nonsense"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn unknown_arguments_are_named_and_refused() {
    let (code, out, err) = run(MUR, &["--bogus"]);
    assert_ne!(code, 0);
    assert_eq!(out, "");
    assert!(err.starts_with("mur: unknown argument: --bogus\n"), "{err}");
    let (code, _, err) = run(MUR, &["frobnicate"]);
    assert_ne!(code, 0);
    assert!(err.starts_with("mur: unknown argument: frobnicate\n"), "{err}");
    assert!(err.ends_with("run 'mur --help' for usage\n"), "{err}");
    for command in [
        "build", "publish", "inspect", "run", "exec", "doctor", "trace", "records",
    ] {
        let (code, out, err) = run(MUR, &[command, "--no-such-flag"]);
        assert_eq!((code, out.as_str()), (2, ""), "{command}");
        assert_eq!(
            err,
            format!("mur: unknown argument: --no-such-flag\nrun 'mur {command} --help' for usage\n")
        );
    }
    let (code, _, err) = run(ROOST, &["--max-total", "4"]);
    assert_ne!(code, 0);
    assert_eq!(
        err,
        "mur-roost: unknown argument: --max-total\nrun 'mur-roost --help' for usage\n"
    );
    let (code, _, err) = run(ROOST, &["--port", "seventy"]);
    assert_ne!(code, 0);
    assert!(err.starts_with("mur-roost: --port"), "{err}");
}

#[test]
fn roost_serves_health_on_loopback_and_refuses_a_port_in_use() {
    let mut roost = Running::start(ROOST, &["--port", "0"]);
    let line = roost.line();
    let port: u16 = line
        .strip_prefix("mur-roost: listening on 127.0.0.1:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    let answer = exchange(
        addr,
        format!("GET /health HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes(),
    );
    assert_eq!(status_of(&answer), 200);
    assert_eq!(body_of(&answer), "{}");
    let answer = exchange(
        addr,
        format!("GET /nowhere HTTP/1.1\r\nhost: {addr}\r\n\r\n").as_bytes(),
    );
    assert_eq!(
        (status_of(&answer), body_of(&answer)),
        (404, r#"{"error":"not found"}"#)
    );
    let (code, _, err) = run(ROOST, &["--port", &port.to_string()]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!("mur-roost: cannot listen on 127.0.0.1:{port}")),
        "{err}"
    );
}
