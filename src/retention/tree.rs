//! The file-tree steps of retention, on held descriptors only: measure a tree (the bytes of
//! its files, its newest mtime) and the `flock` that says a directory is in use. A symlink
//! met anywhere is measured as nothing, never followed; removal is [`crate::fsx`]'s.

use rustix::fs::{self as rfs, AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;
use std::ffi::CStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

/// Deepest tree measured (what lies deeper is not counted).
pub const MAX_DEPTH: usize = 64;

const DIR: OFlags = OFlags::DIRECTORY
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC)
    .union(OFlags::RDONLY);

/// Open the directory `name` beneath `parent`, refusing a symlink or anything else.
pub fn open_dir<P: rustix::path::Arg>(parent: BorrowedFd<'_>, name: P) -> Result<OwnedFd, Errno> {
    rfs::openat(parent, name, DIR, Mode::empty())
}

/// What a tree holds: the bytes of its regular files and its newest mtime (seconds since
/// the epoch, the directory's own included).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    pub bytes: u64,
    pub newest: i128,
}

/// Measure the tree of the held directory `dir`.
pub fn measure(dir: BorrowedFd<'_>) -> Measure {
    let mut m = Measure::default();
    if let Ok(st) = rfs::fstat(dir) {
        m.newest = i128::from(st.st_mtime);
    }
    measure_into(dir, 0, &mut m);
    m
}

fn measure_into(dir: BorrowedFd<'_>, depth: usize, m: &mut Measure) {
    let Ok(mut reader) = rfs::Dir::read_from(dir) else {
        return;
    };
    while let Some(Ok(item)) = reader.read() {
        let name = item.file_name();
        if is_dot(name) {
            continue;
        }
        let Ok(st) = rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        // Only files and directories count, their size and their time; a symlink (or
        // anything else) is measured as nothing.
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => {
                m.newest = m.newest.max(i128::from(st.st_mtime));
                m.bytes = m.bytes.saturating_add(u64::try_from(st.st_size).unwrap_or(0));
            }
            FileType::Directory if depth < MAX_DEPTH => {
                m.newest = m.newest.max(i128::from(st.st_mtime));
                if let Ok(sub) = open_dir(dir, name) {
                    measure_into(sub.as_fd(), depth + 1, m);
                }
            }
            _ => {}
        }
    }
}

fn is_dot(name: &CStr) -> bool {
    name == c"." || name == c".."
}

/// How a directory is held while its owner lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// One owner: a session's records directory.
    Exclusive,
    /// Any number of owners: a workdir several sessions may share.
    Shared,
}

/// Take the lock `hold` on the held directory `dir` without waiting; the kernel drops it
/// when the last descriptor of this open file is closed, so a dead process holds nothing.
pub fn hold(dir: BorrowedFd<'_>, hold: Hold) -> Result<(), Errno> {
    let op = match hold {
        Hold::Exclusive => FlockOperation::NonBlockingLockExclusive,
        Hold::Shared => FlockOperation::NonBlockingLockShared,
    };
    rfs::flock(dir, op)
}

/// Whether the directory `dir` is free: no live owner holds it. When free, this
/// descriptor now holds it exclusively (until it is closed or [`release`]d).
pub fn take_if_free(dir: BorrowedFd<'_>) -> bool {
    rfs::flock(dir, FlockOperation::NonBlockingLockExclusive).is_ok()
}

/// Let go of a lock this descriptor took.
pub fn release(dir: BorrowedFd<'_>) {
    let _ = rfs::flock(dir, FlockOperation::Unlock);
}

/// Whether some live process holds the directory `dir` exclusively (a session's records):
/// tested with a shared lock taken and let go at once, so a session is never taken for
/// ended for longer than that moment (and one starting then waits for it, see
/// [`super::hold_session`]).
pub fn held_by_another(dir: BorrowedFd<'_>) -> bool {
    match rfs::flock(dir, FlockOperation::NonBlockingLockShared) {
        Ok(()) => {
            release(dir);
            false
        }
        Err(e) => e == Errno::WOULDBLOCK,
    }
}
