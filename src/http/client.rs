//! A small blocking HTTP/1.1 client for the runtime's own outbound calls (roost requests,
//! agent-card fetches, completion posts: plain `http://` only) and for OCI registries
//! (`https://` through [`super::tls`] as well): connect and read timeouts, a cap on the
//! response size, bodies framed by `content-length` or by the server's close.

use super::tls::{Conn, TlsConfig};
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// How a call is bounded.
#[derive(Debug, Clone)]
pub struct Options {
    /// Time to establish the TCP connection, per address tried.
    pub connect_timeout: Duration,
    /// Time for the whole response to arrive after the request is sent.
    pub read_timeout: Duration,
    /// Largest response (head plus body) accepted, bytes.
    pub max_response: usize,
    /// The roots an `https://` URL's server is checked against (None: no `https://`).
    pub tls: Option<TlsConfig>,
    /// Connect to no loopback or unspecified address, whatever the host name resolves to
    /// (a webhook whose name points at this host).
    pub refuse_loopback: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(30),
            max_response: 1024 * 1024,
            tls: None,
            refuse_loopback: false,
        }
    }
}

/// A response as received. Header names are lowercase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl ClientResponse {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a call failed.
#[derive(Debug)]
pub enum ClientError {
    /// The URL is not `http://host[:port][/path]` (or `https://` where that is taken).
    BadUrl(String),
    /// The host name did not resolve.
    Resolve(String, io::Error),
    /// No address could be connected to in time.
    Connect(io::Error),
    /// Sending or receiving failed, or the deadline passed.
    Io(io::Error),
    /// The response exceeded `max_response`.
    TooLarge,
    /// The response is not HTTP/1.x we understand (including chunked bodies).
    BadResponse(&'static str),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::BadUrl(u) => write!(f, "not a URL this client calls: {u}"),
            ClientError::Resolve(host, e) => write!(f, "cannot resolve {host}: {e}"),
            ClientError::Connect(e) => write!(f, "connect failed: {e}"),
            ClientError::Io(e) => write!(f, "request failed: {e}"),
            ClientError::TooLarge => f.write_str("response too large"),
            ClientError::BadResponse(why) => write!(f, "bad response: {why}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// The parts of an `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// Host as written (brackets kept for IPv6), lowercased.
    pub host: String,
    pub port: u16,
    /// Path and query, starting with `/`.
    pub path: String,
    /// `https://`.
    pub tls: bool,
}

impl Url {
    /// Parse `http://host[:port][/path]`. No userinfo, no fragment, no other scheme.
    pub fn parse(url: &str) -> Result<Url, ClientError> {
        match url.strip_prefix("http://") {
            Some(rest) => Url::parse_rest(url, rest, false),
            None => Err(ClientError::BadUrl(url.to_string())),
        }
    }

    /// Parse `http://…` or `https://host[:port][/path]` (port 443 by default).
    pub fn parse_web(url: &str) -> Result<Url, ClientError> {
        match url.strip_prefix("https://") {
            Some(rest) => Url::parse_rest(url, rest, true),
            None => Url::parse(url),
        }
    }

    fn parse_rest(url: &str, rest: &str, tls: bool) -> Result<Url, ClientError> {
        let bad = || ClientError::BadUrl(url.to_string());
        let default_port = if tls { 443 } else { 80 };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty()
            || authority.contains('@')
            || path.contains('#')
            || path.contains(char::is_whitespace)
        {
            return Err(bad());
        }
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (inside, after) = v6.split_once(']').ok_or_else(bad)?;
            let port = match after {
                "" => default_port,
                p => p.strip_prefix(':').and_then(|p| p.parse().ok()).ok_or_else(bad)?,
            };
            (format!("[{inside}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().map_err(|_| bad())?),
                None => (authority.to_string(), default_port),
            }
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad());
        }
        Ok(Url {
            host: host.to_ascii_lowercase(),
            port,
            path: path.to_string(),
            tls,
        })
    }

    /// The URL written back: `scheme://host:port/path`.
    pub fn to_text(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority(), self.path)
    }

    /// `host:port` as sent in the `host` header.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// The largest body sent in one write with its head.
const SMALL_BODY: usize = 64 * 1024;

/// Send one request and read the whole response.
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    opts: &Options,
) -> Result<ClientResponse, ClientError> {
    let url = Url::parse(url)?;
    request_to(method, &url, headers, body, opts)
}

/// Send one request to a parsed URL (`https://` too, with `opts.tls`) and read the whole
/// response.
pub fn request_to(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: &[u8],
    opts: &Options,
) -> Result<ClientResponse, ClientError> {
    let (mut stream, deadline) = send(method, url, headers, body, opts)?;
    read_response(&mut stream, deadline, opts.max_response, method == "HEAD")
}

/// Connect to `url` and send one request; the stream and the deadline of its response.
fn send(
    method: &str,
    url: &Url,
    headers: &[(&str, &str)],
    body: &[u8],
    opts: &Options,
) -> Result<(Conn, Instant), ClientError> {
    let tcp = connect(url, opts.connect_timeout, opts.refuse_loopback)?;
    let mut stream = match (url.tls, &opts.tls) {
        (false, _) => Conn::Plain(tcp),
        (true, Some(config)) => {
            let host = url.host.trim_start_matches('[').trim_end_matches(']');
            Conn::tls(tcp, host, config).map_err(ClientError::Connect)?
        }
        // The origin only: a presigned URL's query is a credential.
        (true, None) => return Err(ClientError::BadUrl(format!("https://{}/", url.authority()))),
    };
    let mut head = format!(
        "{method} {} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n",
        url.path,
        url.authority()
    );
    for (name, value) in headers {
        if name.contains(['\r', '\n', ':']) || value.contains(['\r', '\n']) {
            return Err(ClientError::BadResponse("header contains a line break"));
        }
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let deadline = Instant::now() + opts.read_timeout;
    // Both ways bounded from the start: a TLS handshake reads inside the first write.
    let tcp = stream.tcp();
    tcp.set_write_timeout(Some(opts.read_timeout))
        .and_then(|()| tcp.set_read_timeout(Some(opts.read_timeout)))
        .map_err(ClientError::Io)?;
    if body.len() <= SMALL_BODY {
        // One write for head and body: one segment, one wakeup of the server.
        let mut out = head.into_bytes();
        out.extend_from_slice(body);
        stream.write_all(&out).map_err(ClientError::Io)?;
    } else {
        // A large body (an archive uploaded) is not copied next to its head.
        stream.write_all(head.as_bytes()).map_err(ClientError::Io)?;
        stream.write_all(body).map_err(ClientError::Io)?;
    }
    stream.flush().map_err(ClientError::Io)?;
    Ok((stream, deadline))
}

/// GET `url`.
pub fn get(url: &str, headers: &[(&str, &str)], opts: &Options) -> Result<ClientResponse, ClientError> {
    request("GET", url, headers, &[], opts)
}

/// POST a JSON body to `url`.
pub fn post_json(
    url: &str,
    headers: &[(&str, &str)],
    json: &str,
    opts: &Options,
) -> Result<ClientResponse, ClientError> {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    request("POST", url, &all, json.as_bytes(), opts)
}

fn connect(url: &Url, timeout: Duration, refuse_loopback: bool) -> Result<TcpStream, ClientError> {
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = (host, url.port)
        .to_socket_addrs()
        .map_err(|e| ClientError::Resolve(host.to_string(), e))?
        .filter(|a| !(refuse_loopback && local(a)))
        .collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address (loopback refused)");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(ClientError::Connect(last))
}

/// A loopback or unspecified address (an IPv4 one mapped into IPv6 too): this host.
fn local(a: &SocketAddr) -> bool {
    let ip = match a.ip() {
        std::net::IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(v6), std::net::IpAddr::V4),
        v4 => v4,
    };
    ip.is_loopback() || ip.is_unspecified()
}

/// A parsed response head: status, headers, where the body starts, and its length when the
/// server framed it (None: read to close). `len + body_len` is known not to overflow and
/// to be within the response cap: [`parse_head`] refuses a head where it would not be.
struct ResponseHead {
    status: u16,
    headers: Vec<(String, String)>,
    len: usize,
    body_len: Option<usize>,
}

/// Read a response; `head_only`: the answer to a HEAD, whose `content-length` describes a
/// body that is never sent.
fn read_response(
    stream: &mut Conn,
    deadline: Instant,
    cap: usize,
    head_only: bool,
) -> Result<ClientResponse, ClientError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut parsed: Option<ResponseHead> = None;
    loop {
        if let Some(ResponseHead {
            status,
            headers,
            len,
            body_len: Some(body_len),
        }) = &parsed
        {
            let end = len.checked_add(*body_len).ok_or(ClientError::TooLarge)?;
            if buf.len() >= end {
                let body = buf.get(*len..end).ok_or(ClientError::TooLarge)?.to_vec();
                return Ok(ClientResponse {
                    status: *status,
                    headers: headers.clone(),
                    body,
                });
            }
        }
        let n = stream::read_some(stream, deadline, &mut chunk)?;
        if n == 0 {
            return match parsed {
                Some(ResponseHead {
                    status,
                    headers,
                    len,
                    body_len: None,
                }) => Ok(ClientResponse {
                    status,
                    headers,
                    body: buf.get(len..).unwrap_or_default().to_vec(),
                }),
                _ => Err(ClientError::BadResponse("connection closed early")),
            };
        }
        if buf.len().checked_add(n).is_none_or(|total| total > cap) {
            return Err(ClientError::TooLarge);
        }
        buf.extend_from_slice(&chunk[..n]);
        while parsed.is_none() {
            parsed = parse_head(&buf, if head_only { usize::MAX } else { cap })?;
            if head_only {
                if let Some(h) = parsed.as_mut() {
                    h.body_len = Some(0);
                }
            }
            // An interim 1xx response is skipped; the final one follows it.
            match &parsed {
                Some(head) if (100..200).contains(&head.status) => {
                    buf.drain(..head.len.min(buf.len()));
                    parsed = None;
                }
                _ => break,
            }
        }
    }
}

/// A response head from `buf`, or None while it is incomplete. A declared body that would
/// take the response past `cap` (or past `usize::MAX`) is refused here, before any of it
/// is read.
fn parse_head(buf: &[u8], cap: usize) -> Result<Option<ResponseHead>, ClientError> {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut fields);
    let len = match resp.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(_) => return Err(ClientError::BadResponse("malformed head")),
    };
    let status = resp.code.ok_or(ClientError::BadResponse("no status"))?;
    let mut headers = Vec::new();
    let mut body_len = None;
    for h in resp.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        let value = String::from_utf8_lossy(h.value).trim().to_string();
        if name == "transfer-encoding" {
            return Err(ClientError::BadResponse("transfer-encoding is not supported"));
        }
        if name == "content-length" {
            let n = parse_length(&value)?;
            if body_len.is_some_and(|l| l != n) {
                return Err(ClientError::BadResponse("conflicting content-length"));
            }
            body_len = Some(n);
        }
        headers.push((name, value));
    }
    if (100..200).contains(&status) || status == 204 || status == 304 {
        body_len = Some(0);
    }
    if let Some(body_len) = body_len {
        if len.checked_add(body_len).is_none_or(|end| end > cap) {
            return Err(ClientError::TooLarge);
        }
    }
    Ok(Some(ResponseHead {
        status,
        headers,
        len,
        body_len,
    }))
}

/// A `content-length` value: ASCII digits only (no sign, no spaces, no list). A number too
/// big for `usize` is a response too large, not a parse error to retry.
fn parse_length(value: &str) -> Result<usize, ClientError> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ClientError::BadResponse("bad content-length"));
    }
    let digits = value.trim_start_matches('0');
    if digits.len() > 20 {
        return Err(ClientError::TooLarge);
    }
    let n: u128 = if digits.is_empty() {
        0
    } else {
        digits
            .parse()
            .map_err(|_| ClientError::BadResponse("bad content-length"))?
    };
    usize::try_from(n).map_err(|_| ClientError::TooLarge)
}

#[path = "client_stream.rs"]
mod stream;
pub use stream::{get_into, get_into_from, post_held};

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn url_forms() {
        let u = Url::parse("http://LocalHost:7700/spawn?x").unwrap();
        assert_eq!(
            (u.host.as_str(), u.port, u.path.as_str()),
            ("localhost", 7700, "/spawn?x")
        );
        assert_eq!(Url::parse("http://127.0.0.1").unwrap().path, "/");
        assert_eq!(Url::parse("http://[::1]:9/a").unwrap().host, "[::1]");
        for bad in [
            "https://x/",
            "http://",
            "http://u@h/",
            "http://h:99999/",
            "http://h:x/",
            "ftp://h",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn response_heads() {
        let head = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", 1024)
            .unwrap()
            .unwrap();
        assert_eq!((head.status, head.len, head.body_len), (200, 38, Some(2)));
        assert_eq!(head.headers[0].0, "content-length");
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 1024).is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n", 1024).unwrap().is_none());
    }

    fn declared(length: &str, cap: usize) -> Result<Option<usize>, ClientError> {
        let raw = format!("HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n");
        parse_head(raw.as_bytes(), cap).map(|h| h.and_then(|h| h.body_len))
    }

    #[test]
    fn lengths_near_the_integer_limits_are_refused_not_wrapped() {
        let too_large = |length: &str| matches!(declared(length, usize::MAX), Err(ClientError::TooLarge));
        // Past the cap by the head's own length: `len + body_len` would overflow.
        assert!(too_large(&usize::MAX.to_string()));
        assert!(too_large(&u64::MAX.to_string()));
        assert!(too_large(&(usize::MAX - 10).to_string()));
        assert!(too_large("340282366920938463463374607431768211455"));
        assert!(too_large(&"9".repeat(400)));
        // Within usize but past the response cap.
        assert!(matches!(declared("1025", 1024), Err(ClientError::TooLarge)));
        assert!(matches!(declared("1000", 1024), Err(ClientError::TooLarge)));
        assert_eq!(declared("984", 1024).unwrap(), Some(984));
        assert_eq!(declared("000", 1024).unwrap(), Some(0));
        for bad in ["", "+5", "-1", "1 2", "0x10", "1,1"] {
            assert!(
                matches!(declared(bad, 1024), Err(ClientError::BadResponse(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn refuse_loopback_connects_to_no_address_of_this_host() {
        use std::net::TcpListener;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        for host in ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "0.0.0.0"] {
            let url = Url::parse(&format!("http://{host}:{port}/")).unwrap();
            let got = connect(&url, Duration::from_secs(1), true);
            assert!(matches!(got, Err(ClientError::Connect(_))), "{host}: {got:?}");
        }
        let url = Url::parse(&format!("http://127.0.0.1:{port}/")).unwrap();
        assert!(connect(&url, Duration::from_secs(1), false).is_ok());
    }

    #[test]
    fn a_server_declaring_u64_max_gets_an_error_not_a_panic() {
        use std::net::TcpListener;
        for length in [u64::MAX.to_string(), usize::MAX.to_string()] {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let server = std::thread::spawn(move || {
                let (mut s, _) = listener.accept().unwrap();
                let mut head = [0u8; 1024];
                let _ = s.read(&mut head);
                let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {length}\r\n\r\nabc");
                let _ = s.write_all(answer.as_bytes());
            });
            let got = get(&format!("http://{addr}/"), &[], &Options::default());
            assert!(matches!(got, Err(ClientError::TooLarge)), "{got:?}");
            server.join().unwrap();
        }
    }
}
