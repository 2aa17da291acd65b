//! Serving a file's bytes from its one descriptor with an etag that describes exactly the
//! bytes sent.
//!
//! Small files (one chunk) are read whole, hashed, and answered from that buffer. Larger
//! ones are **hashed, then sent** from the same descriptor: the first pass gives the etag for
//! the head (or a cached one, keyed by the inode's identity, size and timestamps), the loop
//! then pulls the body chunk by chunk as the client reads and hashes it again as it goes
//! (on a thread beside the loop while few bodies are in flight: [`super::hashing`]).
//! The last chunk is held back until that second hash is complete: if it differs from the
//! etag already sent (the file was rewritten in place between the passes), the connection is
//! closed short of the announced `content-length`, so no client ever accepts a body that
//! its etag does not describe. Hash-while-sending alone cannot put the etag in the head of a
//! non-chunked response; hash-then-send with this check can, and a reader that renames files
//! into place (what the spec asks of writers) never sees the cut.

use super::hashing::Hashing;
use super::Refusal;
use crate::http::Body;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// How a pulled body ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    /// Every byte went out and hashed to the etag.
    Whole,
    /// The bytes hashed to something else: the file changed in place; the body was cut.
    Changed,
    /// The file shrank or a read failed: the body was cut.
    Failed(String),
    /// The connection went away after this many of the body's bytes.
    Gone(u64),
}

/// What runs once when a body ends, however it ends.
pub type OnEnd = Box<dyn FnOnce(Served) + Send>;

/// The body of one large-file response.
pub struct FileBody {
    file: File,
    len: u64,
    at: u64,
    hasher: Hashing,
    expected: [u8; 32],
    on_end: Option<OnEnd>,
}

impl FileBody {
    /// Serve `len` bytes of `file` from offset 0, which must hash to `expected`.
    pub fn new(file: File, len: u64, expected: [u8; 32], on_end: OnEnd) -> FileBody {
        FileBody {
            file,
            len,
            at: 0,
            hasher: Hashing::start(),
            expected,
            on_end: Some(on_end),
        }
    }

    fn end(&mut self, how: Served) {
        if let Some(f) = self.on_end.take() {
            f(how);
        }
    }
}

impl Body for FileBody {
    fn fill(&mut self, out: &mut Vec<u8>, max: usize) -> io::Result<bool> {
        let want = usize::try_from(self.len - self.at).unwrap_or(usize::MAX).min(max);
        out.resize(want, 0);
        if let Err(e) = read_full_at(&self.file, out, self.at) {
            out.clear();
            self.end(Served::Failed(e.to_string()));
            return Err(e);
        }
        self.hasher.feed(&out[..]);
        self.at += want as u64;
        if self.at < self.len {
            return Ok(false);
        }
        if self.hasher.finish() != Some(self.expected) {
            out.clear();
            self.end(Served::Changed);
            return Err(io::Error::other("the file changed while it was sent"));
        }
        self.end(Served::Whole);
        Ok(true)
    }
}

impl Drop for FileBody {
    fn drop(&mut self) {
        let at = self.at;
        self.end(Served::Gone(at));
    }
}

/// Fill `buf` from `file` at `offset`; a file that ends first is an error.
pub fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    file.read_exact_at(buf, offset).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            io::Error::other("the file shrank while it was read")
        } else {
            e
        }
    })
}

/// The sha256 of the first `len` bytes of `file`.
pub fn hash_prefix(file: &File, len: u64) -> Result<[u8; 32], Refusal> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; crate::http::BODY_CHUNK];
    let mut at = 0u64;
    while at < len {
        let n = usize::try_from(len - at).unwrap_or(usize::MAX).min(buf.len());
        read_full_at(file, &mut buf[..n], at).map_err(|e| Refusal::Io(e.to_string()))?;
        h.update(&buf[..n]);
        at += n as u64;
    }
    Ok(h.finalize().into())
}

/// Read a small file's first `size` bytes (its length when it was opened): a file that
/// grew since is served as it was measured, one that shrank is an error.
pub fn read_small(file: &File, size: u64) -> Result<Vec<u8>, Refusal> {
    let mut out = vec![0u8; usize::try_from(size).map_err(|_| Refusal::TooLarge)?];
    read_full_at(file, &mut out, 0).map_err(|e| Refusal::Io(e.to_string()))?;
    Ok(out)
}

/// Lowercase hex of a digest.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn body_of(bytes: &[u8], expected: [u8; 32]) -> (FileBody, Arc<Mutex<Vec<Served>>>) {
        let dir = std::env::temp_dir().join(format!("murmur-body-{}-{}", std::process::id(), bytes.len()));
        std::fs::write(&dir, bytes).unwrap();
        let file = File::open(&dir).unwrap();
        std::fs::remove_file(&dir).unwrap();
        let ends = Arc::new(Mutex::new(Vec::new()));
        let e = ends.clone();
        let body = FileBody::new(
            file,
            bytes.len() as u64,
            expected,
            Box::new(move |s| e.lock().unwrap().push(s)),
        );
        (body, ends)
    }

    #[test]
    fn a_body_whose_bytes_match_is_sent_whole_in_chunks() {
        let data: Vec<u8> = (0..300_000u32).map(|i| i as u8).collect();
        let (mut body, ends) = body_of(&data, Sha256::digest(&data).into());
        let (mut got, mut chunk) = (Vec::new(), Vec::new());
        loop {
            let done = body.fill(&mut chunk, 100_000).unwrap();
            got.extend_from_slice(&chunk);
            if done {
                break;
            }
        }
        assert_eq!(got, data);
        drop(body);
        assert_eq!(*ends.lock().unwrap(), vec![Served::Whole]);
    }

    #[test]
    fn a_mismatch_holds_back_the_last_chunk_and_a_dropped_body_says_so() {
        let data = vec![7u8; 250_000];
        let (mut body, ends) = body_of(&data, [0; 32]);
        let mut chunk = Vec::new();
        assert!(!body.fill(&mut chunk, 200_000).unwrap());
        assert!(body.fill(&mut chunk, 200_000).is_err());
        assert!(chunk.is_empty(), "the last chunk is never handed out");
        drop(body);
        assert_eq!(*ends.lock().unwrap(), vec![Served::Changed]);

        let (mut body, ends) = body_of(&data, [0; 32]);
        assert!(!body.fill(&mut chunk, 100_000).unwrap());
        drop(body);
        assert_eq!(*ends.lock().unwrap(), vec![Served::Gone(100_000)]);
    }
}
