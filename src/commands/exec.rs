//! `mur exec`: run one command exactly as a capsule's shell tool will: the command must be in
//! `capabilities.shell.allow`, the host is probed, the containment class decided (E-CAP-003
//! when the floor is not met), and the child started under the session's one
//! [`ChildPolicy`], the policy a capsule's shell tools are started under. Only where the
//! command comes from differs, and, when the rules allow no network, whose namespace the
//! command is in: with nothing to relay, no session namespace is made, and a contained
//! command makes its own (`lo` only, as the session's would be).

use crate::containment::child_policy::{env_present, ChildPolicy, PolicyInputs, Stdios, DEFAULT_PATH};
use crate::containment::class::{self, Class};
use crate::containment::host_env::{identity, resolve_binary};
use crate::containment::spawn::Stdio;
use crate::containment::{egress, probe_cache};
use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::{self, Manifest, Resolve};
use std::path::{Path, PathBuf};

/// The flags of `mur exec`.
#[derive(Debug, Default)]
pub struct ExecOptions {
    pub manifest: Option<PathBuf>,
    pub containment: Option<Class>,
    pub workdir: Option<PathBuf>,
    /// The command's `HOME` (default `<workdir>/.home`): `mur eval run` gives a check one
    /// the agent never wrote.
    pub home: Option<PathBuf>,
    pub command: Vec<String>,
}

/// Run the command; its exit status (128 + signal when killed by one).
pub fn exec(o: ExecOptions, exe: &Path) -> Result<u8, Diagnostic> {
    crate::http::descriptor_floor(4096)?;
    let manifest_path = o.manifest.clone().unwrap_or_else(|| PathBuf::from("murmur.yaml"));
    let m = load(&manifest_path)?;
    let secret = m
        .inference
        .as_ref()
        .and_then(|i| i.api_key.as_ref())
        .and_then(|k| k.secret());
    if secret.is_some() {
        // As `mur run` does once it holds the key: no core file, and no /proc/<pid>/environ
        // or mem for other processes of this uid. A contained child then joins a user
        // namespace the keyless helper made (`child_policy`), never one of its own.
        let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    }
    let host_path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into());
    let (cmd, args) = command(&o, &m, &host_path)?;
    let rules = m.subprocess_rules();
    // With no rules the probe answers whether the host can make a network namespace, so
    // it is taken for at least `scoped` (cached per boot like any other).
    let floor = m.capabilities.containment.max(o.containment.unwrap_or_default());
    let report = probe_cache::probe(
        exe,
        if rules.is_empty() {
            floor.max(Class::Scoped)
        } else {
            floor
        },
        crate::places::cache_dir().as_deref(),
        crate::clock::now_ms(),
    );
    let decision = class::decide(
        m.capabilities.containment,
        o.containment,
        m.capabilities.workdir_exec,
        &report,
    );
    let (egress, printed) = network(exe, &rules)?;
    if let Some(refusal) = decision.refusal_for(m.capabilities.unix_sockets) {
        return Err(refusal);
    }
    if decision.achieved == Class::Advisory {
        eprintln!("{}", egress::advisory_warning());
    }
    let session_id = crate::ids::session_id()?;
    let work = workdir(&o, &manifest_path, &session_id)?;
    let work = scoped(work, m.capabilities.filesystem_scope.as_deref())?;
    // The session's warden as a fork of this process where that is safe (no network
    // relay's threads, no provider key), before the policy asks for it.
    crate::containment::warden::start_forked();
    let (policy, warnings) = ChildPolicy::new(PolicyInputs {
        caps: &m.capabilities,
        class: decision.achieved,
        landlock_abi: report.landlock_abi,
        netns: report.netns.is_ok(),
        pidns: report.pidns.is_ok(),
        workdir: &work,
        session_id: &session_id,
        identity: &identity(&m.name, &m.version, &session_id, ""),
        env_present: &env_present(&m.capabilities),
        secret,
        host_path,
        net: egress.map(std::sync::Arc::new),
        home: home(&o)?,
    })?;
    for w in &warnings {
        eprintln!("{w}");
    }
    let code = run(&policy, &cmd, args);
    // The relay stops with the policy; its last refusals are printed before `mur` exits.
    drop(policy);
    if let Some(printed) = printed {
        let _ = printed.recv_timeout(std::time::Duration::from_secs(1));
    }
    code
}

/// Step: the network first, so rules on a host that cannot make a network namespace are
/// refused whatever the class (E-CAP-005), as they are for a capsule's shell tools. Rules
/// that allow something get the session's namespace and relay, for the same rules a
/// capsule's shell tools get, with the relay's refusals printed as they happen (the
/// receiver hears when the last was). With no rules there is nothing to relay: no namespace
/// is made here, and a contained command makes one of its own (`lo` only, as the session's
/// would be) or, where the host allows none, runs with its network closed (no IP socket,
/// no TCP bind or connect).
fn network(
    exe: &Path,
    rules: &[crate::manifest::netrule::NetRule],
) -> Result<(Option<egress::Egress>, Option<std::sync::mpsc::Receiver<()>>), Diagnostic> {
    if rules.is_empty() {
        return Ok((None, None));
    }
    let (egress, events) = egress::start(exe, rules)?;
    Ok((Some(egress), Some(print_refusals(events))))
}

/// Step: `--home`, an existing directory, by its real path.
fn home(o: &ExecOptions) -> Result<Option<PathBuf>, Diagnostic> {
    let Some(h) = &o.home else { return Ok(None) };
    match std::fs::canonicalize(h) {
        Ok(real) if real.is_dir() => Ok(Some(real)),
        _ => Err(Diagnostic::new(
            code::IO_READ,
            "--home",
            format!("--home {} is not an existing directory", h.display()),
        )),
    }
}

/// The manifest, its warnings printed.
fn load(path: &Path) -> Result<Manifest, Diagnostic> {
    let loaded = manifest::load_file(path, Resolve::All(&manifest::process_env))?;
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    Ok(loaded.manifest)
}

/// The command and its arguments: a bare `capabilities.shell.allow` name found on `PATH`.
fn command<'a>(
    o: &'a ExecOptions,
    m: &Manifest,
    host_path: &str,
) -> Result<(String, &'a [String]), Diagnostic> {
    let Some((cmd, args)) = o.command.split_first() else {
        return Err(Diagnostic::new(
            code::MAN_INVALID,
            "exec",
            "no command given after --",
        ));
    };
    let allowed = m.capabilities.shell_allow.clone().unwrap_or_default();
    if cmd.contains('/') || !allowed.iter().any(|a| a == cmd) {
        return Err(Diagnostic::new(
            code::CAP_SHELL,
            "capabilities.shell.allow",
            format!(
                "'{cmd}' is not in capabilities.shell.allow ({})",
                if allowed.is_empty() {
                    "empty".to_string()
                } else {
                    allowed.join(", ")
                }
            ),
        ));
    }
    if resolve_binary(cmd, host_path).is_none() {
        return Err(Diagnostic::new(
            code::CAP_SHELL,
            "capabilities.shell.allow",
            format!("'{cmd}' is allowed but not found on PATH"),
        ));
    }
    Ok((cmd.clone(), args))
}

/// Refusals of the egress relay, on stderr as they happen; the receiver hears when the
/// relay has ended and every one was printed.
fn print_refusals(events: std::sync::mpsc::Receiver<egress::event::Event>) -> std::sync::mpsc::Receiver<()> {
    let (done, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for e in events {
            if !matches!(
                e.decision,
                egress::event::Decision::Closed { .. } | egress::event::Decision::Answered(_)
            ) {
                eprintln!("mur: network: {}", e.line());
            }
        }
        let _ = done.send(());
    });
    printed
}

/// The workdir, held open: `--workdir` (which must exist), else `workdir/<session>` beside
/// the manifest, made through the held base directory.
fn workdir(o: &ExecOptions, manifest_path: &Path, session_id: &str) -> Result<Dir, Diagnostic> {
    let io = |p: &Path, e: crate::fsx::FsError| {
        Diagnostic::new(code::IO_READ, "", format!("cannot prepare {}: {e}", p.display()))
    };
    match &o.workdir {
        Some(w) if w.is_dir() => Dir::open(w).map_err(|e| io(w, e)),
        Some(w) => Err(Diagnostic::new(
            code::IO_READ,
            "--workdir",
            format!("--workdir {} is not an existing directory", w.display()),
        )),
        None => {
            let base = manifest_path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            Dir::open(base)
                .and_then(|b| b.mkdirs(&format!("workdir/{session_id}"), 0o755))
                .map_err(|e| io(base, e))
        }
    }
}

/// The accessible workdir: `capabilities.filesystem.scope` beneath the workdir when one is
/// declared (made without following a symlink, as a capsule's is), else the workdir.
fn scoped(work: Dir, scope: Option<&str>) -> Result<Dir, Diagnostic> {
    let Some(s) = scope else {
        return Ok(work);
    };
    work.mkdirs(s.trim_end_matches('/'), 0o755).map_err(|e| {
        Diagnostic::new(
            code::CAP_SCOPE,
            "capabilities.filesystem.scope",
            format!("the filesystem scope {s:?} cannot be used: {e}"),
        )
    })
}

/// Start the command under `policy` and wait for it. SIGINT and SIGTERM go to the child's
/// process group: the spawn makes the child the leader of its own session (setsid, no
/// controlling terminal), so its group id is its pid and a terminal's Ctrl-C reaches only
/// `mur`; `mur` passes it on and then reports the child's status as usual. The child's
/// output still reaches the terminal through the inherited stdout and stderr.
/// How long a command may take to end after a forwarded SIGTERM or SIGINT before its
/// group is killed.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Step: wait for the command to exit, then (before its reap frees its group id) kill what
/// it left running in its group, as a capsule's shell call does: nothing the command
/// started outlives it, with a cgroup or without.
fn wait_and_end_group(
    child: &mut crate::containment::spawn::Proc,
    live: crate::containment::child_policy::LiveCall,
) -> std::io::Result<std::process::ExitStatus> {
    use rustix::process::{waitid, Pid, WaitId, WaitIdOptions};
    if let Some(p) = Pid::from_raw(child.id() as i32) {
        while let Err(rustix::io::Errno::INTR) =
            waitid(WaitId::Pid(p), WaitIdOptions::EXITED | WaitIdOptions::NOWAIT)
        {}
        let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
    }
    drop(live);
    child.wait()
}

fn run(policy: &ChildPolicy, cmd: &str, args: &[String]) -> Result<u8, Diagnostic> {
    let program = policy.resolved(cmd).map(Path::to_path_buf).ok_or_else(|| {
        Diagnostic::new(
            code::CAP_SHELL,
            "capabilities.shell.allow",
            format!("'{cmd}' is allowed but not found on PATH"),
        )
    })?;
    crate::signals::block_termination()
        .map_err(|e| Diagnostic::new(code::RUN_CONTAINMENT, "", format!("cannot block signals: {e}")))?;
    let mut child = policy.spawn(
        &program,
        args,
        Stdios {
            stdin: Stdio::null(),
            stdout: Stdio::inherit(),
            stderr: Stdio::inherit(),
        },
    )?;
    if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
        let live = std::sync::Arc::clone(&policy.live);
        std::thread::spawn(move || {
            while let Ok(sig) = crate::signals::wait_for_termination() {
                let sig = if sig == libc::SIGINT {
                    rustix::process::Signal::INT
                } else {
                    rustix::process::Signal::TERM
                };
                let _ = rustix::process::kill_process_group(group, sig);
                // A command that ignores it is killed after the grace period, as `podman
                // stop` does (a contained one ends at once: its pid 1 ends on the first).
                let live = std::sync::Arc::clone(&live);
                std::thread::spawn(move || {
                    std::thread::sleep(STOP_GRACE);
                    live.kill_all();
                });
            }
        });
    }
    let live = policy.live.enter(child.id() as i32);
    let status = wait_and_end_group(&mut child, live)
        .map_err(|e| Diagnostic::new(code::RUN_CONTAINMENT, "", format!("waiting for {cmd}: {e}")))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.saturating_add(sig as u8),
        _ => 1,
    })
}
