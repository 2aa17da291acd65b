//! The door's bearer authentication (`capabilities.network.authentication`), opt-in per
//! capsule. Each declared credential gets one token (`mdt1`, minted with the session's own
//! key by the one token codec, its payload the session and the credential's name), held in
//! memory and handed to the operator only through the records' `door-tokens.json` (0600).
//! A request presents it as `Authorization: Bearer <token>`; the MAC is compared in constant
//! time. A missing, malformed, foreign (another session's key) or unknown token is one
//! `401` with `www-authenticate: Bearer`, the same bytes whatever the reason; a verified
//! credential calling outside its scopes is one `403`, likewise. The card stays public.

use crate::http::{Request, Response};
use crate::manifest::model::{DoorAuth, SPAWNER_CREDENTIAL};
use crate::token::{self, Domain, Key};
use serde::Serialize;

pub use crate::places::DOOR_TOKENS_FILE as TOKENS_FILE;

/// The scope a delegated child's `spawner` credential holds: delivering its task.
const SPAWNER_SCOPES: &[&str] = &["SendMessage"];

/// The `401` body, the same for every reason.
const UNAUTHENTICATED: &str = "this door requires a bearer token: send Authorization: Bearer <token> (the operator prints one with `mur token --session <id>`)";
/// The `403` body, the same for every reason.
const FORBIDDEN: &str = "this token's credential is not granted this method or plane";

/// What a request was refused for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// No token, or one that does not verify as this session's: 401.
    Unauthenticated,
    /// A verified credential outside its scopes: 403.
    Forbidden,
}

impl Denied {
    /// The answer, the same bytes whatever the cause.
    pub fn response(self) -> Response {
        match self {
            Denied::Unauthenticated => Response::json_value(
                401,
                &serde_json::json!({"error": "unauthenticated", "message": UNAUTHENTICATED}),
            )
            .header("www-authenticate", "Bearer realm=\"murmur-door\""),
            Denied::Forbidden => Response::json_value(
                403,
                &serde_json::json!({"error": "forbidden", "message": FORBIDDEN}),
            ),
        }
    }

    /// The word the trace records.
    pub fn outcome(self) -> &'static str {
        match self {
            Denied::Unauthenticated => "unauthenticated",
            Denied::Forbidden => "forbidden",
        }
    }
}

/// A door token's payload.
#[derive(Serialize)]
struct Payload {
    v: u8,
    sid: String,
    cred: String,
}

/// One credential as the gate holds it.
struct Held {
    name: String,
    scopes: Vec<String>,
}

/// The door's authentication: the session's key and its credentials.
pub struct Gate {
    key: Key,
    session_id: String,
    credentials: Vec<Held>,
}

impl Gate {
    /// The gate of `auth` for `session_id`, with a fresh key; `delegated` adds the
    /// `spawner` credential the launching parent delivers the task with.
    pub fn new(auth: &DoorAuth, session_id: &str, delegated: bool) -> Result<Gate, getrandom::Error> {
        let mut credentials: Vec<Held> = auth
            .credentials
            .iter()
            .map(|c| Held {
                name: c.name.clone(),
                scopes: c.scopes.clone(),
            })
            .collect();
        if delegated {
            credentials.push(Held {
                name: SPAWNER_CREDENTIAL.into(),
                scopes: SPAWNER_SCOPES.iter().map(|s| s.to_string()).collect(),
            });
        }
        Ok(Gate {
            key: Key::generate()?,
            session_id: session_id.to_string(),
            credentials,
        })
    }

    /// The token of credential `name` (declared or not: only a declared one is ever let in).
    pub fn mint(&self, name: &str) -> String {
        let p = Payload {
            v: 1,
            sid: self.session_id.clone(),
            cred: name.to_string(),
        };
        token::mint(&self.key, Domain::DoorToken, &p)
    }

    /// Every declared credential's name and token, in declaration order (the spawner's
    /// is not among them: it goes to the parent on the launch line only).
    pub fn tokens(&self) -> Vec<(String, String)> {
        self.credentials
            .iter()
            .filter(|c| c.name != SPAWNER_CREDENTIAL)
            .map(|c| (c.name.clone(), self.mint(&c.name)))
            .collect()
    }

    /// The credential `req` presents, or 401. Exactly one `authorization` header of scheme
    /// `Bearer` (any case) whose token verifies under this session's key, names this
    /// session and a credential it holds.
    pub fn authenticate(&self, req: &Request) -> Result<&str, Denied> {
        let mut values = req.headers.iter().filter(|(n, _)| n == "authorization");
        let (Some((_, raw)), None) = (values.next(), values.next()) else {
            return Err(Denied::Unauthenticated);
        };
        let text = std::str::from_utf8(raw).map_err(|_| Denied::Unauthenticated)?;
        let (scheme, tok) = text.trim().split_once(' ').ok_or(Denied::Unauthenticated)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(Denied::Unauthenticated);
        }
        let verified = token::verify(&self.key, Domain::DoorToken, tok.trim(), crate::clock::now_ms())
            .map_err(|_| Denied::Unauthenticated)?;
        // Read in place (no copy of the payload): this runs on every request.
        let field = |k: &str| verified.payload.get(k).and_then(serde_json::Value::as_str);
        if field("sid") != Some(self.session_id.as_str()) {
            return Err(Denied::Unauthenticated);
        }
        let cred = field("cred").ok_or(Denied::Unauthenticated)?;
        self.credentials
            .iter()
            .find(|c| c.name == cred)
            .map(|c| c.name.as_str())
            .ok_or(Denied::Unauthenticated)
    }

    /// Whether credential `name` may use `scope` (a 1.0 method name or `resources.files`).
    pub fn allows(&self, name: &str, scope: &str) -> bool {
        self.credentials
            .iter()
            .find(|c| c.name == name)
            .is_some_and(|c| c.scopes.iter().any(|s| s == "*" || s == scope))
    }

    /// Authenticate `req` and check `scope`: the credential's name, or the refusal.
    pub fn admit(&self, req: &Request, scope: &str) -> Result<String, Denied> {
        let name = self.authenticate(req)?;
        if self.allows(name, scope) {
            Ok(name.to_string())
        } else {
            Err(Denied::Forbidden)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::DoorCredential;

    fn gate(session: &str) -> Gate {
        let auth = DoorAuth {
            credentials: vec![
                DoorCredential {
                    name: "ops".into(),
                    scopes: vec!["*".into()],
                },
                DoorCredential {
                    name: "reader".into(),
                    scopes: vec!["GetTask".into(), "resources.files".into()],
                },
            ],
        };
        Gate::new(&auth, session, true).unwrap()
    }

    fn with(auth: &[&str]) -> Request {
        let headers: Vec<(&str, &str)> = auth.iter().map(|v| ("authorization", *v)).collect();
        Request::new("POST", "/", &headers, b"{}")
    }

    #[test]
    fn a_declared_credential_is_admitted_within_its_scopes_only() {
        let g = gate("ses_1");
        let reader = format!("Bearer {}", g.mint("reader"));
        assert_eq!(g.admit(&with(&[&reader]), "GetTask"), Ok("reader".into()));
        assert_eq!(g.admit(&with(&[&reader]), "resources.files"), Ok("reader".into()));
        assert_eq!(g.admit(&with(&[&reader]), "SendMessage"), Err(Denied::Forbidden));
        let ops = format!("bearer  {}", g.mint("ops"));
        assert_eq!(g.admit(&with(&[&ops]), "CancelTask"), Ok("ops".into()));
        let spawner = format!("Bearer {}", g.mint("spawner"));
        assert_eq!(g.admit(&with(&[&spawner]), "SendMessage"), Ok("spawner".into()));
        assert_eq!(g.admit(&with(&[&spawner]), "GetTask"), Err(Denied::Forbidden));
        let names: Vec<String> = g.tokens().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["ops", "reader"]);
    }

    #[test]
    fn anything_but_one_good_token_of_this_session_is_unauthenticated() {
        let g = gate("ses_1");
        let other = gate("ses_1");
        let good = g.mint("ops");
        let undeclared = g.mint("stranger");
        let foreign = other.mint("ops");
        let two = format!("Bearer {good}");
        for bad in [
            vec![],
            vec![good.as_str()],
            vec!["Basic b3BzOm9wcw=="],
            vec!["Bearer"],
            vec!["Bearer mdt1.x.y"],
            vec![&format!("Bearer {undeclared}")],
            vec![&format!("Bearer {foreign}")],
            vec![two.as_str(), two.as_str()],
        ] {
            assert_eq!(
                g.admit(&with(&bad), "GetTask"),
                Err(Denied::Unauthenticated),
                "{bad:?}"
            );
        }
        let other_session = Gate {
            session_id: "ses_2".into(),
            ..gate("ses_1")
        };
        let minted_for_1 = Payload {
            v: 1,
            sid: "ses_1".into(),
            cred: "ops".into(),
        };
        let t = token::mint(&other_session.key, Domain::DoorToken, &minted_for_1);
        assert_eq!(
            other_session.admit(&with(&[&format!("Bearer {t}")]), "GetTask"),
            Err(Denied::Unauthenticated)
        );
    }

    #[test]
    fn each_refusal_is_the_same_bytes_whatever_the_reason() {
        let a = Denied::Unauthenticated.response();
        assert_eq!(a.status, 401);
        assert_eq!(
            a.header_value("www-authenticate"),
            Some("Bearer realm=\"murmur-door\"")
        );
        assert_eq!(Denied::Forbidden.response().status, 403);
    }
}
