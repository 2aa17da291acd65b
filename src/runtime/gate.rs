//! The outbound HTTP gate: a guest request goes out only when a `capabilities.network.allow`
//! rule covers its scheme, host and port. Pure, so it is tested without a guest.

use crate::manifest::netrule::{any_covers, NetRule, Scheme};

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub String);

/// Check a request's whole authority before its host: userinfo (`user@host`) is refused,
/// since the connector dials the authority as written and a rule names a host, never a user.
pub fn check_authority(authority: &str) -> Result<(), Denied> {
    if authority.contains('@') {
        return Err(Denied("a request authority must not carry userinfo ('@')".into()));
    }
    Ok(())
}

/// Check one destination. `port: None` means the scheme's default.
pub fn check(rules: &[NetRule], scheme: &str, host: &str, port: Option<u16>) -> Result<(), Denied> {
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => return Err(Denied(format!("scheme '{other}' is not allowed"))),
    };
    let port = port.unwrap_or(match scheme {
        Scheme::Http => 80,
        Scheme::Https => 443,
    });
    if host.is_empty() {
        return Err(Denied("the request names no host".into()));
    }
    let dest = NetRule::destination(scheme, host, port);
    if any_covers(rules, &dest) {
        Ok(())
    } else {
        let s = match scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        Err(Denied(format!(
            "{s}://{}:{port} is not in capabilities.network.allow",
            dest.host
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(entries: &[&str]) -> Vec<NetRule> {
        entries.iter().map(|e| NetRule::parse(e).unwrap()).collect()
    }

    #[test]
    fn covers_by_scheme_host_and_port() {
        let r = rules(&[
            "https://api.example.com",
            "http://127.0.0.1:8080",
            "docs.example.com",
        ]);
        assert!(check(&r, "https", "api.example.com", None).is_ok());
        assert!(check(&r, "https", "API.Example.com", Some(443)).is_ok());
        assert!(
            check(&r, "http", "api.example.com", None).is_err(),
            "scheme differs"
        );
        assert!(
            check(&r, "https", "api.example.com", Some(8443)).is_err(),
            "port differs"
        );
        assert!(check(&r, "http", "127.0.0.1", Some(8080)).is_ok());
        assert!(check(&r, "http", "127.0.0.1", Some(8081)).is_err());
        assert!(
            check(&r, "http", "docs.example.com", Some(1234)).is_ok(),
            "bare host spans schemes and ports"
        );
        assert!(check(&r, "https", "evil.example.com", None).is_err());
        assert!(check(&r, "https", "api.example.com.evil", None).is_err());
        assert!(check(&r, "ftp", "api.example.com", None).is_err());
        assert!(check(&r, "https", "", None).is_err());
    }

    #[test]
    fn userinfo_is_refused() {
        assert!(check_authority("127.0.0.1:8080").is_ok());
        assert!(check_authority("user@127.0.0.1:8080").is_err());
        assert!(check_authority("127.0.0.1:8080@evil.example").is_err());
    }

    #[test]
    fn nothing_is_allowed_by_an_empty_list() {
        let err = check(&[], "https", "example.com", None).unwrap_err();
        assert_eq!(
            err.0,
            "https://example.com:443 is not in capabilities.network.allow"
        );
    }
}
