//! The one function that starts every child process of the runtime. Parent side: resolve,
//! open and compile everything (ruleset, filter, cgroup descriptor). Child side, between
//! fork and exec, in this order, any failure aborting the spawn and reported through a
//! close-on-exec pipe: join the pids cgroup, enter a loopback-only network namespace,
//! mark descriptors above 2 close-on-exec, set hard rlimits, drop every capability,
//! `no_new_privs`, the seccomp filter, then the landlock ruleset.
#![allow(unsafe_code)]

use super::cgroup::Cgroup;
use super::class::Class;
use super::{child, rules, seccomp};
use crate::diag::{code, Diagnostic};
use std::collections::BTreeSet;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Hard resource limits of every contained child.
#[derive(Debug, Clone, Copy)]
pub struct Rlimits {
    pub open_files: u64,
    pub file_size: u64,
    pub cpu_seconds: u64,
    pub address_space: u64,
}

impl Default for Rlimits {
    fn default() -> Rlimits {
        Rlimits {
            open_files: 1024,
            file_size: 4 << 30,
            cpu_seconds: 3600,
            address_space: 2 << 30,
        }
    }
}

/// One child to start.
pub struct Spawn<'a> {
    pub class: Class,
    pub landlock_abi: u32,
    pub program: &'a Path,
    pub args: &'a [String],
    /// Every `shell.allow` binary, resolved: each with its loader and libraries gets read +
    /// execute (the program itself must be one of them to run under `scoped`).
    pub allowed_binaries: &'a [PathBuf],
    pub workdir: &'a Path,
    pub workdir_exec: bool,
    pub unix_sockets: bool,
    /// The complete environment of the child.
    pub env: &'a [(String, String)],
    pub cgroup: Option<&'a Cgroup>,
    pub rlimits: Rlimits,
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
}

/// The steps of the child, numbered for the error pipe.
const STEPS: [&str; 9] = [
    "",
    "join the pids cgroup",
    "enter a network namespace (unshare)",
    "mark descriptors close-on-exec (close_range)",
    "set rlimits (setrlimit)",
    "drop capabilities (prctl/capset)",
    "set no_new_privs (prctl)",
    "install the seccomp filter (seccomp)",
    "install the landlock ruleset (landlock_restrict_self)",
];

/// Test-only fault injection: `MURMUR_FAULT=seccomp|landlock` makes that step fail in the
/// child, so the abort path is exercised. It can only make a spawn fail, never weaker.
fn injected_fault() -> u8 {
    match std::env::var("MURMUR_FAULT").as_deref() {
        Ok("seccomp") => 7,
        Ok("landlock") => 8,
        _ => 0,
    }
}

fn install_error(step: usize, e: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::new(
        code::RUN_CONTAINMENT,
        "",
        format!(
            "containment could not be installed, the command was not run: {}: {e}",
            STEPS[step]
        ),
    )
}

/// Start the child, contained for `s.class`.
pub fn spawn(s: Spawn<'_>) -> Result<Child, Diagnostic> {
    let contained = s.class >= Class::Scoped;
    if s.class == Class::Sealed {
        return Err(install_error(0, super::class::SEALED_MISSING));
    }
    let closure: BTreeSet<PathBuf> = s
        .allowed_binaries
        .iter()
        .flat_map(|b| super::elf::closure(b))
        .collect();
    let mut ruleset = if contained {
        let grants = rules::Grants {
            workdir: s.workdir,
            workdir_exec: s.workdir_exec,
            exec_files: &closure,
        };
        Some(rules::ruleset(s.landlock_abi, &grants).map_err(|e| install_error(8, e))?)
    } else {
        None
    };
    let filter = if contained {
        Some(seccomp::child_filter(s.unix_sockets).map_err(|e| install_error(7, e))?)
    } else {
        None
    };
    let (err_r, err_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| install_error(0, std::io::Error::from(e)))?;
    let err_fd = err_w.as_raw_fd();
    let procs_fd = s.cgroup.map(|c| c.procs_fd());
    let limits = s.rlimits;
    let fault = injected_fault();
    let mut cmd = Command::new(s.program);
    cmd.args(s.args)
        .env_clear()
        .envs(s.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(s.workdir)
        .process_group(0)
        .stdin(s.stdin)
        .stdout(s.stdout)
        .stderr(s.stderr);
    let hook = move || -> std::io::Result<()> {
        let mut step = 0u8;
        let mut run = |n: u8, r: std::io::Result<()>| -> std::io::Result<()> {
            step = n;
            let r = if fault == n {
                Err(std::io::Error::from_raw_os_error(libc::ENOTRECOVERABLE))
            } else {
                r
            };
            if let Err(e) = &r {
                let errno = e.raw_os_error().unwrap_or(0).to_le_bytes();
                let msg = [n, errno[0], errno[1], errno[2], errno[3]];
                let _ = child::write_fd(err_fd, &msg);
            }
            r
        };
        if let Some(fd) = procs_fd {
            run(1, child::write_fd(fd, b"0"))?;
        }
        if contained {
            run(2, child::enter_network_namespace())?;
        }
        run(3, child::cloexec_from_3())?;
        run(
            4,
            child::limit(libc::RLIMIT_NOFILE, limits.open_files)
                .and_then(|_| child::limit(libc::RLIMIT_FSIZE, limits.file_size))
                .and_then(|_| child::limit(libc::RLIMIT_CPU, limits.cpu_seconds))
                .and_then(|_| child::limit(libc::RLIMIT_CORE, 0))
                .and_then(|_| child::limit(libc::RLIMIT_AS, limits.address_space)),
        )?;
        run(5, child::drop_capabilities())?;
        run(6, child::no_new_privs())?;
        if let Some(f) = &filter {
            run(
                7,
                seccompiler::apply_filter(f).map_err(|e| match e {
                    seccompiler::Error::Seccomp(io) | seccompiler::Error::Prctl(io) => io,
                    _ => std::io::Error::from_raw_os_error(libc::EINVAL),
                }),
            )?;
        }
        if let Some(set) = ruleset.take() {
            run(
                8,
                set.restrict_self()
                    .map(|_| ())
                    .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM)),
            )?;
        }
        let _ = step;
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec. It only makes syscalls on
    // values prepared above (descriptors, a compiled filter, a created ruleset), and on its
    // success paths allocates nothing, so the usual post-fork restrictions hold.
    unsafe {
        cmd.pre_exec(hook);
    }
    let spawned = cmd.spawn();
    drop(err_w);
    match spawned {
        Ok(child) => Ok(child),
        Err(e) => {
            let mut msg = [0u8; 5];
            let mut r = std::fs::File::from(err_r);
            match r.read_exact(&mut msg) {
                Ok(()) if (msg[0] as usize) < STEPS.len() && msg[0] > 0 => {
                    let errno = i32::from_le_bytes([msg[1], msg[2], msg[3], msg[4]]);
                    Err(install_error(
                        msg[0] as usize,
                        std::io::Error::from_raw_os_error(errno),
                    ))
                }
                _ => Err(Diagnostic::new(
                    code::RUN_CONTAINMENT,
                    "",
                    format!("cannot start {}: {e}", s.program.display()),
                )),
            }
        }
    }
}
