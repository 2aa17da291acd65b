//! The locks committed beside the examples' manifests pin exactly the artifacts shipped under
//! `artifacts/` (scripts/build-guests.sh rewrites them when it repackages), each manifest has
//! a lock of its own name, and `mur lock` refuses what it cannot do with a coded error.

use crate::common;

use common::capsule::{repo, MUR};
use common::TempDir;
use std::process::Command;

#[test]
fn each_example_lock_pins_the_shipped_artifacts_its_manifest_names() {
    let mut seen = 0;
    for (manifest, lock) in [
        ("examples/agent/murmur.yaml", "examples/agent/murmur.lock"),
        ("examples/agent/anthropic.yaml", "examples/agent/anthropic.lock"),
    ] {
        let text = std::fs::read_to_string(repo(lock)).unwrap_or_else(|e| panic!("{lock}: {e}"));
        let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let m: serde_yaml::Value =
            serde_yaml::from_str(&std::fs::read_to_string(repo(manifest)).unwrap()).unwrap();
        let declared: Vec<(String, String)> = m["artifacts"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["name"].as_str().unwrap().into(),
                    a["version"].as_str().unwrap().into(),
                )
            })
            .collect();
        let pinned = v["artifacts"].as_sequence().unwrap();
        assert_eq!(pinned.len(), declared.len(), "{lock}");
        for (name, version) in declared {
            let p = pinned
                .iter()
                .find(|p| p["name"].as_str() == Some(name.as_str()))
                .unwrap_or_else(|| panic!("{lock} does not pin {name}"));
            assert_eq!(p["resolved_version"].as_str(), Some(version.as_str()));
            let zip = std::fs::read(repo(&format!("artifacts/{name}-{version}.mur.zip"))).unwrap();
            assert_eq!(
                p["sha256"].as_str(),
                Some(murmur::registry::sha256_hex(&zip).as_str()),
                "{lock}: {name}@{version} is not the shipped archive (rerun scripts/build-guests.sh)"
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 2);
}

#[test]
fn mur_lock_refuses_an_update_without_a_lock_or_of_an_undeclared_artifact() {
    let t = TempDir::new("lock-cli");
    let reg = t.path().join("registry");
    std::fs::create_dir_all(&reg).unwrap();
    let zip = repo("artifacts/murmur-driver-openai-1.0.0.mur.zip");
    let out = Command::new(MUR)
        .args([
            "publish",
            zip.to_str().unwrap(),
            "--registry-path",
            reg.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let dir = t.path().join("capsule");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo("examples/agent/murmur.yaml"), dir.join("agent.yaml")).unwrap();
    let lock = |extra: &[&str]| {
        let out = Command::new(MUR)
            .args([
                "lock",
                "--manifest",
                dir.join("agent.yaml").to_str().unwrap(),
                "--registry-path",
            ])
            .arg(&reg)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, err) = lock(&["--update", "murmur-driver-openai"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("error[E-RUN-003]: there is no agent.lock to update: run `mur lock` to write one"),
        "{err}"
    );
    let (code, out, err) = lock(&[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.ends_with("agent.lock (1 artifacts pinned)\n"), "{out}");
    assert!(
        dir.join("agent.lock").is_file(),
        "the lock is named after its manifest"
    );
    let (code, _, err) = lock(&["--update", "nothing-such"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(
            "error[E-RUN-003]: the manifest declares no artifact nothing-such (with a version) to pin"
        ),
        "{err}"
    );
    let (code, _, err) = lock(&["--bogus"]);
    assert_eq!(code, Some(2), "{err}");
}
