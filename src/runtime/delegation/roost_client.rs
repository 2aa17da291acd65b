//! The runtime's side of the roost API: `POST /register`, `POST /spawn` and
//! `POST /deregister` on the loopback daemon at `MURMUR_ROOST_URL`. The credential the
//! roost mints lives only in this process's memory ([`Credential`]): never in a file, an
//! environment variable, a trace line, a tool result or an error message.

use crate::http::client::{self, Options};
use serde_json::{json, Value};
use std::sync::atomic::{compiler_fence, Ordering};
use std::time::Duration;

/// The longest roost answer read, bytes (its bodies are a few hundred).
const MAX_ANSWER: usize = 64 * 1024;
/// The longest token accepted from the roost.
const MAX_TOKEN: usize = 4096;

/// A session's spawn credential (`msc1.…`): redacted in `Debug`, overwritten on drop.
pub struct Credential(Vec<u8>);

impl Credential {
    fn header(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

impl Drop for Credential {
    fn drop(&mut self) {
        self.0.fill(0);
        std::hint::black_box(&mut self.0);
        compiler_fence(Ordering::SeqCst);
    }
}

/// An approval as `POST /spawn` granted it: the token (for the child's stdin only) and the
/// artifact the roost judged.
pub struct Approval {
    pub token: String,
    pub name: String,
    pub version: String,
    pub sha256: String,
}

impl std::fmt::Debug for Approval {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Approval({}@{}, <redacted>)", self.name, self.version)
    }
}

impl Drop for Approval {
    fn drop(&mut self) {
        let mut bytes = std::mem::take(&mut self.token).into_bytes();
        bytes.fill(0);
        std::hint::black_box(&mut bytes);
        compiler_fence(Ordering::SeqCst);
    }
}

/// A session held open at the roost (`POST /hold`); released (the connection shut) when
/// dropped.
#[derive(Debug)]
pub struct Hold {
    stream: std::net::TcpStream,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// Why a roost call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoostError {
    /// The roost answered with a refusal: its status and its `error` sentence.
    Refused { status: u16, sentence: String },
    /// No usable answer: unreachable, timed out, or not the roost's shape.
    Unreachable(String),
}

impl std::fmt::Display for RoostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RoostError::Refused { status, sentence } => write!(f, "the roost refused ({status}): {sentence}"),
            RoostError::Unreachable(why) => write!(f, "the roost could not be asked: {why}"),
        }
    }
}

/// The daemon at one base URL.
#[derive(Debug, Clone)]
pub struct Roost {
    base: String,
    opts: Options,
}

/// One text field of a JSON object, bounded and free of control characters.
fn field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= MAX_TOKEN && !s.chars().any(char::is_control))
}

impl Roost {
    /// The roost at `url` (`http://host:port`, a trailing `/` allowed); E-RUN-019's reason
    /// when it is not an `http://` URL.
    pub fn new(url: &str, timeout: Duration) -> Result<Roost, String> {
        let base = url.trim().trim_end_matches('/').to_string();
        let parsed = client::Url::parse(&base).map_err(|e| format!("MURMUR_ROOST_URL: {e}"))?;
        // The roost binds loopback only; a credential or approval never leaves the host.
        if !matches!(parsed.host.as_str(), "127.0.0.1" | "localhost" | "[::1]") || parsed.path != "/" {
            return Err(format!(
                "MURMUR_ROOST_URL {base:?} is not http://127.0.0.1:PORT: the roost listens on loopback only"
            ));
        }
        Ok(Roost {
            base,
            opts: Options {
                connect_timeout: timeout,
                read_timeout: timeout,
                max_response: MAX_ANSWER,
                tls: None,
                refuse_loopback: false,
            },
        })
    }

    pub fn url(&self) -> &str {
        &self.base
    }

    fn post(&self, path: &str, headers: &[(&str, &str)], body: &Value) -> Result<Value, RoostError> {
        let url = format!("{}{path}", self.base);
        let r = client::post_json(&url, headers, &body.to_string(), &self.opts)
            .map_err(|e| RoostError::Unreachable(e.to_string()))?;
        let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        if r.status == 200 {
            return Ok(v);
        }
        // A refusal is shown as the roost wrote it, bounded, on one line.
        let sentence = v
            .get("error")
            .and_then(Value::as_str)
            .map(|s| crate::agent::sanitize::one_line(s, 2000))
            .unwrap_or_else(|| format!("HTTP {} without an error sentence", r.status));
        Err(RoostError::Refused {
            status: r.status,
            sentence,
        })
    }

    /// `POST /register` for this session, presenting `approval` when it was launched with
    /// one; the credential.
    pub fn register(
        &self,
        session_id: &str,
        name: &str,
        version: &str,
        approval: Option<&str>,
    ) -> Result<Credential, RoostError> {
        let headers: Vec<(&str, &str)> = approval
            .map(|a| vec![("x-murmur-spawn-approval", a)])
            .unwrap_or_default();
        let body = json!({"session_id": session_id, "name": name, "version": version});
        let v = self.post("/register", &headers, &body)?;
        let token = field(&v, "credential")
            .filter(|t| t.starts_with("msc1."))
            .ok_or_else(|| RoostError::Unreachable("the answer to /register holds no credential".into()))?;
        Ok(Credential(token.as_bytes().to_vec()))
    }

    /// `POST /spawn` for `name@version` with this session's credential; the approval.
    pub fn spawn(&self, credential: &Credential, name: &str, version: &str) -> Result<Approval, RoostError> {
        let cred = credential
            .header()
            .ok_or_else(|| RoostError::Unreachable("the credential is not text".into()))?;
        let body = json!({"name": name, "version": version});
        let v = self.post("/spawn", &[("x-murmur-spawn-credential", cred)], &body)?;
        let missing = |f: &str| RoostError::Unreachable(format!("the answer to /spawn holds no {f}"));
        let token = field(&v, "approval")
            .filter(|t| t.starts_with("msa1."))
            .ok_or_else(|| missing("approval"))?;
        Ok(Approval {
            token: token.to_string(),
            name: field(&v, "name").unwrap_or(name).to_string(),
            version: field(&v, "version").unwrap_or(version).to_string(),
            sha256: field(&v, "sha256").unwrap_or("").to_string(),
        })
    }

    /// `POST /hold` with this session's credential: the roost counts the session as
    /// running for as long as the returned [`Hold`] keeps the connection open, and as
    /// `failed` once it closes while the session was still registered (this process died).
    pub fn hold(&self, credential: &Credential) -> Result<Hold, RoostError> {
        let cred = credential
            .header()
            .ok_or_else(|| RoostError::Unreachable("the credential is not text".into()))?;
        let url = format!("{}/hold", self.base);
        let stream = client::post_held(&url, &[("x-murmur-spawn-credential", cred)], b"{}", &self.opts)
            .map_err(|e| RoostError::Unreachable(e.to_string()))?;
        let mut reader = stream
            .try_clone()
            .map_err(|e| RoostError::Unreachable(format!("the hold's connection: {e}")))?;
        // The roost's keep-alives are read and dropped until the connection closes.
        std::thread::Builder::new()
            .name("roost-hold".into())
            .spawn(move || {
                let mut sink = [0u8; 512];
                while matches!(std::io::Read::read(&mut reader, &mut sink), Ok(n) if n > 0) {}
            })
            .map_err(|e| RoostError::Unreachable(format!("the hold's reader: {e}")))?;
        Ok(Hold { stream })
    }

    /// `POST /deregister` with `outcome` (`complete` or `failed`).
    pub fn deregister(&self, credential: &Credential, outcome: &str) -> Result<(), RoostError> {
        let cred = credential
            .header()
            .ok_or_else(|| RoostError::Unreachable("the credential is not text".into()))?;
        self.post(
            "/deregister",
            &[("x-murmur-spawn-credential", cred)],
            &json!({"outcome": outcome}),
        )
        .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show_in_debug() {
        let c = Credential(b"msc1.abc.def".to_vec());
        assert_eq!(format!("{c:?}"), "Credential(<redacted>)");
        let a = Approval {
            token: "msa1.x.y".into(),
            name: "w".into(),
            version: "1".into(),
            sha256: String::new(),
        };
        assert!(!format!("{a:?}").contains("msa1"));
    }

    #[test]
    fn only_http_urls_name_a_roost() {
        assert!(Roost::new("http://127.0.0.1:7700/", Duration::from_secs(1)).is_ok());
        assert!(Roost::new("https://127.0.0.1:7700", Duration::from_secs(1)).is_err());
        assert!(Roost::new("", Duration::from_secs(1)).is_err());
        assert!(Roost::new("http://10.0.0.1:7700", Duration::from_secs(1)).is_err());
        assert!(Roost::new("http://127.0.0.1:7700/x", Duration::from_secs(1)).is_err());
    }
}
