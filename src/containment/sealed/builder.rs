//! Building a sealed [`Plan`] as data: each helper appends operations (with a description
//! for error messages) and remembers which mounts already show a host path, so a later
//! grant below one of them binds over the existing entry instead of creating it (which a
//! read-only mount would refuse).

use super::{cstr, Op, Plan};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// `ST_RELATIME` (statvfs's flag for a `relatime` mount), which musl's `libc` does not name.
const ST_RELATIME: u64 = 0x1000;

/// Mount flags of the mount holding `path`, as `MS_*` bits worth keeping on a remount.
pub(super) fn mount_flags(path: &Path) -> libc::c_ulong {
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
        (ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st != 0 {
            keep |= ms;
        }
    }
    keep
}

/// How a planned mount shows the host paths below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shows {
    /// Read-only and `noexec`: present, but nothing below can be executed or mapped
    /// executable until a mappable bind goes over it.
    NoExec,
    /// Read-only without `noexec`: code below may be mapped `PROT_EXEC` (landlock still
    /// decides `execve`).
    Mappable,
}

/// Read-only, no setuid, no device files: every host bind of the root.
pub(super) const RO: libc::c_ulong = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;

pub(super) struct Builder {
    pub(super) plan: Plan,
    /// Host directories (canonical) a planned bind shows at their own path, in order.
    covered: Vec<(PathBuf, Shows)>,
}

impl Builder {
    pub(super) fn new(plan: Plan) -> Builder {
        Builder {
            plan,
            covered: Vec::new(),
        }
    }

    pub(super) fn op(&mut self, op: Op, what: String) {
        self.plan.ops.push(op);
        self.plan.descriptions.push(what);
    }

    fn staged(&self, abs: &Path) -> Result<CString, String> {
        let mut v = self.plan.stage.as_bytes().to_vec();
        v.extend_from_slice(abs.as_os_str().as_bytes());
        cstr(v)
    }

    /// Bind host `host` at `at`, then remount it with `flags` added to the flags the host
    /// mount already has (a user namespace may not clear locked ones).
    pub(super) fn bind(&mut self, host: &Path, at: &Path, flags: libc::c_ulong) -> Result<(), String> {
        self.bind_checked(host, at, flags, None)
    }

    /// [`Builder::bind`], the source checked to be the file with this device and inode.
    fn bind_checked(
        &mut self,
        host: &Path,
        at: &Path,
        flags: libc::c_ulong,
        ident: Option<(u64, u64)>,
    ) -> Result<(), String> {
        let dst = self.staged(at)?;
        self.plan.sources.push(cstr(host.as_os_str().as_bytes())?);
        self.plan.fds.push(-1);
        let src = self.plan.sources.len() - 1;
        if let Some((dev, ino)) = ident {
            self.op(
                Op::SameSource { src, dev, ino },
                format!(
                    "check that {} is the file the ELF closure read (fstat)",
                    host.display()
                ),
            );
        }
        self.op(
            Op::Bind {
                src,
                dst: dst.clone(),
            },
            format!("bind {} (mount)", at.display()),
        );
        let flags = mount_flags(host) | flags;
        let what = if flags & libc::MS_NOEXEC != 0 {
            "read-only noexec"
        } else {
            "read-only"
        };
        if flags & libc::MS_RDONLY != 0 {
            self.op(
                Op::Remount { dst, flags },
                format!("remount {} {what} (mount)", at.display()),
            );
        }
        Ok(())
    }

    /// Remount the bind at `at` (of `host`) without exec, setuid or device files.
    pub(super) fn noexec(&mut self, host: &Path, at: &Path) -> Result<(), String> {
        let dst = self.staged(at)?;
        let flags = mount_flags(host) | libc::MS_NOEXEC | libc::MS_NOSUID | libc::MS_NODEV;
        self.op(
            Op::Remount { dst, flags },
            format!("remount {} noexec (mount)", at.display()),
        );
        Ok(())
    }

    pub(super) fn mkdir(&mut self, at: &Path) -> Result<(), String> {
        let p = self.staged(at)?;
        self.op(Op::Mkdir(p), format!("mkdir {}", at.display()));
        Ok(())
    }

    pub(super) fn mkdir_all(&mut self, dir: &Path) -> Result<(), String> {
        let mut acc = PathBuf::from("/");
        for c in dir.components().skip(1) {
            acc.push(c);
            self.mkdir(&acc)?;
        }
        Ok(())
    }

    pub(super) fn mount(
        &mut self,
        fstype: &str,
        at: &Path,
        flags: libc::c_ulong,
        data: &str,
    ) -> Result<(), String> {
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

    pub(super) fn symlink(&mut self, target: &Path, at: &Path) -> Result<(), String> {
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

    pub(super) fn touch(&mut self, at: &Path) -> Result<(), String> {
        let p = self.staged(at)?;
        self.op(Op::Touch(p), format!("create {}", at.display()));
        Ok(())
    }

    pub(super) fn write(&mut self, at: &Path, bytes: Vec<u8>) -> Result<(), String> {
        let path = self.staged(at)?;
        self.op(Op::Write { path, bytes }, format!("write {}", at.display()));
        Ok(())
    }

    /// Remember that `dir` (canonical) is shown below its own path.
    pub(super) fn cover(&mut self, dir: PathBuf, shows: Shows) {
        self.covered.push((dir, shows));
    }

    /// How the deepest planned mount holding `real` (canonical) shows it, if any does.
    pub(super) fn shown(&self, real: &Path) -> Option<Shows> {
        self.covered
            .iter()
            .filter(|(c, _)| real.starts_with(c))
            .max_by_key(|(c, _)| c.components().count())
            .map(|(_, s)| *s)
    }

    /// A host directory at its own path, read-write (the workdir): always bound, over
    /// whatever a read-only grant shows there; then, with `ident`, checked to be that
    /// device and inode (a bind source is opened by path inside the new mount namespace,
    /// where the session's own descriptor cannot serve).
    pub(super) fn bind_writable_dir(&mut self, p: &Path, ident: Option<(u64, u64)>) -> Result<(), String> {
        self.mkdir_all(p)?;
        self.bind(p, p, 0)?;
        if let Some((dev, ino)) = ident {
            let path = self.staged(p)?;
            self.op(
                Op::Same { path, dev, ino },
                format!("check that {} is the session's workdir (stat)", p.display()),
            );
        }
        Ok(())
    }

    /// A host file or directory at its own path, read-only with `flags`; nothing when a
    /// mount already shows it the same way. Below a `noexec` system mount the entry exists,
    /// so the bind goes over it; elsewhere its parents and a mount point are created.
    pub(super) fn bind_own_path(&mut self, p: &Path, flags: libc::c_ulong) -> Result<(), String> {
        self.bind_own_file(p, flags, None)
    }

    /// [`Builder::bind_own_path`], the bound file checked (when `ident` is given) to be the
    /// one with that device and inode.
    pub(super) fn bind_own_file(
        &mut self,
        p: &Path,
        flags: libc::c_ulong,
        ident: Option<(u64, u64)>,
    ) -> Result<(), String> {
        let real = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let wanted = if flags & libc::MS_NOEXEC != 0 {
            Shows::NoExec
        } else {
            Shows::Mappable
        };
        match self.shown(&real) {
            Some(s) if s == wanted || wanted == Shows::NoExec => return Ok(()),
            Some(_) => {}
            None => {
                if let Some(parent) = real.parent() {
                    self.mkdir_all(parent)?;
                }
                if real.is_dir() {
                    self.mkdir(&real)?;
                } else {
                    self.touch(&real)?;
                }
            }
        }
        self.bind_checked(&real, &real, flags, ident)?;
        if real.is_dir() {
            self.cover(real, wanted);
        }
        Ok(())
    }
}
