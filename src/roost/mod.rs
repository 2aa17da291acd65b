//! `mur-roost`, the delegation referee: flags, in-memory state, the five routes of the roost
//! spec, served on the shared HTTP layer by one event-loop thread with no locks.
//!
//! The daemon creates no file, writes nothing to disk, starts no process and reads no
//! provider credential: it resolves manifests from the registry, referees them and mints
//! tokens. Both MAC keys live only in this process's memory.

mod api;
pub mod flags;
mod messages;
pub mod state;

pub use api::APPROVAL_TTL_MS;
pub use flags::Config;
pub use messages::IDENTITY;

use crate::http::{self, Exchange, Limits, Reply, Request, Response};
use crate::token::Key;
use state::State;
use std::io;
use std::net::TcpListener;
use std::time::{SystemTime, UNIX_EPOCH};

/// The roost accepts request bodies of at most 64 KiB and, descriptors permitting, holds
/// up to 4,096 connections, so thousands of idle or slow clients do not lock out the
/// runtimes it serves (each is still cut 10 s after it connects).
pub fn limits() -> Limits {
    let fds = http::raise_fd_limit(8192);
    let max_connections = (fds.saturating_sub(64) as usize).clamp(64, 4096);
    Limits {
        max_body: 64 * 1024,
        max_connections,
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
}

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
        })
    }

    /// Answer one request at time `now_ms` (unix milliseconds).
    pub fn handle(&mut self, req: &Request, now_ms: u64) -> Response {
        let path = req.path();
        match (req.method.as_str(), path) {
            ("GET", "/health") => self.health(),
            ("POST", "/spawn") => self.spawn(req, now_ms),
            ("POST", "/register") => self.register(req, now_ms),
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

/// Milliseconds since the Unix epoch; read only here, at the edge.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Serve the roost on `listener` until the process ends.
pub fn serve(listener: TcpListener, config: Config) -> io::Result<()> {
    let registry = config.registry.clone();
    let mut roost = Roost::new(config)?;
    let server = http::Server::bind(listener, limits())?;
    // Everything the loop needs is open: from here on the daemon reads the registry and
    // nothing else, and makes only the syscalls its loop uses.
    for note in crate::containment::confine::confine_roost(&registry) {
        eprintln!("{note}");
    }
    server.run(move |req: &Request, _: &Exchange<'_>| -> Reply { roost.handle(req, now_ms()).into() })
}
