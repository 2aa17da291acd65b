//! A parsed-artifact cache keyed by the SHA-256 of the archive bytes a resolve read, so a
//! daemon that resolves the same artifact on every request inflates and parses its manifest
//! once per distinct content rather than once per request.
//!
//! The key is the hash of the very bytes the value was parsed from, so an entry can never
//! describe other bytes: a republished archive hashes to a new key and misses. Bounded by
//! entries and by bytes (each entry weighs the manifest text it was parsed from plus
//! [`ENTRY_OVERHEAD`]), evicting the least recently used. One cache serves one
//! [`crate::manifest::Resolve`] mode and one environment: its owner must never feed it
//! parses made under another.
//!
//! Beside it, what each archive path hashed to, with the [`Stamp`]s of the archive and its
//! `.sha256` sidecar when they were read and the archive's descriptor held (so its inode
//! number cannot pass to another file): while both files still stat to those stamps, a
//! resolve skips the read, the hash and the sidecar check (see
//! [`super::store::resolve_cached`]). Any write changes a file's ctime, which no caller can
//! set, so a changed file misses; a file changed within [`SETTLE_MS`] before the read began
//! is not remembered, since a second change in the same timestamp tick could leave its stamp
//! as it was.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// At most this many archive descriptors are held (their owner reserves them).
pub const MAX_HELD: usize = 64;
/// A file whose ctime is less than this before the read began is read again next time.
pub const SETTLE_MS: u64 = 2_000;

/// What stat said of a file: device, inode, size, mtime and ctime (seconds, nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of `meta`.
    pub fn of(meta: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of the file `path` names (following a symlink, as opening it does).
    pub fn at(path: &Path) -> Option<Stamp> {
        std::fs::metadata(path).ok().map(|m| Stamp::of(&m))
    }

    /// Whether the file last changed at least [`SETTLE_MS`] before `now_ms` (unix ms).
    fn settled(&self, now_ms: u64) -> bool {
        let (s, ns) = self.ctime;
        let Ok(s) = u64::try_from(s) else { return false };
        let changed_ms = s
            .saturating_mul(1000)
            .saturating_add(ns.max(0) as u64 / 1_000_000);
        changed_ms.saturating_add(SETTLE_MS) <= now_ms
    }
}

/// Whether `file` is on a local disk filesystem (ext2/3/4, XFS, Btrfs, F2FS, ZFS,
/// bcachefs, tmpfs, overlayfs), whose stat always answers from the inode. A network or FUSE
/// filesystem may answer stat from a cache for seconds after another host changed the
/// file, where an open would have revalidated it: archives there are read every time.
pub fn local_filesystem(file: &File) -> bool {
    const LOCAL: [u64; 8] = [
        0xEF53,      // ext2/3/4
        0x5846_5342, // XFS
        0x9123_683E, // Btrfs
        0xF2F5_2010, // F2FS
        0x2FC1_2FC1, // ZFS
        0xCA45_1A4E, // bcachefs
        0x0102_1994, // tmpfs
        0x794C_7630, // overlayfs
    ];
    rustix::fs::fstatfs(file).is_ok_and(|s| LOCAL.contains(&(s.f_type as u64)))
}

/// An archive path's last verified read.
struct Known {
    _held: File,
    archive: Stamp,
    sidecar: Stamp,
    digest: [u8; 32],
    used: u64,
}

/// Weight charged per entry on top of its manifest text: the key, the bookkeeping and the
/// parsed structures beyond the text they came from.
pub const ENTRY_OVERHEAD: usize = 4096;

/// What one distinct archive parsed to: the packed manifest's name and version (checked
/// against the coordinates asked on every resolve, hit or miss) and the caller's lowering.
#[derive(Debug)]
pub struct Artifact<V> {
    pub name: String,
    pub version: String,
    pub value: V,
}

struct Cached<V> {
    artifact: Arc<Artifact<V>>,
    weight: usize,
    used: u64,
}

/// The cache. Not shared between threads: the roost's loop owns it.
pub struct ParsedCache<V> {
    entries: HashMap<[u8; 32], Cached<V>>,
    max_entries: usize,
    max_bytes: usize,
    bytes: usize,
    tick: u64,
    /// The archive read buffer, reused between resolves while it stays small.
    pub(super) scratch: Vec<u8>,
    known: HashMap<PathBuf, Known>,
    /// Reads of an archive (a resolve that skipped the read does not count).
    reads: u64,
}

impl<V> ParsedCache<V> {
    /// A cache of at most `max_entries` entries weighing at most `max_bytes` together.
    pub fn new(max_entries: usize, max_bytes: usize) -> ParsedCache<V> {
        ParsedCache {
            entries: HashMap::with_capacity(max_entries.min(1024)),
            max_entries: max_entries.max(1),
            max_bytes,
            bytes: 0,
            tick: 0,
            scratch: Vec::new(),
            known: HashMap::new(),
            reads: 0,
        }
    }

    /// The hash `archive` had when it was last read, if it and its sidecar still stat to
    /// `now` as they did then.
    pub(super) fn known(&mut self, archive: &Path, now: (Stamp, Stamp)) -> Option<[u8; 32]> {
        self.tick += 1;
        let tick = self.tick;
        let k = self.known.get_mut(archive)?;
        if (k.archive, k.sidecar) != now {
            return None;
        }
        k.used = tick;
        Some(k.digest)
    }

    /// Forget what `archive` hashed to (closing its held descriptor).
    pub(super) fn forget(&mut self, archive: &Path) {
        self.known.remove(archive);
    }

    /// Count one read of an archive.
    pub(super) fn read_once(&mut self) {
        self.reads += 1;
    }

    /// Remember that `archive`, read through `held` and stamped `stamps` (each the same
    /// before and after the read), hashed to `digest` and its sidecar agreed; unless either
    /// file changed within [`SETTLE_MS`] before `began_ms`, when the read began.
    pub(super) fn remember(
        &mut self,
        archive: &Path,
        held: File,
        stamps: (Stamp, Stamp),
        digest: [u8; 32],
        began_ms: u64,
    ) {
        if !(stamps.0.settled(began_ms) && stamps.1.settled(began_ms)) {
            return;
        }
        if !self.known.contains_key(archive) && self.known.len() >= MAX_HELD.min(self.max_entries) {
            let oldest = self
                .known
                .iter()
                .min_by_key(|(_, k)| k.used)
                .map(|(p, _)| p.clone());
            if let Some(p) = oldest {
                self.known.remove(&p);
            }
        }
        self.tick += 1;
        self.known.insert(
            archive.to_path_buf(),
            Known {
                _held: held,
                archive: stamps.0,
                sidecar: stamps.1,
                digest,
                used: self.tick,
            },
        );
    }

    /// How many times an archive was read (and hashed) by resolves through this cache.
    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// How many archive identities are remembered (each holding a descriptor).
    pub fn held(&self) -> usize {
        self.known.len()
    }

    /// The entry for content hash `key`, marked most recently used.
    pub fn get(&mut self, key: &[u8; 32]) -> Option<Arc<Artifact<V>>> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(key).map(|e| {
            e.used = tick;
            Arc::clone(&e.artifact)
        })
    }

    /// Insert the parse of the bytes hashing to `key`, `text_len` bytes of manifest text,
    /// evicting least recently used entries until both bounds hold. An entry heavier than
    /// the whole byte bound is returned without being kept.
    pub fn insert(&mut self, key: [u8; 32], artifact: Artifact<V>, text_len: usize) -> Arc<Artifact<V>> {
        let artifact = Arc::new(artifact);
        let weight = text_len.saturating_add(ENTRY_OVERHEAD);
        if weight > self.max_bytes {
            return artifact;
        }
        if let Some(old) = self.entries.remove(&key) {
            self.bytes -= old.weight;
        }
        while self.entries.len() >= self.max_entries || self.bytes + weight > self.max_bytes {
            // Linear in the entries, and only on a miss that needs room: the bound is small.
            let Some(oldest) = self.entries.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| *k) else {
                break;
            };
            if let Some(e) = self.entries.remove(&oldest) {
                self.bytes -= e.weight;
            }
        }
        self.tick += 1;
        self.bytes += weight;
        self.entries.insert(
            key,
            Cached {
                artifact: Arc::clone(&artifact),
                weight,
                used: self.tick,
            },
        );
        artifact
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes charged for what is held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn art(n: u8) -> Artifact<u8> {
        Artifact {
            name: format!("a{n}"),
            version: "1".into(),
            value: n,
        }
    }

    #[test]
    fn bounded_by_entries_and_bytes_evicting_least_recently_used() {
        let mut c = ParsedCache::new(3, 1 << 20);
        for n in 0..3u8 {
            c.insert([n; 32], art(n), 10);
        }
        assert!(c.get(&[0; 32]).is_some());
        c.insert([3; 32], art(3), 10);
        assert_eq!(c.len(), 3);
        assert!(c.get(&[1; 32]).is_none(), "the least recently used goes first");
        assert!(c.get(&[0; 32]).is_some() && c.get(&[3; 32]).is_some());

        let mut c = ParsedCache::new(100, 3 * (ENTRY_OVERHEAD + 100));
        for n in 0..50u8 {
            c.insert([n; 32], art(n), 100);
            assert!(c.bytes() <= 3 * (ENTRY_OVERHEAD + 100) && c.len() <= 3);
        }
        assert_eq!(c.get(&[49; 32]).unwrap().value, 49);
        // Heavier than the whole bound: answered, not kept.
        let big = c.insert([200; 32], art(200), 1 << 20);
        assert_eq!(big.value, 200);
        assert!(c.get(&[200; 32]).is_none());
        // Re-inserting a key replaces it without double counting.
        c.insert([49; 32], art(49), 100);
        assert!(c.bytes() <= 3 * (ENTRY_OVERHEAD + 100));
    }
}
