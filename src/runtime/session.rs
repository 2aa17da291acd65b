//! Session identity and the workdir layout: the accessible workdir the guest sees, and the
//! records directory (trace, logs) beside or inside it.

use crate::diag::{code, Diagnostic};
use std::path::{Component, Path, PathBuf};

pub use crate::ids::session_id as new_session_id;

/// Where a session keeps what the guest sees and what the runtime records.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The accessible workdir.
    pub workdir: PathBuf,
    /// `trace.jsonl` and `logs/`: the workdir itself, or `<workdir>/.murmur/<sid>` when the
    /// workdir was given with `--workdir`.
    pub records: PathBuf,
    /// The one directory the guest gets as its preopen `.`.
    pub preopen: PathBuf,
}

impl Layout {
    /// The layout for `session_id`, without touching the filesystem.
    pub fn plan(base: &Path, explicit: Option<&Path>, session_id: &str, scope: Option<&str>) -> Layout {
        let (workdir, records) = match explicit {
            Some(dir) => (dir.to_path_buf(), dir.join(".murmur").join(session_id)),
            None => {
                let w = base.join("workdir").join(session_id);
                (w.clone(), w)
            }
        };
        let preopen = match scope {
            Some(s) => workdir.join(s),
            None => workdir.clone(),
        };
        Layout {
            workdir,
            records,
            preopen,
        }
    }

    /// Create the directories. An explicit workdir must already exist; the preopen must stay
    /// inside the workdir once symlinks are resolved (E-CAP-002).
    pub fn create(&mut self, explicit: bool) -> Result<(), Diagnostic> {
        let io = |p: &Path, e: std::io::Error| {
            Diagnostic::new(
                code::IO_READ,
                p.display().to_string(),
                format!("cannot prepare {}: {e}", p.display()),
            )
        };
        if explicit && !self.workdir.is_dir() {
            return Err(Diagnostic::new(
                code::IO_READ,
                "--workdir",
                format!(
                    "--workdir {} is not an existing directory",
                    self.workdir.display()
                ),
            ));
        }
        for dir in [
            &self.workdir,
            &self.records,
            &self.records.join("logs"),
            &self.workdir.join("out"),
        ] {
            std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
        }
        self.workdir = absolute(&self.workdir).map_err(|e| io(&self.workdir, e))?;
        self.records = absolute(&self.records).map_err(|e| io(&self.records, e))?;
        if self.preopen != self.workdir {
            std::fs::create_dir_all(&self.preopen).map_err(|e| io(&self.preopen, e))?;
        }
        let preopen = absolute(&self.preopen).map_err(|e| io(&self.preopen, e))?;
        if !preopen.starts_with(&self.workdir) {
            return Err(Diagnostic::new(
                code::CAP_SCOPE,
                "capabilities.filesystem.scope",
                format!(
                    "the filesystem scope resolves to {}, outside the workdir",
                    preopen.display()
                ),
            ));
        }
        self.preopen = preopen;
        Ok(())
    }
}

fn absolute(p: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(p)
}

/// Write the task: an existing file is copied, anything else is written as text.
pub fn write_task(workdir: &Path, task: &str) -> Result<(), Diagnostic> {
    let dest = workdir.join("task.md");
    let as_file = Path::new(task);
    let plain = as_file.components().all(|c| {
        matches!(
            c,
            Component::Normal(_) | Component::CurDir | Component::RootDir | Component::ParentDir
        )
    });
    let result = if plain && as_file.is_file() {
        std::fs::copy(as_file, &dest).map(|_| ())
    } else {
        std::fs::write(&dest, task)
    };
    result.map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "--task",
            format!("cannot write {}: {e}", dest.display()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_move_under_dot_murmur_with_an_explicit_workdir() {
        let l = Layout::plan(Path::new("/m"), None, "ses_1", None);
        assert_eq!(
            (l.workdir.clone(), l.records.clone()),
            (
                PathBuf::from("/m/workdir/ses_1"),
                PathBuf::from("/m/workdir/ses_1")
            )
        );
        let l = Layout::plan(Path::new("/m"), Some(Path::new("/w")), "ses_1", Some("data"));
        assert_eq!(l.records, PathBuf::from("/w/.murmur/ses_1"));
        assert_eq!(l.preopen, PathBuf::from("/w/data"));
    }

    #[test]
    fn session_ids_have_the_spec_shape() {
        let id = new_session_id().unwrap();
        assert_eq!(id.len(), 36);
        assert!(
            id.starts_with("ses_")
                && id[4..]
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }
}
