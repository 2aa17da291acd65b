//! Names: one the allow list does not hold is answered REFUSED by mur's DNS inside the
//! namespace (so the child's resolver fails) and is never asked of the host's resolver; one
//! it holds is resolved on the host (here by a fake resolver, `MURMUR_EGRESS_RESOLVER`) and
//! reached by that name.

use super::servers::{FakeDns, Upstream};
use super::{capsule, classes, serial};
use std::net::Ipv4Addr;

#[test]
fn an_unlisted_name_is_not_resolved() {
    let _serial = serial();
    let up = Upstream::pong();
    let p = up.port().to_string();
    let c = capsule("unlisted-name", &[format!("localhost:{p}")]);
    for class in classes(&c) {
        let r = c.probe(class, &["tcp-name", "murmur-unlisted.test", &p], &[]);
        assert_eq!(r.verdict(), "contained", "{class}: {}: {}", r.line(), r.stderr);
        let r = c.probe(class, &["dns-query", "murmur-unlisted.test"], &[]);
        assert_eq!(
            r.line(),
            "dns-query recv 0 contained rcode=5 answers=0",
            "{class}: {}",
            r.stderr
        );
        assert!(r.refused("murmur-unlisted.test"), "{class}: {}", r.stderr);
    }
    assert_eq!(up.connections(), 0);
}

#[test]
fn an_allowed_name_is_resolved_on_the_host_and_an_unlisted_one_never_leaves() {
    let _serial = serial();
    let up = Upstream::pong();
    let p = up.port().to_string();
    let dns = FakeDns::start(&[("allowed.test", Ipv4Addr::LOCALHOST)]);
    let resolver = dns.addr();
    let env = [("MURMUR_EGRESS_RESOLVER", resolver.as_str())];
    let c = capsule("resolver", &[format!("allowed.test:{p}")]);
    let ran = classes(&c);
    for &class in &ran {
        let r = c.probe(class, &["tcp-name", "allowed.test", &p], &env);
        assert_eq!(
            r.line(),
            "tcp-name connect 0 allowed pong:5",
            "{class}: {}",
            r.stderr
        );
        let r = c.probe(class, &["dns-query", "allowed.test"], &env);
        assert_eq!(
            r.line(),
            "dns-query recv 0 allowed rcode=0 answers=1",
            "{class}: {}",
            r.stderr
        );
        let r = c.probe(class, &["dns-query", "secret-0123456789.exfil.test"], &env);
        assert_eq!(
            r.line(),
            "dns-query recv 0 contained rcode=5 answers=0",
            "{class}: {}",
            r.stderr
        );
        assert!(r.refused("secret-0123456789.exfil.test"), "{class}: {}", r.stderr);
    }
    let names = dns.names();
    println!("the host-side resolver was asked: {names:?}");
    if !ran.is_empty() {
        assert!(names.iter().any(|n| n == "allowed.test"), "{names:?}");
    }
    assert!(names.iter().all(|n| n == "allowed.test"), "{names:?}");
    assert!(
        !dns.saw("exfil"),
        "the unlisted name reached the resolver: {names:?}"
    );
}

#[test]
fn a_name_answered_with_a_metadata_address_is_not_resolved_and_nothing_goes_out() {
    let _serial = serial();
    let dns = FakeDns::start(&[
        ("meta.test", Ipv4Addr::new(169, 254, 169, 254)),
        ("zero.test", Ipv4Addr::UNSPECIFIED),
    ]);
    let resolver = dns.addr();
    let env = [("MURMUR_EGRESS_RESOLVER", resolver.as_str())];
    let c = capsule(
        "metadata",
        &["meta.test:80".to_string(), "zero.test:80".to_string()],
    );
    for class in classes(&c) {
        // Asked of the host, but the answer is dropped: link-local (cloud metadata) and
        // "this network" addresses never stand for a name.
        for name in ["meta.test", "zero.test"] {
            let r = c.probe(class, &["dns-query", name], &env);
            assert_eq!(
                r.line(),
                "dns-query recv 0 contained rcode=3 answers=0",
                "{class} {name}: {}",
                r.stderr
            );
        }
        // Nor does the launch-time resolution open the address.
        let r = c.probe(class, &["tcp-ip", "169.254.169.254", "80"], &env);
        assert_eq!(r.verdict(), "contained", "{class}: {}: {}", r.line(), r.stderr);
        assert!(r.refused("169.254.169.254:80"), "{class}: {}", r.stderr);
    }
}

/// The first address of this host's own interfaces other than loopback (from the kernel's
/// table of local addresses), if it has one.
fn a_host_address() -> Option<Ipv4Addr> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").ok()?;
    let mut last = None;
    for line in trie.lines().map(str::trim) {
        if let Some(a) = line.strip_prefix("|-- ") {
            last = a.parse::<Ipv4Addr>().ok();
        } else if line.starts_with("/32 host LOCAL") {
            if let Some(a) = last.take().filter(|a| !a.is_loopback()) {
                return Some(a);
            }
        }
    }
    None
}

#[test]
fn a_name_answered_with_the_hosts_own_or_a_shared_address_is_not_resolved() {
    let _serial = serial();
    let mut answers = vec![
        ("cgnat.test", Ipv4Addr::new(100, 100, 100, 200)),
        ("ietf.test", Ipv4Addr::new(192, 0, 0, 8)),
    ];
    let host = a_host_address();
    if let Some(a) = host {
        answers.push(("self.test", a));
    }
    let dns = FakeDns::start(&answers);
    let resolver = dns.addr();
    let env = [("MURMUR_EGRESS_RESOLVER", resolver.as_str())];
    let rules: Vec<String> = answers.iter().map(|(n, _)| format!("{n}:80")).collect();
    let c = capsule("host-address", &rules);
    for class in classes(&c) {
        // Asked of the host, but the answer is dropped: the host's own interfaces, the
        // shared address space (100.64.0.0/10) and the protocol block (192.0.0.0/24) never
        // stand for a name.
        for (name, addr) in &answers {
            let r = c.probe(class, &["dns-query", name], &env);
            assert_eq!(
                r.line(),
                "dns-query recv 0 contained rcode=3 answers=0",
                "{class} {name}: {}",
                r.stderr
            );
            let a = addr.to_string();
            let r = c.probe(class, &["tcp-ip", &a, "80"], &env);
            assert_eq!(
                r.verdict(),
                "contained",
                "{class} {a}: {}: {}",
                r.line(),
                r.stderr
            );
            assert!(r.refused(&format!("{a}:80")), "{class} {a}: {}", r.stderr);
        }
    }
}
