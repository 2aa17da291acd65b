//! A message's parts, read from untrusted JSON in either generation: text parts joined,
//! file parts with inline bytes (1.0 `raw`, 0.3 `file.bytes`, base64) and data parts (any
//! JSON, kept as its serialised bytes), each with the media type and name the sender gave.
//! A file by reference (1.0 `url`, 0.3 `file.uri`) is a content the door does not take: it
//! fetches nothing on a caller's word. Which kinds and media types a capsule takes is the
//! door's check, above this; so is the name a part lands under ([`land_names`]).

use super::params::Refusal;
use super::Generation;
use serde_json::{Map, Value};

/// The longest part name or media type read, bytes.
pub const MAX_LABEL: usize = 1024;
/// The longest name a part lands under, bytes.
pub const MAX_LANDED_NAME: usize = 100;

/// A part's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    File,
    Data,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::File => "file",
            Kind::Data => "data",
        }
    }
}

/// One part, as sent (a text part's text is in [`super::params::SendRequest::text`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub kind: Kind,
    /// The media type as the sender wrote it (not yet checked).
    pub media_type: Option<String>,
    /// The name as the sender wrote it (not yet made safe).
    pub name: Option<String>,
    /// A file's decoded bytes, a data part's JSON; empty for text.
    pub bytes: Vec<u8>,
}

fn label(o: &Map<String, Value>, key: &str) -> Result<Option<String>, Refusal> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) if s.len() <= MAX_LABEL => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(format!("a part's {key} exceeds {MAX_LABEL} bytes").into()),
        Some(_) => Err(format!("a part's {key} must be a string").into()),
    }
}

/// Base64 as ProtoJSON writers spell bytes: the standard or the URL-safe alphabet, padded
/// or not.
fn base64(text: &str, key: &str) -> Result<Vec<u8>, Refusal> {
    let mut t: Vec<u8> = text
        .bytes()
        .map(|b| match b {
            b'-' => b'+',
            b'_' => b'/',
            b => b,
        })
        .collect();
    while t.len() % 4 != 0 {
        t.push(b'=');
    }
    crate::b64::decode_standard(&t).map_err(|_| Refusal::from(format!("a file part's {key} is not base64")))
}

/// A data part as it lands: compact JSON and a newline, never larger than the request's
/// own text of it (pretty-printing a deeply nested value would multiply it).
fn data_bytes(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    b
}

fn by_reference() -> Refusal {
    Refusal::ContentType(
        "a file part by reference (url/uri): the door fetches nothing; send the file's bytes inline".into(),
    )
}

/// One part: its text (for a text part) and what it is.
pub fn part(part: &Value, gen: Generation) -> Result<(Option<&str>, Part), Refusal> {
    let Value::Object(o) = part else {
        return Err("a part must be an object".into());
    };
    let text = || match o.get("text") {
        Some(Value::String(t)) => Ok(t.as_str()),
        _ => Err(Refusal::from("a text part's text must be a string")),
    };
    let mk = |kind, media_type, name, bytes| Part {
        kind,
        media_type,
        name,
        bytes,
    };
    match gen {
        Generation::V03 => match o.get("kind").and_then(Value::as_str) {
            Some("text") => Ok((Some(text()?), mk(Kind::Text, None, None, Vec::new()))),
            Some("data") => match o.get("data") {
                Some(d @ Value::Object(_)) => Ok((None, mk(Kind::Data, None, None, data_bytes(d)))),
                _ => Err("a data part's data must be an object".into()),
            },
            Some("file") => {
                let Some(Value::Object(f)) = o.get("file") else {
                    return Err("a file part's file must be an object".into());
                };
                let bytes = match (f.get("bytes"), f.get("uri")) {
                    (Some(Value::String(b)), _) => base64(b, "bytes")?,
                    (None | Some(Value::Null), Some(Value::String(_))) => return Err(by_reference()),
                    _ => return Err("a file part's file needs bytes (a base64 string)".into()),
                };
                Ok((
                    None,
                    mk(Kind::File, label(f, "mimeType")?, label(f, "name")?, bytes),
                ))
            }
            Some(_) => Err("a part's kind must be text, file or data".into()),
            None => Err("a part's kind is required".into()),
        },
        Generation::V10 => {
            let (media_type, name) = (label(o, "mediaType")?, label(o, "filename")?);
            let held: Vec<&str> = ["text", "raw", "url", "data"]
                .into_iter()
                .filter(|k| o.get(*k).is_some_and(|v| !v.is_null()))
                .collect();
            match held.as_slice() {
                ["text"] => Ok((Some(text()?), mk(Kind::Text, media_type, name, Vec::new()))),
                ["raw"] => match o.get("raw") {
                    Some(Value::String(b)) => Ok((None, mk(Kind::File, media_type, name, base64(b, "raw")?))),
                    _ => Err("a file part's raw must be a base64 string".into()),
                },
                ["url"] => Err(by_reference()),
                ["data"] => Ok((None, mk(Kind::Data, media_type, name, data_bytes(&o["data"])))),
                [] => Err("a part must hold one of text, raw, url or data".into()),
                _ => Err("a part must hold exactly one of text, raw, url or data".into()),
            }
        }
    }
}

/// The name a part's file lands under: the last component of what the sender wrote (after
/// `/` or `\`), control characters and anything outside `[A-Za-z0-9._ +-]` made `_`, a
/// leading dot made `_` (no hidden or `..` names), cut to [`MAX_LANDED_NAME`] bytes; no
/// usable name at all is `part-<n>` (`.json` for data).
fn safe_name(p: &Part, n: usize) -> String {
    let raw = p.name.as_deref().unwrap_or("");
    let last = raw.rsplit(['/', '\\']).next().unwrap_or("");
    let mut s: String = last
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._ +-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    s = s.trim().to_string();
    if s.starts_with('.') {
        s.replace_range(0..1, "_");
    }
    while s.len() > MAX_LANDED_NAME {
        s.pop();
    }
    if s.is_empty() || s.chars().all(|c| c == '_' || c == '.') {
        return match p.kind {
            Kind::Data => format!("part-{n}.json"),
            _ => format!("part-{n}"),
        };
    }
    s
}

/// The names the file and data parts of one message land under, in part order: each made
/// safe ([`safe_name`]) and, where two would collide, the later one gets `-2`, `-3`, …
/// before its extension. Deterministic: the same parts always land under the same names.
pub fn land_names(parts: &[Part]) -> Vec<String> {
    let mut taken: Vec<String> = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        let base = safe_name(p, i + 1);
        let (stem, ext) = match base.rsplit_once('.') {
            Some((s, e)) if !s.is_empty() => (s.to_string(), format!(".{e}")),
            _ => (base.clone(), String::new()),
        };
        let mut name = base.clone();
        let mut k = 2;
        while taken.iter().any(|t| t.eq_ignore_ascii_case(&name)) {
            name = format!("{stem}-{k}{ext}");
            k += 1;
        }
        taken.push(name);
    }
    taken
}

#[cfg(test)]
#[path = "parts_tests.rs"]
mod tests;
