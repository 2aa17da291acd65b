//! An OCI reference as `mur push`, `mur pull` and the sources config write it:
//! `oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]` over HTTPS, or `oci+http://…` over plain HTTP
//! to a loopback host only. Repository, tag and digest follow the distribution
//! specification's grammar; anything else is refused here, before a byte is sent.

/// What a reference points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A tag (`:0.1.0`); tags move.
    Tag(String),
    /// A manifest digest (`@sha256:…`, 64 lowercase hex digits); digests do not.
    Digest(String),
}

/// A parsed reference. `target` is None when the text named only the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `https://host:port` or `http://host:port` (loopback only).
    pub base: String,
    /// `host:port` as written (brackets kept for IPv6), lowercased.
    pub host: String,
    pub repository: String,
    pub target: Option<Target>,
}

impl Reference {
    /// Parse `text`.
    pub fn parse(text: &str) -> Result<Reference, String> {
        let (rest, tls) = if let Some(r) = text.strip_prefix("oci://") {
            (r, true)
        } else if let Some(r) = text.strip_prefix("oci+http://") {
            (r, false)
        } else {
            return Err(format!("{text}: not an oci:// or oci+http:// reference"));
        };
        let (authority, path) = rest
            .split_once('/')
            .ok_or_else(|| format!("{text}: no repository after the host"))?;
        let host = authority_of(authority).ok_or_else(|| format!("{text}: not a host[:port]"))?;
        if !tls && !loopback(&host) {
            return Err(format!(
                "{text}: plain HTTP is taken only to a loopback host; use oci:// (HTTPS)"
            ));
        }
        let (repository, target) =
            split_target(path).ok_or_else(|| format!("{text}: not a repository[:tag|@sha256:digest]"))?;
        if !repository_ok(repository) {
            return Err(format!(
                "{text}: repository '{repository}' is not lowercase path components of letters and digits joined by . _ __ or -"
            ));
        }
        let scheme = if tls { "https" } else { "http" };
        Ok(Reference {
            base: format!("{scheme}://{host}"),
            host,
            repository: repository.to_string(),
            target,
        })
    }

    /// The same repository at another target.
    pub fn at(&self, target: Target) -> Reference {
        Reference {
            target: Some(target),
            ..self.clone()
        }
    }

    /// The reference written back (`oci://host/repo:tag`).
    pub fn to_text(&self) -> String {
        let scheme = if self.base.starts_with("https://") {
            "oci"
        } else {
            "oci+http"
        };
        let target = match &self.target {
            Some(Target::Tag(t)) => format!(":{t}"),
            Some(Target::Digest(d)) => format!("@{d}"),
            None => String::new(),
        };
        format!("{scheme}://{}/{}{target}", self.host, self.repository)
    }
}

/// `host[:port]` checked and lowercased (a bracketed IPv6 literal kept in brackets).
fn authority_of(authority: &str) -> Option<String> {
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (inside, after) = v6.split_once(']')?;
        inside.parse::<std::net::Ipv6Addr>().ok()?;
        (format!("[{inside}]"), after)
    } else {
        match authority.split_once(':') {
            Some((h, _)) => (h.to_string(), &authority[h.len()..]),
            None => (authority.to_string(), ""),
        }
    };
    let host_ok = host.starts_with('[')
        || (!host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
    let port_ok = match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(p) => {
            !p.is_empty()
                && p.len() <= 5
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.parse::<u16>().is_ok_and(|n| n > 0)
        }
    };
    (host_ok && port_ok).then(|| format!("{host}{port}").to_ascii_lowercase())
}

/// A loopback host: `localhost`, `127.0.0.0/8` or `[::1]` (port aside).
pub fn loopback(host_port: &str) -> bool {
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Split `repo[:tag|@digest]`.
fn split_target(path: &str) -> Option<(&str, Option<Target>)> {
    if let Some((repo, digest)) = path.split_once('@') {
        return digest_ok(digest).then(|| (repo, Some(Target::Digest(digest.to_string()))));
    }
    let last = path.rsplit('/').next().unwrap_or(path);
    match last.split_once(':') {
        Some((_, tag)) => {
            let repo = &path[..path.len() - tag.len() - 1];
            tag_ok(tag).then(|| (repo, Some(Target::Tag(tag.to_string()))))
        }
        None => Some((path, None)),
    }
}

/// `sha256:` and 64 lowercase hex digits.
pub fn digest_ok(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The distribution specification's tag: `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`.
pub fn tag_ok(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && tag.len() <= 128
        && bytes.all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

/// The distribution specification's repository name: `/`-separated components of
/// `[a-z0-9]+` joined by `.`, `_`, `__` or `-`s; at most 255 bytes.
pub fn repository_ok(repo: &str) -> bool {
    !repo.is_empty() && repo.len() <= 255 && repo.split('/').all(component_ok)
}

fn component_ok(c: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = c.as_bytes();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let dashes = sep.bytes().all(|b| b == b'-');
        if !(sep == "." || sep == "_" || sep == "__" || dashes) {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_into_their_parts() {
        let r = Reference::parse("oci://Registry.example:5000/murmur/local/hello:0.1.0").unwrap();
        assert_eq!(r.base, "https://registry.example:5000");
        assert_eq!(r.repository, "murmur/local/hello");
        assert_eq!(r.target, Some(Target::Tag("0.1.0".into())));
        assert_eq!(
            r.to_text(),
            "oci://registry.example:5000/murmur/local/hello:0.1.0"
        );
        let d = format!("sha256:{}", "a".repeat(64));
        let r = Reference::parse(&format!("oci+http://127.0.0.1:5000/x@{d}")).unwrap();
        assert_eq!(
            (r.base.as_str(), r.target),
            ("http://127.0.0.1:5000", Some(Target::Digest(d)))
        );
        let r = Reference::parse("oci+http://[::1]:80/a/b").unwrap();
        assert_eq!((r.host.as_str(), r.target), ("[::1]:80", None));
        assert!(Reference::parse("oci+http://localhost/a").is_ok());
    }

    #[test]
    fn what_the_grammar_does_not_admit_is_refused() {
        for bad in [
            "https://h/a",
            "oci://h",
            "oci:///a",
            "oci://h:0/a",
            "oci://h:99999/a",
            "oci://h:5/A",
            "oci://h/a//b",
            "oci://h/a-",
            "oci://h/a...b",
            "oci://h/a:",
            "oci://h/a:-x",
            "oci://h/a@sha256:abc",
            "oci://h/a@sha512:00",
            "oci://u@h/a",
            "oci://h/a b",
            "oci+http://10.0.0.1/a",
            "oci+http://example.com/a",
            "oci+http://127.0.0.1.example.com/a",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad}");
        }
        assert!(repository_ok("a__b/c-d/e.f/g---h"));
        assert!(!repository_ok("a___b"));
        assert!(tag_ok(&"x".repeat(128)) && !tag_ok(&"x".repeat(129)));
    }
}
