//! One prune of the records root, as named steps: hold the root (one prune at a time),
//! measure every session's records (and its ended child workdir), then remove the oldest
//! first until the policy holds, skipping the current session, a live one (its lock is
//! held), one kept on purpose and one written in the last [`GRACE_SECS`]. Only entries
//! named like a session are considered; a symlink in the root is never followed.

use super::children::{self, Found};
use super::{tree, Policy, KEEP};
use crate::fsx::{self, Dir};
use std::path::{Path, PathBuf};

/// Seconds after its last write during which a records directory is never removed: a
/// session between making its records and locking them, or a child's workdir its parent
/// is still reading the answer from.
pub const GRACE_SECS: u64 = 60;
/// The prefix a records directory is renamed to before it is removed, so a prune cut short
/// leaves no half-removed session for `mur trace` to find; the next prune finishes it.
const LEFTOVER: &str = ".pruned-";

/// What one prune is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    pub policy: Policy,
    /// Report what would be removed; remove nothing.
    pub dry_run: bool,
    /// The session running this prune (never removed).
    pub current: Option<String>,
    /// Wait for a prune already running (`mur records prune`); else give up at once.
    pub wait: bool,
    /// Now, in seconds since the epoch.
    pub now: u64,
}

/// One session's records removed (or that would be).
#[derive(Debug, Clone)]
pub struct Removed {
    pub session: String,
    pub bytes: u64,
    pub age_days: u64,
    /// `age`, `count`, `bytes`, or `unfinished` (a prune cut short before).
    pub reason: &'static str,
    /// The ended child's workdir removed with it.
    pub child_workdir: Option<PathBuf>,
}

/// What a prune did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub removed: Vec<Removed>,
    /// Bytes removed (or that would be).
    pub freed: u64,
    /// Sessions and bytes left in the root (kept on purpose excluded).
    pub sessions: u64,
    pub bytes: u64,
    /// Sessions the policy would remove but that are live (or their parent is).
    pub live: u64,
    /// Sessions kept on purpose (a `keep` file).
    pub kept: u64,
    /// Removals that failed, in words.
    pub errors: Vec<String>,
    /// Another prune held the root and this one did not wait.
    pub busy: bool,
}

/// One session's records as measured (no descriptor is kept: a root of 50,000 sessions
/// would need as many).
struct Entry {
    name: String,
    /// The device and inode measured: what a removal must find again under the name.
    identity: (u64, u64),
    bytes: u64,
    newest: i128,
    /// Whether the records link a delegated child's workdir.
    linked: bool,
    leftover: bool,
}

/// A session's records taken for removal: held open and locked, with the child's workdir
/// they link to.
struct Held {
    /// Held for its lock, until the removal is done.
    _locked: Dir,
    child: Option<Found>,
}

/// What [`take`] found.
enum Take {
    Held(Held),
    /// The session, or its parent, still runs.
    Live,
    /// Gone, or not the directory measured.
    Gone,
}

/// Prune the records root `root` by `o`; a root that does not exist holds nothing.
pub fn prune(root: &Path, o: &Options) -> Result<Report, String> {
    let dir = match fsx::open_private(root) {
        Ok(d) => d,
        Err(fsx::FsError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Report::default())
        }
        Err(e) => return Err(format!("the records root cannot be used: {e}")),
    };
    if !hold_root(&dir, o.wait)? {
        return Ok(Report {
            busy: true,
            ..Report::default()
        });
    }
    let mut report = Report::default();
    let entries = measure_all(&dir, &mut report);
    apply(&dir, entries, o, &mut report);
    Ok(report)
}

/// Step: one prune at a time (an exclusive lock on the root itself, which no session
/// takes); whether it was taken.
fn hold_root(root: &Dir, wait: bool) -> Result<bool, String> {
    use rustix::fs::{flock, FlockOperation};
    if wait {
        flock(root.as_fd(), FlockOperation::LockExclusive)
            .map(|()| true)
            .map_err(|e| format!("cannot lock the records root: {e}"))
    } else {
        Ok(flock(root.as_fd(), FlockOperation::NonBlockingLockExclusive).is_ok())
    }
}

use crate::ids::is_session_id as is_session;

/// Step: every session's records directory in the root, measured, oldest first. Anything
/// else (another name, a file, a symlink) is left alone.
fn measure_all(root: &Dir, report: &mut Report) -> Vec<Entry> {
    let mut out = Vec::new();
    let Ok(mut reader) = rustix::fs::Dir::read_from(root.as_fd()) else {
        return out;
    };
    while let Some(Ok(item)) = reader.read() {
        let Ok(name) = item.file_name().to_str() else {
            continue;
        };
        let leftover = name.strip_prefix(LEFTOVER).is_some_and(is_session);
        if !leftover && !is_session(name) {
            continue;
        }
        // `sub` opens with O_NOFOLLOW: a symlink (or a file) under a session's name is
        // refused here and never followed.
        let Ok(dir) = root.sub(name) else { continue };
        if rustix::fs::statat(dir.as_fd(), KEEP, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            report.kept += 1;
            continue;
        }
        let Ok(identity) = dir.identity() else { continue };
        let m = tree::measure(dir.as_fd());
        let linked =
            rustix::fs::statat(dir.as_fd(), children::FILE, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).is_ok();
        let child_bytes = match linked {
            true => children::find(&dir).map_or(0, |c| c.measure().bytes),
            false => 0,
        };
        out.push(Entry {
            name: name.to_string(),
            identity,
            bytes: m.bytes.saturating_add(child_bytes),
            newest: m.newest,
            linked,
            leftover,
        });
    }
    out.sort_by(|a, b| (a.newest, &a.name).cmp(&(b.newest, &b.name)));
    out
}

/// Step: remove the oldest first while a bound is exceeded.
fn apply(root: &Dir, entries: Vec<Entry>, o: &Options, report: &mut Report) {
    let p = &o.policy;
    let counted = entries.iter().filter(|e| !e.leftover);
    report.sessions = counted.clone().count() as u64;
    report.bytes = counted.map(|e| e.bytes).fold(0u64, u64::saturating_add);
    let now = i128::from(o.now);
    for e in entries {
        let age = u64::try_from(now - e.newest).unwrap_or(0);
        let reason = if e.leftover {
            "unfinished"
        } else if age > p.max_age_days.saturating_mul(86_400) {
            "age"
        } else if report.sessions > p.max_sessions {
            "count"
        } else if report.bytes > p.max_bytes {
            "bytes"
        } else {
            continue;
        };
        if o.current.as_deref() == Some(e.name.as_str()) || (!e.leftover && age < GRACE_SECS) {
            continue;
        }
        let held = match take(root, &e) {
            Take::Held(h) => h,
            Take::Live => {
                report.live += 1;
                continue;
            }
            Take::Gone => continue,
        };
        if !o.dry_run {
            if let Err(why) = remove(root, &e, &held) {
                report.errors.push(why);
                continue;
            }
        }
        if !e.leftover {
            report.sessions -= 1;
            report.bytes = report.bytes.saturating_sub(e.bytes);
        }
        report.freed = report.freed.saturating_add(e.bytes);
        report.removed.push(Removed {
            session: e.name.trim_start_matches(LEFTOVER).to_string(),
            bytes: e.bytes,
            age_days: age / 86_400,
            reason,
            child_workdir: held.child.as_ref().map(|c| c.children.shown().join(&c.name)),
        });
    }
}

/// Step: open `e` again (the directory measured, or nothing) and lock it: free only when
/// its session has ended (this descriptor then holds the lock until it is dropped) and,
/// for a delegated child, so has its parent.
fn take(root: &Dir, e: &Entry) -> Take {
    let Ok(dir) = root.sub(&e.name) else {
        return Take::Gone;
    };
    if dir.identity().ok() != Some(e.identity) {
        return Take::Gone;
    }
    if !tree::take_if_free(dir.as_fd()) {
        return Take::Live;
    }
    let child = if e.linked { children::find(&dir) } else { None };
    if child.as_ref().is_some_and(|c| !c.parent_ended()) {
        return Take::Live;
    }
    Take::Held(Held { _locked: dir, child })
}

/// Step: the child's workdir first (while the records still name it), then the records,
/// renamed aside before they are removed.
fn remove(root: &Dir, e: &Entry, held: &Held) -> Result<(), String> {
    if let Some(c) = &held.child {
        c.remove()
            .map_err(|err| format!("cannot remove the child workdir of {}: {err}", e.name))?;
    }
    let aside = if e.leftover {
        e.name.clone()
    } else {
        let aside = format!("{LEFTOVER}{}", e.name);
        root.rename(&e.name, &aside)
            .map_err(|err| format!("cannot set {} aside: {err}", e.name))?;
        aside
    };
    root.remove_tree(&aside)
        .map_err(|err| format!("cannot remove {}: {err}", e.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_session_names_are_considered() {
        assert!(is_session("ses_0123456789abcdef0123456789abcdef"));
        assert!(!is_session("ses_0123456789ABCDEF0123456789abcdef"));
        assert!(!is_session("ses_0123"));
        assert!(!is_session("notes.txt"));
    }
}
