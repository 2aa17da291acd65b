//! The steps a child installs on itself between clone and exec (under `sealed`, in pid 1,
//! which never execs). Each is one syscall or a short fixed sequence, allocates nothing, and
//! returns the OS error so the spawn fails closed. Only the spawn function (and the probe
//! child) call these.
#![allow(unsafe_code)]

use std::io;

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A network namespace with only a loopback, down (the caller brings it up). As root a plain
/// `CLONE_NEWNET`; otherwise inside a new user namespace, which grants the right to do it.
pub fn enter_network_namespace() -> io::Result<()> {
    let flags = if rustix::process::geteuid().is_root() {
        libc::CLONE_NEWNET
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNET
    };
    // SAFETY: unshare takes flags only; in a single-threaded child it affects nothing else.
    check(unsafe { libc::unshare(flags) } as libc::c_long)
}

/// Join the namespace `fd` refers to (`nstype` one `CLONE_NEW*` flag): the session's user
/// namespace, then its network namespace.
pub fn join_namespace(fd: libc::c_int, nstype: libc::c_int) -> io::Result<()> {
    // SAFETY: setns takes a descriptor the parent holds and a flag.
    check(unsafe { libc::setns(fd, nstype) } as libc::c_long)
}

/// A new session: the child leads its own session and process group and has no
/// controlling terminal, so `TIOCSTI` cannot reach the operator's terminal (the kernel
/// refuses it on a terminal that is not the caller's controlling one) and the terminal's
/// job-control signals do not reach it.
pub fn new_session() -> io::Result<()> {
    // SAFETY: setsid takes no arguments; it only changes this process's session.
    check(unsafe { libc::setsid() } as libc::c_long)
}

/// SIGTERM to this process when the thread that forked it exits; if the parent `parent`
/// is already gone (the race the man page describes), exit at once instead.
pub fn die_with_parent(parent: i32) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number; getppid takes nothing.
    check(
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) }
            as libc::c_long,
    )?;
    // SAFETY: getppid has no arguments and cannot fail.
    if unsafe { libc::getppid() } != parent {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// A new user namespace of its own (its ids mapped next), to hold a PID namespace where no
/// network namespace could be made.
pub fn enter_user_namespace() -> io::Result<()> {
    // SAFETY: unshare takes flags only; the caller is a single-threaded child.
    check(unsafe { libc::unshare(libc::CLONE_NEWUSER) } as libc::c_long)
}

/// A new PID namespace: the next process this one starts is its pid 1, and every process
/// of the namespace is killed when that one dies.
pub fn enter_pid_namespace() -> io::Result<()> {
    // SAFETY: unshare takes flags only; the caller is a single-threaded child.
    check(unsafe { libc::unshare(libc::CLONE_NEWPID) } as libc::c_long)
}

/// SIGKILL to this process when the thread of `mur` that started it dies, `mur` killed
/// outright included: set in pid 1 of a command's PID namespace, whose death takes every
/// process of the namespace with it. Pid 1's parent is outside its namespace, so `getppid`
/// reads 0 and cannot tell whether `mur` died before the request: `mur_pidfd` (a pidfd of
/// `mur`, readable once it has exited) tells, and then this fails (ESRCH).
pub fn die_with_mur(mur_pidfd: libc::c_int) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number.
    check(
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) }
            as libc::c_long,
    )?;
    let mut p = libc::pollfd {
        fd: mur_pidfd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call; a zero timeout only looks.
    let ready = unsafe { libc::poll(&mut p, 1, 0) };
    if ready != 0 {
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// An empty signal mask: `mur` blocks SIGINT and SIGTERM to forward them, and a mask is
/// inherited across exec, so the child must start with none blocked.
pub fn unblock_signals() -> io::Result<()> {
    // SAFETY: sigemptyset initialises the local set; SIG_SETMASK reads it; the old-set
    // pointer may be null.
    let rc = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut())
    };
    match rc {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Mark every descriptor from 3 up close-on-exec.
pub fn cloexec_from_3() -> io::Result<()> {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only sets flags on descriptors.
    check(unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC) })
}

/// The type of `setrlimit`'s resource argument, which glibc and musl name differently.
#[cfg(target_env = "gnu")]
pub type Resource = libc::__rlimit_resource_t;
/// The type of `setrlimit`'s resource argument, which glibc and musl name differently.
#[cfg(not(target_env = "gnu"))]
pub type Resource = libc::c_int;

/// Hard and soft limit `value` for `resource`.
pub fn limit(resource: Resource, value: u64) -> io::Result<()> {
    let r = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `r` is a valid rlimit for the duration of the call.
    check(unsafe { libc::setrlimit(resource, &r) } as libc::c_long)
}

/// Empty the bounding set, then every capability set (ambient included), so no exec can
/// bring a capability back, not even for uid 0. A process with no uid 0 (real, effective or
/// saved) and no `CAP_SETPCAP` cannot shrink its bounding set (EPERM) and need not: with its
/// sets emptied here and `no_new_privs` next, no exec of its gains a capability (set-user-id
/// bits and file capabilities are ignored), so there the bounding set is left as it is.
pub fn drop_capabilities() -> io::Result<()> {
    for cap in 0..64 {
        // SAFETY: PR_CAPBSET_DROP takes an integer; EINVAL marks the end of known caps.
        let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINVAL) => break,
                Some(libc::EPERM) if no_uid_zero() => break,
                _ => return Err(e),
            }
        }
    }
    // SAFETY: PR_CAP_AMBIENT_CLEAR_ALL takes no pointers.
    let _ = unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version-3 header and two data structs, both valid here.
    check(unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) })
}

/// Whether none of the real, effective and saved user ids is 0.
fn no_uid_zero() -> bool {
    let (mut r, mut e, mut saved) = (0, 0, 0);
    // SAFETY: getresuid writes three ids into locals.
    let rc = unsafe { libc::getresuid(&mut r, &mut e, &mut saved) };
    rc == 0 && r != 0 && e != 0 && saved != 0
}

/// `no_new_privs`: no exec may gain privileges (setuid bits, file capabilities).
pub fn no_new_privs() -> io::Result<()> {
    rustix::thread::set_no_new_privs(true).map_err(io::Error::from)
}

/// Write `bytes` to the open descriptor `fd` (a cgroup's `cgroup.procs`, the error pipe).
pub fn write_fd(fd: libc::c_int, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: `bytes` is valid for its length; `fd` is a descriptor the parent opened.
    let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The id maps of a user namespace that maps only this process's effective user and group,
/// each to itself: `(uid_map, gid_map)`, made by the parent for the child to write.
pub fn own_id_maps() -> (Vec<u8>, Vec<u8>) {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    (
        format!("{uid} {uid} 1\n").into_bytes(),
        format!("{gid} {gid} 1\n").into_bytes(),
    )
}

/// In a user namespace just made: deny `setgroups`, then write the maps of
/// [`own_id_maps`], so the process keeps its own ids inside (unmapped, it would read as
/// the overflow user).
///
/// A process that is not dumpable cannot open these files unless root (the kernel gives
/// them root as owner), and a child between clone and exec shares `mur`'s memory map, and
/// so its state: a `mur` holding a provider key is not dumpable, so there such a spawn
/// fails closed (EACCES). Making the map dumpable for the writes would open `mur`'s memory,
/// the key with it, to every process of the user for as long as the child takes.
pub fn write_id_maps(uid_map: &[u8], gid_map: &[u8]) -> io::Result<()> {
    write_file(c"/proc/self/setgroups", 0, b"deny")?;
    write_file(c"/proc/self/uid_map", 0, uid_map)?;
    write_file(c"/proc/self/gid_map", 0, gid_map)
}

/// Open `path` for writing (with `extra` flags such as `O_CREAT`), write `bytes`, close.
pub fn write_file(path: &std::ffi::CStr, extra: libc::c_int, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; `bytes` is valid for its length; the descriptor is
    // closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC | extra, 0o644);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let e = io::Error::last_os_error();
        libc::close(fd);
        if n != bytes.len() as isize {
            return Err(e);
        }
    }
    Ok(())
}

/// `getppid` as a raw syscall, so a seccomp denial shows as an error instead of a panic.
pub fn raw_getppid() -> io::Result<()> {
    // SAFETY: getppid takes no arguments.
    check(unsafe { libc::syscall(libc::SYS_getppid) })
}

/// Add a path-beneath rule to a landlock ruleset (raw `landlock_add_rule`, for rules on
/// paths that only exist inside a sealed child's root).
pub fn landlock_add_path(ruleset: libc::c_int, path: &std::ffi::CStr, access: u64) -> io::Result<()> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    // SAFETY: `path` is NUL-terminated; the descriptor is closed before returning.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let attr = PathBeneath {
        allowed_access: access,
        parent_fd: fd,
    };
    // SAFETY: LANDLOCK_RULE_PATH_BENEATH (1) with a valid attribute struct for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            1 as libc::c_int,
            &attr as *const PathBeneath,
            0u32,
        )
    };
    let r = check(rc);
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    r
}

/// Enforce a landlock ruleset on this process (raw `landlock_restrict_self`).
pub fn landlock_restrict(ruleset: libc::c_int) -> io::Result<()> {
    // SAFETY: landlock_restrict_self takes a descriptor and flags.
    check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) })
}
