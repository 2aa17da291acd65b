//! `mur-roost`, the delegation referee: flags, in-memory state, the five routes of the roost
//! spec and this project's `POST /hold` (`hold`: how it learns a runtime died), served on
//! the shared HTTP layer by one event-loop thread with no locks.
//!
//! The daemon creates no file, writes nothing to disk, starts no process and reads no
//! provider credential: it resolves manifests from the registry, referees them and mints
//! tokens. Both MAC keys live only in this process's memory.
//!
//! On a host shared with other accounts, the census the machine ceiling counts is kept per
//! local account (the kernel names the account behind each registration's connection:
//! [`http::PeerAccounts`]): one account's sessions never refuse another's spawn, and a
//! top-level registration from an account other than the daemon's own (or root) is refused
//! once that account holds the ceiling, so no stranger can hold the roost's places.

mod api;
pub mod flags;
mod hold;
pub mod messages;
pub mod state;

pub use api::{APPROVAL_TTL_MS, MAX_RESOLVE_BYTES};
pub use flags::Config;
pub use messages::IDENTITY;
pub use state::{Owner, HOLD_GRACE_MS, MAX_ENDED, UNIDENTIFIED};

use crate::http::{self, Exchange, Limits, Reply, Request, Response};
use crate::token::Key;
use state::State;
use std::io;
use std::net::TcpListener;

/// The roost accepts request bodies of at most 64 KiB, at most 16 MiB of them buffered at
/// once across all connections, and, descriptors permitting, holds up to 4,096 request
/// connections and as many holds apart from them, so thousands of idle or slow clients, or
/// of holds, neither lock out the runtimes it serves nor pin its memory (each request is
/// still cut 10 s after it connects); the descriptors the artifact cache holds are set
/// aside first. The loopback guard is on: see [`Roost::handle`]
/// for the whole check order.
pub fn limits() -> Limits {
    let fds = http::raise_fd_limit(8192);
    let spare = 64 + crate::registry::cache::MAX_HELD as u64;
    // Half the descriptors for requests, half for holds: a hold is a stream, counted apart,
    // so however many sessions hold, `/health`, `/register` and `/spawn` still get in.
    let half = (fds.saturating_sub(spare) / 2) as usize;
    Limits {
        max_body: 64 * 1024,
        max_buffered: 16 * 1024 * 1024,
        max_connections: half.clamp(64, 4096),
        max_streams: half.clamp(64, 4096),
        loopback_only: true,
        ..Limits::default()
    }
}

/// Where the daemon looks up `${NAME}` references.
pub type EnvLookup = Box<dyn Fn(&str) -> Option<String>>;

/// The daemon: configuration, records and keys.
pub struct Roost {
    config: Config,
    state: State,
    credential_key: Key,
    approval_key: Key,
    env: EnvLookup,
    /// Parsed artifacts by the hash of the bytes they were parsed from.
    cache: api::Cache,
    /// The open `POST /hold` of each held session (see `hold`).
    holds: std::collections::HashMap<String, http::Stream>,
    /// The kernel's socket table, asked who opened a registration's connection; `None`
    /// where it cannot be opened (then every client counts as the operator, and the daemon
    /// said so at start).
    accounts: Option<http::PeerAccounts>,
    /// The operator's census: this daemon's own uid (root's registrations count here too).
    operator: Owner,
}

/// The parsed-artifact cache holds at most this many artifacts...
pub const CACHE_ENTRIES: usize = 256;
/// ...weighing at most this much (manifest text plus a fixed charge per entry).
pub const CACHE_BYTES: usize = 32 << 20;

impl Roost {
    /// A daemon with fresh keys that resolves `${NAME}` from the process environment.
    pub fn new(config: Config) -> io::Result<Roost> {
        Roost::with_env(config, Box::new(|name| std::env::var(name).ok()))
    }

    /// A daemon whose `${NAME}` lookups go to `env` (tests and fuzzing).
    pub fn with_env(config: Config, env: EnvLookup) -> io::Result<Roost> {
        let key = || Key::generate().map_err(|e| io::Error::other(format!("no OS randomness: {e}")));
        Ok(Roost {
            config,
            state: State::default(),
            credential_key: key()?,
            approval_key: key()?,
            env,
            cache: api::Cache::new(CACHE_ENTRIES, CACHE_BYTES),
            holds: std::collections::HashMap::new(),
            accounts: None,
            operator: rustix::process::getuid().as_raw(),
        })
    }

    /// Tell the local accounts of clients apart (before the daemon confines itself: the
    /// netlink socket is opened here). The error is why it cannot; then every client
    /// counts as the operator, as in the spec.
    pub fn tell_accounts_apart(&mut self) -> io::Result<()> {
        self.accounts = Some(http::PeerAccounts::open()?);
        Ok(())
    }

    /// The census a connection counts in: the operator's for this daemon's own uid and for
    /// root, else the client's uid, else [`UNIDENTIFIED`] (the client's socket is gone, or
    /// the table could not be read).
    fn account(&self, ex: &Exchange<'_>) -> Owner {
        let Some(accounts) = &self.accounts else {
            return self.operator;
        };
        let (Some(peer), Some(local)) = (ex.peer(), ex.local()) else {
            return UNIDENTIFIED;
        };
        match accounts.owner(peer, local) {
            Ok(uid) if uid == 0 || uid == self.operator => self.operator,
            Ok(uid) => uid,
            Err(_) => UNIDENTIFIED,
        }
    }

    /// Answer one request from the event loop: first end every session whose runtime is
    /// gone (its hold closed), then `POST /hold` (whose answer is a stream), or any other
    /// route through [`Roost::handle`].
    pub fn answer(&mut self, req: &Request, ex: &Exchange<'_>, now_ms: u64) -> Reply {
        self.reap_holds(now_ms);
        if req.method == "POST" && req.path() == "/hold" {
            return self.hold(req, ex);
        }
        // Only a top-level registration is charged to the account that sends it: asking the
        // kernel costs a round trip, and every other request (a child's registration
        // included) acts on a formation whose census is already known.
        let who = if api::is_top_level_registration(req) {
            self.account(ex)
        } else {
            self.operator
        };
        self.handle_from(req, who, now_ms).into()
    }

    /// Answer one request at time `now_ms` as from the operator's own account.
    pub fn handle(&mut self, req: &Request, now_ms: u64) -> Response {
        self.handle_from(req, self.operator, now_ms)
    }

    /// Answer one request at time `now_ms` (unix milliseconds) from a connection whose census
    /// is `who`'s.
    ///
    /// The check order, first failure answers. In the HTTP layer, on the head, before any
    /// body byte is read and before any route (so it holds for `/health` and for unknown
    /// paths too):
    ///
    /// 1. request syntax: 400 (malformed, bad version, non-path target), 431 (head size);
    /// 2. `host`: absent 400, twice 400, not `127.0.0.1:P`/`localhost:P` 421;
    /// 3. `origin` present: 403;
    /// 4. framing: 400 (`transfer-encoding`, bad or conflicting `content-length`, a POST
    ///    without one), then 413 beyond 64 KiB;
    /// 5. while the body arrives: 503 once bodies buffered across all connections would
    ///    pass 16 MiB.
    ///
    /// Then here:
    ///
    /// 6. the route: 404 for an unknown path or method (so `POST /health` stays 404);
    /// 7. on the three POST routes, `content-type` must be `application/json` (parameters
    ///    allowed): 415, before the body is parsed;
    /// 8. each route's own checks, in the spec's order (body 400, then 403/500 as it lists);
    ///    a top-level `POST /register` from an account `who` other than the operator's is
    ///    refused 403 once that account holds `--max-live-capsules`, after the
    ///    `--spawn-allow` check and before the registry is read.
    pub fn handle_from(&mut self, req: &Request, who: Owner, now_ms: u64) -> Response {
        let path = req.path();
        if req.method == "POST" && matches!(path, "/spawn" | "/register" | "/deregister") {
            if let Err(refusal) = http::require_json(req) {
                return refusal;
            }
        }
        match (req.method.as_str(), path) {
            ("GET", "/health") => self.health(),
            ("POST", "/spawn") => self.spawn(req, now_ms),
            ("POST", "/register") => self.register(req, who, now_ms),
            ("POST", "/deregister") => self.deregister(req),
            ("GET", p) if p.starts_with("/status/") && p.len() > "/status/".len() => {
                let sid = &p["/status/".len()..];
                if sid.contains('/') {
                    Response::error(404, messages::NOT_FOUND)
                } else {
                    self.status(sid, now_ms)
                }
            }
            _ => Response::error(404, messages::NOT_FOUND),
        }
    }
}

pub use crate::clock::now_ms;

/// Serve the roost on `listener` until the process ends.
pub fn serve(listener: TcpListener, config: Config) -> io::Result<()> {
    let registry = config.registry.clone();
    let mut roost = Roost::new(config)?;
    if let Err(e) = roost.tell_accounts_apart() {
        eprintln!(
            "mur-roost: cannot tell local accounts apart (NETLINK_SOCK_DIAG: {e}): every client counts as this daemon's own account, so another account's registrations can fill --max-live-capsules"
        );
    }
    let server = http::Server::bind(listener, limits())?;
    // Everything the loop needs is open: from here on the daemon reads the registry and
    // nothing else, and makes only the syscalls its loop uses.
    for note in crate::containment::confine::confine_roost(&registry) {
        eprintln!("{note}");
    }
    server.run(move |req: &Request, ex: &Exchange<'_>| -> Reply { roost.answer(req, ex, now_ms()) })
}
