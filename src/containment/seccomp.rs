//! The seccomp policy, as data: the syscalls a contained child may make (in the style of the
//! OCI default profile), the ones that must stay denied, and (in `seccomp_args`) the calls
//! allowed only for some arguments.
//! Everything not allowed answers EPERM; a foreign architecture is killed by the filter's
//! architecture check. `audit/syscalls.md` gives the reason for each allowed call.

use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule};
use std::collections::BTreeMap;

/// Allowed unconditionally, on every architecture.
pub const ALLOWED: &[(&str, libc::c_long)] = syscalls![
    SYS_accept,
    SYS_accept4,
    SYS_bind,
    SYS_brk,
    SYS_capget,
    SYS_capset,
    SYS_chdir,
    SYS_clock_getres,
    SYS_clock_gettime,
    SYS_clock_nanosleep,
    SYS_close,
    SYS_close_range,
    SYS_connect,
    SYS_copy_file_range,
    SYS_dup,
    SYS_dup3,
    SYS_epoll_create1,
    SYS_epoll_ctl,
    SYS_epoll_pwait,
    SYS_epoll_pwait2,
    SYS_eventfd2,
    SYS_execve,
    SYS_exit,
    SYS_exit_group,
    SYS_faccessat,
    SYS_faccessat2,
    SYS_fadvise64,
    SYS_fallocate,
    SYS_fchdir,
    SYS_fchmod,
    SYS_fchown,
    SYS_fcntl,
    SYS_fdatasync,
    SYS_fgetxattr,
    SYS_flistxattr,
    SYS_flock,
    SYS_fremovexattr,
    SYS_fsetxattr,
    SYS_fstat,
    SYS_fstatfs,
    SYS_fsync,
    SYS_ftruncate,
    SYS_futex,
    SYS_getcpu,
    SYS_getcwd,
    SYS_getdents64,
    SYS_getegid,
    SYS_geteuid,
    SYS_getgid,
    SYS_getgroups,
    SYS_getitimer,
    SYS_getpeername,
    SYS_getpgid,
    SYS_getpid,
    SYS_getppid,
    SYS_getpriority,
    SYS_getrandom,
    SYS_getresgid,
    SYS_getresuid,
    SYS_getrlimit,
    SYS_getrusage,
    SYS_getsid,
    SYS_getsockname,
    SYS_getsockopt,
    SYS_gettid,
    SYS_gettimeofday,
    SYS_getuid,
    SYS_getxattr,
    SYS_inotify_add_watch,
    SYS_inotify_init1,
    SYS_inotify_rm_watch,
    SYS_kill,
    SYS_landlock_add_rule,
    SYS_landlock_create_ruleset,
    SYS_landlock_restrict_self,
    SYS_lgetxattr,
    SYS_linkat,
    SYS_listen,
    SYS_listxattr,
    SYS_llistxattr,
    SYS_lseek,
    SYS_madvise,
    SYS_membarrier,
    SYS_mincore,
    SYS_mkdirat,
    SYS_mknodat,
    SYS_mlock,
    SYS_mlock2,
    SYS_mlockall,
    SYS_mmap,
    SYS_mprotect,
    SYS_mremap,
    SYS_msync,
    SYS_munlock,
    SYS_munlockall,
    SYS_munmap,
    SYS_nanosleep,
    SYS_newfstatat,
    SYS_openat,
    SYS_openat2,
    SYS_pidfd_open,
    SYS_pidfd_send_signal,
    SYS_pipe2,
    SYS_ppoll,
    SYS_prctl,
    SYS_pread64,
    SYS_preadv,
    SYS_preadv2,
    SYS_pselect6,
    SYS_pwrite64,
    SYS_pwritev,
    SYS_pwritev2,
    SYS_read,
    SYS_readahead,
    SYS_readlinkat,
    SYS_readv,
    SYS_recvfrom,
    SYS_recvmmsg,
    SYS_recvmsg,
    SYS_renameat,
    SYS_renameat2,
    SYS_restart_syscall,
    SYS_rseq,
    SYS_rt_sigaction,
    SYS_rt_sigpending,
    SYS_rt_sigprocmask,
    SYS_rt_sigqueueinfo,
    SYS_rt_sigreturn,
    SYS_rt_sigsuspend,
    SYS_rt_sigtimedwait,
    SYS_rt_tgsigqueueinfo,
    SYS_sched_getaffinity,
    SYS_sched_getattr,
    SYS_sched_getparam,
    SYS_sched_get_priority_max,
    SYS_sched_get_priority_min,
    SYS_sched_getscheduler,
    SYS_sched_rr_get_interval,
    SYS_sched_yield,
    SYS_sendfile,
    SYS_sendmmsg,
    SYS_sendmsg,
    SYS_sendto,
    SYS_setfsgid,
    SYS_setfsuid,
    SYS_setgid,
    SYS_setgroups,
    SYS_setitimer,
    SYS_setpgid,
    SYS_setregid,
    SYS_setresgid,
    SYS_setresuid,
    SYS_setreuid,
    SYS_setrlimit,
    SYS_set_robust_list,
    SYS_setsid,
    SYS_setsockopt,
    SYS_set_tid_address,
    SYS_setuid,
    SYS_shutdown,
    SYS_sigaltstack,
    SYS_socketpair,
    SYS_splice,
    SYS_statfs,
    SYS_statx,
    SYS_symlinkat,
    SYS_sync,
    SYS_sync_file_range,
    SYS_syncfs,
    SYS_sysinfo,
    SYS_tee,
    SYS_tgkill,
    SYS_timer_create,
    SYS_timer_delete,
    SYS_timer_getoverrun,
    SYS_timer_gettime,
    SYS_timer_settime,
    SYS_timerfd_create,
    SYS_timerfd_gettime,
    SYS_timerfd_settime,
    SYS_times,
    SYS_tkill,
    SYS_truncate,
    SYS_umask,
    SYS_uname,
    SYS_unlinkat,
    SYS_wait4,
    SYS_waitid,
    SYS_write,
    SYS_writev,
];

/// The legacy calls x86-64 still has (aarch64 never had them).
#[cfg(target_arch = "x86_64")]
pub const ALLOWED_ARCH: &[(&str, libc::c_long)] = syscalls![
    SYS_access,
    SYS_alarm,
    SYS_arch_prctl,
    SYS_creat,
    SYS_dup2,
    SYS_epoll_create,
    SYS_epoll_wait,
    SYS_eventfd,
    SYS_fork,
    SYS_getdents,
    SYS_getpgrp,
    SYS_inotify_init,
    SYS_link,
    SYS_lstat,
    SYS_mkdir,
    SYS_mknod,
    SYS_open,
    SYS_pause,
    SYS_pipe,
    SYS_poll,
    SYS_readlink,
    SYS_rename,
    SYS_rmdir,
    SYS_select,
    SYS_stat,
    SYS_symlink,
    SYS_time,
    SYS_unlink,
    SYS_vfork,
];
#[cfg(not(target_arch = "x86_64"))]
pub const ALLOWED_ARCH: &[(&str, libc::c_long)] = &[];

/// Never allowed, whatever the allow list grows into (a test keeps the lists disjoint).
pub const MUST_STAY_DENIED: &[(&str, libc::c_long)] = syscalls![
    SYS_io_uring_setup,
    SYS_io_uring_enter,
    SYS_io_uring_register,
    SYS_bpf,
    SYS_userfaultfd,
    SYS_perf_event_open,
    SYS_process_vm_readv,
    SYS_process_vm_writev,
    SYS_open_by_handle_at,
    SYS_name_to_handle_at,
    SYS_keyctl,
    SYS_add_key,
    SYS_request_key,
    SYS_ptrace,
    SYS_mount,
    SYS_umount2,
    SYS_pivot_root,
    SYS_chroot,
    SYS_unshare,
    SYS_setns,
    SYS_init_module,
    SYS_finit_module,
    SYS_delete_module,
    SYS_kexec_load,
    SYS_kexec_file_load,
    SYS_reboot,
    SYS_swapon,
    SYS_swapoff,
    SYS_clock_settime,
    SYS_clock_adjtime,
    SYS_settimeofday,
    SYS_adjtimex,
    SYS_personality,
    SYS_kcmp,
    SYS_acct,
    SYS_quotactl,
    SYS_seccomp,
    SYS_fanotify_init,
    SYS_pidfd_getfd,
    SYS_move_mount,
    SYS_open_tree,
    SYS_fsopen,
    SYS_fsmount,
    SYS_fsconfig,
    SYS_fspick,
    SYS_mount_setattr,
    SYS_set_mempolicy,
    SYS_mbind,
    SYS_migrate_pages,
    SYS_move_pages,
];

/// The path-taking forms of the metadata calls landlock does not mediate (mode, owner,
/// times, extended attributes): a path can name any file outside the workdir, so these stay
/// denied and only the descriptor forms (`fchmod`, `fchown`, `utimensat(fd, NULL, ...)`,
/// `fsetxattr`, `fremovexattr`, `ftruncate`) are allowed. A test keeps them off every allow
/// list. (`setxattrat`/`removexattrat`, Linux 6.13, are not in libc yet; not being listed
/// anywhere they are denied as well.)
pub const METADATA_DENIED: &[(&str, libc::c_long)] = &[
    ("SYS_fchmodat", libc::SYS_fchmodat),
    ("SYS_fchmodat2", SYS_FCHMODAT2),
    ("SYS_fchownat", libc::SYS_fchownat),
    ("SYS_setxattr", libc::SYS_setxattr),
    ("SYS_lsetxattr", libc::SYS_lsetxattr),
    ("SYS_removexattr", libc::SYS_removexattr),
    ("SYS_lremovexattr", libc::SYS_lremovexattr),
];

/// `fchmodat2` (Linux 6.6): 452 on every architecture (the unified table), which libc only
/// names for some.
const SYS_FCHMODAT2: libc::c_long = 452;

/// The legacy path-taking metadata calls of x86-64.
#[cfg(target_arch = "x86_64")]
pub const METADATA_DENIED_ARCH: &[(&str, libc::c_long)] = syscalls![
    SYS_chmod,
    SYS_chown,
    SYS_lchown,
    SYS_utime,
    SYS_utimes,
    SYS_futimesat
];
#[cfg(not(target_arch = "x86_64"))]
pub const METADATA_DENIED_ARCH: &[(&str, libc::c_long)] = &[];

pub use super::seccomp_args::socket_families;

/// The filter for a contained child (`scoped` and `sealed` alike): the allow list, the
/// conditional calls of `seccomp_args`, `clone3` answered `ENOSYS`, EPERM otherwise.
pub fn child_filter(unix_sockets: bool, ip: bool) -> Result<BpfProgram, String> {
    // Pure data: compiled once per process for each pair of values.
    use std::sync::OnceLock;
    static COMPILED: [OnceLock<Result<BpfProgram, String>>; 4] =
        [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    COMPILED[usize::from(unix_sockets) + 2 * usize::from(ip)]
        .get_or_init(|| compile_child_filter(unix_sockets, ip))
        .clone()
}

/// The unconditional calls as ranges of numbers (`seccomp_ranges`: a fifth of the
/// instructions, which the kernel translates at every install) ahead of seccompiler's
/// program of the conditional ones, behind the `clone3` prefix.
fn compile_child_filter(unix_sockets: bool, ip: bool) -> Result<BpfProgram, String> {
    let conditional: BTreeMap<i64, Vec<SeccompRule>> = super::seccomp_args::rules(unix_sockets, ip)?
        .into_iter()
        .collect();
    let mut plain = std::collections::BTreeSet::new();
    for (name, nr) in ALLOWED.iter().chain(ALLOWED_ARCH) {
        if !conditional.contains_key(nr) {
            plain.insert(u32::try_from(*nr).map_err(|_| format!("{name}: no syscall number"))?);
        }
    }
    let rest = compile(conditional)?;
    Ok(super::seccomp_args::with_clone3_enosys(
        super::seccomp_ranges::with_allowed_ranges(&plain, rest),
    ))
}

/// Compile `rules` (allow on match, EPERM otherwise) for the native architecture.
pub fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>) -> Result<BpfProgram, String> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        super::seccomp_arch(),
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::seccomp_args::CONDITIONAL;
    use super::*;

    fn allowed_anyhow() -> impl Iterator<Item = &'static (&'static str, libc::c_long)> {
        ALLOWED.iter().chain(ALLOWED_ARCH).chain(CONDITIONAL)
    }

    #[test]
    fn denied_and_allowed_lists_are_disjoint() {
        let denied = MUST_STAY_DENIED
            .iter()
            .chain(METADATA_DENIED)
            .chain(METADATA_DENIED_ARCH)
            .chain(syscalls![SYS_clone3]);
        for (name, nr) in denied {
            assert!(
                !allowed_anyhow().any(|(_, a)| a == nr),
                "{name} is both allowed and denied"
            );
        }
        for (name, nr) in CONDITIONAL {
            assert!(
                !ALLOWED.iter().chain(ALLOWED_ARCH).any(|(_, a)| a == nr),
                "{name} is allowed unconditionally as well"
            );
        }
    }

    #[test]
    fn audit_lists_every_allowed_syscall() {
        let doc = include_str!("../../audit/syscalls.md");
        let listed = allowed_anyhow()
            .chain(super::super::confine::ROOST_ALLOWED)
            .chain(super::super::confine::ROOST_ALLOWED_ARCH);
        for (name, _) in listed {
            let row = format!("| `{}` | ", name.trim_start_matches("SYS_"));
            assert!(doc.contains(&row), "audit/syscalls.md has no line for {name}");
        }
    }

    #[test]
    fn the_filter_compiles_and_stays_small() {
        let with = child_filter(true, true).unwrap();
        let without = child_filter(false, true).unwrap();
        assert!(without.len() < with.len());
        let closed = child_filter(false, false).unwrap();
        assert!(closed.len() < without.len());
        assert!(with.len() < 4096, "BPF_MAXINSNS");
    }
}
