//! The capsule's door: its own loopback HTTP listener, on its own thread, open while the
//! session lives. Routes are a list: the agent card, the A2A task interface (`a2a`) on the
//! task table (`tasks`), and the `/resources/` planes beside them; a task's updates go to the
//! webhooks its caller configured through the door's push workers (`push`), when the
//! manifest allows any.
//!
//! Every route sits behind the HTTP layer's loopback guard (the same one the roost uses):
//! `host` must name `127.0.0.1:P` or `localhost:P` for the door's own port, and a request
//! carrying `origin` is refused, so neither a web page nor a DNS-rebound name reaches the
//! capsule. A route that takes a JSON body (A2A) also calls `http::require_json`.
//!
//! A capsule that declares `capabilities.network.authentication` has every route but the
//! public card behind its [`auth::Gate`] as well (the peer plane keeps its own: the handle).

pub mod a2a;
pub mod auth;
pub mod card;
pub mod completions;
pub mod parts;
pub mod peer;
pub mod push;
pub mod reading;
pub mod resources;
pub mod tasks;
pub mod wire;

use crate::a2a::card::{self as cards, agent_card, agent_card_v10, public_card, CardInfo};
use crate::diag::{code, Diagnostic};
use crate::http::{Controller, Exchange, Limits, Reply, Request, Response, Server};
use std::net::TcpListener;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The most connections the door holds at once (1,024 streams and room beside them).
pub const MAX_CONNECTIONS: usize = 2048;
/// How long a closing door may take to deliver answers and final stream events.
pub const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// One family of endpoints on the door.
pub trait Route: Send {
    /// The answer, or `None` when the request is not this route's.
    fn answer(&self, req: &Request, ex: &Exchange<'_>) -> Option<Reply>;
}

/// A bound, not yet serving, door: the port is known so the routes can name the URL.
pub struct Bound {
    listener: TcpListener,
    pub port: u16,
}

/// Bind `127.0.0.1:port` (0: OS-assigned). A taken port is E-RUN-010.
pub fn bind(port: Option<u16>) -> Result<Bound, Diagnostic> {
    let listener = TcpListener::bind(("127.0.0.1", port.unwrap_or(0))).map_err(|e| {
        let key = if port.is_some() {
            "network.internal_port"
        } else {
            ""
        };
        Diagnostic::new(
            code::RUN_PORT_IN_USE,
            key,
            format!("cannot bind 127.0.0.1:{}: {e}", port.unwrap_or(0)),
        )
    })?;
    let port = listener.local_addr().map(|a| a.port()).map_err(|e| {
        Diagnostic::new(
            code::RUN_PORT_IN_USE,
            "",
            format!("cannot read the door's address: {e}"),
        )
    })?;
    Ok(Bound { listener, port })
}

/// What the door of a session serves.
pub struct Setup<'a> {
    pub manifest: &'a crate::manifest::model::Manifest,
    /// Model-visible tool names, for the card.
    pub tools: Vec<String>,
    pub tasks: Arc<tasks::Tasks>,
    pub session_id: &'a str,
    /// The accessible workdir (what the agent's tools see as `.`), for `/resources/`.
    pub work: crate::fsx::Dir,
    /// The containment class this session achieved.
    pub class: crate::containment::class::Class,
    /// The door's own writer onto the session's trace.
    pub trace: Option<super::trace::Trace>,
    /// The peer plane's minting key, when `exports.peer_files` is declared.
    pub peer_key: Option<Arc<crate::token::Key>>,
    /// The door's authentication, when `capabilities.network.authentication` is declared.
    pub gate: Option<Arc<auth::Gate>>,
}

/// A serving door; `close` finishes it and waits for its thread.
pub struct Door {
    controller: Controller,
    /// The push deliveries, drained before the session's trace ends.
    pusher: Option<push::Pusher>,
    thread: Option<JoinHandle<()>>,
}

impl Bound {
    /// The capsule's URL, `http://localhost:P`.
    pub fn url(&self) -> String {
        format!("http://localhost:{}", self.port)
    }

    /// Serve the card and the A2A interface of `s`.
    pub fn open(self, s: Setup<'_>) -> Result<Door, Diagnostic> {
        let m = s.manifest;
        let caps = &m.capabilities;
        let takes = parts::Takes::of(&m.a2a);
        let info = CardInfo {
            name: &m.name,
            version: &m.version,
            description: m.description.as_deref(),
            port: self.port,
            tools: &s.tools,
            shell: caps.shell_allow.as_ref().is_some_and(|a| !a.is_empty()),
            network: !caps.network_allow.is_empty(),
            streaming: true,
            auth: s.gate.is_some(),
            input_modes: takes.input_modes(),
            output_modes: takes.output_modes(),
            push: !m.a2a.push_allow.is_empty(),
        };
        let pusher = match m.a2a.push_allow.is_empty() {
            true => None,
            false => Some(
                push::Pusher::start(m.a2a.push_allow.clone(), s.trace.clone())
                    .map_err(|e| Diagnostic::new(code::RUN_PORT_IN_USE, "a2a.push", e))?,
            ),
        };
        if let Some(p) = &pusher {
            s.tasks.push_with(p.clone());
        }
        let (full, full_v10) = (agent_card(&info), agent_card_v10(&info));
        // Without a token only the public card; the whole one is the extended card.
        let (shown, shown_v10, extended) = match &s.gate {
            Some(_) => (
                public_card(full.clone()),
                public_card(full_v10.clone()),
                Some((full, full_v10)),
            ),
            None => (full, full_v10, None),
        };
        let card = card::CardRoute::new(
            cards::body(&shown),
            cards::body(&shown_v10),
            crate::clock::now_ms(),
        );
        let files = m.exports.files.as_ref().map(|f| resources::FilesPlane {
            root: f.root.clone(),
            root_written: f.root_written.clone(),
            max_bytes: f.max_bytes,
        });
        let peer = match (&m.exports.peer_files, s.peer_key) {
            (Some(f), Some(key)) => Some(peer::PeerPlane {
                root: f.root.clone(),
                max_bytes: f.max_bytes,
                key,
            }),
            _ => None,
        };
        let a2a_trace = s.trace.clone().map(std::sync::Mutex::new);
        let shared = resources::Shared::new(s.work, s.class, Arc::clone(&s.tasks), s.trace);
        let planes = resources::Resources::new(files, peer, shared, s.gate.clone());
        if s.gate.is_some() {
            s.tasks.guard();
        }
        let a2a = a2a::A2a {
            tasks: s.tasks,
            session_id: s.session_id.to_string(),
            trace: a2a_trace,
            gate: s.gate,
            extended,
            takes,
            pusher: pusher.clone(),
        };
        let mut door = self.serve(vec![Box::new(card), Box::new(a2a), Box::new(planes)])?;
        door.pusher = pusher;
        Ok(door)
    }

    /// Serve `routes` on a thread of its own.
    pub fn serve(self, routes: Vec<Box<dyn Route>>) -> Result<Door, Diagnostic> {
        crate::http::raise_fd_limit(2 * MAX_CONNECTIONS as u64 + 256);
        // 1 MiB bodies, at most 64 MiB of them buffered across all connections at once.
        let limits = Limits {
            loopback_only: true,
            max_buffered: 64 * 1024 * 1024,
            max_connections: MAX_CONNECTIONS,
            ..Limits::default()
        };
        let server = Server::bind(self.listener, limits).map_err(|e| {
            let code = if crate::http::out_of_descriptors(&e) {
                code::RUN_DESCRIPTORS
            } else {
                code::RUN_PORT_IN_USE
            };
            Diagnostic::new(code, "", format!("cannot serve the door: {e}"))
        })?;
        let controller = server.controller();
        let thread = std::thread::Builder::new()
            .name("door".into())
            .spawn(move || {
                let _ = server.run(move |req: &Request, ex: &Exchange<'_>| {
                    routes
                        .iter()
                        .find_map(|r| r.answer(req, ex))
                        .unwrap_or_else(|| Reply::Now(Response::error(404, "not found")))
                });
            })
            .map_err(|e| {
                Diagnostic::new(
                    code::RUN_PORT_IN_USE,
                    "",
                    format!("cannot start the door thread: {e}"),
                )
            })?;
        Ok(Door {
            controller,
            pusher: None,
            thread: Some(thread),
        })
    }
}

impl Door {
    /// Give the tasks' waiting push notifications up to [`push::DRAIN`] to go out (the
    /// session is ending; its trace is still open).
    pub fn drain_pushes(&self) {
        if let Some(p) = &self.pusher {
            p.drain(push::DRAIN);
        }
    }

    /// Stop taking connections, deliver what is already answered (final stream events, a
    /// blocking send's result) within [`CLOSE_GRACE`], then close.
    pub fn close(mut self) {
        self.controller.finish(CLOSE_GRACE);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.controller.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
