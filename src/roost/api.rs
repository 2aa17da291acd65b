//! The five routes, each in the spec's check order. Handlers work on in-memory state plus
//! one bounded registry read, and take the time as a value.

use super::messages as msg;
use super::state::{Grants, Owner, Session, Status, HOLD_GRACE_MS, UNIDENTIFIED};
use super::Roost;
use crate::diag::code;
use crate::http::{Request, Response};
use crate::manifest::{contains, Envelope, Resolve};
use crate::registry::{self, CachedResolve};
use crate::token::{self, Domain, TokenError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

const CREDENTIAL_HEADER: &str = "x-murmur-spawn-credential";
const APPROVAL_HEADER: &str = "x-murmur-spawn-approval";

/// Whether `req` asks to register a top-level session (no approval header at all): the one
/// request charged to the account that sent it.
pub(super) fn is_top_level_registration(req: &Request) -> bool {
    req.method == "POST"
        && req.path() == "/register"
        && !req.headers.iter().any(|(n, _)| n == APPROVAL_HEADER)
}
/// An approval is valid for 60 seconds from the spawn that granted it.
pub const APPROVAL_TTL_MS: u64 = 60_000;
const MAX_SESSION_ID: usize = 128;
/// Largest archive the roost reads, hashes and parses in one request. Every resolve runs on
/// the one loop thread, where the records live without locks, so this bounds how long one
/// request can hold up every other client: reading and hashing cost about 1 ms per MiB on a
/// loaded 2-core machine, so about 65 ms at the bound, and room for the largest components
/// in use (an interpreter compiled to WebAssembly is tens of MiB). Larger artifacts are
/// refused with a 500 that says so, decided on the file's size before a byte is read.
pub const MAX_RESOLVE_BYTES: u64 = 64 << 20;

/// What the roost keeps of a parsed artifact: the grants lowered from its manifest.
pub type Cache = registry::ParsedCache<Arc<Grants>>;

/// The grants a session holds, lowered once per distinct artifact.
fn lower(loaded: crate::manifest::Loaded) -> Arc<Grants> {
    let m = &loaded.manifest;
    Arc::new(Grants {
        envelope: Envelope::of(m),
        spawn_allow: m.capabilities.spawn_allow.clone(),
    })
}

/// What an admitted registration is recorded with.
struct Admitted {
    parent: Option<String>,
    depth: u32,
    /// The approval id the registration redeems (a child's).
    redeemed: Option<String>,
    resolved: CachedResolve<Arc<Grants>>,
    owner: Owner,
}

/// The `POST /spawn` answer, fields in the order the JSON map always wrote them.
#[derive(Serialize)]
struct Granted<'a> {
    approval: &'a str,
    expires_at_ms: u64,
    name: &'a str,
    sha256: &'a str,
    version: &'a str,
}

/// The `GET /status` answer, fields in the order the JSON map always wrote them.
#[derive(Serialize)]
struct StatusReply {
    depth_remaining: u32,
    live_capsules: usize,
    live_children: usize,
    status: &'static str,
}

#[derive(Serialize)]
struct Registered<'a> {
    credential: &'a str,
}

/// A 200 answer serialised straight from `value`.
fn ok_json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => Response::json(200, body),
        Err(_) => Response::error(500, "internal error"),
    }
}

#[derive(Serialize, Deserialize)]
struct CredentialPayload {
    v: u32,
    sid: String,
    n: String,
}

#[derive(Serialize, Deserialize)]
struct ApprovalPayload {
    v: u32,
    sid: String,
    name: String,
    version: String,
    digest: String,
    depth: u32,
    exp: u64,
    jti: String,
}

fn identity() -> Response {
    Response::error(403, msg::IDENTITY)
}

/// 16 random bytes as hex, or a 500 if the OS random source fails.
fn fresh_hex() -> Result<String, Response> {
    token::random_hex16().map_err(|_| Response::error(500, "the OS random source failed"))
}

fn bad_request(why: &str) -> Response {
    Response::error(400, &format!("invalid request body: {why}"))
}

/// The body as a JSON object, or a 400.
fn body(req: &Request) -> Result<serde_json::Map<String, Value>, Response> {
    match serde_json::from_slice::<Value>(&req.body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(bad_request("expected a JSON object")),
        Err(_) => Err(bad_request("not valid JSON")),
    }
}

/// A required string field, or a 400.
fn field<'a>(map: &'a serde_json::Map<String, Value>, key: &str) -> Result<&'a str, Response> {
    match map.get(key) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(bad_request(&format!("'{key}' is empty"))),
        Some(_) => Err(bad_request(&format!("'{key}' must be a string"))),
        None => Err(bad_request(&format!("missing required field '{key}'"))),
    }
}

impl Roost {
    /// Resolve `name@version` as the daemon sees it at `now_ms`: bytes hashed as read (or as
    /// last read, while the archive and its sidecar are unchanged), `${NAME}` references from
    /// the daemon's environment except `inference.api_key`.
    fn resolve(
        &mut self,
        name: &str,
        version: &str,
        now_ms: u64,
    ) -> Result<CachedResolve<Arc<Grants>>, Response> {
        let env = &self.env;
        let lookup = |var: &str| env(var);
        registry::resolve_cached(
            &self.config.registry,
            name,
            version,
            Resolve::AllButApiKey(&lookup),
            &mut self.cache,
            MAX_RESOLVE_BYTES,
            now_ms,
            lower,
        )
        .map_err(|d| {
            // Messages name the manifest key or variable at fault, never a host path.
            let why = match d.code {
                code::REG_NOT_INSTALLED => "not installed".to_string(),
                code::IO_READ if d.key == registry::ARCHIVE_TOO_LARGE => format!(
                    "the archive is larger than the {} MiB this daemon reads per request",
                    MAX_RESOLVE_BYTES >> 20
                ),
                code::REG_INTEGRITY => "the archive failed its integrity check".to_string(),
                c if c.starts_with("E-MAN") || c.starts_with("E-CAP") => d.message.clone(),
                _ => "the registry could not be read".to_string(),
            };
            Response::error(
                500,
                &format!("capsule '{name}@{version}' could not be resolved from the registry: {why}"),
            )
        })
    }

    /// The running session a request's credential names.
    pub(super) fn caller(&self, req: &Request) -> Option<String> {
        let token = req.header(CREDENTIAL_HEADER)?;
        let verified = token::verify(&self.credential_key, Domain::Credential, token, 0).ok()?;
        let payload: CredentialPayload = verified.decode().ok()?;
        self.state.running(&payload.sid).map(|_| payload.sid)
    }

    fn mint_credential(&self, sid: &str) -> Result<String, Response> {
        let n = fresh_hex()?;
        Ok(token::mint(
            &self.credential_key,
            Domain::Credential,
            &CredentialPayload {
                v: 1,
                sid: sid.into(),
                n,
            },
        ))
    }

    pub(super) fn health(&self) -> Response {
        Response::json(200, "{}")
    }

    pub(super) fn spawn(&mut self, req: &Request, now_ms: u64) -> Response {
        let map = match body(req) {
            Ok(m) => m,
            Err(r) => return r,
        };
        let (name, version) = match (field(&map, "name"), field(&map, "version")) {
            (Ok(n), Ok(v)) => (n.to_string(), v.to_string()),
            (Err(r), _) | (_, Err(r)) => return r,
        };
        let Some(sid) = self.caller(req) else {
            return identity();
        };
        let Some(session) = self.state.running(&sid) else {
            return identity();
        };
        let Some(grants) = session.grants.clone() else {
            return identity();
        };
        let (depth, owner) = (session.depth_remaining, session.owner);
        if !grants.spawn_allow.contains(&name) {
            return Response::error(403, &msg::not_in_parent_list(&name));
        }
        if depth == 0 {
            return Response::error(403, &msg::depth(self.config.max_depth));
        }
        let live = self.state.live_capsules(owner, now_ms);
        if live >= self.config.max_live_capsules as usize {
            return Response::error(403, &msg::ceiling(self.config.max_live_capsules, live));
        }
        let children = self.state.live_children(&sid, now_ms);
        if children >= self.config.max_concurrent as usize {
            return Response::error(403, &msg::concurrency(self.config.max_concurrent, children));
        }
        let resolved = match self.resolve(&name, &version, now_ms) {
            Ok(r) => r,
            Err(resp) => return resp,
        };
        if let Err(refusal) = contains(&grants.envelope, &resolved.artifact.value.envelope) {
            return Response::error(403, &refusal);
        }
        let exp = now_ms + APPROVAL_TTL_MS;
        let jti = match fresh_hex() {
            Ok(j) => j,
            Err(resp) => return resp,
        };
        let payload = ApprovalPayload {
            v: 1,
            sid,
            name,
            version,
            digest: resolved.sha256,
            depth: depth - 1,
            exp,
            jti,
        };
        let approval = token::mint(&self.approval_key, Domain::Approval, &payload);
        self.state.reserve(payload.jti, &payload.sid, owner, exp);
        ok_json(&Granted {
            approval: &approval,
            expires_at_ms: exp,
            name: &payload.name,
            sha256: &payload.digest,
            version: &payload.version,
        })
    }

    /// `POST /register` from a connection whose census is `who`'s.
    pub(super) fn register(&mut self, req: &Request, who: Owner, now_ms: u64) -> Response {
        let map = match body(req) {
            Ok(m) => m,
            Err(r) => return r,
        };
        let sid = match field(&map, "session_id") {
            Ok(s) if s.len() <= MAX_SESSION_ID && s.bytes().all(|b| b.is_ascii_graphic()) => s.to_string(),
            Ok(_) => return bad_request("'session_id' is not a session id"),
            Err(r) => return r,
        };
        let (name, version) = match (field(&map, "name"), field(&map, "version")) {
            (Ok(n), Ok(v)) => (n.to_string(), v.to_string()),
            (Err(r), _) | (_, Err(r)) => return r,
        };
        if self.state.sessions.contains_key(&sid) {
            return identity();
        }
        let admitted = match req.header(APPROVAL_HEADER) {
            None if req.headers.iter().any(|(n, _)| n == APPROVAL_HEADER) => return identity(),
            None => self.admit_top_level(&name, &version, who, now_ms),
            Some(token) => self.admit_approved(token, &name, &version, now_ms),
        };
        let Admitted {
            parent,
            depth,
            redeemed,
            resolved,
            owner,
        } = match admitted {
            Ok(a) => a,
            Err(refusal) => return refusal,
        };
        let credential = match self.mint_credential(&sid) {
            Ok(c) => c,
            Err(resp) => return resp,
        };
        let session = Session {
            status: Status::Running,
            depth_remaining: depth,
            parent,
            grants: Some(Arc::clone(&resolved.artifact.value)),
            running_children: 0,
            held: false,
            owner,
        };
        self.state.register(&sid, session, redeemed.as_deref());
        self.state.hold_due(&sid, now_ms.saturating_add(HOLD_GRACE_MS));
        ok_json(&Registered {
            credential: &credential,
        })
    }

    /// A top-level registration (no approval), in the spec's order: `--spawn-allow`, this
    /// project's account ceiling, then the registry.
    fn admit_top_level(
        &mut self,
        name: &str,
        version: &str,
        who: Owner,
        now_ms: u64,
    ) -> Result<Admitted, Response> {
        if !self.config.spawn_allow.iter().any(|n| n == name) {
            return Err(Response::error(403, &msg::not_in_global_list(name)));
        }
        self.account_room(who, now_ms)?;
        Ok(Admitted {
            parent: None,
            depth: self.config.max_depth,
            redeemed: None,
            resolved: self.resolve(name, version, now_ms)?,
            owner: who,
        })
    }

    /// A child's registration under approval `token`, in the spec's order: the registry,
    /// the approval (MAC, expiry), its single use, its granting session still running, the
    /// coordinates and the bytes it was granted for. The child counts in its parent's census.
    fn admit_approved(
        &mut self,
        token: &str,
        name: &str,
        version: &str,
        now_ms: u64,
    ) -> Result<Admitted, Response> {
        let resolved = self.resolve(name, version, now_ms)?;
        let a: ApprovalPayload = match token::verify(&self.approval_key, Domain::Approval, token, now_ms) {
            Ok(v) => v.decode().map_err(|_| identity())?,
            Err(TokenError::Expired) => return Err(Response::error(403, msg::EXPIRED)),
            Err(_) => return Err(identity()),
        };
        if !self.state.spend(&a.jti, a.exp, now_ms) {
            return Err(Response::error(403, msg::REPLAYED));
        }
        let owner = self.state.running(&a.sid).map(|p| p.owner).ok_or_else(identity)?;
        let (approved, asked) = (format!("{}@{}", a.name, a.version), format!("{name}@{version}"));
        if approved != asked {
            return Err(Response::error(403, &msg::wrong_coordinates(&approved, &asked)));
        }
        if a.digest != resolved.sha256 {
            return Err(Response::error(
                403,
                &msg::wrong_bytes(&asked, &a.digest, &resolved.sha256),
            ));
        }
        Ok(Admitted {
            parent: Some(a.sid),
            depth: a.depth,
            redeemed: Some(a.jti),
            resolved,
            owner,
        })
    }

    /// A top-level registration from another local account is refused once that account
    /// holds the machine ceiling; the operator's own (this daemon's uid, or root) never is,
    /// as the spec has it.
    fn account_room(&mut self, who: Owner, now_ms: u64) -> Result<(), Response> {
        let max = self.config.max_live_capsules;
        let live = self.state.live_capsules(who, now_ms);
        if who == self.operator || live < max as usize {
            return Ok(());
        }
        let account = (who != UNIDENTIFIED).then_some(who);
        Err(Response::error(
            403,
            &msg::account_ceiling(max, live, self.operator, account),
        ))
    }

    pub(super) fn deregister(&mut self, req: &Request) -> Response {
        let map = match body(req) {
            Ok(m) => m,
            Err(r) => return r,
        };
        let status = match map.get("outcome").and_then(Value::as_str) {
            Some("complete") => Status::Complete,
            Some("failed") => Status::Failed,
            _ => return bad_request("'outcome' must be complete or failed"),
        };
        let Some(sid) = self.caller(req) else {
            return identity();
        };
        self.state.end(&sid, status);
        Response::json(200, "{}")
    }

    pub(super) fn status(&mut self, sid: &str, now_ms: u64) -> Response {
        let Some(session) = self.state.sessions.get(sid) else {
            return Response::error(404, msg::SESSION_NOT_FOUND);
        };
        let (status, depth, owner) = (session.status, session.depth_remaining, session.owner);
        let live_children = if status == Status::Running {
            self.state.live_children(sid, now_ms)
        } else {
            0
        };
        let live_capsules = self.state.live_capsules(owner, now_ms);
        ok_json(&StatusReply {
            depth_remaining: depth,
            live_capsules,
            live_children,
            status: status.as_str(),
        })
    }
}
