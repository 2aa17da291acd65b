//! What the egress relay reports: one event per decision (a DNS question answered or
//! refused, a connection refused, a relayed connection at its close with the bytes each
//! way). The session writes them to its trace as `network` events; `mur exec` prints the
//! refusals.

use serde_json::{json, Value};
use std::net::{Ipv4Addr, SocketAddrV4};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Tcp,
    Dns,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// A DNS question for an allowed name, answered with these addresses.
    Answered(Vec<Ipv4Addr>),
    /// Refused, with the reason.
    Refused(String),
    /// Allowed, but the lookup or the upstream connection failed.
    Failed(String),
    /// A relayed connection closed: bytes from the child up, and back down to it.
    Closed {
        bytes_up: u64,
        bytes_down: u64,
        error: Option<String>,
    },
    /// This many decisions were not reported one by one (the per-second cap).
    Suppressed(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub proto: Proto,
    /// The allowed name (or literal) a connection went out under; the DNS question's name.
    pub name: Option<String>,
    pub dest: Option<SocketAddrV4>,
    pub decision: Decision,
}

impl Event {
    pub fn tcp(name: Option<String>, dest: SocketAddrV4, decision: Decision) -> Event {
        Event {
            proto: Proto::Tcp,
            name,
            dest: Some(dest),
            decision,
        }
    }

    pub fn dns(name: &str, decision: Decision) -> Event {
        Event {
            proto: Proto::Dns,
            name: Some(name.to_string()),
            dest: None,
            decision,
        }
    }

    pub fn suppressed(n: u64) -> Event {
        Event {
            proto: Proto::Tcp,
            name: None,
            dest: None,
            decision: Decision::Suppressed(n),
        }
    }

    /// The fields of the trace's `network` event.
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "proto": match (&self.proto, &self.decision) {
                (_, Decision::Suppressed(_)) => "any",
                (Proto::Tcp, _) => "tcp",
                (Proto::Dns, _) => "dns",
            },
            "decision": match &self.decision {
                Decision::Suppressed(_) => "suppressed",
                Decision::Refused(_) => "refused",
                Decision::Failed(_) => "failed",
                Decision::Answered(_) | Decision::Closed { .. } => "allowed",
            },
        });
        if let Some(n) = &self.name {
            v["name"] = json!(n);
        }
        if let Some(d) = &self.dest {
            v["address"] = json!(d.ip().to_string());
            v["port"] = json!(d.port());
        }
        match &self.decision {
            Decision::Answered(a) => v["answer"] = json!(a.iter().map(|a| a.to_string()).collect::<Vec<_>>()),
            Decision::Refused(why) | Decision::Failed(why) => v["reason"] = json!(why),
            Decision::Suppressed(n) => v["count"] = json!(n),
            Decision::Closed {
                bytes_up,
                bytes_down,
                error,
            } => {
                v["bytes_up"] = json!(bytes_up);
                v["bytes_down"] = json!(bytes_down);
                if let Some(e) = error {
                    v["reason"] = json!(e);
                }
            }
        }
        v
    }

    /// One line for a terminal: `refused tcp 127.0.0.2:80: not in ...`.
    pub fn line(&self) -> String {
        let what = match (&self.proto, &self.dest, &self.name) {
            (Proto::Tcp, Some(d), _) => format!("tcp {d}"),
            (_, _, Some(n)) => format!("dns {n}"),
            _ => "dns".to_string(),
        };
        match &self.decision {
            Decision::Refused(why) => format!("refused {what}: {why}"),
            Decision::Failed(why) => format!("failed {what}: {why}"),
            Decision::Answered(a) => format!("answered {what}: {a:?}"),
            Decision::Suppressed(n) => {
                format!("{n} more decisions in the last second not reported one by one")
            }
            Decision::Closed {
                bytes_up, bytes_down, ..
            } => {
                format!("closed {what}: {bytes_up} bytes up, {bytes_down} down")
            }
        }
    }
}
