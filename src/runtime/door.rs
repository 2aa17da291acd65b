//! The capsule's door: its own loopback HTTP listener, on its own thread, open while the
//! session lives. Routes are a list, so the A2A task interface and `/resources/` are added
//! beside the agent card rather than rewritten into it.
//!
//! Every route sits behind the HTTP layer's loopback guard (the same one the roost uses):
//! `host` must name `127.0.0.1:P` or `localhost:P` for the door's own port, and a request
//! carrying `origin` is refused, so neither a web page nor a DNS-rebound name reaches the
//! capsule. A route that takes a JSON body (A2A) also calls `http::require_json`.

use crate::diag::{code, Diagnostic};
use crate::http::{Controller, Limits, Reply, Request, Response, Server};
use std::net::TcpListener;
use std::thread::JoinHandle;

/// One family of endpoints on the door.
pub trait Route: Send {
    /// The answer, or `None` when the request is not this route's.
    fn answer(&self, req: &Request) -> Option<Response>;
}

/// Bind the door for `m` (`network.internal_port`, else OS-assigned) and serve its agent
/// card; the door and the capsule's URL (`http://localhost:P`).
pub fn open(m: &crate::manifest::model::Manifest) -> Result<(Door, String), Diagnostic> {
    let bound = bind(m.internal_port)?;
    let url = format!("http://localhost:{}", bound.port);
    let routes: Vec<Box<dyn Route>> = vec![Box::new(AgentCard::new(
        &m.name,
        &m.version,
        &url,
        m.description.as_deref(),
    ))];
    Ok((bound.serve(routes)?, url))
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

/// A serving door; `close` stops it and waits for its thread.
pub struct Door {
    controller: Controller,
    thread: Option<JoinHandle<()>>,
}

impl Bound {
    /// Serve `routes` on a thread of its own.
    pub fn serve(self, routes: Vec<Box<dyn Route>>) -> Result<Door, Diagnostic> {
        // 1 MiB bodies, at most 64 MiB of them buffered across all connections at once.
        let limits = Limits {
            loopback_only: true,
            max_buffered: 64 * 1024 * 1024,
            ..Limits::default()
        };
        let server = Server::bind(self.listener, limits)
            .map_err(|e| Diagnostic::new(code::RUN_PORT_IN_USE, "", format!("cannot serve the door: {e}")))?;
        let controller = server.controller();
        let thread = std::thread::Builder::new()
            .name("door".into())
            .spawn(move || {
                let _ = server.run(move |req: &Request, _: &crate::http::Exchange<'_>| {
                    let resp = routes
                        .iter()
                        .find_map(|r| r.answer(req))
                        .unwrap_or_else(|| Response::error(404, "not found"));
                    Reply::Now(resp)
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
            thread: Some(thread),
        })
    }
}

impl Door {
    /// Stop serving; the listener is closed when this returns.
    pub fn close(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        self.controller.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Door {
    fn drop(&mut self) {
        self.shut();
    }
}

/// `GET /.well-known/agent-card.json`.
pub struct AgentCard {
    body: Vec<u8>,
}

impl AgentCard {
    pub fn new(name: &str, version: &str, url: &str, description: Option<&str>) -> AgentCard {
        let card = serde_json::json!({
            "name": name,
            "version": version,
            "url": url,
            "description": description.unwrap_or(""),
            "capabilities": {
                "streaming": false,
                "pushNotifications": false,
                "stateTransitionHistory": false,
            },
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        });
        AgentCard {
            body: serde_json::to_vec(&card).unwrap_or_default(),
        }
    }
}

impl Route for AgentCard {
    fn answer(&self, req: &Request) -> Option<Response> {
        if req.path() != "/.well-known/agent-card.json" {
            return None;
        }
        Some(match req.method.as_str() {
            "GET" | "HEAD" => Response::json(200, self.body.clone()),
            _ => Response::error(405, "method not allowed"),
        })
    }
}
