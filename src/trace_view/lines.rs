//! Splitting a byte stream into numbered lines, each at most a fixed length: a longer line
//! is not buffered past the cap but reported (by number) and skipped to its newline.

/// One line as read, numbered from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// A whole line (without its newline), at most the cap long.
    Text { number: u64, bytes: Vec<u8> },
    /// A line longer than the cap; its bytes were dropped.
    TooLong { number: u64 },
    /// The last line had no newline when the input ended (a truncated trace).
    Unterminated { number: u64, bytes: Vec<u8> },
}

/// Incremental splitter: feed chunks as they arrive (a followed file), then `finish`.
pub struct Splitter {
    cap: usize,
    buf: Vec<u8>,
    number: u64,
    /// Inside an over-long line, dropping bytes until its newline.
    skipping: bool,
}

impl Splitter {
    pub fn new(cap: usize) -> Splitter {
        Splitter {
            cap,
            buf: Vec::new(),
            number: 0,
            skipping: false,
        }
    }

    /// The complete lines in `chunk` (with what earlier chunks left over).
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<Line> {
        let mut out = Vec::new();
        let mut rest = chunk;
        while !rest.is_empty() {
            let newline = rest.iter().position(|&b| b == b'\n');
            let (part, after) = match newline {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            };
            if !self.skipping {
                if self.buf.len() + part.len() > self.cap {
                    self.skipping = true;
                    self.buf.clear();
                } else {
                    self.buf.extend_from_slice(part);
                }
            }
            match after {
                Some(after) => {
                    self.number += 1;
                    let number = self.number;
                    if std::mem::take(&mut self.skipping) {
                        out.push(Line::TooLong { number });
                    } else {
                        out.push(Line::Text {
                            number,
                            bytes: std::mem::take(&mut self.buf),
                        });
                    }
                    rest = after;
                }
                None => break,
            }
        }
        out
    }

    /// What is left when the input ends: an unterminated (or over-long) last line.
    pub fn finish(&mut self) -> Option<Line> {
        if self.skipping {
            self.skipping = false;
            self.number += 1;
            return Some(Line::TooLong { number: self.number });
        }
        if self.buf.is_empty() {
            return None;
        }
        self.number += 1;
        Some(Line::Unterminated {
            number: self.number,
            bytes: std::mem::take(&mut self.buf),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_across_chunks_and_the_cap() {
        let mut s = Splitter::new(4);
        assert_eq!(s.feed(b"ab"), vec![]);
        assert_eq!(
            s.feed(b"c\ntoolong\nok\nxyz"),
            vec![
                Line::Text {
                    number: 1,
                    bytes: b"abc".to_vec()
                },
                Line::TooLong { number: 2 },
                Line::Text {
                    number: 3,
                    bytes: b"ok".to_vec()
                },
            ]
        );
        assert_eq!(
            s.finish(),
            Some(Line::Unterminated {
                number: 4,
                bytes: b"xyz".to_vec()
            })
        );
        assert_eq!(s.finish(), None);
        let mut s = Splitter::new(2);
        assert_eq!(s.feed(b"abc"), vec![]);
        assert_eq!(s.finish(), Some(Line::TooLong { number: 1 }));
    }
}
