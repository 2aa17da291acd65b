//! Delegation, the runtime's side: registration with `mur-roost` at launch and
//! deregistration at the end ([`registration`]), the `delegate-task` launch of a child
//! ([`launcher`]), the watch over each child ([`watch`]) and the completion path
//! ([`completion`], [`send`]). The roost referees; this code asks it, launches what it
//! approved, and reports back. Tokens live only in memory: the credential in
//! [`roost_client::Credential`], an approval only until it is written on a child's stdin.

pub mod completion;
pub mod launcher;
pub mod registration;
pub mod roost_client;
pub mod send;
pub mod watch;

use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::model::{Manifest, TaskAcceptance};
use crate::spawner::Spawner;
use completion::Completion;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// `spawned_by` and `delegation_id` for `session_start` of a delegated child.
pub fn session_start_fields(spawner: Option<&Spawner>, fields: &mut Value) {
    if let (Some(s), Some(map)) = (spawner, fields.as_object_mut()) {
        map.insert("spawned_by".into(), s.session_id.clone().into());
        map.insert("delegation_id".into(), s.delegation_id.clone().into());
    }
}

/// W-SEC-020: the manifest delegates but its lifecycle can never take a completion (only
/// `queue` accepts one once the first task ran).
pub fn lifecycle_warning(m: &Manifest) -> Option<Diagnostic> {
    if m.capabilities.spawn_allow.is_empty() || m.lifecycle.task_acceptance == TaskAcceptance::Queue {
        return None;
    }
    Some(
        Diagnostic::new(
            code::SEC_NO_COMPLETIONS,
            "lifecycle.task_acceptance",
            "capabilities.spawn.allow is declared but lifecycle.task_acceptance is not queue: completions of delegated tasks will not be taken",
        )
        .with_hint("declare lifecycle: {task_acceptance: queue, queue_depth: N} to receive each delegation's outcome"),
    )
}

/// How long a started child may run: `MURMUR_DELEGATION_TIMEOUT_SECS` (a positive whole
/// number; anything else is ignored), else `lifecycle.delegation_deadline_secs`.
pub fn deadline(m: &Manifest, env: &dyn Fn(&str) -> Option<String>) -> Duration {
    let from_env = env("MURMUR_DELEGATION_TIMEOUT_SECS")
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|n| *n > 0);
    Duration::from_secs(
        from_env
            .unwrap_or(m.lifecycle.delegation_deadline_secs)
            .min(u64::from(u32::MAX)),
    )
}

/// What the end of a delegated child's session reports.
pub struct Ended<'a> {
    pub manifest: &'a Manifest,
    pub session_id: &'a str,
    /// Whether the session ended ok (its last task completed).
    pub ok: bool,
    /// Whether a signal ended it: then the parent's launcher reports, not the child.
    pub signalled: bool,
    pub records: &'a Dir,
    pub work: &'a Dir,
    pub workdir: &'a Path,
    pub duration_ms: u64,
}

/// The end of a session: a delegated child records and posts its completion; a registered
/// session deregisters (`complete` or `failed`).
pub fn finish(standing: registration::Standing, e: &Ended<'_>) {
    if let (Some(spawner), false) = (&standing.spawner, e.signalled) {
        let wrote = e
            .work
            .read("out/result.txt", 1 << 20)
            .map(|_| true)
            .unwrap_or_else(|err| matches!(err, crate::fsx::FsError::TooLarge { .. }));
        let c = Completion {
            delegation_id: spawner.delegation_id.clone(),
            capsule_name: e.manifest.name.clone(),
            capsule_version: e.manifest.version.clone(),
            session_id: e.session_id.to_string(),
            status: if e.ok { "ok" } else { "error" },
            result_path: wrote.then(|| "out/result.txt".to_string()),
            workdir: e.workdir.display().to_string(),
            duration_ms: e.duration_ms,
            detail: None,
            reported_by: "child",
        };
        c.report(Some(e.records), Some(spawner), 1);
    }
    if let Some(r) = standing.registration {
        r.finish(e.ok);
    }
}
