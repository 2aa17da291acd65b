//! Who may use a session's door, settled when the session starts: the authenticated door's
//! gate and its tokens file (`door-tokens.json`, 0600, in the records directory, removed
//! when the session ends), or, for a door left open, the one launch warning (W-SEC-025)
//! naming what any local user can do through it.

use super::door::auth::{Gate, TOKENS_FILE};
use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::model::{DoorAuth, Manifest, TaskAcceptance, SPAWNER_CREDENTIAL};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The door's access for this session.
pub struct Access {
    /// The gate, when the manifest declares authentication.
    pub gate: Option<Arc<Gate>>,
    /// The `spawner` credential's token, for the launch line of a delegated child.
    pub spawner_token: Option<String>,
}

/// Settle the door's access: with `capabilities.network.authentication` a gate (with the
/// `spawner` credential when `delegated`) and its tokens written to `records`; else the
/// open-door warning on stderr.
pub fn settle(
    m: &Manifest,
    session_id: &str,
    url: &str,
    records: &Dir,
    delegated: bool,
) -> Result<Access, Diagnostic> {
    let Some(auth) = &m.capabilities.door_auth else {
        eprintln!("{}", open_door_warning(m, url));
        return Ok(Access {
            gate: None,
            spawner_token: None,
        });
    };
    let gate = Gate::new(auth, session_id, delegated).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "capabilities.network.authentication",
            format!("cannot make the door's key: {e}"),
        )
    })?;
    write_tokens(records, session_id, url, &gate)?;
    let spawner_token = delegated.then(|| gate.mint(SPAWNER_CREDENTIAL));
    Ok(Access {
        gate: Some(Arc::new(gate)),
        spawner_token,
    })
}

/// `door-tokens.json`: the session, its door, each declared credential's token and the
/// `default` one `mur token` prints when no name is given (the first declared); created new
/// (never over something already there), mode 0600, in the 0700 records directory.
fn write_tokens(records: &Dir, session_id: &str, url: &str, gate: &Gate) -> Result<(), Diagnostic> {
    let declared = gate.tokens();
    let default = declared.first().map(|(n, _)| n.clone());
    let tokens: Map<String, Value> = declared.into_iter().map(|(n, t)| (n, t.into())).collect();
    let body = json!({"session_id": session_id, "url": url, "tokens": tokens, "default": default});
    let fail = |e: &dyn std::fmt::Display| {
        Diagnostic::new(
            code::IO_READ,
            "MURMUR_RECORDS_DIR",
            format!("cannot write the door's tokens to {TOKENS_FILE}: {e}"),
        )
    };
    let mut f = records.create_new(TOKENS_FILE).map_err(|e| fail(&e))?;
    let mut bytes = body.to_string().into_bytes();
    bytes.push(b'\n');
    use std::io::Write;
    f.write_all(&bytes)
        .and_then(|_| f.sync_all())
        .map_err(|e| fail(&e))
}

/// The command that prints a token of this door, as the launch line gives it: with no name,
/// `mur token` prints the first declared credential's; any other is named after it.
pub fn token_command(session_id: &str, auth: &DoorAuth) -> String {
    let mut names = auth.credentials.iter().map(|c| c.name.as_str());
    let first = names.next().unwrap_or_default();
    let others: Vec<&str> = names.collect();
    let mut line = format!("mur token --session {session_id} prints {first}'s token");
    if !others.is_empty() {
        line.push_str(&format!("; add NAME for {}", others.join(", ")));
    }
    line
}

/// The session ended: its tokens name a key that is gone; the file goes too.
pub fn forget(records: &Dir, access: &Access) {
    if access.gate.is_some() {
        let _ = records.remove_file(TOKENS_FILE);
    }
}

/// W-SEC-025: what a stranger on this host can do through a door with no authentication.
pub fn open_door_warning(m: &Manifest, url: &str) -> Diagnostic {
    let caps = &m.capabilities;
    let mut can: Vec<String> = Vec::new();
    if m.lifecycle.task_acceptance != TaskAcceptance::None {
        let mut grants: Vec<String> = Vec::new();
        if let Some(shell) = &caps.shell_allow {
            grants.push(format!("shell: {}", shell.join(", ")));
        }
        if !caps.network_allow.is_empty() {
            grants.push("network".into());
        }
        if !caps.spawn_allow.is_empty() {
            grants.push("delegation".into());
        }
        let with = if grants.is_empty() {
            String::new()
        } else {
            format!(" ({})", grants.join("; "))
        };
        let budget = if m.inference.is_some() {
            " and spend its model budget"
        } else {
            ""
        };
        can.push(format!(
            "send it tasks that run with all it is granted{with}{budget}"
        ));
        can.push("read every task's text and answer, and cancel them".into());
    }
    if let Some(f) = &m.exports.files {
        can.push(format!(
            "read every file under exports.files root '{}'",
            f.root_written
        ));
    }
    let what = if can.is_empty() {
        "read its agent card".to_string()
    } else {
        can.join("; ")
    };
    Diagnostic::new(
        code::SEC_OPEN_DOOR,
        "capabilities.network.authentication",
        format!("the door at {url} takes no credentials: any local user of this host can {what}"),
    )
    .with_hint("declare capabilities.network.authentication (scheme: bearer, credentials with scopes) to require a token")
}
