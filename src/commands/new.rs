//! `mur new NAME [--wasm|--agent] [DIR]`: a capsule directory that runs as it is, with a
//! small evaluation dataset (`eval/cases.jsonl`) that passes under `mur eval run`. A WASM
//! capsule is the hello component under the new name; an agent capsule asks a local
//! OpenAI-compatible server (Ollama's address) through the shipped OpenAI driver. Nothing
//! is ever overwritten: a directory that holds anything is refused, and every file is
//! created exclusively.

use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::registry::ArtifactName;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Which kind of capsule to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// A WASM component (the hello capsule's): runs with nothing else installed.
    #[default]
    Wasm,
    /// An agent: a model, a driver, shell tools.
    Agent,
}

#[derive(Debug, Clone, Default)]
pub struct NewOptions {
    pub name: String,
    pub kind: Kind,
    /// Where to make it (default `./NAME`).
    pub dir: Option<PathBuf>,
}

/// The hello component (`examples/hello`): reads `task.md`, writes `out/result.txt`.
const HELLO_WASM: &[u8] = include_bytes!("../../examples/hello/capsule.wasm");

/// The one door credential every scaffold declares, so its door is never open to every
/// local user (W-SEC-025): `mur token --session ID` prints its token.
const DOOR_AUTH: &str =
    "    authentication:                  # who may call the door: mur token --session ID prints the token
      scheme: bearer
      credentials:
        - {name: operator, scopes: ['*']}
";

/// Step: a bare capsule name (E-BLD-001 otherwise: the name `mur build` will pack).
fn check_name(name: &str) -> Result<(), Diagnostic> {
    let parsed = ArtifactName::parse(name)?;
    if parsed.scope.is_some() {
        return Err(Diagnostic::new(
            code::BLD_NAME,
            "NAME",
            format!("'{name}': a capsule's manifest declares the bare name"),
        )
        .with_hint("publish with --scope to file it under a scope"));
    }
    Ok(())
}

fn wasm_manifest(name: &str) -> String {
    format!(
        "# A WASM capsule made by `mur new`. capsule.wasm is the hello component: it reads task.md
# and writes out/result.txt. Replace it with a component of the murmur:capsule world
# (see wit/ in the murmur source) and keep what it needs granted below.
name: {name}
version: 0.1.0
description: \"{name}: reads task.md and writes out/result.txt\"
capabilities:
  network:
{DOOR_AUTH}  shell:
    allow: [grep]                    # for eval/cases.jsonl's check (run by mur exec), not the guest
  limits:
    deadline_seconds: 10
"
    )
}

fn agent_manifest(name: &str) -> String {
    format!(
        "# An agent capsule made by `mur new`: its loop asks the model at inference.endpoint (a
# local Ollama here; any OpenAI-compatible server works: point endpoint, model and
# network.allow at yours, and add api_key: ${{YOUR_KEY_VARIABLE}} for a hosted one) and runs
# the shell.allow binaries the model asks for, contained. The driver is installed once with
# `mur publish murmur-driver-openai-1.0.0.mur.zip` (artifacts/ in the murmur source).
name: {name}
version: 0.1.0
description: \"{name}: answers tasks about the files in its workdir\"
artifacts:
  - name: murmur-driver-openai
    version: \"1.0.0\"
    runtime: driver
capabilities:
  network:
    allow:
      - http://localhost:11434
{DOOR_AUTH}  shell:
    allow: [cat, grep, ls, test]
  containment: scoped                # mur doctor says whether this host backs it
inference:
  endpoint: http://localhost:11434/v1
  model: llama3.1
  driver:
    artifact: murmur-driver-openai
  max_turns: 8
"
    )
}

/// Step: every file of the capsule, relative to its directory.
fn files(name: &str, kind: Kind) -> Vec<(&'static str, Vec<u8>)> {
    match kind {
        Kind::Wasm => vec![
            ("murmur.yaml", wasm_manifest(name).into_bytes()),
            ("capsule.wasm", HELLO_WASM.to_vec()),
            ("eval/tasks/greet.md", b"say hi\n".to_vec()),
            (
                "eval/cases.jsonl",
                format!(
                    "{{\"case_id\":\"greet\",\"task_path\":\"tasks/greet.md\",\"check\":\"grep -q \\\"hello from {name}: say hi\\\" out/result.txt\"}}\n"
                )
                .into_bytes(),
            ),
        ],
        Kind::Agent => vec![
            ("murmur.yaml", agent_manifest(name).into_bytes()),
            (
                "eval/tasks/count.md",
                b"How many files are in your working directory? Use ls, then answer in one sentence.\n"
                    .to_vec(),
            ),
            (
                "eval/cases.jsonl",
                b"{\"case_id\":\"answers\",\"task_path\":\"tasks/count.md\",\"check\":\"test -s out/result.txt\"}\n"
                    .to_vec(),
            ),
        ],
    }
}

/// Step: the directory, made when missing; one that holds anything is refused (E-IO-004).
fn empty_dir(dir: &Path) -> Result<Dir, Diagnostic> {
    let io = |e: &dyn std::fmt::Display| {
        Diagnostic::new(
            code::IO_READ,
            dir.display().to_string(),
            format!("cannot make {}: {e}", dir.display()),
        )
    };
    std::fs::create_dir_all(dir).map_err(|e| io(&e))?;
    let mut entries = std::fs::read_dir(dir).map_err(|e| io(&e))?;
    if entries.next().is_some() {
        return Err(Diagnostic::new(
            code::IO_NOT_EMPTY,
            "DIR",
            format!(
                "{} is not empty: mur new writes only into a new or empty directory",
                dir.display()
            ),
        )
        .with_hint("name another directory: mur new NAME [--wasm|--agent] DIR"));
    }
    Dir::open(dir).map_err(|e| io(&e))
}

/// Step: each file created new (never over anything), through the held directory.
fn write_all(dir: &Dir, files: &[(&str, Vec<u8>)]) -> Result<(), Diagnostic> {
    for (rel, bytes) in files {
        dir.create_new(rel)
            .map_err(|e| e.to_string())
            .and_then(|mut f| f.write_all(bytes).map_err(|e| e.to_string()))
            .map_err(|e| {
                Diagnostic::new(
                    code::IO_READ,
                    dir.shown().join(rel).display().to_string(),
                    format!("cannot write {}: {e}", dir.shown().join(rel).display()),
                )
            })?;
    }
    Ok(())
}

/// Step: what was made, and the two commands that run and evaluate it.
fn render(name: &str, kind: Kind, dir: &Path, files: &[(&str, Vec<u8>)]) -> String {
    let shown = dir.display();
    let what = match kind {
        Kind::Wasm => "a WASM capsule",
        Kind::Agent => "an agent capsule",
    };
    let mut out = format!("created {name} ({what}) in {shown}:\n");
    for (rel, _) in files {
        out.push_str(&format!("  {}\n", dir.join(rel).display()));
    }
    if kind == Kind::Agent {
        out.push_str(
            "needs:    the OpenAI driver in the registry (mur publish murmur-driver-openai-1.0.0.mur.zip) and a model server at inference.endpoint (ollama serve; ollama pull llama3.1)\n",
        );
    }
    let task = match kind {
        Kind::Wasm => "say hi",
        Kind::Agent => "How many files are in your working directory? Use ls.",
    };
    out.push_str(&format!(
        "run:      mur run --manifest {shown}/murmur.yaml --task \"{task}\"\nevaluate: mur eval run {shown}/murmur.yaml --dataset {shown}/eval/cases.jsonl\n"
    ));
    out
}

/// Make the capsule directory; returns what to print.
pub fn new(o: &NewOptions) -> Result<String, Diagnostic> {
    check_name(&o.name)?;
    let dir = o.dir.clone().unwrap_or_else(|| PathBuf::from(&o.name));
    let files = files(&o.name, o.kind);
    let held = empty_dir(&dir)?;
    write_all(&held, &files)?;
    Ok(render(&o.name, o.kind, &dir, &files))
}
