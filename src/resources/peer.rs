//! The peer plane's handle: minting an `mh1` token over one exported file for one audience,
//! and the redeem's checks in the spec's fixed order (shape, audience, MAC, expiry) before
//! any path is resolved. The token codec ([`crate::token`]) does the encoding and the MAC;
//! this layer only fixes the payload and maps refusals onto the spec's error table. No HTTP
//! here: the listener passes the path segment and the `x-murmur-audience` header in.

use crate::token::{self, Domain, Key, Kind, TokenError};
use serde::Serialize;
use serde_json::Value;

/// A freshly minted handle, as the share-file tool reports it. `Debug` names the handle by
/// its id and never prints the token.
#[derive(Clone, PartialEq, Eq)]
pub struct Handle {
    /// The `mh1.<payload>.<mac>` text the peer redeems.
    pub token: String,
    /// [`token::token_id`] of the token: how traces and messages name it.
    pub handle_id: String,
    /// The payload's `exp`, unix milliseconds.
    pub expires_at_ms: u64,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("token", &format_args!("<handle:{}>", self.handle_id))
            .field("handle_id", &self.handle_id)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

/// The payload, in the spec's field order.
#[derive(Serialize)]
struct Payload<'a> {
    v: u8,
    iss: &'a str,
    p: &'a str,
    exp: u64,
    n: String,
}

/// Mint a handle for `path` (already canonical, relative to `exports.peer_files.root`),
/// issued by session `session_id`, expiring at `exp_ms`, redeemable only by `audience`
/// (see [`audience`]). Fails only when the OS random source does.
pub fn mint(
    key: &Key,
    session_id: &str,
    path: &str,
    exp_ms: u64,
    audience: &str,
) -> Result<Handle, getrandom::Error> {
    let payload = Payload {
        v: 1,
        iss: session_id,
        p: path,
        exp: exp_ms,
        n: token::random_hex16()?,
    };
    let token = token::mint(key, Domain::PeerHandle { audience }, &payload);
    let handle_id = token::token_id(&token);
    Ok(Handle {
        token,
        handle_id,
        expires_at_ms: exp_ms,
    })
}

/// The audience string both sides compute from the fetching capsule's identity: the agent
/// card's `name` and the `host:port` of its `url`, as `<name>@<host:port>`, lowercased
/// (ASCII, as the codec compares it).
pub fn audience(name: &str, hostport: &str) -> String {
    format!("{name}@{hostport}").to_ascii_lowercase()
}

/// Why a redeem was refused before any path was resolved: the spec's rows for the handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerRefusal {
    /// 400: not `mh1.<b64>.<b64>`, or the payload is not a JSON object with `v` 1.
    Malformed,
    /// 400: no `x-murmur-audience` header, or an empty one.
    MissingAudience,
    /// 403: the MAC does not verify, for whatever reason. One code and one text on purpose.
    NotValid,
    /// 410: the MAC verified and `exp` is not in the future.
    Expired,
}

/// The one text of every `handle_not_valid`: a tampered payload, another instance's key and
/// a wrong audience must be indistinguishable.
const NOT_VALID_MESSAGE: &str = "the handle does not verify for this audience at this capsule instance";

impl PeerRefusal {
    pub fn status(&self) -> u16 {
        match self {
            PeerRefusal::Malformed | PeerRefusal::MissingAudience => 400,
            PeerRefusal::NotValid => 403,
            PeerRefusal::Expired => 410,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            PeerRefusal::Malformed => "malformed_handle",
            PeerRefusal::MissingAudience => "missing_audience",
            PeerRefusal::NotValid => "handle_not_valid",
            PeerRefusal::Expired => "handle_expired",
        }
    }

    pub fn message(&self) -> &'static str {
        match self {
            PeerRefusal::Malformed => {
                "the handle is not a peer handle (the mh1 tag, a payload and a MAC, joined by dots), or its payload is not a version 1 JSON object"
            }
            PeerRefusal::MissingAudience => "the x-murmur-audience header is missing or empty",
            PeerRefusal::NotValid => NOT_VALID_MESSAGE,
            PeerRefusal::Expired => "the handle has expired",
        }
    }
}

/// What a handle that passed every check names: the path to resolve under
/// `exports.peer_files.root`, its expiry and the issuing session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redeemable {
    pub path: String,
    pub exp: u64,
    pub iss: String,
}

/// Run a redeem's checks on `token` with the `x-murmur-audience` header `audience` at
/// `now_ms`, in the spec's order: shape (including a JSON object payload with `v` 1),
/// audience present, MAC in constant time, expiry. Nothing after the MAC reads a byte the
/// key did not vouch for. An audience of only whitespace counts as empty.
pub fn check(key: &Key, token: &str, audience: Option<&str>, now_ms: u64) -> Result<Redeemable, PeerRefusal> {
    // 1. Shape: prefix, dots, caps, canonical base64url, payload JSON object, version.
    token::shape(Kind::PeerHandle, token).map_err(|_| PeerRefusal::Malformed)?;
    // 2. The audience header.
    let audience = match audience {
        Some(a) if !a.trim().is_empty() => a,
        _ => return Err(PeerRefusal::MissingAudience),
    };
    // 3. MAC (constant time), then 4. expiry. The shape already passed, so any other
    // failure of the codec is a MAC failure for the spec's purposes.
    let verified = match token::verify(key, Domain::PeerHandle { audience }, token, now_ms) {
        Ok(v) => v,
        Err(TokenError::Expired) => return Err(PeerRefusal::Expired),
        Err(_) => return Err(PeerRefusal::NotValid),
    };
    // Fields the key vouched for; one missing can only be our own minting bug.
    let field = |name: &str| verified.payload.get(name);
    let (Some(Value::String(path)), Some(Value::String(iss)), Some(exp)) =
        (field("p"), field("iss"), field("exp").and_then(Value::as_u64))
    else {
        return Err(PeerRefusal::NotValid);
    };
    Ok(Redeemable {
        path: path.clone(),
        exp,
        iss: iss.clone(),
    })
}

const PREFIX: &str = "mh1.";

fn is_b64url(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// The end of the run of base64url bytes starting at `at`.
fn run_end(bytes: &[u8], at: usize) -> usize {
    let len = bytes
        .get(at..)
        .map_or(0, |rest| rest.iter().take_while(|&&b| is_b64url(b)).count());
    at + len
}

/// The end of a handle-shaped span whose `mh1.` starts at `start`: at least `<b64>.<b64>`
/// after the prefix, extended over any further `.<b64>` segments, so that text glued on
/// either side of a token (`mh1.x.mh1.<p>.<mac>`) can never leave part of its MAC behind.
fn handle_end(bytes: &[u8], start: usize) -> Option<usize> {
    let first = start + PREFIX.len();
    let mut end = run_end(bytes, first);
    if end == first {
        return None;
    }
    let mut segments = 1;
    while bytes.get(end) == Some(&b'.') {
        let next = run_end(bytes, end + 1);
        if next == end + 1 {
            break;
        }
        end = next;
        segments += 1;
    }
    (segments >= 2).then_some(end)
}

/// `text` with every handle-shaped substring (`mh1.<b64url>.<b64url>`, and any further
/// `.<b64url>` segments directly after it) replaced by `<handle:HANDLE_ID>`, where
/// HANDLE_ID is [`token::token_id`] of that substring. For anything bound for a trace.
pub fn redact(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|rest| rest.find(PREFIX)) {
        let start = from + found;
        match handle_end(bytes, start) {
            Some(end) => {
                // Every byte of the span is ASCII, so both ends are char boundaries.
                out.push_str(&text[copied..start]);
                out.push_str("<handle:");
                out.push_str(&token::token_id(&text[start..end]));
                out.push('>');
                copied = end;
                from = end;
            }
            // `m` is ASCII: the next byte is a char boundary.
            None => from = start + 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
#[path = "peer_tests.rs"]
mod tests;
