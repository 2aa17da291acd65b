//! The operator's registry credentials, read from the file container tools already keep
//! (`$REGISTRY_AUTH_FILE`, else `~/.docker/config.json`): the `auths` entry of a host,
//! `{"auth": base64("user:secret")}`. Credential helpers (`credsStore`, `credHelpers`) are
//! not run: running a program named by a config file is a door this client keeps shut.

use crate::b64;
use serde_json::Value;

/// A user and secret for one registry host. Debug never shows the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    secret: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <secret>)", self.user)
    }
}

impl Credentials {
    pub fn new(user: &str, secret: &str) -> Credentials {
        Credentials {
            user: user.to_string(),
            secret: secret.to_string(),
        }
    }

    /// The `authorization` header value for HTTP Basic.
    pub fn basic(&self) -> String {
        format!(
            "Basic {}",
            b64::encode_standard(format!("{}:{}", self.user, self.secret).as_bytes())
        )
    }
}

/// Largest credentials file read.
pub const MAX_AUTH_FILE: u64 = 1 << 20;

/// The credentials `config` (the file's bytes) holds for `host` (`host[:port]`), if any.
/// Keys are matched as the docker CLI writes them: `host`, or a URL naming it.
pub fn credentials(config: &[u8], host: &str) -> Result<Option<Credentials>, String> {
    let v: Value = serde_json::from_slice(config).map_err(|e| format!("not JSON: {e}"))?;
    let Some(auths) = v.get("auths").and_then(Value::as_object) else {
        return Ok(None);
    };
    let entry = auths.iter().find(|(k, _)| key_host(k).eq_ignore_ascii_case(host));
    let Some((key, entry)) = entry else {
        return Ok(None);
    };
    let Some(auth) = entry.get("auth").and_then(Value::as_str) else {
        return Ok(None);
    };
    let raw =
        b64::decode_standard(auth.as_bytes()).map_err(|_| format!("the auth of {key} is not base64"))?;
    let text = String::from_utf8(raw).map_err(|_| format!("the auth of {key} is not UTF-8"))?;
    let (user, secret) = text
        .split_once(':')
        .ok_or_else(|| format!("the auth of {key} is not user:secret"))?;
    Ok(Some(Credentials::new(user, secret)))
}

/// The `host[:port]` of an `auths` key: `host`, `https://host/v1/`, `http://host`.
fn key_host(key: &str) -> &str {
    let rest = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    rest.split('/').next().unwrap_or(rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_found_by_host_in_any_spelling() {
        let auth = b64::encode_standard(b"ann:s3:cret");
        for key in [
            "127.0.0.1:5000",
            "https://127.0.0.1:5000/v1/",
            "http://127.0.0.1:5000",
        ] {
            let cfg = format!(r#"{{"auths": {{"{key}": {{"auth": "{auth}"}}}}}}"#);
            let c = credentials(cfg.as_bytes(), "127.0.0.1:5000").unwrap().unwrap();
            assert_eq!(c, Credentials::new("ann", "s3:cret"));
            assert!(!format!("{c:?}").contains("s3"));
            assert_eq!(credentials(cfg.as_bytes(), "127.0.0.1:5001").unwrap(), None);
        }
        assert_eq!(credentials(br#"{"credsStore": "x"}"#, "h").unwrap(), None);
        assert!(credentials(br#"{"auths": {"h": {"auth": "!!"}}}"#, "h").is_err());
        assert!(credentials(b"{", "h").is_err());
        assert_eq!(Credentials::new("a", "b").basic(), "Basic YTpi");
    }
}
