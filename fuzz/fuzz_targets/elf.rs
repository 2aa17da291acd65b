//! The ELF reader on arbitrary bytes (binaries named by `shell.allow` are files anyone with
//! write access to their directory controls). Invariants: parsing never panics, and what it
//! returns is bounded (names without NUL bytes, no more entries than the input could hold).
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::containment::elf::parse;

fuzz_target!(|data: &[u8]| {
    if let Some(needs) = parse(data) {
        let names = needs
            .needed
            .iter()
            .chain(&needs.runpath)
            .chain(needs.interp.iter());
        for n in names {
            assert!(!n.contains('\0'));
            assert!(n.len() < data.len());
        }
        assert!(needs.needed.len() <= data.len() / 16 + 1);
    }
});
