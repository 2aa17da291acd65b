//! The second hash of a pulled body, beside the send. While few bodies are in flight each
//! gets a thread of its own that hashes its chunks in order while the loop sends them (the
//! loop copies a chunk into a one-deep channel, so at most two chunks per body are held
//! and a hasher that falls behind holds the loop back by one chunk at most); beyond
//! [`MAX_BACKGROUND`] bodies, or if no thread can be had, the loop hashes inline. Either way
//! the digest covers exactly the chunks fed, in order.

use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Bodies hashed on threads of their own at once (more would only share the same cores
/// and hold more chunks).
pub const MAX_BACKGROUND: usize = 4;

static BACKGROUND: AtomicUsize = AtomicUsize::new(0);

/// The running hash of one body.
pub enum Hashing {
    Inline(Sha256),
    Background {
        chunks: Option<SyncSender<Vec<u8>>>,
        digest: Receiver<[u8; 32]>,
    },
}

/// Takes back a background slot when its thread ends, however it ends.
struct Slot;

impl Drop for Slot {
    fn drop(&mut self) {
        BACKGROUND.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Hashing {
    /// A thread of its own when one of [`MAX_BACKGROUND`] is free, else inline.
    pub fn start() -> Hashing {
        if BACKGROUND.fetch_add(1, Ordering::SeqCst) >= MAX_BACKGROUND {
            BACKGROUND.fetch_sub(1, Ordering::SeqCst);
            return Hashing::Inline(Sha256::new());
        }
        let slot = Slot;
        let (tx, rx) = sync_channel::<Vec<u8>>(1);
        let (done, digest) = sync_channel::<[u8; 32]>(1);
        let spawned = std::thread::Builder::new()
            .name("body-hash".into())
            .spawn(move || {
                let _slot = slot;
                let mut h = Sha256::new();
                for chunk in rx {
                    h.update(&chunk);
                }
                let _ = done.send(h.finalize().into());
            });
        match spawned {
            Ok(_) => Hashing::Background {
                chunks: Some(tx),
                digest,
            },
            // The closure (and its slot) was dropped: the count is already back.
            Err(_) => Hashing::Inline(Sha256::new()),
        }
    }

    /// Add the next chunk.
    pub fn feed(&mut self, chunk: &[u8]) {
        match self {
            Hashing::Inline(h) => h.update(chunk),
            Hashing::Background { chunks, .. } => {
                if let Some(tx) = chunks {
                    if tx.send(chunk.to_vec()).is_err() {
                        // The thread is gone: the digest will not come, and `finish`
                        // reports that as a mismatch (the body is cut, never wrong).
                        *chunks = None;
                    }
                }
            }
        }
    }

    /// The digest of everything fed; `None` if the hashing thread was lost.
    pub fn finish(&mut self) -> Option<[u8; 32]> {
        match self {
            Hashing::Inline(h) => Some(std::mem::take(h).finalize().into()),
            Hashing::Background { chunks, digest } => {
                chunks.take()?;
                digest.recv().ok()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_and_inline_hashes_agree_and_slots_come_back() {
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7) as u8).collect();
        let want: [u8; 32] = Sha256::digest(&data).into();
        let mut all: Vec<Hashing> = (0..MAX_BACKGROUND + 2).map(|_| Hashing::start()).collect();
        let inline = all.iter().filter(|h| matches!(h, Hashing::Inline(_))).count();
        assert!(inline >= 2, "beyond the cap bodies hash inline");
        for h in &mut all {
            for c in data.chunks(100_000) {
                h.feed(c);
            }
            assert_eq!(h.finish(), Some(want));
        }
        drop(all);
        // Every thread has ended (or is ending): a fresh start may go to the background.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while BACKGROUND.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(BACKGROUND.load(Ordering::SeqCst), 0);
    }
}
