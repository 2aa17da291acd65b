//! The process primitive under `spawn`: start a program without copying `mur`'s memory.
//! A child that execs is made by `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own, as
//! `posix_spawn` does: it runs in `mur`'s address space with the calling thread suspended
//! until it execs or exits, so no page table is copied and `mur` takes no copy-on-write
//! faults afterwards (a fork of the runtime, wasmtime's mappings and all, was a fifth of an
//! agent turn's CPU). A child that must live on without exec (the waiter of a `sealed`
//! sandbox) is forked instead, with glibc's `fork` (which leaves malloc usable in the
//! child). In the child, in this order: every caught signal and SIGPIPE back to its
//! default (the parent's handlers must never run on the shared memory; Rust ignores
//! SIGPIPE, and a command must die of it as a shell expects), an empty signal mask, the
//! standard streams, the working directory, the caller's setup, then `execve`; the parent
//! blocks every signal around the `clone` so none is delivered before the handlers are
//! reset.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};

/// What one standard stream of the child is.
#[derive(Debug)]
pub enum Stdio {
    /// `/dev/null`.
    Null,
    /// `mur`'s own.
    Inherit,
    /// A new pipe; the other end is `mur`'s ([`Proc`]'s `stdin`, `stdout` or `stderr`).
    Piped,
    /// This descriptor.
    Fd(OwnedFd),
}

impl Stdio {
    pub fn null() -> Stdio {
        Stdio::Null
    }
    pub fn inherit() -> Stdio {
        Stdio::Inherit
    }
    pub fn piped() -> Stdio {
        Stdio::Piped
    }
}

impl From<OwnedFd> for Stdio {
    fn from(fd: OwnedFd) -> Stdio {
        Stdio::Fd(fd)
    }
}

impl From<File> for Stdio {
    fn from(f: File) -> Stdio {
        Stdio::Fd(f.into())
    }
}

/// A started child: its pid, `mur`'s ends of its piped streams, and its status once reaped.
#[derive(Debug)]
pub struct Proc {
    pid: libc::pid_t,
    status: Option<ExitStatus>,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
}

impl Proc {
    pub fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// SIGKILL, unless it was already reaped (then nothing: the pid may be another's).
    pub fn kill(&mut self) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        rustix::process::kill_process(pid_of(self.pid)?, rustix::process::Signal::KILL)
            .map_err(io::Error::from)
    }

    /// Wait for it to end (its stdin closed first, as `std::process::Child::wait` does).
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        self.reap(0).map(|s| s.unwrap_or_else(|| ExitStatus::from_raw(0)))
    }

    /// Its status if it has ended, without waiting.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.reap(libc::WNOHANG)
    }

    fn reap(&mut self, flags: libc::c_int) -> io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        let mut raw = 0;
        loop {
            // SAFETY: `raw` is a valid status pointer; the pid is this process's child.
            let rc = unsafe { libc::waitpid(self.pid, &mut raw, flags) };
            match rc {
                0 => return Ok(None),
                r if r > 0 => {
                    let s = ExitStatus::from_raw(raw);
                    self.status = Some(s);
                    return Ok(Some(s));
                }
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
    }
}

fn pid_of(raw: libc::pid_t) -> io::Result<rustix::process::Pid> {
    rustix::process::Pid::from_raw(raw).ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
}

/// The program, its arguments and environment as the C strings `execve` takes, built before
/// the clone (the child allocates nothing).
pub struct Image {
    program: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
}

impl Image {
    /// `program` (a path: nothing is looked up in `PATH`) with `args`, exactly the
    /// environment `env`, in `cwd`.
    pub fn new(program: &Path, args: &[String], env: &[(String, String)], cwd: &Path) -> io::Result<Image> {
        let nul = || {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "an argument, variable or path holds a NUL byte",
            )
        };
        let c = |b: &[u8]| CString::new(b).map_err(|_| nul());
        if !program.as_os_str().as_bytes().contains(&b'/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the program is not a path",
            ));
        }
        let program = c(program.as_os_str().as_bytes())?;
        let mut strings = vec![program.clone()];
        for a in args {
            strings.push(c(a.as_bytes())?);
        }
        let argc = strings.len();
        // Sorted by name, a later value of a name replacing an earlier one (as
        // `std::process::Command` passes them).
        let env: std::collections::BTreeMap<&str, &str> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        for (k, v) in env {
            strings.push(c(format!("{k}={v}").as_bytes())?);
        }
        let ptrs = |s: &[CString]| -> Vec<*const libc::c_char> {
            s.iter().map(|c| c.as_ptr()).chain([std::ptr::null()]).collect()
        };
        Ok(Image {
            argv: ptrs(&strings[..argc]),
            envp: ptrs(&strings[argc..]),
            _strings: strings,
            program,
            cwd: c(cwd.as_os_str().as_bytes())?,
        })
    }
}

/// Whether the child shares `mur`'s memory until it execs (`Vm`) or is forked with a copy
/// (`Copy`: it runs code of `mur`'s long after the spawn returned).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    Vm,
    Copy,
}

/// What the child runs, reached through the clone's one argument.
struct Ctx<'a> {
    image: &'a Image,
    /// The descriptor to become stream 0, 1, 2 (`None`: keep `mur`'s).
    streams: [Option<RawFd>; 3],
    setup: &'a mut dyn FnMut() -> io::Result<()>,
    exec_failed: &'a dyn Fn(i32),
}

/// The child's stack: ample for the setup (the `sealed` root is composed on it), touched
/// only as deep as it runs.
const STACK: usize = 1 << 20;

/// Start `image` with `stdio` (stdin, stdout, stderr). In the child `setup` runs after the
/// streams and the working directory are set, and reports its own failure (the child then
/// exits 127 without exec); `exec_failed` gets the errno of a failed `execve`.
pub fn start(
    image: &Image,
    stdio: [Stdio; 3],
    memory: Memory,
    setup: &mut dyn FnMut() -> io::Result<()>,
    exec_failed: &dyn Fn(i32),
) -> io::Result<Proc> {
    let (held, ours) = streams(stdio)?;
    let mut ctx = Ctx {
        image,
        streams: [0, 1, 2].map(|i| held[i].as_ref().map(AsRawFd::as_raw_fd)),
        setup,
        exec_failed,
    };
    let arg = (&mut ctx as *mut Ctx<'_>).cast::<libc::c_void>();
    // The error of a failed clone or fork is read at once, before the stack is unmapped and
    // the signal mask restored.
    let started = |pid: libc::pid_t| {
        if pid < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(pid)
        }
    };
    let pid = match memory {
        Memory::Vm => {
            let stack = Stack::new()?;
            let _blocked = BlockedSignals::new()?;
            // SAFETY: `child` gets a pointer to `ctx`, which outlives the call: under
            // CLONE_VFORK this thread is suspended until the child execs or exits. The
            // stack is a mapping of our own, its top page-aligned; it is unmapped after.
            started(unsafe {
                libc::clone(
                    child,
                    stack.top(),
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                    arg,
                )
            })
        }
        Memory::Copy => {
            let _blocked = BlockedSignals::new()?;
            // SAFETY: glibc's fork; the child only runs `child` on its copy of `ctx` and
            // never returns (it execs or exits).
            match unsafe { libc::fork() } {
                0 => {
                    child(arg);
                    // SAFETY: `child` does not return; leave without running `mur`'s code.
                    unsafe { libc::_exit(127) }
                }
                pid => started(pid),
            }
        }
    }?;
    drop(held);
    let [stdin, stdout, stderr] = ours;
    Ok(Proc {
        pid,
        status: None,
        stdin: stdin.map(ChildStdin::from),
        stdout: stdout.map(ChildStdout::from),
        stderr: stderr.map(ChildStderr::from),
    })
}

/// The child's ends (to become its streams) and `mur`'s ends of the pipes. A descriptor
/// numbered below 3 is moved up, so making one stream never closes another's source.
#[allow(clippy::type_complexity)]
fn streams(stdio: [Stdio; 3]) -> io::Result<([Option<OwnedFd>; 3], [Option<OwnedFd>; 3])> {
    use rustix::fs::{open, Mode, OFlags};
    use rustix::io::fcntl_dupfd_cloexec;
    let mut held: [Option<OwnedFd>; 3] = [None, None, None];
    let mut ours: [Option<OwnedFd>; 3] = [None, None, None];
    for (i, s) in stdio.into_iter().enumerate() {
        let fd = match s {
            Stdio::Inherit => continue,
            Stdio::Null => open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())?,
            Stdio::Fd(fd) => fd,
            Stdio::Piped => {
                let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
                let (child_end, our_end) = if i == 0 { (r, w) } else { (w, r) };
                ours[i] = Some(our_end);
                child_end
            }
        };
        held[i] = Some(if fd.as_raw_fd() < 3 {
            fcntl_dupfd_cloexec(&fd, 3)?
        } else {
            fd
        });
    }
    Ok((held, ours))
}

/// The child's side. Allocates nothing, returns only by exiting.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Ctx` `start` passed, alive until this child execs or exits.
    let ctx = unsafe { &mut *arg.cast::<Ctx<'_>>() };
    default_signal_handlers();
    empty_signal_mask();
    for (target, src) in ctx.streams.iter().enumerate() {
        if let Some(fd) = *src {
            // SAFETY: `fd` is a descriptor `start` holds open (numbered 3 or above), made
            // `target` (0, 1 or 2) without close-on-exec.
            if unsafe { libc::dup2(fd, target as libc::c_int) } < 0 {
                return exec_failed(ctx);
            }
        }
    }
    // SAFETY: a NUL-terminated path built before the clone.
    if unsafe { libc::chdir(ctx.image.cwd.as_ptr()) } < 0 {
        return exec_failed(ctx);
    }
    if (ctx.setup)().is_err() {
        // SAFETY: leaving the child without running any of `mur`'s exit code.
        unsafe { libc::_exit(127) };
    }
    // SAFETY: program, argv and envp are NUL-terminated strings and null-terminated arrays
    // built before the clone.
    unsafe {
        libc::execve(
            ctx.image.program.as_ptr(),
            ctx.image.argv.as_ptr(),
            ctx.image.envp.as_ptr(),
        )
    };
    exec_failed(ctx)
}

/// Report the errno of the step that failed and exit 127.
fn exec_failed(ctx: &Ctx<'_>) -> libc::c_int {
    (ctx.exec_failed)(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
    // SAFETY: leaving the child without running any of `mur`'s exit code.
    unsafe { libc::_exit(127) }
}

/// Every caught signal back to its default disposition, and SIGPIPE (which Rust's runtime
/// ignores in `mur`); other ignored ones stay ignored, as across exec. The child has its
/// own copy of the handler table (no `CLONE_SIGHAND`).
fn default_signal_handlers() {
    // SAFETY: sets one disposition of this child's own handler table.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    for sig in 1..=64 {
        // SAFETY: all-zero bytes are a valid `sigaction`; each call reads or writes a local.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue;
            }
            if old.sa_sigaction == libc::SIG_DFL || old.sa_sigaction == libc::SIG_IGN {
                continue;
            }
            let mut dfl: libc::sigaction = std::mem::zeroed();
            dfl.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &dfl, std::ptr::null_mut());
        }
    }
}

/// No signal blocked: the child starts as a new program expects (a sealed child's waiter,
/// which never execs, must die of the signals `mur exec` forwards).
fn empty_signal_mask() {
    // SAFETY: sigemptyset initialises a local set, which pthread_sigmask reads.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
}

/// Every signal blocked on this thread until dropped (the old mask comes back).
struct BlockedSignals(libc::sigset_t);

impl BlockedSignals {
    fn new() -> io::Result<BlockedSignals> {
        // SAFETY: sigfillset initialises a local set; pthread_sigmask reads it and writes
        // the old mask into another local.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            let mut old: libc::sigset_t = std::mem::zeroed();
            match libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old) {
                0 => Ok(BlockedSignals(old)),
                e => Err(io::Error::from_raw_os_error(e)),
            }
        }
    }
}

impl Drop for BlockedSignals {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved by `new`.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut()) };
    }
}

/// An anonymous mapping for the child's stack, with a guard page below it.
struct Stack(*mut libc::c_void);

impl Stack {
    fn new() -> io::Result<Stack> {
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                STACK,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stack = Stack(p);
        // SAFETY: the lowest page of the mapping made above.
        if unsafe { libc::mprotect(p, 4096, libc::PROT_NONE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(stack)
    }

    fn top(&self) -> *mut libc::c_void {
        // SAFETY: one past the end of the mapping, a multiple of the page size.
        unsafe { self.0.cast::<u8>().add(STACK).cast() }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping `new` made; the child no longer runs on it (it exec'd or
        // exited, or runs on its own copy).
        unsafe { libc::munmap(self.0, STACK) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::io::{Read, Write};

    fn image(args: &[&str]) -> Image {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        Image::new(
            Path::new("/bin/sh"),
            &args,
            &[
                ("V".into(), "first".into()),
                ("A".into(), "a".into()),
                ("V".into(), "value".into()),
            ],
            Path::new("/"),
        )
        .unwrap()
    }

    #[test]
    fn a_child_gets_its_streams_environment_and_directory_and_its_status_comes_back() {
        for memory in [Memory::Vm, Memory::Copy] {
            let img = image(&["-c", "read x; echo \"$x $V $(pwd)\"; echo err >&2; exit 3"]);
            // The environment exactly as given, sorted, the last value of a name kept.
            let envp: Vec<&CStr> = img.envp[..img.envp.len() - 1]
                .iter()
                // SAFETY: each pointer is one of the image's own C strings.
                .map(|p| unsafe { CStr::from_ptr(*p) })
                .collect();
            assert_eq!(envp, [c"A=a", c"V=value"]);
            let mut p = start(
                &img,
                [Stdio::piped(), Stdio::piped(), Stdio::piped()],
                memory,
                &mut || Ok(()),
                &|_| {},
            )
            .unwrap();
            p.stdin.take().unwrap().write_all(b"in\n").unwrap();
            let mut out = String::new();
            p.stdout.take().unwrap().read_to_string(&mut out).unwrap();
            let mut err = String::new();
            p.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            assert_eq!((out.as_str(), err.as_str()), ("in value /\n", "err\n"));
            assert_eq!(p.wait().unwrap().code(), Some(3));
            assert_eq!(p.try_wait().unwrap().unwrap().code(), Some(3));
            p.kill().unwrap();
        }
    }

    #[test]
    fn a_failed_exec_and_a_failed_setup_are_reported_and_run_nothing() {
        let img = Image::new(Path::new("/nonexistent/prog"), &[], &[], Path::new("/")).unwrap();
        let got = std::sync::atomic::AtomicI32::new(0);
        let mut p = start(
            &img,
            [Stdio::null(), Stdio::null(), Stdio::null()],
            Memory::Vm,
            &mut || Ok(()),
            &|e| got.store(e, std::sync::atomic::Ordering::SeqCst),
        )
        .unwrap();
        // The child shared this memory and has exited: the store is visible.
        assert_eq!(got.load(std::sync::atomic::Ordering::SeqCst), libc::ENOENT);
        assert_eq!(p.wait().unwrap().code(), Some(127));
        let img = image(&["-c", "exit 0"]);
        let mut p = start(
            &img,
            [Stdio::null(), Stdio::null(), Stdio::null()],
            Memory::Vm,
            &mut || Err(io::Error::from_raw_os_error(libc::EPERM)),
            &|_| {},
        )
        .unwrap();
        assert_eq!(p.wait().unwrap().code(), Some(127));
        assert!(Image::new(Path::new("sh"), &[], &[], Path::new("/")).is_err());
        assert!(Image::new(Path::new("/bin/sh"), &["a\0b".into()], &[], Path::new("/")).is_err());
    }

    #[test]
    fn the_child_starts_with_no_handler_of_murs_sigpipe_default_and_no_signal_blocked() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        extern "C" fn nothing(_: libc::c_int) {}
        // SAFETY: installs a do-nothing handler for SIGUSR2 in this test process (restored
        // below); no other test uses SIGUSR2.
        let before = unsafe { libc::signal(libc::SIGUSR2, nothing as *const () as libc::sighandler_t) };
        let (usr2, pipe, blocked) = (AtomicUsize::new(1), AtomicUsize::new(1), AtomicUsize::new(1));
        let img = image(&["-c", "exit 0"]);
        let mut p = start(
            &img,
            [Stdio::null(), Stdio::null(), Stdio::null()],
            Memory::Vm,
            &mut || {
                // SAFETY: reads the child's dispositions and mask into locals.
                let (old, old_pipe, mask) = unsafe {
                    let mut old: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(libc::SIGUSR2, std::ptr::null(), &mut old);
                    let mut old_pipe: libc::sigaction = std::mem::zeroed();
                    libc::sigaction(libc::SIGPIPE, std::ptr::null(), &mut old_pipe);
                    let mut mask: libc::sigset_t = std::mem::zeroed();
                    libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask);
                    (old, old_pipe, mask)
                };
                usr2.store(old.sa_sigaction, Ordering::SeqCst);
                pipe.store(old_pipe.sa_sigaction, Ordering::SeqCst);
                // SAFETY: `mask` was filled above.
                blocked.store(
                    unsafe { libc::sigismember(&mask, libc::SIGTERM) } as usize,
                    Ordering::SeqCst,
                );
                Ok(())
            },
            &|_| {},
        )
        .unwrap();
        assert_eq!(p.wait().unwrap().code(), Some(0));
        // SAFETY: puts back the disposition this test replaced; reads this thread's mask.
        let mask = unsafe {
            libc::signal(libc::SIGUSR2, before);
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_SETMASK, std::ptr::null(), &mut mask);
            mask
        };
        assert_eq!(usr2.load(Ordering::SeqCst), libc::SIG_DFL);
        // Rust's runtime ignores SIGPIPE in this process; the child gets the default.
        assert_eq!(pipe.load(Ordering::SeqCst), libc::SIG_DFL);
        assert_eq!(blocked.load(Ordering::SeqCst), 0);
        // SAFETY: `mask` was filled above.
        assert_eq!(unsafe { libc::sigismember(&mask, libc::SIGTERM) }, 0);
    }
}
