//! Media types as A2A parts and cards carry them: a type's essence (`type/subtype`,
//! lowercased, parameters dropped), ranges (`type/*`, `*/*`) a capsule declares, and the
//! type of an output file judged by its extension alone (never by sniffing its bytes).

/// The longest media type or range accepted, bytes.
pub const MAX_LEN: usize = 127;

fn token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
}

/// The essence of a media type (`Text/CSV; charset=utf-8` is `text/csv`), or `None` when
/// it is not `type/subtype` of RFC 6838 tokens.
pub fn essence(media_type: &str) -> Option<String> {
    let bare = media_type.split(';').next()?.trim();
    if bare.len() > MAX_LEN {
        return None;
    }
    let (t, sub) = bare.split_once('/')?;
    (token(t) && token(sub)).then(|| bare.to_ascii_lowercase())
}

/// A range a capsule declares: a media type, `type/*` or `*/*`, normalised; `None` if
/// it is none of these.
pub fn range(declared: &str) -> Option<String> {
    let d = declared.trim();
    if d == "*/*" {
        return Some(d.into());
    }
    if let Some(t) = d.strip_suffix("/*") {
        return (token(t) && t.len() < MAX_LEN).then(|| format!("{}/*", t.to_ascii_lowercase()));
    }
    if d.contains(';') {
        return None;
    }
    essence(d)
}

/// Whether the essence `media_type` falls within the normalised `range`.
pub fn within(range: &str, media_type: &str) -> bool {
    match range.strip_suffix("/*") {
        Some("*") => true,
        Some(t) => media_type.split_once('/').is_some_and(|(mt, _)| mt == t),
        None => range == media_type,
    }
}

/// The media type of a file named `name`, by its extension (case-insensitive);
/// `application/octet-stream` for anything not in the table.
pub fn by_extension(name: &str) -> &'static str {
    let ext = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => ext.to_ascii_lowercase(),
        _ => return "application/octet-stream",
    };
    match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "xml" => "application/xml",
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/x-ndjson",
        "yaml" | "yml" => "application/yaml",
        "toml" => "application/toml",
        "js" => "text/javascript",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "tar" => "application/x-tar",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "wasm" => "application/wasm",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn essences_ranges_and_extensions() {
        assert_eq!(essence("Text/CSV; charset=utf-8").as_deref(), Some("text/csv"));
        for bad in ["", "text", "text/", "/csv", "te xt/csv", "text/csv/x", "\u{7f}/x"] {
            assert_eq!(essence(bad), None, "{bad:?}");
        }
        assert_eq!(range("*/*").as_deref(), Some("*/*"));
        assert_eq!(range("Image/*").as_deref(), Some("image/*"));
        assert_eq!(range("text/csv; q=1"), None);
        assert_eq!(range("*/csv"), None);
        assert!(within("*/*", "a/b"));
        assert!(within("image/*", "image/png"));
        assert!(!within("image/*", "imagex/png"));
        assert!(within("text/csv", "text/csv"));
        assert!(!within("text/csv", "text/plain"));
        assert_eq!(by_extension("r.CSV"), "text/csv");
        assert_eq!(by_extension(".json"), "application/octet-stream");
        assert_eq!(by_extension("noext"), "application/octet-stream");
        assert_eq!(by_extension("a.tar.gz"), "application/gzip");
    }
}
