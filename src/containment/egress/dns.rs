//! A minimal DNS codec for the egress relay: parses a contained child's (untrusted) query, builds
//! A-record, empty and REFUSED answers that echo its question, and builds and parses the upstream
//! query and answer used to resolve an allowed name. Every read is bounds-checked; no input panics.

use std::fmt;
use std::net::Ipv4Addr;

/// Largest query accepted and largest answer built (classic UDP DNS).
pub const MAX_PACKET: usize = 512;
pub const TYPE_A: u16 = 1;
pub const TYPE_AAAA: u16 = 28;
pub const CLASS_IN: u16 = 1;
pub const NOERROR: u8 = 0;
pub const FORMERR: u8 = 1;
pub const SERVFAIL: u8 = 2;
pub const NXDOMAIN: u8 = 3;
pub const NOTIMP: u8 = 4;
pub const REFUSED: u8 = 5;

/// Largest upstream answer accepted.
const MAX_UPSTREAM: usize = 4096;
const HEADER: usize = 12;
const MAX_NAME_TEXT: usize = 253;
/// Largest name in wire form (length bytes, labels, root byte).
const MAX_NAME_WIRE: usize = 255;
const MAX_JUMPS: usize = 16;
/// One answer record: pointer to offset 12, type, class, ttl, rdlength, IPv4 address.
const A_RECORD: usize = 16;

const QR: u16 = 0x8000;
const TC: u16 = 0x0200;
const RD: u16 = 0x0100;
const RA: u16 = 0x0080;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub id: u16,
    pub recursion_desired: bool,
    /// Lowercased ASCII, labels joined by '.', no trailing dot ("" for the root).
    pub name: String,
    pub qtype: u16,
    pub qclass: u16,
    /// The question section (QNAME, QTYPE, QCLASS) as received, echoed in answers.
    question: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

impl fmt::Display for Malformed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("malformed DNS packet")
    }
}

impl std::error::Error for Malformed {}

/// The `N` bytes at `at`, or Malformed past the end.
fn take<const N: usize>(p: &[u8], at: usize) -> Result<[u8; N], Malformed> {
    let end = at.checked_add(N).ok_or(Malformed)?;
    p.get(at..end).and_then(|s| s.try_into().ok()).ok_or(Malformed)
}

fn u8_at(p: &[u8], at: usize) -> Result<u8, Malformed> {
    p.get(at).copied().ok_or(Malformed)
}

fn u16_at(p: &[u8], at: usize) -> Result<u16, Malformed> {
    take(p, at).map(u16::from_be_bytes)
}

fn label_byte_ok(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// Encodes `name` (labels joined by '.', no trailing dot, "" for the root) in wire form,
/// lowercased, under the same rules `parse_query` applies to a QNAME.
fn encode_name(name: &str) -> Result<Vec<u8>, Malformed> {
    if name.len() > MAX_NAME_TEXT {
        return Err(Malformed);
    }
    let mut out = Vec::with_capacity(name.len().saturating_add(2));
    if !name.is_empty() {
        for label in name.split('.') {
            let len = u8::try_from(label.len()).map_err(|_| Malformed)?;
            if len == 0 || len > 63 || !label.bytes().all(label_byte_ok) {
                return Err(Malformed);
            }
            out.push(len);
            out.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
        }
    }
    out.push(0);
    Ok(out)
}

/// Parse a query. Err(Malformed) for: shorter than 12, longer than `MAX_PACKET`, QR bit set,
/// opcode != 0, qdcount != 1, ancount != 0, nscount != 0, arcount > 1 (one EDNS OPT record is
/// tolerated and ignored), a compression pointer or reserved label type in QNAME, an empty label
/// before the end, a label longer than 63, a name longer than 253 characters in text form, a
/// label byte outside [A-Za-z0-9-_], a truncated question. Bytes after the question are ignored.
pub fn parse_query(packet: &[u8]) -> Result<Query, Malformed> {
    if packet.len() < HEADER || packet.len() > MAX_PACKET {
        return Err(Malformed);
    }
    let id = u16_at(packet, 0)?;
    let flags = u16_at(packet, 2)?;
    let counts = (u16_at(packet, 4)?, u16_at(packet, 6)?, u16_at(packet, 8)?);
    let arcount = u16_at(packet, 10)?;
    if flags & QR != 0 || (flags >> 11) & 0xF != 0 || counts != (1, 0, 0) || arcount > 1 {
        return Err(Malformed);
    }
    let mut name = String::new();
    let mut pos = HEADER;
    loop {
        let len = u8_at(packet, pos)?;
        pos = pos.saturating_add(1);
        if len == 0 {
            break;
        }
        // Top bits 11 (pointer), 01 and 10 (reserved) are all refused; this also caps a label at 63.
        if len & 0xC0 != 0 {
            return Err(Malformed);
        }
        let end = pos.saturating_add(usize::from(len));
        let label = packet.get(pos..end).ok_or(Malformed)?;
        if !label.iter().copied().all(label_byte_ok) {
            return Err(Malformed);
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.extend(label.iter().map(|&b| char::from(b.to_ascii_lowercase())));
        if name.len() > MAX_NAME_TEXT {
            return Err(Malformed);
        }
        pos = end;
    }
    let qtype = u16_at(packet, pos)?;
    let qclass = u16_at(packet, pos.saturating_add(2))?;
    let end = pos.saturating_add(4);
    let question = packet.get(HEADER..end).ok_or(Malformed)?.to_vec();
    let recursion_desired = flags & RD != 0;
    Ok(Query {
        id,
        recursion_desired,
        name,
        qtype,
        qclass,
        question,
    })
}

/// A header from its six fields: id, flags, qdcount, ancount, nscount, arcount.
fn header(fields: [u16; 6]) -> Vec<u8> {
    fields.iter().flat_map(|f| f.to_be_bytes()).collect()
}

fn answer_header(q: &Query, rcode: u8, ancount: u16) -> Vec<u8> {
    let rd = if q.recursion_desired { RD } else { 0 };
    let flags = QR | rd | RA | u16::from(rcode & 0x0F);
    let mut out = header([q.id, flags, 1, ancount, 0, 0]);
    out.extend_from_slice(&q.question);
    out
}

/// A NOERROR answer carrying one A record per address (name as a compression pointer to offset
/// 12, class IN, `ttl`), at most as many as fit in `MAX_PACKET`. RD is copied from the query, RA set.
pub fn answer_a(q: &Query, addrs: &[Ipv4Addr], ttl: u32) -> Vec<u8> {
    let used = HEADER.saturating_add(q.question.len());
    let room = MAX_PACKET.saturating_sub(used) / A_RECORD;
    let ancount = u16::try_from(addrs.len().min(room)).unwrap_or(0);
    let mut out = answer_header(q, NOERROR, ancount);
    for addr in addrs.iter().take(usize::from(ancount)) {
        // Owner: a pointer to the question's name; type A, class IN, ttl, rdlength 4, address.
        out.extend_from_slice(&[0xC0, 0x0C, 0, 1, 0, 1]);
        out.extend_from_slice(&ttl.to_be_bytes());
        out.extend_from_slice(&[0, 4]);
        out.extend_from_slice(&addr.octets());
    }
    out
}

/// An answer with no records and `rcode` (NOERROR for an AAAA question, REFUSED, SERVFAIL,
/// NXDOMAIN, NOTIMP), same header rules as `answer_a`, question echoed.
pub fn answer_empty(q: &Query, rcode: u8) -> Vec<u8> {
    answer_header(q, rcode, 0)
}

/// An upstream query: header with `id`, RD=1, qdcount=1, the name encoded as labels, `qtype`,
/// class IN. Err(Malformed) when `name` would not pass `parse_query`'s name rules.
pub fn build_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, Malformed> {
    let qname = encode_name(name)?;
    let mut out = header([id, RD, 1, 0, 0, 0]);
    out.extend_from_slice(&qname);
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(out)
}

/// Walks a name at `pos`, following at most `MAX_JUMPS` compression pointers. Returns the offset
/// just past the name where it started; when `wire` is given, the name's labels (uncompressed wire
/// form, root byte included) are appended to it.
fn walk_name(p: &[u8], mut pos: usize, mut wire: Option<&mut Vec<u8>>) -> Result<usize, Malformed> {
    let mut after = None;
    let mut jumps = 0usize;
    let mut size = 0usize;
    loop {
        let len = u8_at(p, pos)?;
        match len & 0xC0 {
            0xC0 => {
                let target = usize::from(u16_at(p, pos)? & 0x3FFF);
                jumps = jumps.saturating_add(1);
                if jumps > MAX_JUMPS {
                    return Err(Malformed);
                }
                after.get_or_insert(pos.saturating_add(2));
                pos = target;
            }
            0x00 => {
                let end = pos.saturating_add(1).saturating_add(usize::from(len));
                let bytes = p.get(pos..end).ok_or(Malformed)?;
                size = size.saturating_add(bytes.len());
                if size > MAX_NAME_WIRE {
                    return Err(Malformed);
                }
                if let Some(w) = wire.as_deref_mut() {
                    w.extend_from_slice(bytes);
                }
                if len == 0 {
                    return Ok(after.unwrap_or(end));
                }
                pos = end;
            }
            _ => return Err(Malformed),
        }
    }
}

/// Parse an upstream answer to `build_query(id, name, TYPE_A)`: length <= 4096, QR=1, TC=0,
/// opcode 0, the id, qdcount == 1, the question is `name` (case-insensitively) type A class IN.
/// Collects the answer section's A/IN records as (address, ttl), skipping other types by
/// rdlength. Returns (rcode, records); Err(Malformed) on any inconsistency or truncation.
pub fn parse_answer(packet: &[u8], id: u16, name: &str) -> Result<(u8, Vec<(Ipv4Addr, u32)>), Malformed> {
    let expected = encode_name(name)?;
    if packet.len() > MAX_UPSTREAM || packet.len() < HEADER {
        return Err(Malformed);
    }
    let flags = u16_at(packet, 2)?;
    let (got_id, qdcount) = (u16_at(packet, 0)?, u16_at(packet, 4)?);
    if got_id != id || qdcount != 1 || flags & QR == 0 || flags & TC != 0 || (flags >> 11) & 0xF != 0 {
        return Err(Malformed);
    }
    let ancount = u16_at(packet, 6)?;
    let mut qname = Vec::new();
    let mut pos = walk_name(packet, HEADER, Some(&mut qname))?;
    // Length bytes are < 64, so ASCII case folding only touches label text.
    if !qname.eq_ignore_ascii_case(&expected)
        || u16_at(packet, pos)? != TYPE_A
        || u16_at(packet, pos.saturating_add(2))? != CLASS_IN
    {
        return Err(Malformed);
    }
    pos = pos.saturating_add(4);
    let mut records = Vec::new();
    for _ in 0..ancount {
        pos = walk_name(packet, pos, None)?;
        let rtype = u16_at(packet, pos)?;
        let rclass = u16_at(packet, pos.saturating_add(2))?;
        let ttl = take(packet, pos.saturating_add(4)).map(u32::from_be_bytes)?;
        let rdlen = usize::from(u16_at(packet, pos.saturating_add(8))?);
        let start = pos.saturating_add(10);
        let end = start.saturating_add(rdlen);
        let rdata = packet.get(start..end).ok_or(Malformed)?;
        if rtype == TYPE_A && rclass == CLASS_IN {
            let octets: [u8; 4] = rdata.try_into().map_err(|_| Malformed)?;
            records.push((Ipv4Addr::from(octets), ttl));
        }
        pos = end;
    }
    Ok((u8::try_from(flags & 0x0F).unwrap_or(SERVFAIL), records))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `example.com` A, RD set, AD set, with an EDNS OPT record (udp 1232), as dig sends it.
    const REAL: &[u8] = &[
        0x4a, 0x2f, 0x01, 0x20, 0, 1, 0, 0, 0, 0, 0, 1, // header
        7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 3, b'c', b'o', b'm', 0, 0, 1, 0, 1, // question
        0, 0, 0x29, 0x04, 0xd0, 0, 0, 0, 0, 0, 0, // OPT
    ];

    fn query(name: &[u8]) -> Vec<u8> {
        let mut p = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        p.extend_from_slice(name);
        p.extend_from_slice(&[0, 1, 0, 1]);
        p
    }

    #[test]
    fn real_query_parses() {
        let q = parse_query(REAL).unwrap();
        let want = (0x4a2f, true, "example.com", TYPE_A, CLASS_IN);
        assert_eq!(
            (q.id, q.recursion_desired, q.name.as_str(), q.qtype, q.qclass),
            want
        );
        assert_eq!(q.question, &REAL[12..29]);
        assert_eq!(parse_query(&query(&[0])).unwrap().name, "");
    }

    #[test]
    fn uppercase_is_lowercased_and_echoed_verbatim() {
        let p = query(b"\x03WwW\x07Example\x03CoM\x00");
        let q = parse_query(&p).unwrap();
        assert_eq!(
            (q.id, q.recursion_desired, q.name.as_str()),
            (0x1234, true, "www.example.com")
        );
        assert_eq!(&answer_empty(&q, NOERROR)[12..], &p[12..]);
    }

    #[test]
    fn malformed_rules() {
        let label64 = [&[64u8][..], &[b'a'; 64], &[0]].concat();
        // 127 one-letter labels make 253 characters; making the last one "ab" makes 254.
        let name253 = [[1u8, b'a'].repeat(127), vec![0]].concat();
        let name254 = [[1u8, b'a'].repeat(126), b"\x02ab\x00".to_vec()].concat();
        assert_eq!(parse_query(&query(&name253)).unwrap().name.len(), 253);
        assert!(parse_query(&query(&[&[63u8][..], &[b'a'; 63], &[0]].concat())).is_ok());
        let cases: Vec<Vec<u8>> = vec![
            query(b"\x07example\xc0\x0c"),                   // pointer
            query(b"\x07example\x43com\x00"),                // reserved label type 01
            query(&label64),                                 // 64-byte label
            query(&name254),                                 // 254-char name
            query(b"\x07exa mple\x03com\x00"),               // space
            query(b"\x07exa\x00ple\x03com\x00"),             // NUL
            query(b"\x07example\x03c.m\x00"),                // dot inside a label
            query(b"\x07example\x03com\x00")[..27].to_vec(), // truncated type/class
            REAL[..20].to_vec(),                             // truncated name
            REAL[..11].to_vec(),                             // short header
        ];
        for (i, p) in cases.iter().enumerate() {
            assert_eq!(parse_query(p), Err(Malformed), "case {i}");
        }
        let header_cases: [(usize, u8); 6] = [(2, 0x81), (2, 0x09), (5, 2), (7, 1), (9, 1), (11, 2)];
        for (at, v) in header_cases {
            let mut p = REAL.to_vec();
            p[at] = v;
            assert_eq!(parse_query(&p), Err(Malformed), "header byte {at} = {v:#x}");
        }
        let mut big = REAL.to_vec();
        big.resize(MAX_PACKET + 1, 0);
        assert_eq!(parse_query(&big), Err(Malformed));
        big.truncate(MAX_PACKET);
        assert!(parse_query(&big).is_ok());
    }

    #[test]
    fn answer_a_round_trips() {
        let q = parse_query(REAL).unwrap();
        let addrs = [Ipv4Addr::new(93, 184, 216, 34), Ipv4Addr::new(10, 0, 0, 1)];
        let a = answer_a(&q, &addrs, 300);
        assert_eq!(&a[2..4], &[0x81, 0x80]);
        let (rcode, recs) = parse_answer(&a, q.id, &q.name).unwrap();
        assert_eq!(rcode, NOERROR);
        assert_eq!(recs, vec![(addrs[0], 300), (addrs[1], 300)]);
        assert_eq!(parse_answer(&a, q.id ^ 1, &q.name), Err(Malformed));
        assert_eq!(parse_answer(&a, q.id, "example.org"), Err(Malformed));
        assert_eq!(parse_answer(&a, q.id, "EXAMPLE.com").map(|r| r.1.len()), Ok(2));
        assert_eq!(parse_answer(&a[..a.len() - 1], q.id, &q.name), Err(Malformed));
        let mut tc = a.clone();
        tc[2] |= 0x02;
        assert_eq!(parse_answer(&tc, q.id, &q.name), Err(Malformed));
    }

    #[test]
    fn answer_empty_refused() {
        let q = parse_query(REAL).unwrap();
        let a = answer_empty(&q, REFUSED);
        assert_eq!(&a[..2], &REAL[..2]);
        assert_eq!(a[3] & 0x0F, 5);
        assert_eq!(&a[4..12], &[0, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&a[12..], &REAL[12..29]);
        assert_eq!(parse_answer(&a, q.id, "example.com"), Ok((REFUSED, vec![])));
    }

    #[test]
    fn build_query_parses() {
        let q = parse_query(&build_query(7, "Api.Ex_ample-1.com", TYPE_AAAA).unwrap()).unwrap();
        let want = (7, true, "api.ex_ample-1.com", TYPE_AAAA, CLASS_IN);
        assert_eq!(
            (q.id, q.recursion_desired, q.name.as_str(), q.qtype, q.qclass),
            want
        );
        assert_eq!(
            parse_query(&build_query(1, "", TYPE_A).unwrap()).unwrap().name,
            ""
        );
        let (label64, name254) = ("a".repeat(64), ["a"; 127].join(".") + "b");
        let listed = "a..b|example.com.|.x|a b|a\0|a\u{e9}".split('|');
        for bad in listed.chain([label64.as_str(), name254.as_str()]) {
            assert_eq!(build_query(1, bad, TYPE_A), Err(Malformed), "{bad}");
        }
        assert!(build_query(1, &["a"; 127].join("."), TYPE_A).is_ok());
    }

    #[test]
    fn parse_answer_follows_pointers_and_refuses_loops() {
        let mut p = build_query(9, "www.example.com", TYPE_A).unwrap();
        p[2] = 0x81;
        p[3] = 0x80;
        p[7] = 2;
        // CNAME www.example.com -> example.com (rdata a pointer to offset 16), then A for it.
        p.extend_from_slice(&[0xC0, 12, 0, 5, 0, 1, 0, 0, 0, 60, 0, 2, 0xC0, 16]);
        p.extend_from_slice(&[0xC0, 45, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 1, 2, 3, 4]);
        let got = parse_answer(&p, 9, "www.example.com").unwrap();
        assert_eq!(got, (NOERROR, vec![(Ipv4Addr::new(1, 2, 3, 4), 30)]));
        // The second owner points at itself.
        let mut looped = p.clone();
        looped[48] = 47;
        assert_eq!(parse_answer(&looped, 9, "www.example.com"), Err(Malformed));
        // A pointer past the end.
        looped[48] = 0xFF;
        assert_eq!(parse_answer(&looped, 9, "www.example.com"), Err(Malformed));
        // An A record whose rdlength is not 4.
        let mut bad = p.clone();
        bad[58] = 3;
        bad.pop();
        assert_eq!(parse_answer(&bad, 9, "www.example.com"), Err(Malformed));
    }

    #[test]
    fn many_addresses_fit_in_512() {
        let q = parse_query(REAL).unwrap();
        let addrs: Vec<Ipv4Addr> = (0..100u8).map(|i| Ipv4Addr::new(10, 0, 0, i)).collect();
        let a = answer_a(&q, &addrs, 60);
        assert!(a.len() <= MAX_PACKET);
        let n = (MAX_PACKET - 12 - 17) / 16;
        assert_eq!(u16::from_be_bytes([a[6], a[7]]) as usize, n);
        let (_, recs) = parse_answer(&a, q.id, "example.com").unwrap();
        assert_eq!(recs.len(), n);
        assert_eq!(recs[n - 1].0, addrs[n - 1]);
    }
}
