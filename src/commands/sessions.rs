//! The live sessions of this user as the operator's commands (`mur ps`, `stop`, `cancel`,
//! `watch`) find them: the `ses_…` directories of the records root (as `mur trace` finds
//! it) that belong to this user and whose `flock` a live `mur` holds — a directory whose
//! lock is free is a dead session's, forgotten — each with the small `session.json` the
//! session keeps beside its trace. Nothing else of the records is read.

use super::trace::session_dir;
use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::places::{records_root, SESSION_FILE};
use crate::retention::tree::held_by_another;
use crate::trace_view::clean;
use serde_json::Value;
use std::path::Path;

/// The largest `session.json` read.
pub const MAX_STATUS: u64 = 64 * 1024;

/// A live session: its id, its records directory (held), its `session.json` (`Null` while
/// the session has not written it yet, or when it cannot be read: then `problem` says why).
pub struct Live {
    pub id: String,
    pub dir: Dir,
    pub status: Value,
    pub problem: Option<String>,
}

impl Live {
    /// A string field of the status, cleaned for a terminal (`-` when absent).
    pub fn field(&self, key: &str) -> String {
        match self.status.get(key) {
            Some(Value::String(s)) => clean(s, 200),
            Some(Value::Number(n)) => n.to_string(),
            _ => "-".into(),
        }
    }

    /// Whether its `mur` still holds the records (it has not ended).
    pub fn alive(&self) -> bool {
        held_by_another(self.dir.as_fd())
    }

    /// Read `session.json` again (the session replaces it on each change).
    pub fn refresh(&mut self) {
        (self.status, self.problem) = status_of(&self.dir, &self.id);
    }
}

/// E-RUN-061: `id` names no live session of this user.
pub fn not_live(id: &str, why: String) -> Diagnostic {
    Diagnostic::new(code::RUN_SESSION_NOT_LIVE, "SESSION", why).with_hint(format!(
        "mur ps lists your live sessions; mur trace --session {} shows how one ended",
        clean(id, 100)
    ))
}

/// Session `id`, which must be alive and this user's (E-RUN-061 otherwise). A status file
/// that cannot be read does not hide it: `problem` says why.
pub fn open(id: &str) -> Result<Live, Diagnostic> {
    let path = session_dir(id)?;
    let root = path.parent().unwrap_or(Path::new("/"));
    let dir = Dir::open(root)
        .and_then(|r| r.sub(id))
        .map_err(|e| not_live(id, format!("no session {id} in {}: {e}", root.display())))?;
    let owner = rustix::fs::fstat(dir.as_fd())
        .map(|st| st.st_uid)
        .unwrap_or(u32::MAX);
    if owner != rustix::process::geteuid().as_raw() {
        return Err(not_live(
            id,
            format!("session {id} is not yours: its records belong to uid {owner}"),
        ));
    }
    if !held_by_another(dir.as_fd()) {
        return Err(not_live(id, format!("session {id} is not alive: it has ended")));
    }
    let (status, problem) = status_of(&dir, id);
    Ok(Live {
        id: id.to_string(),
        dir,
        status,
        problem,
    })
}

/// Every live session of this user under the records root, oldest name first: a
/// directory that is not a session's, not this user's, or whose lock is free is skipped.
pub fn list() -> Result<Vec<Live>, Diagnostic> {
    let root = records_root().ok_or_else(|| {
        Diagnostic::new(
            code::IO_READ,
            "MURMUR_RECORDS_DIR",
            "neither MURMUR_RECORDS_DIR nor HOME is set",
        )
    })?;
    let entries = match std::fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Diagnostic::new(
                code::IO_READ,
                "MURMUR_RECORDS_DIR",
                format!("cannot read {}: {e}", root.display()),
            ))
        }
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| crate::ids::is_session_id(n))
        .collect();
    names.sort();
    Ok(names.iter().filter_map(|n| open(n).ok()).collect())
}

/// [`read_status`], an error kept in words beside a `Null` status.
fn status_of(dir: &Dir, id: &str) -> (Value, Option<String>) {
    match read_status(dir, id) {
        Ok(v) => (v, None),
        Err(d) => (Value::Null, Some(d.message)),
    }
}

/// `session.json` of the held records `dir`: a private file of this user holding a JSON
/// object, or `Null` when the session has not written it yet. Anything else is an error
/// naming the file, never a panic.
fn read_status(dir: &Dir, id: &str) -> Result<Value, Diagnostic> {
    let bytes = match dir.read_own(SESSION_FILE, MAX_STATUS) {
        Ok(b) => b,
        Err(crate::fsx::FsError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Value::Null)
        }
        Err(e) => {
            return Err(Diagnostic::new(
                code::IO_READ,
                SESSION_FILE,
                format!("cannot read {SESSION_FILE} of session {id}: {e}"),
            ))
        }
    };
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(Diagnostic::new(
            code::IO_READ,
            SESSION_FILE,
            format!("{SESSION_FILE} of session {id} is not a session status (a JSON object)"),
        )),
    }
}
