//! The egress relay's DNS codec on arbitrary packets (a contained child's query is hostile, and
//! so may be what comes back from upstream). Invariants: nothing panics; a query `parse_query`
//! accepts gets a REFUSED answer and an A answer of at most `MAX_PACKET` bytes that keep its id
//! and echo its question; for an A/IN question `parse_answer` reads the A answer back to the
//! addresses that fit, in order, with their ttl; the name rebuilds through `build_query`; and
//! the raw bytes read as an upstream answer never panic `parse_answer`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::containment::egress::dns::{
    answer_a, answer_empty, build_query, parse_answer, parse_query, CLASS_IN, MAX_PACKET, NOERROR, REFUSED,
    TYPE_A,
};
use std::net::Ipv4Addr;

fuzz_target!(|data: &[u8]| {
    let byte = |at: usize| data.get(at).copied().unwrap_or(0);
    let id = u16::from_be_bytes([byte(0), byte(1)]);
    let _ = parse_answer(data, id, "example.com");
    let Ok(q) = parse_query(data) else {
        return;
    };
    assert!(q.name.len() <= 253 && !q.name.bytes().any(|b| b.is_ascii_uppercase()));

    let refused = answer_empty(&q, REFUSED);
    assert!(refused.len() <= MAX_PACKET);
    assert_eq!(&refused[..2], &data[..2]);
    assert_eq!(refused[3] & 0x0F, REFUSED);
    let question = &refused[12..];
    assert_eq!(data.get(12..12 + question.len()), Some(question));

    let count = usize::from(byte(2) % 40);
    let addrs: Vec<Ipv4Addr> = (0..count)
        .map(|i| Ipv4Addr::new(10, byte(3), byte(4), i as u8))
        .collect();
    let ttl = u32::from(id) << 8;
    let answer = answer_a(&q, &addrs, ttl);
    assert!(answer.len() <= MAX_PACKET);
    assert_eq!(&answer[..2], &data[..2]);
    let fit = count.min((MAX_PACKET - refused.len()) / 16);
    let want: Vec<(Ipv4Addr, u32)> = addrs.iter().take(fit).map(|&a| (a, ttl)).collect();
    if (q.qtype, q.qclass) == (TYPE_A, CLASS_IN) {
        assert_eq!(parse_answer(&answer, q.id, &q.name), Ok((NOERROR, want)));
        assert_eq!(parse_answer(&refused, q.id, &q.name), Ok((REFUSED, Vec::new())));
    } else {
        assert!(parse_answer(&answer, q.id, &q.name).is_err());
    }

    let upstream = build_query(q.id, &q.name, q.qtype).expect("a parsed name rebuilds");
    let again = parse_query(&upstream).expect("a built query parses");
    assert_eq!(
        (again.id, again.name.as_str(), again.qtype, again.qclass),
        (q.id, q.name.as_str(), q.qtype, CLASS_IN)
    );
});
