//! `mur token --session ID [NAME]`: print the bearer token of credential NAME (by default
//! the first declared, which the launch line names) of a running session's authenticated
//! door, read from the session's `door-tokens.json` (opened once without following a
//! symlink, then required to be a regular file of this user, mode 0600). A NAME the session
//! does not declare is a usage error (exit 2), not a failure to read.

use super::trace::session_dir;
use crate::cli::ArgError;
use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use rustix::fs::{self as rfs, Mode, OFlags};
use serde_json::Value;
use std::io::Read;

use crate::places::DOOR_TOKENS_FILE as TOKENS_FILE;
/// The largest tokens file read.
const MAX_FILE: u64 = 1 << 20;

fn err(message: String) -> Diagnostic {
    Diagnostic::new(code::IO_READ, "--session", message)
}

/// Why no token was printed.
#[derive(Debug)]
pub enum Refused {
    /// The command line names what the session does not have: a usage error.
    Usage(ArgError),
    /// The session's tokens could not be read.
    Failed(Diagnostic),
}

impl From<Diagnostic> for Refused {
    fn from(d: Diagnostic) -> Refused {
        Refused::Failed(d)
    }
}

/// The token to print, followed by a newline.
pub fn token(session: &str, name: Option<&str>) -> Result<String, Refused> {
    let dir_path = session_dir(session)?;
    let dir = Dir::open(&dir_path).map_err(|e| err(format!("no records for session {session}: {e}")))?;
    let shown = dir_path.join(TOKENS_FILE);
    // Opened once, never through a symlink, and judged by what was opened: a private
    // regular file of this user.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = rfs::openat(dir.as_fd(), TOKENS_FILE, flags, Mode::empty()).map_err(|e| {
        err(format!(
            "cannot read {}: {e} (the session's door takes no credentials, or the session ended)",
            shown.display()
        ))
    })?;
    let st = rfs::fstat(&fd).map_err(|e| err(format!("cannot read {}: {e}", shown.display())))?;
    let regular = rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::RegularFile;
    let mine = st.st_uid == rustix::process::geteuid().as_raw();
    if !regular || !mine || st.st_mode & 0o077 != 0 {
        return Err(err(format!(
            "{} is not a private file of this user (mode 0600): refusing to read tokens from it",
            shown.display()
        ))
        .into());
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(MAX_FILE)
        .read_to_end(&mut bytes)
        .map_err(|e| err(format!("cannot read {}: {e}", shown.display())))?;
    let v: Value = serde_json::from_slice(&bytes)
        .map_err(|_| err(format!("{} is not a tokens file", shown.display())))?;
    let tokens = v
        .get("tokens")
        .and_then(Value::as_object)
        .ok_or_else(|| err(format!("{} holds no tokens", shown.display())))?;
    let names = || tokens.keys().cloned().collect::<Vec<_>>().join(", ");
    // The first declared credential (a file written before `default` existed: the only one).
    let only = (tokens.len() == 1).then(|| tokens.keys().next()).flatten();
    let default = v
        .get("default")
        .and_then(Value::as_str)
        .or(only.map(String::as_str));
    let chosen = match name.or(default) {
        Some(n) => tokens.get(n).ok_or_else(|| {
            Refused::Usage(ArgError::Invalid(format!(
                "session {session} declares no credential '{n}' (NAME is one of: {})",
                names()
            )))
        })?,
        None => {
            return Err(Refused::Usage(ArgError::Invalid(format!(
                "name one of the session's credentials: {}",
                names()
            ))))
        }
    };
    chosen
        .as_str()
        .map(|t| format!("{t}\n"))
        .ok_or_else(|| err(format!("{} is not a tokens file", shown.display())).into())
}
