//! The few URL operations a driver needs: split an `http(s)://authority/path?query` URL into
//! the parts wasi:http takes, and append a path to an API base.

/// An absolute http or https URL, in the parts an outgoing wasi:http request is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub https: bool,
    pub authority: String,
    /// Starts with `/`; may carry a `?query`.
    pub path_and_query: String,
}

impl Url {
    /// Parse an absolute `http://` or `https://` URL (no userinfo, no fragment).
    pub fn parse(s: &str) -> Result<Url, String> {
        let s = s.trim();
        let (https, rest) = if let Some(r) = strip_prefix_ci(s, "https://") {
            (true, r)
        } else if let Some(r) = strip_prefix_ci(s, "http://") {
            (false, r)
        } else {
            return Err(format!("'{s}' is not an http:// or https:// URL"));
        };
        if rest.contains('#') {
            return Err(format!("'{s}': a URL with a fragment"));
        }
        if rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!("'{s}': a URL with whitespace or control characters"));
        }
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(split);
        if authority.is_empty() {
            return Err(format!("'{s}': a URL without a host"));
        }
        if authority.contains('@') {
            return Err(format!("'{s}': a URL with credentials in it"));
        }
        let path_and_query = if tail.starts_with('/') {
            tail.to_string()
        } else {
            format!("/{tail}")
        };
        Ok(Url {
            https,
            authority: authority.to_string(),
            path_and_query,
        })
    }

    /// This URL as an API base with `suffix` (starting with `/`) appended to its path: a
    /// trailing slash of the base is dropped, and a query stays at the end.
    pub fn join(&self, suffix: &str) -> Url {
        let (path, query) = match self.path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (self.path_and_query.as_str(), None),
        };
        let mut joined = path.trim_end_matches('/').to_string();
        joined.push_str(suffix);
        if let Some(q) = query {
            joined.push('?');
            joined.push_str(q);
        }
        Url {
            https: self.https,
            authority: self.authority.clone(),
            path_and_query: joined,
        }
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.path_and_query)
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_joins() {
        let u = Url::parse("http://localhost:11434/v1").unwrap();
        assert_eq!(
            (u.https, u.authority.as_str(), u.path_and_query.as_str()),
            (false, "localhost:11434", "/v1")
        );
        assert_eq!(
            u.join("/chat/completions").to_string(),
            "http://localhost:11434/v1/chat/completions"
        );
        let u = Url::parse("https://api.openai.com/v1/").unwrap();
        assert_eq!(
            u.join("/chat/completions").to_string(),
            "https://api.openai.com/v1/chat/completions"
        );
        let u = Url::parse("HTTPS://api.anthropic.com").unwrap();
        assert_eq!(
            u.join("/v1/messages").to_string(),
            "https://api.anthropic.com/v1/messages"
        );
        let u = Url::parse("http://127.0.0.1:8080/").unwrap();
        assert_eq!(u.join("/v1/messages").path_and_query, "/v1/messages");
        let u = Url::parse("https://gw.example/openai/v1?api-version=2").unwrap();
        assert_eq!(
            u.join("/chat/completions").path_and_query,
            "/openai/v1/chat/completions?api-version=2"
        );
        let u = Url::parse("http://h?x=1").unwrap();
        assert_eq!(u.path_and_query, "/?x=1");
    }

    #[test]
    fn refuses_what_is_not_an_http_url() {
        for bad in [
            "",
            "localhost:11434",
            "ftp://x/",
            "https://",
            "https:///v1",
            "https://u:p@h/",
            "https://h/#f",
            "https://h/a b",
            "é",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }
}
