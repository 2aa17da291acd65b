//! Network egress for contained subprocesses: `capabilities.network.allow` enforced by
//! name. A session gets one network namespace (`namespace`, made by a helper child with
//! `netlink`), shared by every contained command of the session, where every IPv4
//! destination is delivered locally; the relay (`relay`) decides each connection and DNS
//! question by `policy`, resolves allowed names on the host (`resolve`, `dns`) and reports
//! each decision (`event`). WASM guests keep their own `wasi:http` gate.

pub mod dns;
pub mod event;
pub mod namespace;
pub mod netlink;
pub mod policy;
pub mod relay;
pub mod resolve;

use crate::diag::{code, Diagnostic};
use crate::manifest::netrule::NetRule;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// How long the launch waits for the allowed names' first resolution.
const LAUNCH_LOOKUP: Duration = Duration::from_secs(3);

/// A session's egress: its namespace (to join) and its relay. Dropping it stops the relay
/// and closes every descriptor of the namespace, which then goes away with the last
/// process in it.
pub struct Egress {
    // Field order is drop order: the relay (and its sockets) first.
    _relay: relay::Relay,
    pub join: namespace::Join,
    pub ports: Vec<u16>,
}

/// Make the namespace and start the relay for `rules`. The receiver gets every decision.
/// SIGTERM and SIGINT are blocked in the calling thread from here on.
pub fn start(exe: &Path, rules: &[NetRule]) -> Result<(Egress, mpsc::Receiver<event::Event>), Diagnostic> {
    let ports = policy::ports(rules)
        .map_err(|why| Diagnostic::new(code::CAP_NETWORK_ENTRY, "capabilities.network.allow", why))?;
    let resolver = resolve::Resolver::from_env()
        .map_err(|why| Diagnostic::new(code::CAP_NETWORK_ENTRY, "MURMUR_EGRESS_RESOLVER", why))?;
    // The relay's threads inherit this thread's signal mask: SIGTERM and SIGINT must be
    // blocked before any of them starts, or one of them could take the signal's default
    // action for the whole process (every caller blocks them and waits for them on a
    // thread of its own).
    crate::signals::block_termination().map_err(|e| {
        Diagnostic::new(
            code::RUN_CONTAINMENT,
            "",
            format!("cannot block SIGTERM/SIGINT: {e}"),
        )
    })?;
    let ns = namespace::create(exe, &ports).map_err(refusal)?;
    let stand = policy::Stand {
        trusted_resolver: resolver.operator_chosen(),
        host: policy::host_addresses(),
    };
    let launch: Vec<(String, Vec<std::net::Ipv4Addr>)> = resolver
        .lookup_all(&policy::names(rules), LAUNCH_LOOKUP)
        .into_iter()
        .map(|(n, a)| {
            let a = stand.usable(&n, &a);
            (n, a)
        })
        .collect();
    let policy = policy::Policy::new(rules, &launch);
    let (tx, rx) = mpsc::sync_channel(relay::EVENT_BACKLOG);
    let relay = relay::start(ns.tcp, ns.udp, policy, stand, resolver, tx).map_err(|e| {
        Diagnostic::new(
            code::RUN_CONTAINMENT,
            "",
            format!("cannot start the egress relay: {e}"),
        )
    })?;
    Ok((
        Egress {
            _relay: relay,
            join: ns.join,
            ports,
        },
        rx,
    ))
}

/// W-SEC-003: what an advisory session says about its subprocesses' network.
pub fn advisory_warning() -> Diagnostic {
    Diagnostic::new(
        code::SEC_ADVISORY_NETWORK,
        "capabilities.containment",
        "containment is advisory: nothing constrains a subprocess's network (capabilities.network.allow is enforced for shell commands and native tools only under scoped and sealed)",
    )
}

/// E-CAP-005: the host refused the namespace.
pub fn refusal(why: String) -> Diagnostic {
    Diagnostic::new(
        code::CAP_NO_NETNS,
        "",
        format!("this host cannot give the capsule's subprocesses their own network namespace: {why}"),
    )
    .with_hint(
        "a capsule that runs shell commands or native tools needs one (unshare(CLONE_NEWNET), with CLONE_NEWUSER when not root); `mur doctor` says what the host refuses",
    )
}
