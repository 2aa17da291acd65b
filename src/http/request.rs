//! Incremental, strict HTTP/1.x request reader: bytes in, one [`Request`] or one refusal out.
//!
//! It never touches a socket, so the server and the fuzz target drive the same code. Memory
//! is bounded by the limits: at most `max_head + max_body` bytes are kept, whatever arrives.
//! With `Limits::loopback_only` the head also passes the [`super::guard`] before any body
//! byte is taken.

use super::{guard, Limits};

/// One parsed request. Header names are lowercase; values are kept as raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method token, as sent (`GET`, `POST`, ...).
    pub method: String,
    /// The request target as sent: an origin-form path with an optional query.
    pub target: String,
    /// Minor HTTP version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub version: u8,
    /// Header fields in arrival order, names lowercased.
    pub headers: Vec<(String, Vec<u8>)>,
    /// Exactly `content-length` bytes (empty when there is none).
    pub body: Vec<u8>,
}

impl Request {
    /// A request built in memory (tests, fuzzing, and callers that route without a socket).
    pub fn new(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Request {
        Request {
            method: method.to_string(),
            target: target.to_string(),
            version: 1,
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.as_bytes().to_vec()))
                .collect(),
            body: body.to_vec(),
        }
    }

    /// The target's path, without the query.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// The target's query, without the `?`.
    pub fn query(&self) -> Option<&str> {
        self.target.split_once('?').map(|(_, q)| q)
    }

    /// The first value of header `name` (lowercase), if present and valid UTF-8.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

pub use super::guard::Refusal;

/// What the reader wants next.
#[derive(Debug, PartialEq, Eq)]
pub enum Progress {
    /// Feed more bytes.
    NeedMore,
    /// The head asked for `Expect: 100-continue`; send the interim response, then feed more.
    SendContinue,
    /// A whole request; anything after it is ignored.
    Done(Request),
    /// Refuse with this and close.
    Refused(Refusal),
}

struct RequestHead {
    method: String,
    target: String,
    version: u8,
    headers: Vec<(String, Vec<u8>)>,
    len: usize,
    body_len: usize,
}

impl RequestHead {
    /// Where the body ends in the buffer.
    fn end(&self) -> usize {
        self.len.saturating_add(self.body_len)
    }
}

/// Accumulates bytes until a whole request (or a refusal) is known.
pub struct Reader {
    buf: Vec<u8>,
    head: Option<RequestHead>,
    max_head: usize,
    max_headers: usize,
    max_body: usize,
    /// The bound port when the loopback guard is on.
    guard_port: Option<u16>,
    finished: bool,
    /// Input arrived that no request consumed (after a refusal, or beyond the request).
    excess: bool,
}

impl Reader {
    /// A reader enforcing `limits` for a listener bound to `port` (the port the loopback
    /// guard expects in `host`; unused when `limits.loopback_only` is off).
    pub fn new(limits: &Limits, port: u16) -> Reader {
        Reader {
            buf: Vec::new(),
            head: None,
            max_head: limits.max_head,
            max_headers: limits.max_headers,
            max_body: limits.max_body,
            guard_port: limits.loopback_only.then_some(port),
            finished: false,
            excess: false,
        }
    }

    /// Feed the next bytes from the connection. After `Done` or `Refused`, further bytes are
    /// ignored and `NeedMore` is returned.
    pub fn feed(&mut self, bytes: &[u8]) -> Progress {
        if self.finished {
            self.excess |= !bytes.is_empty();
            return Progress::NeedMore;
        }
        let old_len = self.buf.len();
        let cap = self.max_head.saturating_add(self.max_body).saturating_add(1);
        let room = cap.saturating_sub(old_len);
        self.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
        let progress = self.advance(old_len);
        if let Progress::Refused(_) = progress {
            self.excess = true;
        }
        if matches!(progress, Progress::Done(_) | Progress::Refused(_)) {
            self.finished = true;
            self.buf = Vec::new();
            self.head = None;
        }
        progress
    }

    /// Body bytes held right now (what counts against the server's `max_buffered`): the
    /// buffered bytes past a parsed head; none before the head is complete or after a verdict.
    pub fn body_held(&self) -> usize {
        self.head
            .as_ref()
            .map_or(0, |h| self.buf.len().saturating_sub(h.len))
    }

    /// Give up on this request without a verdict (the server refused it): drop what is
    /// held, and ignore everything after.
    pub fn abandon(&mut self) {
        self.finished = true;
        self.excess = true;
        self.buf = Vec::new();
        self.head = None;
    }

    /// A whole request was read and nothing else: closing the socket now cannot reset
    /// unread input away.
    pub fn is_clean(&self) -> bool {
        self.finished && !self.excess
    }

    fn advance(&mut self, old_len: usize) -> Progress {
        if self.head.is_none() {
            // Only parse once a blank line may have arrived: keeps a byte-at-a-time
            // sender from costing a full re-parse per byte.
            let from = old_len.saturating_sub(3);
            let window = &self.buf[from..];
            let blank = window.windows(2).any(|w| w == b"\n\n") || window.windows(3).any(|w| w == b"\n\r\n");
            if !blank {
                return if self.buf.len() > self.max_head {
                    Progress::Refused(Refusal::HeadTooLarge)
                } else {
                    Progress::NeedMore
                };
            }
            match self.parse_head() {
                Ok(Some(head)) => {
                    let wants_continue = head.version == 1
                        && head.body_len > 0
                        && self.buf.len() < head.end()
                        && expects_continue(&head.headers);
                    self.head = Some(head);
                    if wants_continue {
                        return Progress::SendContinue;
                    }
                }
                Ok(None) => {
                    return if self.buf.len() > self.max_head {
                        Progress::Refused(Refusal::HeadTooLarge)
                    } else {
                        Progress::NeedMore
                    };
                }
                Err(refusal) => return Progress::Refused(refusal),
            }
        }
        let Some(head) = self.head.as_ref() else {
            return Progress::NeedMore;
        };
        if self.buf.len() < head.end() {
            return Progress::NeedMore;
        }
        let Some(head) = self.head.take() else {
            return Progress::NeedMore;
        };
        self.excess = self.buf.len() > head.end();
        let body = self.buf.get(head.len..head.end()).unwrap_or_default().to_vec();
        Progress::Done(Request {
            method: head.method,
            target: head.target,
            version: head.version,
            headers: head.headers,
            body,
        })
    }

    fn parse_head(&self) -> Result<Option<RequestHead>, Refusal> {
        let mut fields = vec![httparse::EMPTY_HEADER; self.max_headers];
        let mut req = httparse::Request::new(&mut fields);
        let len = match req.parse(&self.buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => return Err(Refusal::HeadTooLarge),
            Err(httparse::Error::Version) => return Err(Refusal::BadRequest("unsupported HTTP version")),
            Err(_) => return Err(Refusal::BadRequest("malformed request")),
        };
        if len > self.max_head {
            return Err(Refusal::HeadTooLarge);
        }
        let method = req
            .method
            .ok_or(Refusal::BadRequest("malformed request"))?
            .to_string();
        let target = req.path.ok_or(Refusal::BadRequest("malformed request"))?;
        if !target.starts_with('/') {
            return Err(Refusal::BadRequest("request target must be a path"));
        }
        let version = req.version.ok_or(Refusal::BadRequest("malformed request"))?;
        let headers: Vec<(String, Vec<u8>)> = req
            .headers
            .iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec()))
            .collect();
        // Who the request is for, before how it is framed or how big it is.
        if let Some(port) = self.guard_port {
            guard::check_head(&headers, port)?;
        }
        if headers.iter().any(|(n, _)| n == "transfer-encoding") {
            return Err(Refusal::BadRequest("transfer-encoding is not accepted"));
        }
        let mut declared: Option<usize> = None;
        for (_, value) in headers.iter().filter(|(n, _)| n == "content-length") {
            let n = parse_length(value).ok_or(Refusal::BadRequest("invalid content-length"))?;
            if declared.is_some_and(|d| d != n) {
                return Err(Refusal::BadRequest("conflicting content-length"));
            }
            declared = Some(n);
        }
        // No content-length (and no transfer-encoding, refused above): the body is empty
        // (RFC 9112 section 6.3), whatever the method; each route then answers the method itself.
        let body_len = declared.unwrap_or(0);
        if body_len > self.max_body {
            return Err(Refusal::BodyTooLarge);
        }
        Ok(Some(RequestHead {
            method,
            target: target.to_string(),
            version,
            headers,
            len,
            body_len,
        }))
    }
}

/// A content-length value: 1 to 19 ASCII digits, nothing else.
fn parse_length(value: &[u8]) -> Option<usize> {
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

fn expects_continue(headers: &[(String, Vec<u8>)]) -> bool {
    headers
        .iter()
        .any(|(n, v)| n == "expect" && v.eq_ignore_ascii_case(b"100-continue"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The framing tests run without the loopback guard; `guarded` turns it on.
    fn limits() -> Limits {
        Limits {
            loopback_only: false,
            ..Limits::default()
        }
    }

    fn one_shot(bytes: &[u8]) -> Progress {
        Reader::new(&limits(), 7700).feed(bytes)
    }

    fn guarded(bytes: &[u8]) -> Progress {
        Reader::new(&Limits::default(), 7700).feed(bytes)
    }

    #[test]
    fn parses_a_get_and_a_post() {
        let Progress::Done(req) = one_shot(b"GET /a/b?x=1 HTTP/1.1\r\nHost: h\r\nX-Thing: V\r\n\r\n") else {
            panic!("not done")
        };
        assert_eq!(
            (req.method.as_str(), req.path(), req.query()),
            ("GET", "/a/b", Some("x=1"))
        );
        assert_eq!(req.header("x-thing"), Some("V"));
        let Progress::Done(req) = one_shot(b"POST / HTTP/1.0\r\ncontent-length: 3\r\n\r\nabcEXTRA") else {
            panic!("not done")
        };
        assert_eq!((req.version, req.body.as_slice()), (0, &b"abc"[..]));
    }

    #[test]
    fn clean_only_when_exactly_one_request_was_read() {
        let mut r = Reader::new(&limits(), 7700);
        assert!(!r.is_clean());
        assert!(matches!(r.feed(b"GET / HTTP/1.1\r\n\r\n"), Progress::Done(_)));
        assert!(r.is_clean());
        r.feed(b"G");
        assert!(!r.is_clean(), "bytes after the request");
        let mut r = Reader::new(&limits(), 7700);
        assert!(matches!(r.feed(b"GET / HTTP/1.1\r\n\r\nGET"), Progress::Done(_)));
        assert!(!r.is_clean(), "bytes in the same read");
        let mut r = Reader::new(&limits(), 7700);
        assert!(matches!(r.feed(b"BAD\r\n\r\n"), Progress::Refused(_)));
        assert!(!r.is_clean(), "a refused request");
    }

    #[test]
    fn byte_at_a_time_gives_the_same_request() {
        let raw = b"POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
        let mut reader = Reader::new(&limits(), 7700);
        let mut last = Progress::NeedMore;
        for b in raw {
            last = reader.feed(std::slice::from_ref(b));
        }
        let Progress::Done(req) = last else {
            panic!("not done")
        };
        assert_eq!(req.body, b"hello");
    }

    #[test]
    fn strict_framing() {
        let bad = |raw: &[u8]| match one_shot(raw) {
            Progress::Refused(r) => r.status(),
            other => panic!("accepted {other:?}"),
        };
        assert_eq!(
            bad(b"POST / HTTP/1.1\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n"),
            400
        );
        assert_eq!(
            bad(b"POST / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nab"),
            400
        );
        assert_eq!(bad(b"POST / HTTP/1.1\r\ncontent-length: -1\r\n\r\n"), 400);
        assert_eq!(bad(b"POST / HTTP/1.1\r\ncontent-length: 1, 1\r\n\r\n"), 400);
        assert_eq!(bad(b"GET http://x/ HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(bad(b"GET / HTTP/2.0\r\n\r\n"), 400);
        assert_eq!(bad(b"G ET / HTTP/1.1\r\n\r\n"), 400);
        assert_eq!(bad(b"POST / HTTP/1.1\r\ncontent-length: 1048577\r\n\r\n"), 413);
        let same = one_shot(b"POST / HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nab");
        assert!(matches!(same, Progress::Done(_)));
        // No content-length: the body is empty (RFC 9112 section 6.3), whatever the method.
        let Progress::Done(req) = one_shot(b"POST / HTTP/1.1\r\n\r\n") else {
            panic!("a POST without content-length is a request with an empty body")
        };
        assert!(req.body.is_empty());
    }

    #[test]
    fn head_limits() {
        let line = b"GET / HTTP/1.1\r\n";
        let mut raw = line.to_vec();
        for i in 0..65 {
            raw.extend_from_slice(format!("h{i}: v\r\n").as_bytes());
        }
        raw.extend_from_slice(b"\r\n");
        assert_eq!(one_shot(&raw), Progress::Refused(Refusal::HeadTooLarge));
        let mut exact = line.to_vec();
        let pad = 16 * 1024 - line.len() - 4 - 3;
        exact.extend_from_slice(b"a: ");
        exact.extend(std::iter::repeat_n(b'x', pad));
        exact.extend_from_slice(b"\r\n\r\n");
        assert_eq!(exact.len(), 16 * 1024);
        assert!(matches!(one_shot(&exact), Progress::Done(_)));
        exact.insert(20, b'y');
        assert_eq!(one_shot(&exact), Progress::Refused(Refusal::HeadTooLarge));
    }

    #[test]
    fn expect_continue_only_when_the_body_is_still_to_come() {
        let mut reader = Reader::new(&limits(), 7700);
        let head = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\ncontent-length: 2\r\n\r\n";
        assert_eq!(reader.feed(head), Progress::SendContinue);
        assert!(matches!(reader.feed(b"ok"), Progress::Done(_)));
        let whole = b"POST / HTTP/1.1\r\nExpect: 100-continue\r\ncontent-length: 2\r\n\r\nok";
        assert!(matches!(one_shot(whole), Progress::Done(_)));
    }

    #[test]
    fn the_guard_judges_the_head_before_the_body_arrives() {
        let ok = guarded(b"GET / HTTP/1.1\r\nHost: LocalHost:7700\r\n\r\n");
        assert!(matches!(ok, Progress::Done(_)));
        let refused = |raw: &[u8]| match guarded(raw) {
            Progress::Refused(r) => (r.status(), r.reason()),
            other => panic!("accepted {other:?}"),
        };
        assert_eq!(refused(b"GET / HTTP/1.0\r\n\r\n"), (400, guard::MISSING_HOST));
        assert_eq!(
            refused(b"GET / HTTP/1.1\r\nhost: evil.example:7700\r\n\r\n"),
            (421, guard::MISDIRECTED)
        );
        assert_eq!(
            refused(b"GET / HTTP/1.1\r\nhost: 127.0.0.1:7700\r\norigin: http://evil.example\r\n\r\n"),
            (403, guard::CROSS_ORIGIN)
        );
        // Refused on the head alone: the declared body is never waited for, and the
        // guard speaks before the size check.
        assert_eq!(
            refused(b"POST / HTTP/1.1\r\nhost: evil.example:7700\r\ncontent-length: 99999999\r\n\r\n"),
            (421, guard::MISDIRECTED)
        );
    }

    #[test]
    fn body_held_counts_body_bytes_only_and_drops_to_zero() {
        let mut r = Reader::new(&limits(), 7700);
        assert_eq!(r.feed(b"POST / HTTP/1.1\r\ncontent-"), Progress::NeedMore);
        assert_eq!(r.body_held(), 0);
        assert_eq!(r.feed(b"length: 10\r\n\r\nabcd"), Progress::NeedMore);
        assert_eq!(r.body_held(), 4);
        assert_eq!(r.feed(b"efg"), Progress::NeedMore);
        assert_eq!(r.body_held(), 7);
        assert!(matches!(r.feed(b"hij"), Progress::Done(_)));
        assert_eq!(r.body_held(), 0);
        let mut r = Reader::new(&limits(), 7700);
        r.feed(b"POST / HTTP/1.1\r\ncontent-length: 10\r\n\r\nabcd");
        r.abandon();
        assert_eq!((r.body_held(), r.is_clean()), (0, false));
        assert_eq!(r.feed(b"efghij"), Progress::NeedMore);
    }
}
