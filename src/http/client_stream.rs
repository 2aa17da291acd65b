//! A GET whose successful body is written to a sink as it arrives instead of being held in
//! memory (the peer plane's file fetch): the head is parsed by the client's own parser, a
//! declared or received body beyond the caller's cap is refused, and a body framed by
//! `content-length` must arrive whole. And a request whose answer never ends (the roost's
//! `POST /hold`), handed back as its open connection once its head says `200`.

use super::{parse_head, send, ClientError, ClientResponse, Conn, Options, ResponseHead, Url};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

/// GET `url` and write the body of a `200` answer to `sink` as it arrives: at most
/// `max_body` bytes (a larger declared or received body is [`ClientError::TooLarge`]); a
/// sink that fails is [`ClientError::Io`]. The returned response of a `200` has an empty
/// body. Any other status is read whole within `opts.max_response` and returned with its
/// body, `sink` untouched. `opts.read_timeout` bounds the whole exchange after the connect.
pub fn get_into(
    url: &str,
    headers: &[(&str, &str)],
    opts: &Options,
    max_body: u64,
    sink: &mut dyn Write,
) -> Result<ClientResponse, ClientError> {
    get_into_from(&Url::parse(url)?, headers, opts, max_body, sink)
}

/// [`get_into`] for a parsed URL (`https://` too, with `opts.tls`).
pub fn get_into_from(
    url: &Url,
    headers: &[(&str, &str)],
    opts: &Options,
    max_body: u64,
    sink: &mut dyn Write,
) -> Result<ClientResponse, ClientError> {
    let (mut stream, deadline) = send("GET", url, headers, &[], opts)?;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut buf: Vec<u8> = Vec::new();
    let head = final_head(&mut stream, deadline, opts, &mut chunk, &mut buf)?;
    let ResponseHead {
        status,
        headers,
        len,
        body_len,
    } = head;
    let already = buf.get(len..).unwrap_or_default();
    let mut body = Vec::new();
    if status == 200 {
        pump(
            &mut stream,
            deadline,
            already,
            body_len,
            max_body,
            sink,
            &mut chunk,
        )?;
    } else {
        let cap = opts.max_response.saturating_sub(len) as u64;
        pump(
            &mut stream,
            deadline,
            already,
            body_len,
            cap,
            &mut body,
            &mut chunk,
        )?;
    }
    Ok(ClientResponse {
        status,
        headers,
        body,
    })
}

/// Move a body to `sink`: `already` (bytes read with the head) and then the stream, up to
/// `body_len` when the server framed it, else to the close; more than `limit` bytes is
/// refused. Bytes past a framed body are ignored (the connection is `close`).
fn pump(
    stream: &mut Conn,
    deadline: Instant,
    already: &[u8],
    body_len: Option<usize>,
    limit: u64,
    sink: &mut dyn Write,
    chunk: &mut [u8],
) -> Result<(), ClientError> {
    let want = body_len.map(|n| n as u64);
    if want.is_some_and(|w| w > limit) {
        return Err(ClientError::TooLarge);
    }
    let mut got = 0u64;
    let mut put = |bytes: &[u8], got: &mut u64| -> Result<bool, ClientError> {
        let take = match want {
            Some(w) => bytes.len().min(usize::try_from(w - *got).unwrap_or(usize::MAX)),
            None => bytes.len(),
        };
        if got.saturating_add(take as u64) > limit {
            return Err(ClientError::TooLarge);
        }
        sink.write_all(&bytes[..take]).map_err(ClientError::Io)?;
        *got += take as u64;
        Ok(want.is_some_and(|w| *got >= w))
    };
    if put(already, &mut got)? {
        return Ok(());
    }
    loop {
        let n = read_some(stream, deadline, chunk)?;
        if n == 0 {
            return match want {
                None => Ok(()),
                Some(_) => Err(ClientError::BadResponse("connection closed early")),
            };
        }
        if put(&chunk[..n], &mut got)? {
            return Ok(());
        }
    }
}

/// One read within the deadline (0: the server closed).
/// POST `body` (JSON) to `url` and, once the answer's head says `200`, hand back the open
/// connection (its body is the caller's to drain until the server closes it). Any other
/// status, or no head within `opts.read_timeout`, is an error naming it.
pub fn post_held(
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    opts: &Options,
) -> Result<TcpStream, ClientError> {
    let url = Url::parse(url)?;
    let mut all: Vec<(&str, &str)> = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    let (mut stream, deadline) = send("POST", &url, &all, body, opts)?;
    let mut chunk = [0u8; 4096];
    let mut buf: Vec<u8> = Vec::new();
    if final_head(&mut stream, deadline, opts, &mut chunk, &mut buf)?.status != 200 {
        return Err(ClientError::BadResponse("the hold was refused"));
    }
    // `Url::parse` took `http://` only, so the connection is plain.
    let stream = stream
        .into_plain()
        .ok_or(ClientError::BadResponse("the hold is not over plain TCP"))?;
    stream.set_read_timeout(None).map_err(ClientError::Io)?;
    Ok(stream)
}

/// Read the head of the final answer into `buf`, past any interim 1xx answers (their bytes
/// dropped from `buf`; what follows the head stays there). No body is declared against a
/// cap here: the cap depends on the status and is the caller's.
fn final_head(
    stream: &mut Conn,
    deadline: Instant,
    opts: &Options,
    chunk: &mut [u8],
    buf: &mut Vec<u8>,
) -> Result<ResponseHead, ClientError> {
    loop {
        match parse_head(buf, usize::MAX)? {
            Some(h) if (100..200).contains(&h.status) => {
                buf.drain(..h.len.min(buf.len()));
            }
            Some(h) => return Ok(h),
            None => {
                let n = read_some(stream, deadline, chunk)?;
                if n == 0 {
                    return Err(ClientError::BadResponse("connection closed early"));
                }
                if buf.len().saturating_add(n) > opts.max_response {
                    return Err(ClientError::TooLarge);
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

pub(super) fn read_some(
    stream: &mut Conn,
    deadline: Instant,
    chunk: &mut [u8],
) -> Result<usize, ClientError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "response deadline passed",
            )));
        }
        stream
            .tcp()
            .set_read_timeout(Some(left))
            .map_err(ClientError::Io)?;
        match stream.read(chunk) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ClientError::Io(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Serve one connection with `answer` and return the URL.
    fn one_shot(answer: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let t = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut head = [0u8; 2048];
            let _ = s.read(&mut head);
            let _ = s.write_all(&answer);
        });
        (format!("http://{addr}/x"), t)
    }

    #[test]
    fn a_200_body_goes_to_the_sink_and_others_come_back_whole() {
        let body = vec![7u8; 200_000];
        let mut answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\netag: e\r\n\r\n",
            body.len()
        )
        .into_bytes();
        answer.extend_from_slice(&body);
        let (url, t) = one_shot(answer);
        let mut sink = Vec::new();
        let r = get_into(&url, &[], &Options::default(), 1 << 20, &mut sink).unwrap();
        t.join().unwrap();
        assert_eq!((r.status, r.body.len(), r.header("etag")), (200, 0, Some("e")));
        assert_eq!(sink, body);

        let (url, t) =
            one_shot(b"HTTP/1.1 403 Forbidden\r\ncontent-length: 13\r\n\r\n{\"error\":\"x\"}".to_vec());
        let mut sink = Vec::new();
        let r = get_into(&url, &[], &Options::default(), 1 << 20, &mut sink).unwrap();
        t.join().unwrap();
        assert_eq!((r.status, r.body.as_slice()), (403, &b"{\"error\":\"x\"}"[..]));
        assert!(sink.is_empty());
    }

    #[test]
    fn bodies_past_the_cap_or_cut_short_are_refused() {
        let (url, t) = one_shot(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nabc".to_vec());
        let got = get_into(&url, &[], &Options::default(), 10, &mut Vec::new());
        t.join().unwrap();
        assert!(matches!(got, Err(ClientError::TooLarge)), "{got:?}");

        let (url, t) = one_shot(b"HTTP/1.1 200 OK\r\n\r\nabcdefghijkl".to_vec());
        let got = get_into(&url, &[], &Options::default(), 10, &mut Vec::new());
        t.join().unwrap();
        assert!(matches!(got, Err(ClientError::TooLarge)), "{got:?}");

        let (url, t) = one_shot(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc".to_vec());
        let got = get_into(&url, &[], &Options::default(), 100, &mut Vec::new());
        t.join().unwrap();
        assert!(matches!(got, Err(ClientError::BadResponse(_))), "{got:?}");

        let (url, t) =
            one_shot(format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", u64::MAX).into_bytes());
        let got = get_into(&url, &[], &Options::default(), 100, &mut Vec::new());
        t.join().unwrap();
        assert!(matches!(got, Err(ClientError::TooLarge)), "{got:?}");
    }
}
