//! The host probe: which mechanisms really work here. Entering a network namespace, a
//! seccomp filter or a landlock domain is irreversible, so each check runs in a fresh child
//! process (`mur __probe`) and reports back one JSON line; the runtime never restricts
//! itself while probing.

#![allow(unsafe_code)]

use super::class::Class;
use crate::diag::errno_text;
use landlock::{Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr};

pub use super::class::HostReport;

/// Run the probe in a child of `exe` (the `mur` binary) and read its report. Only the
/// mechanisms of the classes up to `floor` are probed (the achieved class never exceeds the
/// floor, so the rest cannot change the decision): an `advisory` floor starts no process,
/// and only a `sealed` one composes a trial root.
pub fn probe(exe: &std::path::Path, floor: Class) -> HostReport {
    let mut report = probe_raw(exe, floor);
    if let Ok(spec) = std::env::var("MURMUR_PROBE_DENY") {
        report.apply_simulated_denials(&spec);
    }
    report
}

/// [`probe`] without `MURMUR_PROBE_DENY`'s simulated denials: the host's own answer, as the
/// probe cache keeps it.
pub fn probe_raw(exe: &std::path::Path, floor: Class) -> HostReport {
    if floor == Class::Advisory {
        let skipped = || Err::<(), _>("not probed: the floor is advisory".to_string());
        return HostReport {
            landlock_abi: 0,
            landlock: skipped(),
            seccomp: skipped(),
            netns: skipped(),
            pids_cgroup: skipped(),
            pidns: skipped(),
            sealed: skipped(),
        };
    }
    let out = std::process::Command::new(exe)
        .arg("__probe")
        .arg(floor.as_str())
        .env_clear()
        .envs(std::env::var_os(super::cgroup::PARENT_VAR).map(|v| (super::cgroup::PARENT_VAR, v)))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let failed = |why: String| HostReport {
        landlock_abi: 0,
        landlock: Err(why.clone()),
        seccomp: Err(why.clone()),
        netns: Err(why.clone()),
        pids_cgroup: Err(why.clone()),
        pidns: Err(why.clone()),
        sealed: Err(why),
    };
    match out {
        Ok(o) => serde_json::from_slice::<HostReport>(&o.stdout)
            .unwrap_or_else(|_| failed(format!("the probe child failed ({})", o.status))),
        Err(e) => failed(errno_text("spawn of the probe child", &e)),
    }
}

/// The probe child: run every check on itself and print the report. Called by `mur __probe`.
pub fn child_main(up_to: Class) -> i32 {
    let sealed = if up_to == Class::Sealed {
        sealed_works()
    } else {
        Err(format!("not probed: the floor is {}", up_to.as_str()))
    };
    // Before anything restricts this process: the cgroup check reads /proc and writes the
    // cgroup tree.
    let pids_cgroup = super::cgroup::available();
    let pidns = pidns_works();
    // The namespace as a contained command or the session's helper makes it, `lo` up
    // included: `Ok` means theirs will work.
    let netns = super::egress::namespace::enter_own();
    let seccomp = seccomp_works();
    let (landlock_abi, landlock) = landlock_works();
    let report = HostReport {
        landlock_abi,
        landlock,
        seccomp,
        netns,
        pids_cgroup,
        pidns,
        sealed,
    };
    println!("{}", serde_json::to_string(&report).unwrap_or_default());
    0
}

/// Run the sealed plan (no workdir, no files) in a forked child and report how far it got.
fn sealed_works() -> Result<(), String> {
    run_plan(&mut super::sealed::plan(None, &Default::default(), &[], false)?)
}

/// Run `plan` in a forked child and report how far it got (the probe's sealed check, and
/// the sealed root's unit tests).
pub(super) fn run_plan(plan: &mut super::sealed::Plan) -> Result<(), String> {
    let ops = plan.descriptions();
    let (r, w) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let wfd = std::os::fd::AsRawFd::as_raw_fd(&w);
    // SAFETY: the probe process is single-threaded (a unit test's is not, and glibc's fork
    // leaves malloc usable in the child); the child only runs the plan (syscalls on
    // prepared values), writes to the pipe and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(errno_text("fork", &std::io::Error::last_os_error()));
    }
    if pid == 0 {
        // The root is composed in pid 1 of the new PID namespace (only there can `/proc` be
        // mounted): the next process this child forks.
        let composed = plan.enter().and_then(|()| {
            // SAFETY: as above; the grandchild only composes, reports and exits.
            match unsafe { libc::fork() } {
                0 => {
                    // Nothing allocated after a fork of a possibly threaded process.
                    let _ = match plan.compose_root() {
                        Ok(()) => super::child::write_fd(wfd, &[0u8]),
                        Err(f) => super::child::write_fd(wfd, &f.encode()),
                    };
                    // SAFETY: leaving the forked child without running the parent's destructors.
                    unsafe { libc::_exit(0) }
                }
                pid if pid < 0 => Err(super::sealed::Failure {
                    step: super::sealed::STEP_FORK_INIT,
                    errno: std::io::Error::last_os_error()
                        .raw_os_error()
                        .unwrap_or(libc::EINVAL),
                    detail: 0,
                }),
                pid => {
                    let mut status = 0;
                    // SAFETY: waiting for the grandchild forked above.
                    unsafe { libc::waitpid(pid, &mut status, 0) };
                    Ok(())
                }
            }
        });
        if let Err(f) = composed {
            let _ = super::child::write_fd(wfd, &f.encode());
        }
        // SAFETY: leaving the forked child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    drop(w);
    let mut msg = Vec::new();
    let _ = std::io::Read::read_to_end(&mut std::fs::File::from(r), &mut msg);
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match (msg.as_slice(), super::sealed::Failure::decode(&msg)) {
        ([0], _) => Ok(()),
        (_, Some(f)) => Err(format!(
            "sealed: {}: errno {} ({})",
            super::spawn::failed_step(&f, &ops),
            f.errno,
            std::io::Error::from_raw_os_error(f.errno)
        )),
        _ => Err("sealed: the probe child reported nothing".into()),
    }
}

/// Whether a command can be bounded and ended without a cgroup: in a forked child, a new
/// user and PID namespace and `RLIMIT_NPROC` 2; its first fork (pid 1 of the namespace,
/// the second process of the user namespace) must get through and pid 1's own fork must be
/// refused with EAGAIN. Only where the count is the user namespace's own (Linux 5.14 and
/// later) does the first fork get through for a user with more processes than that, and
/// only where the limit binds (never for a real uid 0 of the host, which the kernel exempts,
/// whatever the effective uid or the namespace's map says) is the second refused.
fn pidns_works() -> Result<(), String> {
    if rustix::process::geteuid().is_root() {
        return Err("uid 0 is not bound by RLIMIT_NPROC, so only a pids cgroup bounds its sessions".into());
    }
    // SAFETY: the probe process is single-threaded; the child makes raw calls and exits.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(errno_text("fork", &std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let code = match pidns_trial() {
            Ok(()) => 0,
            Err(step) => step,
        };
        // SAFETY: leaving the forked child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => Ok(()),
        Some(1) => Err("unshare(CLONE_NEWUSER | CLONE_NEWPID): refused".into()),
        Some(2) => Err("setrlimit(RLIMIT_NPROC): refused".into()),
        Some(3) => Err("fork in a new PID namespace under RLIMIT_NPROC 2 failed: this kernel counts RLIMIT_NPROC per user, not per user namespace (Linux 5.14 and later do)".into()),
        Some(4) => Err("RLIMIT_NPROC does not bind this process (its real uid is the host's uid 0)".into()),
        _ => Err(format!("the PID namespace trial failed ({status:#x})")),
    }
}

/// The child side of [`pidns_works`]: the step that failed (1 to 4).
fn pidns_trial() -> Result<(), i32> {
    // SAFETY: unshare takes flags only; this process is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) } != 0 {
        return Err(1);
    }
    super::child::limit(libc::RLIMIT_NPROC, 2).map_err(|_| 2)?;
    // SAFETY: a fork of this single-threaded child; the grandchild makes raw calls only.
    match unsafe { libc::fork() } {
        0 => {
            // Pid 1: its own fork would be the third process of the namespace.
            // SAFETY: a fork of pid 1, single-threaded; the child makes no call but _exit.
            let code = match unsafe { libc::fork() } {
                // SAFETY: leaving the forked child without running any destructor.
                0 => unsafe { libc::_exit(0) },
                p if p < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) => 0,
                p if p < 0 => 5,
                _ => 4,
            };
            // SAFETY: leaving the forked child without running the parent's destructors.
            unsafe { libc::_exit(code) }
        }
        p if p < 0 => Err(3),
        p => {
            let mut st = 0;
            // SAFETY: waiting for the grandchild forked above.
            unsafe { libc::waitpid(p, &mut st, 0) };
            match libc::WIFEXITED(st).then(|| libc::WEXITSTATUS(st)) {
                Some(0) => Ok(()),
                Some(c) => Err(c),
                None => Err(6),
            }
        }
    }
}

fn seccomp_works() -> Result<(), String> {
    let mut rules = std::collections::BTreeMap::new();
    rules.insert(libc::SYS_getppid, Vec::new());
    let filter = seccompiler::SeccompFilter::new(
        rules,
        seccompiler::SeccompAction::Allow,
        seccompiler::SeccompAction::Errno(libc::EPERM as u32),
        super::seccomp_arch(),
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    let prog: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("seccomp filter: {e}"))?;
    seccompiler::apply_filter(&prog).map_err(|e| format!("seccomp(SECCOMP_SET_MODE_FILTER): {e}"))?;
    match super::child::raw_getppid() {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(()),
        _ => Err("seccomp: a loaded filter did not deny getppid".into()),
    }
}

/// The ABI version the kernel reports (`landlock_create_ruleset(NULL, 0,
/// LANDLOCK_CREATE_RULESET_VERSION)`). Asked, not inferred: the filesystem access sets of
/// ABI 5 and 6 are equal, so trying rulesets would take an ABI-5 kernel for 6.
fn kernel_abi() -> std::io::Result<u32> {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with the VERSION flag the kernel reads no attribute (NULL, size 0) and only
    // returns a number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u32::try_from(rc).unwrap_or(0))
}

/// The ABI the kernel offers, and whether a ruleset there really denies.
fn landlock_works() -> (u32, Result<(), String>) {
    let n = match kernel_abi() {
        Ok(n) if n > 0 => n,
        Ok(_) => return (0, Err("landlock_create_ruleset: ABI version 0".into())),
        Err(e) => {
            return (
                0,
                Err(errno_text(
                    "landlock_create_ruleset(LANDLOCK_CREATE_RULESET_VERSION)",
                    &e,
                )),
            )
        }
    };
    let abi = super::rules::abi(n);
    let restricted = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    if let Err(e) = restricted {
        return (n, Err(format!("landlock_restrict_self: {e}")));
    }
    match std::fs::read_dir("/") {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => (n, Ok(())),
        Err(e) => (n, Err(errno_text("landlock check open(/)", &e))),
        Ok(_) => (n, Err("landlock: a ruleset was accepted but did not deny".into())),
    }
}
