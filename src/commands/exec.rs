//! `mur exec`: run one command exactly as a capsule's shell tool will: the command must be in
//! `capabilities.shell.allow`, the host is probed, the containment class decided (E-CAP-003
//! when the floor is not met), and the child started by the one spawn function.

use crate::containment::class::{self, Class};
use crate::containment::host_env::{credential_shaped, resolve_binary, PIDS_MAX};
use crate::containment::{cgroup::Cgroup, egress, probe, runtime_dirs, spawn};
use crate::diag::{code, Diagnostic};
use crate::manifest::{self, Resolve};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The flags of `mur exec`.
#[derive(Debug, Default)]
pub struct ExecOptions {
    pub manifest: Option<PathBuf>,
    pub containment: Option<Class>,
    pub workdir: Option<PathBuf>,
    pub command: Vec<String>,
}

/// Run the command; its exit status (128 + signal when killed by one).
pub fn exec(o: ExecOptions, exe: &Path) -> Result<u8, Diagnostic> {
    let manifest_path = o.manifest.clone().unwrap_or_else(|| PathBuf::from("murmur.yaml"));
    let loaded = manifest::load_file(&manifest_path, Resolve::All(&manifest::process_env))?;
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    let m = loaded.manifest;
    let caps = &m.capabilities;
    let Some((cmd, args)) = o.command.split_first() else {
        return Err(Diagnostic::new(
            code::MAN_INVALID,
            "exec",
            "no command given after --",
        ));
    };
    let allowed = caps.shell_allow.clone().unwrap_or_default();
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
    let host_path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let program = resolve_binary(cmd, &host_path).ok_or_else(|| {
        Diagnostic::new(
            code::CAP_SHELL,
            "capabilities.shell.allow",
            format!("'{cmd}' is allowed but not found on PATH"),
        )
    })?;
    let report = probe::probe(exe, caps.containment.max(o.containment.unwrap_or_default()));
    let decision = class::decide(caps.containment, o.containment, caps.workdir_exec, &report);
    // The session's network namespace and relay first: a host that cannot make the
    // namespace refuses a subprocess whatever the class (E-CAP-005).
    let (egress, net_events) = egress::start(exe, &caps.network_allow)?;
    if let Some(refusal) = decision.refusal_for(caps.unix_sockets) {
        return Err(refusal);
    }
    if decision.achieved == Class::Advisory {
        eprintln!("{}", egress::advisory_warning());
    }
    std::thread::spawn(move || {
        for e in net_events {
            if !matches!(
                e.decision,
                egress::event::Decision::Closed { .. } | egress::event::Decision::Answered(_)
            ) {
                eprintln!("mur: network: {}", e.line());
            }
        }
    });
    // What the child may read besides its workdir and binaries (interpreter runtimes, the
    // trust store with a network grant, time zone data); W-SEC-009 names what a declared
    // interpreter_runtime opens.
    let allowed_paths: Vec<PathBuf> = allowed
        .iter()
        .filter_map(|a| resolve_binary(a, &host_path))
        .collect();
    let grants = runtime_dirs::read_grants(decision.achieved, &allowed_paths, caps);
    for w in &grants.warnings {
        eprintln!("{w}");
    }
    let session_id = crate::ids::session_id()?;
    let workdir = match &o.workdir {
        Some(w) if w.is_dir() => w.clone(),
        Some(w) => {
            return Err(Diagnostic::new(
                code::IO_READ,
                "--workdir",
                format!("--workdir {} is not an existing directory", w.display()),
            ));
        }
        None => {
            let base = manifest_path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let w = base.join("workdir").join(&session_id);
            std::fs::create_dir_all(&w).map_err(|e| {
                Diagnostic::new(code::IO_READ, "", format!("cannot create {}: {e}", w.display()))
            })?;
            w
        }
    };
    let workdir = std::fs::canonicalize(&workdir)
        .map_err(|e| Diagnostic::new(code::IO_READ, "", format!("{}: {e}", workdir.display())))?;
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), host_path.clone()),
        ("HOME".into(), workdir.display().to_string()),
    ];
    for name in &caps.env_allow {
        if credential_shaped(name) || name == "PATH" || name == "HOME" {
            continue;
        }
        if let Ok(v) = std::env::var(name) {
            env.push((name.clone(), v));
        }
    }
    env.push(("MURMUR_CAPSULE_NAME".into(), m.name.clone()));
    env.push(("MURMUR_CAPSULE_VERSION".into(), m.version.clone()));
    env.push(("MURMUR_SESSION_ID".into(), session_id.clone()));
    env.push(("MURMUR_CAPSULE_URL".into(), String::new()));
    let cgroup = if decision.achieved >= Class::Scoped {
        Some(Cgroup::create(&session_id, PIDS_MAX).map_err(|e| {
            Diagnostic::new(
                code::RUN_CONTAINMENT,
                "",
                format!("cannot create the session's pids cgroup: {e}"),
            )
        })?)
    } else {
        Cgroup::create(&session_id, PIDS_MAX).ok()
    };
    // SIGINT and SIGTERM go to the child's process group: the spawn makes the child the
    // leader of its own session (setsid, no controlling terminal), so its group id is its
    // pid and a terminal's Ctrl-C reaches only `mur`; `mur` passes it on and then reports
    // the child's status as usual. The child's output still reaches the terminal through
    // the inherited stdout and stderr.
    crate::signals::block_termination()
        .map_err(|e| Diagnostic::new(code::RUN_CONTAINMENT, "", format!("cannot block signals: {e}")))?;
    let mut child = spawn::spawn(spawn::Spawn {
        class: decision.achieved,
        landlock_abi: report.landlock_abi,
        program: &program,
        args,
        allowed_binaries: &allowed_paths,
        read_dirs: &grants.paths,
        read_unlisted: &grants.unlisted,
        workdir: &workdir,
        workdir_held: None,
        workdir_exec: caps.workdir_exec,
        unix_sockets: caps.unix_sockets,
        env: &env,
        cgroup: cgroup.as_ref(),
        rlimits: spawn::Rlimits::default(),
        runtime: false,
        net: Some(&egress.join),
        stdin: Stdio::null(),
        stdout: Stdio::inherit(),
        stderr: Stdio::inherit(),
    })?;
    if let Some(group) = rustix::process::Pid::from_raw(child.id() as i32) {
        std::thread::spawn(move || {
            while let Ok(sig) = crate::signals::wait_for_termination() {
                let sig = if sig == libc::SIGINT {
                    rustix::process::Signal::INT
                } else {
                    rustix::process::Signal::TERM
                };
                let _ = rustix::process::kill_process_group(group, sig);
            }
        });
    }
    let status = child
        .wait()
        .map_err(|e| Diagnostic::new(code::RUN_CONTAINMENT, "", format!("waiting for {cmd}: {e}")))?;
    drop(cgroup);
    drop(egress);
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c as u8,
        (None, Some(sig)) => 128u8.saturating_add(sig as u8),
        _ => 1,
    })
}
