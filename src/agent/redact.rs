//! The provider key blanked out of text the runtime did not write itself (a driver's
//! answers and errors, its log output): a provider or proxy that echoes the key must not
//! get it written into a file, a trace line or the model's context.

/// What replaces the key.
pub const MARK: &str = "[redacted]";

/// `text` with every occurrence of `key` replaced (nothing when `key` is `None` or empty).
pub fn text(text: &str, key: Option<&str>) -> String {
    match key {
        Some(k) if !k.is_empty() && text.contains(k) => text.replace(k, MARK),
        _ => text.to_string(),
    }
}

/// A streaming redactor: bytes go in as they come, and what comes out never holds the key,
/// even split across chunks (the last `key.len() - 1` bytes are held back until more
/// arrive or the stream ends).
pub struct Stream {
    key: Vec<u8>,
    held: Vec<u8>,
}

impl Stream {
    pub fn new(key: &[u8]) -> Stream {
        Stream {
            key: key.to_vec(),
            held: Vec::new(),
        }
    }

    fn scrub(&self, bytes: &[u8]) -> Vec<u8> {
        let k = &self.key;
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i..].starts_with(k) {
                out.extend_from_slice(MARK.as_bytes());
                i += k.len();
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        out
    }

    /// Take `chunk`; the bytes that are now safe to emit.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.key.is_empty() {
            return chunk.to_vec();
        }
        self.held.extend_from_slice(chunk);
        // Everything up to the last place a key could still begin is final: scrub it.
        let keep = self.key.len() - 1;
        if self.held.len() <= keep {
            return Vec::new();
        }
        let mut cut = self.held.len() - keep;
        // A key starting before `cut` and running past it is replaced whole: extend the
        // final part to its end.
        let k = self.key.len();
        for start in cut.saturating_sub(k - 1)..cut {
            if self.held[start..].starts_with(&self.key) {
                cut = start + k;
                break;
            }
        }
        let rest = self.held.split_off(cut);
        let done = std::mem::replace(&mut self.held, rest);
        self.scrub(&done)
    }

    /// The stream ended: the rest.
    pub fn finish(self) -> Vec<u8> {
        self.scrub(&self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_split_across_chunks_is_still_caught() {
        let input = b"err: bad key sk-ABCDEFGH given; sk-ABCDEFGH again";
        for split in 1..input.len() {
            for step in [1usize, 2, 3, 7] {
                let mut s = Stream::new(b"sk-ABCDEFGH");
                let mut out = Vec::new();
                for chunk in input[..split].chunks(step) {
                    out.extend(s.push(chunk));
                }
                out.extend(s.push(&input[split..]));
                out.extend(s.finish());
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    "err: bad key [redacted] given; [redacted] again",
                    "split {split} step {step}"
                );
            }
        }
    }

    #[test]
    fn text_replaces_every_occurrence() {
        assert_eq!(text("a k1 b k1", Some("k1")), "a [redacted] b [redacted]");
        assert_eq!(text("x", Some("")), "x");
        assert_eq!(text("x", None), "x");
    }
}
