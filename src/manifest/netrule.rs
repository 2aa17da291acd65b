//! Network destination rules (`capabilities.network.allow`, `capabilities.peer_fetch.allow`):
//! parsed once into a typed rule, and one coverage function used by the spawn envelope and by
//! the runtime's outbound gate alike.

use std::fmt;

/// The scheme of a URL-form rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    Http,
    Https,
}

/// One allowed destination. `scheme: None` spans both schemes; `port: None` spans every port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NetRule {
    pub scheme: Option<Scheme>,
    /// Lowercased host name, IPv4 literal, or bracketed IPv6 literal.
    pub host: String,
    pub port: Option<u16>,
}

impl NetRule {
    /// Parse `host`, `host:port`, or `http(s)://host[:port][/]`. A URL form without a port
    /// gets its scheme's default (80 or 443), so `https://h` and `https://h:443` are one rule.
    pub fn parse(entry: &str) -> Result<NetRule, String> {
        let text = entry.trim();
        if text.is_empty() {
            return Err("empty entry".into());
        }
        let (scheme, rest) = if let Some(r) = text.strip_prefix("https://") {
            (Some(Scheme::Https), r)
        } else if let Some(r) = text.strip_prefix("http://") {
            (Some(Scheme::Http), r)
        } else if text.contains("://") {
            return Err("only http:// and https:// URLs are allowed".into());
        } else {
            (None, text)
        };
        let authority = match scheme {
            Some(_) => match rest.split_once('/') {
                Some((a, "")) => a,
                Some(_) => return Err("a URL entry may have no path other than '/'".into()),
                None => rest,
            },
            None => rest,
        };
        if authority.contains(['/', '?', '#', '@', '*']) || authority.chars().any(char::is_whitespace) {
            return Err("expected host, host:port or http(s)://host[:port]".into());
        }
        let (host, port) = split_host_port(authority)?;
        let port = match (port, scheme) {
            (Some(p), _) => Some(p),
            (None, Some(Scheme::Http)) => Some(80),
            (None, Some(Scheme::Https)) => Some(443),
            (None, None) => None,
        };
        Ok(NetRule { scheme, host, port })
    }

    /// A single destination: scheme, host and port all known.
    pub fn destination(scheme: Scheme, host: &str, port: u16) -> NetRule {
        NetRule {
            scheme: Some(scheme),
            host: host.to_ascii_lowercase(),
            port: Some(port),
        }
    }

    /// Whether this rule allows everything `other` allows. A bare `example.com` covers
    /// `https://example.com`; `https://example.com` covers only that exact form.
    pub fn covers(&self, other: &NetRule) -> bool {
        self.host == other.host
            && (self.scheme.is_none() || self.scheme == other.scheme)
            && (self.port.is_none() || self.port == other.port)
    }
}

/// The destination an endpoint URL (`http(s)://host[:port][/path]`) names, with its
/// scheme's default port; `None` for any other scheme, userinfo or a bad authority.
pub fn endpoint(url: &str) -> Option<NetRule> {
    let (scheme, rest) = if let Some(r) = url.strip_prefix("https://") {
        (Scheme::Https, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (Scheme::Http, r)
    } else {
        return None;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return None;
    }
    let (host, port) = split_host_port(authority).ok()?;
    let port = port.unwrap_or(match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    });
    Some(NetRule::destination(scheme, &host, port))
}

/// Whether some rule of `rules` covers `rule`.
pub fn any_covers(rules: &[NetRule], rule: &NetRule) -> bool {
    rules.iter().any(|r| r.covers(rule))
}

fn split_host_port(authority: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (inside, after) = v6.split_once(']').ok_or("unclosed '[' in IPv6 host")?;
        if inside.is_empty()
            || !inside
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
        {
            return Err("invalid IPv6 literal".into());
        }
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or("expected ':' after ']'")?),
        };
        (format!("[{}]", inside.to_ascii_lowercase()), port)
    } else {
        match authority.split_once(':') {
            Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
            None => (authority.to_ascii_lowercase(), None),
        }
    };
    if !host.starts_with('[') {
        let labels_ok = !host.is_empty()
            && host.len() <= 253
            && host.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && !l.starts_with('-')
                    && !l.ends_with('-')
                    && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            });
        if !labels_ok {
            return Err(format!("'{host}' is not a valid host name"));
        }
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => return Err(format!("'{p}' is not a port (1-65535)")),
        },
    };
    Ok((host, port))
}

impl fmt::Display for NetRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.scheme, self.port) {
            (Some(Scheme::Https), Some(p)) => write!(f, "https://{}:{p}", self.host),
            (Some(Scheme::Http), Some(p)) => write!(f, "http://{}:{p}", self.host),
            (Some(Scheme::Https), None) => write!(f, "https://{}", self.host),
            (Some(Scheme::Http), None) => write!(f, "http://{}", self.host),
            (None, Some(p)) => write!(f, "{}:{p}", self.host),
            (None, None) => f.write_str(&self.host),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> NetRule {
        NetRule::parse(s).unwrap()
    }

    #[test]
    fn forms() {
        assert_eq!(
            r("Example.COM"),
            NetRule {
                scheme: None,
                host: "example.com".into(),
                port: None
            }
        );
        assert_eq!(r("example.com:8443").port, Some(8443));
        assert_eq!(r("https://example.com"), r("https://example.com:443/"));
        assert_eq!(r("http://example.com").port, Some(80));
        assert_eq!(r("[::1]:9").host, "[::1]");
        assert_eq!(r("127.0.0.1").host, "127.0.0.1");
        for bad in [
            "",
            "ftp://x",
            "https://x/path",
            "https://x?q",
            "x:0",
            "x:70000",
            "x:",
            "a b",
            "*.example.com",
            "user@x",
            "-x.com",
            "x..com",
            "https://",
            "[::1",
            "x:+1",
        ] {
            assert!(NetRule::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn coverage() {
        assert!(r("example.com").covers(&r("https://example.com")));
        assert!(r("example.com").covers(&r("example.com:8080")));
        assert!(r("example.com").covers(&r("example.com")));
        assert!(!r("https://example.com").covers(&r("example.com")));
        assert!(!r("https://example.com").covers(&r("http://example.com")));
        assert!(!r("https://example.com").covers(&r("https://example.com:8443")));
        assert!(r("https://example.com").covers(&r("https://example.com:443")));
        assert!(r("example.com:443").covers(&r("https://example.com")));
        assert!(!r("example.com:443").covers(&r("example.com")));
        assert!(!r("example.com").covers(&r("api.example.com")));
        let d = NetRule::destination(Scheme::Https, "API.example.com", 443);
        assert!(r("api.example.com").covers(&d));
        assert_eq!(r("https://example.com").to_string(), "https://example.com:443");
    }
}
