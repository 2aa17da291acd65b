//! A small blocking HTTP/1.1 client for the runtime's own outbound calls (roost requests,
//! agent-card fetches, completion posts): plain `http://` only, connect and read timeouts,
//! a cap on the response size, bodies framed by `content-length` or by the server's close.

use std::io::{self, Read, Write};
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
}

impl Default for Options {
    fn default() -> Options {
        Options {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(30),
            max_response: 1024 * 1024,
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
    /// The URL is not `http://host[:port][/path]`.
    BadUrl(String),
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
            ClientError::BadUrl(u) => write!(f, "not an http:// URL: {u}"),
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
}

impl Url {
    /// Parse `http://host[:port][/path]`. No userinfo, no fragment, no other scheme.
    pub fn parse(url: &str) -> Result<Url, ClientError> {
        let bad = || ClientError::BadUrl(url.to_string());
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
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
                "" => 80,
                p => p.strip_prefix(':').and_then(|p| p.parse().ok()).ok_or_else(bad)?,
            };
            (format!("[{inside}]"), port)
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p.parse().map_err(|_| bad())?),
                None => (authority.to_string(), 80),
            }
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad());
        }
        Ok(Url {
            host: host.to_ascii_lowercase(),
            port,
            path: path.to_string(),
        })
    }

    /// `host:port` as sent in the `host` header.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Send one request and read the whole response.
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    opts: &Options,
) -> Result<ClientResponse, ClientError> {
    let url = Url::parse(url)?;
    let mut stream = connect(&url, opts.connect_timeout)?;
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
    stream
        .set_write_timeout(Some(opts.read_timeout))
        .map_err(ClientError::Io)?;
    // One write for head and body: one segment, one wakeup of the server.
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out).map_err(ClientError::Io)?;
    read_response(&mut stream, deadline, opts.max_response)
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

fn connect(url: &Url, timeout: Duration) -> Result<TcpStream, ClientError> {
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = (host, url.port)
        .to_socket_addrs()
        .map_err(ClientError::Connect)?
        .collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(ClientError::Connect(last))
}

/// A parsed response head: status, headers, where the body starts, and its length when the
/// server framed it (None: read to close).
struct Head {
    status: u16,
    headers: Vec<(String, String)>,
    len: usize,
    body_len: Option<usize>,
}

fn read_response(
    stream: &mut TcpStream,
    deadline: Instant,
    cap: usize,
) -> Result<ClientResponse, ClientError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut parsed: Option<Head> = None;
    loop {
        if let Some(Head {
            status,
            headers,
            len,
            body_len: Some(body_len),
        }) = &parsed
        {
            if buf.len() >= len + body_len {
                let body = buf[*len..len + body_len].to_vec();
                return Ok(ClientResponse {
                    status: *status,
                    headers: headers.clone(),
                    body,
                });
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ClientError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "response deadline passed",
            )));
        }
        stream.set_read_timeout(Some(left)).map_err(ClientError::Io)?;
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ClientError::Io(e)),
        };
        if n == 0 {
            return match parsed {
                Some(Head {
                    status,
                    headers,
                    len,
                    body_len: None,
                }) => Ok(ClientResponse {
                    status,
                    headers,
                    body: buf[len..].to_vec(),
                }),
                _ => Err(ClientError::BadResponse("connection closed early")),
            };
        }
        if buf.len() + n > cap {
            return Err(ClientError::TooLarge);
        }
        buf.extend_from_slice(&chunk[..n]);
        while parsed.is_none() {
            parsed = parse_head(&buf)?;
            // An interim 1xx response is skipped; the final one follows it.
            match &parsed {
                Some(head) if (100..200).contains(&head.status) => {
                    buf.drain(..head.len);
                    parsed = None;
                }
                _ => break,
            }
        }
    }
}

fn parse_head(buf: &[u8]) -> Result<Option<Head>, ClientError> {
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
            let n: usize = value
                .parse()
                .map_err(|_| ClientError::BadResponse("bad content-length"))?;
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
    Ok(Some(Head {
        status,
        headers,
        len,
        body_len,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let head = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi")
            .unwrap()
            .unwrap();
        assert_eq!((head.status, head.len, head.body_len), (200, 38, Some(2)));
        assert_eq!(head.headers[0].0, "content-length");
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").is_err());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n").unwrap().is_none());
    }
}
