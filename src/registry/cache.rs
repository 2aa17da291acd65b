//! A parsed-artifact cache keyed by the SHA-256 of the archive bytes a resolve read, so a
//! daemon that resolves the same artifact on every request inflates and parses its manifest
//! once per distinct content rather than once per request.
//!
//! The key is the hash of the very bytes the value was parsed from, so an entry can never
//! describe other bytes: a republished archive hashes to a new key and misses. Every resolve
//! still reads and hashes the archive (see [`super::store::resolve_cached`]); only the
//! inflate and the YAML parse are skipped on a hit. Bounded by entries and by bytes (each
//! entry weighs the manifest text it was parsed from plus [`ENTRY_OVERHEAD`]), evicting the
//! least recently used. One cache serves one [`crate::manifest::Resolve`] mode and one
//! environment: its owner must never feed it parses made under another.

use std::collections::HashMap;
use std::sync::Arc;

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
        }
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
