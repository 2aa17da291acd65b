//! A per-session pids cgroup, so a fork bomb stops at the session's process ceiling even for
//! uid 0 (`RLIMIT_NPROC` does not bind root). cgroup v2 where the pids controller is
//! delegated to us, else the v1 `pids` hierarchy. The child joins by writing `0` to a
//! descriptor the parent opened (v1: `tasks`, v2: `cgroup.procs`); the parent kills what is
//! left at the end.
//!
//! Why `tasks` under v1: a write to `cgroup.procs` takes the kernel's global
//! threadgroup lock for writing, which waits for a whole RCU grace period (7 to 15 ms of
//! wall time on a 2-core host, per spawn). Writing `0` to `tasks` moves only the calling
//! thread and skips that lock; the child joins before it starts anything and is then
//! single-threaded (a new process of one thread), so moving the thread moves the process.
//! Every descriptor the cleanup needs (`cgroup.procs` to read, `cgroup.kill` where the
//! kernel has it) is opened when the cgroup is made, before any child runs: the cleanup
//! opens nothing, so a child that somehow lowered `mur`'s `RLIMIT_NOFILE` could not make it
//! take an unreadable `cgroup.procs` for an empty one.
//!
//! A session holds an exclusive `flock` on its cgroup directory for as long as it lives; the
//! kernel drops it when the process dies, however it dies. Each new session cgroup is made
//! under a lock on the parent directory (waited for a second at most: any user who may read
//! the directory may hold it), and first sweeps the `murmur-ses_*` siblings whose lock it
//! can take (their session is gone): each is removed, which the kernel refuses (EBUSY)
//! while processes are still in it, so one with processes is never removed.

use rustix::fs::FlockOperation;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// How long the end of a session waits for its cgroup to empty.
const KILL_BOUND: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a launch waits for the lock on the parent directory before it goes on without
/// sweeping.
const PARENT_LOCK_BOUND: std::time::Duration = std::time::Duration::from_secs(1);

/// Take an exclusive `flock` on `f` within `bound`; whether it was taken.
fn lock_within(f: &File, bound: std::time::Duration) -> bool {
    let until = std::time::Instant::now() + bound;
    loop {
        match rustix::fs::flock(f, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return true,
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR)
                if std::time::Instant::now() < until =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(_) => return false,
        }
    }
}

/// The name prefix of a session's cgroup: the only ones the sweep considers.
const SESSION_PREFIX: &str = "murmur-ses_";

/// A pids cgroup that lives as long as this value.
pub struct Cgroup {
    dir: PathBuf,
    /// The directory, locked (`flock`, exclusive) while this session lives; `None` for an
    /// adopted cgroup, whose lock is its own session's.
    _held: Option<File>,
    /// What a child writes `0` to in order to join (v1 `tasks`, v2 `cgroup.procs`); `None`
    /// for an adopted cgroup, which nothing joins.
    join: Option<File>,
    /// `cgroup.procs` opened for reading, re-read from offset 0 by `kill_all`.
    procs_read: File,
    /// `cgroup.kill` (cgroup v2, Linux 5.14): writing `1` kills every task in the cgroup.
    kill: Option<File>,
}

/// The variable naming the directory session cgroups are made in.
pub const PARENT_VAR: &str = "MURMUR_CGROUP_PARENT";

/// Where session cgroups are made: the directory `MURMUR_CGROUP_PARENT` names (one the
/// administrator delegated, on a cgroup filesystem), else this process's own cgroup where
/// the pids controller reaches it (v2 first, then v1). Never anywhere else.
fn locate() -> Result<PathBuf, String> {
    match std::env::var_os(PARENT_VAR) {
        Some(p) => named_parent(Path::new(&p)),
        None => own_parent(),
    }
}

/// `MURMUR_CGROUP_PARENT`: an absolute path to a directory of a cgroup filesystem, taken
/// by its real path, which it and every directory above it up to the cgroup mount must own
/// this user or root, writable by no group or other: no other user may then move the
/// session's processes out of its cgroup (that needs write access to a common ancestor's
/// `cgroup.procs`) or swap a directory on the way.
fn named_parent(p: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::MetadataExt;
    let named = |why: &str| format!("{PARENT_VAR}={}: {why}", p.display());
    if !p.is_absolute() {
        return Err(named("not an absolute path"));
    }
    let real = std::fs::canonicalize(p).map_err(|e| named(&e.to_string()))?;
    if !on_cgroup_fs(&real) {
        return Err(named("not on a cgroup filesystem"));
    }
    let me = rustix::process::geteuid().as_raw();
    for dir in real.ancestors().take_while(|d| on_cgroup_fs(d)) {
        let m = std::fs::metadata(dir).map_err(|e| named(&format!("{}: {e}", dir.display())))?;
        if (m.uid() != me && m.uid() != 0) || m.mode() & 0o022 != 0 {
            return Err(named(&format!(
                "{} belongs to uid {} or is writable by others: only a directory of yours or root's, writable by no one else, may hold your sessions",
                dir.display(),
                m.uid()
            )));
        }
    }
    Ok(real)
}

/// Whether `p` is on a cgroup (v1 or v2) filesystem.
fn on_cgroup_fs(p: &Path) -> bool {
    const CGROUP_SUPER_MAGIC: i64 = 0x0027_e0eb;
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    rustix::fs::statfs(p).is_ok_and(|fs| {
        // `f_type`'s width differs between targets.
        #[allow(clippy::unnecessary_cast)]
        let kind = fs.f_type as i64;
        kind == CGROUP_SUPER_MAGIC || kind == CGROUP2_SUPER_MAGIC
    })
}

/// `(mount point, our path)` for the pids controller: v2 first, then v1.
fn own_parent() -> Result<PathBuf, String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let mut v1 = None;
    let mut v2 = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount = left.split_whitespace().nth(4).unwrap_or("");
        let mut r = right.split_whitespace();
        let (fstype, _src, opts) = (r.next().unwrap_or(""), r.next(), r.next().unwrap_or(""));
        if fstype == "cgroup2" && v2.is_none() {
            v2 = Some(mount.to_string());
        } else if fstype == "cgroup" && opts.split(',').any(|o| o == "pids") {
            v1 = Some(mount.to_string());
        }
    }
    if let Some(m) = v2 {
        if let Some(path) = own.lines().find_map(|l| l.strip_prefix("0::")) {
            let dir = Path::new(&m).join(path.trim_start_matches('/'));
            let controllers = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
            if controllers.split_whitespace().any(|c| c == "pids") {
                return Ok(dir);
            }
        }
    }
    if let Some(m) = v1 {
        let path = own
            .lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctl, p) = (f.next()?, f.next()?, f.next()?);
                ctl.split(',').any(|c| c == "pids").then(|| p.to_string())
            })
            .unwrap_or_else(|| "/".into());
        return Ok(Path::new(&m).join(path.trim_start_matches('/')));
    }
    Err("no pids cgroup controller is mounted for this process (cgroup v2 or v1)".into())
}

/// Whether a session cgroup can be made here.
pub fn available() -> Result<(), String> {
    let probe = Cgroup::create(&format!("probe-{}", std::process::id()), 8)?;
    drop(probe);
    Ok(())
}

impl Cgroup {
    /// A fresh `murmur-<label>` cgroup allowing at most `pids_max` tasks.
    pub fn create(label: &str, pids_max: u64) -> Result<Cgroup, String> {
        let parent = locate()?;
        let v2 = parent.join("cgroup.controllers").exists();
        if v2 {
            let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+pids");
        }
        let dir = parent.join(format!("murmur-{label}"));
        // Under the parent's lock: no sweep can take this cgroup between its mkdir and its
        // own lock. Anyone who may read the parent may hold that lock (another user, on a
        // shared hierarchy), so it is waited for a bounded time only; without it this
        // launch sweeps nothing (and no other can sweep while the holder keeps it).
        let parent_lock = File::open(&parent).map_err(|e| format!("open {}: {e}", parent.display()))?;
        if lock_within(&parent_lock, PARENT_LOCK_BOUND) {
            sweep(&parent);
        }
        // Made under a name no sweep considers, locked, then given its own: a sweep that
        // runs without the parent's lock can never take it between the mkdir and the lock.
        let fresh = parent.join(format!("murmur-new-{label}"));
        std::fs::create_dir(&fresh).map_err(|e| format!("mkdir {}: {e}", fresh.display()))?;
        let held = File::open(&fresh).map_err(|e| format!("open {}: {e}", fresh.display()));
        let locked = held.and_then(|h| {
            rustix::fs::flock(&h, FlockOperation::NonBlockingLockExclusive)
                .map_err(|e| format!("flock {}: {e}", fresh.display()))?;
            std::fs::rename(&fresh, &dir)
                .map_err(|e| format!("rename {} to {}: {e}", fresh.display(), dir.display()))?;
            Ok(h)
        });
        let held = match locked {
            Ok(h) => h,
            Err(e) => {
                let _ = std::fs::remove_dir(&fresh);
                return Err(e);
            }
        };
        drop(parent_lock);
        let open = |name: &str, write: bool| {
            OpenOptions::new()
                .read(!write)
                .write(write)
                .open(dir.join(name))
                .map_err(|e| format!("open {}/{name}: {e}", dir.display()))
        };
        let cg = Cgroup {
            _held: Some(held),
            join: Some(open(if v2 { "cgroup.procs" } else { "tasks" }, true)?),
            procs_read: open("cgroup.procs", false)?,
            kill: if v2 { open("cgroup.kill", true).ok() } else { None },
            dir,
        };
        std::fs::write(cg.dir.join("pids.max"), pids_max.to_string())
            .map_err(|e| format!("write {}/pids.max: {e}", cg.dir.display()))?;
        Ok(cg)
    }

    /// The cgroup `murmur-<label>` another `mur` of this host made beside ours (a delegated
    /// child's session cgroup), to kill what it left behind; `None` when there is none.
    pub fn adopt(label: &str) -> Option<Cgroup> {
        if label.is_empty() || label.contains(['/', '\0']) || label.starts_with('.') {
            return None;
        }
        let dir = locate().ok()?.join(format!("murmur-{label}"));
        let open = |name: &str, write: bool| {
            OpenOptions::new()
                .read(!write)
                .write(write)
                .open(dir.join(name))
                .ok()
        };
        Some(Cgroup {
            _held: None,
            join: None,
            procs_read: open("cgroup.procs", false)?,
            kill: open("cgroup.kill", true),
            dir,
        })
    }

    /// The descriptor a single-threaded child writes `0` to in order to join; `None` for an
    /// adopted cgroup.
    pub fn join_fd(&self) -> Option<libc::c_int> {
        self.join.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// The pids in the cgroup, read through the descriptor opened at creation; `None` when
    /// the read fails (which says nothing about whether the cgroup is empty).
    fn pids(&self) -> Option<Vec<i32>> {
        let mut f = &self.procs_read;
        f.seek(SeekFrom::Start(0)).ok()?;
        let mut text = String::new();
        f.read_to_string(&mut text).ok()?;
        Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
    }

    /// SIGKILL every task still in the cgroup (through `cgroup.kill` where the kernel has
    /// it, and by pid), a few rounds, until a read of `cgroup.procs` shows it empty. A read
    /// that fails is never taken for empty: the round is retried.
    pub fn kill_all(&self) {
        self.kill_within(KILL_BOUND);
    }

    /// [`Cgroup::kill_all`] for at most `bound`; whether the cgroup was seen empty. (A
    /// killed task whose parent is gone stays listed until the host's init reaps it.)
    fn kill_within(&self, bound: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + bound;
        loop {
            if let Some(mut k) = self.kill.as_ref() {
                let _ = k.write_all(b"1");
            }
            match self.pids() {
                Some(pids) if pids.is_empty() => return true,
                Some(pids) => {
                    for pid in pids {
                        if let Some(p) = rustix::process::Pid::from_raw(pid) {
                            let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                        }
                    }
                }
                None => {}
            }
            if std::time::Instant::now() >= until {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Kill everything the cgroup holds now: one pass, no waiting for it to empty.
    pub fn kill_now(&self) {
        let _ = self.kill_within(std::time::Duration::ZERO);
    }

    /// Kill everything in the cgroup and remove it, waiting at most `bound` for it to
    /// empty; whether it is gone.
    pub fn end(self, bound: std::time::Duration) -> bool {
        let until = std::time::Instant::now() + bound;
        let emptied = self.kill_within(bound);
        let gone = emptied && self.remove_by(until);
        std::mem::forget(self);
        gone
    }

    /// Remove the (empty) directory, retrying for half a second.
    fn remove(&self) -> bool {
        self.remove_by(std::time::Instant::now() + std::time::Duration::from_millis(500))
    }

    /// Remove the (empty) directory by `until`. A task that has died stops being listed in
    /// `cgroup.procs` at once but holds the cgroup (EBUSY) until it is reaped, which for an
    /// orphan is the host's init, sometimes lazily: retried, less often as time goes on.
    fn remove_by(&self, until: std::time::Instant) -> bool {
        let mut pause = std::time::Duration::from_millis(10);
        loop {
            match std::fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    if std::time::Instant::now() >= until {
                        return false;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(250));
                }
                Err(e) => return e.kind() == std::io::ErrorKind::NotFound,
                Ok(()) => return true,
            }
        }
    }
}

/// Remove every session cgroup beside ours whose session is gone (its lock can be taken)
/// and that is empty (the kernel refuses to remove one that is not).
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(SESSION_PREFIX)) {
            continue;
        }
        let path = e.path();
        let Ok(d) = File::open(&path) else { continue };
        if rustix::fs::flock(&d, FlockOperation::NonBlockingLockExclusive).is_ok() {
            let _ = std::fs::remove_dir(&path);
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if self.kill_within(KILL_BOUND) {
            self.remove();
        }
    }
}
