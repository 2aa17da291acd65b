//! The HTTP request reader on arbitrary bytes fed in arbitrary chunk sizes. Invariants: it
//! never panics, stays within its limits, ignores input after its verdict, and a complete
//! request parses the same whether it arrives whole or in pieces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::http::request::{Progress, Reader};
use murmur::http::Limits;

fn limits() -> Limits {
    // Small limits so the fuzzer reaches every refusal path quickly.
    Limits {
        max_head: 512,
        max_headers: 8,
        max_body: 1024,
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
    let limits = limits();

    let mut pos = 0;
    let mut i = 0;
    let mut pieces = Vec::new();
    while pos < input.len() {
        let size = (usize::from(sizes[i % 4]) % 37 + 1).min(input.len() - pos);
        pieces.push(&input[pos..pos + size]);
        pos += size;
        i += 1;
    }
    let chunked = verdict(&mut Reader::new(&limits), &mut pieces.into_iter());
    let whole = verdict(&mut Reader::new(&limits), &mut std::iter::once(input));

    if let Some(Progress::Done(req)) = &chunked {
        assert!(req.body.len() <= limits.max_body);
        let declared = req
            .header("content-length")
            .map_or(0, |v| v.parse::<usize>().unwrap());
        assert_eq!(req.body.len(), declared);
        assert!(req.target.starts_with('/'));
        assert!(req.headers.iter().all(|(n, _)| *n == n.to_ascii_lowercase()));
    }
    match (&chunked, &whole) {
        (Some(Progress::Done(a)), Some(Progress::Done(b))) => assert_eq!(a, b),
        (Some(Progress::Done(_)), other) | (other, Some(Progress::Done(_))) => {
            panic!("chunking changed the verdict: {chunked:?} vs {whole:?} ({other:?})")
        }
        _ => {}
    }
});
