//! A capsule's lock on disk, in its manifest's directory (`murmur.lock` beside
//! `murmur.yaml`; see `manifest::lock::file_name_for`): read (bounded, never through a
//! symlink, never blocking on a FIFO) and written (a fresh file renamed over the name)
//! through `fsx`; the format is `manifest::lock`'s.

use crate::diag::{code, Diagnostic};
use crate::fsx::{Dir, FsError};
use crate::manifest::lock::{Lock, MAX_LOCK_BYTES};

/// The lock `name` in `dir`, if there is one; one that cannot be read or parsed is
/// E-RUN-003.
pub fn read(dir: &Dir, name: &str) -> Result<Option<Lock>, Diagnostic> {
    let refused = |m: String| Diagnostic::new(code::RUN_LOCK, name, m);
    let bytes = match dir.read(name, MAX_LOCK_BYTES) {
        Ok(b) => b,
        Err(FsError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(refused(format!("cannot read {name}: {e}"))),
    };
    let text = String::from_utf8(bytes).map_err(|_| refused(format!("{name} is not UTF-8")))?;
    Lock::parse(&text)
        .map(Some)
        .map_err(|why| refused(format!("{name}: {why}")))
}

/// Write `lock` as `dir`'s lock `name`, atomically: a reader sees the old lock or the new
/// one whole, and a symlink at the name is replaced, never followed.
pub fn write(dir: &Dir, name: &str, lock: &Lock) -> Result<(), FsError> {
    dir.replace(name, lock.render().as_bytes())
}
