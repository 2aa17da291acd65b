//! Session identity and the layout of a session on disk: the accessible workdir the guest
//! sees, held open as a directory descriptor and written only through [`crate::fsx`], and
//! the records directory (trace, logs), which lives outside every guest's and contained
//! child's reach so that nothing the capsule runs can forge or truncate it.

use crate::diag::{code, Diagnostic};
use crate::fsx::{self, Dir};
use std::path::{Path, PathBuf};

pub use crate::ids::session_id as new_session_id;

pub use crate::places::records_root;

/// Where a session keeps what the guest sees and what the runtime records (planned).
#[derive(Debug, Clone)]
pub struct Plan {
    /// The directory the default workdir goes under (the manifest's), or `None` with an
    /// explicit `--workdir`.
    base: Option<PathBuf>,
    /// The accessible workdir.
    pub workdir: PathBuf,
    /// `trace.jsonl` and `logs/`.
    pub records: PathBuf,
    /// `capabilities.filesystem.scope`, relative to the workdir.
    scope: Option<String>,
    session_id: String,
    /// The device and inode the explicit workdir must have (a delegated child's, from
    /// [`WORKDIR_IDENTITY`]): checked on the opened directory before anything is made.
    identity: Option<(u64, u64)>,
}

/// The variable a delegating parent's launcher sets to the device and inode of the
/// directory it made for the child (`DEV:INO`): the child works in that directory or in
/// none, whatever was swapped in at its path after the launcher made it.
pub const WORKDIR_IDENTITY: &str = "MURMUR_WORKDIR_IDENTITY";

/// `DEV:INO` as [`WORKDIR_IDENTITY`] carries it.
pub fn parse_identity(text: &str) -> Result<(u64, u64), Diagnostic> {
    text.split_once(':')
        .and_then(|(d, i)| Some((d.parse().ok()?, i.parse().ok()?)))
        .ok_or_else(|| {
            Diagnostic::new(
                code::IO_READ,
                WORKDIR_IDENTITY,
                format!(
                    "{WORKDIR_IDENTITY} is not DEV:INO: {:?}",
                    crate::agent::sanitize::one_line(text, 80)
                ),
            )
        })
}

/// The created layout: each directory held open.
#[derive(Debug)]
pub struct Layout {
    pub workdir: PathBuf,
    pub records: PathBuf,
    /// The one directory the guest gets as its preopen `.` (shown path).
    pub preopen: PathBuf,
    pub work: Dir,
    pub records_dir: Dir,
    pub preopen_dir: Dir,
    /// What could not be done to keep the records' retention right (a lock not taken, a
    /// child's workdir link not written), for the bootstrap log.
    pub notes: Vec<String>,
}

impl Plan {
    /// The layout for `session_id`, without touching the filesystem. `records_root` is
    /// [`records_root`] (a parameter so tests need no environment).
    pub fn new(
        base: &Path,
        explicit: Option<&Path>,
        session_id: &str,
        scope: Option<&str>,
        records_root: &Path,
    ) -> Plan {
        let (base, workdir) = match explicit {
            Some(dir) => (None, dir.to_path_buf()),
            None => (Some(base.to_path_buf()), base.join("workdir").join(session_id)),
        };
        Plan {
            base,
            workdir,
            records: records_root.join(session_id),
            scope: scope.map(str::to_string),
            session_id: session_id.to_string(),
            identity: None,
        }
    }

    /// The explicit workdir must be the directory of this device and inode.
    pub fn expect_identity(mut self, identity: (u64, u64)) -> Plan {
        self.identity = Some(identity);
        self
    }

    /// The preopen path, for `--explain-scope` (nothing is created).
    pub fn preopen(&self) -> PathBuf {
        match &self.scope {
            Some(s) => self.workdir.join(s),
            None => self.workdir.clone(),
        }
    }

    /// Refuse a workdir that is not the directory [`Plan::expect_identity`] named.
    fn check_identity(&self, work: &Dir) -> Result<(), Diagnostic> {
        let Some(want) = self.identity else {
            return Ok(());
        };
        let found = work.identity().map_err(|e| {
            Diagnostic::new(
                code::IO_READ,
                "--workdir",
                format!("cannot read the workdir's identity: {e}"),
            )
        })?;
        if found != want {
            return Err(Diagnostic::new(
                code::IO_READ,
                "--workdir",
                format!(
                    "--workdir {} is not the directory the delegating parent made for this child (device:inode {}:{}, found {}:{}): it was replaced after it was made, and nothing was written there",
                    self.workdir.display(),
                    want.0,
                    want.1,
                    found.0,
                    found.1
                ),
            ));
        }
        Ok(())
    }

    /// Create the directories. An explicit workdir must already exist. Below the operator's
    /// directory every component is created or opened without following a symlink, so the
    /// scope cannot lead outside the workdir (E-CAP-002).
    pub fn create(self) -> Result<Layout, Diagnostic> {
        let io =
            |e: fsx::FsError| Diagnostic::new(code::IO_READ, "", format!("cannot prepare the session: {e}"));
        let work = match &self.base {
            None => {
                if !self.workdir.is_dir() {
                    return Err(Diagnostic::new(
                        code::IO_READ,
                        "--workdir",
                        format!(
                            "--workdir {} is not an existing directory",
                            self.workdir.display()
                        ),
                    ));
                }
                let work = Dir::open(&self.workdir).map_err(io)?;
                self.check_identity(&work)?;
                work
            }
            Some(base) => Dir::open(base)
                .and_then(|b| b.mkdirs(&format!("workdir/{}", self.session_id), 0o755))
                .map_err(io)?,
        };
        let root = self.records.parent().unwrap_or(Path::new("/"));
        let records_dir = fsx::private_dir(root, &self.session_id).map_err(io)?;
        // Records inside the workdir could be rewritten by the capsule they describe (say
        // `--workdir $HOME` with the default records root): refused, never written there.
        if fsx::is_within(&records_dir, &work).map_err(io)? {
            let _ = std::fs::remove_dir(&self.records);
            return Err(Diagnostic::new(
                code::IO_READ,
                "MURMUR_RECORDS_DIR",
                format!(
                    "the records directory {} is inside the workdir {}, where the capsule could rewrite them",
                    self.records.display(),
                    self.workdir.display()
                ),
            )
            .with_hint("set MURMUR_RECORDS_DIR to a directory outside the workdir"));
        }
        // Live from here: a prune never takes records or a workdir this session holds.
        let mut notes = crate::retention::hold_session(records_dir.as_fd(), work.as_fd());
        records_dir.mkdirs("logs", 0o700).map_err(io)?;
        work.mkdirs("out", 0o755).map_err(io)?;
        let preopen_dir = match &self.scope {
            None => Dir::open(&work.proc_path()).map_err(io)?,
            Some(s) => work.mkdirs(s.trim_end_matches('/'), 0o755).map_err(|e| {
                Diagnostic::new(
                    code::CAP_SCOPE,
                    "capabilities.filesystem.scope",
                    format!("the filesystem scope {s:?} cannot be used: {e}"),
                )
            })?,
        };
        let workdir = std::fs::canonicalize(work.proc_path()).unwrap_or(self.workdir.clone());
        let preopen = match &self.scope {
            Some(s) => workdir.join(s.trim_end_matches('/')),
            None => workdir.clone(),
        };
        let records = std::fs::canonicalize(records_dir.proc_path()).unwrap_or(self.records.clone());
        // A delegated child's workdir is removed with its records once both have ended.
        if let Some(identity) = self.identity {
            if let Err(e) = crate::retention::children::record(&records_dir, &workdir, identity) {
                notes.push(format!("cannot link the workdir to the records: {e}"));
            }
        }
        Ok(Layout {
            workdir,
            records,
            preopen,
            work,
            records_dir,
            preopen_dir,
            notes,
        })
    }
}

/// Write the task as `task.md`: an existing file (the operator's) is read and copied, anything
/// else is written as text; through the workdir's descriptor, replacing whatever stands there.
pub fn write_task(work: &Dir, task: &str) -> Result<(), Diagnostic> {
    let fail = |m: String| Diagnostic::new(code::IO_READ, "--task", m);
    let as_file = Path::new(task);
    let body = if !task.contains('\n') && as_file.is_file() {
        std::fs::read(as_file).map_err(|e| fail(format!("cannot read {task}: {e}")))?
    } else {
        task.as_bytes().to_vec()
    };
    work.replace("task.md", &body)
        .map_err(|e| fail(format!("cannot write task.md: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_never_sit_inside_the_workdir() {
        let p = Plan::new(Path::new("/m"), None, "ses_1", None, Path::new("/r"));
        assert_eq!(p.workdir, PathBuf::from("/m/workdir/ses_1"));
        assert_eq!(p.records, PathBuf::from("/r/ses_1"));
        let p = Plan::new(
            Path::new("/m"),
            Some(Path::new("/w")),
            "ses_1",
            Some("data"),
            Path::new("/r"),
        );
        assert_eq!(p.records, PathBuf::from("/r/ses_1"));
        assert_eq!(p.preopen(), PathBuf::from("/w/data"));
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
