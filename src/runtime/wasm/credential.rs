//! The provider credential: attached by the host, never seen by a guest. A driver's request
//! whose origin (scheme, host, port) is exactly `inference.endpoint`'s gets the key in the
//! header the driver artifact's own manifest declares, replacing whatever the guest set; a
//! request to any other origin goes out as the guest wrote it, without the key. What the
//! endpoint answered (status, `retry-after`, a broken connection and why it broke) is
//! observed here for the retry decision, so a driver cannot hide a 429 or claim one, and for
//! the failure's words: the host says "cannot resolve HOST", not a guest's dump of an error
//! code.

use http::{HeaderName, HeaderValue, Uri};
use std::sync::{Arc, Mutex};

/// A request's origin, ports made explicit and the host lowercased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

/// The origin of an absolute URI (`None` for anything but http and https).
pub fn origin_of(uri: &Uri) -> Option<Origin> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let host = uri.host()?.to_ascii_lowercase();
    if host.is_empty() {
        return None;
    }
    Some(Origin {
        scheme,
        host,
        port: uri.port_u16().unwrap_or(default),
    })
}

/// The (header, value) forms a driver's `upstream_auth` may declare: the ones providers
/// use. Any other header is refused, so a hostile driver cannot have the key sent in a
/// header a server reflects back into a response it can read (`origin`, `cookie`, ...).
pub const AUTH_FORMS: [(&str, &str); 4] = [
    ("authorization", "Bearer {key}"),
    ("x-api-key", "{key}"),
    ("api-key", "{key}"),
    ("x-goog-api-key", "{key}"),
];

/// Whether a server could read `path` as another path than its bytes: a `.` or `..`
/// segment, an encoded dot, slash or backslash (`%2e`, `%2f`, `%5c`, any case), or a
/// backslash. `/v1/../debug/echo` starts with `/v1/` but may reach `/debug/echo`; such a
/// request never carries the key (it goes out as the guest wrote it).
fn ambiguous(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    path.contains('\\')
        || ["%2e", "%2f", "%5c"].iter().any(|e| lower.contains(e))
        || path.split('/').any(|s| s == "." || s == "..")
}

/// `inference.endpoint` as requests are matched against it: its origin and path prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    origin: Origin,
    /// The endpoint's path without a trailing `/` ("" for the whole origin).
    path: String,
}

impl Endpoint {
    /// `endpoint`, an absolute http(s) URL with a host and no userinfo.
    pub fn parse(endpoint: &str) -> Result<Endpoint, String> {
        let uri: Uri = endpoint
            .parse()
            .map_err(|e| format!("inference.endpoint is not a URL: {e}"))?;
        let origin = origin_of(&uri).ok_or("inference.endpoint is not an http(s) URL with a host")?;
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err("inference.endpoint must not carry userinfo ('@')".into());
        }
        Ok(Endpoint {
            origin,
            path: uri.path().trim_end_matches('/').to_string(),
        })
    }

    /// Whether `uri` goes to the endpoint: its origin, and a path at or below the
    /// endpoint's path that means what its bytes say (see [`ambiguous`]).
    pub fn matches(&self, uri: &Uri) -> bool {
        let path = uri.path();
        origin_of(uri).is_some_and(|o| o == self.origin)
            && !ambiguous(path)
            && (self.path.is_empty()
                || path == self.path
                || path
                    .strip_prefix(self.path.as_str())
                    .is_some_and(|rest| rest.starts_with('/')))
    }
}

/// The key, its header and the one origin (and path prefix) it may go to.
pub struct Credential {
    endpoint: Endpoint,
    header: HeaderName,
    value: HeaderValue,
    key: Vec<u8>,
    /// The sha256 of the header and value sent: connections that carried this credential
    /// are kept apart from any other's (`keepalive`), without another copy of the key.
    lane: [u8; 32],
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credential({} for {}://{}:{}{}, <redacted>)",
            self.header,
            self.endpoint.origin.scheme,
            self.endpoint.origin.host,
            self.endpoint.origin.port,
            self.endpoint.path
        )
    }
}

impl Credential {
    /// `template` is the header value with `{key}` where the key goes (`Bearer {key}`);
    /// the pair must be one of [`AUTH_FORMS`], the endpoint an absolute http(s) URL.
    pub fn new(endpoint: &str, header: &str, template: &str, key: &str) -> Result<Credential, String> {
        let endpoint = Endpoint::parse(endpoint)?;
        let header_lc = header.trim().to_ascii_lowercase();
        if !AUTH_FORMS.iter().any(|(h, t)| *h == header_lc && *t == template) {
            let forms: Vec<String> = AUTH_FORMS.iter().map(|(h, t)| format!("{h}: {t}")).collect();
            return Err(format!(
                "upstream_auth '{header}: {template}' is not a credential form this runtime sends (one of: {})",
                forms.join(", ")
            ));
        }
        let header = HeaderName::from_bytes(header_lc.as_bytes())
            .map_err(|_| format!("upstream_auth.header '{header}' is not a header name"))?;
        if key.is_empty() {
            return Err("the API key is empty".into());
        }
        let mut value = HeaderValue::from_str(&template.replace("{key}", key))
            .map_err(|_| "the API key is not a valid header value".to_string())?;
        value.set_sensitive(true);
        let lane = {
            use sha2::Digest;
            let mut h = sha2::Sha256::new();
            h.update(header.as_str().as_bytes());
            h.update(b":");
            h.update(value.as_bytes());
            h.finalize().into()
        };
        Ok(Credential {
            endpoint,
            header,
            value,
            key: key.as_bytes().to_vec(),
            lane,
        })
    }

    /// What tells this credential's kept connections from any other's.
    pub fn lane(&self) -> [u8; 32] {
        self.lane
    }

    /// Whether `uri` goes to the endpoint (see [`Endpoint::matches`]).
    pub fn matches(&self, uri: &Uri) -> bool {
        self.endpoint.matches(uri)
    }

    /// Put the key on `headers`, replacing every value the guest gave that header.
    pub fn attach(&self, headers: &mut http::HeaderMap) {
        headers.remove(&self.header);
        headers.insert(self.header.clone(), self.value.clone());
    }

    /// Drop every response header whose value holds the key (a server echoing it must not
    /// hand it to the guest).
    pub fn scrub(&self, headers: &mut http::HeaderMap) {
        let k = self.key.as_slice();
        let echoed: Vec<HeaderName> = headers
            .iter()
            .filter(|(_, v)| v.as_bytes().windows(k.len()).any(|w| w == k))
            .map(|(n, _)| n.clone())
            .collect();
        for n in echoed {
            headers.remove(&n);
        }
    }
}

/// What the endpoint last answered, as the host saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The last response status from the endpoint.
    pub status: Option<u16>,
    /// Its `retry-after`, in whole seconds.
    pub retry_after: Option<u64>,
    /// A request to the endpoint failed before a response arrived.
    pub broken: bool,
    /// Why, as the host can say it ([`failure`]).
    pub failure: Option<String>,
}

/// Shared between the gate (on the guest's store) and the caller deciding on a retry.
pub type Observer = Arc<Mutex<Observed>>;

/// Why a request to `authority` (host `host`) failed before a response, in words: a name
/// that did not resolve is "cannot resolve HOST", whatever code the guest is handed.
pub fn failure(host: &str, authority: &str, e: &wasmtime_wasi_http::Error) -> String {
    use wasmtime_wasi_http::Error as E;
    const LOOKUP: &str = "failed to lookup address information";
    match e {
        E::Connect(io) if io.to_string().starts_with(LOOKUP) => {
            let why = io.to_string();
            let why = why.trim_start_matches(LOOKUP).trim_start_matches(':').trim();
            format!("cannot resolve {host}: {why}")
        }
        E::Connect(io) if io.kind() == std::io::ErrorKind::AddrNotAvailable => {
            format!("cannot resolve {host}: {io}")
        }
        E::DnsTimeout => format!("cannot resolve {host}: the lookup timed out"),
        E::DnsError { .. } => format!("cannot resolve {host} ({e})"),
        E::Connect(io) => format!("cannot connect to {authority}: {io}"),
        E::ConnectionTimeout => format!("cannot connect to {authority}: timed out"),
        E::ConnectionRefused => format!("{authority} refused the connection"),
        E::Tls(io) => format!("TLS with {host} failed: {io}"),
        other => format!("{authority}: {other}"),
    }
}

/// Record one outcome on `observer`: the response's status and `retry-after`, or why none
/// came.
pub fn observe(observer: &Observer, outcome: Result<(u16, Option<&HeaderValue>), String>) {
    let mut o = observer.lock().unwrap_or_else(|p| p.into_inner());
    match outcome {
        Ok((status, retry_after)) => {
            o.status = Some(status);
            o.retry_after = retry_after
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.trim().parse::<u64>().ok());
            o.broken = false;
            o.failure = None;
        }
        Err(why) => {
            o.status = None;
            o.retry_after = None;
            o.broken = true;
            o.failure = Some(why);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_is_said_in_words() {
        use wasmtime_wasi_http::Error as E;
        let lookup = std::io::Error::other("failed to lookup address information: Name or service not known");
        let said = |e: E| failure("api.x.invalid", "api.x.invalid:443", &e);
        assert_eq!(
            said(E::Connect(lookup)),
            "cannot resolve api.x.invalid: Name or service not known"
        );
        assert_eq!(
            said(E::DnsTimeout),
            "cannot resolve api.x.invalid: the lookup timed out"
        );
        assert_eq!(
            said(E::ConnectionRefused),
            "api.x.invalid:443 refused the connection"
        );
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(said(E::Connect(refused)).starts_with("cannot connect to api.x.invalid:443: "));
    }

    #[test]
    fn only_the_endpoint_origin_matches() {
        let c = Credential::new(
            "http://127.0.0.1:8080/v1",
            "authorization",
            "Bearer {key}",
            "sk-1",
        )
        .unwrap();
        assert!(c.matches(&"http://127.0.0.1:8080/v1/chat/completions".parse().unwrap()));
        assert!(c.matches(&"HTTP://127.0.0.1:8080/v1".parse().unwrap()));
        assert!(
            !c.matches(&"http://127.0.0.1:8080/other".parse().unwrap()),
            "outside the endpoint's path"
        );
        assert!(!c.matches(&"http://127.0.0.1:8080/v10/x".parse().unwrap()));
        assert!(!c.matches(&"http://127.0.0.1:8081/v1".parse().unwrap()));
        assert!(!c.matches(&"https://127.0.0.1:8080/v1".parse().unwrap()));
        assert!(!c.matches(&"http://localhost:8080/v1".parse().unwrap()));
        for dotted in [
            "http://127.0.0.1:8080/v1/../debug/echo",
            "http://127.0.0.1:8080/v1/./chat",
            "http://127.0.0.1:8080/v1/%2e%2e/debug/echo",
            "http://127.0.0.1:8080/v1/%2E%2e/debug/echo",
            "http://127.0.0.1:8080/v1/.%2E/debug",
            "http://127.0.0.1:8080/v1%2f..%2fdebug",
            "http://127.0.0.1:8080/v1/a%2Fb",
            "http://127.0.0.1:8080/v1/a%5cb",
            "http://127.0.0.1:8080/v1/..",
        ] {
            assert!(!c.matches(&dotted.parse().unwrap()), "{dotted}");
        }
        let a = Credential::new("https://API.anthropic.com", "x-api-key", "{key}", "k").unwrap();
        assert!(a.matches(&"https://api.anthropic.com:443/v1/messages".parse().unwrap()));
        assert!(!a.matches(&"https://api.anthropic.com.evil/v1/messages".parse().unwrap()));
    }

    #[test]
    fn attach_replaces_the_guest_value_and_debug_hides_the_key() {
        let c = Credential::new("https://a.example", "x-api-key", "{key}", "sk-secret").unwrap();
        let mut h = http::HeaderMap::new();
        h.append("x-api-key", HeaderValue::from_static("guest-1"));
        h.append("X-Api-Key", HeaderValue::from_static("guest-2"));
        c.attach(&mut h);
        let all: Vec<_> = h.get_all("x-api-key").iter().collect();
        assert_eq!(all, vec![&HeaderValue::from_static("sk-secret")]);
        assert!(!format!("{c:?}").contains("sk-secret"));
    }

    #[test]
    fn bad_declarations_are_refused() {
        for (h, t) in [
            ("host", "{key}"),
            ("origin", "{key}"),
            ("cookie", "a={key}"),
            ("x key", "{key}"),
            ("x-api-key", "no placeholder"),
            ("authorization", "Basic {key}"),
        ] {
            assert!(
                Credential::new("https://a.example", h, t, "k").is_err(),
                "{h}: {t}"
            );
        }
        assert!(Credential::new("https://a.example", "X-Api-Key", "{key}", "k").is_ok());
        assert!(Credential::new("https://a.example", "x-api-key", "{key}", "bad\nkey").is_err());
        assert!(Credential::new("https://a.example", "x-api-key", "{key}", "").is_err());
        assert!(Credential::new("ftp://a.example", "x-api-key", "{key}", "k").is_err());
        assert!(Credential::new("http://localhost:80@evil.example/v1", "x-api-key", "{key}", "k").is_err());
    }

    #[test]
    fn an_echoed_key_is_scrubbed_from_response_headers() {
        let c = Credential::new("https://a.example", "x-api-key", "{key}", "sk-secret").unwrap();
        let mut h = http::HeaderMap::new();
        h.insert(
            "access-control-allow-origin",
            HeaderValue::from_static("sk-secret"),
        );
        h.insert("x-echo", HeaderValue::from_static("got sk-secret here"));
        h.insert("content-type", HeaderValue::from_static("application/json"));
        c.scrub(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("content-type"));
    }
}
