//! What a driver or WASM tool instance gets: the capsule's ceiling, narrowed by the
//! `capabilities:` block of its entry in the capsule's own manifest (never the artifact's
//! bundled one). The effective grant is the intersection: a network entry outside the
//! ceiling is dropped with W-SEC-007, a scope outside the capsule's scope leaves the
//! artifact no directory at all.

use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::model::{Capabilities, Limits};
use crate::manifest::netrule::{any_covers, NetRule};
use crate::runtime::wasm::credential::{Credential, Endpoint, Observer};
use crate::runtime::wasm::host::{Grants, Host};
use std::fs::File;
use std::sync::Arc;

/// One artifact's grants, ready to build a store's host per call.
pub struct GuestGrants {
    /// The one preopened directory, held open (None: no directory at all).
    pub preopen: Option<Dir>,
    /// A hook's own records directory (`records: own`), held open; `/records` to the guest.
    pub records: Option<Dir>,
    pub env: Vec<(String, String)>,
    pub network_allow: Vec<NetRule>,
    pub limits: Limits,
    pub deadline: u64,
    pub stdout: File,
    pub stderr: File,
}

impl GuestGrants {
    /// A fresh host for one call (a driver's: with the endpoint, its credential and observer).
    pub fn host(
        &self,
        credential: Option<Arc<Credential>>,
        observer: Option<Observer>,
        endpoint: Option<Arc<Endpoint>>,
    ) -> std::io::Result<Host> {
        let preopen = self.preopen.as_ref().map(Dir::proc_path);
        let records = self.records.as_ref().map(Dir::proc_path);
        Host::new(Grants {
            preopen: preopen.as_deref(),
            records: records.as_deref(),
            env: &self.env,
            network_allow: &self.network_allow,
            limits: &self.limits,
            stdout: self.stdout.try_clone()?,
            stderr: self.stderr.try_clone()?,
            credential,
            observer,
            endpoint,
        })
        .map_err(std::io::Error::other)
    }
}

/// The network rules of `entry` that the ceiling allows: each rule the ceiling covers is
/// kept; a broader rule keeps the ceiling's rules it covers; a rule meeting nothing of the
/// ceiling is dropped, with a warning naming it.
pub fn narrow_network(
    ceiling: &[NetRule],
    entry: &[NetRule],
    artifact: &str,
) -> (Vec<NetRule>, Vec<Diagnostic>) {
    let mut kept: Vec<NetRule> = Vec::new();
    let mut warnings = Vec::new();
    for r in entry {
        if any_covers(ceiling, r) {
            kept.push(r.clone());
            continue;
        }
        let inner: Vec<NetRule> = ceiling.iter().filter(|c| r.covers(c)).cloned().collect();
        if inner.is_empty() {
            let shown = match (&r.scheme, r.port) {
                (Some(s), Some(p)) => format!(
                    "{}://{}:{p}",
                    if *s == crate::manifest::netrule::Scheme::Https {
                        "https"
                    } else {
                        "http"
                    },
                    r.host
                ),
                (None, Some(p)) => format!("{}:{p}", r.host),
                _ => r.host.clone(),
            };
            warnings.push(Diagnostic::new(
                code::SEC_OUTSIDE_CEILING,
                format!("artifacts[{artifact}].capabilities.network.allow"),
                format!("'{shown}' for artifact {artifact} is outside the capsule's capabilities.network.allow; dropped"),
            ));
        }
        kept.extend(inner);
    }
    kept.sort();
    kept.dedup();
    (kept, warnings)
}

/// An artifact's limits: its entry's `capabilities.limits` can only lower the capsule's
/// (each cap the smaller of the two; a deadline the entry sets, at most the ceiling's).
/// The deadline returned is for a hook call when `hook`, else for a tool or driver call.
pub fn narrow_limits(ceiling: &Limits, entry: Option<&Capabilities>, hook: bool) -> (Limits, u64) {
    let base = if hook {
        ceiling.hook_deadline()
    } else {
        ceiling.deadline()
    };
    let Some(e) = entry else {
        return (*ceiling, base);
    };
    let l = &e.limits;
    let limits = Limits {
        memory_bytes: l.memory_bytes.min(ceiling.memory_bytes),
        table_elements: l.table_elements.min(ceiling.table_elements),
        instances: l.instances.min(ceiling.instances),
        deadline_seconds: ceiling.deadline_seconds,
    };
    let deadline = l.deadline_seconds.map_or(base, |d| d.min(base));
    (limits, deadline)
}

/// Whether `scope` (relative to the workdir) lies within the capsule's `ceiling` scope.
pub fn scope_within(ceiling: Option<&str>, scope: &str) -> bool {
    match ceiling {
        None => true,
        Some(c) => scope == c || scope.strip_prefix(c).is_some_and(|rest| rest.starts_with('/')),
    }
}

/// The effective grants of an artifact whose entry declares `entry` (None: the ceiling).
/// `work` is the workdir, `ceiling_dir` the capsule's preopen.
pub struct Narrowed {
    pub network_allow: Vec<NetRule>,
    pub preopen: Option<Dir>,
    pub env_names: Option<Vec<String>>,
    pub warnings: Vec<Diagnostic>,
}

pub fn narrow(
    artifact: &str,
    ceiling: &Capabilities,
    entry: Option<&Capabilities>,
    work: &Dir,
    ceiling_dir: &Dir,
) -> Result<Narrowed, Diagnostic> {
    let Some(e) = entry else {
        return Ok(Narrowed {
            network_allow: ceiling.network_allow.clone(),
            preopen: Some(ceiling_dir.try_clone().map_err(|x| io(artifact, x))?),
            env_names: None,
            warnings: Vec::new(),
        });
    };
    let (network_allow, mut warnings) = narrow_network(&ceiling.network_allow, &e.network_allow, artifact);
    let preopen = match &e.filesystem_scope {
        None => Some(ceiling_dir.try_clone().map_err(|x| io(artifact, x))?),
        Some(s) => scoped_dir(artifact, ceiling, s, work, &mut warnings)?,
    };
    Ok(Narrowed {
        network_allow,
        preopen,
        env_names: Some(e.env_allow.clone()),
        warnings,
    })
}

/// A hook's grants: default deny. With no `capabilities:` on its entry, no directory, no
/// host (every request denied) and no host variable; with a block, exactly
/// `<workdir>/<scope>` (created) as its one directory, the block's hosts within the
/// ceiling, and the block's `env.allow` names.
pub fn narrow_hook(
    artifact: &str,
    ceiling: &Capabilities,
    entry: Option<&Capabilities>,
    work: &Dir,
) -> Result<Narrowed, Diagnostic> {
    let Some(e) = entry else {
        return Ok(Narrowed {
            network_allow: Vec::new(),
            preopen: None,
            env_names: Some(Vec::new()),
            warnings: Vec::new(),
        });
    };
    let (network_allow, mut warnings) = narrow_network(&ceiling.network_allow, &e.network_allow, artifact);
    let preopen = match &e.filesystem_scope {
        Some(s) => scoped_dir(artifact, ceiling, s, work, &mut warnings)?,
        None => None,
    };
    Ok(Narrowed {
        network_allow,
        preopen,
        env_names: Some(e.env_allow.clone()),
        warnings,
    })
}

/// `<workdir>/<scope>` (created) when `scope` lies within the capsule's scope; otherwise
/// no directory and a W-SEC-007 warning.
fn scoped_dir(
    artifact: &str,
    ceiling: &Capabilities,
    scope: &str,
    work: &Dir,
    warnings: &mut Vec<Diagnostic>,
) -> Result<Option<Dir>, Diagnostic> {
    if scope_within(ceiling.filesystem_scope.as_deref(), scope) {
        return Ok(Some(work.mkdirs(scope, 0o755).map_err(|x| io(artifact, x))?));
    }
    warnings.push(Diagnostic::new(
        code::SEC_OUTSIDE_CEILING,
        format!("artifacts[{artifact}].capabilities.filesystem.scope"),
        format!("scope '{scope}' for artifact {artifact} is outside the capsule's filesystem scope; it gets no directory"),
    ));
    Ok(None)
}

fn io(artifact: &str, e: crate::fsx::FsError) -> Diagnostic {
    Diagnostic::new(
        code::IO_READ,
        format!("artifacts[{artifact}].capabilities.filesystem.scope"),
        format!("cannot open the directory of artifact {artifact}: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(e: &[&str]) -> Vec<NetRule> {
        e.iter().map(|x| NetRule::parse(x).unwrap()).collect()
    }

    #[test]
    fn network_is_the_intersection() {
        let ceiling = rules(&[
            "https://api.example.com",
            "http://127.0.0.1:8080",
            "docs.example.com",
        ]);
        let (kept, w) = narrow_network(
            &ceiling,
            &rules(&["https://docs.example.com", "evil.example.com", "api.example.com"]),
            "t",
        );
        assert_eq!(
            kept,
            rules(&["https://api.example.com", "https://docs.example.com"])
        );
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].code, "W-SEC-007");
        assert!(w[0].message.contains("evil.example.com"));
        let (kept, w) = narrow_network(&ceiling, &[], "t");
        assert!(kept.is_empty() && w.is_empty());
    }

    #[test]
    fn limits_only_go_down() {
        let ceiling = Limits {
            memory_bytes: 1 << 20,
            deadline_seconds: Some(60),
            ..Limits::default()
        };
        let mut entry = Capabilities::default();
        entry.limits.memory_bytes = 1 << 30;
        entry.limits.table_elements = 10;
        entry.limits.deadline_seconds = Some(600);
        let (l, d) = narrow_limits(&ceiling, Some(&entry), false);
        assert_eq!((l.memory_bytes, l.table_elements, d), (1 << 20, 10, 60));
        entry.limits.deadline_seconds = Some(5);
        assert_eq!(narrow_limits(&ceiling, Some(&entry), true).1, 5);
        assert_eq!(narrow_limits(&Limits::default(), None, true).1, 30);
        assert_eq!(narrow_limits(&Limits::default(), None, false).1, 600);
    }

    #[test]
    fn scopes_nest() {
        assert!(scope_within(None, "cache"));
        assert!(scope_within(Some("a"), "a"));
        assert!(scope_within(Some("a"), "a/b"));
        assert!(!scope_within(Some("a"), "ab"));
        assert!(!scope_within(Some("a"), "b"));
    }
}
