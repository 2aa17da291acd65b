//! The one child policy of a session: what every contained child starts with (a capsule's
//! shell and native tools, and `mur exec`), built once from the capabilities, the decided
//! class, the workdir and the session's identity: the environment, `HOME`, `PATH`, the
//! allowed binaries, the read grants, the pids cgroup, the egress namespace and the
//! rlimits. A child differs from another only in its program, arguments and stdio.

use super::cgroup::Cgroup;
use super::class::Class;
use super::egress::Egress;
use super::host_env::{credential_shaped, resolve_binary, PIDS_MAX};
use super::{runtime_dirs, spawn};
use crate::containment::spawn::{Proc, Stdio};
use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::model::Capabilities;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The session home beneath the workdir: `HOME` of every child.
pub const HOME_DIR: &str = ".home";
/// `PATH` when the launching process has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What a session's child policy is built from.
pub struct PolicyInputs<'a> {
    pub caps: &'a Capabilities,
    pub class: Class,
    pub landlock_abi: u32,
    /// The accessible workdir, held open: the child's cwd and its only writable tree.
    pub workdir: &'a Dir,
    pub session_id: &'a str,
    /// `MURMUR_CAPSULE_NAME`, `_VERSION`, `_SESSION_ID`, `_CAPSULE_URL`, in that order.
    pub identity: &'a [(String, String)],
    /// The `env.allow` names set in the launching environment, with their values.
    pub env_present: &'a [(String, String)],
    /// The provider key (its variable, its value): never seen by a child.
    pub secret: Option<(Option<String>, String)>,
    /// The launch-time `PATH`.
    pub host_path: String,
    /// The session's network namespace and relay (`None`: the child gets a loopback-only
    /// namespace of its own when contained).
    pub net: Option<Arc<Egress>>,
}

/// Everything a contained child of the session is started with.
pub struct ChildPolicy {
    pub class: Class,
    pub landlock_abi: u32,
    /// Every `shell.allow` binary with its resolved path (None: not found on PATH).
    pub allowed: Vec<(String, Option<PathBuf>)>,
    /// The accessible workdir (real path).
    pub workdir: PathBuf,
    /// The session's own descriptor on it: every spawn takes the tree from this, never
    /// from re-resolving `workdir` (which something above it could swap for a symlink).
    pub held: Option<Dir>,
    pub workdir_exec: bool,
    pub unix_sockets: bool,
    pub env: Vec<(String, String)>,
    /// Read-only grants (interpreter runtimes, trust store): `runtime_dirs::read_grants`.
    pub read_dirs: Vec<PathBuf>,
    /// Read-only, not listable (`interpreter_runtime` with `list_dir: false`).
    pub read_unlisted: Vec<PathBuf>,
    /// The session's pids cgroup (shared with whoever must empty it on a signal).
    pub cgroup: Option<Arc<Cgroup>>,
    pub net: Option<Arc<Egress>>,
    pub rlimits: spawn::Rlimits,
}

/// The stdio of one child.
pub struct Stdios {
    pub stdin: Stdio,
    pub stdout: Stdio,
    pub stderr: Stdio,
}

/// The `env.allow` names set in this process's environment (the identity variables are
/// the runtime's to set), with their values.
pub fn env_present(caps: &Capabilities) -> Vec<(String, String)> {
    caps.env_allow
        .iter()
        .filter(|n| !super::host_env::IDENTITY_VARS.contains(&n.as_str()))
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect()
}

/// The variables of `present` that a guest or child may see: none credential-shaped, none
/// named as the key's variable, none whose value holds the key.
pub fn safe_env(
    present: &[(String, String)],
    secret: Option<&(Option<String>, String)>,
) -> Vec<(String, String)> {
    let key_var = secret.and_then(|(v, _)| v.as_deref());
    let key = secret.map(|(_, k)| k.as_str()).filter(|k| !k.is_empty());
    present
        .iter()
        .filter(|(n, v)| {
            !credential_shaped(n) && Some(n.as_str()) != key_var && key.is_none_or(|k| !v.contains(k))
        })
        .cloned()
        .collect()
}

impl ChildPolicy {
    /// Build the policy; the warnings (W-SEC-009 and the like) are the caller's to report.
    pub fn new(i: PolicyInputs<'_>) -> Result<(ChildPolicy, Vec<Diagnostic>), Diagnostic> {
        let allowed = resolve_allowed(i.caps, &i.host_path);
        let workdir = real_workdir(i.workdir)?;
        let env = child_env(&i, &workdir);
        let cgroup = session_cgroup(i.session_id, i.class)?;
        let allowed_paths: Vec<PathBuf> = allowed.iter().filter_map(|(_, p)| p.clone()).collect();
        let reads = runtime_dirs::read_grants(i.class, &allowed_paths, i.caps);
        let redirectable = redirectable_grants(i.caps, &workdir);
        let keep = |v: Vec<PathBuf>| -> Vec<PathBuf> {
            v.into_iter()
                .filter(|g| !g.starts_with(&workdir) && !redirectable.contains(g))
                .collect()
        };
        let (read_dirs, read_unlisted) = (keep(reads.paths), keep(reads.unlisted));
        let policy = ChildPolicy {
            class: i.class,
            landlock_abi: i.landlock_abi,
            allowed,
            workdir,
            held: i.workdir.try_clone().ok(),
            workdir_exec: i.caps.workdir_exec,
            unix_sockets: i.caps.unix_sockets,
            env,
            read_dirs,
            read_unlisted,
            cgroup,
            net: i.net,
            rlimits: spawn::Rlimits::default(),
        };
        Ok((policy, reads.warnings))
    }

    /// The resolved path of a `shell.allow` name.
    pub fn resolved(&self, name: &str) -> Option<&Path> {
        self.allowed
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, p)| p.as_deref())
    }

    /// Start `program` with `args` under the policy.
    pub fn spawn(&self, program: &Path, args: &[String], stdio: Stdios) -> Result<Proc, Diagnostic> {
        let mut allowed: Vec<PathBuf> = self.allowed.iter().filter_map(|(_, p)| p.clone()).collect();
        if !allowed.iter().any(|p| p == program) {
            allowed.push(program.to_path_buf());
        }
        let held = self.held.as_ref().map(Dir::proc_path);
        spawn::spawn(spawn::Spawn {
            class: self.class,
            landlock_abi: self.landlock_abi,
            program,
            args,
            allowed_binaries: &allowed,
            read_dirs: &self.read_dirs,
            read_unlisted: &self.read_unlisted,
            workdir: &self.workdir,
            workdir_held: held.as_deref(),
            workdir_exec: self.workdir_exec,
            unix_sockets: self.unix_sockets,
            env: &self.env,
            cgroup: self.cgroup.as_deref(),
            rlimits: self.rlimits,
            runtime: false,
            net: self.net.as_deref().map(|e| &e.join),
            stdin: stdio.stdin,
            stdout: stdio.stdout,
            stderr: stdio.stderr,
        })
    }
}

/// Every `shell.allow` name with its path on the launch-time `PATH`.
fn resolve_allowed(caps: &Capabilities, host_path: &str) -> Vec<(String, Option<PathBuf>)> {
    caps.shell_allow
        .iter()
        .flatten()
        .map(|b| (b.clone(), resolve_binary(b, host_path)))
        .collect()
}

/// The workdir's real path, and its session home made (through the held descriptor).
/// The grants (canonical) of the declared `interpreter_runtime` directories the contained
/// command could have redirected: one whose path passes through its workdir (a directory on
/// the way, or the directory itself, is the workdir or below it), where the command may
/// have left a symlink to anywhere (`/`, `~/.ssh`) for the next launch to resolve. Nothing
/// is granted for those; a grant inside the workdir is redundant anyway (the workdir's own
/// rights cover it).
fn redirectable_grants(caps: &crate::manifest::Capabilities, workdir: &Path) -> Vec<PathBuf> {
    let inside = |p: &Path| std::fs::canonicalize(p).is_ok_and(|r| r.starts_with(workdir));
    caps.interpreter_runtime
        .iter()
        .flat_map(|e| e.dirs.iter())
        .filter(|d| d.path.starts_with(workdir) || d.path.ancestors().any(inside))
        .filter_map(|d| std::fs::canonicalize(&d.path).ok())
        .collect()
}

fn real_workdir(work: &Dir) -> Result<PathBuf, Diagnostic> {
    let fail = |what: &str, e: String| Diagnostic::new(code::IO_READ, "", format!("{what}: {e}"));
    let real = std::fs::canonicalize(work.proc_path())
        .map_err(|e| fail("cannot resolve the workdir", e.to_string()))?;
    work.mkdirs(HOME_DIR, 0o700)
        .map_err(|e| fail("cannot create the session home", e.to_string()))?;
    Ok(real)
}

/// `PATH`, `HOME`, the safe `env.allow` variables, then the identity.
fn child_env(i: &PolicyInputs<'_>, workdir: &Path) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_string(), i.host_path.clone()),
        ("HOME".to_string(), workdir.join(HOME_DIR).display().to_string()),
    ];
    env.extend(
        safe_env(i.env_present, i.secret.as_ref())
            .into_iter()
            .filter(|(k, _)| k != "PATH" && k != "HOME"),
    );
    env.extend(i.identity.iter().cloned());
    env
}

/// The session's pids cgroup (required from `scoped` up, best effort under `advisory`),
/// and the warden that empties it should this process die before the session ends.
fn session_cgroup(session_id: &str, class: Class) -> Result<Option<Arc<Cgroup>>, Diagnostic> {
    let warden = super::warden::get().map_err(|e| {
        Diagnostic::new(
            code::RUN_CONTAINMENT,
            "",
            format!("cannot start the session's warden, which ends its processes should mur die: {e}"),
        )
    })?;
    match Cgroup::create(session_id, PIDS_MAX) {
        Ok(c) => {
            warden.cgroup(session_id).map_err(|e| {
                Diagnostic::new(
                    code::RUN_CONTAINMENT,
                    "",
                    format!("cannot hand the session's pids cgroup to its warden: {e}"),
                )
            })?;
            Ok(Some(Arc::new(c)))
        }
        Err(e) if class >= Class::Scoped => Err(Diagnostic::new(
            code::RUN_CONTAINMENT,
            "",
            format!("cannot create the session's pids cgroup: {e}"),
        )),
        Err(_) => Ok(None),
    }
}
