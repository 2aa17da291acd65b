use super::fetch::basename;
use super::share::{checked_path, ttl_secs};
use super::*;
use crate::token::{self, Domain};

#[test]
fn peer_addresses_take_host_and_port_only() {
    let p = |s: &str| Peer::parse(s).map(|p| p.authority());
    assert_eq!(p("localhost:41234").unwrap(), "localhost:41234");
    assert_eq!(p(" LocalHost:7 ").unwrap(), "localhost:7");
    assert_eq!(p("http://127.0.0.1:9/").unwrap(), "127.0.0.1:9");
    assert_eq!(p("http://Example.com:9/a/b?c#d").unwrap(), "example.com:9");
    assert_eq!(p("http://h").unwrap(), "h:80");
    assert_eq!(p("h").unwrap(), "h:80");
    for bad in [
        "",
        "https://h:1",
        "ftp://h",
        "http://",
        "h:1/x",
        "u@h:1",
        "http://u@h:1/",
        "h:0",
        "h:99999",
        "h 1",
        "h\r\nx:1",
    ] {
        assert!(Peer::parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn ttls_only_narrow() {
    let t = |v: Value| ttl_secs(Some(&v), 600).map_err(|r| r.code);
    assert_eq!(ttl_secs(None, 600), Ok(600));
    assert_eq!(t(Value::Null), Ok(600));
    assert_eq!(t(json!("90s")), Ok(90));
    assert_eq!(t(json!("10m")), Ok(600));
    assert_eq!(t(json!("1h")), Ok(600), "clamped down to max_ttl");
    assert_eq!(t(json!(5)), Ok(5));
    assert_eq!(t(json!("5")), Ok(5));
    for bad in [
        json!(0),
        json!("0s"),
        json!(-1),
        json!(1.5),
        json!("1 h"),
        json!("x"),
        json!(true),
    ] {
        assert_eq!(t(bad.clone()), Err("invalid_ttl".to_string()), "{bad}");
    }
}

#[test]
fn paths_are_refused_never_normalised() {
    assert_eq!(checked_path("report.md"), Ok(()));
    assert_eq!(checked_path("a/b c.md"), Ok(()));
    for (bad, code) in [
        ("../x", "outside_root"),
        ("a/../b", "outside_root"),
        ("/etc/passwd", "outside_root"),
        ("%2e%2e/x", "outside_root"),
        ("a%2F..%2Fb", "outside_root"),
        ("%2Fetc", "outside_root"),
        ("", "not_found"),
        ("a//b", "not_found"),
        ("./a", "not_found"),
        ("a\0b", "not_found"),
        ("a%00b", "not_found"),
    ] {
        assert_eq!(
            checked_path(bad).map_err(|r| r.code),
            Err(code.to_string()),
            "{bad:?}"
        );
    }
}

#[test]
fn the_stored_basename_comes_sanitised_from_the_unverified_payload() {
    let key = token::Key::generate().unwrap();
    let handle = |p: &str| {
        crate::resources::peer::mint(&key, "ses_x", p, 1, "a@localhost:1")
            .unwrap()
            .token
    };
    assert_eq!(basename(&handle("out/report.md")), "report.md");
    assert_eq!(basename(&handle("r\u{e9}sum\u{e9} (1).txt")), "r_sum___1_.txt");
    assert_eq!(basename(&handle("dir/")), "file");
    assert_eq!(basename(&handle("..")), "..");
    assert_eq!(basename(&handle(&"x".repeat(500))).len(), 120);
    assert_eq!(basename("mh1.nonsense"), "file");
    // A payload without `p`, minted under any key: still only a name.
    let odd = token::mint(
        &key,
        Domain::PeerHandle { audience: "a" },
        &json!({"v": 1, "p": 7}),
    );
    assert_eq!(basename(&odd), "file");
}

#[test]
fn redaction_reaches_every_string_of_a_value() {
    let key = token::Key::generate().unwrap();
    let h = crate::resources::peer::mint(&key, "ses_x", "a.md", 1, "a@localhost:1").unwrap();
    let v = json!({"handle": h.token, "nested": [format!("see {} now", h.token), 3], h.token.clone(): null});
    let r = redact_value(&v).to_string();
    assert!(!r.contains("mh1."), "{r}");
    assert_eq!(r.matches(&format!("<handle:{}>", h.handle_id)).count(), 3, "{r}");
}
