//! The one function that starts every child process of the runtime. Parent side: resolve,
//! open and compile everything (ruleset, filter, cgroup descriptor). Child side
//! (`child_steps`, over the primitive `process`), between clone and exec, in this order, any failure aborting the spawn and
//! reported through a close-on-exec pipe: a new session with no controlling terminal
//! (`setsid`), join the pids cgroup, enter a loopback-only network namespace, mark
//! descriptors above 2 close-on-exec, unblock signals, set hard rlimits, drop every
//! capability, `no_new_privs`, the seccomp filter, then the landlock ruleset. Under
//! `sealed` the child makes its session, joins the cgroup, enters all the namespaces of
//! `sealed` and hands the start over to pid 1 of its PID namespace (`mur`'s own child,
//! sharing its memory), which makes a session of its own, catches the forwarded signals,
//! composes the root, installs the same steps, starts the command (which adds a landlock
//! domain below pid 1's and execs) and stays as its reaper.

use super::cgroup::Cgroup;
use super::child_steps::ChildSteps;
use super::class::Class;
use super::elf::Closure;
pub use super::process::{single_threaded, Proc, Stdio};
use super::sealed::{self, Failure};
use super::{child, rules, seccomp};
use crate::diag::{code, Diagnostic};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// Hard resource limits of every contained child.
#[derive(Debug, Clone, Copy)]
pub struct Rlimits {
    pub open_files: u64,
    pub file_size: u64,
    pub cpu_seconds: u64,
    pub address_space: u64,
    /// `RLIMIT_NPROC`, set only where no cgroup bounds the session (then it is counted in
    /// the command's user namespace, Linux 5.14 and later).
    pub processes: u64,
}

impl Default for Rlimits {
    fn default() -> Rlimits {
        Rlimits {
            open_files: 1024,
            file_size: 4 << 30,
            cpu_seconds: 3600,
            address_space: 2 << 30,
            processes: super::host_env::PIDS_MAX,
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
    /// Directories and files granted read-only, never execute
    /// (`runtime_dirs::read_grants(..).paths`): read beneath each, list directories. Under
    /// `scoped` landlock rules; under `sealed` landlock rules and read-only binds into the
    /// composed root (not `noexec`, so C extensions below them can be mapped).
    pub read_dirs: &'a [PathBuf],
    /// Directories whose files are granted read-only but which may not be listed
    /// (`runtime_dirs::read_grants(..).unlisted`: `interpreter_runtime` with
    /// `list_dir: false`). Never execute.
    pub read_unlisted: &'a [PathBuf],
    pub workdir: &'a Path,
    /// `/proc/self/fd/N` of a directory descriptor the caller holds on `workdir`. When set,
    /// the landlock rule, the sealed bind's source and the current directory come from that
    /// descriptor, so a path swapped for a symlink after the session opened its workdir
    /// (by anything that can write the directory above it) cannot move the child's tree.
    pub workdir_held: Option<&'a Path>,
    pub workdir_exec: bool,
    pub unix_sockets: bool,
    /// The complete environment of the child.
    pub env: &'a [(String, String)],
    pub cgroup: Option<&'a Cgroup>,
    pub rlimits: Rlimits,
    /// A delegated `mur`: the runtime of a session of its own, which probes the host and
    /// contains its own subprocesses. It keeps its capabilities (its probe must see what the
    /// host offers, so the parent's containment never decides the child's) and gets
    /// SIGTERM when the thread that started it dies, so no child outlives a parent that was
    /// killed outright. Only with `class` `advisory`.
    pub runtime: bool,
    /// The session's network namespace (`egress`): a contained child joins it (under
    /// `sealed`, before its own namespaces, so the command holds no capability over it).
    /// Without one a contained child makes a namespace of its own of the same kind: only
    /// `lo`, up, with every IPv4 destination delivered locally (to no listener).
    pub net: Option<&'a Join>,
    /// Whether a contained child without `net` can make a network namespace of its own.
    /// Where it cannot (unprivileged user namespaces refused), its network is closed
    /// instead: no IP socket (seccomp) and no TCP bind or connect (landlock, ABI 4).
    pub netns: bool,
    /// A helper of `mur`'s own started without exec: the child is a fork of this process
    /// that takes the same steps and then runs this function where it would exec `program`
    /// (`process::Image::forked`). Only `advisory`, and only while this process runs one
    /// thread: the caller checks [`single_threaded`], and the start refuses otherwise.
    pub in_fork: Option<fn() -> i32>,
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
}

impl<'a> Spawn<'a> {
    /// A helper of `mur`'s own (`exe args`, where `exe` is the running `mur`): advisory,
    /// in `/`, in no session cgroup, with an empty environment and nothing open; the caller
    /// sets what the helper needs on top (its streams, `runtime`, `unix_sockets`).
    pub fn own_helper(exe: &'a Path, args: &'a [String]) -> Spawn<'a> {
        Spawn {
            class: Class::Advisory,
            landlock_abi: 0,
            program: exe,
            args,
            allowed_binaries: &[],
            read_dirs: &[],
            read_unlisted: &[],
            workdir: Path::new("/"),
            workdir_held: None,
            workdir_exec: false,
            unix_sockets: false,
            env: &[],
            cgroup: None,
            rlimits: Rlimits::default(),
            runtime: false,
            net: None,
            netns: true,
            in_fork: None,
            stdin: Stdio::null(),
            stdout: Stdio::null(),
            stderr: Stdio::null(),
        }
    }
}

/// A connected pair of close-on-exec stream sockets: one end stays in `mur`, the other
/// becomes a helper's stream.
pub fn socket_pair() -> Result<(OwnedFd, OwnedFd), String> {
    use rustix::net::{socketpair, AddressFamily, SocketFlags, SocketType};
    socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| format!("socketpair: {e}"))
}

/// The steps of the child, numbered for the error pipe (`sealed::STEP_*` share them).
const STEPS: [&str; 24] = [
    "",
    "join the pids cgroup",
    "enter a network namespace (unshare)",
    "mark descriptors close-on-exec (close_range)",
    "set rlimits (setrlimit)",
    "drop capabilities (prctl/capset)",
    "set no_new_privs (prctl)",
    "install the seccomp filter (seccomp)",
    "install the landlock ruleset (landlock_restrict_self)",
    "write the user namespace's id maps (setgroups, uid_map, gid_map)",
    "start pid 1 of the new PID namespace (clone)",
    "compose the sealed root",
    "enter new user, mount, PID, network, IPC and UTS namespaces (unshare)",
    "start the command inside the PID namespace (clone)",
    "grant the private /tmp and /etc (landlock_add_rule)",
    "unblock signals (pthread_sigmask)",
    "start a session without a controlling terminal (setsid)",
    "ask for SIGTERM when the parent dies (prctl PR_SET_PDEATHSIG)",
    "join the session's network namespace (setns)",
    "start the program (execve)",
    "catch the signals mur forwards in pid 1 (sigaction)",
    "bring up the loopback of its own network namespace (netlink)",
    "enter a new PID namespace (unshare)",
    "ask for SIGKILL when mur dies (prctl PR_SET_PDEATHSIG)",
];

/// The step of a failed `execve` (or of the streams or directory before it), reported as
/// the program not starting.
const STEP_EXEC: u8 = 19;

/// Test-only fault injection: `MURMUR_FAULT=seccomp|landlock|loopback` makes that step fail
/// in the child, so the abort path is exercised. It can only make a spawn fail, never weaker.
fn injected_fault() -> u8 {
    match std::env::var("MURMUR_FAULT").as_deref() {
        Ok("seccomp") => 7,
        Ok("landlock") => 8,
        Ok("loopback") => 21,
        _ => 0,
    }
}

fn install_error(step: usize, e: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::new(
        code::RUN_CONTAINMENT,
        "",
        match STEPS[step] {
            "" => format!("containment could not be installed, the command was not run: {e}"),
            name => format!("containment could not be installed, the command was not run: {name}: {e}"),
        },
    )
}

/// The step a child reported failing, named (with the operation, for the sealed root):
/// the one text the spawn error and the probe both use.
pub fn failed_step(f: &Failure, sealed_ops: &[String]) -> String {
    let step = STEPS.get(f.step as usize).copied().unwrap_or("an unknown step");
    if f.step == sealed::STEP_ROOT {
        format!("{step}: {}", sealed::describe(sealed_ops, f.detail))
    } else {
        step.to_string()
    }
}

/// The error of a failure the child reported.
fn reported(f: Failure, sealed_ops: &[String]) -> Diagnostic {
    let d = Diagnostic::new(
        code::RUN_CONTAINMENT,
        "",
        format!(
            "containment could not be installed, the command was not run: {}: {}",
            failed_step(&f, sealed_ops),
            std::io::Error::from_raw_os_error(f.errno)
        ),
    );
    let not_dumpable =
        rustix::process::dumpable_behavior().is_ok_and(|b| b != rustix::process::DumpableBehavior::Dumpable);
    if f.step == sealed::STEP_ID_MAPS && f.errno == libc::EACCES && not_dumpable {
        // See `child::write_id_maps`: not root, a child of a `mur` holding a provider key
        // cannot map its ids. Such a child joins the keyless helper's user namespace
        // instead; only one that must make its own (its network closed, no cgroup) is left.
        return d.with_hint(
            "mur holds the provider key and is not dumpable, so a child started by a user other than root cannot map its ids in a user namespace of its own: have a pids cgroup delegated (MURMUR_CGROUP_PARENT), or allow the network namespace the keyless helper makes",
        );
    }
    d
}

/// What the parent prepares for a contained child: the landlock ruleset, the seccomp filter
/// and the sealed root's plan (each `None` where the class needs none).
struct Prepared {
    ruleset: Option<OwnedFd>,
    filter: Option<seccompiler::BpfProgram>,
    plan: Option<sealed::Plan>,
}

/// Read the allowed binaries' closure, then build the ruleset, the filter and the plan.
fn prepare(s: &Spawn<'_>) -> Result<Prepared, Diagnostic> {
    // The held workdir's identity, which a sealed root's bind (made by path in its own
    // mount namespace) must find; a held descriptor that cannot be read refuses the spawn
    // rather than leaving the bind unchecked.
    let held_ident = match s.workdir_held {
        Some(h) => match rustix::fs::stat(h) {
            Ok(st) => Some((st.st_dev, st.st_ino)),
            Err(e) => {
                return Err(install_error(
                    0,
                    format!("the session's own workdir descriptor cannot be read: {e}"),
                ))
            }
        },
        None => None,
    };
    let contained = s.class >= Class::Scoped;
    // The loader and libraries of the allowed binaries: only landlock and the sealed root
    // need them, so an advisory spawn does not read a single ELF header.
    let closure: Closure = if contained {
        super::elf::closure(s.allowed_binaries.iter().map(PathBuf::as_path))
            .map_err(|e| install_error(0, e))?
    } else {
        Closure::new()
    };
    let ruleset: Option<OwnedFd> = if contained {
        // Under `sealed` the system directories are readable too (their binds are
        // `noexec`, and landlock grants no execute there).
        let mut read: Vec<PathBuf> = s.read_dirs.to_vec();
        if s.class == Class::Sealed {
            read.extend(super::runtime_dirs::system_dirs());
        }
        let grants = rules::Grants {
            workdir: s.workdir_held.unwrap_or(s.workdir),
            workdir_exec: s.workdir_exec,
            exec_files: &closure,
            read: &read,
            read_unlisted: s.read_unlisted,
            closed_network: closed_network(s),
        };
        let set = rules::ruleset(s.landlock_abi, &grants).map_err(|e| install_error(8, e))?;
        Some(Option::<OwnedFd>::from(set).ok_or_else(|| install_error(8, "landlock is not supported"))?)
    } else {
        None
    };
    let filter = if contained {
        Some(seccomp::child_filter(s.unix_sockets, !closed_network(s)).map_err(|e| install_error(7, e))?)
    } else {
        None
    };
    // Pid 1 of a sealed sandbox shares `mur`'s memory: no read grant may show the command
    // any of `/proc` (its `oom_score_adj`, `clear_refs`, `cmdline` act on or show `mur`).
    if s.class == Class::Sealed {
        if let Some(p) = s
            .read_dirs
            .iter()
            .chain(s.read_unlisted)
            .find(|p| p.starts_with("/proc"))
        {
            return Err(install_error(
                11,
                format!(
                    "{} is under /proc, which a sealed command may not read",
                    p.display()
                ),
            ));
        }
    }
    let plan = if s.class == Class::Sealed {
        // Only the closure's files, each checked in the child to be the one read here: a
        // program that is none of them (missing, a directory, a symlink to `/`) is not
        // bound, and fails to start.
        let files: BTreeMap<PathBuf, (u64, u64)> =
            closure.iter().map(|(p, g)| (p.clone(), (g.dev, g.ino))).collect();
        let read_binds: Vec<PathBuf> = s.read_dirs.iter().chain(s.read_unlisted).cloned().collect();
        Some(
            sealed::plan(Some((s.workdir, held_ident)), &files, &read_binds, s.workdir_exec)
                .map_err(|e| install_error(11, e))?,
        )
    } else {
        None
    };
    Ok(Prepared {
        ruleset,
        filter,
        plan,
    })
}

/// A pidfd of this process, opened once (close-on-exec): pid 1 of a command's PID namespace
/// polls it after asking to die with `mur`, so `mur` dying before that request is seen.
/// -1 where the kernel has no pidfds (a poll of -1 never reports).
fn own_pidfd() -> RawFd {
    static FD: std::sync::OnceLock<Option<OwnedFd>> = std::sync::OnceLock::new();
    FD.get_or_init(|| {
        rustix::process::pidfd_open(rustix::process::getpid(), rustix::process::PidfdFlags::empty()).ok()
    })
    .as_ref()
    .map_or(-1, |f| f.as_raw_fd())
}

/// A contained child with neither the session's network namespace nor one of its own to
/// make: its network is closed by seccomp and landlock.
fn closed_network(s: &Spawn<'_>) -> bool {
    s.class >= Class::Scoped && s.net.is_none() && !s.netns
}

/// Start the child, contained for `s.class`. Where no cgroup bounds a contained child, its
/// pid 1 gets SIGKILL when the calling thread ends (`PR_SET_PDEATHSIG` follows the thread):
/// call this only from a thread that outlives the child (every caller does: the session
/// thread, `mur exec`'s main thread).
pub fn spawn(s: Spawn<'_>) -> Result<Proc, Diagnostic> {
    if let Some(refusal) = super::class::unix_sockets_refusal(s.class, s.unix_sockets) {
        return Err(refusal);
    }
    if s.runtime && s.class != Class::Advisory {
        return Err(install_error(
            0,
            "a delegated runtime contains itself and is started advisory",
        ));
    }
    if s.in_fork.is_some() && s.class != Class::Advisory {
        return Err(install_error(0, "only an advisory helper of mur's own is forked"));
    }
    let runtime = s.runtime;
    let parent_pid = rustix::process::getpid().as_raw_nonzero().get();
    let contained = s.class >= Class::Scoped;
    let Prepared {
        ruleset,
        filter,
        mut plan,
    } = prepare(&s)?;
    let ruleset_fd = ruleset.as_ref().map(|f| f.as_raw_fd());
    let Namespaces {
        join,
        closed,
        pid_namespace,
        own_maps,
    } = namespaces(&s, plan.as_mut());
    let sealed_ops = plan.as_ref().map(|p| p.descriptions()).unwrap_or_default();
    let (err_r, err_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(std::io::Error::from)
        .and_then(|(r, w)| Ok((super::process::above_2(r)?, super::process::above_2(w)?)))
        .map_err(|e| install_error(0, e))?;
    let err_fd = err_w.as_raw_fd();
    let cannot_start = |e: std::io::Error| cannot_start(s.program, e);
    let cwd = s.workdir_held.unwrap_or(s.workdir);
    let image = match s.in_fork {
        Some(run) => super::process::Image::forked(run, cwd),
        None => super::process::Image::new(s.program, s.args, s.env, cwd),
    }
    .map_err(cannot_start)?;
    let sealed = plan.is_some();
    // No cgroup bounds a contained child: a PID namespace of its own (the plan's under
    // `sealed`), pid 1 dying with `mur`, and `RLIMIT_NPROC` in its user namespace.
    let limits = child_limits(runtime, s.rlimits, pid_namespace);
    let steps = ChildSteps {
        err_fd,
        fault: injected_fault(),
        runtime,
        parent_pid,
        contained,
        closed_network: closed,
        pid_namespace,
        mur_pidfd: own_pidfd(),
        join_fd: s.cgroup.and_then(|c| c.join_fd()),
        join,
        own_net_maps: own_maps.as_ref().map(|(u, g)| (u.as_slice(), g.as_slice())),
        limits: &limits,
        filter: filter.as_ref(),
        ruleset_fd,
        private_rules: sealed.then(|| {
            (
                rules::workdir_rights(s.landlock_abi, s.workdir_exec).bits(),
                rules::read_rights().bits(),
            )
        }),
    };
    // The hook runs in the child before exec, in `mur`'s memory (and under `sealed` in pid 1
    // until it released the start). It only makes syscalls on values prepared above
    // (descriptors, a compiled filter, a ruleset, the sealed plan) and allocates nothing.
    let mut hook = |side: &super::process::Side<'_>| steps.run_child(side, plan.as_mut());
    let exec_failed = |errno: i32| {
        let f = Failure {
            step: STEP_EXEC,
            errno,
            detail: 0,
        };
        let _ = child::write_fd(err_fd, &f.encode());
    };
    let spawned = super::process::start(
        &image,
        [s.stdin, s.stdout, s.stderr],
        sealed || pid_namespace,
        &mut hook,
        &exec_failed,
    );
    drop(err_w);
    drop(ruleset);
    settle(spawned, err_r, s.program, &sealed_ops)
}

/// Which namespaces a child joins and makes.
struct Namespaces {
    /// The session's user and network namespaces to join (a contained child only).
    join: Option<(Option<RawFd>, RawFd)>,
    /// No network namespace at all: the network closed by the filter and the ruleset.
    closed: bool,
    /// No cgroup bounds it: a PID namespace of its own (the plan's under `sealed`), pid 1
    /// dying with `mur`, and `RLIMIT_NPROC` in its user namespace.
    pid_namespace: bool,
    /// The id maps of a user namespace the child makes itself.
    own_maps: Option<(Vec<u8>, Vec<u8>)>,
}

/// Step: the namespaces of `s`'s child. Only a contained child joins the session's (advisory
/// constrains nothing, the network included), and a sealed plan then makes no user or
/// network namespace of its own where it joined them. Not root, a contained child outside
/// `sealed` without the session's namespace makes its network namespace (or, its network
/// closed, only what holds its PID namespace) inside a user namespace of its own.
fn namespaces(s: &Spawn<'_>, plan: Option<&mut sealed::Plan>) -> Namespaces {
    let contained = s.class >= Class::Scoped;
    let join = s.net.filter(|_| contained).map(Join::raw);
    let sealed = plan.is_some();
    if let (Some(p), Some((user, _))) = (plan, join) {
        p.share_network();
        if user.is_some() {
            p.share_user();
        }
    }
    let closed = closed_network(s);
    let pid_namespace = contained && s.cgroup.is_none();
    let own_maps = (contained
        && join.is_none()
        && !sealed
        && (!closed || pid_namespace)
        && !rustix::process::geteuid().is_root())
    .then(super::child::own_id_maps);
    Namespaces {
        join,
        closed,
        pid_namespace,
        own_maps,
    }
}

/// "cannot start PROGRAM": the program did not start (E-RUN-014).
fn cannot_start(program: &Path, e: std::io::Error) -> Diagnostic {
    Diagnostic::new(
        code::RUN_CONTAINMENT,
        "",
        format!("cannot start {}: {e}", program.display()),
    )
}

/// The hard limits of a child. A delegated runtime keeps the host's: wasmtime reserves
/// address space far beyond any command's, and the child sets its own subprocesses' limits.
/// All but the core size: a runtime holds its spawn credential and approval in memory, and
/// a core file would write them to disk.
/// Where no cgroup bounds the child (`nproc`), `RLIMIT_NPROC` is its process ceiling.
fn child_limits(runtime: bool, l: Rlimits, nproc: bool) -> Vec<(super::child::Resource, u64)> {
    if runtime {
        return vec![(libc::RLIMIT_CORE, 0)];
    }
    let mut v = vec![
        (libc::RLIMIT_NOFILE, l.open_files),
        (libc::RLIMIT_FSIZE, l.file_size),
        (libc::RLIMIT_CPU, l.cpu_seconds),
        (libc::RLIMIT_CORE, 0),
        (libc::RLIMIT_AS, l.address_space),
    ];
    if nproc {
        v.push((libc::RLIMIT_NPROC, l.processes));
    }
    v
}

/// Step: what the start came to. Every writer of the error pipe has exec'd or exited by now
/// (a sealed sandbox's pid 1 closed all it holds before the start returned), so its read
/// ends at once; a step the child reported failing wins, and a child that started anyway
/// is killed and reaped.
fn settle(
    spawned: std::io::Result<Proc>,
    err_r: OwnedFd,
    program: &Path,
    sealed_ops: &[String],
) -> Result<Proc, Diagnostic> {
    let mut msg = Vec::new();
    let _ = std::fs::File::from(err_r).read_to_end(&mut msg);
    let failure = Failure::decode(&msg).filter(|f| (f.step as usize) < STEPS.len() && f.step > 0);
    let report = |f: Failure| match f.step {
        STEP_EXEC => cannot_start(program, std::io::Error::from_raw_os_error(f.errno)),
        _ => reported(f, sealed_ops),
    };
    match (spawned, failure) {
        (Ok(mut child), Some(f)) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(report(f))
        }
        (Ok(child), None) => Ok(child),
        (Err(_), Some(f)) => Err(report(f)),
        (Err(e), None) => Err(cannot_start(program, e)),
    }
}

/// The namespace's descriptors a child joins with `setns`: the user namespace that owns it
/// (only when `mur` is not root, which needs one to be allowed to make a network namespace)
/// and the network namespace.
#[derive(Debug)]
pub struct Join {
    pub user: Option<OwnedFd>,
    pub net: OwnedFd,
}

impl Join {
    /// The raw descriptors, for the child side of a spawn (which must not allocate).
    pub fn raw(&self) -> (Option<RawFd>, RawFd) {
        (self.user.as_ref().map(|f| f.as_raw_fd()), self.net.as_raw_fd())
    }
}
