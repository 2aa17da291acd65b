//! An ordinary account for the tests that run what users run: uid and gid 4242 (one no
//! account has), no supplementary groups, and either no cgroup of its own (the pids
//! hierarchy stays root's, as on a host where nothing was delegated) or a pids cgroup below
//! the test's own handed to it, as an administrator would delegate one. Only root can
//! stage either: the tests that do are compiled as ignored, "needs root", for anyone else
//! (`build.rs`'s `murmur_test_root`), so they are counted as not run, never as passed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The user (and group) of the unprivileged runs.
pub const USER: u32 = 4242;

/// How the account's processes are placed.
pub struct Account {
    /// A pids cgroup delegated to the account, which every command joins first.
    cgroup: Option<PathBuf>,
    /// A cgroup v2 directory delegated to the account and named in
    /// `MURMUR_CGROUP_PARENT` (the account's processes are not moved into it).
    parent: Option<PathBuf>,
}

impl Account {
    /// The account with nothing delegated: `mkdir` in the pids hierarchy is refused.
    pub fn without_cgroup() -> Account {
        Account {
            cgroup: None,
            parent: None,
        }
    }

    /// The account with a directory of the cgroup v2 hierarchy delegated to it (`mkdir`
    /// and `chown -R`, as an administrator would) and named in `MURMUR_CGROUP_PARENT`;
    /// `None` where no cgroup2 filesystem is mounted. Whether its sessions get a pids
    /// cgroup there depends on the controllers the host hands down (this project's CI
    /// machine binds pids to cgroup v1, so there they get a PID namespace).
    pub fn with_delegated_v2() -> Option<Account> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let root = mountinfo.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            right
                .starts_with("cgroup2 ")
                .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
        })?;
        let dir = root.join(format!("murmur-test-user-v2-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        chown_tree(&dir);
        Some(Account {
            cgroup: None,
            parent: Some(dir),
        })
    }

    /// Whether the pids controller reaches the delegated v2 directory.
    pub fn v2_has_pids(&self) -> bool {
        self.parent.as_ref().is_some_and(|d| {
            std::fs::read_to_string(d.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|x| x == "pids"))
        })
    }

    /// The account with a pids cgroup below the test's own, chowned to it as a login
    /// session's would be; removed (with what `mur` left in it) when dropped.
    pub fn with_delegated_cgroup() -> Account {
        let base = super::supervision::pids_cgroup_of("self").expect("the test's pids cgroup");
        // cgroup v2 hands the pids controller down only where the parent enables it.
        if base.join("cgroup.subtree_control").exists() {
            let _ = std::fs::write(base.join("cgroup.subtree_control"), "+pids");
        }
        let dir = base.join(format!("murmur-test-user-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        chown_tree(&dir);
        Account {
            cgroup: Some(dir),
            parent: None,
        }
    }

    /// The delegated cgroup, if any.
    pub fn cgroup(&self) -> Option<&Path> {
        self.cgroup.as_deref()
    }

    /// `cmd` run as [`USER`] with no supplementary groups, moved into the delegated cgroup
    /// first when there is one.
    pub fn command(&self, mut cmd: Command) -> Command {
        use std::os::fd::{AsRawFd, OwnedFd};
        use std::os::unix::process::CommandExt;
        if let Some(p) = &self.parent {
            cmd.env("MURMUR_CGROUP_PARENT", p);
        }
        let procs: Option<OwnedFd> = self.cgroup.as_ref().map(|c| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(c.join("cgroup.procs"))
                .unwrap()
                .into()
        });
        let fd = procs.as_ref().map_or(-1, |p| p.as_raw_fd());
        // SAFETY: between fork and exec the hook makes at most four syscalls on a
        // descriptor opened before the fork (close-on-exec, kept open by `procs`, moved
        // into the hook) and allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                let _held = &procs;
                let ok = (fd < 0 || libc::write(fd, b"0".as_ptr().cast(), 1) == 1)
                    && libc::setgroups(0, std::ptr::null()) == 0
                    && libc::setgid(USER) == 0
                    && libc::setuid(USER) == 0;
                if ok {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        cmd
    }

    /// What the host backs for the account: its own `mur __probe`, as a launch takes it.
    pub fn probe(&self) -> serde_json::Value {
        let mut probe = Command::new(super::capsule::MUR);
        probe.args(["__probe", "sealed"]).env_clear();
        serde_json::from_slice(&self.command(probe).output().unwrap().stdout).unwrap_or_default()
    }
}

impl Account {
    /// The classes the account's own probe backs, as a launch takes them. Where nothing
    /// forbids unprivileged user namespaces and root is backed in `sealed`, the account
    /// must be too: a broken namespace is not "not backed".
    pub fn classes(&self) -> Vec<&'static str> {
        let r = self.probe();
        let ok = |k: &str| r[k].get("Ok").is_some();
        let mut v = vec!["advisory"];
        if ok("landlock") && ok("seccomp") && (ok("pids_cgroup") || ok("pidns")) {
            v.push("scoped");
            if ok("netns") && ok("sealed") {
                v.push("sealed");
            }
        }
        if userns_allowed() && super::probe::host_backs_sealed() {
            assert_eq!(v.len(), 3, "backed for root, not for uid {USER}: {r}");
        }
        v
    }
}

impl Drop for Account {
    fn drop(&mut self) {
        let Some(dir) = self.cgroup.as_ref().or(self.parent.as_ref()) else {
            return;
        };
        // The session cgroups `mur` made go with their last process: wait for them (5 s),
        // then say what is left rather than leave it unseen.
        for _ in 0..250 {
            if remove_cgroup_tree(dir) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("left behind: the cgroup {}", dir.display());
    }
}

/// Whether nothing on the host forbids unprivileged user namespaces.
pub fn userns_allowed() -> bool {
    let sysctl = |p: &str| std::fs::read_to_string(p).map(|s| s.trim().to_string()).ok();
    sysctl("/proc/sys/kernel/unprivileged_userns_clone").as_deref() != Some("0")
        && sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() != Some("1")
        && sysctl("/proc/sys/user/max_user_namespaces").as_deref() != Some("0")
}

/// Remove the cgroup `dir` and every cgroup below it, deepest first; whether it is gone.
fn remove_cgroup_tree(dir: &Path) -> bool {
    if let Ok(d) = std::fs::read_dir(dir) {
        for e in d.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

/// `path` and everything below it owned by [`USER`] (links themselves, never followed).
pub fn chown_tree(path: &Path) {
    std::os::unix::fs::lchown(path, Some(USER), Some(USER)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).unwrap().flatten() {
            chown_tree(&e.path());
        }
    }
}
