//! A session's standing with the roost, settled before any task runs. A capsule launched by
//! a delegating parent carries `MURMUR_SPAWNER` (E-RUN-020 when it cannot be read) and its
//! approval as one line on standard input; a session registers when its manifest declares
//! `capabilities.spawn.allow` or when it holds such an approval, and a missing
//! `MURMUR_ROOST_URL` or a refused registration is E-RUN-019. A registered session holds
//! `POST /hold` open for its lifetime, so the roost learns of its death however it dies. At
//! the end it deregisters, best effort and bounded in time, then releases the hold.

use super::roost_client::{Credential, Hold, Roost};
use crate::diag::{code, Diagnostic};
use crate::manifest::model::Manifest;
use crate::spawner::Spawner;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

/// How long one roost call may take.
pub const ROOST_TIMEOUT: Duration = Duration::from_secs(10);
/// How long deregistration may hold up the end of a session.
const DEREGISTER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a launched child waits for its approval on standard input.
const STDIN_WAIT: Duration = Duration::from_secs(10);
/// The longest approval line read, bytes.
const MAX_APPROVAL: u64 = 8 * 1024;

/// What the launch learned about delegation.
pub struct Standing {
    /// Who delegated this session, if anybody.
    pub spawner: Option<Spawner>,
    /// The registration, when this session registered.
    pub registration: Option<Registration>,
}

/// A registered session: the roost and the credential it minted for this session.
pub struct Registration {
    pub roost: Roost,
    pub credential: Arc<Credential>,
    /// The session held open at the roost, so the roost learns of this process's death;
    /// released after deregistering.
    hold: Option<Hold>,
    finished: bool,
}

fn refused(why: impl Into<String>) -> Diagnostic {
    Diagnostic::new(code::RUN_ROOST, "MURMUR_ROOST_URL", why)
}

/// The archive this process loaded must be the one the approval names (its `digest`; the
/// roost verified the approval's MAC when this session registered with it).
fn approved_bytes(approval: &str, loaded: &str, coords: &str) -> Result<(), Diagnostic> {
    let payload = crate::token::shape(crate::token::Kind::Approval, approval)
        .map_err(|_| refused("the spawn approval on standard input is malformed"))?;
    let approved = payload.get("digest").and_then(|d| d.as_str()).unwrap_or_default();
    if approved.eq_ignore_ascii_case(loaded) {
        return Ok(());
    }
    Err(refused(crate::roost::messages::wrong_bytes(
        coords, approved, loaded,
    )))
}

/// The approval a delegating parent wrote on standard input: one line, trimmed.
fn approval_from_stdin() -> Result<String, Diagnostic> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let r = std::io::stdin()
            .lock()
            .take(MAX_APPROVAL)
            .read_to_end(&mut buf)
            .map(|_| buf);
        let _ = tx.send(r);
    });
    let bytes = match rx.recv_timeout(STDIN_WAIT) {
        Ok(Ok(b)) => b,
        Ok(Err(e)) => {
            return Err(refused(format!(
                "cannot read the spawn approval from standard input: {e}"
            )))
        }
        Err(_) => {
            return Err(refused(format!(
                "no spawn approval arrived on standard input within {} s",
                STDIN_WAIT.as_secs()
            )))
        }
    };
    let text = String::from_utf8(bytes).unwrap_or_default();
    let line = text.lines().next().unwrap_or("").trim().to_string();
    if line.is_empty() {
        return Err(refused(
            "MURMUR_SPAWNER is set but no spawn approval arrived on standard input (a delegated capsule is launched by its parent's runtime)",
        ));
    }
    Ok(line)
}

/// Settle delegation for session `session_id` of `m`. `env` reads the process environment;
/// `loaded` is the sha256 of the archive this process runs (a capsule from the registry).
pub fn settle(
    m: &Manifest,
    session_id: &str,
    env: &dyn Fn(&str) -> Option<String>,
    loaded: Option<&str>,
) -> Result<Standing, Diagnostic> {
    let spawner = Spawner::from_env(env("MURMUR_SPAWNER").as_deref())?;
    let approval = match &spawner {
        Some(_) => Some(approval_from_stdin()?),
        None => None,
    };
    if m.capabilities.spawn_allow.is_empty() && approval.is_none() {
        return Ok(Standing {
            spawner,
            registration: None,
        });
    }
    let url = env("MURMUR_ROOST_URL")
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| {
            refused("MURMUR_ROOST_URL is not set: a capsule that declares capabilities.spawn.allow, or that was launched under a spawn approval, registers with mur-roost before it runs")
                .with_hint("start mur-roost and set MURMUR_ROOST_URL=http://127.0.0.1:<port>")
        })?;
    let roost = Roost::new(&url, ROOST_TIMEOUT).map_err(refused)?;
    let credential = roost
        .register(session_id, &m.name, &m.version, approval.as_deref())
        .map_err(|e| refused(format!("registration with mur-roost failed: {e}")))?;
    let hold = match roost.hold(&credential) {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!(
                "warning: mur-roost does not hold this session ({e}): a roost that offers POST /hold ends a registration without its hold within seconds (this session's delegations are then refused); one that does not will count the session as running until it restarts, should this process die"
            );
            None
        }
    };
    // The roost compared the approval with the registry as it read it; these are the bytes
    // this process read, possibly earlier. Checked once the hold is up, so the roost frees
    // the session when this refusal ends the process.
    if let (Some(a), Some(sha)) = (approval.as_deref(), loaded) {
        approved_bytes(a, sha, &format!("{}@{}", m.name, m.version))?;
    }
    Ok(Standing {
        spawner,
        registration: Some(Registration {
            roost,
            credential: Arc::new(credential),
            hold,
            finished: false,
        }),
    })
}

impl Registration {
    /// Deregister with `complete` (the session ended ok) or `failed`; best effort, at most
    /// a couple of seconds.
    pub fn finish(mut self, ok: bool) {
        self.deregister(ok);
    }

    fn deregister(&mut self, ok: bool) {
        if self.finished {
            return;
        }
        self.finished = true;
        let outcome = if ok { "complete" } else { "failed" };
        if let Ok(roost) = Roost::new(self.roost.url(), DEREGISTER_TIMEOUT) {
            let _ = roost.deregister(&self.credential, outcome);
        }
        // Released only now: a hold that closed first would have the session counted failed.
        self.hold = None;
    }
}

impl Drop for Registration {
    /// A session that ends on an error path is reported `failed`.
    fn drop(&mut self) {
        self.deregister(false);
    }
}

#[cfg(test)]
mod tests {
    use super::approved_bytes;
    use crate::token::{mint, Domain, Key};

    #[test]
    fn a_child_runs_only_the_bytes_its_approval_names() {
        let key = Key::generate().unwrap();
        let (old, new) = ("a".repeat(64), "b".repeat(64));
        let approval = mint(
            &key,
            Domain::Approval,
            &serde_json::json!({"v": 1, "sid": "ses_x", "name": "courier", "version": "0.1.0",
                                "digest": old, "depth": 1, "exp": 1, "jti": "j"}),
        );
        assert!(approved_bytes(&approval, &old, "courier@0.1.0").is_ok());
        assert!(approved_bytes(&approval, &old.to_uppercase(), "courier@0.1.0").is_ok());
        let d = approved_bytes(&approval, &new, "courier@0.1.0").unwrap_err();
        assert_eq!(d.code, "E-RUN-019");
        assert_eq!(
            d.message,
            crate::roost::messages::wrong_bytes("courier@0.1.0", &old, &new)
        );
        assert!(approved_bytes("msa1.garbage", &old, "c@1").is_err());
    }
}
