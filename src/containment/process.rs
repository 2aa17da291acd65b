//! The process primitive under `spawn`: start a program without copying `mur`'s memory.
//! The child is made by `clone(CLONE_VM | CLONE_VFORK)` on a stack of its own, as
//! `posix_spawn` does: it runs in `mur`'s address space with the calling thread suspended
//! until it execs or exits, so no page table is copied and `mur` takes no copy-on-write
//! faults afterwards (a fork of the runtime, wasmtime's mappings and all, was a fifth of an
//! agent turn's CPU). In the child, in this order: every caught signal and SIGPIPE back to
//! its default (the parent's handlers must never run on the shared memory; Rust ignores
//! SIGPIPE, and a command must die of it as a shell expects), an empty signal mask, the
//! standard streams, the working directory, the caller's setup, then `execve`; the parent
//! blocks every signal around the `clone` so none is delivered before the handlers are
//! reset.
//!
//! In place of a program, an image may name a function of `mur`'s own ([`Image::forked`]):
//! the child is then a fork of `mur` (its own copy of the memory, made only while `mur` runs
//! one thread), which takes the same steps, closes every descriptor above the streams where
//! it would exec, and runs the function: a helper of `mur`'s own without a second start of
//! the binary (its loader, relocations and CPU probing), which was most of `mur exec`'s own
//! cost.
//!
//! A start that may be handed over (a `sealed` sandbox) gets two spare stacks: the setup
//! may start further processes sharing the memory on them ([`Side::start_command`]) and
//! hand the start over to one of them as `mur`'s own child ([`Side::hand_over`]), which
//! then outlives the child without exec. `start` returns only once every holder of the
//! start's release pipe has exec'd or exited or closed it (the handed-over process closes
//! all it holds before it runs on alone, on raw system calls only: it shares `mur`'s
//! thread-local `errno`). The stacks belong to the returned [`Proc`] and are kept for the
//! next start or unmapped only once it is reaped.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};

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
    /// A handed-over process's stacks (it runs on them until it ends).
    stacks: Option<Stacks>,
    pub stdin: Option<ChildStdin>,
    pub stdout: Option<ChildStdout>,
    pub stderr: Option<ChildStderr>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Never reaped: it may still run on its stacks, which are then never unmapped.
        if self.status.is_none() {
            std::mem::forget(self.stacks.take());
        }
    }
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
                    // Reaped: nothing runs on its stacks any more.
                    self.stacks = None;
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
    /// The function a fork of `mur` runs in place of the program ([`Image::forked`]).
    forked: Option<fn() -> i32>,
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
            forked: None,
        })
    }

    /// In place of a program, `run`, in a fork of `mur` (a copy of its memory: it may
    /// allocate and use anything of `mur`'s), in `cwd`, exiting with what `run` returns. It
    /// starts only while this process runs one thread ([`single_threaded`]: no lock of
    /// another thread's is copied held), and never hands over.
    pub fn forked(run: fn() -> i32, cwd: &Path) -> io::Result<Image> {
        let cwd = CString::new(cwd.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the directory holds a NUL byte"))?;
        Ok(Image {
            program: CString::default(),
            _strings: Vec::new(),
            argv: vec![std::ptr::null()],
            envp: vec![std::ptr::null()],
            cwd,
            forked: Some(run),
        })
    }
}

/// Whether this process runs one thread: `/proc/self/task` links `.`, `..` and one entry
/// per thread. False where it cannot tell (no `/proc`), so nothing is forked then.
pub fn single_threaded() -> bool {
    rustix::fs::stat("/proc/self/task").is_ok_and(|st| st.st_nlink == 3)
}

/// What the child runs, reached through the clone's one argument.
struct Ctx<'a> {
    image: &'a Image,
    /// The descriptor to become stream 0, 1, 2 (`None`: keep `mur`'s).
    streams: [Option<RawFd>; 3],
    setup: &'a mut dyn FnMut(&Side<'_>) -> io::Result<()>,
    exec_failed: &'a dyn Fn(i32),
    stacks: &'a Stacks,
    /// The pid of the process the start was handed over to (written by the kernel,
    /// `CLONE_PARENT_SETTID`, before that process runs), or 0.
    handed: &'a AtomicI32,
}

/// The child side of a start, given to the setup.
pub struct Side<'a> {
    image: &'a Image,
    exec_failed: &'a dyn Fn(i32),
    stacks: &'a Stacks,
    handed: &'a AtomicI32,
}

impl Side<'_> {
    /// Exec the image. Never returns: a failed `execve` is reported through `exec_failed`
    /// and the process exits 127. A fork of `mur` ([`Image::forked`]) instead closes every
    /// descriptor above the streams (the spawn's error pipe with them, which tells `mur` the
    /// start is complete, as an exec does) and runs its function.
    pub fn exec(&self) -> ! {
        if let Some(run) = self.image.forked {
            // SAFETY: close_range on this process's own table (a copy of `mur`'s).
            unsafe { libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) };
            let code = run();
            // SAFETY: leaving without `mur`'s exit code: its buffered streams and exit
            // handlers are the parent's, copied.
            unsafe { libc::_exit(code) }
        }
        // SAFETY: program, argv and envp are NUL-terminated strings and null-terminated
        // arrays built before the clone.
        unsafe {
            libc::execve(
                self.image.program.as_ptr(),
                self.image.argv.as_ptr(),
                self.image.envp.as_ptr(),
            )
        };
        (self.exec_failed)(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL));
        // SAFETY: leaving the child without running any of `mur`'s exit code.
        unsafe { libc::_exit(127) }
    }

    /// Start the command from the handed-over process: a process sharing this memory runs
    /// `f` on spare stack 2 and exits with what it returns (it should exec), while this one
    /// waits (`CLONE_VFORK`).
    ///
    /// # Safety
    ///
    /// Only from the process [`Side::hand_over`] started (spare stack 2 must be free), and
    /// `f` must allocate nothing and never panic.
    pub unsafe fn start_command(&self, f: &mut dyn FnMut() -> libc::c_int) -> io::Result<libc::pid_t> {
        let top = self
            .stacks
            .top(2)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
        let mut f = f;
        let arg = (&mut f as *mut &mut dyn FnMut() -> libc::c_int).cast::<libc::c_void>();
        // SAFETY: the new process runs `run_command` on a spare stack of its own, reaching
        // `f` through `arg`; under CLONE_VFORK this frame outlives its use of them.
        let pid = unsafe {
            libc::clone(
                run_command,
                top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                arg,
            )
        };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(pid)
    }

    /// Hand the start over to a new process sharing this memory, a child of `mur`'s
    /// (`CLONE_PARENT`) on spare stack 1, and exit. That process runs `f`, which starts the
    /// command and returns its pid (or fails, reporting its own error: it then exits 127);
    /// it then closes every descriptor it holds (which releases the start) and reaps every
    /// child until the command ends, exiting with its status, on raw system calls only.
    /// Returns only the error of a failed clone.
    ///
    /// # Safety
    ///
    /// Only from the setup of a start that may hand over, and `f` must allocate nothing and
    /// never panic. `f` and what it borrows stay valid until the release: this frame is
    /// never left, and `mur` holds everything else until then.
    pub unsafe fn hand_over(&self, f: &mut dyn FnMut() -> io::Result<libc::pid_t>) -> io::Error {
        let Some(top) = self.stacks.top(1) else {
            return io::Error::from_raw_os_error(libc::EINVAL);
        };
        let mut f = f;
        let arg = (&mut f as *mut &mut dyn FnMut() -> io::Result<libc::pid_t>).cast::<libc::c_void>();
        // SAFETY: as in `start_command`; this process exits below without leaving the frame,
        // and the kernel writes the new pid into `handed` (shared memory) before it runs.
        let pid = unsafe {
            libc::clone(
                run_handed,
                top,
                libc::CLONE_VM | libc::CLONE_PARENT | libc::CLONE_PARENT_SETTID | libc::SIGCHLD,
                arg,
                self.handed.as_ptr(),
            )
        };
        if pid < 0 {
            return io::Error::last_os_error();
        }
        // SAFETY: leaving the child without running any of `mur`'s exit code.
        unsafe { libc::_exit(0) }
    }
}

/// The command's side of `start_command`: run the closure, exit with its result.
extern "C" fn run_command(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the `&mut dyn FnMut` the suspended starting frame holds.
    let f = unsafe { &mut *arg.cast::<&mut dyn FnMut() -> libc::c_int>() };
    let code = f();
    // SAFETY: leaving without running any of `mur`'s exit code.
    unsafe { libc::_exit(code) }
}

/// The handed-over process: run the closure, then release the start and reap.
extern "C" fn run_handed(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` points at the `&mut dyn FnMut` of `hand_over`'s frame, never left.
    let f = unsafe { &mut *arg.cast::<&mut dyn FnMut() -> io::Result<libc::pid_t>>() };
    match f() {
        Ok(command) => release_and_reap(command),
        // SAFETY: leaving without running any of `mur`'s exit code.
        Err(_) => unsafe { libc::_exit(127) },
    }
}

/// Close every descriptor (the release pipe with them: `start` may now return and free
/// what the closure borrowed, so nothing below touches it), then reap every child (pid 1
/// of a PID namespace inherits its orphans) until `command` ends, and exit with its status
/// (128 + the signal when killed). Raw system calls only: this process shares `mur`'s
/// memory and the `errno` of the thread that started it, which may be gone.
fn release_and_reap(command: libc::pid_t) -> ! {
    // SAFETY: close_range on this process's own table; it cannot fail with these arguments,
    // so glibc's wrapper writes no `errno`.
    unsafe { libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) };
    let code = loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some((pid, st))) if pid.as_raw_nonzero().get() == command => {
                break match (st.exit_status(), st.terminating_signal()) {
                    (Some(c), _) => c,
                    (None, Some(s)) => 128 + s,
                    _ => 127,
                };
            }
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(_) => break 127,
        }
    };
    // SAFETY: _exit makes only the exit_group call.
    unsafe { libc::_exit(code) }
}

/// One stack, touched only as deep as it runs: ample for the setup and for composing the
/// `sealed` root.
const STACK: usize = 1 << 20;

/// Start `image` with `stdio` (stdin, stdout, stderr). In the child `setup` runs after the
/// streams and the working directory are set, and reports its own failure (the child then
/// exits 127 without exec); `exec_failed` gets the errno of a failed `execve`. With
/// `may_hand_over` the setup gets the spare stacks and may hand the start over; the
/// returned `Proc` is then that process.
pub fn start(
    image: &Image,
    stdio: [Stdio; 3],
    may_hand_over: bool,
    setup: &mut dyn FnMut(&Side<'_>) -> io::Result<()>,
    exec_failed: &dyn Fn(i32),
) -> io::Result<Proc> {
    let forked = image.forked.is_some();
    if forked && (may_hand_over || !single_threaded()) {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "a fork of mur is started only while it runs one thread, and never hands over",
        ));
    }
    let (held, ours) = streams(stdio)?;
    let stacks = Stacks::new(match (may_hand_over, forked) {
        (true, _) => 3,
        (false, false) => 1,
        (false, true) => 0,
    })?;
    // Held open by the child and every process it starts until they exec or exit (it is
    // close-on-exec) or close it; numbered above 2, so making the child's streams never
    // closes it.
    let release = if may_hand_over {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        Some((above_2(r)?, above_2(w)?))
    } else {
        None
    };
    let handed = AtomicI32::new(0);
    let mut ctx = Ctx {
        image,
        streams: [0, 1, 2].map(|i| held[i].as_ref().map(AsRawFd::as_raw_fd)),
        setup,
        exec_failed,
        stacks: &stacks,
        handed: &handed,
    };
    let arg = (&mut ctx as *mut Ctx<'_>).cast::<libc::c_void>();
    // Every signal stays blocked until the start is released: no handler of `mur`'s runs on
    // this thread while a handed-over process may still write its `errno`.
    let blocked = BlockedSignals::new()?;
    let pid = make_child(forked, &stacks, arg)?;
    if pid < 0 {
        // Read at once, before anything else can set `errno`.
        return Err(io::Error::last_os_error());
    }
    let handed = handed.load(Ordering::SeqCst);
    let (pid, stacks) = match release {
        Some((r, w)) if handed > 0 => {
            // Raw system calls only until the release (see `reap_quietly`).
            // SAFETY: `w` is ours; into_raw_fd gives up its ownership, closed once here.
            unsafe { rustix::io::close(std::os::fd::IntoRawFd::into_raw_fd(w)) };
            // The child exited after handing over; its status says nothing more.
            reap_quietly(pid);
            if let Err(e) = released(&r) {
                // Never return while it may still use this frame: end it first.
                if let Some(p) = rustix::process::Pid::from_raw(handed) {
                    let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                }
                reap_quietly(handed);
                return Err(e);
            }
            (handed, Some(stacks))
        }
        // It exec'd or exited: nothing runs on the stacks.
        _ => (pid, None),
    };
    drop(blocked);
    drop(held);
    let [stdin, stdout, stderr] = ours;
    Ok(Proc {
        pid,
        status: None,
        stacks,
        stdin: stdin.map(ChildStdin::from),
        stdout: stdout.map(ChildStdout::from),
        stderr: stderr.map(ChildStderr::from),
    })
}

/// Step: make the child that runs [`child`] on `arg` (a `Ctx` of [`start`]'s frame): a fork
/// of this process when `forked` (the caller checked it runs one thread), else a clone
/// sharing this memory under CLONE_VFORK on the first of `stacks`. Its pid, or -1 with
/// `errno` set (read by the caller at once).
fn make_child(forked: bool, stacks: &Stacks, arg: *mut libc::c_void) -> io::Result<libc::pid_t> {
    if forked {
        // SAFETY: this process runs one thread (checked by `start`; only this thread could
        // have started another since), so the child's copy of the memory holds no lock
        // another thread held. The child runs `child` on its copy of `ctx` and ends by
        // exiting.
        return Ok(match unsafe { libc::fork() } {
            0 => unsafe { libc::_exit(child(arg)) },
            pid => pid,
        });
    }
    let top = stacks
        .top(0)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `child` gets a pointer to `start`'s `ctx`, which outlives the call: under
    // CLONE_VFORK this thread is suspended until the child execs or exits, and a handed-over
    // start is released by `start` before `ctx` goes. The stack is a mapping of our own, its
    // top page-aligned.
    Ok(unsafe {
        libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        )
    })
}

/// `fd`, moved above 2 if it is 0, 1 or 2 (so making a child's streams never closes it).
pub fn above_2(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() < 3 {
        Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 3)?)
    } else {
        Ok(fd)
    }
}

/// Wait for `pid` (a child) to end, ignoring its status. Raw system calls only: a
/// handed-over process may write this thread's `errno` until the start is released.
fn reap_quietly(pid: libc::pid_t) {
    let Some(p) = rustix::process::Pid::from_raw(pid) else {
        return;
    };
    while let Err(rustix::io::Errno::INTR) =
        rustix::process::waitpid(Some(p), rustix::process::WaitOptions::empty())
    {}
}

/// Read the release pipe until every writer is gone (raw system calls, as above).
fn released(r: &OwnedFd) -> io::Result<()> {
    let mut buf = [0u8; 64];
    loop {
        match rustix::io::read(r, &mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
}

/// The child's ends (to become its streams) and `mur`'s ends of the pipes. A descriptor
/// numbered below 3 is moved up, so making one stream never closes another's source.
#[allow(clippy::type_complexity)]
fn streams(stdio: [Stdio; 3]) -> io::Result<([Option<OwnedFd>; 3], [Option<OwnedFd>; 3])> {
    use rustix::fs::{open, Mode, OFlags};
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
        held[i] = Some(above_2(fd)?);
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
    let side = Side {
        image: ctx.image,
        exec_failed: ctx.exec_failed,
        stacks: ctx.stacks,
        handed: ctx.handed,
    };
    if (ctx.setup)(&side).is_err() {
        // SAFETY: leaving the child without running any of `mur`'s exit code.
        unsafe { libc::_exit(127) };
    }
    side.exec()
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

/// No signal blocked: the child starts as a new program expects (and a sealed sandbox's pid
/// 1, which never execs, must take the signals `mur exec` forwards).
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

/// One anonymous mapping for `count` stacks, each with a guard page below it.
#[derive(Debug)]
struct Stacks {
    base: *mut libc::c_void,
    count: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it between threads moves
// only the right to unmap it.
unsafe impl Send for Stacks {}
// SAFETY: shared references only compute addresses.
unsafe impl Sync for Stacks {}

/// Mappings of stacks no start is using, kept for the next: a fresh mapping per start
/// costs its `mmap` and `mprotect`, a fault and a zeroed page for each page the child
/// touches, and at its `munmap`, while `mur`'s other threads run, a TLB shootdown on every
/// core. What a child left on a stack is `mur`'s own memory (the child shared it), so
/// nothing crosses a boundary in a reuse.
static KEPT_STACKS: StackPool = StackPool::new();
/// Mappings kept of each size (one stack for a plain start, three for one that may be
/// handed over).
const KEPT: usize = 2;

/// The mappings kept, the last kept taken first (its pages are the likeliest still in a
/// cache).
struct StackPool(std::sync::Mutex<Vec<Stacks>>);

impl StackPool {
    const fn new() -> StackPool {
        StackPool(std::sync::Mutex::new(Vec::new()))
    }

    /// A kept mapping of `count` stacks.
    fn take(&self, count: usize) -> Option<Stacks> {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = kept.iter().rposition(|s| s.count == count)?;
        Some(kept.remove(at))
    }

    /// Keep `s`, unless [`KEPT`] of its size are kept already: then it is given back.
    fn put(&self, s: Stacks) -> Option<Stacks> {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if kept.iter().filter(|k| k.count == s.count).count() >= KEPT {
            return Some(s);
        }
        kept.push(s);
        None
    }
}

impl Stacks {
    /// `count` stacks: a kept mapping of that many, else a fresh one.
    fn new(count: usize) -> io::Result<Stacks> {
        if count == 0 {
            // A fork runs on its own copy of this thread's stack.
            return Ok(Stacks {
                base: std::ptr::null_mut(),
                count,
            });
        }
        match KEPT_STACKS.take(count) {
            Some(s) => Ok(s),
            None => Stacks::map(count),
        }
    }

    /// A fresh mapping of `count` stacks, a guard page below each.
    fn map(count: usize) -> io::Result<Stacks> {
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                STACK * count,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let stacks = Stacks { base, count };
        for i in 0..count {
            // SAFETY: the lowest page of stack `i` of the mapping made above.
            if unsafe { libc::mprotect(base.cast::<u8>().add(i * STACK).cast(), 4096, libc::PROT_NONE) } != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(stacks)
    }

    /// The top of stack `i`, if there is one.
    fn top(&self, i: usize) -> Option<*mut libc::c_void> {
        // SAFETY: one past the end of stack `i`, within (or one past) the mapping, a
        // multiple of the page size.
        (i < self.count).then(|| unsafe { self.base.cast::<u8>().add((i + 1) * STACK).cast() })
    }
}

impl Drop for Stacks {
    /// Its owner drops it only once nothing runs on it (the child exec'd or exited, the
    /// handed-over process was reaped): kept for the next start, or unmapped.
    fn drop(&mut self) {
        if self.count == 0 {
            return;
        }
        // The mapping moves into a value of its own (this one's count becomes 0, so it
        // never unmaps it), kept or, when given back, dropped here with a count of 0.
        let moved = Stacks {
            base: self.base,
            count: std::mem::take(&mut self.count),
        };
        if let Some(mut back) = KEPT_STACKS.put(moved) {
            let count = std::mem::take(&mut back.count);
            // SAFETY: unmaps the mapping `map` made, which nothing runs on (above) and
            // which no other value holds (both values that held it now have a count of 0).
            unsafe { libc::munmap(back.base, STACK * count) };
        }
    }
}

#[cfg(test)]
mod tests;
