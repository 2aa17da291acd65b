//! The provider credential: attached by the host, never seen by a guest. A driver's request
//! whose origin (scheme, host, port) is exactly `inference.endpoint`'s gets the key in the
//! header the driver artifact's own manifest declares, replacing whatever the guest set; a
//! request to any other origin goes out as the guest wrote it, without the key. What the
//! endpoint answered (status, `retry-after`, a broken connection) is observed here for the
//! retry decision, so a driver cannot hide a 429 or claim one.

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

/// The key, its header and the one origin it may go to.
pub struct Credential {
    origin: Origin,
    header: HeaderName,
    value: HeaderValue,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credential({} for {}://{}:{}, <redacted>)",
            self.header, self.origin.scheme, self.origin.host, self.origin.port
        )
    }
}

impl Credential {
    /// `template` is the header value with `{key}` where the key goes
    /// (`Bearer {key}`); the endpoint must be an absolute http(s) URL.
    pub fn new(endpoint: &str, header: &str, template: &str, key: &str) -> Result<Credential, String> {
        let uri: Uri = endpoint
            .parse()
            .map_err(|e| format!("inference.endpoint is not a URL: {e}"))?;
        let origin = origin_of(&uri).ok_or("inference.endpoint is not an http(s) URL with a host")?;
        let header = HeaderName::from_bytes(header.trim().as_bytes())
            .map_err(|_| format!("upstream_auth.header '{header}' is not a header name"))?;
        let forbidden = ["host", "content-length", "transfer-encoding", "connection"];
        if forbidden.contains(&header.as_str()) {
            return Err(format!(
                "upstream_auth.header '{header}' cannot carry a credential"
            ));
        }
        if !template.contains("{key}") {
            return Err("upstream_auth.value must contain {key}".into());
        }
        let mut value = HeaderValue::from_str(&template.replace("{key}", key))
            .map_err(|_| "the API key (or upstream_auth.value) is not a valid header value".to_string())?;
        value.set_sensitive(true);
        Ok(Credential {
            origin,
            header,
            value,
        })
    }

    /// Whether `uri` goes to the endpoint's origin.
    pub fn matches(&self, uri: &Uri) -> bool {
        origin_of(uri).is_some_and(|o| o == self.origin)
    }

    /// Put the key on `headers`, replacing every value the guest gave that header.
    pub fn attach(&self, headers: &mut http::HeaderMap) {
        headers.remove(&self.header);
        headers.insert(self.header.clone(), self.value.clone());
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
}

/// Shared between the gate (on the guest's store) and the caller deciding on a retry.
pub type Observer = Arc<Mutex<Observed>>;

/// Record one outcome on `observer`.
pub fn observe(observer: &Observer, outcome: Result<(u16, Option<&HeaderValue>), ()>) {
    let mut o = observer.lock().unwrap_or_else(|p| p.into_inner());
    match outcome {
        Ok((status, retry_after)) => {
            o.status = Some(status);
            o.retry_after = retry_after
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.trim().parse::<u64>().ok());
            o.broken = false;
        }
        Err(()) => {
            o.status = None;
            o.retry_after = None;
            o.broken = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(c.matches(&"HTTP://127.0.0.1:8080/other".parse().unwrap()));
        assert!(!c.matches(&"http://127.0.0.1:8081/v1".parse().unwrap()));
        assert!(!c.matches(&"https://127.0.0.1:8080/v1".parse().unwrap()));
        assert!(!c.matches(&"http://localhost:8080/v1".parse().unwrap()));
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
        assert!(Credential::new("https://a.example", "host", "{key}", "k").is_err());
        assert!(Credential::new("https://a.example", "x key", "{key}", "k").is_err());
        assert!(Credential::new("https://a.example", "x-api-key", "no placeholder", "k").is_err());
        assert!(Credential::new("https://a.example", "x-api-key", "{key}", "bad\nkey").is_err());
        assert!(Credential::new("ftp://a.example", "x-api-key", "{key}", "k").is_err());
    }
}
