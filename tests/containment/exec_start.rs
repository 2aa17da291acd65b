//! What `mur exec` does once instead of every time: the host probe's report is kept in the
//! compile cache's directory (keyed by boot, kernel, binary, user, floor and execution
//! context; believed only when the directory and the entry are the user's alone); and a
//! contained command with no network rule still reaches nothing of the host's, from a
//! namespace that is not the host's, or with its network closed where the host cannot make
//! one (`sealed` then refused).

use crate::common;

use common::agent::host_backs;
use common::capsule::MUR;
use common::TempDir;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn capsule(t: &TempDir) -> PathBuf {
    let m = t.path().join("murmur.yaml");
    std::fs::write(
        &m,
        "name: start\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [bash, \"true\"]\n",
    )
    .unwrap();
    std::fs::create_dir_all(t.path().join("work")).unwrap();
    m
}

fn exec(t: &TempDir, class: &str, cmd: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(MUR)
        .args(["exec", "--manifest"])
        .arg(t.path().join("murmur.yaml"))
        .arg("--workdir")
        .arg(t.path().join("work"))
        .args(["--containment", class, "--"])
        .args(cmd)
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env_remove("MURMUR_PROBE_DENY")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The one probe entry in the cache directory.
fn entry(cache: &Path) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(cache)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("probe-"))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

#[test]
fn the_probe_report_is_kept_and_believed_only_from_the_users_own_entry() {
    if !host_backs("scoped") {
        return assert!(!host_backs("sealed"));
    }
    let t = TempDir::new("probe-cache");
    capsule(&t);
    let out = exec(&t, "scoped", &["true"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let cache = t.path().join("cache");
    let path = entry(&cache);
    let kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        kept["report"]["landlock"],
        serde_json::json!({"Ok": null}),
        "{kept}"
    );
    assert!(kept["key"].as_str().unwrap().contains(" floor=scoped "), "{kept}");

    // The next launch reads it: a report planted under the same key is believed.
    let mut planted = kept.clone();
    planted["report"]["landlock"] = serde_json::json!({"Err": "planted in the cache"});
    std::fs::write(&path, planted.to_string()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = exec(&t, "scoped", &["true"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("error[E-CAP-003]: ")
            && text(&out.stderr).contains("achieved 'advisory': planted in the cache"),
        "{}",
        text(&out.stderr)
    );

    // An entry another user could have written is not: probed again, and rewritten.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = exec(&t, "scoped", &["true"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let again: serde_json::Value = serde_json::from_slice(&std::fs::read(entry(&cache)).unwrap()).unwrap();
    assert_eq!(again["report"]["landlock"], serde_json::json!({"Ok": null}));

    // Nor is one in a directory others can write, or one whose key is not this launch's.
    std::fs::write(&path, planted.to_string()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = exec(&t, "scoped", &["true"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut foreign = planted.clone();
    foreign["key"] = serde_json::json!(kept["key"].as_str().unwrap().replace("boot=", "boot=0"));
    std::fs::write(&path, foreign.to_string()).unwrap();
    let out = exec(&t, "scoped", &["true"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    // A simulated denial still applies to a cached report.
    let out = exec(&t, "scoped", &["true"], &[("MURMUR_PROBE_DENY", "landlock")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("landlock: disabled by MURMUR_PROBE_DENY"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_contained_command_without_network_rules_reaches_nothing_with_a_namespace_or_without() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let t = TempDir::new("exec-nonet");
    capsule(&t);
    let line = format!(
        "(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo open || echo closed; \
         [ \"$(readlink /proc/self/ns/net)\" = \"{}\" ] && echo host-netns || echo own-netns",
        std::fs::read_link("/proc/self/ns/net").unwrap().display()
    );
    for class in ["scoped", "sealed"] {
        if !host_backs(class) {
            continue;
        }
        let out = exec(&t, class, &["bash", "-c", &line], &[]);
        assert_eq!(out.status.code(), Some(0), "{class}: {}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            "closed\nown-netns\n",
            "{class}: {}",
            text(&out.stderr)
        );
        // Where no namespace can be made, `scoped` runs with its network closed (no IP
        // socket at all) and `sealed` is refused.
        let out = exec(
            &t,
            class,
            &["bash", "-c", &line],
            &[("MURMUR_PROBE_DENY", "netns")],
        );
        if class == "sealed" {
            assert_eq!(out.status.code(), Some(1), "{class}");
            assert!(
                text(&out.stderr).starts_with("error[E-CAP-003]: containment floor not met: declared 'sealed', achieved 'scoped': netns: disabled by MURMUR_PROBE_DENY"),
                "{class}: {}",
                text(&out.stderr)
            );
        } else {
            assert!(
                text(&out.stdout).starts_with("closed\n"),
                "{class}: {}",
                text(&out.stderr)
            );
        }
    }
    assert!(
        listener.accept().is_err(),
        "a contained command reached the host's port"
    );
}
