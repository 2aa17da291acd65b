//! A durable replace for a file rewritten on every call (the spend ledger): the bytes go
//! into a spare file kept beside it, which is synced and then exchanged with the name in one
//! `renameat2(RENAME_EXCHANGE)`, so no inode is made or freed per replace (on ext4 a fresh
//! inode per replace costs its allocation, a sync of the parent and a scan past the inodes
//! freed in the last seconds, which grows with the rate of replaces).

use super::{io_at, split, Commit, Dir, FsError};
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, RenameFlags};
use std::io::Write;

impl Dir {
    /// [`Dir::replace_durable`] of `name` through the spare file `spare` (both single names
    /// in this directory): `spare` (made the first time, a regular file of this user with
    /// one link, else it is removed and the plain durable replace is used) is overwritten,
    /// cut to the new length and synced (`fdatasync`: its data and size), then exchanged with
    /// `name`, and the directory synced; the old content is left in `spare` (removed when
    /// the directory's sync fails, since the disk may still name it `name`). Where the
    /// filesystem cannot exchange, or `name` does not exist yet, `spare` is renamed over
    /// `name`.
    ///
    /// The caller holds a lock that keeps both other writers and readers of `name` out
    /// while this runs: a reader that opened `name` before the previous exchange holds what
    /// is now `spare`, which this overwrites.
    pub fn replace_durable_exchanging(&self, name: &str, spare: &str, bytes: &[u8]) -> Result<(), FsError> {
        for n in [name, spare] {
            if split(n)?.len() != 1 {
                return Err(FsError::BadName {
                    path: n.chars().take(200).collect(),
                    why: "it is not a single name",
                });
            }
        }
        let Some(mut f) = self.spare_file(spare) else {
            let _ = rfs::unlinkat(&self.fd, spare, AtFlags::empty());
            return self.write_then_rename(name, bytes, Commit::ReplaceDurable);
        };
        // Written over in place, then cut to length: on ext4 and the like no block is freed
        // (a discard on a filesystem mounted with it) and none allocated while the ledger
        // keeps its size (a copy-on-write filesystem allocates anyway), and `fdatasync`
        // leaves the unchanged metadata (times) unwritten.
        f.write_all(bytes)
            .and_then(|_| f.set_len(bytes.len() as u64))
            .and_then(|_| f.sync_data())
            .map_err(|e| io_at(&self.shown_join(spare), e))?;
        drop(f);
        match rfs::renameat_with(&self.fd, spare, &self.fd, name, RenameFlags::EXCHANGE) {
            Ok(()) => {}
            // No `name` yet, or a filesystem that cannot exchange: the spare becomes it.
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS)
            | Err(rustix::io::Errno::OPNOTSUPP) => rfs::renameat(&self.fd, spare, &self.fd, name)
                .map_err(|e| io_at(&self.shown_join(name), e))?,
            Err(e) => return Err(io_at(&self.shown_join(name), e)),
        }
        rfs::fsync(&self.fd).map_err(|e| {
            // The disk may still give `name` to what is now `spare`: never overwrite it in
            // place at the next replace, which makes a fresh spare instead.
            let _ = rfs::unlinkat(&self.fd, spare, AtFlags::empty());
            io_at(&self.shown, e)
        })
    }

    /// The spare file opened for writing (made when missing); None when what is at the
    /// name is not a regular file of this user with exactly one link.
    fn spare_file(&self, spare: &str) -> Option<std::fs::File> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = rfs::openat(&self.fd, spare, flags, Mode::from_raw_mode(0o644)).ok()?;
        let st = rfs::fstat(&fd).ok()?;
        let fit = FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
            && st.st_nlink == 1
            && st.st_uid == rustix::process::geteuid().as_raw();
        if !fit {
            return None;
        }
        let fl = rfs::fcntl_getfl(&fd).ok()?;
        rfs::fcntl_setfl(&fd, fl - OFlags::NONBLOCK).ok()?;
        Some(std::fs::File::from(fd))
    }
}
