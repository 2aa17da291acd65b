//! The `mur run` helpers: a capsule directory from a fixture, one launch with private cache
//! and records directories, and the session's trace.

use super::{Running, TempDir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub const MUR: &str = env!("CARGO_BIN_EXE_mur");

pub fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The hello example (its manifest and component) copied into `<t>/hello`.
pub fn hello(t: &TempDir) -> PathBuf {
    let dir = t.path().join("hello");
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["murmur.yaml", "capsule.wasm"] {
        std::fs::copy(repo("examples/hello").join(f), dir.join(f)).unwrap();
    }
    dir
}

/// A capsule directory holding `wasm` as capsule.wasm and a manifest with `extra` YAML.
pub fn capsule(t: &TempDir, wasm: &str, extra: &str) -> PathBuf {
    let dir = t.path().join("capsule");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo(wasm), dir.join("capsule.wasm")).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        format!("name: probe\nversion: 0.2.0\n{extra}"),
    )
    .unwrap();
    dir
}

pub fn mur(t: &TempDir, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(MUR)
        .arg("run")
        .args(args)
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .env("MURMUR_SPEND_DIR", t.path().join("spend"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `mur ARGS` over the records root `records`, stdin closed.
pub fn mur_over(records: &Path, args: &[&str]) -> Output {
    Command::new(MUR)
        .args(args)
        .env("MURMUR_RECORDS_DIR", records)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `mur ps --json` over `records`: the sessions listed.
pub fn ps_rows(records: &Path) -> Vec<serde_json::Value> {
    let out = mur_over(records, &["ps", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

pub fn manifest_arg(dir: &Path) -> String {
    dir.join("murmur.yaml").display().to_string()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The session id printed in human mode.
pub fn session_of(out: &Output) -> String {
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("session: "))
        .expect("a session line");
    line["session: ".len()..].to_string()
}

/// A session's records: `$MURMUR_RECORDS_DIR/<session id>`, outside every workdir.
pub fn records(t: &TempDir, sid: &str) -> PathBuf {
    t.path().join("records").join(sid)
}

pub fn trace(t: &TempDir, sid: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(records(t, sid).join("trace.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub fn event<'a>(events: &'a [serde_json::Value], kind: &str) -> &'a serde_json::Value {
    events
        .iter()
        .find(|e| e["event_type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {events:?}"))
}

/// `mur run --json` of the capsule in `dir`, left running (a `queue`/`sleep` lifecycle keeps
/// its door open until SIGTERM), and its announcement line.
pub fn serve(t: &TempDir, dir: &Path) -> (Running, serde_json::Value) {
    let mut cmd = Command::new(MUR);
    cmd.args(["run", "--json", "--manifest", &manifest_arg(dir)])
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut running = Running::spawn(cmd);
    let line = serde_json::from_str(&running.line()).unwrap();
    (running, line)
}
