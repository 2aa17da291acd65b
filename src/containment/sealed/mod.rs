//! `sealed`: the child's own root. The parent plans every step as data (paths as C strings,
//! flags, file contents); the child, single-threaded between fork and exec, only runs the
//! plan: new user (identity-mapped, `setgroups` denied), mount, PID, network, IPC and UTS
//! namespaces; pid 1 of the new PID namespace composes a tmpfs root (read-only system
//! directories, an `/etc` allow-list with a synthetic `passwd`/`group`, a private `/dev`
//! (device nodes bound read-only), a fresh `/proc`, a private noexec `/tmp`, the workdir
//! read-write and noexec at its own path, each allowed
//! binary outside the system directories), `pivot_root`s into it, detaches the old root and
//! remounts `/` read-only. Paths outside the plan do not exist in the child.
//!
//! Processes: the forked child (outside) unshares and forks pid 1, then only waits for it
//! and exits with its status. Pid 1 (which dies with that waiter) finishes containment,
//! forks the command, then reaps every process of the namespace and exits with the
//! command's status (128 + signal when killed); the kernel then kills what is left.

mod enter;

pub use enter::fork_command;
use std::collections::BTreeSet;
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
        (libc::ST_RDONLY, libc::MS_RDONLY),
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
            let flags = mount_flags(host) | libc::MS_RDONLY;
            self.op(
                Op::Remount { dst, flags },
                format!("remount {} read-only (mount)", at.display()),
            );
        }
        Ok(())
    }

    /// Remount the bind at `at` (of `host`) without exec, setuid or device files.
    fn noexec(&mut self, host: &Path, at: &Path) -> Result<(), String> {
        let dst = self.staged(at)?;
        let flags = mount_flags(host) | libc::MS_NOEXEC | libc::MS_NOSUID | libc::MS_NODEV;
        self.op(
            Op::Remount { dst, flags },
            format!("remount {} noexec (mount)", at.display()),
        );
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

/// Plan the sealed root for `workdir` (read-write, and `noexec` like `/tmp` unless
/// `workdir_exec`) and `files` (the allowed binaries and their closure, read-only).
/// `workdir` is `None` for the host probe.
pub fn plan(workdir: Option<&Path>, files: &BTreeSet<PathBuf>, workdir_exec: bool) -> Result<Plan, String> {
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
            // Read-only binds: writing to a device node still works, but its mode, owner,
            // times and attributes (the host's inode) cannot change (EROFS).
            b.touch(&host)?;
            b.bind(&host, &host, true)?;
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
    if let Some(w) = workdir {
        b.bind_own_path(w, false)?;
        if !workdir_exec {
            b.noexec(w, w)?;
        }
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
    fn the_plan_binds_the_workdir_and_outside_files_but_not_covered_ones() {
        let files: BTreeSet<PathBuf> = [PathBuf::from("/usr/bin/env")].into_iter().collect();
        let p = plan(Some(Path::new("/srv/murmur-work")), &files, false).unwrap();
        let d = p.descriptions();
        assert!(d.iter().any(|s| s == "bind /srv/murmur-work (mount)"), "{d:?}");
        assert!(
            d.iter().any(|s| s == "remount /srv/murmur-work noexec (mount)"),
            "{d:?}"
        );
        assert!(
            d.iter().any(|s| s == "remount /dev/null read-only (mount)"),
            "{d:?}"
        );
        assert!(!d.iter().any(|s| s.contains("/usr/bin/env")), "{d:?}");
        assert!(d.iter().any(|s| s == "write /etc/passwd"), "{d:?}");
        assert!(d.iter().any(|s| s == "mount proc on /proc (mount)"), "{d:?}");
    }
}
