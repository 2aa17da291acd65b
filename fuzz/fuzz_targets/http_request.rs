//! The HTTP request reader on arbitrary bytes fed in arbitrary chunk sizes. Invariants: it
//! never panics, stays within its limits, ignores input after its verdict, and a complete
//! request parses the same whether it arrives whole or in pieces. With the loopback guard on
//! (the first size byte's low bit), an accepted request names `127.0.0.1:7700` or
//! `localhost:7700` in its one `host` and carries no `origin`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::http::request::{Progress, Reader};
use murmur::http::Limits;

const PORT: u16 = 7700;

fn limits(loopback_only: bool) -> Limits {
    // Small limits so the fuzzer reaches every refusal path quickly.
    Limits {
        max_head: 512,
        max_headers: 8,
        max_body: 1024,
        loopback_only,
        ..Limits::default()
    }
}

fn verdict(reader: &mut Reader, chunks: &mut dyn Iterator<Item = &[u8]>) -> Option<Progress> {
    for chunk in chunks {
        match reader.feed(chunk) {
            Progress::NeedMore | Progress::SendContinue => {}
            done => {
                assert_eq!(reader.feed(b"GET / HTTP/1.1\r\n\r\n"), Progress::NeedMore);
                return Some(done);
            }
        }
    }
    None
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 4 {
        return;
    }
    let (sizes, input) = data.split_at(4);
    let limits = limits(sizes[0] & 1 == 1);

    let mut pos = 0;
    let mut i = 0;
    let mut pieces = Vec::new();
    while pos < input.len() {
        let size = (usize::from(sizes[i % 4]) % 37 + 1).min(input.len() - pos);
        pieces.push(&input[pos..pos + size]);
        pos += size;
        i += 1;
    }
    let chunked = verdict(&mut Reader::new(&limits, PORT), &mut pieces.into_iter());
    let whole = verdict(&mut Reader::new(&limits, PORT), &mut std::iter::once(input));

    if let Some(Progress::Done(req)) = &chunked {
        assert!(req.body.len() <= limits.max_body);
        let declared = req
            .header("content-length")
            .map_or(0, |v| v.parse::<usize>().unwrap());
        assert_eq!(req.body.len(), declared);
        assert!(req.target.starts_with('/'));
        assert!(req.headers.iter().all(|(n, _)| *n == n.to_ascii_lowercase()));
        if limits.loopback_only {
            let hosts: Vec<_> = req.headers.iter().filter(|(n, _)| n == "host").collect();
            assert_eq!(hosts.len(), 1);
            assert!(murmur::http::guard::names_this_server(&hosts[0].1, PORT));
            assert!(req.headers.iter().all(|(n, _)| n != "origin"));
        }
    }
    match (&chunked, &whole) {
        (Some(Progress::Done(a)), Some(Progress::Done(b))) => assert_eq!(a, b),
        (Some(Progress::Done(_)), other) | (other, Some(Progress::Done(_))) => {
            panic!("chunking changed the verdict: {chunked:?} vs {whole:?} ({other:?})")
        }
        _ => {}
    }
});
