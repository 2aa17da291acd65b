//! `sealed`: the child's own root. The parent plans every step as data (paths as C strings,
//! flags, file contents); the child and pid 1, single-threaded in `mur`'s memory, only run
//! the plan: new user (identity-mapped, `setgroups` denied), mount, PID, network, IPC and UTS
//! namespaces; pid 1 of the new PID namespace composes a tmpfs root (the system
//! directories read-only, `nosuid`, `nodev` and `noexec`, with the shared-library
//! directories, the read grants and each allowed binary and its closure bound over them
//! without `noexec`; an `/etc` allow-list with a synthetic `passwd`/`group`; a private
//! `/dev` (device nodes bound read-only); a fresh `/proc`; a private noexec `/tmp`; the
//! workdir read-write and noexec at its own path), `pivot_root`s into it, detaches the old
//! root and remounts `/` read-only. Paths outside the plan do not exist in the child.
//!
//! Processes, none of which copies `mur`'s memory: the child (outside) unshares and hands
//! the start over to pid 1, a child of `mur`'s own, and exits. Pid 1 starts its own session,
//! catches the signals `mur` forwards (each ends it), composes and enters the root, finishes
//! containment and starts the command in a landlock domain below its own (so the command
//! can never trace or read pid 1, which shares `mur`'s memory), then reaps every process
//! of the namespace and exits with the command's status (128 + signal when killed); the
//! kernel then kills what is left.

mod builder;
mod enter;

use super::runtime_dirs::{ETC_ALLOWED, SYSTEM_DIRS};
use builder::{Builder, Shows, RO};
pub use enter::catch_forwarded_signals;
use std::collections::BTreeMap;
use std::ffi::CString;
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
    /// Remount a bind with `flags` (read-only, noexec, ...) added to the flags the source
    /// mount already had (a user namespace may not clear locked ones).
    Remount {
        dst: CString,
        flags: libc::c_ulong,
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
    /// Fail unless the bind source `src` (opened by path in the new namespace) is the file
    /// with this device and inode number: the one the ELF closure read, not whatever a
    /// rename put at its path since.
    SameSource {
        src: usize,
        dev: u64,
        ino: u64,
    },
    /// Fail unless `path` is the directory with this device and inode number (the workdir
    /// the session holds: a bind by path must have found that one, not a planted symlink's
    /// target).
    Same {
        path: CString,
        dev: u64,
        ino: u64,
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
    /// Whether the child makes a network namespace of its own (false: it has joined the
    /// session's before entering).
    own_network: bool,
    /// Whether the child makes (and maps) a user namespace of its own (false: it has
    /// joined the session's, made and mapped by `mur`'s keyless helper).
    own_user: bool,
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
pub const STEP_SIGNALS: u8 = 20;

const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

fn cstr(s: impl AsRef<[u8]>) -> Result<CString, String> {
    CString::new(s.as_ref()).map_err(|_| "a path with a NUL byte".to_string())
}

/// Plan the sealed root for `workdir` (read-write, and `noexec` like `/tmp` unless
/// `workdir_exec`), `files` (the allowed binaries and their closure: mappable and
/// executable, each bound over the `noexec` system directories unless a library directory
/// already shows it, and checked in the child to be the device and inode given, when given) and `read` (granted read-only directories and files: shown mappable,
/// never executable, since landlock grants no execute there). `workdir` is the workdir's
/// path, bound at that same path inside the root, with the device and inode number the
/// bound directory must have (the one the session holds open), if known; `None` for the
/// host probe.
pub fn plan(
    workdir: Option<(&Path, Option<(u64, u64)>)>,
    files: &BTreeMap<PathBuf, (u64, u64)>,
    read: &[PathBuf],
    workdir_exec: bool,
) -> Result<Plan, String> {
    let stage = ["/tmp", "/mnt", "/var/tmp"]
        .into_iter()
        .find(|d| Path::new(d).is_dir())
        .ok_or("no directory to stage the sealed root on (/tmp, /mnt, /var/tmp)")?;
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let (uid_map, gid_map) = crate::containment::child::own_id_maps();
    let cwd = match workdir {
        Some((w, _)) => cstr(w.as_os_str().as_bytes())?,
        None => cstr("/")?,
    };
    let mut b = Builder::new(Plan {
        ops: Vec::new(),
        descriptions: Vec::new(),
        sources: Vec::new(),
        fds: Vec::new(),
        stage: cstr(stage)?,
        uid_map,
        gid_map,
        cwd,
        own_network: true,
        own_user: true,
    });
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
    // The system directories: readable (landlock grants read there), nothing executable
    // or mappable executable except what is bound over them below.
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
            b.bind(&host, &host, RO | libc::MS_NOEXEC)?;
            b.cover(std::fs::canonicalize(&host).unwrap_or(host), Shows::NoExec);
        }
    }
    // The shared-library directories stay mappable: every dynamically linked program, and
    // every C extension an interpreter loads (`import ssl`), maps libraries from them with
    // PROT_EXEC, which a `noexec` mount refuses.
    for lib in super::runtime_dirs::library_dirs() {
        b.bind_own_path(&lib, RO)?;
    }
    let etc = Path::new("/etc");
    b.mkdir(etc)?;
    for name in ETC_ALLOWED {
        let host = etc.join(name);
        let meta = match std::fs::metadata(&host) {
            Ok(m) => m,
            Err(_) => continue,
        };
        if let Some(parent) = host.parent() {
            b.mkdir_all(parent)?;
        }
        if meta.is_dir() {
            b.mkdir(&host)?;
        } else {
            b.touch(&host)?;
        }
        b.bind(&host, &host, RO | libc::MS_NOEXEC)?;
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
            // Read-only binds: writing to a device node still works, but its mode, owner,
            // times and attributes (the host's inode) cannot change (EROFS).
            b.touch(&host)?;
            b.bind(&host, &host, libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NOEXEC)?;
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
    // Nothing written in the sandbox can be executed or mapped executable (not even by
    // `ld.so ./file`): the private /tmp and the workdir are noexec unless `workdir_exec`.
    let noexec = if workdir_exec { 0 } else { libc::MS_NOEXEC };
    b.mount(
        "tmpfs",
        Path::new("/tmp"),
        nosuid_nodev | noexec,
        "mode=1777,size=256m",
    )?;
    // After the private /tmp (a grant or a binary below /tmp lands in it), before the
    // workdir (which stays writable and noexec whatever a grant shows around it).
    let mut read: Vec<PathBuf> = read.to_vec();
    read.sort();
    for r in &read {
        b.bind_own_path(r, RO)?;
    }
    for (f, ident) in files {
        b.bind_own_file(f, RO, Some(*ident))?;
    }
    if let Some((w, ident)) = workdir {
        b.bind_writable_dir(w, ident)?;
        if !workdir_exec {
            b.noexec(w, w)?;
        }
    }
    Ok(b.plan)
}

impl Plan {
    /// Enter no network namespace of its own: the child joined the session's first.
    pub fn share_network(&mut self) {
        self.own_network = false;
    }

    /// Make no user namespace of its own: the child joined the session's first, which
    /// `mur`'s keyless helper made and mapped (a child of a `mur` that holds a provider key
    /// is not dumpable and could not write its own maps).
    pub fn share_user(&mut self) {
        self.own_user = false;
    }

    /// Whether the child makes a network namespace of its own.
    pub fn owns_network(&self) -> bool {
        self.own_network
    }

    /// What each operation does, for error messages (indexed by `Failure::detail`).
    pub fn descriptions(&self) -> Vec<String> {
        self.descriptions.clone()
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_bound_file_that_is_not_the_one_the_closure_read_refuses_the_root() {
        let env = std::fs::canonicalize("/usr/bin/env").unwrap();
        let st = rustix::fs::stat(&env).unwrap();
        let read = (st.st_dev, st.st_ino);
        let files = |ident| BTreeMap::from([(env.clone(), ident)]);
        let good = crate::containment::probe::run_plan(&mut plan(None, &files(read), &[], false).unwrap());
        let bad = crate::containment::probe::run_plan(
            &mut plan(None, &files((read.0, read.1 ^ 1)), &[], false).unwrap(),
        );
        let err = bad.expect_err("another inode at the path is never bound");
        match good {
            Ok(()) => assert_eq!(
                err,
                format!(
                    "sealed: compose the sealed root: check that {} is the file the ELF closure read (fstat): errno 18 ({})",
                    env.display(),
                    std::io::Error::from_raw_os_error(libc::EXDEV)
                )
            ),
            Err(e) => eprintln!("no sealed root on this host ({e}); the refusal alone is checked: {err}"),
        }
    }

    #[test]
    fn the_plan_binds_the_workdir_last_and_system_code_only_where_granted() {
        let env = std::fs::canonicalize("/usr/bin/env").unwrap();
        let files: BTreeMap<PathBuf, (u64, u64)> = crate::containment::elf::closure([env.as_path()])
            .unwrap()
            .into_iter()
            .map(|(p, g)| (p, (g.dev, g.ino)))
            .collect();
        let libs = crate::containment::runtime_dirs::library_dirs();
        let read = [PathBuf::from("/srv/murmur-grant")];
        let p = plan(Some((Path::new("/srv/murmur-work"), None)), &files, &read, false).unwrap();
        let d = p.descriptions();
        let at = |s: &str| {
            d.iter()
                .position(|x| x == s)
                .unwrap_or_else(|| panic!("{s}: {d:?}"))
        };
        // The system directories are noexec; the library directories are bound over them
        // without it; the binary itself is bound over its noexec directory, its libraries
        // are not (their directory already shows them).
        at("remount /usr read-only noexec (mount)");
        for l in &libs {
            at(&format!("remount {} read-only (mount)", l.display()));
        }
        at(&format!("bind {} (mount)", env.display()));
        for f in files.keys().filter(|f| libs.iter().any(|l| f.starts_with(l))) {
            assert!(
                !d.iter().any(|s| s == &format!("bind {} (mount)", f.display())),
                "{d:?}"
            );
        }
        // A grant outside the root is created and bound read-only, mappable.
        at("remount /srv/murmur-grant read-only (mount)");
        // The workdir comes after every read-only bind, writable and noexec.
        let w = at("bind /srv/murmur-work (mount)");
        assert!(w > at("remount /srv/murmur-grant read-only (mount)"));
        assert!(w > at(&format!("bind {} (mount)", env.display())));
        at("remount /srv/murmur-work noexec (mount)");
        at("remount /dev/null read-only noexec (mount)");
        at("write /etc/passwd");
        at("mount proc on /proc (mount)");
        // Only the trust store of /etc/ssl, never its private keys.
        assert!(!d.iter().any(|s| s == "bind /etc/ssl (mount)"), "{d:?}");
        if Path::new("/etc/ssl/certs").is_dir() {
            at("bind /etc/ssl/certs (mount)");
        }
    }
}
