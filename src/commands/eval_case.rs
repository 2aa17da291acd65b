//! One case of `mur eval run`: its own workdir (made new under the run's directory, the
//! `start` files copied in and the task written as `task.md`, all through `fsx`), one
//! `mur run` of the capsule there, then the case's `check` through `mur exec`: the capsule's
//! own containment and shell grants, so a check's program must be in its `shell.allow`.
//! Each child has a deadline; one past it is sent SIGTERM, then SIGKILL (its warden takes
//! whatever it started). Whatever goes wrong is the case's failure, with its reason; a run
//! that SIGINT or SIGTERM ended is neither a pass nor a failure but interrupted.

use crate::containment::spawn::{spawn, Spawn};
use crate::containment::spawn::{Proc, Stdio};
use crate::eval_view::dataset::{Case, Check};
use crate::fsx::Dir;
use crate::resources::list::list;
use crate::resources::open::open_file;
use crate::resources::Symlinks;
use crate::trace_view::clean;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The largest task file and the largest file of a `start` copied, bytes.
pub const MAX_TASK: u64 = 1 << 20;
const MAX_START_FILE: u64 = 64 << 20;
/// How long a SIGTERMed child has before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// What a case needs from its run.
pub struct CaseEnv<'a> {
    pub exe: &'a Path,
    pub manifest: &'a Path,
    /// `--registry-path` for `mur run` (None: the default registry).
    pub registry: Option<&'a Path>,
    pub dataset_dir: &'a Dir,
    pub run_dir: &'a Dir,
    /// `MURMUR_RECORDS_DIR` of the sessions (where their traces are read back).
    pub records_root: &'a Path,
    pub session_timeout: Duration,
    /// Set on SIGINT/SIGTERM: a running child is ended, the run is interrupted.
    pub stop: &'a AtomicBool,
}

/// How one run of a case went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseResult {
    pub pass: bool,
    /// SIGINT or SIGTERM ended it before it finished: neither a pass nor a failure.
    pub interrupted: bool,
    /// Why it failed or did not finish (empty when it passed).
    pub reason: String,
    pub session_id: Option<String>,
    pub workdir: String,
    pub wall_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// Why a run did not pass.
enum NotPassed {
    /// It failed, for this reason.
    Failed(String),
    /// SIGINT or SIGTERM ended its session or its check first.
    Interrupted,
}

impl From<String> for NotPassed {
    fn from(why: String) -> NotPassed {
        NotPassed::Failed(why)
    }
}

impl From<&str> for NotPassed {
    fn from(why: &str) -> NotPassed {
        NotPassed::Failed(why.to_string())
    }
}

/// Run `case` once as `name` (its workdir's name under the run directory).
pub fn run_case(env: &CaseEnv<'_>, case: &Case, name: &str) -> CaseResult {
    let started = Instant::now();
    let mut r = CaseResult::default();
    let ran = prepare(env, case, name)
        .map_err(NotPassed::from)
        .and_then(|work| {
            r.workdir = work.display().to_string();
            session(env, &work, &mut r)?;
            match &case.check {
                Some(c) => check(env, case, name, &work, c),
                None => Ok(()),
            }
        });
    match ran {
        Ok(()) => r.pass = true,
        Err(NotPassed::Failed(why)) => r.reason = why,
        Err(NotPassed::Interrupted) => {
            r.interrupted = true;
            r.reason = "interrupted".into();
        }
    }
    r.wall_ms = started.elapsed().as_millis() as u64;
    r
}

/// The case's workdir: made new, `start` copied in, the task as `task.md`.
fn prepare(env: &CaseEnv<'_>, case: &Case, name: &str) -> Result<PathBuf, String> {
    let work = env
        .run_dir
        .mkdir_new(name, 0o700)
        .map_err(|e| format!("cannot make the case's workdir: {e}"))?;
    if let Some(start) = &case.start {
        copy_start(env.dataset_dir, start, &work)?;
    }
    let task = env
        .dataset_dir
        .read(&case.task_path, MAX_TASK)
        .map_err(|e| format!("cannot read task_path {}: {e}", clean(&case.task_path, 200)))?;
    work.replace("task.md", &task)
        .map_err(|e| format!("cannot write the task into the workdir: {e}"))?;
    Ok(env.run_dir.shown().join(name))
}

/// The regular files beneath `start`; a symlink anywhere in it is refused (nothing outside
/// `start` is ever read, and nothing in it is silently left out).
pub fn start_files(dataset: &Dir, start: &str) -> Result<(Dir, Vec<String>), String> {
    let shown = clean(start, 200);
    let root = dataset
        .sub(start)
        .map_err(|e| format!("cannot open start {shown}: {e}"))?;
    let entries = list(root.as_fd(), Symlinks::Fail, MAX_START_FILE)
        .map_err(|r| format!("start {shown}: {}", clean(&r.message(), 300)))?;
    Ok((root, entries.into_iter().map(|e| e.path).collect()))
}

/// Every regular file beneath `start` copied into `work` at the same relative path.
fn copy_start(dataset: &Dir, start: &str, work: &Dir) -> Result<(), String> {
    let (root, paths) = start_files(dataset, start)?;
    for path in paths {
        let shown = clean(&path, 200);
        let mut opened = open_file(root.as_fd(), &path, Symlinks::Fail, MAX_START_FILE)
            .map_err(|r| format!("cannot read start/{shown}: {}", r.message()))?;
        let mut bytes = Vec::new();
        (&mut opened.file)
            .take(MAX_START_FILE)
            .read_to_end(&mut bytes)
            .map_err(|x| format!("cannot read start/{shown}: {x}"))?;
        work.replace(&path, &bytes)
            .map_err(|x| format!("cannot copy start/{shown} in: {x}"))?;
    }
    Ok(())
}

/// `mur run` of the capsule in `work`; its session id and tokens into `r`.
fn session(env: &CaseEnv<'_>, work: &Path, r: &mut CaseResult) -> Result<(), NotPassed> {
    let mut args = vec![
        "run".into(),
        "--json".into(),
        "--manifest".into(),
        shown(env.manifest),
    ];
    if let Some(r) = env.registry {
        args.extend(["--registry-path".into(), shown(r)]);
    }
    args.extend(["--workdir".into(), shown(work)]);
    let mut child = start(env, &args, true).map_err(|e| format!("cannot start mur run: {e}"))?;
    let (line, tail) = match (first_line(&mut child), tail(&mut child)) {
        (Ok(l), Ok(t)) => (l, t),
        _ => {
            end(&mut child);
            return Err("cannot start the threads that read the session's output".into());
        }
    };
    let status = wait(&mut child, env.session_timeout, env.stop);
    r.session_id = line
        .join()
        .ok()
        .flatten()
        .and_then(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
        .and_then(|v| v["session_id"].as_str().map(str::to_string))
        .filter(|s| crate::spawner::is_id(s, "ses_"));
    if let Some(sid) = r.session_id.clone() {
        tokens(env.records_root, &sid, r);
    }
    let last = tail.join().unwrap_or_default();
    match status {
        Waited::Exited(0) => Ok(()),
        Waited::Exited(code) => Err(format!("the session failed (exit {code}){}", said(&last)).into()),
        Waited::Signalled(sig) => {
            Err(format!("the session was killed by signal {sig}{}", said(&last)).into())
        }
        Waited::TimedOut => Err(format!(
            "the session ran past {} s and was ended",
            env.session_timeout.as_secs()
        )
        .into()),
        Waited::Interrupted => Err(NotPassed::Interrupted),
        Waited::Lost(e) => Err(format!("cannot wait for the session: {e}").into()),
    }
}

/// The case's check through `mur exec` in the finished workdir, planted nothing by the
/// agent: its `HOME` is a fresh directory beside the workdir (the agent's `.bashrc`,
/// `.profile` or Python user site under its own `.home` are not the check's), and every
/// file of the case's `start` that the check's command line names is copied in again from
/// the dataset (a check script the agent rewrote runs as the dataset has it).
fn check(env: &CaseEnv<'_>, case: &Case, name: &str, work: &Path, c: &Check) -> Result<(), NotPassed> {
    env.run_dir
        .mkdir_new(&format!("{name}.check-home"), 0o700)
        .map_err(|e| format!("cannot make the check's home: {e}"))?;
    if let Some(start) = &case.start {
        recopy_named(env, start, name, &c.argv)?;
    }
    let mut args = vec![
        "exec".into(),
        "--manifest".into(),
        shown(env.manifest),
        "--workdir".into(),
        shown(work),
        "--home".into(),
        shown(&env.run_dir.shown().join(format!("{name}.check-home"))),
        "--".into(),
    ];
    args.extend(c.argv.iter().cloned());
    let mut child = start(env, &args, false).map_err(|e| format!("cannot start the check: {e}"))?;
    let Ok(tail) = tail(&mut child) else {
        end(&mut child);
        return Err("cannot start the thread that reads the check's output".into());
    };
    let status = wait(&mut child, Duration::from_secs(c.timeout_secs), env.stop);
    let last = tail.join().unwrap_or_default();
    match status {
        Waited::Exited(0) => Ok(()),
        Waited::Exited(code) => Err(format!(
            "the check `{}` exited {code}{}",
            clean(&c.argv.join(" "), 200),
            said(&last)
        )
        .into()),
        Waited::Signalled(sig) => Err(format!("the check was killed by signal {sig}").into()),
        Waited::TimedOut => Err(format!("the check ran past {} s and was ended", c.timeout_secs).into()),
        Waited::Interrupted => Err(NotPassed::Interrupted),
        Waited::Lost(e) => Err(format!("cannot wait for the check: {e}").into()),
    }
}

/// Every file of `start` (in the dataset) that an argument of `argv` names, copied over
/// the case's workdir `name` from the dataset, after the agent has ended.
fn recopy_named(env: &CaseEnv<'_>, start: &str, name: &str, argv: &[String]) -> Result<(), String> {
    let (root, files) = start_files(env.dataset_dir, start)?;
    let named: Vec<&String> = files
        .iter()
        .filter(|f| {
            argv.iter()
                .skip(1)
                .any(|a| a.trim_start_matches("./") == f.as_str())
        })
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    let work = env
        .run_dir
        .sub(name)
        .map_err(|e| format!("cannot open the case's workdir: {e}"))?;
    for path in named {
        let shown_path = clean(path, 200);
        let mut opened = open_file(root.as_fd(), path, Symlinks::Fail, MAX_START_FILE)
            .map_err(|r| format!("cannot read start/{shown_path}: {}", r.message()))?;
        let mut bytes = Vec::new();
        (&mut opened.file)
            .take(MAX_START_FILE)
            .read_to_end(&mut bytes)
            .map_err(|x| format!("cannot read start/{shown_path}: {x}"))?;
        work.replace(path, &bytes)
            .map_err(|x| format!("cannot copy the check's start/{shown_path} in again: {x}"))?;
    }
    Ok(())
}

fn said(last: &str) -> String {
    if last.is_empty() {
        String::new()
    } else {
        format!(": {last}")
    }
}

/// The session's input and output tokens, from its trace.
fn tokens(records_root: &Path, sid: &str, r: &mut CaseResult) {
    let path = records_root.join(sid).join("trace.jsonl");
    let Ok(f) = std::fs::File::open(path) else { return };
    let mut bytes = Vec::new();
    if f.take(crate::trace_view::MAX_FILE)
        .read_to_end(&mut bytes)
        .is_ok()
    {
        let (_, s) = crate::trace_view::render_all(&bytes);
        r.input_tokens = s.input_tokens;
        r.output_tokens = s.output_tokens;
    }
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

/// `mur ARGS` through the one spawn function, as a runtime of its own: the operator's
/// environment (and the sessions' records root), its own session (the terminal's signals do
/// not reach it: only this run ends it), SIGTERM should the thread that started it die, so
/// no case outlives a `mur eval run` that was killed.
fn start(env: &CaseEnv<'_>, args: &[String], stdout: bool) -> Result<Proc, String> {
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k != "MURMUR_RECORDS_DIR")
        .collect();
    vars.push(("MURMUR_RECORDS_DIR".into(), shown(env.records_root)));
    let mut s = Spawn::own_helper(env.exe, args);
    s.runtime = true;
    s.env = &vars;
    s.stdout = if stdout { Stdio::piped() } else { Stdio::null() };
    s.stderr = Stdio::piped();
    spawn(s).map_err(|d| d.message)
}

/// The child's first stdout line (its `--json` announcement), read on a thread; the rest
/// is drained.
fn first_line(child: &mut Proc) -> std::io::Result<std::thread::JoinHandle<Option<String>>> {
    let out = child.stdout.take();
    std::thread::Builder::new().spawn(move || {
        let mut r = BufReader::new(out?);
        let mut line = Vec::new();
        (&mut r).take(64 * 1024).read_until(b'\n', &mut line).ok()?;
        let _ = std::io::copy(&mut r, &mut std::io::sink());
        Some(String::from_utf8_lossy(&line).trim().to_string())
    })
}

/// The last error line of the child's stderr (cleaned, bounded), read on a thread.
fn tail(child: &mut Proc) -> std::io::Result<std::thread::JoinHandle<String>> {
    let err = child.stderr.take();
    std::thread::Builder::new().spawn(move || {
        let Some(err) = err else { return String::new() };
        let mut last = String::new();
        let mut r = BufReader::new(err);
        let mut line = Vec::new();
        loop {
            line.clear();
            match (&mut r).take(64 * 1024).read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let text = String::from_utf8_lossy(&line);
                    if text.starts_with("error[") || last.is_empty() {
                        last = crate::trace_view::clean(text.trim(), 300);
                    }
                }
            }
        }
        last
    })
}

enum Waited {
    Exited(i32),
    Signalled(i32),
    TimedOut,
    Interrupted,
    Lost(std::io::Error),
}

/// Wait for `child` within `limit`; past it, or on `stop`, SIGTERM then SIGKILL.
fn wait(child: &mut Proc, limit: Duration, stop: &AtomicBool) -> Waited {
    use std::os::unix::process::ExitStatusExt;
    let until = Instant::now() + limit;
    loop {
        if stop.load(Ordering::SeqCst) {
            end(child);
            return Waited::Interrupted;
        }
        match child.try_wait() {
            Ok(Some(st)) => {
                return match (st.code(), st.signal()) {
                    (Some(c), _) => Waited::Exited(c),
                    (None, Some(s)) => Waited::Signalled(s),
                    _ => Waited::Exited(-1),
                }
            }
            Ok(None) => {}
            Err(e) => return Waited::Lost(e),
        }
        if Instant::now() >= until {
            end(child);
            return Waited::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM, then SIGKILL after [`GRACE`]; reaped either way.
fn end(child: &mut Proc) {
    if let Some(pid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
    let until = Instant::now() + GRACE;
    while Instant::now() < until {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}
