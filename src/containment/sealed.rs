//! `sealed`: the child's own root. The parent plans every step as data (paths as C strings,
//! flags, file contents); the child, single-threaded between fork and exec, only runs the
//! plan: new user (identity-mapped, `setgroups` denied), mount, PID, network, IPC and UTS
//! namespaces; pid 1 of the new PID namespace composes a tmpfs root (read-only system
//! directories, an `/etc` allow-list with a synthetic `passwd`/`group`, a private `/dev`,
//! a fresh `/proc`, a private `/tmp`, the workdir read-write at its own path, each allowed
//! binary outside the system directories), `pivot_root`s into it, detaches the old root and
//! remounts `/` read-only. Paths outside the plan do not exist in the child.
//!
//! Processes: the forked child (outside) unshares and forks pid 1, then only waits for it
//! and exits with its status. Pid 1 (which dies with that waiter) finishes containment,
//! forks the command, then reaps every process of the namespace and exits with the
//! command's status (128 + signal when killed); the kernel then kills what is left.
#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One mount-namespace step of pid 1, every argument prepared by the parent.
enum Op {
    /// `mkdir`, tolerating an existing directory.
    Mkdir(CString),
    /// Create an empty file (a mount point for a file bind).
    Touch(CString),
    Symlink {
        target: CString,
        link: CString,
    },
    /// Bind `sources[src]` (opened in the new namespace before the stage hides anything).
    Bind {
        src: usize,
        dst: CString,
    },
    /// Remount a bind read-only, keeping the flags the source mount already had (a user
    /// namespace may not clear locked ones).
    ReadOnly {
        dst: CString,
        keep: libc::c_ulong,
    },
    Mount {
        fstype: CString,
        dst: CString,
        flags: libc::c_ulong,
        data: CString,
    },
    Write {
        path: CString,
        bytes: Vec<u8>,
    },
}

/// The complete plan of a sealed child.
pub struct Plan {
    ops: Vec<Op>,
    descriptions: Vec<String>,
    /// Bind sources, opened by path after `unshare(CLONE_NEWNS)` (a descriptor opened in
    /// the host namespace cannot be a bind source there); `fds` holds them, preallocated.
    sources: Vec<CString>,
    fds: Vec<libc::c_int>,
    stage: CString,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    /// Where the command starts, inside the new root.
    cwd: CString,
}

/// What failed in the child: a step of `spawn::STEPS`, the errno, and (for the root
/// composition) the index of the operation.
#[derive(Debug, Clone, Copy)]
pub struct Failure {
    pub step: u8,
    pub errno: i32,
    pub detail: u16,
}

impl Failure {
    pub fn encode(&self) -> [u8; 7] {
        let e = self.errno.to_le_bytes();
        let d = self.detail.to_le_bytes();
        [self.step, e[0], e[1], e[2], e[3], d[0], d[1]]
    }

    pub fn decode(b: &[u8]) -> Option<Failure> {
        (b.len() == 7).then(|| Failure {
            step: b[0],
            errno: i32::from_le_bytes([b[1], b[2], b[3], b[4]]),
            detail: u16::from_le_bytes([b[5], b[6]]),
        })
    }
}

/// Step numbers shared with `spawn::STEPS`.
pub const STEP_ID_MAPS: u8 = 9;
pub const STEP_FORK_INIT: u8 = 10;
pub const STEP_ROOT: u8 = 11;
pub const STEP_UNSHARE: u8 = 12;
pub const STEP_FORK_COMMAND: u8 = 13;
pub const STEP_PRIVATE_RULES: u8 = 14;

const SYSTEM_DIRS: [&str; 7] = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];
const ETC_ALLOWED: [&str; 10] = [
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ssl",
    "ca-certificates",
    "resolv.conf",
    "hosts",
    "nsswitch.conf",
    "localtime",
    "host.conf",
];
const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

fn cstr(s: impl AsRef<[u8]>) -> Result<CString, String> {
    CString::new(s.as_ref()).map_err(|_| "a path with a NUL byte".to_string())
}

/// Mount flags of the mount holding `path`, as `MS_*` bits worth keeping on a remount.
fn mount_flags(path: &Path) -> libc::c_ulong {
    let Ok(v) = rustix::fs::statvfs(path) else {
        return 0;
    };
    let f = v.f_flag.bits();
    let mut keep = 0;
    for (st, ms) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st != 0 {
            keep |= ms;
        }
    }
    keep
}

struct Builder {
    plan: Plan,
    covered: Vec<PathBuf>,
}

impl Builder {
    fn op(&mut self, op: Op, what: String) {
        self.plan.ops.push(op);
        self.plan.descriptions.push(what);
    }

    fn staged(&self, abs: &Path) -> Result<CString, String> {
        let mut v = self.plan.stage.as_bytes().to_vec();
        v.extend_from_slice(abs.as_os_str().as_bytes());
        cstr(v)
    }

    fn bind(&mut self, host: &Path, at: &Path, read_only: bool) -> Result<(), String> {
        let dst = self.staged(at)?;
        self.plan.sources.push(cstr(host.as_os_str().as_bytes())?);
        self.plan.fds.push(-1);
        let src = self.plan.sources.len() - 1;
        self.op(
            Op::Bind {
                src,
                dst: dst.clone(),
            },
            format!("bind {} (mount)", at.display()),
        );
        if read_only {
            let keep = mount_flags(host);
            self.op(
                Op::ReadOnly { dst, keep },
                format!("remount {} read-only (mount)", at.display()),
            );
        }
        Ok(())
    }

    fn mkdir(&mut self, at: &Path) -> Result<(), String> {
        let p = self.staged(at)?;
        self.op(Op::Mkdir(p), format!("mkdir {}", at.display()));
        Ok(())
    }

    fn mkdir_all(&mut self, dir: &Path) -> Result<(), String> {
        let mut acc = PathBuf::from("/");
        for c in dir.components().skip(1) {
            acc.push(c);
            self.mkdir(&acc)?;
        }
        Ok(())
    }

    fn mount(&mut self, fstype: &str, at: &Path, flags: libc::c_ulong, data: &str) -> Result<(), String> {
        self.mkdir(at)?;
        let dst = self.staged(at)?;
        self.op(
            Op::Mount {
                fstype: cstr(fstype)?,
                dst,
                flags,
                data: cstr(data)?,
            },
            format!("mount {fstype} on {} (mount)", at.display()),
        );
        Ok(())
    }

    fn symlink(&mut self, target: &Path, at: &Path) -> Result<(), String> {
        let link = self.staged(at)?;
        self.op(
            Op::Symlink {
                target: cstr(target.as_os_str().as_bytes())?,
                link,
            },
            format!("symlink {}", at.display()),
        );
        Ok(())
    }

    fn touch(&mut self, at: &Path) -> Result<(), String> {
        let p = self.staged(at)?;
        self.op(Op::Touch(p), format!("create {}", at.display()));
        Ok(())
    }

    fn write(&mut self, at: &Path, bytes: Vec<u8>) -> Result<(), String> {
        let path = self.staged(at)?;
        self.op(Op::Write { path, bytes }, format!("write {}", at.display()));
        Ok(())
    }

    fn is_covered(&self, p: &Path) -> bool {
        let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        self.covered.iter().any(|c| real.starts_with(c))
    }

    /// A host file or directory at its own path (parents created), read-only or not.
    fn bind_own_path(&mut self, p: &Path, read_only: bool) -> Result<(), String> {
        if self.is_covered(p) {
            return Ok(());
        }
        let is_dir = p.is_dir();
        if let Some(parent) = p.parent() {
            self.mkdir_all(parent)?;
        }
        if is_dir {
            self.mkdir(p)?;
        } else {
            self.touch(p)?;
        }
        self.bind(p, p, read_only)
    }
}

/// Plan the sealed root for `workdir` (read-write) and `files` (the allowed binaries and
/// their closure, read-only). `workdir` is `None` for the host probe.
pub fn plan(workdir: Option<&Path>, files: &BTreeSet<PathBuf>) -> Result<Plan, String> {
    let stage = ["/tmp", "/mnt", "/var/tmp"]
        .into_iter()
        .find(|d| Path::new(d).is_dir())
        .ok_or("no directory to stage the sealed root on (/tmp, /mnt, /var/tmp)")?;
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let cwd = match workdir {
        Some(w) => cstr(w.as_os_str().as_bytes())?,
        None => cstr("/")?,
    };
    let mut b = Builder {
        plan: Plan {
            ops: Vec::new(),
            descriptions: Vec::new(),
            sources: Vec::new(),
            fds: Vec::new(),
            stage: cstr(stage)?,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            cwd,
        },
        covered: Vec::new(),
    };
    let nosuid_nodev = libc::MS_NOSUID | libc::MS_NODEV;
    b.op(
        Op::Mount {
            fstype: cstr("tmpfs")?,
            dst: cstr(stage)?,
            flags: nosuid_nodev,
            data: cstr("mode=0755,size=8m")?,
        },
        format!("mount the root tmpfs on {stage} (mount)"),
    );
    for d in SYSTEM_DIRS {
        let host = Path::new("/").join(d);
        let Ok(meta) = std::fs::symlink_metadata(&host) else {
            continue;
        };
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&host).map_err(|e| format!("{}: {e}", host.display()))?;
            b.symlink(&target, &host)?;
        } else if meta.is_dir() {
            b.mkdir(&host)?;
            b.bind(&host, &host, true)?;
            b.covered.push(std::fs::canonicalize(&host).unwrap_or(host));
        }
    }
    let etc = Path::new("/etc");
    b.mkdir(etc)?;
    for name in ETC_ALLOWED {
        let host = etc.join(name);
        match std::fs::metadata(&host) {
            Ok(m) if m.is_dir() => b.mkdir(&host)?,
            Ok(_) => b.touch(&host)?,
            Err(_) => continue,
        }
        b.bind(&host, &host, true)?;
    }
    let user = if uid == 0 {
        String::new()
    } else {
        format!("capsule:x:{uid}:{gid}:capsule:/:/sbin/nologin\n")
    };
    let group = if gid == 0 {
        String::new()
    } else {
        format!("capsule:x:{gid}:\n")
    };
    b.write(
        &etc.join("passwd"),
        format!("root:x:0:0:root:/root:/bin/sh\n{user}").into_bytes(),
    )?;
    b.write(&etc.join("group"), format!("root:x:0:\n{group}").into_bytes())?;
    let dev = Path::new("/dev");
    b.mount(
        "tmpfs",
        dev,
        libc::MS_NOSUID | libc::MS_NOEXEC,
        "mode=0755,size=64k",
    )?;
    for d in DEVICES {
        let host = dev.join(d);
        if host.exists() {
            b.touch(&host)?;
            b.bind(&host, &host, false)?;
        }
    }
    b.mount(
        "devpts",
        &dev.join("pts"),
        libc::MS_NOSUID | libc::MS_NOEXEC,
        "newinstance,ptmxmode=0666,mode=0620",
    )?;
    b.symlink(Path::new("pts/ptmx"), &dev.join("ptmx"))?;
    b.symlink(Path::new("/proc/self/fd"), &dev.join("fd"))?;
    for (i, name) in ["stdin", "stdout", "stderr"].into_iter().enumerate() {
        b.symlink(&Path::new("/proc/self/fd").join(i.to_string()), &dev.join(name))?;
    }
    b.mount("proc", Path::new("/proc"), nosuid_nodev | libc::MS_NOEXEC, "")?;
    b.mount("tmpfs", Path::new("/tmp"), nosuid_nodev, "mode=1777,size=256m")?;
    if let Some(w) = workdir {
        b.bind_own_path(w, false)?;
    }
    for f in files {
        b.bind_own_path(f, true)?;
    }
    Ok(b.plan)
}

impl Plan {
    /// What each operation does, for error messages (indexed by `Failure::detail`).
    pub fn descriptions(&self) -> Vec<String> {
        self.descriptions.clone()
    }

    /// Child side: enter the namespaces and become pid 1 of the new PID namespace with the
    /// root composed and entered. Returns only in pid 1; the process that called it waits
    /// for pid 1 and exits with its status.
    pub fn enter(&mut self) -> Result<(), Failure> {
        let fail = |step: u8, detail: u16| {
            move |e: io::Error| Failure {
                step,
                errno: e.raw_os_error().unwrap_or(libc::EINVAL),
                detail,
            }
        };
        let flags = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
        // SAFETY: unshare takes flags only; the caller is a single-threaded child.
        check(unsafe { libc::unshare(flags) }).map_err(fail(STEP_UNSHARE, 0))?;
        self.write_id_maps().map_err(fail(STEP_ID_MAPS, 0))?;
        fork_and_wait(true).map_err(fail(STEP_FORK_INIT, 0))?;
        self.compose().map_err(|(i, e)| fail(STEP_ROOT, i as u16)(e))
    }

    fn write_id_maps(&self) -> io::Result<()> {
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &self.uid_map)?;
        write_file(c"/proc/self/gid_map", &self.gid_map)
    }

    /// Run every operation, then pivot into the stage. Errors carry the operation index
    /// (`ops.len()` and up for the pivot sequence).
    fn compose(&mut self) -> Result<(), (usize, io::Error)> {
        let n = self.ops.len();
        // SAFETY: mount with null source/type/data and flags only.
        check(unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        })
        .map_err(|e| (n, e))?;
        for (i, src) in self.sources.iter().enumerate() {
            // SAFETY: `src` is a NUL-terminated path prepared by the parent.
            let fd = unsafe { libc::open(src.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
            if fd < 0 {
                return Err((n + 1, io::Error::last_os_error()));
            }
            self.fds[i] = fd;
        }
        for (i, op) in self.ops.iter().enumerate() {
            run_op(op, &self.fds).map_err(|e| (i, e))?;
        }
        for fd in &self.fds {
            // SAFETY: closing descriptors this process opened above.
            unsafe { libc::close(*fd) };
        }
        self.pivot().map_err(|e| (n + 2, e))
    }

    fn pivot(&self) -> io::Result<()> {
        // SAFETY: each call takes NUL-terminated paths prepared by the parent or literals.
        unsafe {
            check(libc::chdir(self.stage.as_ptr()))?;
            check(libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".".as_ptr()) as libc::c_int)?;
            check(libc::umount2(c".".as_ptr(), libc::MNT_DETACH))?;
            check(libc::chdir(c"/".as_ptr()))?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                std::ptr::null(),
            ))?;
            check(libc::chdir(self.cwd.as_ptr()))
        }
    }
}

/// The descriptions for a failure reported by the child, for the spawn's error text.
pub fn describe(descriptions: &[String], detail: u16) -> String {
    let n = descriptions.len();
    match detail as usize {
        i if i < n => descriptions[i].clone(),
        i if i == n => "make the mount tree private (mount)".into(),
        i if i == n + 1 => "open a bind source (open)".into(),
        _ => "enter the new root (pivot_root)".into(),
    }
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; `bytes` is valid for its length; the descriptor is
    // closed before returning.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
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

/// `/proc/self/fd/N` in a stack buffer (no allocation in the child).
fn fd_path(fd: libc::c_int, buf: &mut [u8; 32]) -> *const libc::c_char {
    const PREFIX: &[u8] = b"/proc/self/fd/";
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    let mut n = fd.max(0) as u32;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let d = &digits[i..];
    buf[PREFIX.len()..PREFIX.len() + d.len()].copy_from_slice(d);
    buf[PREFIX.len() + d.len()] = 0;
    buf.as_ptr().cast()
}

fn run_op(op: &Op, fds: &[libc::c_int]) -> io::Result<()> {
    let null = std::ptr::null::<libc::c_char>();
    // SAFETY: every pointer is a NUL-terminated string prepared by the parent (or the stack
    // buffer above), valid for the duration of each call.
    unsafe {
        match op {
            Op::Mkdir(p) => {
                if libc::mkdir(p.as_ptr(), 0o755) < 0 {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(e);
                    }
                }
                Ok(())
            }
            Op::Touch(p) => {
                let fd = libc::open(
                    p.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                );
                check(fd)?;
                libc::close(fd);
                Ok(())
            }
            Op::Symlink { target, link } => check(libc::symlink(target.as_ptr(), link.as_ptr())),
            Op::Bind { src, dst } => {
                let mut buf = [0u8; 32];
                let from = fd_path(fds[*src], &mut buf);
                check(libc::mount(
                    from,
                    dst.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REC,
                    null.cast(),
                ))
            }
            Op::ReadOnly { dst, keep } => check(libc::mount(
                null,
                dst.as_ptr(),
                null,
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | keep,
                null.cast(),
            )),
            Op::Mount {
                fstype,
                dst,
                flags,
                data,
            } => check(libc::mount(
                fstype.as_ptr(),
                dst.as_ptr(),
                fstype.as_ptr(),
                *flags,
                data.as_ptr().cast(),
            )),
            Op::Write { path, bytes } => {
                let fd = libc::open(
                    path.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                );
                check(fd)?;
                let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
                let e = io::Error::last_os_error();
                libc::close(fd);
                if n != bytes.len() as isize {
                    return Err(e);
                }
                Ok(())
            }
        }
    }
}

/// Fork without glibc's fork handlers (a raw `clone` with only `SIGCHLD`): the caller may be
/// the child of a multi-threaded process, where those handlers are not safe.
fn raw_fork() -> io::Result<libc::pid_t> {
    // SAFETY: clone with SIGCHLD and no stack behaves like fork; both sides return here.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(pid as libc::pid_t)
}

/// The exit code that stands for a wait status: the code, or 128 + the signal.
fn code_of(status: libc::c_int) -> libc::c_int {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        127
    }
}

/// Fork. The child returns `Ok`; the parent closes every descriptor it holds, waits and
/// exits with the child's status, never returning. With `init_child`, the child dies with
/// the parent (`PR_SET_PDEATHSIG`): killing the waiter kills the sandbox.
fn fork_and_wait(init_child: bool) -> io::Result<()> {
    let pid = raw_fork()?;
    if pid == 0 {
        if init_child {
            // SAFETY: prctl with integer arguments.
            check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) })?;
        }
        return Ok(());
    }
    // SAFETY: close_range on this process's own table, then waits and _exit: the waiter
    // holds no descriptor (so the spawn's pipes see their end) and never returns.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
        let mut status = 0;
        loop {
            let r = libc::waitpid(pid, &mut status, 0);
            if r == pid {
                libc::_exit(code_of(status));
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
    }
}

/// Pid 1, after containment is installed: fork the command (the caller returns in it and
/// execs), then reap every process of the namespace until the command ends, and exit with
/// its status.
pub fn fork_command() -> io::Result<()> {
    let pid = raw_fork()?;
    if pid == 0 {
        return Ok(());
    }
    // SAFETY: as in `fork_and_wait`; wait4(-1) reaps orphans reparented to pid 1 as well.
    unsafe {
        libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32);
        let mut status = 0;
        loop {
            let r = libc::waitpid(-1, &mut status, 0);
            if r == pid {
                libc::_exit(code_of(status));
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(127);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fd_paths_are_built_without_allocation() {
        let mut buf = [0u8; 32];
        let p = fd_path(1234, &mut buf);
        // SAFETY: fd_path wrote a NUL-terminated string into `buf`.
        let s = unsafe { std::ffi::CStr::from_ptr(p) };
        assert_eq!(s.to_str().unwrap(), "/proc/self/fd/1234");
        let p = fd_path(0, &mut buf);
        // SAFETY: as above.
        assert_eq!(
            unsafe { std::ffi::CStr::from_ptr(p) }.to_str().unwrap(),
            "/proc/self/fd/0"
        );
    }

    #[test]
    fn failures_round_trip_through_the_pipe_encoding() {
        let f = Failure {
            step: STEP_ROOT,
            errno: libc::EPERM,
            detail: 513,
        };
        let g = Failure::decode(&f.encode()).unwrap();
        assert_eq!((g.step, g.errno, g.detail), (STEP_ROOT, libc::EPERM, 513));
        assert!(Failure::decode(&[1, 2, 3]).is_none());
    }

    #[test]
    fn the_plan_binds_the_workdir_and_outside_files_but_not_covered_ones() {
        let files: BTreeSet<PathBuf> = [PathBuf::from("/usr/bin/env")].into_iter().collect();
        let p = plan(Some(Path::new("/srv/murmur-work")), &files).unwrap();
        let d = p.descriptions();
        assert!(d.iter().any(|s| s == "bind /srv/murmur-work (mount)"), "{d:?}");
        assert!(!d.iter().any(|s| s.contains("/usr/bin/env")), "{d:?}");
        assert!(d.iter().any(|s| s == "write /etc/passwd"), "{d:?}");
        assert!(d.iter().any(|s| s == "mount proc on /proc (mount)"), "{d:?}");
    }
}
