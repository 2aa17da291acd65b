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
    /// Whether the host can give a contained child a network namespace (the probe's
    /// `netns`). Without one, and without the session's, the child's network is closed.
    pub netns: bool,
    /// Whether a PID namespace bounds a session here (the probe's `pidns`): only then may a
    /// contained session of a user other than root go on without its pids cgroup.
    pub pidns: bool,
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
    /// `HOME` of every child (None: `<workdir>/.home`).
    pub home: Option<PathBuf>,
}

/// Everything a contained child of the session is started with.
pub struct ChildPolicy {
    pub class: Class,
    pub landlock_abi: u32,
    /// Whether a contained child can have a network namespace (see [`PolicyInputs`]).
    pub netns: bool,
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
    /// Without the session's egress, the user and network namespace a contained child of a
    /// `mur` that is not dumpable joins (see [`keyless_namespace`]).
    pub own_ns: Option<spawn::Join>,
    pub rlimits: spawn::Rlimits,
    /// The process groups of the calls running now: what a signal's end of the session
    /// kills where no cgroup holds them all.
    pub live: Arc<LiveCalls>,
}

/// The process groups of a session's running calls. A call leaves the set before its
/// leader is reaped (its group id is its own until then), so a kill of the set never
/// reaches a group id taken by someone else.
#[derive(Default)]
pub struct LiveCalls {
    groups: std::sync::Mutex<Vec<i32>>,
    /// Where no cgroup holds the session: the warden, told of each group, which it kills
    /// should `mur` die first.
    warden: Option<&'static super::warden::Warden>,
}

/// One call's place in [`LiveCalls`], left when dropped.
pub struct LiveCall {
    calls: Arc<LiveCalls>,
    group: i32,
}

impl LiveCalls {
    /// Enter the group `group` (the call's leader: pid 1 of its PID namespace, or the
    /// command itself, each leading its own session).
    pub fn enter(self: &Arc<Self>, group: i32) -> LiveCall {
        if let Ok(mut v) = self.groups.lock() {
            v.push(group);
        }
        if let Some(w) = self.warden {
            // Best effort: a pid 1 also dies with `mur` by itself.
            let _ = w.group(group);
        }
        LiveCall {
            calls: Arc::clone(self),
            group,
        }
    }

    /// SIGKILL every running call's group: pid 1 of a PID namespace takes its namespace
    /// with it; an advisory command's group is all it started that did not leave it.
    pub fn kill_all(&self) {
        let Ok(v) = self.groups.lock() else { return };
        for &g in v.iter() {
            if let Some(p) = rustix::process::Pid::from_raw(g) {
                let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
            }
        }
    }
}

impl Drop for LiveCall {
    fn drop(&mut self) {
        if let Ok(mut v) = self.calls.groups.lock() {
            if let Some(i) = v.iter().position(|&g| g == self.group) {
                v.swap_remove(i);
            }
        }
        if let Some(w) = self.calls.warden {
            let _ = w.ungroup(self.group);
        }
    }
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
        let cgroup = session_cgroup(i.session_id, i.class, i.pidns)?;
        let own_ns = if i.netns {
            keyless_namespace(i.class, i.net.is_some())?
        } else {
            None
        };
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
            netns: i.netns,
            allowed,
            workdir,
            held: i.workdir.try_clone().ok(),
            workdir_exec: i.caps.workdir_exec,
            unix_sockets: i.caps.unix_sockets,
            env,
            read_dirs,
            read_unlisted,
            net: i.net,
            live: Arc::new(LiveCalls {
                groups: Default::default(),
                warden: if cgroup.is_none() {
                    super::warden::running()
                } else {
                    None
                },
            }),
            cgroup,
            own_ns,
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
            net: self.net.as_deref().map(|e| &e.join).or(self.own_ns.as_ref()),
            netns: self.netns,
            in_fork: None,
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
        (
            "HOME".to_string(),
            i.home
                .clone()
                .unwrap_or_else(|| workdir.join(HOME_DIR))
                .display()
                .to_string(),
        ),
    ];
    env.extend(
        safe_env(i.env_present, i.secret.as_ref())
            .into_iter()
            .filter(|(k, _)| k != "PATH" && k != "HOME"),
    );
    env.extend(i.identity.iter().cloned());
    env
}

/// The user and network namespace a contained child joins when the session has no egress
/// namespace, `mur` is not root and it is not dumpable (it holds a provider key): such a
/// child shares `mur`'s memory map and so its state, and could not write the id maps of a
/// user namespace of its own (the kernel lets only root open them in a process that is not
/// dumpable). The keyless helper `mur __netns`, started with an empty environment and
/// never holding the key, makes and maps them (`lo` up, no listener) and hands them over;
/// nothing key-holding is ever dumpable. `None` where the child can make its own.
fn keyless_namespace(class: Class, has_egress: bool) -> Result<Option<spawn::Join>, Diagnostic> {
    let dumpable =
        rustix::process::dumpable_behavior().is_ok_and(|b| b == rustix::process::DumpableBehavior::Dumpable);
    if class < Class::Scoped || has_egress || dumpable || rustix::process::geteuid().is_root() {
        return Ok(None);
    }
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let ns = super::egress::namespace::create(&exe, &[]).map_err(super::egress::refusal)?;
    Ok(Some(ns.join))
}

/// The session's pids cgroup (required from `scoped` up where it bounds the session,
/// best effort under `advisory`), and the warden that empties it should this process die
/// before the session ends. A user other than root who may make none gets `None` under
/// `scoped` and `sealed` too where the probe found a PID namespace bounds it (`pidns`):
/// each command then runs in one of its own under `RLIMIT_NPROC`; elsewhere it is refused.
fn session_cgroup(session_id: &str, class: Class, pidns: bool) -> Result<Option<Arc<Cgroup>>, Diagnostic> {
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
        Err(e) if class >= Class::Scoped && (rustix::process::geteuid().is_root() || !pidns) => {
            Err(Diagnostic::new(
                code::RUN_CONTAINMENT,
                "",
                format!("cannot create the session's pids cgroup: {e}"),
            ))
        }
        Err(_) => Ok(None),
    }
}
