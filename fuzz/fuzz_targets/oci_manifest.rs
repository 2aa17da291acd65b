//! The OCI manifest judge on arbitrary bytes (what a registry answers `GET
//! /v2/<repo>/manifests/<ref>` with). Invariants: it never panics; an accepted manifest has
//! sha256 digests, sizes within the bound given, and builds back to a manifest it accepts
//! with the same blobs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::registry::oci::manifest::{build, parse, MAX_CONFIG_BYTES};
use murmur::registry::oci::reference::digest_ok;

const BOUND: u64 = 512 << 20;

fuzz_target!(|data: &[u8]| {
    let Ok(m) = parse(data, BOUND) else {
        return;
    };
    assert!(digest_ok(&m.config.digest) && digest_ok(&m.layer.digest));
    assert!(m.config.size <= MAX_CONFIG_BYTES && m.layer.size <= BOUND);
    let again = parse(build(&m.config, &m.layer, "t").as_bytes(), BOUND).expect("a built manifest parses");
    assert_eq!(again, m);
});
