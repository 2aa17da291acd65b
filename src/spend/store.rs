//! The spend ledger on disk: `ledger.json` in the user's spend directory (private to the
//! user, outside every workdir), changed only under an exclusive `flock` on `ledger.lock`
//! beside it: the new ledger is written into the spare file `ledger.spare`, `fdatasync`ed,
//! exchanged with `ledger.json` in one atomic rename and the directory `fsync`ed, so a
//! reader, or a `kill -9` at any instant, sees the old ledger or the new one whole, never a
//! truncated one, and no inode is made or freed per model call. A read takes the lock
//! shared (the next update rewrites the file an earlier reader may still hold open); a
//! ledger that does not parse is an error, never a fresh start.

use super::ledger::{Ledger, MAX_BYTES};
use crate::fsx::{self, Dir, FsError};
use rustix::fs::FlockOperation;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The ledger's name in the spend directory.
pub const FILE: &str = "ledger.json";
/// The lock file beside it (the ledger itself is replaced by a rename, so it cannot hold a
/// lock that outlives one update).
pub const LOCK: &str = "ledger.lock";
/// The spare the next ledger is written into before it is exchanged with [`FILE`]; it
/// holds the previous ledger in between.
pub const SPARE: &str = "ledger.spare";
/// How long an update waits for the lock before it gives up (and the call is refused).
const LOCK_BOUND: Duration = Duration::from_secs(10);

/// The ledger of one user, at its directory.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

fn missing(e: &FsError) -> bool {
    matches!(e, FsError::Io { err, .. } if err.kind() == std::io::ErrorKind::NotFound)
}

impl Store {
    /// The ledger in `dir` (see `crate::places::spend_dir`).
    pub fn at(dir: PathBuf) -> Store {
        Store { dir }
    }

    /// The ledger file's path, for messages and `mur doctor`.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// The ledger as it stands (a fresh one when neither the directory nor the file exists
    /// yet). The directory must be this user's (or root's) and writable by no one else, the
    /// file this user's and writable by no one else.
    pub fn read(&self) -> Result<Ledger, String> {
        let dir = match fsx::open_private(&self.dir) {
            Ok(d) => d,
            Err(e) if missing(&e) => return Ok(Ledger::fresh()),
            Err(e) => return Err(e.to_string()),
        };
        let lock = dir.append(LOCK).map_err(|e| e.to_string())?;
        lock_within(&lock, LOCK_BOUND, FlockOperation::NonBlockingLockShared)
            .map_err(|e| format!("cannot lock {}: {e}", self.dir.join(LOCK).display()))?;
        read_in(&dir, &self.dir)
    }

    /// Under the exclusive lock: read the ledger, apply `change`, drop what is stale at
    /// `now_ms`, and replace the file durably. The ledger as written.
    pub fn update(&self, now_ms: u64, change: impl FnOnce(&mut Ledger)) -> Result<Ledger, String> {
        let dir = self.open_or_make()?;
        let lock = dir.append(LOCK).map_err(|e| e.to_string())?;
        lock_within(&lock, LOCK_BOUND, FlockOperation::NonBlockingLockExclusive)
            .map_err(|e| format!("cannot lock {}: {e}", self.dir.join(LOCK).display()))?;
        let mut ledger = read_in(&dir, &self.dir)?;
        self.sweep(&dir);
        change(&mut ledger);
        ledger.prune(now_ms);
        dir.replace_durable_exchanging(FILE, SPARE, ledger.render().as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", self.path().display()))?;
        // The lock goes with the descriptor, here or at a crash.
        drop(lock);
        Ok(ledger)
    }

    /// Remove the temp files of updates a `kill -9` cut short: under the lock no update is
    /// in flight, so every `.ledger.json.*.tmp` is one (best effort).
    fn sweep(&self, dir: &Dir) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let prefix = format!(".{FILE}.");
        for e in entries.flatten().take(1000) {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with(&prefix) && name.ends_with(".tmp") {
                let _ = dir.remove_file(name);
            }
        }
    }

    /// The directory, made (mode 0700, with its parents) when missing, and judged private.
    fn open_or_make(&self) -> Result<Dir, String> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        fsx::open_private(&self.dir).map_err(|e| e.to_string())
    }
}

/// The ledger file in the held directory `dir` (shown as `shown`).
fn read_in(dir: &Dir, shown: &Path) -> Result<Ledger, String> {
    let path = shown.join(FILE);
    match dir.read_own(FILE, MAX_BYTES) {
        Ok(bytes) => Ledger::parse(&bytes).map_err(|why| {
            format!(
                "the spend ledger {} is unreadable ({why}); no model call is made until it is repaired or moved aside",
                path.display()
            )
        }),
        Err(e) if missing(&e) => Ok(Ledger::fresh()),
        Err(e) => Err(format!("cannot read the spend ledger: {e}")),
    }
}

/// Take `how` (a non-blocking shared or exclusive `flock`) on `f`, waiting at most `bound`.
fn lock_within(f: &std::fs::File, bound: Duration, how: FlockOperation) -> Result<(), rustix::io::Errno> {
    let until = Instant::now() + bound;
    loop {
        match rustix::fs::flock(f, how) {
            Ok(()) => return Ok(()),
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(label: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("murmur-spend-{label}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        p
    }

    #[test]
    fn updates_add_up_and_a_corrupt_ledger_is_refused_not_restarted() {
        let dir = scratch("store");
        let s = Store::at(dir.join("spend"));
        assert_eq!(s.read().unwrap(), Ledger::fresh());
        let now = 1_796_608_800_000;
        s.update(now, |l| l.charge(10, &[], now)).unwrap();
        let l = s.update(now, |l| l.charge(5, &[], now)).unwrap();
        assert_eq!(l.on_day("2026-12-07"), 15);
        assert_eq!(s.read().unwrap(), l);
        // What a kill -9 between a temp file's creation and its rename leaves goes at the next update.
        let cut = dir.join("spend").join(format!(".{FILE}.0123456789abcdef.tmp"));
        std::fs::write(&cut, b"{").unwrap();
        s.update(now, |_| {}).unwrap();
        assert!(!cut.exists());
        std::fs::write(s.path(), b"{\"version\":1,\"days\":").unwrap();
        let err = s.read().unwrap_err();
        assert!(err.contains("unreadable") && err.contains(FILE), "{err}");
        assert!(s.update(now, |l| l.charge(1, &[], now)).is_err());
        // Still the corrupt bytes: a refused update never overwrites them.
        assert_eq!(std::fs::read(s.path()).unwrap(), b"{\"version\":1,\"days\":");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn updates_exchange_two_files_and_a_planted_spare_is_never_followed() {
        use std::os::unix::fs::MetadataExt;
        let dir = scratch("exchange");
        let s = Store::at(dir.join("spend"));
        let now = 1_796_608_800_000;
        let mut inodes = std::collections::BTreeSet::new();
        for i in 1..=6u64 {
            let l = s.update(now, |l| l.charge(1, &[], now)).unwrap();
            assert_eq!(l.on_day("2026-12-07"), i);
            assert_eq!(s.read().unwrap(), l);
            inodes.insert(std::fs::metadata(s.path()).unwrap().ino());
        }
        assert_eq!(inodes.len(), 2, "the ledger and its spare, exchanged: {inodes:?}");
        // A symlink at the spare's name is removed, not written through.
        let spare = dir.join("spend").join(SPARE);
        let target = dir.join("target");
        std::fs::write(&target, b"untouched").unwrap();
        std::fs::remove_file(&spare).unwrap();
        std::os::unix::fs::symlink(&target, &spare).unwrap();
        let l = s.update(now, |l| l.charge(1, &[], now)).unwrap();
        assert_eq!(l.on_day("2026-12-07"), 7);
        assert_eq!(s.read().unwrap(), l);
        assert_eq!(std::fs::read(&target).unwrap(), b"untouched");
        assert!(!std::fs::symlink_metadata(&spare).is_ok_and(|m| m.file_type().is_symlink()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
