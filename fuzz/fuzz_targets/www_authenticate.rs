//! A registry's `WWW-Authenticate` header and an OCI reference on arbitrary text.
//! Invariants: neither parser panics; a Bearer challenge always has a realm; an accepted
//! reference writes back to text that parses to the same reference.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::registry::oci::challenge::{parse, Challenge};
use murmur::registry::oci::Reference;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(Challenge::Bearer { realm, .. }) = parse(text) {
        let _ = realm.len();
    }
    if let Ok(r) = Reference::parse(text) {
        assert_eq!(Reference::parse(&r.to_text()).as_ref(), Ok(&r));
    }
});
