//! `mur-roost`, the delegation referee: its routes on the shared HTTP layer.
//!
//! This holds the daemon's liveness route; the spawn, register, deregister and status routes
//! of the roost spec arrive with their state and token checks.

use crate::http::{self, Exchange, Limits, Reply, Request, Response};
use std::io;
use std::net::TcpListener;

/// The roost accepts request bodies of at most 64 KiB.
pub fn limits() -> Limits {
    Limits {
        max_body: 64 * 1024,
        ..Limits::default()
    }
}

/// Answer one request.
pub fn route(req: &Request, _ex: &Exchange<'_>) -> Reply {
    match (req.method.as_str(), req.path()) {
        ("GET", "/health") => Response::json(200, "{}").into(),
        _ => Response::error(404, "not found").into(),
    }
}

/// Serve the roost on `listener` until the process ends.
pub fn serve(listener: TcpListener) -> io::Result<()> {
    http::serve(listener, limits(), route)
}
