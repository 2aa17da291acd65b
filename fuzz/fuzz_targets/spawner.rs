//! `MURMUR_SPAWNER` on arbitrary text. Invariants: parsing never panics; a value it accepts
//! names a loopback URL and well-formed ids, and renders back to text that parses to the
//! same handle.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::spawner::Spawner;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(Some(s)) = Spawner::from_env(Some(text)) else {
        return;
    };
    assert!(s.url.starts_with("http://127.0.0.1:") || s.url.starts_with("http://localhost:"));
    assert!(s.session_id.starts_with("ses_") && s.delegation_id.starts_with("dlg_"));
    assert_eq!(Spawner::from_env(Some(&s.to_env())).unwrap(), Some(s));
});
