//! `share-file`: check the path by the resource plane's rules (refused, never normalised),
//! resolve it beneath `exports.peer_files.root` with the confined reader under the achieved
//! class's symlink rule, fetch the peer's agent card (an outbound request
//! `capabilities.network.allow` must cover) for the audience, and mint.

use super::{field, now_ms, shown, Outcome, Peer, PeerTools, Refused, Share};
use crate::http::client::{self, Options};
use crate::manifest::units;
use crate::resources::{open, path, peer, Refusal, Symlinks};
use crate::runtime::gate;
use serde_json::{json, Value};
use std::time::Duration;

/// The largest agent card read, bytes.
const MAX_CARD: usize = 64 * 1024;

/// What a successful mint reports.
struct Minted {
    handle: peer::Handle,
    path: String,
    audience: String,
}

pub(super) fn run(t: &PeerTools, s: &Share, input: &Value) -> Outcome {
    let mut audience: Option<String> = None;
    let result = mint(t, s, input, &mut audience);
    let path_shown = input.get("path").and_then(Value::as_str).map(shown);
    match result {
        Ok(m) => {
            let event = json!({
                "handle_id": m.handle.handle_id, "path": m.path, "audience": m.audience,
                "expires_at_ms": m.handle.expires_at_ms, "outcome": "ok", "reason": null,
            });
            let text = json!({
                "handle": m.handle.token, "handle_id": m.handle.handle_id,
                "expires_at_ms": m.handle.expires_at_ms, "audience": m.audience,
            })
            .to_string();
            Outcome {
                text,
                is_error: false,
                event: ("peer_handle_mint", event),
            }
        }
        Err(r) => {
            let event = json!({
                "handle_id": null, "path": path_shown, "audience": audience,
                "expires_at_ms": null, "outcome": r.code, "reason": r.message,
            });
            Outcome {
                text: r.text(),
                is_error: true,
                event: ("peer_handle_mint", event),
            }
        }
    }
}

fn mint(t: &PeerTools, s: &Share, input: &Value, audience: &mut Option<String>) -> Result<Minted, Refused> {
    let rel = field(input, "path")?;
    let peer_text = field(input, "peer")?;
    let ttl = ttl_secs(input.get("ttl"), s.max_ttl_secs)?;
    checked_path(rel)?;
    resolve(t, s, rel)?;
    let peer = Peer::parse(peer_text).map_err(|e| Refused::new("peer_unreachable", e))?;
    let aud = card_audience(s, &peer)?;
    *audience = Some(aud.clone());
    let exp = now_ms().saturating_add(ttl.saturating_mul(1000));
    let handle = peer::mint(&s.key, &t.session_id, rel, exp, &aud)
        .map_err(|e| Refused::new("io_error", format!("the random source failed: {e}")))?;
    Ok(Minted {
        handle,
        path: rel.to_string(),
        audience: aud,
    })
}

/// The handle's lifetime, seconds: `ttl` (a duration such as `90s`, `10m`, `1h`, or whole
/// seconds) clamped down to `max`; absent is `max`.
pub(crate) fn ttl_secs(ttl: Option<&Value>, max: u64) -> Result<u64, Refused> {
    let v = match ttl {
        None | Some(Value::Null) => return Ok(max),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(n) => serde_yaml::Value::Number(n.into()),
            None => return Err(Refused::new("invalid_ttl", "ttl must be a positive duration")),
        },
        Some(Value::String(s)) => serde_yaml::Value::String(s.clone()),
        Some(_) => {
            return Err(Refused::new(
                "invalid_ttl",
                "ttl must be a duration such as 90s, 10m or 1h",
            ))
        }
    };
    let secs = units::seconds(&v).map_err(|e| Refused::new("invalid_ttl", format!("ttl: {e}")))?;
    Ok(secs.min(max))
}

/// The path rules of the resource plane, on the path as given and on its percent-decoded
/// form: an escape written either way is refused, and the path is used exactly as given.
pub(crate) fn checked_path(rel: &str) -> Result<(), Refused> {
    let refuse = |r: Refusal| Refused::new(r.code(), r.message());
    path::check(rel).map_err(refuse)?;
    path::request_path(rel).map_err(refuse)?;
    Ok(())
}

/// The file must exist beneath the root as a regular file within `max_bytes`, reached by
/// the same confined resolution a redeem uses.
fn resolve(t: &PeerTools, s: &Share, rel: &str) -> Result<(), Refused> {
    let refuse = |r: Refusal| Refused::new(r.code(), r.message());
    let symlinks = Symlinks::for_class(t.class);
    let root = open::open_root(&t.work, &s.root, symlinks)
        .map_err(refuse)?
        .ok_or_else(|| refuse(Refusal::NotFound))?;
    open::open_file(std::os::fd::AsFd::as_fd(&root), rel, symlinks, s.max_bytes).map_err(refuse)?;
    Ok(())
}

/// Fetch `http://<peer>/.well-known/agent-card.json`, after `capabilities.network.allow`
/// admits the destination, and compute the audience from the card's `name` and `url`.
fn card_audience(s: &Share, peer: &Peer) -> Result<String, Refused> {
    let unreachable = |why: String| Refused::new("peer_unreachable", why);
    gate::check(&s.network_allow, "http", &peer.host, Some(peer.port)).map_err(|d| unreachable(d.0))?;
    let opts = Options {
        connect_timeout: Duration::from_secs(5),
        read_timeout: Duration::from_secs(10),
        max_response: MAX_CARD,
        tls: None,
        refuse_loopback: false,
    };
    let url = format!("http://{}/.well-known/agent-card.json", peer.authority());
    let card =
        client::get(&url, &[], &opts).map_err(|e| unreachable(format!("{}: {e}", peer.authority())))?;
    if card.status != 200 {
        return Err(unreachable(format!(
            "{} answered {} for its agent card",
            peer.authority(),
            card.status
        )));
    }
    let card: Value = serde_json::from_slice(&card.body)
        .map_err(|_| unreachable(format!("{}'s agent card is not JSON", peer.authority())))?;
    let text = |k: &str| {
        card.get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.trim().is_empty())
    };
    let (Some(name), Some(url)) = (text("name"), text("url")) else {
        return Err(unreachable(format!(
            "{}'s agent card has no name and url",
            peer.authority()
        )));
    };
    let at = Peer::parse(url).map_err(|e| unreachable(format!("the agent card's url: {e}")))?;
    Ok(peer::audience(name, &at.authority()))
}
