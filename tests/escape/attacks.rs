//! The attacks of the hostile review, one test each, graded on what the host sees: a
//! namespace-creating `clone`/`clone3`, `TIOCSTI` into the operator's terminal, metadata
//! writes on a file outside the workdir, code from the workdir run through `ld.so` or a
//! memfd, `scoped` below landlock ABI 6, limits and scheduling of host processes, a session
//! process outliving `mur exec`, and host unix sockets under `unix_sockets: true`. (The
//! same cases, but the last, are rows of the escape suite.)
#![allow(unsafe_code)]

use super::{assert_refused_everywhere, host_backs_scoped, host_backs_sealed, sandbox, text, MUR};
use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The classes this host backs (empty when it backs neither; the caller then asserts the
/// refusal instead).
fn classes() -> Vec<&'static str> {
    let mut c = Vec::new();
    if host_backs_scoped() {
        c.push("scoped");
        if host_backs_sealed() {
            c.push("sealed");
        }
    }
    c
}

/// The report line of the probe: `[case, syscall, errno, verdict, ...]`.
fn report(out: &std::process::Output) -> Vec<String> {
    let line = text(&out.stdout).lines().next().unwrap_or_default().to_string();
    assert!(!line.is_empty(), "no report; stderr: {}", text(&out.stderr));
    line.split_whitespace().map(String::from).collect()
}

/// Everything the host can see of a file's metadata.
#[derive(Debug, PartialEq, Eq)]
pub struct Meta {
    mode: u32,
    uid: u32,
    gid: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    xattrs: Vec<u8>,
}

impl Meta {
    pub fn of(p: &Path) -> Meta {
        let m = std::fs::symlink_metadata(p).unwrap();
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        let mut buf = vec![0u8; 4096];
        // SAFETY: a NUL-terminated path and a buffer valid for its length.
        let n = unsafe { libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        buf.truncate(n.max(0) as usize);
        Meta {
            mode: m.mode(),
            uid: m.uid(),
            gid: m.gid(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
            xattrs: buf,
        }
    }
}

/// A file outside the workdir: mode 0640, ten bytes, and (where the filesystem has user
/// xattrs) the attribute `user.murmur.before`.
pub fn outside_file(dir: &Path) -> PathBuf {
    let p = dir.join("outside-meta");
    std::fs::write(&p, b"0123456789").unwrap();
    std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: NUL-terminated name and path, a value valid for its length.
    unsafe {
        libc::setxattr(
            c.as_ptr(),
            c"user.murmur.before".as_ptr(),
            b"1".as_ptr().cast(),
            1,
            0,
        )
    };
    p
}

/// Put back what an escaped case changed, so the next case is graded on its own.
pub fn restore(p: &Path, m: &Meta) {
    let _ = std::fs::write(p, b"0123456789");
    let _ = std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m.mode & 0o7777));
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: NUL-terminated names and path, values valid for their lengths.
    unsafe {
        libc::removexattr(c.as_ptr(), c"user.murmur.escape".as_ptr());
        libc::setxattr(
            c.as_ptr(),
            c"user.murmur.before".as_ptr(),
            b"1".as_ptr().cast(),
            1,
            0,
        );
    }
}

/// The marker file an exec case's executed copy would create, if `case` is one.
pub fn marker_of<'a>(case: &str, arg: &'a str) -> Option<&'a str> {
    (case == "ldso-exec" || case.starts_with("memfd-")).then_some(arg)
}

#[test]
fn clone_and_clone3_create_no_namespace() {
    let classes = classes();
    if classes.is_empty() {
        return assert_refused_everywhere();
    }
    let s = sandbox("clone", "");
    for class in classes {
        let out = s.exec(class, &["escape-probe", "clone-newuser"], &[]);
        let f = report(&out);
        assert_eq!(
            (f[1].as_str(), f[2].as_str(), f[3].as_str()),
            ("clone", "1", "contained"),
            "{class}: {f:?}"
        );
        let out = s.exec(class, &["escape-probe", "clone3-newuser"], &[]);
        let f = report(&out);
        assert_eq!(
            (f[1].as_str(), f[2].as_str(), f[3].as_str()),
            ("clone3", "38", "contained"),
            "{class}: {f:?}"
        );
    }
}

/// A pty pair: the master, and the slave opened read-write without becoming a controlling
/// terminal.
fn pty() -> (OwnedFd, OwnedFd) {
    // SAFETY: posix_openpt returns a new descriptor (or -1); grantpt/unlockpt/ptsname_r take
    // it and a buffer valid for its length; open gets a NUL-terminated path.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(m >= 0, "posix_openpt");
        let master = OwnedFd::from_raw_fd(m);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(m, name.as_mut_ptr(), name.len()), 0);
        let sl = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(sl >= 0, "open the pty slave");
        (master, OwnedFd::from_raw_fd(sl))
    }
}

/// Whatever is waiting to be read on `fd` (non-blocking).
fn drain(fd: &OwnedFd) -> Vec<u8> {
    let _ = rustix::fs::fcntl_setfl(fd, rustix::fs::OFlags::NONBLOCK);
    let mut out = Vec::new();
    let mut b = [0u8; 4096];
    while let Ok(n) = rustix::io::read(fd, &mut b[..]) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&b[..n]);
    }
    out
}

#[test]
fn tiocsti_does_not_reach_the_operators_terminal() {
    let classes = classes();
    if classes.is_empty() {
        return assert_refused_everywhere();
    }
    let s = sandbox("tiocsti", "");
    const KEYS: &str = "echo injected-by-capsule\n";
    for class in classes {
        for case in ["tiocsti", "tiocsti-high"] {
            let (master, slave) = pty();
            // `mur exec` runs with the pty as its controlling terminal (its own session) and
            // as its stderr, as an operator's interactive shell would give it.
            let mut cmd = Command::new(MUR);
            cmd.args(["exec", "--manifest"])
                .arg(&s.manifest)
                .arg("--workdir")
                .arg(&s.workdir)
                .args(["--containment", class, "--", "escape-probe", case, KEYS])
                .env("PATH", s.path_env())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::from(slave.try_clone().unwrap()));
            // SAFETY: setsid and ioctl(TIOCSCTTY) on the child's own stderr, after fork.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() < 0 || libc::ioctl(2, libc::TIOCSCTTY, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let out = cmd.output().unwrap();
            let f = report(&out);
            let on_master = text(&drain(&master));
            let pending = drain(&slave);
            assert!(
                !on_master.contains("injected-by-capsule") && pending.is_empty(),
                "{case}/{class}: keystrokes reached the terminal: {on_master:?} {:?} {f:?}",
                text(&pending)
            );
            assert_eq!(
                (f[1].as_str(), f[3].as_str()),
                ("ioctl", "contained"),
                "{case}/{class}"
            );
            assert!(
                on_master.contains("visible-output"),
                "{case}/{class}: the command's stderr did not reach the terminal: {on_master:?}"
            );
        }
    }
}

#[test]
fn metadata_of_a_file_outside_the_workdir_stays_unchanged() {
    let classes = classes();
    if classes.is_empty() {
        return assert_refused_everywhere();
    }
    let s = sandbox("metadata", "");
    let file = outside_file(s.t.path());
    let mut before = Meta::of(&file);
    let arg = file.display().to_string();
    let mut changed = Vec::new();
    for class in classes {
        for case in [
            "chmod-outside",
            "fchmodat-outside",
            "chown-outside",
            "lchown-outside",
            "utimensat-outside",
            "utimes-outside",
            "setxattr-outside",
            "removexattr-outside",
            "truncate-outside",
        ] {
            if case == "utimes-outside" && !cfg!(target_arch = "x86_64") {
                continue;
            }
            let out = s.exec(class, &["escape-probe", case, &arg], &[]);
            let f = report(&out);
            let now = Meta::of(&file);
            if now != before || f[3] != "contained" {
                changed.push(format!("{case}/{class}: {f:?}: {before:?} -> {now:?}"));
                restore(&file, &before);
                before = Meta::of(&file);
            }
        }
    }
    assert!(changed.is_empty(), "metadata changed:\n{}", changed.join("\n"));
}

#[test]
fn code_written_in_the_sandbox_does_not_run() {
    let classes = classes();
    if classes.is_empty() {
        return assert_refused_everywhere();
    }
    let s = sandbox("exec-code", "");
    std::fs::copy(super::probe_binary(), s.workdir.join("probe-copy")).unwrap();
    let mut ran = Vec::new();
    for class in classes {
        for case in [
            "ldso-exec",
            "memfd-execveat",
            "memfd-proc-exec",
            "memfd-sealed-execveat",
        ] {
            // ld.so loading a workdir file with mmap(PROT_EXEC) is outside what landlock
            // mediates: `scoped` does not stop it (the threat model says so); `sealed` does.
            if case == "ldso-exec" && class == "scoped" {
                continue;
            }
            let marker = format!("{case}-{class}-marker");
            let out = s.exec(class, &["escape-probe", case, &marker], &[]);
            let f = report(&out);
            if s.workdir.join(&marker).exists() || f[3] != "contained" {
                ran.push(format!("{case}/{class}: {f:?}"));
            }
        }
    }
    assert!(ran.is_empty(), "code from the sandbox ran:\n{}", ran.join("\n"));
}

#[test]
fn scoped_is_refused_below_landlock_abi_6() {
    let s = sandbox("abi", "");
    // ABI 5: nothing scopes signals (a scoped child could kill any process of its uid);
    // ABI 2: truncate(2) is not mediated either.
    for (abi, why) in [
        ("5", "landlock ABI 5 is below 6: signal and abstract unix socket scoping need landlock ABI 6 (without it a scoped child could signal any process of its uid)"),
        ("2", "landlock ABI 2 is below 6: signal and abstract unix socket scoping need landlock ABI 6 (without it a scoped child could signal any process of its uid), and truncate(2) of files outside the workdir is mediated only from ABI 3"),
    ] {
        let out = s.exec(
            "scoped",
            &["touch", "x"],
            &[("MURMUR_PROBE_DENY", &format!("landlock_abi={abi}"))],
        );
        assert_eq!(out.status.code(), Some(1), "ABI {abi}");
        let first = text(&out.stderr).lines().next().unwrap_or_default().to_string();
        let expected = if host_backs_scoped() {
            format!("error[E-CAP-003]: containment floor not met: declared 'scoped', achieved 'advisory': {why}")
        } else {
            "error[E-CAP-003]: containment floor not met: declared 'scoped', achieved 'advisory'".to_string()
        };
        assert!(first.starts_with(&expected), "ABI {abi}: {first}");
        assert!(!s.workdir.join("x").exists());
    }
}

/// The cases that act on a host process (its pid the argument) other than by a signal.
pub const HOST_PROCESS_CASES: [&str; 8] = [
    "prlimit-host",
    "setpriority-host",
    "setpriority-user",
    "sched_setaffinity-host",
    "sched_setscheduler-host",
    "sched_setparam-host",
    "sched_setattr-host",
    "get_robust_list-host",
];

/// A host `sleep SECONDS` of the test's uid with no capabilities (an empty bounding set,
/// so even as root its exec keeps none), as any unprivileged user's process is: with none
/// to lose, the kernel's own check that a nice or scheduler change does not touch a
/// process holding capabilities the caller lacks does not protect it.
pub fn capless_sleep(seconds: &str) -> std::process::Child {
    let mut cmd = Command::new("sleep");
    cmd.arg(seconds);
    // SAFETY: prctl(PR_CAPBSET_DROP) takes integers; it runs in the forked child before exec.
    unsafe {
        cmd.pre_exec(|| {
            for cap in 0..64 {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) < 0 {
                    break;
                }
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// What the host sees of a process's limits and scheduling: `/proc/<pid>/limits`, its nice
/// value, policy and real-time priority, and the CPUs it may run on.
pub fn host_proc(pid: &str) -> String {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap_or_default();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let cpus = status
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .unwrap_or_default();
    let field = |i: usize| rest.get(i).copied().unwrap_or("?");
    format!(
        "{limits}nice {} rt_priority {} policy {} {cpus}",
        field(16),
        field(37),
        field(38)
    )
}

#[test]
fn host_processes_keep_their_limits_and_scheduling() {
    let classes = classes();
    if classes.is_empty() {
        return assert_refused_everywhere();
    }
    let s = sandbox("host-process", "");
    let mut host = capless_sleep("60");
    let pid = host.id().to_string();
    let mut before = host_proc(&pid);
    let mut changed = Vec::new();
    for class in classes {
        for case in HOST_PROCESS_CASES {
            let out = s.exec(class, &["escape-probe", case, &pid], &[]);
            let f = report(&out);
            let now = host_proc(&pid);
            if now != before || f[3] != "contained" {
                changed.push(format!("{case}/{class}: {f:?}:\n{before}\n->\n{now}"));
                before = now;
            }
        }
    }
    let alive = host.try_wait().unwrap().is_none();
    let _ = host.kill();
    let _ = host.wait();
    assert!(alive, "the host process was killed");
    assert!(
        changed.is_empty(),
        "a host process was changed:\n{}",
        changed.join("\n")
    );
}

#[test]
fn no_process_of_a_session_outlives_mur_exec() {
    let classes = classes();
    if classes.is_empty() {
        return assert_refused_everywhere();
    }
    let s = sandbox("persist", "");
    for class in classes {
        // The probe forks a child that keeps touching the marker, then tries to set
        // RLIMIT_NOFILE 0 on its parent (`mur` under scoped), whose cgroup cleanup opened
        // `cgroup.procs` only then.
        let marker = s.workdir.join(format!("persist-{class}"));
        let out = s.exec(
            class,
            &["escape-probe", "prlimit-parent", &marker.display().to_string()],
            &[],
        );
        let f = report(&out);
        std::thread::sleep(std::time::Duration::from_millis(100));
        let _ = std::fs::remove_file(&marker);
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert!(
            !marker.exists(),
            "{class}: a process of the session outlived mur exec: {f:?}"
        );
        assert_eq!(
            (f[1].as_str(), f[3].as_str()),
            ("prlimit64", "contained"),
            "{class}: {f:?}"
        );
    }
}

#[test]
fn unix_sockets_reach_no_host_socket() {
    let s = sandbox("unix-sockets", "  network:\n    unix_sockets: true\n");
    let path = s.t.path().join("agent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    listener.set_nonblocking(true).unwrap();
    let arg = path.display().to_string();
    for class in ["scoped", "sealed"] {
        let backed = match class {
            "scoped" => host_backs_scoped(),
            _ => host_backs_sealed(),
        };
        let out = s.exec(class, &["escape-probe", "unix-path", &arg], &[]);
        let stderr = text(&out.stderr);
        if class == "scoped" || !backed {
            // scoped cannot hide a host socket's path (a network namespace does not isolate
            // filesystem-bound unix sockets, landlock does not mediate connect): refused.
            assert_eq!(
                out.status.code(),
                Some(1),
                "{class}: {}{stderr}",
                text(&out.stdout)
            );
            assert!(
                out.stdout.is_empty(),
                "{class}: the command ran: {}",
                text(&out.stdout)
            );
            assert!(stderr.starts_with("error[E-CAP-003]: "), "{class}: {stderr}");
            if backed {
                assert!(
                    stderr.contains("capabilities.network.unix_sockets: true needs containment 'sealed'"),
                    "{stderr}"
                );
            }
            continue;
        }
        let f = report(&out);
        assert_eq!(
            (f[1].as_str(), f[2].as_str(), f[3].as_str()),
            ("connect", "2", "contained"),
            "{class}: {f:?}"
        );
    }
    assert!(listener.accept().is_err(), "the host's unix socket was reached");
}

#[test]
fn the_probe_reports_the_landlock_abi_the_kernel_reports() {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: with the VERSION flag the kernel reads no attribute (NULL, size 0).
    let kernel = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    let out = Command::new(MUR).args(["__probe", "scoped"]).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    if kernel <= 0 {
        assert_eq!(v["landlock_abi"], 0, "{v}");
        assert!(v["landlock"].get("Err").is_some(), "{v}");
        return;
    }
    // Asked, not inferred from which access sets a ruleset accepts (ABI 5 and 6 have the
    // same filesystem rights, so an ABI-5 kernel used to be reported as 6).
    assert_eq!(v["landlock_abi"], kernel, "{v}");
}
