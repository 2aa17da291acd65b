//! `mur new NAME [DIR]` (a WASM capsule) through the real binaries: it runs as it is, its
//! dataset passes under `mur eval run`, and a directory that holds anything is refused
//! (E-IO-004) with nothing written; a scoped name is E-BLD-001, a missing one a usage error.

use crate::common;

use common::{output_text, TempDir};
use std::path::Path;
use std::process::{Command, Output};

const MUR: &str = env!("CARGO_BIN_EXE_mur");

fn mur(t: &TempDir, args: &[&str]) -> Output {
    Command::new(MUR)
        .args(args)
        .current_dir(t.path())
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .env("MURMUR_EVAL_DIR", t.path().join("eval"))
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

fn files(dir: &Path) -> Vec<String> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            all.extend(files(&p));
        } else {
            all.push(p.display().to_string());
        }
    }
    all.sort();
    all
}

#[test]
fn a_new_capsule_runs_its_dataset_passes_and_nothing_is_overwritten() {
    let t = TempDir::new("new-wasm");
    let made = mur(&t, &["new", "greeter"]);
    assert_eq!(made.status.code(), Some(0), "{}", output_text(&made));
    let dir = t.path().join("greeter");
    let shown = |rel: &str| dir.join(rel).display().to_string();
    assert_eq!(
        files(&dir),
        [
            shown("capsule.wasm"),
            shown("eval/cases.jsonl"),
            shown("eval/tasks/greet.md"),
            shown("murmur.yaml")
        ]
    );
    let stdout = String::from_utf8_lossy(&made.stdout);
    assert!(
        stdout.contains("evaluate: mur eval run greeter/murmur.yaml --dataset greeter/eval/cases.jsonl"),
        "{stdout}"
    );

    let run = mur(
        &t,
        &["run", "--manifest", "greeter/murmur.yaml", "--task", "say hi"],
    );
    assert_eq!(run.status.code(), Some(0), "{}", output_text(&run));
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("status:  ok"),
        "{}",
        output_text(&run)
    );
    assert!(
        !String::from_utf8_lossy(&run.stderr).contains("W-SEC-025"),
        "{}",
        output_text(&run)
    );

    let eval = mur(
        &t,
        &[
            "eval",
            "run",
            "greeter/murmur.yaml",
            "--dataset",
            "greeter/eval/cases.jsonl",
            "--json",
        ],
    );
    assert_eq!(eval.status.code(), Some(0), "{}", output_text(&eval));
    let v: serde_json::Value =
        serde_json::from_slice(&eval.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(&eval)));
    assert_eq!(
        (
            v["variants"][0]["runs"].as_u64(),
            v["variants"][0]["passes"].as_u64()
        ),
        (Some(1), Some(1)),
        "{v}"
    );

    // Again into the same directory (it holds the capsule, and now its lock and workdirs):
    // refused, nothing touched.
    let before = std::fs::read(dir.join("murmur.yaml")).unwrap();
    let again = mur(&t, &["new", "other", "greeter"]);
    assert_eq!(again.status.code(), Some(1), "{}", output_text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).starts_with("error[E-IO-004]: greeter is not empty"),
        "{}",
        output_text(&again)
    );
    assert_eq!(std::fs::read(dir.join("murmur.yaml")).unwrap(), before);
    // An empty directory is taken.
    std::fs::create_dir(t.path().join("empty")).unwrap();
    let into = mur(&t, &["new", "second", "empty"]);
    assert_eq!(into.status.code(), Some(0), "{}", output_text(&into));
    assert!(t.path().join("empty/murmur.yaml").exists());

    let scoped = mur(&t, &["new", "local/x"]);
    assert_eq!(scoped.status.code(), Some(1), "{}", output_text(&scoped));
    assert!(
        String::from_utf8_lossy(&scoped.stderr).starts_with("error[E-BLD-001]"),
        "{}",
        output_text(&scoped)
    );
    assert!(!t.path().join("local").exists());
    let nameless = mur(&t, &["new"]);
    assert_eq!(nameless.status.code(), Some(2), "{}", output_text(&nameless));
    let both = mur(&t, &["new", "x", "--wasm", "--agent"]);
    assert_eq!(both.status.code(), Some(2), "{}", output_text(&both));
}
