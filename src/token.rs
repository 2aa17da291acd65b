//! The one codec for every MAC'd token: spawn credentials (`msc1`), spawn approvals
//! (`msa1`), peer handles (`mh1`) and door tokens (`mdt1`).
//!
//! Wire form: `<kind>.<base64url-nopad(payload JSON)>.<base64url-nopad(HMAC-SHA256)>`.
//! The MAC input is `domain ‖ 0x1f ‖ payload_b64`, and for a peer handle also
//! `‖ 0x1f ‖ audience`. Each kind has its own domain string, so a token of one kind never
//! verifies as another whatever its payload. Verification runs in a fixed order: shape,
//! MAC (constant time), payload JSON, version, expiry; nothing after the MAC looks at
//! attacker-chosen bytes that the key did not vouch for.

use crate::b64;
use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::sync::atomic::{compiler_fence, Ordering};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// Largest decoded payload accepted, in bytes.
pub const MAX_PAYLOAD: usize = 4096;
const MAC_LEN: usize = 32;
const MAC_B64_LEN: usize = b64::encoded_len(MAC_LEN);
const MAX_PAYLOAD_B64: usize = b64::encoded_len(MAX_PAYLOAD);
/// Longest token text that can possibly verify; anything longer is refused unread.
pub const MAX_TOKEN_LEN: usize = 5 + MAX_PAYLOAD_B64 + 1 + MAC_B64_LEN;

/// The four kinds of token, each with its own wire prefix and MAC domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `msc1`: names a running session at the roost.
    Credential,
    /// `msa1`: one spawn the roost granted.
    Approval,
    /// `mh1`: one exported file, bound to the fetching peer's audience.
    PeerHandle,
    /// `mdt1`: one credential of an authenticated door, for the session that minted it.
    DoorToken,
}

impl Kind {
    /// The text before the first dot.
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Credential => "msc1",
            Kind::Approval => "msa1",
            Kind::PeerHandle => "mh1",
            Kind::DoorToken => "mdt1",
        }
    }

    fn domain(self) -> &'static [u8] {
        match self {
            Kind::Credential => b"murmur-spawn-credential-v1",
            Kind::Approval => b"murmur-spawn-approval-v1",
            Kind::PeerHandle => b"murmur-peer-handle-v1",
            Kind::DoorToken => b"murmur-door-token-v1",
        }
    }
}

/// What a token is checked against: its kind and, for a peer handle, the audience the MAC
/// covers (`<name>@<host:port>`; compared lowercased).
#[derive(Debug, Clone, Copy)]
pub enum Domain<'a> {
    Credential,
    Approval,
    PeerHandle { audience: &'a str },
    DoorToken,
}

impl Domain<'_> {
    /// The kind this domain mints and accepts.
    pub fn kind(&self) -> Kind {
        match self {
            Domain::Credential => Kind::Credential,
            Domain::Approval => Kind::Approval,
            Domain::PeerHandle { .. } => Kind::PeerHandle,
            Domain::DoorToken => Kind::DoorToken,
        }
    }
}

/// Why a token was refused, in the order the checks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// Wrong prefix, wrong number of dots, oversize, or non-canonical base64url.
    Malformed,
    /// The MAC does not verify under this key, kind and audience.
    BadMac,
    /// The MAC verified but the payload is not a JSON object.
    BadPayload,
    /// The payload's `v` is not 1.
    BadVersion,
    /// The payload's `exp` is not in the future.
    Expired,
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TokenError::Malformed => "malformed token",
            TokenError::BadMac => "token does not verify",
            TokenError::BadPayload => "token payload is not a JSON object",
            TokenError::BadVersion => "unsupported token version",
            TokenError::Expired => "token expired",
        })
    }
}

impl std::error::Error for TokenError {}

/// A 32-byte MAC key from the operating system's random source, held only in memory and
/// overwritten when dropped. It has no `Debug`, `Clone` or serialisation on purpose.
pub struct Key([u8; 32]);

impl Key {
    /// A fresh random key.
    pub fn generate() -> Result<Key, getrandom::Error> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)?;
        Ok(Key(bytes))
    }

    /// A fresh random key made in place in shared memory: the bytes are never copied
    /// through a stack value that would outlive the key unzeroed.
    pub fn generate_shared() -> Result<std::sync::Arc<Key>, getrandom::Error> {
        let mut key = std::sync::Arc::new(Key([0u8; 32]));
        match std::sync::Arc::get_mut(&mut key) {
            Some(k) => getrandom::fill(&mut k.0)?,
            None => unreachable!("a new Arc has one holder"),
        }
        Ok(key)
    }

    /// A key from known bytes; for tests and fuzzing only.
    pub fn from_bytes(bytes: [u8; 32]) -> Key {
        Key(bytes)
    }

    fn mac(&self, domain: &Domain<'_>, payload_b64: &[u8]) -> [u8; MAC_LEN] {
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(domain.kind().domain());
        mac.update(&[0x1f]);
        mac.update(payload_b64);
        if let Domain::PeerHandle { audience } = domain {
            mac.update(&[0x1f]);
            mac.update(audience.to_ascii_lowercase().as_bytes());
        }
        mac.finalize().into_bytes().into()
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        self.0.fill(0);
        // Keep the zeroing store from being elided as a dead write.
        std::hint::black_box(&mut self.0);
        compiler_fence(Ordering::SeqCst);
    }
}

/// Mint a token of `domain`'s kind over `payload` (which should carry `"v":1`).
pub fn mint<P: Serialize>(key: &Key, domain: Domain<'_>, payload: &P) -> String {
    let json = serde_json::to_vec(payload).expect("token payloads are plain data");
    let payload_b64 = b64::encode(&json);
    let mac = key.mac(&domain, payload_b64.as_bytes());
    format!("{}.{}.{}", domain.kind().prefix(), payload_b64, b64::encode(&mac))
}

/// A token whose MAC, version and expiry all checked out.
#[derive(Debug, Clone, PartialEq)]
pub struct Verified {
    /// The payload object, exactly as minted.
    pub payload: Map<String, Value>,
}

impl Verified {
    /// Read the payload into a typed struct.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, TokenError> {
        T::deserialize(Value::Object(self.payload.clone())).map_err(|_| TokenError::BadPayload)
    }
}

/// A token's parts once its shape checked out: the payload's base64url text (what the MAC
/// covers), the decoded payload bytes and the decoded MAC.
struct Parts<'t> {
    payload_b64: &'t str,
    payload: Vec<u8>,
    mac: Vec<u8>,
}

/// The shape check shared by [`verify`] and [`shape`]: `<prefix>.<b64>.<b64>` within the
/// length caps, canonical base64url, a non-empty payload and a MAC of the right length.
fn split(kind: Kind, token: &str) -> Result<Parts<'_>, TokenError> {
    // Before any allocation proportional to the input.
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::Malformed);
    }
    let rest = token
        .strip_prefix(kind.prefix())
        .and_then(|r| r.strip_prefix('.'))
        .ok_or(TokenError::Malformed)?;
    let (payload_b64, mac_b64) = rest.split_once('.').ok_or(TokenError::Malformed)?;
    if mac_b64.contains('.') || mac_b64.len() != MAC_B64_LEN || payload_b64.len() > MAX_PAYLOAD_B64 {
        return Err(TokenError::Malformed);
    }
    let payload = b64::decode(payload_b64.as_bytes()).map_err(|_| TokenError::Malformed)?;
    let mac = b64::decode(mac_b64.as_bytes()).map_err(|_| TokenError::Malformed)?;
    if payload.is_empty() || payload.len() > MAX_PAYLOAD || mac.len() != MAC_LEN {
        return Err(TokenError::Malformed);
    }
    Ok(Parts {
        payload_b64,
        payload,
        mac,
    })
}

/// The payload object and its version, with the version checked.
fn payload_object(payload: &[u8]) -> Result<Map<String, Value>, TokenError> {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(payload) else {
        return Err(TokenError::BadPayload);
    };
    if map.get("v").and_then(Value::as_u64) != Some(1) {
        return Err(TokenError::BadVersion);
    }
    Ok(map)
}

/// The checks of [`verify`] that need no key: shape, payload JSON object and `v == 1`.
/// Nothing here is vouched for: the payload is for a caller whose protocol refuses a
/// malformed token before it looks at the MAC (the peer plane's redeem), and is never to
/// be trusted before [`verify`] passes.
pub fn shape(kind: Kind, token: &str) -> Result<Map<String, Value>, TokenError> {
    payload_object(&split(kind, token)?.payload)
}

/// Check `token` against `key` and `domain` at time `now_ms` (unix milliseconds). A payload
/// with an `exp` field is refused at or after that instant; one without never expires here.
pub fn verify(key: &Key, domain: Domain<'_>, token: &str, now_ms: u64) -> Result<Verified, TokenError> {
    // 1. Shape.
    let parts = split(domain.kind(), token)?;
    // 2. MAC, in constant time.
    let expected = key.mac(&domain, parts.payload_b64.as_bytes());
    if !bool::from(expected.as_slice().ct_eq(&parts.mac)) {
        return Err(TokenError::BadMac);
    }
    // 3. Payload JSON, 4. version.
    let map = payload_object(&parts.payload)?;
    // 5. Expiry.
    if let Some(exp) = map.get("exp") {
        match exp.as_u64() {
            Some(exp) if now_ms < exp => {}
            Some(_) => return Err(TokenError::Expired),
            None => return Err(TokenError::BadPayload),
        }
    }
    Ok(Verified { payload: map })
}

/// The first 16 lowercase hex characters of sha256(token): how a token is named in traces
/// and error messages, which never carry the token itself.
pub fn token_id(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// 16 random bytes as 32 lowercase hex characters: nonces and the tail of every id.
pub fn random_hex16() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
