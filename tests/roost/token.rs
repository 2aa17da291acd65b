//! The token codec: round trips, tampering, kind confusion, audience binding, canonical form.

use murmur::token::{mint, token_id, verify, Domain, Key, TokenError, MAX_TOKEN_LEN};
use serde_json::json;

const NOW: u64 = 1_755_950_000_000;

fn key() -> Key {
    Key::from_bytes([7; 32])
}

fn domains() -> [Domain<'static>; 4] {
    [
        Domain::Credential,
        Domain::Approval,
        Domain::PeerHandle {
            audience: "reporter@localhost:41234",
        },
        Domain::DoorToken,
    ]
}

fn payload() -> serde_json::Value {
    json!({"v": 1, "sid": "ses_01a000c58eae7ca0901d5e6b7427df28", "exp": NOW + 60_000, "n": "7f3c"})
}

#[test]
fn round_trip_per_kind() {
    let key = key();
    for (domain, prefix) in domains().into_iter().zip(["msc1.", "msa1.", "mh1.", "mdt1."]) {
        let token = mint(&key, domain, &payload());
        assert!(token.starts_with(prefix), "{token}");
        assert_eq!(token.matches('.').count(), 2);
        let verified = verify(&key, domain, &token, NOW).unwrap();
        assert_eq!(serde_json::Value::Object(verified.payload), payload());
    }
}

#[test]
fn a_fresh_key_verifies_only_its_own_tokens() {
    let a = Key::generate().unwrap();
    let b = Key::generate().unwrap();
    let token = mint(&a, Domain::Credential, &json!({"v": 1, "sid": "s"}));
    assert!(verify(&a, Domain::Credential, &token, NOW).is_ok());
    assert_eq!(
        verify(&b, Domain::Credential, &token, NOW),
        Err(TokenError::BadMac)
    );
}

#[test]
fn one_changed_byte_anywhere_fails() {
    let key = key();
    for domain in domains() {
        let token = mint(&key, domain, &payload());
        for i in 0..token.len() {
            let mut bytes = token.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            let tampered = String::from_utf8(bytes).unwrap();
            assert!(
                verify(&key, domain, &tampered, NOW).is_err(),
                "byte {i} of {token}"
            );
        }
    }
}

#[test]
fn a_token_never_verifies_as_another_kind() {
    let key = key();
    for (i, minted_as) in domains().into_iter().enumerate() {
        let token = mint(&key, minted_as, &payload());
        for (j, checked_as) in domains().into_iter().enumerate() {
            if i != j {
                assert_eq!(verify(&key, checked_as, &token, NOW), Err(TokenError::Malformed));
                // Even with the prefix swapped, the MAC domain differs.
                let (_, rest) = token.split_once('.').unwrap();
                let relabelled = format!("{}.{rest}", checked_as.kind().prefix());
                assert_eq!(
                    verify(&key, checked_as, &relabelled, NOW),
                    Err(TokenError::BadMac)
                );
            }
        }
    }
}

#[test]
fn a_handle_verified_with_another_audience_fails() {
    let key = key();
    let minted = Domain::PeerHandle {
        audience: "reporter@localhost:41234",
    };
    let token = mint(&key, minted, &payload());
    let other = Domain::PeerHandle {
        audience: "intruder@localhost:41234",
    };
    assert_eq!(verify(&key, other, &token, NOW), Err(TokenError::BadMac));
    let port = Domain::PeerHandle {
        audience: "reporter@localhost:41235",
    };
    assert_eq!(verify(&key, port, &token, NOW), Err(TokenError::BadMac));
    // The audience is compared lowercased, as both sides compute it.
    let upper = Domain::PeerHandle {
        audience: "Reporter@LOCALHOST:41234",
    };
    assert!(verify(&key, upper, &token, NOW).is_ok());
}

#[test]
fn non_canonical_base64_fails() {
    let key = key();
    // A one-byte payload `{` is not JSON, but shape is checked first: build tokens whose
    // MAC part is a second spelling of the real MAC.
    let token = mint(&key, Domain::Credential, &json!({"v": 1}));
    let (head, mac) = token.rsplit_once('.').unwrap();
    // 32 bytes encode to 43 characters whose last one carries 2 unused bits.
    let last = mac.as_bytes()[42];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let idx = alphabet.iter().position(|&c| c == last).unwrap();
    let second = alphabet[idx | 1] as char;
    assert_ne!(second as u8, last, "the real MAC's tail bits are zero");
    let respelled = format!("{head}.{}{second}", &mac[..42]);
    assert_eq!(
        verify(&key, Domain::Credential, &respelled, NOW),
        Err(TokenError::Malformed)
    );
    let padded = format!("{token}=");
    assert_eq!(
        verify(&key, Domain::Credential, &padded, NOW),
        Err(TokenError::Malformed)
    );
    let std_alphabet = token.replace('-', "+").replace('_', "/");
    if std_alphabet != token {
        assert_eq!(
            verify(&key, Domain::Credential, &std_alphabet, NOW),
            Err(TokenError::Malformed)
        );
    }
}

#[test]
fn checks_run_in_order_shape_mac_json_version_expiry() {
    let key = key();
    let d = Domain::Approval;
    assert_eq!(verify(&key, d, "msa1.abc", NOW), Err(TokenError::Malformed));
    assert_eq!(verify(&key, d, "msa1..", NOW), Err(TokenError::Malformed));
    assert_eq!(
        verify(&key, d, &"x".repeat(MAX_TOKEN_LEN + 1), NOW),
        Err(TokenError::Malformed)
    );
    let not_json = mint(&key, d, &"just a string");
    assert_eq!(verify(&key, d, &not_json, NOW), Err(TokenError::BadPayload));
    let v2 = mint(&key, d, &json!({"v": 2, "exp": 0}));
    assert_eq!(verify(&key, d, &v2, NOW), Err(TokenError::BadVersion));
    let expired = mint(&key, d, &json!({"v": 1, "exp": NOW}));
    assert_eq!(verify(&key, d, &expired, NOW), Err(TokenError::Expired));
    assert!(verify(&key, d, &expired, NOW - 1).is_ok());
    let bad_exp = mint(&key, d, &json!({"v": 1, "exp": "soon"}));
    assert_eq!(verify(&key, d, &bad_exp, NOW), Err(TokenError::BadPayload));
    // An expired token under the wrong key reports the MAC, not the expiry.
    assert_eq!(
        verify(&Key::from_bytes([8; 32]), d, &expired, NOW),
        Err(TokenError::BadMac)
    );
}

#[test]
fn oversized_payload_is_refused_before_the_mac() {
    let key = key();
    let big = mint(
        &key,
        Domain::Credential,
        &json!({"v": 1, "pad": "x".repeat(5000)}),
    );
    assert_eq!(
        verify(&key, Domain::Credential, &big, NOW),
        Err(TokenError::Malformed)
    );
}

#[test]
fn token_id_is_16_hex_of_sha256() {
    // sha256("abc") = ba7816bf8f01cfea...
    assert_eq!(token_id("abc"), "ba7816bf8f01cfea");
}
