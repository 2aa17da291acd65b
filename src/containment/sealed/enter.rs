//! The child side of `sealed`: the namespaces, the plan's operations and `pivot_root`, and
//! pid 1's signals and reaping. Everything here runs in the child, in `mur`'s memory:
//! syscalls on values the parent prepared, no allocation.
#![allow(unsafe_code)]

use super::{Failure, Op, Plan, STEP_ID_MAPS, STEP_ROOT, STEP_UNSHARE};
use crate::containment::child::{write_file, write_id_maps};
use std::io;

impl Plan {
    /// Child side: enter the new namespaces and write the user namespace's id maps. The
    /// next process this one starts is pid 1 of the new PID namespace.
    pub fn enter(&mut self) -> Result<(), Failure> {
        let fail = |step: u8, detail: u16| {
            move |e: io::Error| Failure {
                step,
                errno: e.raw_os_error().unwrap_or(libc::EINVAL),
                detail,
            }
        };
        let net = if self.own_network { libc::CLONE_NEWNET } else { 0 };
        let user = if self.own_user { libc::CLONE_NEWUSER } else { 0 };
        let flags =
            user | libc::CLONE_NEWNS | libc::CLONE_NEWPID | net | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
        // SAFETY: unshare takes flags only; the caller is a single-threaded child.
        check(unsafe { libc::unshare(flags) }).map_err(fail(STEP_UNSHARE, 0))?;
        if !self.own_user {
            return Ok(());
        }
        self.write_id_maps().map_err(fail(STEP_ID_MAPS, 0))
    }

    /// Pid 1: compose the root and enter it.
    pub fn compose_root(&mut self) -> Result<(), Failure> {
        self.compose().map_err(|(i, e)| Failure {
            step: STEP_ROOT,
            errno: e.raw_os_error().unwrap_or(libc::EINVAL),
            detail: i as u16,
        })
    }

    fn write_id_maps(&self) -> io::Result<()> {
        write_id_maps(&self.uid_map, &self.gid_map)
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
            // Indices within the plan (no panic in the child): a missing slot is EINVAL.
            *self
                .fds
                .get_mut(i)
                .ok_or((n + 1, io::Error::from_raw_os_error(libc::EINVAL)))? = fd;
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

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The descriptor the plan opened for source `i` (EINVAL for an index beyond them).
fn source(fds: &[libc::c_int], i: usize) -> io::Result<libc::c_int> {
    fds.get(i)
        .copied()
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
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
            Op::Same { path, dev, ino } => {
                let mut st: libc::stat = std::mem::zeroed();
                check(libc::stat(path.as_ptr(), &mut st))?;
                if st.st_dev as u64 != *dev || st.st_ino as u64 != *ino {
                    return Err(io::Error::from_raw_os_error(libc::EXDEV));
                }
                Ok(())
            }
            Op::SameSource { src, dev, ino } => {
                let mut st: libc::stat = std::mem::zeroed();
                check(libc::fstat(source(fds, *src)?, &mut st))?;
                if st.st_dev as u64 != *dev || st.st_ino as u64 != *ino {
                    return Err(io::Error::from_raw_os_error(libc::EXDEV));
                }
                Ok(())
            }
            Op::Bind { src, dst } => {
                let mut buf = [0u8; 32];
                let from = fd_path(source(fds, *src)?, &mut buf);
                check(libc::mount(
                    from,
                    dst.as_ptr(),
                    null,
                    libc::MS_BIND | libc::MS_REC,
                    null.cast(),
                ))
            }
            Op::Remount { dst, flags } => check(libc::mount(
                null,
                dst.as_ptr(),
                null,
                libc::MS_REMOUNT | libc::MS_BIND | flags,
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
            Op::Write { path, bytes } => write_file(path, libc::O_CREAT, bytes),
        }
    }
}

/// The signals `mur` passes on to a contained command (SIGTERM and SIGINT from `mur exec`)
/// and the others whose default is to end a process. Pid 1 of a PID namespace gets a signal
/// from outside only when it has a handler for it.
const FORWARDED: [libc::c_int; 13] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGTERM,
    libc::SIGXCPU,
    libc::SIGXFSZ,
    libc::SIGVTALRM,
    libc::SIGPROF,
    libc::SIGIO,
    libc::SIGPWR,
];

/// Pid 1: each of those signals ends it at once with 128 + the signal (the kernel then ends
/// every process of the namespace), as the signal's default would end any other process.
pub fn catch_forwarded_signals() -> io::Result<()> {
    for sig in FORWARDED {
        // SAFETY: all-zero bytes are a valid `sigaction`; `leave` is async-signal-safe.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = leave as *const () as libc::sighandler_t;
            libc::sigfillset(&mut act.sa_mask);
            check(libc::sigaction(sig, &act, std::ptr::null_mut()))?;
        }
    }
    Ok(())
}

extern "C" fn leave(sig: libc::c_int) {
    // SAFETY: _exit is async-signal-safe and only makes the exit_group call.
    unsafe { libc::_exit(128 + sig) }
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
}
