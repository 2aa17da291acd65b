//! The spend ledger's parser on arbitrary bytes. Invariants: it never panics; an accepted
//! ledger renders to bytes that parse back to the same ledger, and a charge and a prune of
//! it still render to a ledger that parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::spend::ledger::Ledger;

/// 2026-12-07T02:00:00Z.
const NOW: u64 = 1_796_608_800_000;

fuzz_target!(|data: &[u8]| {
    let Ok(mut ledger) = Ledger::parse(data) else {
        return;
    };
    let again = Ledger::parse(ledger.render().as_bytes()).expect("a rendered ledger parses");
    assert_eq!(again, ledger);
    ledger.charge(u64::MAX, &["ses_0123456789abcdef0123456789abcdef"], NOW);
    ledger.prune(NOW);
    Ledger::parse(ledger.render().as_bytes()).expect("a charged ledger parses");
});
