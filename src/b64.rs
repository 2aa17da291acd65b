//! Canonical base64url without padding (RFC 4648 §5), the only encoding inside tokens; and
//! the padded standard alphabet (§4) that HTTP Basic credentials and `~/.docker/config.json`
//! use, translated to and from it.
//!
//! Decoding is strict: only the URL-safe alphabet, no `=`, no whitespace, a length that is
//! not 1 mod 4, and zero bits in the unused tail of the last character. Every byte string
//! therefore has exactly one accepted text form, so a token cannot be re-encoded into a
//! second spelling that still verifies.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Why a text is not canonical base64url.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// A byte outside `A-Z a-z 0-9 - _`.
    BadCharacter,
    /// A length of 1 mod 4 cannot come from any byte string.
    BadLength,
    /// The last character carries non-zero bits beyond the data (a second spelling).
    NonCanonical,
}

/// Length of the encoding of `n` bytes.
pub const fn encoded_len(n: usize) -> usize {
    (n * 4).div_ceil(3)
}

/// Encode bytes as unpadded base64url.
pub fn encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(encoded_len(data.len()));
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            let idx = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(ALPHABET[idx as usize]));
        }
    }
    out
}

fn value(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        b'_' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

/// Decode canonical unpadded base64url.
pub fn decode(text: &[u8]) -> Result<Vec<u8>, DecodeError> {
    if text.len() % 4 == 1 {
        return Err(DecodeError::BadLength);
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3 + 2);
    for chunk in text.chunks(4) {
        let mut n: u32 = 0;
        for (i, &c) in chunk.iter().enumerate() {
            n |= value(c).ok_or(DecodeError::BadCharacter)? << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        let keep = chunk.len() - 1;
        // Bits below the last kept byte must be zero in a canonical encoding.
        let unused_mask: u32 = match keep {
            1 => 0xffff,
            2 => 0xff,
            _ => 0,
        };
        if n & unused_mask != 0 {
            return Err(DecodeError::NonCanonical);
        }
        out.extend_from_slice(&bytes[..keep]);
    }
    Ok(out)
}

/// Encode bytes as padded standard base64 (`+`, `/`, `=`).
pub fn encode_standard(data: &[u8]) -> String {
    let mut out: String = encode(data)
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while out.len() % 4 != 0 {
        out.push('=');
    }
    out
}

/// Decode padded standard base64 (canonical: a length that is a multiple of 4, at most two
/// `=` at the end, zero unused bits).
pub fn decode_standard(text: &[u8]) -> Result<Vec<u8>, DecodeError> {
    if text.len() % 4 != 0 {
        return Err(DecodeError::BadLength);
    }
    let pad = text.iter().rev().take_while(|&&c| c == b'=').count();
    if pad > 2 {
        return Err(DecodeError::BadCharacter);
    }
    let body = &text[..text.len() - pad];
    let mut url = Vec::with_capacity(body.len());
    for &c in body {
        url.push(match c {
            b'+' => b'-',
            b'/' => b'_',
            b'-' | b'_' => return Err(DecodeError::BadCharacter),
            c => c,
        });
    }
    decode(&url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_alphabet_round_trips_with_padding() {
        for (raw, text) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (&[0xfb, 0xff], "+/8="),
        ] {
            assert_eq!(encode_standard(raw), text);
            assert_eq!(decode_standard(text.as_bytes()).unwrap(), raw);
        }
        assert_eq!(decode_standard(b"Zg"), Err(DecodeError::BadLength));
        assert_eq!(decode_standard(b"-_8="), Err(DecodeError::BadCharacter));
        assert_eq!(decode_standard(b"Z==="), Err(DecodeError::BadCharacter));
        assert_eq!(decode_standard(b"Zh=="), Err(DecodeError::NonCanonical));
    }

    #[test]
    fn rfc4648_vectors_round_trip() {
        let cases: [(&[u8], &str); 7] = [
            (b"", ""),
            (b"f", "Zg"),
            (b"fo", "Zm8"),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg"),
            (b"fooba", "Zm9vYmE"),
            (b"foobar", "Zm9vYmFy"),
        ];
        for (raw, text) in cases {
            assert_eq!(encode(raw), text);
            assert_eq!(decode(text.as_bytes()).unwrap(), raw);
        }
    }

    #[test]
    fn url_alphabet_and_all_byte_values() {
        let all: Vec<u8> = (0..=255).collect();
        let text = encode(&all);
        assert!(!text.contains('+') && !text.contains('/') && !text.contains('='));
        assert_eq!(decode(text.as_bytes()).unwrap(), all);
        assert_eq!(encode(&[0xfb, 0xff]), "-_8");
    }

    #[test]
    fn refuses_padding_std_alphabet_bad_length_and_second_spellings() {
        assert_eq!(decode(b"Zg=="), Err(DecodeError::BadCharacter));
        assert_eq!(decode(b"+/8"), Err(DecodeError::BadCharacter));
        assert_eq!(decode(b"Z"), Err(DecodeError::BadLength));
        assert_eq!(decode(b"Zm9vY"), Err(DecodeError::BadLength));
        // "Zh" decodes to "f" too if the tail bits were ignored.
        assert_eq!(decode(b"Zh"), Err(DecodeError::NonCanonical));
        assert_eq!(decode(b"Zm9"), Err(DecodeError::NonCanonical));
        assert_eq!(decode(b"Zm 9"), Err(DecodeError::BadCharacter));
    }
}
