//! Records kept and pruned on purpose: the retention policy of the records root (age,
//! count and bytes), read from the `records:` block of the operator's
//! `~/.config/murmur/config.yaml`, and the lock that says which sessions are live.
//!
//! A session holds an exclusive `flock` on its records directory and a shared one on its
//! workdir for its whole life ([`hold_session`]); the kernel drops both when the process
//! dies. A prune ([`prune::prune`]) removes only what it can lock itself, so a live
//! session's records, and the workdir of a delegated child whose parent still runs, are
//! never removed. The same pass is run at launch in the background ([`background`]) and by
//! `mur records prune`.

pub mod children;
pub mod prune;
pub mod tree;

use crate::diag::{code, Diagnostic};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The bounds of the records root. Defaults: 30 days, 1,000 sessions, 2 GiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Records whose newest file is older than this many days are removed.
    pub max_age_days: u64,
    /// At most this many sessions' records are kept (the oldest go first).
    pub max_sessions: u64,
    /// At most this many bytes of records (and ended children's workdirs) are kept.
    pub max_bytes: u64,
    /// Whether `mur run` prunes in the background at launch.
    pub at_launch: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            max_age_days: 30,
            max_sessions: 1000,
            max_bytes: 2_147_483_648,
            at_launch: true,
        }
    }
}

/// The file in a session's records directory that keeps it (and its child workdir) from
/// every prune, and out of the counts: `touch <records>/<session>/keep`.
pub const KEEP: &str = "keep";

/// Largest config file read (the same cap `mur install` reads it with).
const MAX_CONFIG: u64 = 64 * 1024;

impl Policy {
    /// The `records:` block of a config file's text (absent: the defaults). Unknown keys
    /// and values that are not whole numbers are refused, naming the key.
    pub fn parse(text: &str) -> Result<Policy, String> {
        let v: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
        let mut p = Policy::default();
        let Some(block) = v.get("records") else {
            return Ok(p);
        };
        let map = block.as_mapping().ok_or("records is not a mapping")?;
        for (k, val) in map {
            let key = k.as_str().unwrap_or("?");
            let num = || {
                val.as_u64()
                    .ok_or_else(|| format!("records.{key} is not a whole number >= 0"))
            };
            match key {
                "max_age_days" => p.max_age_days = num()?,
                "max_sessions" => p.max_sessions = num()?,
                "max_bytes" => p.max_bytes = num()?,
                "prune_at_launch" => {
                    p.at_launch = val
                        .as_bool()
                        .ok_or("records.prune_at_launch is not true or false")?
                }
                other => {
                    return Err(format!(
                        "records.{other} is not a key of records (max_age_days, max_sessions, max_bytes, prune_at_launch)"
                    ))
                }
            }
        }
        Ok(p)
    }

    /// The operator's policy: the `records:` block of `~/.config/murmur/config.yaml`
    /// (`$XDG_CONFIG_HOME/murmur/config.yaml`), the defaults without one.
    pub fn load() -> Result<Policy, Diagnostic> {
        let Some(path) = crate::places::user_config_file() else {
            return Ok(Policy::default());
        };
        let bytes = match crate::registry::store::read_small(&path, MAX_CONFIG) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Policy::default()),
            Err(e) => return Err(config_error(&path, e.to_string())),
        };
        let text = String::from_utf8(bytes).map_err(|_| config_error(&path, "not UTF-8".into()))?;
        Policy::parse(&text).map_err(|why| config_error(&path, why))
    }

    /// The policy in words, for the report.
    pub fn describe(&self) -> String {
        format!(
            "at most {} days, {} sessions, {} bytes",
            self.max_age_days, self.max_sessions, self.max_bytes
        )
    }
}

fn config_error(path: &Path, why: String) -> Diagnostic {
    Diagnostic::new(
        code::MAN_INVALID,
        path.display().to_string(),
        format!("{}: {why}", path.display()),
    )
}

/// Mark a session live for as long as this process holds these descriptors: an exclusive
/// lock on its records directory and a shared one on its workdir. A lock another process
/// holds is waited for a moment (a prune or a lister only tests it), then given up; what
/// could not be held is returned in words, and the session goes on.
pub fn hold_session(records: BorrowedFd<'_>, workdir: BorrowedFd<'_>) -> Vec<String> {
    // `mur ps` and `mur stop` test the records lock for a moment (shared): waited for.
    [
        hold_waiting(records, tree::Hold::Exclusive, "the records directory"),
        hold_waiting(workdir, tree::Hold::Shared, "the workdir (shared)"),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Take `hold` on `dir`, trying for about half a second (50 × 10 ms) while another process
/// holds it; what could not be held, in words.
fn hold_waiting(dir: BorrowedFd<'_>, hold: tree::Hold, what: &str) -> Option<String> {
    let mut tries = 0;
    while let Err(e) = tree::hold(dir, hold) {
        tries += 1;
        if tries >= 50 {
            return Some(format!("cannot lock {what}: {e}; a prune may take it for ended"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// A prune started at launch, on its own thread.
pub struct Background(Option<std::thread::JoinHandle<()>>);

/// Start the launch's prune of `root` on a thread (nothing when the policy says not to):
/// never `current`, never a live session. A policy that cannot be read is warned about
/// (W-RUN-004) and nothing is pruned.
pub fn background(root: PathBuf, current: String) -> Background {
    let policy = match Policy::load() {
        Ok(p) if p.at_launch => p,
        Ok(_) => return Background(None),
        Err(d) => {
            warn(&format!("{}; nothing was pruned", d.message));
            return Background(None);
        }
    };
    let spawned = std::thread::Builder::new()
        .name("records-prune".into())
        .spawn(move || {
            let opts = prune::Options {
                policy,
                dry_run: false,
                current: Some(current),
                wait: false,
                now: crate::clock::now_ms() / 1000,
            };
            if let Err(e) = prune::prune(&root, &opts) {
                warn(&e);
            }
        });
    match spawned {
        Ok(h) => Background(Some(h)),
        Err(e) => {
            warn(&format!("cannot start the records prune: {e}"));
            Background(None)
        }
    }
}

fn warn(why: &str) {
    let d = Diagnostic::new(
        code::RUN_RECORDS_PRUNE,
        "records",
        format!("records retention: {why}"),
    );
    eprintln!("{d}");
}

impl Background {
    /// No prune.
    pub fn none() -> Background {
        Background(None)
    }

    /// Wait at most `bound` for the prune to finish (at the session's end): whatever it
    /// had not removed by then stays whole or is finished by the next prune.
    pub fn settle(self, bound: Duration) {
        let Some(h) = self.0 else { return };
        let until = std::time::Instant::now() + bound;
        while !h.is_finished() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        if h.is_finished() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_records_block_is_read_and_checked() {
        assert_eq!(Policy::parse("registry: {}\n").unwrap(), Policy::default());
        let p = Policy::parse(
            "records:\n  max_age_days: 7\n  max_sessions: 3\n  max_bytes: 100\n  prune_at_launch: false\n",
        )
        .unwrap();
        assert_eq!(
            p,
            Policy {
                max_age_days: 7,
                max_sessions: 3,
                max_bytes: 100,
                at_launch: false
            }
        );
        assert!(Policy::parse("records:\n  max_age_days: -1\n")
            .unwrap_err()
            .contains("records.max_age_days"));
        assert!(Policy::parse("records:\n  max_days: 1\n")
            .unwrap_err()
            .contains("records.max_days is not a key"));
    }
}
