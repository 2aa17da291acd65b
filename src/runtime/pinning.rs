//! A capsule's lock at launch (`murmur.lock` beside `murmur.yaml`): read beside the manifest,
//! every artifact the capsule resolves checked against it before anything is compiled or
//! staged (a missing entry or another version is E-RUN-003, other bytes E-REG-002), and
//! written when absent (unless `--locked`), atomically through `fsx`. A capsule run from the
//! registry has no lock: the registry's own sidecar and, for a delegated child, the roost's
//! approval pin it.

use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::lock::{file_name_for, Lock, Mismatch, Pin};
use crate::registry::lockfile::{read, write, Existing};
use std::path::Path;

/// The lock of one launch.
pub struct Pinning {
    /// The manifest's directory (None: nothing to read or write).
    dir: Option<Dir>,
    /// The lock's file name.
    name: String,
    /// The `mur lock` command line for this manifest and registry, for hints.
    command: String,
    /// Said once at launch: the lock or its directory can be written by another user.
    pub warning: Option<Diagnostic>,
    /// The lock as read (None: there was none).
    lock: Option<Lock>,
    locked: bool,
}

impl Pinning {
    /// No lock at all (a capsule from the registry).
    pub fn none() -> Pinning {
        Pinning {
            dir: None,
            name: String::new(),
            command: String::new(),
            warning: None,
            lock: None,
            locked: false,
        }
    }

    /// Read the lock of the manifest file `manifest`, in `base`, its directory. With
    /// `locked`, a missing lock is refused, since none will be written.
    pub fn open(
        base: &Path,
        manifest: &Path,
        registry: Option<&Path>,
        locked: bool,
    ) -> Result<Pinning, Diagnostic> {
        let name = file_name_for(manifest);
        let mut command = String::from("mur lock");
        if manifest != Path::new("murmur.yaml") {
            command.push_str(&format!(" --manifest {}", manifest.display()));
        }
        if let Some(r) = registry {
            command.push_str(&format!(" --registry-path {}", r.display()));
        }
        let dir = Dir::open(base).map_err(|e| {
            Diagnostic::new(
                code::IO_READ,
                &name,
                format!("cannot open the manifest's directory: {e}"),
            )
        })?;
        let lock = read(&dir, &name)?;
        if locked && lock.is_none() {
            return Err(Diagnostic::new(
                code::RUN_LOCK,
                &name,
                format!("there is no {name} beside the manifest, and --locked writes none: run `{command}` and commit it"),
            ));
        }
        let warning = shared(&dir, &name);
        Ok(Pinning {
            dir: Some(dir),
            name,
            command,
            warning,
            lock,
            locked,
        })
    }

    /// Whether `name@version`, whose archive hashes to `sha256`, is what the lock pins
    /// (anything goes when there is no lock: it is written from what resolved).
    pub fn check(&self, name: &str, version: &str, sha256: &str) -> Result<(), Diagnostic> {
        let Some(lock) = &self.lock else {
            return Ok(());
        };
        let (file, command) = (&self.name, &self.command);
        let key = format!("artifacts[{name}]");
        lock.check(name, version, sha256).map_err(|m| match m {
            Mismatch::Missing => Diagnostic::new(
                code::RUN_LOCK,
                &key,
                format!("{name}@{version} is not pinned in {file}: pin it with `{command} --update {name}`"),
            ),
            Mismatch::Version { locked } => Diagnostic::new(
                code::RUN_LOCK,
                &key,
                format!(
                    "{file} pins {name} at {locked}, the manifest asks for {version}: take it with `{command} --update {name}`"
                ),
            ),
            Mismatch::Bytes { locked } => Diagnostic::new(
                code::REG_INTEGRITY,
                &key,
                format!(
                    "{name}@{version} in the registry has sha256 {sha256}, {file} pins sha256 {locked}: other bytes under the same name and version"
                ),
            ),
        })
    }

    /// After every artifact resolved: write the lock when there was none (and `--locked`
    /// was not given). The line to tell the operator, if any: what was pinned, or why the
    /// lock could not be written (the run goes on, unpinned).
    pub fn record(&self, pins: Vec<Pin>) -> Option<String> {
        let dir = self.dir.as_ref()?;
        if self.lock.is_some() || self.locked {
            return None;
        }
        let n = pins.len();
        let mut lock = Lock::default();
        for p in pins {
            lock.set(p);
        }
        let file = &self.name;
        Some(match write(dir, file, &lock, Existing::Keep) {
            Ok(true) => format!("{file} written: {n} artifacts pinned by content"),
            Ok(false) => format!("{file} appeared while this run resolved its artifacts: left as it is (the next run verifies against it)"),
            Err(e) => Diagnostic::new(
                code::RUN_LOCK_UNWRITTEN,
                file,
                format!("cannot write {file} ({e}); the artifacts are not pinned"),
            )
            .to_string(),
        })
    }
}

/// W-SEC-026 when another user can write the lock `name` or the directory `dir` it is kept
/// in (writable by group or others, or owned by someone else than this user or root).
fn shared(dir: &Dir, name: &str) -> Option<Diagnostic> {
    use rustix::fs::{fstat, statat, AtFlags};
    let uid = rustix::process::geteuid().as_raw();
    let others = |st_uid: u32, mode: u32| (st_uid != uid && st_uid != 0) || mode & 0o022 != 0;
    let what = match (
        fstat(dir.as_fd()),
        statat(dir.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW),
    ) {
        (Ok(d), _) if others(d.st_uid, d.st_mode) => {
            format!("{}, the directory {name} is kept in,", dir.shown().display())
        }
        (_, Ok(f)) if others(f.st_uid, f.st_mode) => name.to_string(),
        _ => return None,
    };
    Some(Diagnostic::new(
        code::SEC_SHARED_LOCK,
        name,
        format!("{what} can be written by another user: whoever can write it can change which bytes this capsule runs"),
    ))
}

/// The lock as a delegation meets it: a capsule of `spawn.allow` the roost approved is
/// pinned in the parent's lock by name, version and sha256 the first time it runs, and
/// checked against that pin every later time (another version is E-RUN-003, other bytes
/// E-REG-002), so a child swapped in the registry is refused as a swapped driver is. The
/// lock is read again at each delegation (the launch may have written it since), and the
/// session's delegations take their turns at it (no pin of one is lost to another's write).
pub struct ChildPins {
    dir: Dir,
    name: String,
    locked: bool,
    /// The parent's own artifacts as this session resolved them: a lock removed while the
    /// session runs is written again with them, not with the child's pin alone.
    seed: Vec<Pin>,
    turn: std::sync::Mutex<()>,
}

impl ChildPins {
    /// Before the roost is asked: a version other than the pinned one, or (with
    /// `--locked`) a child the lock does not pin, is refused here.
    pub fn precheck(&self, capsule: &str, version: &str) -> Result<(), String> {
        let file = &self.name;
        let lock = read(&self.dir, file).map_err(|d| d.message)?;
        match lock.as_ref().and_then(|l| l.get(capsule)) {
            Some(p) if p.version != version => Err(format!(
                "{}: {file} pins the child capsule {capsule} at {}, the delegation asks for {version} (to move it: `mur lock --update {capsule}@{version}`)",
                code::RUN_LOCK,
                p.version
            )),
            None if self.locked => Err(format!(
                "{}: --locked: {file} does not pin the child capsule {capsule}",
                code::RUN_LOCK
            )),
            _ => Ok(()),
        }
    }

    /// Whether `capsule@version` (archive sha256 `sha256`, the roost's approved digest) may
    /// run as a child; a first delegation of it is pinned (unless `--locked`). The warning
    /// to show when the pin could not be written (the child then runs unpinned).
    pub fn admit(&self, capsule: &str, version: &str, sha256: &str) -> Result<Option<String>, String> {
        let _turn = self.turn.lock().unwrap_or_else(|p| p.into_inner());
        self.precheck(capsule, version)?;
        let file = &self.name;
        let lock = read(&self.dir, file).map_err(|d| d.message)?;
        match lock.as_ref().map(|l| l.check(capsule, version, sha256)) {
            Some(Ok(())) => return Ok(None),
            Some(Err(Mismatch::Bytes { locked })) => {
                return Err(format!(
                    "{}: {capsule}@{version} in the registry has sha256 {sha256}, {file} pins sha256 {locked}: other bytes under the same name and version",
                    code::REG_INTEGRITY
                ))
            }
            _ => {}
        }
        let mut lock = lock.unwrap_or_else(|| {
            let mut l = Lock::default();
            for p in &self.seed {
                l.set(p.clone());
            }
            l
        });
        lock.set(Pin {
            name: capsule.to_string(),
            version: version.to_string(),
            sha256: sha256.to_string(),
        });
        Ok(match write(&self.dir, file, &lock, Existing::Replace) {
            Ok(_) => None,
            Err(e) => Some(
                Diagnostic::new(
                    code::RUN_LOCK_UNWRITTEN,
                    file,
                    format!("cannot pin {capsule}@{version} in {file} ({e}); the child runs unpinned"),
                )
                .to_string(),
            ),
        })
    }
}

impl Pinning {
    /// The lock for the session's delegations (None for a capsule run from the registry);
    /// `seed` is the parent's own artifacts as resolved. Failing to hold the directory is
    /// an error, never children run unchecked.
    pub fn for_children(&self, seed: Vec<Pin>) -> Result<Option<ChildPins>, Diagnostic> {
        let Some(dir) = self.dir.as_ref() else {
            return Ok(None);
        };
        let dir = dir.try_clone().map_err(|e| {
            Diagnostic::new(
                code::RUN_LOCK,
                &self.name,
                format!(
                    "cannot hold the directory of {} for the delegations' pins: {e}",
                    self.name
                ),
            )
        })?;
        Ok(Some(ChildPins {
            dir,
            name: self.name.clone(),
            locked: self.locked,
            seed,
            turn: std::sync::Mutex::new(()),
        }))
    }
}
