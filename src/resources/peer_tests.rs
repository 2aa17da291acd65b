use super::*;
use crate::b64;

const NOW: u64 = 1_755_950_000_000;
const EXP: u64 = NOW + 60_000;
const SES: &str = "ses_01a033ec2c1f7eb2a5922f84e012e89d";
const AUD: &str = "reporter@localhost:41234";

fn key() -> Key {
    Key::from_bytes([7; 32])
}

fn handle(key: &Key, exp: u64, audience: &str) -> Handle {
    mint(key, SES, "report.md", exp, audience).unwrap()
}

/// The token's three parts.
fn parts(token: &str) -> (&str, &str, &str) {
    let mut it = token.splitn(3, '.');
    (it.next().unwrap(), it.next().unwrap(), it.next().unwrap())
}

/// `token` with its payload replaced by `json` and its MAC kept.
fn with_payload(token: &str, json: &str) -> String {
    let (prefix, _, mac) = parts(token);
    format!("{prefix}.{}.{mac}", b64::encode(json.as_bytes()))
}

#[test]
fn mint_then_check_round_trips() {
    let key = key();
    let h = handle(&key, EXP, AUD);
    assert_eq!(h.expires_at_ms, EXP);
    assert_eq!(h.handle_id, token::token_id(&h.token));
    assert_eq!(h.handle_id.len(), 16);
    let r = check(&key, &h.token, Some(AUD), NOW).unwrap();
    assert_eq!(
        r,
        Redeemable {
            path: "report.md".into(),
            exp: EXP,
            iss: SES.into()
        }
    );
    // Idempotent: no per-handle state.
    assert_eq!(check(&key, &h.token, Some(AUD), NOW).unwrap(), r);
}

#[test]
fn payload_is_exactly_the_spec_fields_in_order() {
    let key = key();
    let h = handle(&key, EXP, AUD);
    let (prefix, payload, _) = parts(&h.token);
    assert_eq!(prefix, "mh1");
    let json = String::from_utf8(b64::decode(payload.as_bytes()).unwrap()).unwrap();
    let head = format!(r#"{{"v":1,"iss":"{SES}","p":"report.md","exp":{EXP},"n":""#);
    let nonce = json
        .strip_prefix(&head)
        .and_then(|r| r.strip_suffix("\"}"))
        .unwrap();
    assert_eq!(nonce.len(), 32);
    assert!(nonce
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    // Two handles for the same file and audience differ.
    assert_ne!(handle(&key, EXP, AUD).token, h.token);
}

#[test]
fn handle_debug_never_prints_the_token() {
    let h = handle(&key(), EXP, AUD);
    let shown = format!("{h:?}");
    assert!(!shown.contains(&h.token));
    assert!(shown.contains(&h.handle_id));
}

#[test]
fn every_mac_failure_is_the_same_refusal() {
    let key = key();
    let h = handle(&key, EXP, AUD);
    let (prefix, payload, mac) = parts(&h.token);

    let wrong_audience = check(&key, &h.token, Some("intruder@localhost:41234"), NOW);
    // Another session of the same capsule has another key.
    let other_key = check(&Key::from_bytes([8; 32]), &h.token, Some(AUD), NOW);
    let json = format!(r#"{{"v":1,"iss":"{SES}","p":"../secret","exp":{EXP},"n":"00"}}"#);
    let tampered_payload = check(&key, &with_payload(&h.token, &json), Some(AUD), NOW);
    // A different first MAC character (which carries six data bits, so stays canonical).
    let first = if mac.starts_with('A') { 'B' } else { 'A' };
    let forged = format!("{prefix}.{payload}.{first}{}", &mac[1..]);
    let tampered_mac = check(&key, &forged, Some(AUD), NOW);

    for r in [wrong_audience, other_key, tampered_payload, tampered_mac] {
        let e = r.unwrap_err();
        assert_eq!(e, PeerRefusal::NotValid);
        assert_eq!((e.status(), e.code()), (403, "handle_not_valid"));
        assert_eq!(e.message(), NOT_VALID_MESSAGE);
    }
}

#[test]
fn expiry_is_checked_only_after_the_mac() {
    let key = key();
    let h = handle(&key, NOW, AUD);
    assert_eq!(check(&key, &h.token, Some(AUD), NOW - 1).unwrap().exp, NOW);
    let e = check(&key, &h.token, Some(AUD), NOW).unwrap_err();
    assert_eq!(
        (e, e.status(), e.code()),
        (PeerRefusal::Expired, 410, "handle_expired")
    );
    assert_eq!(
        check(&key, &h.token, Some(AUD), u64::MAX),
        Err(PeerRefusal::Expired)
    );
    // An expired handle that does not verify says nothing about its expiry.
    assert_eq!(
        check(&key, &h.token, Some("intruder@localhost:41234"), NOW),
        Err(PeerRefusal::NotValid)
    );
    assert_eq!(
        check(&Key::from_bytes([8; 32]), &h.token, Some(AUD), NOW),
        Err(PeerRefusal::NotValid)
    );
}

#[test]
fn malformed_is_decided_before_the_audience_and_the_mac() {
    let key = key();
    let h = handle(&key, EXP, AUD);
    let v2 = with_payload(&h.token, r#"{"v":2,"iss":"s","p":"report.md","exp":1,"n":"00"}"#);
    let no_v = with_payload(&h.token, r#"{"iss":"s","p":"report.md"}"#);
    let text = with_payload(&h.token, "not json");
    let array = with_payload(&h.token, "[1]");
    let (_, payload, mac) = parts(&h.token);
    let cases = [
        v2,
        no_v,
        text,
        array,
        String::new(),
        "mh1".into(),
        "mh1..".into(),
        format!("mh1.{payload}"),
        format!("mh1.{payload}.{mac}.x"),
        format!("mh1.{payload}.{mac}A"),
        format!("mh1.{payload}=.{mac}"),
        format!("msc1.{payload}.{mac}"),
        format!("MH1.{payload}.{mac}"),
        format!("mh1..{mac}"),
        format!("mh1.{}.{mac}", "A".repeat(token::MAX_TOKEN_LEN)),
    ];
    for token in cases {
        for audience in [None, Some(""), Some(AUD)] {
            let e = check(&key, &token, audience, NOW).unwrap_err();
            assert_eq!(e, PeerRefusal::Malformed, "{token:?} {audience:?}");
            assert_eq!((e.status(), e.code()), (400, "malformed_handle"));
        }
    }
}

#[test]
fn the_audience_is_required_before_the_mac() {
    let key = key();
    let h = handle(&key, EXP, AUD);
    let forged = with_payload(&h.token, r#"{"v":1,"p":"x"}"#);
    for token in [&h.token, &forged] {
        for audience in [None, Some(""), Some("  ")] {
            let e = check(&key, token, audience, NOW).unwrap_err();
            assert_eq!(e, PeerRefusal::MissingAudience);
            assert_eq!((e.status(), e.code()), (400, "missing_audience"));
        }
    }
}

#[test]
fn the_audience_is_case_insensitive() {
    let key = key();
    let aud = audience("Reporter", "LocalHost:41234");
    assert_eq!(aud, AUD);
    let h = handle(&key, EXP, &aud);
    for asserted in [AUD, "REPORTER@LOCALHOST:41234", "Reporter@localhost:41234"] {
        assert!(check(&key, &h.token, Some(asserted), NOW).is_ok(), "{asserted}");
    }
    // Minting with a mixed-case audience binds the same lowercased string.
    let mixed = handle(&key, EXP, "Reporter@LocalHost:41234");
    assert!(check(&key, &mixed.token, Some(AUD), NOW).is_ok());
}

#[test]
fn a_vouched_payload_lacking_fields_is_not_valid() {
    let key = key();
    let aud = Domain::PeerHandle { audience: AUD };
    for payload in [
        serde_json::json!({"v": 1, "iss": SES, "exp": EXP}),
        serde_json::json!({"v": 1, "p": 7, "iss": SES, "exp": EXP}),
        serde_json::json!({"v": 1, "p": "report.md", "exp": EXP}),
        serde_json::json!({"v": 1, "p": "report.md", "iss": SES}),
        serde_json::json!({"v": 1, "p": "report.md", "iss": SES, "exp": "later"}),
        serde_json::json!({"v": 1, "p": "report.md", "iss": SES, "exp": -1}),
    ] {
        let t = token::mint(&key, aud, &payload);
        assert_eq!(
            check(&key, &t, Some(AUD), NOW),
            Err(PeerRefusal::NotValid),
            "{payload}"
        );
    }
}

#[test]
fn other_kinds_never_redeem() {
    let key = key();
    let payload = serde_json::json!({"v": 1, "p": "report.md", "iss": SES, "exp": EXP});
    for domain in [Domain::Credential, Domain::Approval] {
        let t = token::mint(&key, domain, &payload);
        assert_eq!(check(&key, &t, Some(AUD), NOW), Err(PeerRefusal::Malformed));
        // The same payload and MAC under the mh1 prefix: another domain string.
        let (_, p, m) = parts(&t);
        let relabelled = format!("mh1.{p}.{m}");
        assert_eq!(
            check(&key, &relabelled, Some(AUD), NOW),
            Err(PeerRefusal::NotValid)
        );
    }
}

#[test]
fn redact_replaces_every_handle_with_its_id() {
    let key = key();
    let a = handle(&key, EXP, AUD);
    let b = handle(&key, EXP, AUD);
    let text = format!(
        r#"{{"peer":"localhost:41234","handle":"{}"}} and é{} then {}."#,
        a.token, b.token, a.token
    );
    let r = redact(&text);
    assert_eq!(
        r,
        format!(
            r#"{{"peer":"localhost:41234","handle":"<handle:{0}>"}} and é<handle:{1}> then <handle:{0}>."#,
            a.handle_id, b.handle_id
        )
    );
    assert_eq!(redact(&r), r);
    assert_eq!(redact(&a.token), format!("<handle:{}>", a.handle_id));
}

#[test]
fn redact_leaves_no_part_of_a_glued_token() {
    let h = handle(&key(), EXP, AUD);
    let (_, payload, mac) = parts(&h.token);
    for text in [
        format!("mh1.x.{}", h.token),
        format!("mh1.{}", h.token),
        format!("xmh1.{}", h.token),
        format!("{}.tail", h.token),
    ] {
        let r = redact(&text);
        assert!(!r.contains(mac) && !r.contains(payload), "{r}");
        assert!(r.contains("<handle:"), "{r}");
    }
}

#[test]
fn redact_leaves_other_text_alone() {
    for text in [
        "",
        "mh1",
        "mh1.",
        "mh1..",
        "mh1.abc",
        "mh1.abc.",
        "mh1..abc",
        "mh2.abc.def",
        "msc1.abc.def",
        "the mh1. format is mh1.<payload>.<mac>",
        "ünïcödé mh1.ä.b",
    ] {
        assert_eq!(redact(text), text);
    }
    assert_eq!(
        redact("see mh1.abc.def, done"),
        format!("see <handle:{}>, done", token::token_id("mh1.abc.def"))
    );
}
