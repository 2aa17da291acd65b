//! Unit tests of the process primitive: streams, environment, status, failures, signal
//! state in the child, and a start handed over.

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
    for may_hand_over in [false, true] {
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
            may_hand_over,
            &mut |_| Ok(()),
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
        false,
        &mut |_| Ok(()),
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
        false,
        &mut |_| Err(io::Error::from_raw_os_error(libc::EPERM)),
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
        false,
        &mut |_| {
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

#[test]
fn a_start_handed_over_is_mur_s_child_and_returns_once_released() {
    let img = image(&["-c", "echo ran; exit 5"]);
    let mut p = start(
        &img,
        [Stdio::null(), Stdio::piped(), Stdio::null()],
        true,
        &mut |side| {
            // SAFETY: called from the handed-over process; the closures allocate nothing.
            let mut init = || unsafe { side.start_command(&mut || side.exec()) };
            // SAFETY: the setup of a start that may hand over.
            Err(unsafe { side.hand_over(&mut init) })
        },
        &|_| {},
    )
    .unwrap();
    // The handed-over process (not the child that exited 0) is the one waited for, and
    // its stacks stay mapped until then.
    assert!(p.stacks.is_some());
    let mut out = String::new();
    p.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(out, "ran\n");
    assert_eq!(p.wait().unwrap().code(), Some(5));
    assert!(p.stacks.is_none());
    // The same setup without spare stacks cannot hand over: the child exits 127.
    let mut p = start(
        &img,
        [Stdio::null(), Stdio::null(), Stdio::null()],
        false,
        // SAFETY: the closure allocates nothing (the hand-over fails before it runs).
        &mut |side| Err(unsafe { side.hand_over(&mut || Ok(0)) }),
        &|_| {},
    )
    .unwrap();
    assert_eq!(p.wait().unwrap().code(), Some(127));
}

#[test]
fn a_fork_of_mur_is_refused_while_it_runs_more_than_one_thread() {
    fn never() -> i32 {
        7
    }
    // A test runs on a thread of its own beside the harness's main thread.
    assert!(!single_threaded());
    let img = Image::forked(never, Path::new("/")).unwrap();
    let e = start(
        &img,
        [Stdio::null(), Stdio::null(), Stdio::null()],
        false,
        &mut |_| Ok(()),
        &|_| {},
    )
    .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::Unsupported);
    assert!(Image::forked(never, Path::new("/a\0b")).is_err());
}

#[test]
fn a_stack_mapping_is_kept_for_the_next_start_the_last_kept_first_and_at_most_kept_of_a_size() {
    // A pool of the test's own (the process's is shared by every test starting children).
    let pool = StackPool::new();
    let [a, b] = [0, 1].map(|_| Stacks::map(1).unwrap());
    let (a_base, b_base) = (a.base, b.base);
    assert!(pool.put(a).is_none() && pool.put(b).is_none());
    let c = Stacks::map(1).unwrap();
    let c = pool.put(c).expect("a third mapping of one stack is given back");
    assert!(pool.take(3).is_none(), "no mapping of three stacks is kept");
    let three = Stacks::map(3).unwrap();
    let three_base = three.base;
    assert!(pool.put(three).is_none(), "each size has its own room");
    let taken: Vec<Stacks> = [1, 1, 3].map(|n| pool.take(n).unwrap()).into();
    let bases: Vec<_> = taken.iter().map(|s| s.base).collect();
    assert_eq!(
        bases,
        [b_base, a_base, three_base],
        "the last kept of a size first"
    );
    assert!(pool.take(1).is_none());
    // Dropped, these go to the process's pool (or are unmapped), never twice.
    drop((c, taken));
}
