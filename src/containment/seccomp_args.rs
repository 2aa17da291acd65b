//! The calls a contained child may make only with some arguments, as data: `socket` by
//! family, `clone` without a namespace flag, `ioctl` without the terminal-injection
//! requests, `execveat` without `AT_EMPTY_PATH`, `utimensat` only on a descriptor (a NULL
//! path), `memfd_create` only for a memfd that can never be executed, and the calls that
//! take a pid (`prlimit64`, `setpriority`, `sched_set*`, `get_robust_list`) only for the
//! caller itself (pid 0: `scoped` has no PID namespace, so another pid can be a host
//! process, `mur` included). `clone3`, whose
//! flags live in memory a filter cannot read, answers `ENOSYS` so the C library falls back
//! to `clone`. `audit/syscalls.md` gives the reason for each.

use seccompiler::{sock_filter, BpfProgram, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompRule};

/// Allowed only when their arguments pass the conditions of [`rules`] (a test keeps them
/// off the other lists, and `audit/syscalls.md` lists each).
pub const CONDITIONAL: &[(&str, libc::c_long)] = syscalls![
    SYS_socket,
    SYS_clone,
    SYS_ioctl,
    SYS_execveat,
    SYS_utimensat,
    SYS_memfd_create,
    SYS_prlimit64,
    SYS_setpriority,
    SYS_sched_setaffinity,
    SYS_sched_setscheduler,
    SYS_sched_setparam,
    SYS_sched_setattr,
    SYS_get_robust_list,
];

/// The calls whose first argument is a pid (`pid_t`, 32 bits) and which act on that
/// process: allowed only with pid 0, the caller itself. Under `scoped` (no PID namespace)
/// any other pid may be a host process of the same uid, `mur` itself among them:
/// `prlimit64` has no capability check beyond the uid, so `RLIMIT_CPU` 1 killed a host
/// process and `RLIMIT_NOFILE` 0 on `mur` kept it from cleaning up the session.
pub const SELF_ONLY: [(&str, libc::c_long); 6] = [
    ("prlimit64", libc::SYS_prlimit64),
    ("sched_setaffinity", libc::SYS_sched_setaffinity),
    ("sched_setscheduler", libc::SYS_sched_setscheduler),
    ("sched_setparam", libc::SYS_sched_setparam),
    ("sched_setattr", libc::SYS_sched_setattr),
    ("get_robust_list", libc::SYS_get_robust_list),
];

/// Every `CLONE_NEW*` bit: a new user namespace gives its creator a full capability set in
/// it (raw sockets, netfilter), whatever was dropped outside. `CLONE_NEWTIME` (0x80) shares
/// its bit with the exit signal of `clone`, which is at most 64, so masking it costs nothing.
pub const CLONE_NEW_MASK: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWTIME) as u32 as u64;

/// The `ioctl` requests that push bytes into a terminal's input (`TIOCSTI`) or, on a
/// virtual console, paste its selection (`TIOCLINUX`). The kernel reads the request as 32
/// bits, and so does the filter, so bits above cannot dodge it.
// glibc types the requests `c_ulong`, musl `c_int`: widened alike.
#[allow(clippy::unnecessary_cast)]
pub const DENIED_IOCTLS: [(&str, u64); 2] = [
    ("TIOCSTI", libc::TIOCSTI as u64),
    ("TIOCLINUX", libc::TIOCLINUX as u64),
];

/// `memfd_create` flags: the memfd is sealed non-executable (Linux 6.3), or asks to be
/// executable.
pub const MFD_NOEXEC_SEAL: u64 = 0x0008;
pub const MFD_EXEC: u64 = 0x0010;

/// `socket(domain, ...)` is allowed for these families only: the IP families where the
/// child is in a network namespace of its own or the session's (`ip`), never otherwise.
pub fn socket_families(unix_sockets: bool, ip: bool) -> Vec<(&'static str, i32)> {
    let mut f = Vec::new();
    if ip {
        f.extend([("AF_INET", libc::AF_INET), ("AF_INET6", libc::AF_INET6)]);
    }
    if unix_sockets {
        f.push(("AF_UNIX", libc::AF_UNIX));
    }
    f
}

fn cond(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, len, op, value).map_err(|e| e.to_string())
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conds).map_err(|e| e.to_string())
}

/// The rules of every conditional call: the call is allowed when any of its rules matches
/// (each rule: all of its conditions hold), `EPERM` otherwise.
pub fn rules(unix_sockets: bool, ip: bool) -> Result<Vec<(libc::c_long, Vec<SeccompRule>)>, String> {
    use SeccompCmpArgLen::{Dword, Qword};
    let families = socket_families(unix_sockets, ip)
        .into_iter()
        .map(|(_, af)| rule(vec![cond(0, Dword, SeccompCmpOp::Eq, af as u64)?]))
        .collect::<Result<Vec<_>, String>>()?;
    let ioctl = DENIED_IOCTLS
        .iter()
        .map(|(_, req)| cond(1, Dword, SeccompCmpOp::Ne, *req))
        .collect::<Result<Vec<_>, String>>()?;
    let self_only = || -> Result<Vec<SeccompRule>, String> {
        Ok(vec![rule(vec![cond(0, Dword, SeccompCmpOp::Eq, 0)?])?])
    };
    // setpriority(which, who, prio): `who` 0 is the caller, its process group (its own
    // session's, after setsid) or, for PRIO_USER, every process of its uid: only the first
    // two.
    let setpriority = [libc::PRIO_PROCESS, libc::PRIO_PGRP]
        .into_iter()
        .map(|which| {
            rule(vec![
                cond(0, Dword, SeccompCmpOp::Eq, which as u64)?,
                cond(1, Dword, SeccompCmpOp::Eq, 0)?,
            ])
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut out = vec![(libc::SYS_setpriority, setpriority)];
    for (_, nr) in SELF_ONLY {
        out.push((nr, self_only()?));
    }
    // No family at all: `socket` is left out, so the default (EPERM) answers it. (An empty
    // rule list would allow the call unconditionally.)
    if !families.is_empty() {
        out.push((libc::SYS_socket, families));
    }
    out.extend([
        // flags are argument 0 on x86-64 and aarch64 alike, read as 32 bits by the kernel.
        (
            libc::SYS_clone,
            vec![rule(vec![cond(
                0,
                Dword,
                SeccompCmpOp::MaskedEq(CLONE_NEW_MASK),
                0,
            )?])?],
        ),
        (libc::SYS_ioctl, vec![rule(ioctl)?]),
        (
            libc::SYS_execveat,
            vec![rule(vec![cond(
                4,
                Dword,
                SeccompCmpOp::MaskedEq(libc::AT_EMPTY_PATH as u64),
                0,
            )?])?],
        ),
        // utimensat(fd, NULL, ...) is futimens: the descriptor form. The path is a pointer,
        // compared in full.
        (
            libc::SYS_utimensat,
            vec![rule(vec![cond(1, Qword, SeccompCmpOp::Eq, 0)?])?],
        ),
        (
            libc::SYS_memfd_create,
            vec![rule(vec![cond(
                1,
                Dword,
                SeccompCmpOp::MaskedEq(MFD_NOEXEC_SEAL | MFD_EXEC),
                MFD_NOEXEC_SEAL,
            )?])?],
        ),
    ]);
    Ok(out)
}

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;

/// `prog` with a prefix that answers `clone3` with `ENOSYS` (on the native architecture;
/// anything else falls through to `prog`, whose architecture check kills it). seccompiler
/// gives one action to every rule, so this one answer is written by hand; BPF jumps are
/// relative, so `prog` is unchanged behind it.
pub fn with_clone3_enosys(prog: BpfProgram) -> BpfProgram {
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    let mut out = vec![
        ins(BPF_LD_W_ABS, 0, 0, 4),                                    // seccomp_data.arch
        ins(BPF_JEQ_K, 0, 3, super::AUDIT_ARCH),                       // foreign: to prog
        ins(BPF_LD_W_ABS, 0, 0, 0),                                    // seccomp_data.nr
        ins(BPF_JEQ_K, 0, 1, libc::SYS_clone3 as u32),                 // not clone3: to prog
        ins(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | libc::ENOSYS as u32), // clone3: ENOSYS
    ];
    out.extend(prog);
    out
}
