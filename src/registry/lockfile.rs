//! `murmur.lock` on disk, in a capsule's directory: read (bounded, never through a symlink,
//! never blocking on a FIFO) and written (a fresh file renamed over the name) through `fsx`;
//! the format is `manifest::lock`'s.

use crate::diag::{code, Diagnostic};
use crate::fsx::{Dir, FsError};
use crate::manifest::lock::{Lock, LOCK_FILE, MAX_LOCK_BYTES};

/// The lock in `dir`, if there is one; one that cannot be read or parsed is E-RUN-003.
pub fn read(dir: &Dir) -> Result<Option<Lock>, Diagnostic> {
    let refused = |m: String| Diagnostic::new(code::RUN_LOCK, LOCK_FILE, m);
    let bytes = match dir.read(LOCK_FILE, MAX_LOCK_BYTES) {
        Ok(b) => b,
        Err(FsError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refused(format!("cannot read {LOCK_FILE}: {e}"))),
    };
    let text = String::from_utf8(bytes).map_err(|_| refused(format!("{LOCK_FILE} is not UTF-8")))?;
    Lock::parse(&text)
        .map(Some)
        .map_err(|why| refused(format!("{LOCK_FILE}: {why}")))
}

/// Write `lock` as `dir`'s `murmur.lock`, atomically: a reader sees the old lock or the
/// new one whole, and a symlink at the name is replaced, never followed.
pub fn write(dir: &Dir, lock: &Lock) -> Result<(), FsError> {
    dir.replace(LOCK_FILE, lock.render().as_bytes())
}
