//! Hooks at launch: each `runtime: hook` artifact's contract checked and its component
//! linked before the session starts (E-MAN-003 / E-RUN-002), then its default-deny grants
//! and log prepared, and `on-stage` fired with its `write-manifests` committed through the
//! symlink-safe writer, only for `shell.allow` binaries.

use super::spec::{self, Binding, Policy};
use super::{Hook, Hooks};
use crate::agent::sanitize;
use crate::containment::child_policy::safe_env;
use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::model::{ArtifactRuntime, Capabilities};
use crate::runtime::agent::grants::{self, GuestGrants};
use crate::runtime::agent::stage::{Payload, Resolved};
use crate::runtime::records::Log;
use crate::runtime::wasm::hook::{Event, Output, PreparedHook};
use std::fs::File;

/// The largest manifest an `on-stage` hook may write, bytes.
pub const MAX_STAGED_MANIFEST: usize = 64 << 10;

/// A hook checked and linked, not yet granted.
pub struct Linked {
    index: usize,
    spec: spec::Spec,
    prepared: PreparedHook,
}

/// Check and link every hook of `resolved`.
pub fn link(engine: &wasmtime::Engine, resolved: &[Resolved]) -> Result<Vec<Linked>, Diagnostic> {
    let mut out = Vec::new();
    for (index, r) in resolved.iter().enumerate() {
        if r.entry.runtime != ArtifactRuntime::Hook {
            continue;
        }
        let spec = spec::parse(&r.bare, &r.own)?;
        let Payload::Wasm(component) = &r.payload else {
            return Err(Diagnostic::new(
                code::RUN_COMPONENT,
                format!("artifacts[{}]", r.entry.name),
                format!("hook {} has no WebAssembly component", r.entry.name),
            ));
        };
        let prepared = PreparedHook::new(engine, component, &r.bare)
            .map_err(|e| Diagnostic::new(code::RUN_COMPONENT, format!("artifacts[{}]", r.entry.name), e))?;
        out.push(Linked {
            index,
            spec,
            prepared,
        });
    }
    Ok(out)
}

/// What every hook's grants start from.
pub struct Base<'a> {
    pub ceiling: &'a Capabilities,
    pub work: &'a Dir,
    pub records: &'a Dir,
    /// Where a failed write to a hook's log is reported.
    pub health: &'a crate::runtime::records::Health,
    /// The identity variables (every hook gets them).
    pub identity: &'a [(String, String)],
    /// Host variables the capsule may pass on (already filtered of the key).
    pub allowed_env: &'a [(String, String)],
    /// The provider key and its variable: a hook's `config` holding it is not passed on.
    pub secret: Option<&'a (Option<String>, String)>,
    /// The inference driver's artifact name (what [`provider_of`] reads).
    pub driver: &'a str,
    pub stdout: &'a File,
    pub stderr: &'a File,
}

/// The variable a hook's entry `config` reaches it in (never taken from the host).
pub const CONFIG_VAR: &str = "MURMUR_ARTIFACT_CONFIG";

/// The variable naming the inference provider to every hook, in OpenTelemetry's GenAI
/// words (`gen_ai.provider.name`), when the driver is one whose API is known (never taken
/// from the host: no `MURMUR_*` name may be in `env.allow`).
pub const PROVIDER_VAR: &str = "MURMUR_INFERENCE_PROVIDER";

/// The provider of the shipped drivers, by their bare name, as the GenAI semantic
/// conventions name it (the API the driver speaks, whoever serves it: an OpenAI-compatible
/// Ollama is `openai`, as those conventions allow); another driver names none.
pub fn provider_of(driver: &str) -> Option<&'static str> {
    match driver.rsplit('/').next().unwrap_or(driver) {
        "murmur-driver-openai" => Some("openai"),
        "murmur-driver-anthropic" => Some("anthropic"),
        _ => None,
    }
}

/// Grant each linked hook (default deny) and open its log; warnings for dropped grants,
/// and a note for each policy its binding does not honour.
pub fn grant(
    linked: Vec<Linked>,
    resolved: &[Resolved],
    base: &Base<'_>,
) -> Result<(Hooks, Vec<Diagnostic>, Vec<String>), Diagnostic> {
    let io = |e: std::io::Error| Diagnostic::new(code::IO_READ, "", format!("cannot prepare a hook: {e}"));
    let mut hooks = Vec::new();
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    for l in linked {
        let r = &resolved[l.index];
        if !l.spec.policy_effective() {
            let honoured = match l.spec.policy {
                Policy::WriteManifests => "on-stage",
                Policy::ReplaceContext => "on-compaction",
                Policy::ReopenTask => "on-task-end",
                Policy::None => "",
            };
            notes.push(format!(
                "hook {}: commit_policy {} has no effect on binding {} (it is honoured only on {honoured}); its output is discarded",
                r.bare,
                l.spec.policy.as_str(),
                l.spec.binding.map_or("(every session event)", Binding::as_str),
            ));
        }
        let n = grants::narrow_hook(
            &r.entry.name,
            base.ceiling,
            r.entry.capabilities.as_ref(),
            base.work,
        )?;
        warnings.extend(n.warnings);
        let mut env: Vec<(String, String)> = base
            .allowed_env
            .iter()
            .filter(|(k, _)| n.env_names.as_ref().is_some_and(|names| names.contains(k)))
            .filter(|(k, _)| k != CONFIG_VAR)
            .cloned()
            .collect();
        env.extend(base.identity.iter().cloned());
        env.extend(provider_of(base.driver).map(|p| (PROVIDER_VAR.to_string(), p.to_string())));
        env.extend(config_env(r, base.secret, &mut warnings));
        let records = own_records(r, base.records)?;
        warnings.extend(records_needed(r));
        let (limits, deadline) =
            grants::narrow_limits(&base.ceiling.limits, r.entry.capabilities.as_ref(), true);
        let rel = format!("logs/hook-{}.log", r.bare);
        let log = Log::open(base.records.append(&rel), base.health.watch(&rel));
        hooks.push(Hook {
            name: r.bare.clone(),
            spec: l.spec,
            prepared: l.prepared,
            grants: GuestGrants {
                preopen: n.preopen,
                records,
                env,
                network_allow: n.network_allow,
                limits,
                deadline,
                stdout: base.stdout.try_clone().map_err(io)?,
                stderr: base.stderr.try_clone().map_err(io)?,
            },
            log,
        });
    }
    Ok((Hooks::new(hooks), warnings, notes))
}

/// The hook's entry `config` as `MURMUR_ARTIFACT_CONFIG`; not passed (W-SEC-004) when it
/// holds the provider key.
fn config_env(
    r: &Resolved,
    secret: Option<&(Option<String>, String)>,
    warnings: &mut Vec<Diagnostic>,
) -> Vec<(String, String)> {
    let Some(config) = &r.entry.config else {
        return Vec::new();
    };
    let passed = safe_env(&[(CONFIG_VAR.into(), config.clone())], secret);
    if passed.is_empty() {
        warnings.push(Diagnostic::new(
            code::SEC_LITERAL_SECRET,
            format!("artifacts[{}].config", r.entry.name),
            format!(
                "the config of hook {} holds the provider key; it is not passed to the hook",
                r.bare
            ),
        ));
    }
    passed
}

/// The shipped hooks whose work is kept in their own records directory, and what is lost
/// without it: each still runs (its log says why it keeps nothing).
const KEEP_RECORDS: [(&str, &str); 2] = [
    (
        "murmur-hook-eval",
        "it writes its scores (eval.jsonl) there, so this session will not be scored",
    ),
    (
        "murmur-hook-otel",
        "it keeps the running task's spans there, so it will send no span",
    ),
];

/// W-RUN-005 for a hook of [`KEEP_RECORDS`] whose entry does not grant `records: own`.
fn records_needed(r: &Resolved) -> Option<Diagnostic> {
    if r.entry.records {
        return None;
    }
    let (_, lost) = KEEP_RECORDS.iter().find(|(name, _)| *name == r.bare)?;
    Some(
        Diagnostic::new(
            code::RUN_HOOK_NO_RECORDS,
            format!("artifacts[{}].records", r.entry.name),
            format!("hook {} is declared without a records directory: {lost}", r.bare),
        )
        .with_hint(format!(
            "add `records: own` to its entry (artifacts[{}])",
            r.entry.name
        )),
    )
}

/// A hook granted `records: own`: its directory of the session's records (`hooks/<name>/`,
/// never the trace or the logs beside it), made new, so two hooks of one bare name
/// (`a/eval`, `b/eval`) never share one.
fn own_records(r: &Resolved, records: &Dir) -> Result<Option<Dir>, Diagnostic> {
    if !r.entry.records {
        return Ok(None);
    }
    let rel = format!("hooks/{}", r.bare);
    let made = records
        .mkdirs("hooks", 0o700)
        .and_then(|h| h.mkdir_new(&r.bare, 0o700));
    made.map(Some).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            format!("artifacts[{}].records", r.entry.name),
            format!("cannot make the hook's records directory {rel}: {e}"),
        )
    })
}

/// Fire `on-stage` with the shell allow list and commit `write-manifests` answers: each
/// `tools/<binary>/murmur.yaml` for a binary in `shell_allow`, written through `work`.
/// Returns the manifests written (`binary`, text), notes for the bootstrap log, and the
/// hooks that failed (traced once the trace is open).
pub struct Staged {
    pub manifests: Vec<(String, String)>,
    pub notes: Vec<String>,
    pub failures: Vec<super::Failure>,
}

pub fn stage(hooks: &mut Hooks, shell_allow: &[String], work: &Dir) -> Staged {
    let mut notes = Vec::new();
    let mut written: Vec<(String, String)> = Vec::new();
    let fired = hooks.fire(Binding::Stage, || Event::Stage(shell_allow.to_vec()));
    for f in &fired.failures {
        notes.push(format!("hook {} (on-stage): {}", f.hook, f.error));
    }
    for a in fired.answers {
        let Output::WriteManifests(list) = a.output else {
            continue;
        };
        if a.policy != Policy::WriteManifests || !a.effective {
            notes.push(format!(
                "hook {}: write-manifests output ignored (its commit_policy or binding does not allow it)",
                a.hook
            ));
            continue;
        }
        // At most one manifest per allowed binary is ever useful.
        for t in list.into_iter().take(shell_allow.len().saturating_mul(2).max(1)) {
            let shown = sanitize::one_line(&t.binary, 100);
            if !shell_allow.contains(&t.binary) {
                notes.push(format!(
                    "hook {}: manifest for '{shown}' ignored: not in capabilities.shell.allow",
                    a.hook
                ));
                continue;
            }
            if t.manifest.len() > MAX_STAGED_MANIFEST {
                notes.push(format!(
                    "hook {}: manifest for '{shown}' ignored: larger than {MAX_STAGED_MANIFEST} bytes",
                    a.hook
                ));
                continue;
            }
            let dir = format!("tools/{}", t.binary);
            let res = work
                .mkdirs(&dir, 0o755)
                .and_then(|_| work.replace(&format!("{dir}/murmur.yaml"), t.manifest.as_bytes()));
            match res {
                Ok(()) => {
                    written.retain(|(b, _)| b != &t.binary);
                    written.push((t.binary.clone(), t.manifest.clone()));
                }
                Err(e) => notes.push(format!("hook {}: cannot write {dir}/murmur.yaml: {e}", a.hook)),
            }
        }
    }
    Staged {
        manifests: written,
        notes,
        failures: fired.failures,
    }
}
