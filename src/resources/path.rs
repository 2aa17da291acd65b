//! A request's path, checked before anything touches the filesystem: percent-decoded, then
//! refused when empty, absolute, holding a NUL, or with any component that is empty, `.` or
//! `..`. Pure and fuzzed (`fuzz/fuzz_targets/path.rs`): a caller's path is never normalised
//! into something servable, only accepted as it is or refused.

use super::Refusal;

/// The longest decoded path accepted, bytes (longer ones name nothing a workdir can hold).
pub const MAX_PATH: usize = 4096;

/// Percent-decode `raw` (the request target's path after the plane's prefix). A `%` not
/// followed by two hex digits, or bytes that are not UTF-8 once decoded, name nothing.
pub fn decode(raw: &str) -> Result<String, Refusal> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = |c: u8| (c as char).to_digit(16);
            match (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => out.push((h * 16 + l) as u8),
                _ => return Err(Refusal::NotFound),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
        if out.len() > MAX_PATH {
            return Err(Refusal::NotFound);
        }
    }
    String::from_utf8(out).map_err(|_| Refusal::NotFound)
}

/// Check a decoded path's shape: `..` or an absolute path would leave the root
/// (`outside_root`); an empty path, a NUL, an empty or `.` component name nothing a
/// listing shows (`not_found`). The accepted path is returned as it was given.
pub fn check(path: &str) -> Result<&str, Refusal> {
    if path.starts_with('/') {
        return Err(Refusal::OutsideRoot);
    }
    if path.split('/').any(|c| c == "..") {
        return Err(Refusal::OutsideRoot);
    }
    if path.is_empty() || path.contains('\0') || path.split('/').any(|c| c.is_empty() || c == ".") {
        return Err(Refusal::NotFound);
    }
    if path.len() > MAX_PATH {
        return Err(Refusal::NotFound);
    }
    Ok(path)
}

/// [`decode`] then [`check`].
pub fn request_path(raw: &str) -> Result<String, Refusal> {
    let decoded = decode(raw)?;
    check(&decoded)?;
    Ok(decoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_pass_unchanged() {
        for p in ["report.md", "a/b/c.txt", "with space", "%E2%9C%93.md", "a%2Fb"] {
            let d = request_path(p).unwrap();
            assert_eq!(d, decode(p).unwrap());
        }
        assert_eq!(request_path("%E2%9C%93.md").unwrap(), "✓.md");
        // An encoded slash is a slash: it separates components like any other.
        assert_eq!(request_path("a%2Fb").unwrap(), "a/b");
    }

    #[test]
    fn escapes_are_outside_the_root_whatever_their_encoding() {
        for p in [
            "..",
            "../x",
            "a/../b",
            "a/..",
            "%2E%2E/x",
            "a%2F..%2Fb",
            "/etc/passwd",
            "%2Fetc",
            "%2e%2e",
        ] {
            assert_eq!(request_path(p), Err(Refusal::OutsideRoot), "{p}");
        }
    }

    #[test]
    fn empty_dot_and_nul_name_nothing() {
        for p in [
            "", ".", "./a", "a/./b", "a//b", "a/", "%00", "a%00b", "%", "%4", "%zz", "%C3%28",
        ] {
            assert_eq!(request_path(p), Err(Refusal::NotFound), "{p}");
        }
        assert_eq!(request_path(&"a".repeat(MAX_PATH + 1)), Err(Refusal::NotFound));
    }
}
