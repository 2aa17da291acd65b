//! `mur-roost` confines itself once its port is bound: landlock with read-only access to the
//! registry and nothing else on the filesystem, a seccomp allow list of exactly what the
//! event loop uses (everything else EPERM), and `no_new_privs`. A missing mechanism is
//! reported as one line and the daemon carries on.

use landlock::{
    Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
};
use std::path::Path;

/// What the daemon's loop calls after start-up: sockets and epoll, reading the registry,
/// memory, time, randomness, and the runtime's own housekeeping.
pub const ROOST_ALLOWED: &[(&str, libc::c_long)] = syscalls![
    SYS_accept4,
    SYS_brk,
    SYS_clock_gettime,
    SYS_clock_nanosleep,
    SYS_close,
    SYS_epoll_ctl,
    SYS_epoll_pwait,
    SYS_eventfd2,
    SYS_exit,
    SYS_exit_group,
    SYS_fcntl,
    SYS_fstat,
    SYS_fstatfs,
    SYS_futex,
    SYS_getdents64,
    SYS_getpeername,
    SYS_getpid,
    SYS_getrandom,
    SYS_getsockname,
    SYS_getsockopt,
    SYS_gettid,
    SYS_ioctl,
    SYS_lseek,
    SYS_madvise,
    SYS_mmap,
    SYS_mprotect,
    SYS_mremap,
    SYS_munmap,
    SYS_nanosleep,
    SYS_newfstatat,
    SYS_openat,
    SYS_read,
    SYS_readv,
    SYS_recvfrom,
    SYS_recvmsg,
    SYS_rt_sigaction,
    SYS_rt_sigprocmask,
    SYS_rt_sigreturn,
    SYS_sched_yield,
    SYS_sendmsg,
    SYS_sendto,
    SYS_setsockopt,
    SYS_shutdown,
    SYS_sigaltstack,
    SYS_statx,
    SYS_tgkill,
    SYS_write,
    SYS_writev,
    SYS_sched_getaffinity,
    SYS_readlinkat,
    SYS_prlimit64,
    SYS_rseq,
];

/// `epoll_wait`, which mio may still call on x86-64 (aarch64 only has `epoll_pwait`).
#[cfg(target_arch = "x86_64")]
pub const ROOST_ALLOWED_ARCH: &[(&str, libc::c_long)] = syscalls![SYS_epoll_wait];
#[cfg(not(target_arch = "x86_64"))]
pub const ROOST_ALLOWED_ARCH: &[(&str, libc::c_long)] = &[];

/// Confine the calling process (the daemon, after bind): one stderr line per missing piece.
pub fn confine_roost(registry: &Path) -> Vec<String> {
    let mut notes = Vec::new();
    if let Err(e) = rustix::thread::set_no_new_privs(true) {
        notes.push(format!("mur-roost: no_new_privs not set: {e}"));
    }
    let landlock = (|| -> Result<(), String> {
        let abi = landlock::ABI::V6;
        let mut set = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))
            .map_err(|e| e.to_string())?
            .create()
            .map_err(|e| e.to_string())?;
        if let Ok(fd) = PathFd::new(registry) {
            set = set
                .add_rule(PathBeneath::new(fd, AccessFs::from_read(abi)))
                .map_err(|e| e.to_string())?;
        }
        let status = set.restrict_self().map_err(|e| e.to_string())?;
        match status.ruleset {
            landlock::RulesetStatus::NotEnforced => Err("the kernel does not enforce landlock".into()),
            _ => Ok(()),
        }
    })();
    if let Err(e) = landlock {
        notes.push(format!("mur-roost: landlock not in force: {e}"));
    }
    let seccomp = (|| -> Result<(), String> {
        let mut rules = std::collections::BTreeMap::new();
        for (_, nr) in ROOST_ALLOWED.iter().chain(ROOST_ALLOWED_ARCH) {
            rules.insert(*nr, Vec::new());
        }
        let prog = super::seccomp::compile(rules)?;
        seccompiler::apply_filter_all_threads(&prog).map_err(|e| e.to_string())
    })();
    if let Err(e) = seccomp {
        notes.push(format!("mur-roost: seccomp not in force: {e}"));
    }
    notes
}
