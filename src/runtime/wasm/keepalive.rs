//! The model calls' HTTP/1.1 connections, kept open for the next call: an agent's driver
//! calls one endpoint turn after turn, and a fresh TCP (and, to a real provider, TLS)
//! connection per call cost a handshake each time, in CPU and in round trips. Only a driver's
//! requests to its inference endpoint get here, and only when their framing cannot spill
//! into the next request ([`framed`]; `host::Gate`, after the allow-list): every other guest
//! request gets a connection of its own, so no other guest's bytes ever share a connection
//! with the credentialed calls. A connection is kept once a POST's 2xx response has been read
//! to the end, taken again only for the same scheme, authority and provider key, idle and
//! open, and a request it could not take before a byte of it was written goes on a fresh
//! connection.

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// How long an idle connection is kept: below the idle timeouts servers commonly close on
/// (Node's 5 s, nginx's 75 s), so a server rarely closes a kept connection just as a request
/// goes out on it (that request then fails as any broken connection does: the driver reports
/// a transport failure, never a silent retry of a call that may have been charged).
pub const IDLE_FOR: Duration = Duration::from_secs(4);
/// At most this many idle connections, all origins together (the longest idle goes first).
pub const MAX_IDLE: usize = 4;
/// A wait the guest set no bound for (wasmtime-wasi-http's own default).
const UNBOUNDED: Duration = Duration::from_secs(600);

/// Where a connection goes: the scheme and the authority with its port, and the lane of
/// the credential its requests carry (`credential::Credential::lane`; none without a key),
/// so no connection that carried one key, or none, carries another.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    tls: bool,
    authority: String,
    lane: Option<[u8; 32]>,
}

/// One kept connection, idle since `since`.
struct Kept {
    origin: Origin,
    sender: SendRequest<WasiBody>,
    since: Instant,
}

/// The idle connections of this process.
pub struct Keeper {
    idle: Mutex<VecDeque<Kept>>,
}

/// The process's keeper: its drivers' calls to their endpoint share it.
pub fn keeper() -> &'static Keeper {
    static KEEPER: Keeper = Keeper {
        idle: Mutex::new(VecDeque::new()),
    };
    &KEEPER
}

/// The three waits of a request: connecting, the response's first byte, any later gap.
#[derive(Clone, Copy)]
struct Waits {
    connect: Duration,
    first_byte: Duration,
    between_bytes: Duration,
}

impl Waits {
    fn of(options: Option<RequestOptions>) -> Waits {
        let or = |d: Option<Duration>| d.unwrap_or(UNBOUNDED);
        Waits {
            connect: or(options.and_then(|o| o.connect_timeout)),
            first_byte: or(options.and_then(|o| o.first_byte_timeout)),
            // A zero gap would never let a byte through; the smallest wait stands in for it.
            between_bytes: or(options.and_then(|o| o.between_bytes_timeout)).max(Duration::from_nanos(1)),
        }
    }
}

/// The response, and the I/O future wasmtime-wasi-http holds beside its body (the
/// connection is driven by a task of its own, so there is nothing left to drive).
pub type Sent = (
    http::Response<WasiBody>,
    Box<dyn Future<Output = Result<(), Error>> + Send>,
);

impl Keeper {
    /// Send `request` (an absolute URI, as the gate saw it) on a kept connection to its
    /// origin when one is idle and open, else on a new one, which is kept for the next.
    pub async fn send(
        &self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        lane: Option<[u8; 32]>,
    ) -> Result<Sent, Error> {
        let waits = Waits::of(options);
        let origin = origin_of(request.uri(), lane)?;
        let post = request.method() == http::Method::POST;
        let mut request = origin_form(request)?;
        if let Some(mut sender) = self.take(&origin, Instant::now()) {
            match tokio::time::timeout(waits.first_byte, sender.try_send_request(request)).await {
                Err(_) => return Err(Error::ConnectionReadTimeout),
                Ok(Ok(response)) => return Ok(self.answer(origin, sender, response, waits, post)),
                // Closed before a byte was written: the request is whole, a new connection takes it.
                Ok(Err(mut refused)) => match refused.take_message() {
                    Some(again) => request = again,
                    None => return Err(refused.into_error().into()),
                },
            }
        }
        let mut sender = connect(&origin, waits.connect).await?;
        let response = tokio::time::timeout(waits.first_byte, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)??;
        Ok(self.answer(origin, sender, response, waits, post))
    }

    /// The response as the guest reads it (each gap between its bytes bounded), its
    /// connection kept for the next request once the body has been read to its end.
    fn answer(
        &self,
        origin: Origin,
        sender: SendRequest<WasiBody>,
        response: http::Response<Incoming>,
        waits: Waits,
        post: bool,
    ) -> Sent {
        // Kept only after a POST the server answered 2xx: an API that answered a call read
        // its body. A server that ignores a body (an early 4xx, a redirect, a GET's) would
        // take whatever the guest put there as the start of the next request, and the next
        // request, its key among them, as that one's body.
        let connection = (post && response.status().is_success()).then_some((origin, sender));
        let response = response.map(|body| Paced::new(body, waits.between_bytes, connection).boxed_unsync());
        (response, Box::new(async { Ok(()) }))
    }

    /// An idle, open connection to `origin`, the most recently kept first; connections
    /// idle longer than [`IDLE_FOR`] or closed are dropped on the way.
    fn take(&self, origin: &Origin, now: Instant) -> Option<SendRequest<WasiBody>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|k| now.saturating_duration_since(k.since) < IDLE_FOR && !k.sender.is_closed());
        let at = idle
            .iter()
            .rposition(|k| &k.origin == origin && k.sender.is_ready())?;
        idle.remove(at).map(|k| k.sender)
    }

    /// Keep `sender` (taken again only once hyper is ready for another request), dropping
    /// the expired and closed, and the longest idle past [`MAX_IDLE`].
    fn keep(&self, origin: Origin, sender: SendRequest<WasiBody>, now: Instant) {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        idle.retain(|k| now.saturating_duration_since(k.since) < IDLE_FOR && !k.sender.is_closed());
        idle.push_back(Kept {
            origin,
            sender,
            since: now,
        });
        while idle.len() > MAX_IDLE {
            idle.pop_front();
        }
    }
}

/// Whether `request` says exactly how long it is, so nothing of it can be read as part of
/// the next request on its connection: at most one `content-length`, all digits, and `0`
/// when there is no body at all. hyper sends a bodiless request's head as the guest wrote
/// it, so a `content-length: 500` with no body would have the server take the next 500
/// bytes, the next request's head and its credential among them, as this one's body. A
/// body that ends short of its length is cut off by wasmtime-wasi-http and the connection
/// closed by hyper; bytes past it are dropped by hyper's length encoder
/// (`transfer-encoding` is a header no guest may set).
pub fn framed(request: &http::Request<WasiBody>) -> bool {
    let mut lengths = request.headers().get_all(http::header::CONTENT_LENGTH).iter();
    let length = match (lengths.next(), lengths.next()) {
        (None, _) => return true,
        (Some(v), None) => v.as_bytes(),
        (Some(_), Some(_)) => return false,
    };
    let digits = !length.is_empty() && length.iter().all(u8::is_ascii_digit);
    digits && (!request.body().is_end_stream() || length.iter().all(|b| *b == b'0'))
}

/// The origin of an absolute URI: `https` or `http` (anything else is refused) and the
/// authority, with the scheme's port when it names none.
fn origin_of(uri: &http::Uri, lane: Option<[u8; 32]>) -> Result<Origin, Error> {
    let tls = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(Error::HttpProtocolError),
    };
    let authority = uri.authority().ok_or(Error::HttpRequestUriInvalid)?;
    let authority = match authority.port_u16() {
        Some(_) => authority.as_str().to_string(),
        None => format!("{}:{}", authority.as_str(), if tls { 443 } else { 80 }),
    };
    Ok(Origin { tls, authority, lane })
}

/// The request with its URI cut to the path and query, as a server (not a proxy) is sent it;
/// the `Host` header already names the authority.
fn origin_form(mut request: http::Request<WasiBody>) -> Result<http::Request<WasiBody>, Error> {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    *request.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    Ok(request)
}

/// A new connection to `origin` (for `https`, TLS checked against [`operator_trust`]), its
/// HTTP/1.1 state driven by a task of its own until it closes.
async fn connect(origin: &Origin, within: Duration) -> Result<SendRequest<WasiBody>, Error> {
    let handshake = async {
        let tcp = TcpStream::connect(&origin.authority)
            .await
            .map_err(Error::Connect)?;
        let _ = tcp.set_nodelay(true);
        if !origin.tls {
            return start(TokioIo::new(tcp)).await;
        }
        let name = server_name(&origin.authority)?;
        let tls = tokio_rustls::TlsConnector::from(tls_config()?)
            .connect(name, tcp)
            .await
            .map_err(Error::Tls)?;
        start(TokioIo::new(tls)).await
    };
    tokio::time::timeout(within, handshake)
        .await
        .map_err(|_| Error::ConnectionTimeout)?
}

/// HTTP/1.1 over `io`: the sender, its connection spawned.
async fn start<T>(io: T) -> Result<SendRequest<WasiBody>, Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
{
    let (sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    tokio::spawn(async move {
        // Its end (the peer's close, a broken stream) shows in the sender as closed.
        let _ = connection.await;
    });
    Ok(sender)
}

/// The TLS client configuration, made once ([`operator_trust`]), no client certificate.
fn tls_config() -> Result<std::sync::Arc<rustls::ClientConfig>, Error> {
    static CONFIG: std::sync::OnceLock<Result<std::sync::Arc<rustls::ClientConfig>, String>> =
        std::sync::OnceLock::new();
    CONFIG
        .get_or_init(operator_trust)
        .clone()
        .map_err(|why| Error::Tls(std::io::Error::other(why)))
}

/// The roots an endpoint's certificate is checked against, as for registries and webhooks:
/// `MURMUR_CA_FILE` alone when set (unreadable or holding no certificate, every `https`
/// call fails, naming it), else the system's bundle; on a host with neither, the public
/// web's roots compiled into wasmtime-wasi-http's client (what every call was checked
/// against before).
fn operator_trust() -> Result<std::sync::Arc<rustls::ClientConfig>, String> {
    use crate::http::tls::{operator_config, CaError, MAX_CA_FILE};
    let read = |p: &std::path::Path| crate::registry::store::read_small(p, MAX_CA_FILE);
    match operator_config(read) {
        Ok(config) => Ok(config),
        Err(CaError::Bundle(m)) => Err(format!("the CA bundle {m}")),
        Err(CaError::Named(m)) => Err(format!("MURMUR_CA_FILE {m}")),
        Err(CaError::Missing) => {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            Ok(std::sync::Arc::new(
                rustls::ClientConfig::builder()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            ))
        }
    }
}

/// The name a certificate must carry for `authority` (`host:port`, an IPv6 host in
/// brackets): an IP address, or the host name without its port.
fn server_name(authority: &str) -> Result<rustls::pki_types::ServerName<'static>, Error> {
    use rustls::pki_types::ServerName;
    if let Ok(at) = authority.parse::<std::net::SocketAddr>() {
        return Ok(ServerName::from(at.ip()));
    }
    let host = authority.rsplit_once(':').map_or(authority, |(host, _)| host);
    Ok(ServerName::try_from(host)?.to_owned())
}

/// A response body whose every gap between frames is bounded; read to its end, its
/// connection (when it is one to keep) goes back to the keeper (dropped before, the
/// connection closes with it).
struct Paced {
    body: Incoming,
    gap: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
    connection: Option<(Origin, SendRequest<WasiBody>)>,
    ended: bool,
}

impl Paced {
    fn new(body: Incoming, gap: Duration, connection: Option<(Origin, SendRequest<WasiBody>)>) -> Paced {
        Paced {
            body,
            gap,
            deadline: Box::pin(tokio::time::sleep(gap)),
            connection,
            ended: false,
        }
    }
}

impl Drop for Paced {
    fn drop(&mut self) {
        if self.ended || self.body.is_end_stream() {
            if let Some((origin, sender)) = self.connection.take() {
                keeper().keep(origin, sender, Instant::now());
            }
        }
    }
}

impl Body for Paced {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                // A gap past the clock's range keeps the first deadline (tokio's far future).
                if let Some(next) = tokio::time::Instant::now().checked_add(self.gap) {
                    self.deadline.as_mut().reset(next);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) if e.is_timeout() => Poll::Ready(Some(Err(Error::HttpResponseTimeout))),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Error::ConnectionReadTimeout))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_is_its_scheme_and_authority_with_the_port() {
        let o = |u: &str| origin_of(&u.parse().unwrap(), None);
        assert_eq!(
            o("https://api.example.com/v1/chat").unwrap(),
            Origin {
                tls: true,
                authority: "api.example.com:443".into(),
                lane: None,
            }
        );
        // Another key's connections, or a keyless one's, are another origin's.
        let keyed = origin_of(&"https://api.example.com/v1".parse().unwrap(), Some([1; 32])).unwrap();
        assert_ne!(keyed, o("https://api.example.com/v1").unwrap());
        assert_ne!(
            keyed,
            origin_of(&"https://api.example.com/v1".parse().unwrap(), Some([2; 32])).unwrap()
        );
        assert_eq!(o("http://127.0.0.1/x").unwrap().authority, "127.0.0.1:80");
        assert_eq!(o("http://[::1]:8080/x").unwrap().authority, "[::1]:8080");
        assert!(o("ftp://example.com/").is_err());
        assert!(o("/relative").is_err());
    }

    fn request(lengths: &[&str], body: &'static [u8]) -> http::Request<WasiBody> {
        let mut r = http::Request::post("http://127.0.0.1:9/v1/chat/completions");
        for l in lengths {
            r = r.header("content-length", *l);
        }
        let body = if body.is_empty() {
            http_body_util::Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed_unsync()
        } else {
            http_body_util::Full::new(Bytes::from_static(body))
                .map_err(|never| match never {})
                .boxed_unsync()
        };
        r.body(body).unwrap()
    }

    #[test]
    fn only_a_request_that_says_exactly_how_long_it_is_shares_a_connection() {
        assert!(framed(&request(&[], b"")));
        assert!(framed(&request(&[], b"{}")));
        assert!(framed(&request(&["0"], b"")));
        assert!(framed(&request(&["2"], b"{}")));
        // A length with no body would have the server read the next request as this body.
        assert!(!framed(&request(&["500"], b"")));
        assert!(!framed(&request(&["2", "2"], b"{}")));
        assert!(!framed(&request(&["+2"], b"{}")));
        assert!(!framed(&request(&[" 2"], b"{}")));
        assert!(!framed(&request(&[""], b"")));
    }

    #[test]
    fn a_certificate_name_is_the_host_or_the_address() {
        use rustls::pki_types::ServerName;
        assert_eq!(
            server_name("api.example.com:443").unwrap(),
            ServerName::try_from("api.example.com").unwrap()
        );
        assert_eq!(
            server_name("[::1]:443").unwrap(),
            ServerName::from(std::net::Ipv6Addr::LOCALHOST)
        );
        assert_eq!(
            server_name("127.0.0.1:8443").unwrap(),
            ServerName::from(std::net::Ipv4Addr::LOCALHOST)
        );
        assert!(server_name("bad host:443").is_err());
    }
}
