//! The only way the runtime touches a directory a guest or a contained child can write (the
//! workdir, its `out/`, later `tools/`, `peer-in/`, `.murmur/children/`): a held directory
//! descriptor, every component opened with `O_NOFOLLOW`, files created `O_EXCL` or written to
//! a fresh temp file and `renameat`ed over the name. A symlink or a wrong file type met on the
//! way is refused with an error naming the path; nothing is ever followed out of the tree.
//!
//! Names are checked before any call reaches the filesystem ([`split`]): a relative path of
//! plain components, no `..`, `.`, empty component or NUL. A directory swapped for a symlink
//! between two calls is caught because each step opens the next component from the
//! descriptor of the previous one, never from a path string.

use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags};
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Longest relative path accepted, in bytes.
pub const MAX_PATH: usize = 1024;
/// Deepest relative path accepted, in components.
pub const MAX_DEPTH: usize = 32;

/// Why an operation was refused.
#[derive(Debug)]
pub enum FsError {
    /// The name itself is not a plain relative path (checked without touching the disk).
    BadName { path: String, why: &'static str },
    /// A component is a symbolic link.
    Symlink { path: String },
    /// A component has the wrong type (a file where a directory must be, or the reverse).
    WrongType { path: String, expected: &'static str },
    /// A file is larger than the caller's cap.
    TooLarge { path: String, cap: u64 },
    /// Any other failure, with the path it happened on.
    Io { path: String, err: io::Error },
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::BadName { path, why } => write!(f, "refusing the path {path:?}: {why}"),
            FsError::Symlink { path } => write!(f, "refusing {path}: it is a symbolic link"),
            FsError::WrongType { path, expected } => write!(f, "refusing {path}: it is not a {expected}"),
            FsError::TooLarge { path, cap } => write!(f, "refusing {path}: larger than {cap} bytes"),
            FsError::Io { path, err } => write!(f, "{path}: {err}"),
        }
    }
}

impl std::error::Error for FsError {}

impl From<FsError> for io::Error {
    fn from(e: FsError) -> io::Error {
        let kind = match &e {
            FsError::Io { err, .. } => err.kind(),
            FsError::BadName { .. } => io::ErrorKind::InvalidInput,
            _ => io::ErrorKind::PermissionDenied,
        };
        io::Error::new(kind, e.to_string())
    }
}

/// The components of `rel`, or why it is not a plain relative path. Pure.
pub fn split(rel: &str) -> Result<Vec<&str>, FsError> {
    let bad = |why| {
        Err(FsError::BadName {
            path: rel.chars().take(200).collect(),
            why,
        })
    };
    if rel.is_empty() {
        return bad("it is empty");
    }
    if rel.len() > MAX_PATH {
        return bad("it is too long");
    }
    if rel.contains('\0') {
        return bad("it contains a NUL byte");
    }
    if rel.starts_with('/') {
        return bad("it is absolute");
    }
    let parts: Vec<&str> = rel.split('/').collect();
    if parts.len() > MAX_DEPTH {
        return bad("it is too deep");
    }
    for p in &parts {
        match *p {
            "" => return bad("it has an empty component"),
            "." | ".." => return bad("it has a '.' or '..' component"),
            _ => {}
        }
    }
    Ok(parts)
}

/// A directory held open; every path below it is resolved from this descriptor.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// For messages only: never used to reach the filesystem again.
    shown: PathBuf,
}

fn io_at(path: &Path, err: impl Into<io::Error>) -> FsError {
    FsError::Io {
        path: path.display().to_string(),
        err: err.into(),
    }
}

const DIR_FLAGS: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

impl Dir {
    /// Open an operator-named directory (a `--workdir`, the manifest's directory). The path
    /// is the operator's own choice, so a symlink in it is followed; everything below is not.
    pub fn open(path: &Path) -> Result<Dir, FsError> {
        let fd = rfs::open(
            path,
            OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
            Mode::empty(),
        )
        .map_err(|e| io_at(path, e))?;
        Ok(Dir {
            fd,
            shown: path.to_path_buf(),
        })
    }

    /// The path this directory was reached by, for messages and for handing to code that
    /// only takes paths (prefer [`Dir::proc_path`]).
    pub fn shown(&self) -> &Path {
        &self.shown
    }

    /// The held descriptor, for resolution the resource plane does beneath it.
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A second handle on the same directory (a `dup` of the descriptor).
    pub fn try_clone(&self) -> Result<Dir, FsError> {
        let fd = self.fd.try_clone().map_err(|e| io_at(&self.shown, e))?;
        Ok(Dir {
            fd,
            shown: self.shown.clone(),
        })
    }

    /// `/proc/self/fd/N`: a path naming exactly the held directory, whatever happened to
    /// the names above it since it was opened.
    pub fn proc_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    fn shown_join(&self, rel: &str) -> PathBuf {
        self.shown.join(rel)
    }

    /// Open one component as a directory, refusing a symlink or a non-directory.
    fn step(&self, name: &str) -> Result<Dir, FsError> {
        let shown = self.shown_join(name);
        match rfs::openat(&self.fd, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => Ok(Dir { fd, shown }),
            Err(e) => Err(self.classify(name, e, "directory")),
        }
    }

    /// Turn an open failure into a refusal naming what stood at `name`.
    fn classify(&self, name: &str, e: rustix::io::Errno, expected: &'static str) -> FsError {
        let shown = self.shown_join(name);
        // ENXIO: a FIFO without a reader, opened non-blocking for writing.
        use rustix::io::Errno;
        if [Errno::LOOP, Errno::NOTDIR, Errno::ISDIR, Errno::NXIO].contains(&e) {
            match rfs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                    return FsError::Symlink {
                        path: shown.display().to_string(),
                    }
                }
                Ok(_) => {
                    return FsError::WrongType {
                        path: shown.display().to_string(),
                        expected,
                    }
                }
                Err(_) => {}
            }
        }
        io_at(&shown, e)
    }

    /// The directory at `rel` below this one; every component must be a real directory.
    pub fn sub(&self, rel: &str) -> Result<Dir, FsError> {
        let mut cur: Option<Dir> = None;
        for part in split(rel)? {
            let next = cur.as_ref().unwrap_or(self).step(part)?;
            cur = Some(next);
        }
        cur.ok_or_else(|| io_at(&self.shown, io::Error::other("empty path")))
    }

    /// Create the directories of `rel` that are missing (mode `mode`, before the umask) and
    /// return the last. An existing symlink or non-directory on the way is refused.
    pub fn mkdirs(&self, rel: &str, mode: u32) -> Result<Dir, FsError> {
        let mut cur: Option<Dir> = None;
        for part in split(rel)? {
            let parent = cur.as_ref().unwrap_or(self);
            match rfs::mkdirat(&parent.fd, part, Mode::from_raw_mode(mode)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io_at(&parent.shown_join(part), e)),
            }
            let next = parent.step(part)?;
            cur = Some(next);
        }
        cur.ok_or_else(|| io_at(&self.shown, io::Error::other("empty path")))
    }

    /// Create the directory `name` (one component, mode `mode` before the umask), which must
    /// not exist yet: an entry planted in advance is never adopted.
    pub fn mkdir_new(&self, name: &str, mode: u32) -> Result<Dir, FsError> {
        if split(name)?.len() != 1 {
            return Err(FsError::BadName {
                path: name.chars().take(200).collect(),
                why: "it is not a single name",
            });
        }
        rfs::mkdirat(&self.fd, name, Mode::from_raw_mode(mode))
            .map_err(|e| io_at(&self.shown_join(name), e))?;
        self.step(name)
    }

    /// The parent directory of `rel` (created when `create`) and the final name.
    fn parent_of<'a>(&self, rel: &'a str, create: bool) -> Result<(Option<Dir>, &'a str), FsError> {
        split(rel)?;
        match rel.rsplit_once('/') {
            None => Ok((None, rel)),
            Some((dir, name)) => {
                let d = if create {
                    self.mkdirs(dir, 0o755)?
                } else {
                    self.sub(dir)?
                };
                Ok((Some(d), name))
            }
        }
    }

    /// Create `rel` as a new file (`O_EXCL`, mode 0600), creating missing parents. An
    /// existing entry of any kind is an error.
    pub fn create_new(&self, rel: &str) -> Result<std::fs::File, FsError> {
        let (parent, name) = self.parent_of(rel, true)?;
        let d = parent.as_ref().unwrap_or(self);
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rfs::openat(&d.fd, name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => Ok(std::fs::File::from(fd)),
            Err(rustix::io::Errno::EXIST) => match rfs::statat(&d.fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => Err(FsError::Symlink {
                    path: d.shown_join(name).display().to_string(),
                }),
                _ => Err(io_at(&d.shown_join(name), rustix::io::Errno::EXIST)),
            },
            Err(e) => Err(d.classify(name, e, "regular file")),
        }
    }

    /// Open `rel` for appending, creating it (mode 0600) when missing; refuses a symlink and
    /// anything that is not a regular file.
    pub fn append(&self, rel: &str) -> Result<std::fs::File, FsError> {
        let (parent, name) = self.parent_of(rel, true)?;
        let d = parent.as_ref().unwrap_or(self);
        let flags = OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::NOFOLLOW
            | OFlags::CLOEXEC
            | OFlags::NONBLOCK;
        let fd = rfs::openat(&d.fd, name, flags, Mode::from_raw_mode(0o600))
            .map_err(|e| d.classify(name, e, "regular file"))?;
        d.regular(fd, name)
    }

    /// Keep `fd` only when it is a regular file.
    fn regular(&self, fd: OwnedFd, name: &str) -> Result<std::fs::File, FsError> {
        let st = rfs::fstat(&fd).map_err(|e| io_at(&self.shown_join(name), e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(FsError::WrongType {
                path: self.shown_join(name).display().to_string(),
                expected: "regular file",
            });
        }
        // Opened non-blocking so a FIFO planted at the name cannot stall the open; a
        // regular file ignores the flag, but clear it anyway.
        if let Ok(fl) = rfs::fcntl_getfl(&fd) {
            let _ = rfs::fcntl_setfl(&fd, fl - OFlags::NONBLOCK);
        }
        Ok(std::fs::File::from(fd))
    }

    /// Replace `rel` with `bytes`: a fresh temp file beside it, written and then renamed over
    /// the name, so a symlink planted at the name is replaced, never followed, and a reader
    /// sees the old or the new content whole. Missing parents are created.
    pub fn replace(&self, rel: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.write_then_rename(rel, bytes, Commit::Replace)
    }

    /// [`Dir::replace`], made durable: the file's data is on disk before the rename and the
    /// rename before this returns (a crash leaves the old content or the new, never an
    /// empty file under the name), and a write error the kernel reports only at sync or
    /// close (a full disk, a quota) is an error here.
    pub fn replace_durable(&self, rel: &str, bytes: &[u8]) -> Result<(), FsError> {
        self.write_then_rename(rel, bytes, Commit::ReplaceDurable)
    }

    /// [`Dir::replace_durable`] only while nothing is at the name: a file that appeared
    /// there since the caller looked is left as it is, and the answer is `Ok(false)`.
    pub fn create_durable(&self, rel: &str, bytes: &[u8]) -> Result<bool, FsError> {
        match self.write_then_rename(rel, bytes, Commit::CreateDurable) {
            Ok(()) => Ok(true),
            Err(FsError::Io { err, .. }) if err.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn write_then_rename(&self, rel: &str, bytes: &[u8], commit: Commit) -> Result<(), FsError> {
        let (parent, name) = self.parent_of(rel, true)?;
        let d = parent.as_ref().unwrap_or(self);
        let tmp = temp_name(name)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rfs::openat(&d.fd, tmp.as_str(), flags, Mode::from_raw_mode(0o644))
            .map_err(|e| io_at(&d.shown_join(&tmp), e))?;
        let mut f = std::fs::File::from(fd);
        let durable = commit != Commit::Replace;
        let written =
            f.write_all(bytes)
                .and_then(|_| f.flush())
                .and_then(|_| if durable { f.sync_all() } else { Ok(()) });
        drop(f);
        let renamed = written.map_err(|e| io_at(&d.shown_join(&tmp), e)).and_then(|_| {
            let moved = if commit == Commit::CreateDurable {
                rfs::renameat_with(&d.fd, tmp.as_str(), &d.fd, name, rfs::RenameFlags::NOREPLACE)
            } else {
                rfs::renameat(&d.fd, tmp.as_str(), &d.fd, name)
            };
            moved.map_err(|e| {
                if e == rustix::io::Errno::ISDIR || e == rustix::io::Errno::NOTDIR {
                    FsError::WrongType {
                        path: d.shown_join(name).display().to_string(),
                        expected: "regular file",
                    }
                } else {
                    io_at(&d.shown_join(name), e)
                }
            })
        });
        if renamed.is_err() {
            let _ = rfs::unlinkat(&d.fd, tmp.as_str(), AtFlags::empty());
        }
        renamed?;
        if durable {
            rfs::fsync(&d.fd).map_err(|e| io_at(&d.shown, e))?;
        }
        Ok(())
    }

    /// Rename the entry `from` of this directory to `to` (each one plain name, no `/`),
    /// atomically replacing a file at `to`; a symlink there is replaced, never followed, and
    /// a directory there is refused.
    pub fn rename(&self, from: &str, to: &str) -> Result<(), FsError> {
        for name in [from, to] {
            if split(name)?.len() != 1 {
                return Err(FsError::BadName {
                    path: name.chars().take(200).collect(),
                    why: "it is not a single name",
                });
            }
        }
        rfs::renameat(&self.fd, from, &self.fd, to).map_err(|e| {
            if e == rustix::io::Errno::ISDIR || e == rustix::io::Errno::NOTDIR {
                FsError::WrongType {
                    path: self.shown_join(to).display().to_string(),
                    expected: "regular file",
                }
            } else {
                io_at(&self.shown_join(to), e)
            }
        })
    }

    /// Remove the file `rel` if it exists (a symlink there is removed, never followed).
    pub fn remove_file(&self, rel: &str) -> Result<(), FsError> {
        let (parent, name) = self.parent_of(rel, false)?;
        let d = parent.as_ref().unwrap_or(self);
        match rfs::unlinkat(&d.fd, name, AtFlags::empty()) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(io_at(&d.shown_join(name), e)),
        }
    }

    /// Remove the directory `name` (one component) and everything beneath it; gone already
    /// is fine. Each level is opened from the one above with `O_NOFOLLOW` and read whole
    /// before anything in it is removed; a symlink inside is unlinked as a name, never
    /// followed; a tree deeper than [`MAX_TREE`] is refused and left in place.
    pub fn remove_tree(&self, name: &str) -> Result<(), FsError> {
        if split(name)?.len() != 1 {
            return Err(FsError::BadName {
                path: name.chars().take(200).collect(),
                why: "it is not a single name",
            });
        }
        remove_at(self.fd.as_fd(), name, 0).map_err(|e| io_at(&self.shown_join(name), e))
    }

    /// [`Dir::remove_tree`] of a directory already held open as `held`: its contents are
    /// removed through that descriptor (whatever was swapped in at the name since), then the
    /// name `name` is removed only while it still names that directory.
    pub fn remove_held(&self, name: &str, held: std::os::fd::BorrowedFd<'_>) -> Result<(), FsError> {
        let at = |e: rustix::io::Errno| io_at(&self.shown_join(name), e);
        split(name)?;
        for (entry, is_dir) in tree_entries(held).map_err(at)? {
            if is_dir {
                remove_at(held, entry.as_c_str(), 1).map_err(at)?;
            } else {
                match rfs::unlinkat(held, entry.as_c_str(), AtFlags::empty()) {
                    Ok(()) | Err(rustix::io::Errno::NOENT) => {}
                    Err(e) => return Err(at(e)),
                }
            }
        }
        let key = |st: rfs::Stat| (st.st_dev, st.st_ino);
        let mine = rfs::fstat(held).map(key).map_err(at)?;
        match rfs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).map(key) {
            Ok(found) if found == mine => rfs::unlinkat(&self.fd, name, AtFlags::REMOVEDIR).map_err(at),
            _ => Ok(()),
        }
    }

    /// Read the regular file `rel`, at most `cap` bytes (a larger file is refused, whatever
    /// its size does while it is read).
    pub fn read(&self, rel: &str, cap: u64) -> Result<Vec<u8>, FsError> {
        self.read_checked(rel, cap, false)
    }

    /// [`Dir::read`] of a file that must be this user's and writable by no one else, judged
    /// on the descriptor it is read from (a cache entry believed only from its owner).
    pub fn read_own(&self, rel: &str, cap: u64) -> Result<Vec<u8>, FsError> {
        self.read_checked(rel, cap, true)
    }

    fn read_checked(&self, rel: &str, cap: u64, own: bool) -> Result<Vec<u8>, FsError> {
        let (parent, name) = self.parent_of(rel, false)?;
        let d = parent.as_ref().unwrap_or(self);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rfs::openat(&d.fd, name, flags, Mode::empty())
            .map_err(|e| d.classify(name, e, "regular file"))?;
        if own {
            let st = rfs::fstat(&fd).map_err(|e| io_at(&d.shown_join(name), e))?;
            if st.st_uid != rustix::process::geteuid().as_raw() || st.st_mode & 0o022 != 0 {
                return Err(FsError::WrongType {
                    path: d.shown_join(name).display().to_string(),
                    expected: "file of this user that no other user can write",
                });
            }
        }
        let f = d.regular(fd, name)?;
        let mut out = Vec::new();
        f.take(cap.saturating_add(1))
            .read_to_end(&mut out)
            .map_err(|e| io_at(&d.shown_join(name), e))?;
        if out.len() as u64 > cap {
            return Err(FsError::TooLarge {
                path: d.shown_join(name).display().to_string(),
                cap,
            });
        }
        Ok(out)
    }

    /// Whether the descriptor is still a directory (a cheap liveness check for tests).
    /// The device and inode of the directory held (what it is, whatever its path now names).
    pub fn identity(&self) -> Result<(u64, u64), FsError> {
        rfs::fstat(&self.fd)
            .map(|st| (st.st_dev, st.st_ino))
            .map_err(|e| io_at(&self.shown, e))
    }

    /// What the directory's filesystem has left for an ordinary write: bytes and inodes
    /// (`fstatvfs` on the held descriptor: `f_bavail` blocks of `f_frsize`, `f_favail`).
    pub fn room(&self) -> Result<(u64, u64), FsError> {
        rfs::fstatvfs(&self.fd)
            .map(|v| (v.f_bavail.saturating_mul(v.f_frsize), v.f_favail))
            .map_err(|e| io_at(&self.shown, e))
    }

    pub fn is_dir(&self) -> bool {
        rfs::fstat(self.fd.as_fd())
            .map(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory)
            .unwrap_or(false)
    }
}

/// Deepest tree [`Dir::remove_tree`] removes.
pub const MAX_TREE: usize = 64;

fn remove_at<P: rustix::path::Arg + Copy>(
    parent: std::os::fd::BorrowedFd<'_>,
    name: P,
    depth: usize,
) -> Result<(), rustix::io::Errno> {
    use rustix::io::Errno;
    if depth > MAX_TREE {
        return Err(Errno::LOOP);
    }
    let dir = rfs::openat(parent, name, DIR_FLAGS, Mode::empty())?;
    for (entry, is_dir) in tree_entries(dir.as_fd())? {
        if is_dir {
            remove_at(dir.as_fd(), entry.as_c_str(), depth + 1)?;
        } else {
            match rfs::unlinkat(&dir, entry.as_c_str(), AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(e),
            }
        }
    }
    match rfs::unlinkat(parent, name, AtFlags::REMOVEDIR) {
        Ok(()) | Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The names in `dir` and whether each is a directory (never a symlink to one).
fn tree_entries(
    dir: std::os::fd::BorrowedFd<'_>,
) -> Result<Vec<(std::ffi::CString, bool)>, rustix::io::Errno> {
    let mut reader = rfs::Dir::read_from(dir)?;
    let mut out = Vec::new();
    while let Some(item) = reader.read() {
        let item = item?;
        let name = item.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let is_dir = match item.file_type() {
            FileType::Directory => true,
            FileType::Unknown => rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            _ => false,
        };
        out.push((name.to_owned(), is_dir));
    }
    Ok(out)
}

/// `.<name>.<16 hex>.tmp`, a name no guest can predict.
/// How [`Dir::write_then_rename`] commits its temp file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Commit {
    Replace,
    ReplaceDurable,
    CreateDurable,
}

fn temp_name(name: &str) -> Result<String, FsError> {
    let r = crate::token::random_hex16().map_err(|e| FsError::Io {
        path: name.to_string(),
        err: io::Error::other(e.to_string()),
    })?;
    let short: String = name.chars().take(64).collect();
    Ok(format!(".{short}.{r}.tmp"))
}

/// Write a file the operator named on the command line (`--html`, `--junit`): its
/// directory opened as named ([`Dir::open`]), then [`Dir::replace_durable`], so a reader
/// sees the old file or the new one whole and a failed write (a full disk, a quota) is an
/// error that leaves no truncated file under the name.
pub fn write_output(path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| FsError::BadName {
            path: path.display().to_string(),
            why: "names no file",
        })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Dir::open(parent)?.replace_durable(name, bytes)
}

/// Refuse a records root another user could write into: one that exists must belong to
/// this user (or root) with no write access for group or others, or whoever could write it
/// could move a session's records away and plant others. A root that does not exist yet is
/// fine: [`private_dir`] makes it 0700.
pub fn check_private_root(root: &Path) -> Result<(), FsError> {
    match Dir::open(root) {
        Ok(dir) => owned_unshared(&dir),
        Err(FsError::Io { err, .. }) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Open the directory `root` and judge that same descriptor as [`check_private_root`]
/// judges a path: no second resolution of the path between the check and its use.
pub fn open_private(root: &Path) -> Result<Dir, FsError> {
    let dir = Dir::open(root)?;
    owned_unshared(&dir)?;
    Ok(dir)
}

fn owned_unshared(dir: &Dir) -> Result<(), FsError> {
    let st = rfs::fstat(&dir.fd).map_err(|e| io_at(&dir.shown, e))?;
    let uid = rustix::process::geteuid().as_raw();
    if (st.st_uid != uid && st.st_uid != 0) || st.st_mode & 0o022 != 0 {
        return Err(FsError::WrongType {
            path: dir.shown.display().to_string(),
            expected: "directory of this user (or root) that no other user can write",
        });
    }
    Ok(())
}

/// Create `root/name` as a new private directory and open it: `root` (an operator-chosen
/// path) is created with its parents when missing, and must pass [`check_private_root`]; `name` must not exist yet (EEXIST is an
/// error, so a directory planted in advance is never adopted), is opened without following
/// a symlink, and must then be this user's with no access for group or others. Used for a
/// session's records, which no guest or contained child may reach.
pub fn private_dir(root: &Path, name: &str) -> Result<Dir, FsError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .map_err(|e| io_at(root, e))?;
    let parent = Dir::open(root)?;
    owned_unshared(&parent)?;
    if split(name)?.len() != 1 {
        return Err(FsError::BadName {
            path: name.to_string(),
            why: "it is not a single component",
        });
    }
    rfs::mkdirat(&parent.fd, name, Mode::from_raw_mode(0o700))
        .map_err(|e| io_at(&parent.shown_join(name), e))?;
    let dir = parent.step(name)?;
    let st = rfs::fstat(&dir.fd).map_err(|e| io_at(&dir.shown, e))?;
    if st.st_uid != rustix::process::geteuid().as_raw() || st.st_mode & 0o077 != 0 {
        return Err(FsError::WrongType {
            path: dir.shown.display().to_string(),
            expected: "private directory of this user (mode 0700)",
        });
    }
    Ok(dir)
}

/// Whether `inner` is `outer` or lies anywhere below it, decided from the descriptors by
/// walking `..` from `inner` up to the root and comparing device and inode numbers (no path
/// strings, so bind mounts and symlinked names cannot disguise it).
pub fn is_within(inner: &Dir, outer: &Dir) -> Result<bool, FsError> {
    let key = |fd: &OwnedFd, shown: &Path| {
        rfs::fstat(fd)
            .map(|st| (st.st_dev, st.st_ino))
            .map_err(|e| io_at(shown, e))
    };
    let target = outer.identity()?;
    let mut cur =
        rfs::openat(&inner.fd, ".", DIR_FLAGS, Mode::empty()).map_err(|e| io_at(&inner.shown, e))?;
    for _ in 0..4096 {
        let here = key(&cur, &inner.shown)?;
        if here == target {
            return Ok(true);
        }
        let up = rfs::openat(&cur, "..", DIR_FLAGS, Mode::empty()).map_err(|e| io_at(&inner.shown, e))?;
        if key(&up, &inner.shown)? == here {
            return Ok(false);
        }
        cur = up;
    }
    Err(io_at(&inner.shown, io::Error::other("directory tree too deep")))
}

mod exchange;
#[cfg(test)]
mod tests;
