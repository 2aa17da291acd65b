//! A capsule's lock on disk, in its manifest's directory (`murmur.lock` beside
//! `murmur.yaml`; see `manifest::lock::file_name_for`): read (bounded, never through a
//! symlink, never blocking on a FIFO) and written (a fresh file synced to disk and renamed
//! over the name) through `fsx`; the format is `manifest::lock`'s.

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

/// How [`write`] treats a lock already at the name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Replace it (`mur lock`, on purpose).
    Replace,
    /// Keep it: another writer got there first (`mur run` writing the first lock).
    Keep,
}

/// Write `lock` as `dir`'s lock `name`, durably and atomically: a reader sees the old lock
/// or the new one whole, a crash leaves one of them, and a symlink at the name is replaced,
/// never followed. With [`Existing::Keep`], `Ok(false)` when a lock was already there. A
/// lock that would not read back is refused before anything is written.
pub fn write(dir: &Dir, name: &str, lock: &Lock, existing: Existing) -> Result<bool, String> {
    let text = lock.to_text()?;
    match existing {
        Existing::Replace => dir.replace_durable(name, text.as_bytes()).map(|()| true),
        Existing::Keep => dir.create_durable(name, text.as_bytes()),
    }
    .map_err(|e| e.to_string())
}
