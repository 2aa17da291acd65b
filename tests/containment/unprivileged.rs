//! What an ordinary account gets (uid 4242, no supplementary groups), with no pids cgroup
//! of its own and with one delegated: `scoped` and `sealed` run, a fork bomb stops at the
//! session's ceiling, `kill -9` of `mur exec` and SIGTERM end everything the command
//! started, `mur doctor` names what bounds a session's processes, and with user namespaces
//! refused (staged in a user namespace of the test's own whose `user.max_user_namespaces`
//! is 0) `scoped` runs with its network closed while `sealed` and egress rules are refused.
//! The escape suite as that account is in `containment.rs`.

use crate::common;
use common::probe::probe_binary;
use common::supervision::{gone_within, live, wait_for_sleeps};
use common::unprivileged::{chown_tree, userns_allowed, Account, USER};
use common::TempDir;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const MUR: &str = env!("CARGO_BIN_EXE_mur");

/// A capsule directory the account owns, allowing `allow`.
struct Place {
    t: TempDir,
}

impl Place {
    fn new(label: &str, allow: &str, extra: &str) -> Place {
        let t = TempDir::new(label);
        std::fs::write(
            t.path().join("murmur.yaml"),
            format!("name: user\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [{allow}]\n{extra}"),
        )
        .unwrap();
        std::fs::create_dir_all(t.path().join("work")).unwrap();
        chown_tree(t.path());
        Place { t }
    }

    /// `mur ARGS` as `account`, with the probe on `PATH` and its own home and cache.
    fn mur(&self, account: &Account, args: &[&str]) -> Command {
        let mut base = Command::new(MUR);
        base.env_clear();
        let mut cmd = account.command(base);
        cmd.args(args)
            .env(
                "PATH",
                format!("{}:/usr/bin:/bin", probe_binary().parent().unwrap().display()),
            )
            .env("HOME", self.t.path())
            .env("MURMUR_CACHE_DIR", self.t.path().join("cache"))
            .env("MURMUR_RECORDS_DIR", self.t.path().join("records"))
            .stdin(Stdio::null());
        cmd
    }

    /// `mur exec --containment CLASS -- CMD` as `account`.
    fn exec(&self, account: &Account, class: &str, cmd: &[&str]) -> Command {
        let manifest = self.t.path().join("murmur.yaml");
        let work = self.t.path().join("work");
        let mut args = vec![
            "exec",
            "--manifest",
            manifest.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
            "--containment",
            class,
            "--",
        ];
        args.extend_from_slice(cmd);
        self.mur(account, &args)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn an_ordinary_account_runs_every_class_and_a_fork_bomb_stops_at_the_ceiling() {
    let mut accounts = vec![Account::without_cgroup(), Account::with_delegated_cgroup()];
    match Account::with_delegated_v2() {
        Some(a) => accounts.push(a),
        None => println!("no cgroup2 filesystem here: a delegated v2 subtree is not staged"),
    }
    for account in accounts {
        let delegated = account.cgroup().is_some() || account.v2_has_pids();
        let place = Place::new("user-classes", "id, escape-probe", "");
        for class in account.classes() {
            let out: Output = place.exec(&account, class, &["id", "-u"]).output().unwrap();
            assert_eq!(
                (text(&out.stdout).as_str(), out.status.code()),
                (format!("{USER}\n").as_str(), Some(0)),
                "{class}, delegated {delegated}: {}",
                text(&out.stderr)
            );
            if class == "advisory" {
                continue;
            }
            let out = place
                .exec(&account, class, &["escape-probe", "fork-bomb"])
                .output()
                .unwrap();
            let line = text(&out.stdout);
            let n: u32 = line
                .split_whitespace()
                .nth(4)
                .and_then(|n| n.parse().ok())
                .unwrap_or(u32::MAX);
            assert!(
                line.contains(" contained ") && n < 256,
                "{class}, delegated {delegated}: {line} {}",
                text(&out.stderr)
            );
        }
        // `mur doctor` names what bounds and ends a session's processes here.
        let out = place.mur(&account, &["doctor", "--json"]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let processes = v["processes"].as_str().unwrap_or_default();
        if delegated {
            assert!(processes.starts_with("a pids cgroup per session"), "{v}");
        } else if userns_allowed() {
            assert!(processes.starts_with("a PID namespace per command"), "{v}");
        }
    }
}

/// `kill -9` of `mur exec` as the account, with the command's children in the background
/// (one of them in a session of its own under the contained classes): within a second
/// nothing of it runs.
#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn a_killed_mur_exec_of_an_ordinary_account_leaves_nothing_running_without_a_cgroup() {
    // Advisory promises no more than the command's process group: a process that leaves
    // it (setsid) is its own (README, threat model).
    signal_ends_everything(rustix::process::Signal::KILL, 5000, |class, marker| {
        let escaper = if class == "advisory" { "" } else { "setsid " };
        format!("sleep {marker} & {escaper}sleep {marker} & sleep {marker}")
    });
}

/// SIGTERM to `mur exec` as the account, its command ignoring SIGTERM: the contained
/// classes end at once (pid 1 of the command's namespace ends on the signal), advisory
/// after the grace period; nothing of it runs afterwards.
#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn sigterm_ends_an_ordinary_accounts_mur_exec_within_seconds() {
    signal_ends_everything(rustix::process::Signal::TERM, 6000, |_, marker| {
        format!("trap '' TERM; sleep {marker} & sleep {marker} & sleep {marker}")
    });
}

/// For each class the account (no cgroup) is backed in: `mur exec -- bash -c SCRIPT`
/// (`script` of the class and a marker, starting three marked sleeps), `signal` to `mur`
/// once they run; `mur` must end within 8 s and no marked process run a second later.
fn signal_ends_everything(signal: rustix::process::Signal, tag: u32, script: impl Fn(&str, &str) -> String) {
    let account = Account::without_cgroup();
    let place = Place::new("user-signal", "bash, sleep, setsid", "");
    for (i, class) in account.classes().into_iter().enumerate() {
        let marker = format!("{}.{}{i}", tag + i as u32, std::process::id());
        let mut mur = place
            .exec(&account, class, &["bash", "-c", &script(class, &marker)])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for_sleeps(&marker, 3);
        let sent = Instant::now();
        rustix::process::kill_process(rustix::process::Pid::from_raw(mur.id() as i32).unwrap(), signal)
            .unwrap();
        mur.wait().unwrap();
        let ended = sent.elapsed();
        assert!(
            ended < Duration::from_secs(8),
            "{class} {signal:?}: mur exec took {ended:?}"
        );
        let took = gone_within(&marker, Duration::from_secs(1));
        assert!(
            took.is_some(),
            "{class} {signal:?}: still running a second after: {:?}",
            live(&marker)
        );
        println!(
            "{class} {signal:?}: the last process gone {:?} after",
            took.unwrap()
        );
    }
}

/// Run `mur ARGS` (with `env`) as [`USER`] inside a user namespace of the test's own in
/// which `user.max_user_namespaces` is 0, holding uid 0 and [`USER`] mapped to themselves:
/// there no user namespace can be made, as on a host where unprivileged ones are turned
/// off, and nothing outside changes. The child joins `cgroup` (its `cgroup.procs`) first;
/// the test, root outside, writes the child's id maps (only a writer privileged in the
/// parent namespace may map more than its own id).
fn without_user_namespaces(cgroup: &std::path::Path, args: &[&str], env: &[(String, String)]) -> Output {
    use std::ffi::CString;
    use std::io::Read;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let cstr = |s: &str| CString::new(s).unwrap();
    let argv: Vec<CString> = std::iter::once(MUR)
        .chain(args.iter().copied())
        .map(cstr)
        .collect();
    let envp: Vec<CString> = env.iter().map(|(k, v)| cstr(&format!("{k}={v}"))).collect();
    let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|c| c.as_ptr()).collect();
    argv_p.push(std::ptr::null());
    let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|c| c.as_ptr()).collect();
    envp_p.push(std::ptr::null());
    let procs = std::fs::OpenOptions::new()
        .write(true)
        .open(cgroup.join("cgroup.procs"))
        .unwrap();
    let pipe = || {
        let (r, w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
        (r, w)
    };
    let ((sync_r, sync_w), (go_r, go_w), (out_r, out_w), (err_r, err_w)) = (pipe(), pipe(), pipe(), pipe());
    let raw = |f: &OwnedFd| f.as_raw_fd();
    let (sw, gr, ow, ew, pf) = (
        raw(&sync_w),
        raw(&go_r),
        raw(&out_w),
        raw(&err_w),
        procs.as_raw_fd(),
    );
    // SAFETY: the child makes raw syscalls on values prepared above and execs or exits; it
    // allocates nothing (the test process may be threaded).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let fail = |code: i32| -> ! { libc::_exit(code) };
            // A failed step says which (its code) and why (errno) on the sync pipe first.
            let tell = |code: u8| {
                // (Reads errno; an OS error is no allocation.)
                let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
                let mut b = [code, 0, 0, 0, 0];
                b[1..].copy_from_slice(&e.to_ne_bytes());
                libc::write(sw, b.as_ptr().cast(), b.len());
            };
            let put = |path: &std::ffi::CStr, b: &[u8]| {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                fd >= 0 && libc::write(fd, b.as_ptr().cast(), b.len()) == b.len() as isize
            };
            let mut byte = [0u8; 1];
            if libc::write(pf, b"0".as_ptr().cast(), 1) != 1 {
                tell(120);
                fail(120);
            }
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                tell(121);
                fail(121);
            }
            libc::write(sw, b"u".as_ptr().cast(), 1);
            if libc::read(gr, byte.as_mut_ptr().cast(), 1) != 1 {
                fail(122);
            }
            if !put(c"/proc/sys/user/max_user_namespaces", b"0") {
                fail(123);
            }
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(USER) != 0 || libc::setuid(USER) != 0
            {
                fail(124);
            }
            libc::dup2(ow, 1);
            libc::dup2(ew, 2);
            libc::execve(argv_p[0], argv_p.as_ptr(), envp_p.as_ptr());
            fail(127);
        }
    }
    drop((sync_w, go_r, out_w, err_w, procs));
    let mut b = [0u8; 5];
    let n = rustix::io::read(&sync_r, &mut b).unwrap();
    if n != 1 || b[0] != b'u' {
        // The child's failed step (120: joining the cgroup, 121: unshare(CLONE_NEWUSER)) and
        // its errno, as it told them before it exited.
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let errno =
            (n == 5).then(|| std::io::Error::from_raw_os_error(i32::from_ne_bytes([b[1], b[2], b[3], b[4]])));
        panic!(
            "the staging child did not unshare: step {} failed ({errno:?}), exit status {}",
            b[0],
            libc::WEXITSTATUS(status)
        );
    }
    let map = format!("0 0 1\n{USER} {USER} 1\n");
    std::fs::write(format!("/proc/{pid}/uid_map"), &map).unwrap();
    std::fs::write(format!("/proc/{pid}/gid_map"), &map).unwrap();
    rustix::io::write(&go_w, b"g").unwrap();
    let reader = |f: OwnedFd| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            // SAFETY: the descriptor is owned by this thread from here on.
            let mut file = unsafe { std::fs::File::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(f)) };
            let _ = file.read_to_end(&mut v);
            v
        })
    };
    let (out, err) = (reader(out_r), reader(err_r));
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Output {
        status: std::os::unix::process::ExitStatusExt::from_raw(status),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn without_user_namespaces_scoped_runs_with_its_network_closed_and_sealed_is_refused() {
    // A pids cgroup delegated to the account bounds its sessions here (no PID namespace
    // can be made without a user namespace).
    let account = Account::with_delegated_cgroup();
    let bare = Place::new("user-nouserns", "id, escape-probe", "");
    let ruled = Place::new(
        "user-nouserns-rules",
        "id, escape-probe",
        "  network:\n    allow: [\"localhost:443\"]\n",
    );
    let cgroup = account.cgroup().unwrap().to_path_buf();
    let run = |p: &Place, args: &[&str]| -> Output {
        let env: Vec<(String, String)> = [
            (
                "PATH",
                format!("{}:/usr/bin:/bin", probe_binary().parent().unwrap().display()),
            ),
            ("HOME", p.t.path().display().to_string()),
            ("MURMUR_CACHE_DIR", p.t.path().join("cache").display().to_string()),
            (
                "MURMUR_RECORDS_DIR",
                p.t.path().join("records").display().to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        without_user_namespaces(&cgroup, args, &env)
    };
    let manifest = |p: &Place| p.t.path().join("murmur.yaml").display().to_string();
    let work = |p: &Place| p.t.path().join("work").display().to_string();
    let exec = |p: &Place, class: &str, cmd: &[&str]| -> Output {
        let (m, w) = (manifest(p), work(p));
        let mut args = vec![
            "exec",
            "--manifest",
            &m,
            "--workdir",
            &w,
            "--containment",
            class,
            "--",
        ];
        args.extend_from_slice(cmd);
        run(p, &args)
    };
    let probe: serde_json::Value =
        serde_json::from_slice(&run(&bare, &["__probe", "sealed"]).stdout).unwrap_or_default();
    if probe["landlock"].get("Ok").is_none() || probe["pids_cgroup"].get("Ok").is_none() {
        println!("not staged here (landlock or the delegated cgroup missing): {probe}");
        return;
    }
    // The namespaces are really refused inside.
    assert!(probe["netns"].get("Err").is_some(), "{probe}");
    assert!(probe["pidns"].get("Err").is_some(), "{probe}");
    let out = exec(&bare, "scoped", &["id", "-u"]);
    assert_eq!(text(&out.stdout), format!("{USER}\n"), "{}", text(&out.stderr));
    // The network cases of the escape suite: no IP socket, no abstract unix socket.
    for case in ["tcp-public", "tcp-loopback", "udp-send", "tcp-self"] {
        let out = exec(&bare, "scoped", &["escape-probe", case, "9"]);
        let line = text(&out.stdout);
        assert!(
            line.starts_with(case) && line.trim_end().ends_with("contained"),
            "{case}: {line} {}",
            text(&out.stderr)
        );
    }
    // The filesystem cases: nothing outside the workdir is read or written.
    let outside = bare.t.path().join("outside-created");
    let out = exec(
        &bare,
        "scoped",
        &["escape-probe", "create-outside", outside.to_str().unwrap()],
    );
    assert!(
        text(&out.stdout).trim_end().ends_with("contained"),
        "{}",
        text(&out.stdout)
    );
    assert!(!outside.exists());
    let out = exec(&bare, "scoped", &["escape-probe", "read-shadow"]);
    assert!(
        text(&out.stdout).trim_end().ends_with("contained"),
        "{}",
        text(&out.stdout)
    );
    // Sealed is refused with the reason; so are egress rules, in every class.
    let out = exec(&bare, "sealed", &["id", "-u"]);
    let err = text(&out.stderr);
    assert!(
        err.starts_with("error[E-CAP-003]: containment floor not met: declared 'sealed', achieved 'scoped'"),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    for class in ["advisory", "scoped"] {
        let out = exec(&ruled, class, &["id", "-u"]);
        let err = text(&out.stderr);
        assert!(err.contains("error[E-CAP-005]"), "{class}: {err}");
        assert!(out.stdout.is_empty(), "{class}");
    }
    // And `mur doctor` says exactly that.
    let out = run(&bare, &["doctor"]);
    let doctor = text(&out.stdout);
    assert!(doctor.contains("    scoped        yes\n"), "{doctor}");
    assert!(doctor.contains("    sealed        no: netns: "), "{doctor}");
    assert!(doctor.contains("user.max_user_namespaces"), "{doctor}");
}

/// Another account holding the lock on the directory where root's session cgroups are
/// made (anyone who may read it may `flock` it) does not stall root's sessions.
#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn a_stranger_holding_the_cgroup_parents_lock_does_not_stall_a_session() {
    if !common::probe::host_backs_scoped() {
        return;
    }
    let Some(parent) = common::supervision::pids_cgroup_of("self") else {
        println!("no pids cgroup here: not run");
        return;
    };
    let mut holder = Account::without_cgroup()
        .command(Command::new("flock"))
        .arg(&parent)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let place = Place::new("stranger-lock", "\"true\"", "");
    let started = Instant::now();
    let manifest = place.t.path().join("murmur.yaml");
    let work = place.t.path().join("work");
    let out = Command::new(MUR)
        .args(["exec", "--manifest"])
        .arg(&manifest)
        .arg("--workdir")
        .arg(&work)
        .args(["--containment", "scoped", "--", "true"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        took < Duration::from_secs(10),
        "the session waited {took:?} for a stranger's lock"
    );
}

/// `MURMUR_CGROUP_PARENT` naming a directory another user owns is not used: that user
/// could move the session's processes out of its cgroup.
#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: acts as a second account")]
fn a_cgroup_parent_another_user_owns_is_refused() {
    let Some(base) = common::supervision::pids_cgroup_of("self") else {
        println!("no pids cgroup here: not run");
        return;
    };
    let other = base.join(format!("murmur-test-other-{}", std::process::id()));
    std::fs::create_dir_all(&other).unwrap();
    std::os::unix::fs::chown(&other, Some(USER + 1), Some(USER + 1)).unwrap();
    let place = Place::new("other-parent", "id", "");
    let out = place
        .mur(&Account::without_cgroup(), &["__probe", "sealed"])
        .env("MURMUR_CGROUP_PARENT", &other)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir(&other);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let err = v["pids_cgroup"]["Err"].as_str().unwrap_or_default();
    assert!(err.contains(&format!("belongs to uid {}", USER + 1)), "{v}");
}
