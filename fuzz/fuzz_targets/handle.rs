//! The peer plane's handle checks on arbitrary text. Input: `<token>\n<audience>`, each
//! lossily UTF-8. Invariants: `check` and `redact` never panic; arbitrary text never passes
//! `check` under any audience (a forged MAC is out of the fuzzer's reach); a handle minted
//! here over the first part as its path redeems with its audience (in any ASCII case) and
//! with no other, is `handle_expired` only once the MAC passed, and does not redeem after
//! any one-byte change; `redact` leaves no part of a handle behind and is idempotent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::resources::peer::{check, mint, redact, PeerRefusal};
use murmur::token::Key;

const NOW: u64 = 1_755_950_000_000;
const SES: &str = "ses_01a033ec2c1f7eb2a5922f84e012e89d";

fuzz_target!(|data: &[u8]| {
    let key = Key::from_bytes([42; 32]);
    let (head, tail) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let text = String::from_utf8_lossy(head);
    let aud = String::from_utf8_lossy(tail);
    let has_audience = !aud.trim().is_empty();

    // Arbitrary text never redeems.
    for audience in [
        None,
        Some(""),
        Some(aud.as_ref()),
        Some("reporter@localhost:41234"),
    ] {
        assert!(check(&key, &text, audience, NOW).is_err());
    }
    assert_eq!(redact(&redact(&text)), redact(&text));

    // A handle minted over the first part as its path, for the second part as audience.
    let path: String = text.chars().take(256).collect();
    let exp = (NOW - 128).saturating_add(u64::from(data.first().copied().unwrap_or(0)));
    let Ok(handle) = mint(&key, SES, &path, exp, &aud) else {
        return;
    };
    let own = check(&key, &handle.token, Some(&aud), NOW);
    if !has_audience {
        assert_eq!(own, Err(PeerRefusal::MissingAudience));
    } else if exp <= NOW {
        assert_eq!(own, Err(PeerRefusal::Expired));
    } else {
        let r = own.expect("a handle redeems with its own audience");
        assert_eq!(
            (r.path.as_str(), r.exp, r.iss.as_str()),
            (path.as_str(), exp, SES)
        );
        let upper = aud.to_ascii_uppercase();
        assert!(check(&key, &handle.token, Some(&upper), NOW).is_ok());
    }
    if has_audience {
        let other = format!("{aud}x");
        assert_eq!(
            check(&key, &handle.token, Some(&other), NOW),
            Err(PeerRefusal::NotValid)
        );
        let other_key = Key::from_bytes([43; 32]);
        assert_eq!(
            check(&other_key, &handle.token, Some(&aud), NOW),
            Err(PeerRefusal::NotValid)
        );
    }

    // Any one-byte change.
    let mut bytes = handle.token.clone().into_bytes();
    let at = data.len().wrapping_mul(31) % bytes.len();
    bytes[at] ^= data.get(1).copied().unwrap_or(1).max(1);
    if let Ok(tampered) = String::from_utf8(bytes) {
        assert!(check(&key, &tampered, Some(&aud), NOW).is_err());
    }

    // Redaction, with arbitrary text glued on both sides.
    let mac = handle.token.rsplit('.').next().unwrap_or_default();
    let redacted = redact(&format!("{text}{}{aud}", handle.token));
    assert!(!redacted.contains(mac), "{redacted}");
    assert_eq!(redact(&redacted), redacted);
    assert_eq!(redact(&handle.token), format!("<handle:{}>", handle.handle_id));
});
