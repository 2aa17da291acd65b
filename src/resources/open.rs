//! Resolve a checked path beneath an export root from a held directory descriptor, with the
//! kernel's own confinement (`openat2` with `RESOLVE_BENEATH`; `RESOLVE_NO_SYMLINKS` too when
//! symlinks are refused): no string-prefix check on a host path anywhere. The final object is
//! first opened `O_PATH` (opening a fifo or a device has effects; an `O_PATH` open has none),
//! checked to be a regular file from that descriptor, then reopened for reading through
//! `/proc/self/fd`, which names that inode and is not resolved again. Size, mtime and the
//! bytes all come from that one reading descriptor.

use super::{Refusal, Symlinks};
use crate::fsx::Dir;
use rustix::fs::{self as rfs, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};

/// One opened file under an export root.
#[derive(Debug)]
pub struct Opened {
    pub file: std::fs::File,
    pub size: u64,
    pub mtime_ms: u64,
    /// Device, inode, size, and the modification and change times to the nanosecond: what
    /// a cached digest of this file is keyed by.
    pub ident: Ident,
}

/// See [`Opened::ident`].
pub type Ident = (u64, u64, u64, i64, i64, i64, i64);

fn resolve_flags(symlinks: Symlinks) -> ResolveFlags {
    let base = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    match symlinks {
        Symlinks::Refuse | Symlinks::Fail => base | ResolveFlags::NO_SYMLINKS,
        Symlinks::FollowBeneath => base,
    }
}

/// `openat2` beneath `dir`, retried on the `EAGAIN` a concurrent rename can cause.
fn beneath(dir: BorrowedFd<'_>, path: &str, flags: OFlags, symlinks: Symlinks) -> Result<OwnedFd, Errno> {
    let mut tries = 0;
    loop {
        match rfs::openat2(
            dir,
            path,
            flags | OFlags::CLOEXEC,
            Mode::empty(),
            resolve_flags(symlinks),
        ) {
            Err(Errno::AGAIN) if tries < 8 => tries += 1,
            other => return other,
        }
    }
}

/// [`beneath`], and when it refuses an absolute symlink under [`Symlinks::FollowBeneath`],
/// the walk of [`super::walk`]: the path with its links expanded beneath the root, opened
/// with no symlink allowed at all.
pub(crate) fn resolve(
    dir: BorrowedFd<'_>,
    path: &str,
    flags: OFlags,
    symlinks: Symlinks,
) -> Result<OwnedFd, Refusal> {
    match beneath(dir, path, flags, symlinks) {
        Err(Errno::XDEV) if symlinks == Symlinks::FollowBeneath => {
            let plain = super::walk::expand(dir, path)?;
            let plain = if plain.is_empty() { "." } else { plain.as_str() };
            beneath(dir, plain, flags, Symlinks::Refuse).map_err(|e| match e {
                // A link appeared where the walk saw none: refused, never followed.
                Errno::LOOP => Refusal::Io("the path changed while it was resolved".into()),
                e => refusal(e, symlinks),
            })
        }
        other => other.map_err(|e| refusal(e, symlinks)),
    }
}

fn refusal(e: Errno, symlinks: Symlinks) -> Refusal {
    match e {
        Errno::NOENT | Errno::NOTDIR | Errno::NAMETOOLONG => Refusal::NotFound,
        Errno::XDEV => Refusal::OutsideRoot,
        Errno::LOOP if symlinks.refused() => Refusal::SymlinkRefused,
        // A symlink loop beneath the root names nothing.
        Errno::LOOP => Refusal::NotFound,
        e => Refusal::Io(e.to_string()),
    }
}

/// The export root `root` (relative to the workdir; "" is the workdir itself) as a directory
/// handle, or `None` when it does not exist (yet): the guest may create it later.
pub fn open_root(work: &Dir, root: &str, symlinks: Symlinks) -> Result<Option<OwnedFd>, Refusal> {
    let rel = if root.is_empty() {
        "."
    } else {
        root.trim_end_matches('/')
    };
    match resolve(work.as_fd(), rel, OFlags::PATH | OFlags::DIRECTORY, symlinks) {
        Ok(fd) => Ok(Some(fd)),
        Err(Refusal::NotFound) => Ok(None),
        Err(r) => Err(r),
    }
}

/// Open `path` (already checked by [`super::path::check`]) beneath `root` for reading: a
/// regular file of at most `max_bytes`.
pub fn open_file(
    root: BorrowedFd<'_>,
    path: &str,
    symlinks: Symlinks,
    max_bytes: u64,
) -> Result<Opened, Refusal> {
    let handle = resolve(root, path, OFlags::PATH, symlinks)?;
    let st = rfs::fstat(&handle).map_err(|e| Refusal::Io(e.to_string()))?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(Refusal::NotARegularFile);
    }
    let file = reopen(&handle)?;
    let st = rfs::fstat(&file).map_err(|e| Refusal::Io(e.to_string()))?;
    let size = u64::try_from(st.st_size).unwrap_or(0);
    if size > max_bytes {
        return Err(Refusal::TooLarge);
    }
    let mtime_ms = (st.st_mtime as i64)
        .saturating_mul(1000)
        .saturating_add(st.st_mtime_nsec as i64 / 1_000_000)
        .max(0) as u64;
    let ident = (
        st.st_dev,
        st.st_ino,
        size,
        st.st_mtime as i64,
        st.st_mtime_nsec as i64,
        st.st_ctime as i64,
        st.st_ctime_nsec as i64,
    );
    Ok(Opened {
        file,
        size,
        mtime_ms,
        ident,
    })
}

/// Open the inode an `O_PATH` handle names, for reading, without resolving any path again.
fn reopen(handle: &OwnedFd) -> Result<std::fs::File, Refusal> {
    let proc = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let fd = rfs::open(
        proc.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| Refusal::Io(e.to_string()))?;
    let before = rfs::fstat(handle).map_err(|e| Refusal::Io(e.to_string()))?;
    let after = rfs::fstat(&fd).map_err(|e| Refusal::Io(e.to_string()))?;
    if (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino) {
        return Err(Refusal::Io(
            "the file changed identity while it was opened".into(),
        ));
    }
    Ok(std::fs::File::from(fd))
}

/// Read an opened file to its end (at most `cap` bytes, else `too_large`): the sha256 of the
/// bytes read and how many there were. What is hashed is exactly what was read.
pub fn digest(file: &mut std::fs::File, cap: u64) -> Result<(String, u64), Refusal> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        let got = file.read(&mut buf).map_err(|e| Refusal::Io(e.to_string()))?;
        if got == 0 {
            break;
        }
        n += got as u64;
        if n > cap {
            return Err(Refusal::TooLarge);
        }
        h.update(&buf[..got]);
    }
    Ok((hex(&h.finalize()), n))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
#[path = "open_tests.rs"]
mod tests;
