//! One delegation, from the model's three strings to a child holding its task: ask the
//! roost (`POST /spawn` with this session's credential), make the child's directory
//! through the symlink-safe I/O, start `mur run` for the approved artifact from a cleared
//! environment, hand it the approval on standard input (never argv or environment), read
//! its `--json` line within the launch bound, deliver the task over A2A within the
//! delivery bound, and put the child under watch. A failure after the child started kills
//! and reaps it.

use super::completion::Completion;
use super::roost_client::{Credential, Roost, RoostError};
use super::send::{self, Failure};
use super::watch::{StderrTail, Watch, Watched, STDERR_LINES};
use crate::containment::class::Class;
use crate::containment::spawn::{self, Rlimits, Spawn};
use crate::containment::spawn::{Proc, Stdio};
use crate::fsx::Dir;
use crate::manifest::Resolve;
use crate::spawner::{Spawner, Trust};
use crate::token::Kind;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// From starting the child to its first `--json` line.
pub const LAUNCH_BOUND: Duration = Duration::from_secs(180);
/// Retrying the task delivery while the child's listener comes up.
pub const DELIVERY_BOUND: Duration = Duration::from_secs(30);
/// Where children's directories go, under the accessible workdir.
pub const CHILDREN: &str = ".murmur/children";
/// How often a launch in progress looks at the session's stop flag.
const STOP_TICK: Duration = Duration::from_millis(100);
/// The longest `--json` line read from a child.
const MAX_LINE: u64 = 64 * 1024;
/// The longest version asked for (a registry version is far shorter).
const MAX_VERSION: usize = 128;

/// What the launcher knows of its own session.
pub struct Parent {
    pub session_id: String,
    /// Set by the session's signal thread: a launch in progress gives up within a tick.
    pub stop: Arc<std::sync::atomic::AtomicI32>,
    /// This session's door, `http://127.0.0.1:PORT`.
    pub door_url: String,
    /// The accessible workdir, held, and its absolute path.
    pub work: Dir,
    pub work_path: PathBuf,
    /// The registry the parent resolves from (the child resolves from the same one).
    pub registry: PathBuf,
    /// The parent's lock, which pins each child capsule (None: the parent runs from the
    /// registry and has no lock).
    pub child_pins: Option<Arc<crate::runtime::pinning::ChildPins>>,
    /// `capabilities.env.allow` and `capabilities.spawn.allow` of the parent's manifest.
    pub env_allow: Vec<String>,
    pub spawn_allow: Vec<String>,
    /// `capabilities.spawn.max_delegations` (or its default): the delegations this session
    /// may start over its life.
    pub max_delegations: u64,
    /// `lifecycle.delegation_deadline_secs`, or `MURMUR_DELEGATION_TIMEOUT_SECS`.
    pub deadline: Duration,
    /// Where sessions' records go (the child's are `<root>/<its session id>`).
    pub records_root: PathBuf,
    /// `MURMUR_SPEND_CHAIN` for a child: every session ceiling above it, this one's last.
    /// The child charges each of them in the shared ledger, so it spends at most what is
    /// left of them (`crate::runtime::agent::spend`).
    pub spend_chain: String,
}

/// The session's delegations.
pub struct Launcher {
    pub parent: Parent,
    roost: Roost,
    credential: Arc<Credential>,
    exe: PathBuf,
    pub watch: Arc<Watch>,
    /// Delegations asked for so far (each counts, started or not).
    asked: std::sync::atomic::AtomicU64,
    /// Set once a delegation past `max_delegations` was asked for: the session ends after
    /// the task that asked.
    past_ceiling: std::sync::atomic::AtomicBool,
}

/// One call of `delegate-task`.
pub struct Ask<'a> {
    pub capsule: &'a str,
    pub version: &'a str,
    pub task: &'a str,
    /// The task the call was made from: its context and trust class.
    pub context_id: &'a str,
    pub trust: Trust,
}

/// How far a call got.
pub enum Outcome {
    /// The child runs and holds its task: the tool's JSON result.
    Started(Value),
    /// The roost said no: its sentence, verbatim.
    Refused(String),
    /// Anything else: the tool's JSON result (`status: failed`, `output`).
    Failed(Value),
}

/// The names a child never takes from `env.allow`: the runtime sets them.
fn runtime_owned(name: &str) -> bool {
    matches!(name, "PATH" | "HOME") || name.starts_with("MURMUR_")
}

/// The bare part of `scope/name`.
fn bare(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

impl Launcher {
    pub fn new(parent: Parent, roost: Roost, credential: Arc<Credential>, watch: Arc<Watch>) -> Launcher {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
        Launcher {
            parent,
            roost,
            credential,
            exe,
            watch,
            asked: Default::default(),
            past_ceiling: Default::default(),
        }
    }

    /// Delegate one task. The `delegation` trace event is written here.
    pub fn delegate(&self, ask: &Ask<'_>) -> Outcome {
        let id = match crate::token::random_hex16() {
            Ok(h) => format!("dlg_{h}"),
            Err(e) => return self.failed("", ask, "", format!("no randomness for a delegation id: {e}")),
        };
        // Before any child can exist: its completion, however soon, is one the door expects.
        self.watch.expect(&id);
        if let Some(sentence) = self.past_ceiling() {
            self.watch.trace(json!({
                "delegation_id": id, "capsule": ask.capsule, "version": ask.version,
                "status": "refused", "output": sentence,
            }));
            return Outcome::Refused(sentence);
        }
        let handle = match self.admissible(ask, &id) {
            Ok(h) => h,
            Err(why) => return self.failed(&id, ask, "", why),
        };
        // A capsule that can never take the task is refused before the roost holds a slot.
        if let Some(why) = self.takes_no_task(ask) {
            let sentence = format!(
                "capsule {} {why}",
                crate::agent::sanitize::one_line(ask.capsule, 100)
            );
            self.watch.trace(json!({
                "delegation_id": id, "capsule": ask.capsule, "version": ask.version,
                "status": "refused", "output": sentence,
            }));
            return Outcome::Refused(sentence);
        }
        let approval = match self.roost.spawn(&self.credential, ask.capsule, ask.version) {
            Ok(a) => a,
            Err(RoostError::Refused { sentence, .. }) => {
                self.watch.trace(json!({
                    "delegation_id": id, "capsule": ask.capsule, "version": ask.version,
                    "status": "refused", "output": sentence,
                }));
                return Outcome::Refused(sentence);
            }
            Err(e) => return self.failed(&id, ask, "", e.to_string()),
        };
        let mut env = match self.child_env(ask, &handle, &approval.sha256) {
            Ok(env) => env,
            Err(why) => return self.failed(&id, ask, "", why),
        };
        let (made, rel) = match self.child_dir(ask) {
            Ok(v) => v,
            Err(why) => return self.failed(&id, ask, "", why),
        };
        let dir = self.parent.work_path.join(&rel);
        // The child works in the directory made here or in none: it checks the one it opens.
        match workdir_identity(&made, &rel) {
            Ok(var) => env.push(var),
            Err(why) => return self.failed(&id, ask, "", why),
        }
        let mut child = match self.spawn(ask, &dir, &env) {
            Ok(c) => c,
            Err(why) => return self.failed(&id, ask, "", why),
        };
        // Should this process die, the session's warden kills the child (and, through the
        // child's own warden, everything the child started).
        if let Err(why) = crate::containment::warden::get().and_then(|w| w.child(child.id())) {
            let why = format!("the child could not be put under the session's warden: {why}");
            return self.abandon(child, &id, ask, "", why, &StderrTail::default());
        }
        // The approval: one line on stdin, then closed. Never argv, never environment.
        let wrote = child
            .stdin
            .take()
            .map(|mut s| s.write_all(format!("{}\n", approval.token).as_bytes()));
        drop(approval);
        let stderr = tail_stderr(&mut child);
        let ready = match wrote {
            Some(Ok(())) => self.ready(&mut child, &made, &rel),
            _ => Err("cannot write the approval to the child's standard input".to_string()),
        };
        // The child-watch bound counts from here: the launch bound is not spent out of it.
        let ready_at = Instant::now();
        let ready_ms = crate::clock::now_ms();
        let (session_id, url, token) = match ready {
            Ok(r) => (r.session_id, r.url, r.token),
            Err(why) => return self.abandon(child, &id, ask, "", why, &stderr),
        };
        if let Err(why) = deliver(&url, &id, ask.task, token.as_deref(), &self.parent.stop) {
            return self.abandon(child, &id, ask, &session_id, why, &stderr);
        }
        let completion = launcher_completion(&id, ask, &session_id, &dir);
        let records = self.parent.records_root.join(&session_id);
        // And should this process die, the warden has the delegation recorded `terminated`.
        let last = completion.orphan_args(&records, ready_ms);
        if let Err(why) = crate::containment::warden::get().and_then(|w| w.last_words(&id, &last)) {
            let why = format!("the delegation could not be handed to the session's warden: {why}");
            return self.abandon(child, &id, ask, &session_id, why, &stderr);
        }
        self.watch.trace(json!({
            "delegation_id": id, "capsule": ask.capsule, "version": ask.version,
            "status": "started", "child_session_id": session_id, "child_workdir": rel,
            "context_id": ask.context_id,
        }));
        self.watch.start(Watched {
            child,
            completion,
            records,
            // The launcher's own reports go where the child's would: the same handle.
            own_door: handle,
            started: ready_at,
            deadline: self.parent.deadline,
            stderr,
        });
        Outcome::Started(json!({
            "delegation_id": id, "session_id": session_id, "capsule": ask.capsule,
            "version": ask.version, "status": "started", "child_workdir": rel,
        }))
    }

    /// What no child could take is refused before the roost reserves a slot for it: a
    /// capsule not in `spawn.allow`, a version no manifest could have, a context the
    /// child's own parser would refuse, a task larger than a door takes. The handle the
    /// child will be given.
    fn admissible(&self, ask: &Ask<'_>, id: &str) -> Result<Spawner, String> {
        if !self.parent.spawn_allow.iter().any(|n| n == ask.capsule) {
            let shown = crate::agent::sanitize::one_line(ask.capsule, 100);
            return Err(format!("'{shown}' is not in capabilities.spawn.allow"));
        }
        if ask.version.len() > MAX_VERSION || ask.version.chars().any(char::is_control) {
            return Err(format!(
                "the version is longer than {MAX_VERSION} bytes or holds a control character"
            ));
        }
        // A version the lock does not pin is refused before the roost holds a slot for it.
        if let Some(pins) = &self.parent.child_pins {
            pins.precheck(ask.capsule, ask.version)?;
        }
        // The handle must be one the child can read (a context id an A2A client chose may
        // hold what `MURMUR_SPAWNER` refuses): checked with the child's own parser.
        let handle = Spawner {
            url: self.parent.door_url.clone(),
            session_id: self.parent.session_id.clone(),
            context_id: ask.context_id.to_string(),
            trust: ask.trust,
            delegation_id: id.to_string(),
        };
        if let Err(d) = Spawner::from_env(Some(&handle.to_env())) {
            return Err(format!(
                "this task's context cannot be handed to a child: {}",
                d.message
            ));
        }
        if ask.task.len() > crate::a2a::rpc::MAX_TEXT {
            return Err(format!(
                "the task is {} bytes, more than the {} a capsule's door takes in one message: put it in a file under the child's directory and tell the child where",
                ask.task.len(),
                crate::a2a::rpc::MAX_TEXT
            ));
        }
        Ok(handle)
    }

    /// The child's own directory, `.murmur/children/<name>-<hex>`, made new beneath the
    /// held workdir; the directory held, and its path relative to the workdir.
    fn child_dir(&self, ask: &Ask<'_>) -> Result<(crate::fsx::Dir, String), String> {
        let hex = crate::token::random_hex16()
            .map(|h| h[..16].to_string())
            .map_err(|e| format!("no randomness: {e}"))?;
        let name = format!("{}-{hex}", bare(ask.capsule));
        let rel = format!("{CHILDREN}/{name}");
        let made = self
            .parent
            .work
            .mkdirs(CHILDREN, 0o700)
            .and_then(|d| d.mkdir_new(&name, 0o700))
            .map_err(|e| format!("cannot create {rel}: {e}"))?;
        Ok((made, rel))
    }

    /// The child's first line, which must describe this launch: its own pid, a session
    /// that is not this one, and the directory made above. The path was handed over by
    /// name, and that name sits in a tree this session's own tools (and any ancestor's) may
    /// write: one swapped for a symlink before the child opened it would give the child a
    /// workdir outside this one. Such a child is stopped before it holds a task.
    fn ready(&self, child: &mut Proc, made: &crate::fsx::Dir, rel: &str) -> Result<Ready, String> {
        let r = first_line(child, LAUNCH_BOUND, &self.parent.stop)?;
        if r.pid != child.id() || r.session_id == self.parent.session_id {
            return Err("the child's first line does not describe the child that was started".into());
        }
        if !same_dir(made, &r.workdir) {
            return Err(format!(
                "the child opened a workdir other than {rel} (was the directory replaced while it started?)"
            ));
        }
        Ok(r)
    }

    fn failed(&self, id: &str, ask: &Ask<'_>, session_id: &str, why: String) -> Outcome {
        self.watch.trace(json!({
            "delegation_id": id, "capsule": ask.capsule, "version": ask.version,
            "status": "failed", "child_session_id": session_id, "output": why,
        }));
        Outcome::Failed(json!({
            "delegation_id": id, "session_id": session_id, "capsule": ask.capsule,
            "version": ask.version, "status": "failed", "output": why,
        }))
    }

    /// A child that started but will not be used: killed with its group, reaped.
    fn abandon(
        &self,
        mut child: Proc,
        id: &str,
        ask: &Ask<'_>,
        sid: &str,
        why: String,
        err: &StderrTail,
    ) -> Outcome {
        if let Some(p) = rustix::process::Pid::from_raw(child.id() as i32) {
            let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        if !sid.is_empty() {
            drop(crate::containment::cgroup::Cgroup::adopt(sid));
        }
        // The child's last words often say why (E-RUN-019 from its registration, say).
        let said = err
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect::<Vec<_>>();
        let why = match said.iter().rev().find(|l| l.starts_with("error[")) {
            Some(l) => format!("{why}: {l}"),
            None => why,
        };
        self.failed(id, ask, sid, why)
    }

    /// The child's whole environment. The artifact the child will run (from this session's
    /// registry) must be the one the roost judged: `approved` is its sha256.
    /// Count one delegation asked for; past `max_delegations`, the refusal's sentence (and
    /// the session is marked to end after this task).
    fn past_ceiling(&self) -> Option<String> {
        use std::sync::atomic::Ordering;
        let n = self.asked.fetch_add(1, Ordering::SeqCst).saturating_add(1);
        let max = self.parent.max_delegations;
        if n <= max {
            return None;
        }
        self.past_ceiling.store(true, Ordering::SeqCst);
        Some(format!(
            "refused: this session has started its {max} delegations (capabilities.spawn.max_delegations); it ends after this task"
        ))
    }

    /// Whether a delegation past the session's ceiling was asked for.
    pub fn ceiling_reached(&self) -> bool {
        self.past_ceiling.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Why the capsule asked for takes no task, where the registry holds it and it says so
    /// (a capsule the registry does not hold is left to the roost's own refusal).
    fn takes_no_task(&self, ask: &Ask<'_>) -> Option<&'static str> {
        let resolved =
            crate::registry::resolve(&self.parent.registry, ask.capsule, ask.version, Resolve::Nothing)
                .ok()?;
        resolved.loaded.manifest.takes_no_task()
    }

    fn child_env(
        &self,
        ask: &Ask<'_>,
        handle: &Spawner,
        approved: &str,
    ) -> Result<Vec<(String, String)>, String> {
        let lookup = |k: &str| std::env::var(k).ok();
        let resolved = crate::registry::resolve(
            &self.parent.registry,
            ask.capsule,
            ask.version,
            Resolve::AllButApiKey(&lookup),
        )
        .map_err(|d| d.message)?;
        if approved.is_empty() || !resolved.sha256.eq_ignore_ascii_case(approved) {
            return Err(format!(
                "{}@{} in the registry at {} is not the artifact mur-roost approved (approved sha256 {}, found {}): the child would run what the referee never judged",
                ask.capsule,
                ask.version,
                self.parent.registry.display(),
                if approved.is_empty() { "none given" } else { approved },
                resolved.sha256
            ));
        }
        // The parent's lock pins the child as it pins the parent's own artifacts.
        if let Some(pins) = &self.parent.child_pins {
            if let Some(warning) = pins.admit(ask.capsule, ask.version, &resolved.sha256)? {
                eprintln!("{warning}");
            }
        }
        let theirs = &resolved.loaded.manifest.capabilities.env_allow;
        let mut env: Vec<(String, String)> = self
            .parent
            .env_allow
            .iter()
            .filter(|n| theirs.contains(n) && !runtime_owned(n))
            .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
            .collect();
        for k in [
            "PATH",
            "HOME",
            "MURMUR_RECORDS_DIR",
            "MURMUR_CACHE_DIR",
            "MURMUR_SPEND_DIR",
            crate::containment::cgroup::PARENT_VAR,
        ] {
            if let Ok(v) = std::env::var(k) {
                env.push((k.to_string(), v));
            }
        }
        env.push(("MURMUR_ROOST_URL".into(), self.roost.url().to_string()));
        env.push(("MURMUR_SPAWNER".into(), handle.to_env()));
        env.push((crate::spend::CHAIN_VAR.into(), self.parent.spend_chain.clone()));
        Ok(env)
    }

    fn spawn(&self, ask: &Ask<'_>, dir: &std::path::Path, env: &[(String, String)]) -> Result<Proc, String> {
        let args: Vec<String> = [
            "run",
            "--capsule",
            ask.capsule,
            "--capsule-version",
            ask.version,
            "--registry-path",
            &self.parent.registry.display().to_string(),
            "--workdir",
            &dir.display().to_string(),
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        spawn::spawn(Spawn {
            class: Class::Advisory,
            landlock_abi: 0,
            program: &self.exe,
            args: &args,
            allowed_binaries: &[],
            read_dirs: &[],
            read_unlisted: &[],
            workdir: dir,
            workdir_held: None,
            workdir_exec: false,
            unix_sockets: false,
            env,
            cgroup: None,
            rlimits: Rlimits::default(),
            runtime: true,
            net: None,
            netns: true,
            in_fork: None,
            stdin: Stdio::piped(),
            stdout: Stdio::piped(),
            stderr: Stdio::piped(),
        })
        .map_err(|d| d.message)
    }
}

/// The most bytes of one stderr line held; the rest of the line is read and dropped.
const MAX_STDERR_LINE: usize = 4096;

/// Read `r` to its end, handing each line (at most `MAX_STDERR_LINE` bytes of it, lossily
/// decoded) to `each`. A line that never ends costs no memory beyond the cap, and bytes
/// that are not UTF-8 never stop the reading: a reader that stopped would close the pipe
/// and turn every later write of the child to its stderr into EPIPE.
fn drain_lines(r: impl Read, mut each: impl FnMut(&str)) {
    let mut r = BufReader::new(r);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let (done, used) = match r.fill_buf() {
            Ok([]) => break,
            Ok(buf) => match buf.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    let room = MAX_STDERR_LINE.saturating_sub(line.len());
                    line.extend_from_slice(&buf[..i.min(room)]);
                    (true, i + 1)
                }
                None => {
                    let room = MAX_STDERR_LINE.saturating_sub(line.len());
                    line.extend_from_slice(&buf[..buf.len().min(room)]);
                    (false, buf.len())
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        r.consume(used);
        if done {
            each(&String::from_utf8_lossy(&line));
            line.clear();
        }
    }
    if !line.is_empty() {
        each(&String::from_utf8_lossy(&line));
    }
}

/// Keep the last lines the child writes to stderr (each cut to 500 bytes).
fn tail_stderr(child: &mut Proc) -> StderrTail {
    let tail: StderrTail = Arc::default();
    if let Some(err) = child.stderr.take() {
        let t = tail.clone();
        std::thread::spawn(move || {
            drain_lines(err, |line| {
                let mut q = t.lock().unwrap_or_else(|p| p.into_inner());
                if q.len() == STDERR_LINES {
                    q.pop_front();
                }
                q.push_back(crate::agent::sanitize::one_line(line, 500));
            });
        });
    }
    tail
}

/// What a child's `--json` line says about it.
struct Ready {
    session_id: String,
    /// Its door, `http://127.0.0.1:PORT`.
    url: String,
    pid: u32,
    /// The workdir it opened, as it resolved it.
    workdir: String,
    /// An authenticated door's `spawner` token, to deliver the task with; held in memory
    /// only.
    token: Option<String>,
}

/// Whether `announced` (a child's `workdir`, the real path of the directory it opened) is
/// the directory `made` the launcher created and holds.
fn same_dir(made: &Dir, announced: &str) -> bool {
    std::fs::canonicalize(made.proc_path()).is_ok_and(|real| real.display().to_string() == announced)
}

/// The child's `--json` line within `bound`. The rest of its stdout is drained.
fn first_line(child: &mut Proc, bound: Duration, stop: &AtomicI32) -> Result<Ready, String> {
    let out = child.stdout.take().ok_or("the child has no stdout")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(out);
        let mut line = Vec::new();
        let got = (&mut r).take(MAX_LINE).read_until(b'\n', &mut line);
        let _ = tx.send(got.map(|_| line));
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    });
    let until = Instant::now() + bound;
    let line = loop {
        match rx.recv_timeout(STOP_TICK) {
            Ok(Ok(l)) if !l.is_empty() => break l,
            Ok(_) => return Err("the child ended before it reported ready".into()),
            Err(_) if stop.load(Ordering::SeqCst) != 0 => {
                return Err("the delegating session is ending".into())
            }
            Err(_) if Instant::now() >= until => {
                return Err(format!(
                    "the child did not report ready within {} s",
                    bound.as_secs()
                ))
            }
            Err(_) => {}
        }
    };
    let v: Value =
        serde_json::from_slice(&line).map_err(|_| "the child's first line is not JSON".to_string())?;
    let sid = v
        .get("session_id")
        .and_then(Value::as_str)
        .filter(|s| crate::spawner::is_id(s, "ses_"))
        .ok_or("the child's first line names no session")?;
    let port = v
        .get("url")
        .and_then(Value::as_str)
        .and_then(|u| u.strip_prefix("localhost:"))
        .and_then(|p| p.parse::<u16>().ok())
        .filter(|p| *p != 0)
        .ok_or("the child bound no address")?;
    let pid = v
        .get("pid")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok())
        .ok_or("the child's first line names no pid")?;
    let workdir = v
        .get("workdir")
        .and_then(Value::as_str)
        .ok_or("the child's first line names no workdir")?;
    let token = match (v.get("auth").and_then(Value::as_str), v.get("token")) {
        (None, None) => None,
        (Some("bearer"), Some(Value::String(t))) if crate::token::shape(Kind::DoorToken, t).is_ok() => {
            Some(t.clone())
        }
        _ => return Err("the child's first line names its door's authentication but no token".into()),
    };
    Ok(Ready {
        session_id: sid.to_string(),
        url: format!("http://127.0.0.1:{port}"),
        pid,
        workdir: workdir.to_string(),
        token,
    })
}

/// Hand the child its task, retrying while its listener comes up; with the child's
/// `spawner` token when its door is authenticated.
fn deliver(url: &str, id: &str, task: &str, token: Option<&str>, stop: &AtomicI32) -> Result<(), String> {
    let until = Instant::now() + DELIVERY_BOUND;
    // A message id of its own: the task's history is readable on the child's door, and the
    // delegation id is what admits the delegation's completion at an authenticated parent.
    let message_id = crate::token::random_hex16()
        .map(|h| format!("msg_{h}"))
        .map_err(|e| format!("no randomness for the task's message id: {e}"))?;
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer.iter().map(|b| ("authorization", b.as_str())).collect();
    let mut pause = Duration::from_millis(100);
    loop {
        match send::send(
            url,
            id,
            &message_id,
            None,
            task,
            &headers,
            Duration::from_secs(10),
        ) {
            Ok(_) => return Ok(()),
            Err(Failure::Refused(m)) => return Err(format!("the child refused its task: {m}")),
            Err(Failure::Unreachable(m)) if Instant::now() + pause >= until => {
                return Err(format!(
                    "the child did not take its task within {} s: {m}",
                    DELIVERY_BOUND.as_secs()
                ))
            }
            Err(_) if stop.load(Ordering::SeqCst) != 0 => {
                return Err("the delegating session is ending".into())
            }
            Err(_) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        }
    }
}

/// `MURMUR_WORKDIR_IDENTITY` of the child's directory `made` (at `rel`): its device and
/// inode, which the child checks on the directory it opens before it makes anything.
fn workdir_identity(made: &Dir, rel: &str) -> Result<(String, String), String> {
    let (dev, ino) = made
        .identity()
        .map_err(|e| format!("cannot read the identity of {rel}: {e}"))?;
    Ok((
        crate::runtime::session::WORKDIR_IDENTITY.to_string(),
        format!("{dev}:{ino}"),
    ))
}

/// The completion the launcher reports for a child that started (`ok` until the watch
/// learns otherwise), the same record the child would write.
fn launcher_completion(id: &str, ask: &Ask<'_>, session_id: &str, dir: &std::path::Path) -> Completion {
    Completion {
        delegation_id: id.to_string(),
        capsule_name: ask.capsule.to_string(),
        capsule_version: ask.version.to_string(),
        session_id: session_id.to_string(),
        status: "ok",
        result_path: None,
        workdir: dir.display().to_string(),
        duration_ms: 0,
        detail: None,
        reported_by: "launcher",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(label: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("murmur-launcher-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::canonicalize(&p).unwrap()
    }

    #[test]
    fn stderr_lines_are_bounded_and_bad_bytes_never_stop_the_reading() {
        let mut input = vec![b'x'; 3 * MAX_STDERR_LINE];
        input.extend_from_slice(b"\nbad \xff\xfe bytes\nlast without newline");
        let mut got = Vec::new();
        drain_lines(&input[..], |l| got.push(l.to_string()));
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].len(), MAX_STDERR_LINE);
        assert!(
            got[1].starts_with("bad ") && got[1].ends_with(" bytes"),
            "{:?}",
            got[1]
        );
        assert_eq!(got[2], "last without newline");
    }

    #[test]
    fn a_child_dir_replaced_by_a_symlink_is_not_the_dir_that_was_made() {
        let root = scratch("same-dir");
        let work = Dir::open(&root).unwrap();
        let made = work.mkdir_new("child-0123", 0o700).unwrap();
        let path = root.join("child-0123");
        assert!(same_dir(&made, &path.display().to_string()));
        // Swapped before the child opened it: the child resolves the symlink elsewhere.
        let elsewhere = scratch("same-dir-elsewhere");
        std::fs::rename(&path, root.join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
        let announced = std::fs::canonicalize(&path).unwrap();
        assert!(!same_dir(&made, &announced.display().to_string()));
        let _ = std::fs::remove_dir_all(&root);
        let _ = std::fs::remove_dir_all(&elsewhere);
    }
}
