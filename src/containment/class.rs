//! Declared floor, what the host backs, what a session achieves, and the E-CAP-003 refusal.

use crate::diag::{code, Diagnostic};
pub use crate::manifest::model::Containment as Class;
use serde::{Deserialize, Serialize};

/// The containment decision for one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub declared: Class,
    pub achieved: Class,
    /// The best class this host backs.
    pub host: Class,
    /// What keeps the host (or this capsule) from the next class up, if anything.
    pub limit: Option<String>,
}

/// The best class the host backs, and what stops it from the next one.
pub fn host_class(r: &HostReport) -> (Class, Option<String>) {
    let old_abi = (r.landlock.is_ok() && r.landlock_abi < super::rules::MIN_ABI).then(|| {
        format!(
            "landlock ABI {} is below {}: signal and abstract unix socket scoping need landlock ABI 6 (without it a scoped child could signal any process of its uid){}",
            r.landlock_abi,
            super::rules::MIN_ABI,
            if r.landlock_abi < 3 {
                ", and truncate(2) of files outside the workdir is mediated only from ABI 3"
            } else {
                ""
            }
        )
    });
    // A network namespace is not among them: without one a contained command's network
    // is closed (seccomp, landlock), and only egress rules need it (E-CAP-005).
    let scoped_missing = [&r.landlock, &r.seccomp]
        .into_iter()
        .find_map(|m| m.as_ref().err().cloned())
        .or_else(|| r.bound().err())
        .or(old_abi);
    match scoped_missing {
        Some(why) => (Class::Advisory, Some(why)),
        None => match (&r.sealed, &r.netns) {
            (Ok(()), Ok(())) => (Class::Sealed, None),
            (Err(why), _) | (Ok(()), Err(why)) => (Class::Scoped, Some(why.clone())),
        },
    }
}

/// Combine the manifest's floor, the flag (which can only raise it), `workdir_exec` and the
/// probe.
pub fn decide(manifest: Class, flag: Option<Class>, workdir_exec: bool, report: &HostReport) -> Decision {
    let declared = manifest.max(flag.unwrap_or_default());
    let (host, host_limit) = host_class(report);
    let mut achieved = host.min(declared);
    let mut limit = if declared > host { host_limit } else { None };
    if workdir_exec && achieved > Class::Advisory {
        achieved = Class::Advisory;
        limit = Some("capabilities.filesystem.workdir_exec: true caps containment at advisory (an executable workdir makes shell.allow unenforceable)".into());
    }
    if workdir_exec && declared > Class::Advisory {
        limit = Some("capabilities.filesystem.workdir_exec: true caps containment at advisory (an executable workdir makes shell.allow unenforceable)".into());
    }
    Decision {
        declared,
        achieved,
        host,
        limit,
    }
}

/// The reason `unix_sockets` rules out `scoped`.
pub const UNIX_SOCKETS_NEED_SEALED: &str = "capabilities.network.unix_sockets: true needs containment 'sealed': under 'scoped' the child could connect() to any host unix socket by path (docker.sock, an SSH agent, the D-Bus bus), which neither the network namespace nor landlock stops";

/// E-CAP-003 for a child about to run under `scoped` with `AF_UNIX` sockets allowed: a
/// network namespace does not isolate filesystem-bound unix sockets and landlock does not
/// mediate `connect` on them, so every host socket whose path the child can name would be
/// reachable. Under `sealed` host paths are absent from the composed root; under
/// `advisory` nothing is promised. The spawn function checks it for every child, whatever
/// its caller decided.
pub fn unix_sockets_refusal(achieved: Class, unix_sockets: bool) -> Option<Diagnostic> {
    (unix_sockets && achieved == Class::Scoped).then(|| {
        Diagnostic::new(
            code::CAP_FLOOR,
            "capabilities.network.unix_sockets",
            format!("containment floor not met: {UNIX_SOCKETS_NEED_SEALED}"),
        )
        .with_hint("declare capabilities.containment: sealed, or drop capabilities.network.unix_sockets")
    })
}

impl Decision {
    /// [`Decision::refusal`], then [`unix_sockets_refusal`]: what every launch checks.
    pub fn refusal_for(&self, unix_sockets: bool) -> Option<Diagnostic> {
        self.refusal()
            .or_else(|| unix_sockets_refusal(self.achieved, unix_sockets))
    }

    /// E-CAP-003 when the floor is above what is achieved; never a silent fallback.
    pub fn refusal(&self) -> Option<Diagnostic> {
        if self.achieved >= self.declared {
            return None;
        }
        Some(
            Diagnostic::new(
                code::CAP_FLOOR,
                "capabilities.containment",
                format!(
                    "containment floor not met: declared '{}', achieved '{}': {}",
                    self.declared.as_str(),
                    self.achieved.as_str(),
                    self.limit.as_deref().unwrap_or("the host backs less")
                ),
            )
            .with_hint("lower capabilities.containment, or run on a host with the missing mechanism"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_ok() -> HostReport {
        HostReport {
            landlock_abi: 6,
            landlock: Ok(()),
            seccomp: Ok(()),
            netns: Ok(()),
            pids_cgroup: Ok(()),
            pidns: Err("uid 0".into()),
            sealed: Ok(()),
        }
    }

    #[test]
    fn scoped_needs_no_network_namespace_and_sealed_does() {
        let mut r = all_ok();
        r.netns = Err("unshare(CLONE_NEWNET): errno 28 (No space left on device)".into());
        assert_eq!(decide(Class::Scoped, None, false, &r).achieved, Class::Scoped);
        let d = decide(Class::Sealed, None, false, &r);
        assert_eq!(d.achieved, Class::Scoped);
        assert!(d
            .refusal()
            .unwrap()
            .message
            .ends_with("errno 28 (No space left on device)"));
    }

    #[test]
    fn a_pid_namespace_bounds_a_session_where_no_cgroup_can_be_made() {
        let mut r = all_ok();
        r.pids_cgroup = Err("mkdir /sys/fs/cgroup/pids/murmur-probe-1: Permission denied".into());
        let d = decide(Class::Sealed, None, false, &r);
        assert_eq!(d.achieved, Class::Advisory);
        assert_eq!(
            d.refusal().unwrap().message,
            "containment floor not met: declared 'sealed', achieved 'advisory': no pids cgroup can be made (mkdir /sys/fs/cgroup/pids/murmur-probe-1: Permission denied) and no PID namespace bounds the session (uid 0)"
        );
        r.pidns = Ok(());
        assert_eq!(r.bound(), Ok(Bound::PidNamespace));
        let d = decide(Class::Sealed, None, false, &r);
        assert_eq!(d.achieved, Class::Sealed);
        r.pids_cgroup = Ok(());
        assert_eq!(r.bound(), Ok(Bound::Cgroup));
        let mut denied = r.clone();
        denied.apply_simulated_denials("cgroup");
        assert_eq!(denied.bound(), Ok(Bound::PidNamespace));
        denied.apply_simulated_denials("pidns");
        assert!(denied.bound().is_err());
    }

    #[test]
    fn achieved_never_exceeds_the_floor_and_the_flag_only_raises() {
        let r = all_ok();
        assert_eq!(decide(Class::Advisory, None, false, &r).achieved, Class::Advisory);
        assert_eq!(decide(Class::Scoped, None, false, &r).achieved, Class::Scoped);
        assert_eq!(
            decide(Class::Scoped, Some(Class::Advisory), false, &r).declared,
            Class::Scoped
        );
        assert_eq!(
            decide(Class::Advisory, Some(Class::Scoped), false, &r).achieved,
            Class::Scoped
        );
        assert!(decide(Class::Scoped, None, false, &r).refusal().is_none());
    }

    #[test]
    fn refusals_name_the_missing_mechanism() {
        let mut r = all_ok();
        r.landlock = Err("landlock_create_ruleset: errno 38".into());
        let d = decide(Class::Scoped, None, false, &r);
        let msg = d.refusal().unwrap().to_string();
        assert!(msg.starts_with("error[E-CAP-003]: containment floor not met: declared 'scoped', achieved 'advisory': landlock_create_ruleset: errno 38"), "{msg}");
        let d = decide(Class::Sealed, None, false, &all_ok());
        assert!(d.refusal().is_none());
        assert_eq!(d.achieved, Class::Sealed);
        assert_eq!(
            decide(Class::Scoped, None, false, &all_ok()).achieved,
            Class::Scoped
        );
        let mut r = all_ok();
        r.sealed = Err("sealed: errno 1".into());
        let d = decide(Class::Sealed, None, false, &r);
        assert_eq!(
            d.refusal().unwrap().message,
            "containment floor not met: declared 'sealed', achieved 'scoped': sealed: errno 1"
        );
        let mut r = all_ok();
        r.landlock_abi = 2;
        let d = decide(Class::Scoped, None, false, &r);
        assert_eq!(
            d.refusal().unwrap().message,
            "containment floor not met: declared 'scoped', achieved 'advisory': landlock ABI 2 is below 6: signal and abstract unix socket scoping need landlock ABI 6 (without it a scoped child could signal any process of its uid), and truncate(2) of files outside the workdir is mediated only from ABI 3"
        );
        r.landlock_abi = 5;
        let d = decide(Class::Sealed, None, false, &r);
        assert_eq!(d.achieved, Class::Advisory);
        assert_eq!(
            d.refusal().unwrap().message,
            "containment floor not met: declared 'sealed', achieved 'advisory': landlock ABI 5 is below 6: signal and abstract unix socket scoping need landlock ABI 6 (without it a scoped child could signal any process of its uid)"
        );
        let d = unix_sockets_refusal(Class::Scoped, true).unwrap();
        assert!(d.message.contains("needs containment 'sealed'"), "{}", d.message);
        assert!(unix_sockets_refusal(Class::Sealed, true).is_none());
        assert!(unix_sockets_refusal(Class::Advisory, true).is_none());
        assert!(unix_sockets_refusal(Class::Scoped, false).is_none());
        let d = decide(Class::Scoped, None, true, &all_ok());
        assert_eq!(d.achieved, Class::Advisory);
        assert!(d.refusal().unwrap().message.contains("workdir_exec"));
    }
}

/// What the probe found; each mechanism is `Ok` or the failing call with its errno.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct HostReport {
    pub landlock_abi: u32,
    pub landlock: Result<(), String>,
    pub seccomp: Result<(), String>,
    pub netns: Result<(), String>,
    pub pids_cgroup: Result<(), String>,
    /// A PID namespace per command with `RLIMIT_NPROC` counted in its user namespace (Linux
    /// 5.14 and later): what bounds and ends a session's processes where no pids cgroup
    /// can be made. Never for uid 0, which `RLIMIT_NPROC` does not bind.
    pub pidns: Result<(), String>,
    /// User + mount + PID namespaces, a tmpfs root, a fresh `/proc` and `pivot_root`: the
    /// whole sealed plan, run in a throwaway child.
    pub sealed: Result<(), String>,
}

/// What bounds a contained session's process count and ends every process it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A pids cgroup per session: `pids.max`, emptied (`cgroup.kill`) at the end and by the
    /// warden should `mur` die.
    Cgroup,
    /// Each command in a PID namespace of its own whose pid 1 dies with `mur` (and takes
    /// the namespace with it), under an `RLIMIT_NPROC` its user namespace counts alone.
    PidNamespace,
}

impl Bound {
    /// The mechanism, named for `mur doctor` and `--explain-scope`.
    pub fn describe(self) -> &'static str {
        match self {
            Bound::Cgroup => "a pids cgroup per session (pids.max; emptied at the end and by the warden if mur dies)",
            Bound::PidNamespace => "a PID namespace per command whose pid 1 dies with mur, and RLIMIT_NPROC counted in the user namespace the command runs in, the session's or its own (no pids cgroup can be made here)",
        }
    }
}

impl HostReport {
    /// What bounds and ends a contained session's processes here: a pids cgroup where one
    /// can be made, else a PID namespace; neither is the reason `scoped` is refused.
    pub fn bound(&self) -> Result<Bound, String> {
        match (&self.pids_cgroup, &self.pidns) {
            (Ok(()), _) => Ok(Bound::Cgroup),
            (Err(_), Ok(())) => Ok(Bound::PidNamespace),
            (Err(c), Err(p)) => Err(format!(
                "no pids cgroup can be made ({c}) and no PID namespace bounds the session ({p})"
            )),
        }
    }

    /// Mechanisms named in `MURMUR_PROBE_DENY` (comma-separated) are reported missing, and
    /// `landlock_abi=N` lowers the landlock ABI to at most N. It can only lower what the
    /// host backs; tests use it to exercise the refusals.
    pub fn apply_simulated_denials(&mut self, spec: &str) {
        for name in spec.split(',').map(str::trim) {
            if let Some(n) = name
                .strip_prefix("landlock_abi=")
                .and_then(|n| n.parse::<u32>().ok())
            {
                self.landlock_abi = self.landlock_abi.min(n);
                continue;
            }
            let slot = match name {
                "landlock" => &mut self.landlock,
                "seccomp" => &mut self.seccomp,
                "netns" => &mut self.netns,
                "cgroup" => &mut self.pids_cgroup,
                "pidns" => &mut self.pidns,
                "sealed" => &mut self.sealed,
                _ => continue,
            };
            *slot = Err(format!("{name}: disabled by MURMUR_PROBE_DENY"));
        }
    }
}
