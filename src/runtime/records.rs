//! Whether a session's records (`trace.jsonl`, `logs/`) were written whole: every records
//! writer (the trace, the bootstrap log, the guests' log copiers, the shell tools' saved
//! output) reports a failed write here; the first is warned once on stderr (`W-RUN-002`),
//! and the session's end reads it: `session_end` says `records: incomplete`, the status line
//! says `incomplete` and the exit is an error.

use crate::diag::{code, Diagnostic};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The records' health, shared by every writer of one session.
#[derive(Debug, Clone)]
pub struct Health(Arc<Inner>);

#[derive(Debug)]
struct Inner {
    /// The records directory, for the words of the warning.
    records: PathBuf,
    /// The first failed write, in words.
    first: Mutex<Option<String>>,
}

/// One records file's handle on the health: a failed write names that file.
#[derive(Debug, Clone)]
pub struct Watched {
    health: Health,
    rel: String,
}

impl Health {
    /// The health of the records kept in `records`.
    pub fn new(records: &Path) -> Health {
        Health(Arc::new(Inner {
            records: records.to_path_buf(),
            first: Mutex::new(None),
        }))
    }

    /// The handle of the records file `rel` (relative to the records directory).
    pub fn watch(&self, rel: &str) -> Watched {
        Watched {
            health: self.clone(),
            rel: rel.to_string(),
        }
    }

    /// The first failed write, if any: the records are incomplete.
    pub fn incomplete(&self) -> Option<String> {
        self.0.first.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Watched {
    /// The health this file reports to.
    pub fn health(&self) -> &Health {
        &self.health
    }

    /// A write to this file failed with `e`: the first failure of the session is kept and
    /// warned on stderr; later ones (of any file) only count as the same incompleteness.
    pub fn failed(&self, e: &dyn std::fmt::Display) {
        let inner = &self.health.0;
        let mut first = inner.first.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_some() {
            return;
        }
        let why = format!("cannot write {}: {e}", inner.records.join(&self.rel).display());
        let warning = Diagnostic::new(
            code::RUN_RECORDS_INCOMPLETE,
            "MURMUR_RECORDS_DIR",
            format!("{why}; the session's records are incomplete"),
        );
        eprintln!("{warning}");
        *first = Some(why);
    }
}

/// A log of the records written line by line (`logs/bootstrap.log`, a hook's log): a
/// failed write is reported to the health and the session goes on.
pub struct Log {
    file: Option<File>,
    watched: Watched,
}

impl Log {
    /// The log in `file` (as opened), reported as `watched`; one that could not be opened
    /// is reported at once.
    pub fn open<E: std::fmt::Display>(file: Result<File, E>, watched: Watched) -> Log {
        let file = match file {
            Ok(f) => Some(f),
            Err(e) => {
                watched.failed(&e);
                None
            }
        };
        Log { file, watched }
    }

    /// Append `text` and a newline.
    pub fn line(&mut self, text: &str) {
        if let Some(f) = self.file.as_mut() {
            if let Err(e) = f.write_all(format!("{text}\n").as_bytes()) {
                self.watched.failed(&e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_kept_and_later_ones_change_nothing() {
        let h = Health::new(Path::new("/r/ses_1"));
        assert_eq!(h.incomplete(), None);
        h.watch("logs/guest-stdout.log").failed(&"disk full");
        h.watch("trace.jsonl").failed(&"disk still full");
        assert_eq!(
            h.incomplete().as_deref(),
            Some("cannot write /r/ses_1/logs/guest-stdout.log: disk full")
        );
    }
}
