//! Launch-time rules of the resource plane through the real `mur run`: an export root that
//! exists as a symlink leaving the accessible workdir refuses the launch with E-CAP-007
//! before any session runs; one that stays inside, or does not exist yet, does not.

use crate::common;

use common::capsule::{capsule, manifest_arg, mur, text};
use common::TempDir;

const WASM: &str = "tests/fixtures/slow/capsule.wasm";

fn exports(key: &str) -> String {
    match key {
        "files" => "exports:\n  files:\n    root: share/\n    mode: read-only\n".into(),
        _ => "exports:\n  peer_files:\n    root: share/\n    max_ttl: 10m\n".into(),
    }
}

/// Run the capsule once with task `go` over `work`.
fn run(t: &TempDir, work: &std::path::Path, key: &str) -> std::process::Output {
    let dir = capsule(t, WASM, &exports(key));
    let work = work.display().to_string();
    mur(
        t,
        &[
            "--manifest",
            &manifest_arg(&dir),
            "--workdir",
            &work,
            "--task",
            "go",
        ],
        &[],
    )
}

#[test]
fn a_root_symlinked_out_of_the_workdir_refuses_the_launch_with_e_cap_007() {
    for key in ["files", "peer_files"] {
        let t = TempDir::new("export-root");
        let outside = t.path().join("elsewhere");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.txt"), "no").unwrap();
        let work = t.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        std::os::unix::fs::symlink(&outside, work.join("share")).unwrap();

        let out = run(&t, &work, key);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{key}: {stderr}");
        assert!(
            stderr.starts_with(&format!(
                "error[E-CAP-007]: murmur.yaml: exports.{key}.root 'share/' resolves outside the accessible workdir"
            )),
            "{key}: {stderr}"
        );
        // Before any session: no session line, no records.
        assert!(!text(&out.stdout).contains("session:"), "{key}");
        let records = t.path().join("records");
        let sessions = std::fs::read_dir(&records).map(|d| d.count()).unwrap_or(0);
        assert_eq!(sessions, 0, "{key}: no session records were made");
    }
}

#[test]
fn a_root_inside_the_workdir_or_not_there_yet_launches() {
    // A symlink to a directory inside the workdir, and no root at all.
    for linked in [true, false] {
        let t = TempDir::new("export-root");
        let work = t.path().join("work");
        std::fs::create_dir_all(work.join("real")).unwrap();
        if linked {
            std::os::unix::fs::symlink("real", work.join("share")).unwrap();
        }
        let out = run(&t, &work, "files");
        assert_eq!(
            out.status.code(),
            Some(0),
            "linked {linked}: {}",
            text(&out.stderr)
        );
        assert!(!text(&out.stderr).contains("E-CAP-007"));
    }
}
