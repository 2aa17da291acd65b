//! The `murmur.lock` parser on arbitrary text. Invariants: it never panics; an accepted
//! lock renders to text that parses back to the same lock, and every pin checks against
//! itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::manifest::lock::Lock;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(lock) = Lock::parse(text) else {
        return;
    };
    let again = Lock::parse(&lock.render()).expect("a rendered lock parses");
    assert_eq!(again, lock);
    for p in lock.pins() {
        assert_eq!(lock.check(&p.name, &p.version, &p.sha256), Ok(()));
    }
});
