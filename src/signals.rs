//! SIGTERM and SIGINT as a value to wait for (a capsule that sleeps until told to stop, and
//! `mur exec` passing them on to its child): block both before any thread starts (threads
//! inherit the mask), then `sigwait`. Children start with an empty mask (the standard
//! library resets it between fork and exec).
#![allow(unsafe_code)]

/// Block SIGTERM and SIGINT on the calling thread and every thread it starts afterwards.
pub fn block_termination() -> std::io::Result<()> {
    let set = termination_set();
    // SAFETY: `set` is an initialised sigset_t; a null old-set pointer is allowed.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Run `f` with SIGTERM and SIGINT blocked on the calling thread, then put the thread's mask
/// back: every thread `f` starts keeps them blocked for good (a thread pool made before the
/// session's signal thread exists must never take a SIGTERM's default action).
pub fn with_termination_blocked<T>(f: impl FnOnce() -> T) -> T {
    let set = termination_set();
    // SAFETY: sigset_t is plain data, written by pthread_sigmask before it is read.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is initialised and `old` is a valid place for the previous mask.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old) };
    let out = f();
    if rc == 0 {
        // SAFETY: `old` holds the mask pthread_sigmask returned above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    }
    out
}

/// Wait until SIGTERM or SIGINT arrives (they must be blocked); returns the signal number.
pub fn wait_for_termination() -> std::io::Result<i32> {
    let set = termination_set();
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is initialised and `sig` is a valid place for the signal number.
    let rc = unsafe { libc::sigwait(&set, &mut sig) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(sig)
}

/// SIGPIPE ignored, as Rust's runtime leaves it at the start of `main`: a fork of `mur` that
/// runs a helper of its own in place of an exec (whose steps set SIGPIPE back to the
/// default a command expects) then gets `EPIPE` from a write to a peer that is gone, as an
/// exec'd helper does, and is not killed by it.
pub fn ignore_sigpipe() {
    // SAFETY: sets one disposition of this process's own table.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

fn termination_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before sigaddset uses it,
    // and both only write inside the set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}
