//! `mur doctor`'s one-line fixes: for a mechanism the probe found missing, what on this host
//! most likely took it away (read from the sysctls that decide it) and what to change.

/// The sysctls that decide whether unprivileged user namespaces work.
#[derive(Debug, Default, Clone)]
pub struct Sysctls {
    pub max_user_namespaces: Option<u64>,
    pub unprivileged_userns_clone: Option<u64>,
    pub apparmor_restrict_userns: Option<u64>,
    pub root: bool,
    /// This process is in a user namespace without an id map (`unshare --user`).
    pub unmapped: bool,
}

fn sysctl(path: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.trim().parse().ok()
}

impl Sysctls {
    /// Read them from `/proc/sys` (absent ones stay `None`).
    pub fn read() -> Sysctls {
        Sysctls {
            max_user_namespaces: sysctl("/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: sysctl("/proc/sys/kernel/unprivileged_userns_clone"),
            apparmor_restrict_userns: sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            root: rustix::process::geteuid().is_root(),
            unmapped: std::fs::read_to_string("/proc/self/uid_map").is_ok_and(|m| m.trim().is_empty()),
        }
    }
}

/// The errno a probe message carries: the probe's own `...: errno N (...)`
/// ([`crate::diag::errno_text`]), or an `io::Error` as Rust shows it, `... (os error N)`.
pub fn errno_of(msg: &str) -> Option<i32> {
    let (at, mark) = ["errno ", "(os error "]
        .iter()
        .find_map(|m| msg.find(m).map(|at| (at, m.len())))?;
    let rest = &msg[at + mark..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Why user namespaces are refused, from the sysctls, and the fix.
fn userns(s: &Sysctls) -> String {
    if s.unmapped {
        return "mur runs in a user namespace with no uid map (unshare --user without -r), where no further namespace may be made: map ids (unshare -r) or run outside it".into();
    }
    if s.max_user_namespaces == Some(0) {
        return "user namespaces are disabled by sysctl: sysctl -w user.max_user_namespaces=10000".into();
    }
    if s.unprivileged_userns_clone == Some(0) && !s.root {
        return "unprivileged user namespaces are disabled by sysctl: sysctl -w kernel.unprivileged_userns_clone=1"
            .into();
    }
    if s.apparmor_restrict_userns == Some(1) && !s.root {
        return "AppArmor restricts unprivileged user namespaces: sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or give mur an AppArmor profile with `userns,`".into();
    }
    "a seccomp filter or LSM refuses unshare(2) here (a container runtime's default profile does): allow unshare with CLONE_NEWUSER/CLONE_NEWNET, or run outside that container".into()
}

/// The fix for `mechanism` (a [`super::doctor::MECHANISMS`] name) failing with `msg`.
pub fn fix(mechanism: &str, msg: &str, abi: u32, s: &Sysctls) -> String {
    if msg.contains("MURMUR_PROBE_DENY") {
        return "unset MURMUR_PROBE_DENY (a test hook that simulates a missing mechanism)".into();
    }
    let errno = errno_of(msg);
    match (mechanism, errno) {
        ("landlock", Some(libc::ENOSYS)) => "the kernel offers no landlock (or a seccomp filter hides landlock_create_ruleset): boot Linux 6.2 or later built with CONFIG_SECURITY_LANDLOCK=y".into(),
        ("landlock", Some(libc::EOPNOTSUPP)) => "landlock is built in but not enabled: add landlock to the lsm= kernel boot parameter".into(),
        ("landlock", _) => "landlock could not be installed: check the kernel's lsm= list and any seccomp filter around mur".into(),
        ("landlock_abi", _) => format!("the kernel is too old for landlock ABI 3 (it has ABI {abi}): upgrade to Linux 6.2 or later"),
        ("seccomp", _) => "seccomp filters are unavailable: use a kernel with CONFIG_SECCOMP_FILTER=y, or a container that allows nested seccomp filters".into(),
        // The unshare worked; what followed inside the new namespaces did not.
        ("netns", _) if msg.starts_with("netlink") || msg.starts_with("the user namespace's id maps") => {
            if s.apparmor_restrict_userns == Some(1) && !s.root {
                userns(s)
            } else {
                "the new namespace was made but could not be set up (its id maps written, or its loopback brought up): a security module leaves it without capabilities, or mur runs set-user-id; allow it for mur, or run it as an ordinary program".into()
            }
        }
        ("netns", Some(libc::EPERM | libc::ENOSPC | libc::EINVAL | libc::EACCES)) | ("sealed", Some(libc::EPERM | libc::ENOSPC | libc::EACCES))
            if msg.contains("unshare") || msg.contains("user namespace") =>
        {
            userns(s)
        }
        ("netns", _) => "the network namespace was refused: allow unshare(CLONE_NEWNET) (with CLONE_NEWUSER when not root)".into(),
        ("pids_cgroup" | "processes", _) if s.root => "uid 0 needs a pids cgroup (RLIMIT_NPROC does not bind root): mount the pids controller (cgroup v2, or the v1 pids hierarchy)".into(),
        ("pids_cgroup", _) => format!("no pids cgroup is delegated to this user: {CGROUP_RECIPE}"),
        ("pidns", _) => "a new user and PID namespace was refused, or this kernel counts RLIMIT_NPROC per user (Linux 5.14 and later count it per user namespace): allow unprivileged user namespaces, or have a pids cgroup delegated".into(),
        ("processes", _) => format!("nothing can bound this user's sessions: allow unprivileged user namespaces on Linux 5.14 or later (each command then runs in a PID namespace under RLIMIT_NPROC), or have a pids cgroup delegated: {CGROUP_RECIPE}"),
        ("sealed", _) => "the sealed root could not be composed (mount namespace, tmpfs or pivot_root refused): allow mounts inside a user namespace, or use 'scoped'".into(),
        _ => "see audit/threat-model.md for what this mechanism needs".into(),
    }
}

/// What the administrator delegates once so a user's sessions get a pids cgroup.
const CGROUP_RECIPE: &str = "on cgroup v2, a subtree with pids in its cgroup.subtree_control, chowned to the user (systemd: user@UID.service has one; elsewhere mkdir it, echo +pids into its parent's cgroup.subtree_control, chown -R USER it), with mur started inside it or the directory named in MURMUR_CGROUP_PARENT; on cgroup v1, mkdir /sys/fs/cgroup/pids/USER && chown -R USER it, then MURMUR_CGROUP_PARENT=/sys/fs/cgroup/pids/USER";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_and_fixes() {
        assert_eq!(
            errno_of("unshare(CLONE_NEWNET): errno 1 (Operation not permitted)"),
            Some(1)
        );
        assert_eq!(errno_of("no number"), None);
        assert_eq!(
            errno_of("mkdir /sys/fs/cgroup/murmur-new-probe-1: Permission denied (os error 13)"),
            Some(13)
        );
        assert_eq!(
            errno_of("x: errno 38 (Function not implemented (os error 38))"),
            Some(38)
        );
        assert_eq!(errno_of("(os error )"), None);
        let s = Sysctls {
            max_user_namespaces: Some(0),
            ..Default::default()
        };
        assert!(
            fix("netns", "unshare(CLONE_NEWNET): errno 28 (x)", 6, &s).contains("user.max_user_namespaces")
        );
        let s = Sysctls {
            apparmor_restrict_userns: Some(1),
            ..Default::default()
        };
        assert!(fix("sealed", "sealed: enter new user ... (unshare): errno 1", 6, &s).contains("AppArmor"));
        let lo = "netlink (lo up, local default route): errno 1 (x)";
        assert!(fix("netns", lo, 6, &s).contains("AppArmor"));
        assert!(fix("netns", lo, 6, &Sysctls::default()).contains("could not be set up"));
        assert!(fix("landlock", "landlock_create_ruleset(x): errno 38 (y)", 0, &s).contains("6.2"));
        assert!(fix("landlock_abi", "", 2, &s).contains("ABI 2"));
    }
}
