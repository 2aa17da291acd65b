//! The ELF reader on arbitrary bytes (binaries named by `shell.allow` are files anyone with
//! write access to their directory controls). Invariants: parsing never panics, and what it
//! returns is bounded (names without NUL bytes, no more entries than the input could hold),
//! and the same bytes read in pieces (`parse_by_reads`, as a file on disk is) give the same
//! answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::containment::elf::{parse, parse_by_reads};

fuzz_target!(|data: &[u8]| {
    let whole = parse(data);
    let by_reads = parse_by_reads(&mut |buf, off| {
        let start = usize::try_from(off).unwrap_or(usize::MAX).min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    });
    assert_eq!(whole, by_reads);
    if let Some(needs) = whole {
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
