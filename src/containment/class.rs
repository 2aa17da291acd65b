//! Declared floor, what the host backs, what a session achieves, and the E-CAP-003 refusal.

use super::probe::HostReport;
use crate::diag::{code, Diagnostic};
pub use crate::manifest::model::Containment as Class;

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
            "landlock ABI {} is below {}: truncate(2) of files outside the workdir would not be mediated",
            r.landlock_abi,
            super::rules::MIN_ABI
        )
    });
    let scoped_missing = [&r.landlock, &r.seccomp, &r.netns, &r.pids_cgroup]
        .into_iter()
        .find_map(|m| m.as_ref().err().cloned())
        .or(old_abi);
    match scoped_missing {
        Some(why) => (Class::Advisory, Some(why)),
        None => match &r.sealed {
            Ok(()) => (Class::Sealed, None),
            Err(why) => (Class::Scoped, Some(why.clone())),
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

impl Decision {
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
            sealed: Ok(()),
        }
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
            "containment floor not met: declared 'scoped', achieved 'advisory': landlock ABI 2 is below 3: truncate(2) of files outside the workdir would not be mediated"
        );
        let d = decide(Class::Scoped, None, true, &all_ok());
        assert_eq!(d.achieved, Class::Advisory);
        assert!(d.refusal().unwrap().message.contains("workdir_exec"));
    }
}
