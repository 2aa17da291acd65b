//! The manifest parser on arbitrary text. Invariants: it never panics; an accepted
//! manifest's envelope contains itself; every network rule prints to a form that parses
//! back to the same rule.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::manifest::{contains, parse, Envelope, NetRule, Resolve};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lookup = |name: &str| (name.len() % 2 == 0).then(|| format!("value-of-{name}"));
    let Ok(loaded) = parse(text, Resolve::All(&lookup)) else {
        return;
    };
    let m = &loaded.manifest;
    let env = Envelope::of(m);
    assert_eq!(contains(&env, &env), Ok(()));
    let rules = m
        .capabilities
        .network_allow
        .iter()
        .chain(m.capabilities.peer_fetch_allow.iter().flatten());
    for rule in rules {
        assert_eq!(&NetRule::parse(&rule.to_string()).unwrap(), rule);
    }
    // The daemon's loader accepts whatever the runtime's accepts.
    assert!(parse(text, Resolve::AllButApiKey(&lookup)).is_ok());
});
