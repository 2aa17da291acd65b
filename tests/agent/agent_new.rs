//! `mur new NAME --agent` through the real binaries: the scaffolded agent capsule, its
//! endpoint pointed at the mock provider as a person points it at their server, runs as it
//! is (`mur run`), and its dataset passes under `mur eval run`.

use crate::common;

use common::agent::{host_backs, Drv, Spec, World};
use common::capsule::MUR;
use common::output_text;
use common::provider::{Provider, Step};
use std::process::{Command, Output};

fn mur(w: &World, args: &[&str]) -> Output {
    Command::new(MUR)
        .args(args)
        .current_dir(w.t.path())
        .env("MURMUR_RECORDS_DIR", w.t.path().join("records"))
        .env("MURMUR_EVAL_DIR", w.t.path().join("eval"))
        .env("MURMUR_CACHE_DIR", w.t.path().join("cache"))
        .env("MURMUR_SPEND_DIR", w.t.path().join("spend"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_new_agent_capsule_runs_and_its_dataset_passes() {
    let w = World::new("new-agent");
    let p = Provider::start_responder(|_| Step::text("There are two files here."));
    let made = mur(&w, &["new", "helper", "--agent"]);
    assert_eq!(made.status.code(), Some(0), "{}", output_text(&made));
    let manifest = w.t.path().join("helper/murmur.yaml");
    // Pointed at the mock, as the manifest's comment tells a person to point it at theirs.
    let origin = Spec::new(Drv::OpenAi, &p).origin();
    let yaml = std::fs::read_to_string(&manifest).unwrap();
    assert!(yaml.contains("http://localhost:11434"), "{yaml}");
    std::fs::write(&manifest, yaml.replace("http://localhost:11434", &origin)).unwrap();
    let registry = w.reg.display().to_string();

    let run = mur(
        &w,
        &[
            "run",
            "--manifest",
            "helper/murmur.yaml",
            "--registry-path",
            &registry,
            "--task",
            "How many files?",
        ],
    );
    if !host_backs("scoped") {
        assert_eq!(run.status.code(), Some(1), "{}", output_text(&run));
        assert!(
            String::from_utf8_lossy(&run.stderr).contains("E-CAP-003"),
            "{}",
            output_text(&run)
        );
        return;
    }
    assert_eq!(run.status.code(), Some(0), "{}", output_text(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("status:  ok"), "{}", output_text(&run));
    assert_eq!(p.model_requests().len(), 1, "the loop asked the model");
    // Its door takes a token, so the launch gives no W-SEC-025.
    assert!(stdout.contains("auth: bearer"), "{}", output_text(&run));
    assert!(
        !String::from_utf8_lossy(&run.stderr).contains("W-SEC-025"),
        "{}",
        output_text(&run)
    );

    let eval = mur(
        &w,
        &[
            "eval",
            "run",
            "helper/murmur.yaml",
            "--dataset",
            "helper/eval/cases.jsonl",
            "--registry-path",
            &registry,
            "--json",
        ],
    );
    assert_eq!(eval.status.code(), Some(0), "{}", output_text(&eval));
    let v: serde_json::Value =
        serde_json::from_slice(&eval.stdout).unwrap_or_else(|e| panic!("{e}: {}", output_text(&eval)));
    let variant = &v["variants"][0];
    assert_eq!(
        (variant["runs"].as_u64(), variant["passes"].as_u64()),
        (Some(1), Some(1)),
        "{v}"
    );
}
