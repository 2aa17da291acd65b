//! `mur run` from flags to exit, as named phases, each with one error naming what failed:
//! source the manifest and payload; decide the scope and containment (and answer
//! `--explain-scope`); prepare the kind's runner where nothing of the session exists yet;
//! open the session (layout, records, trace, lifecycle, the door bound); assemble the
//! runner; then the session skeleton ([`super::serve`]) serves the tasks and records the end.

use super::agent;
use super::component::{ComponentParts, ComponentRunner};
use super::delegation::{self, registration::Standing};
use super::door;
use super::explain::Scope;
use super::lifecycle::{self, Lifecycle, MAX_TASK_BYTES};
use super::pinning::Pinning;
use super::records::Health;
use super::serve::{self, peer_key, Opened, Start, TaskRunner};
use super::session::{self, Plan};
use super::trace::{Bootstrap, Trace};
use super::wasm::{self, cache, sink::Sink};
use crate::containment::child_policy::env_present;
use crate::containment::class::Decision;
use crate::containment::egress::{self, event::Event, Egress};
use crate::containment::host_env::identity;
use crate::diag::{code, Diagnostic};
use crate::manifest::model::{Containment, Manifest, TaskAcceptance};
use crate::manifest::{self, Resolve};
use crate::registry::{self, payload};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI32;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::Instant;

/// The flags of `mur run`.
#[derive(Debug, Default)]
pub struct RunOptions {
    pub manifest: Option<PathBuf>,
    pub capsule: Option<String>,
    pub capsule_version: Option<String>,
    pub registry: Option<PathBuf>,
    pub workdir: Option<PathBuf>,
    pub task: Option<String>,
    pub json: bool,
    pub verbose: bool,
    pub containment: Option<Containment>,
    pub explain: bool,
    /// `--locked`: the manifest's lock (`murmur.lock` beside `murmur.yaml`) must exist and is
    /// never written.
    pub locked: bool,
}

/// What the scope phase settled: the containment decision, the session's identity and
/// plan, and what the session may take from the host.
pub struct Decided {
    pub declared: Containment,
    pub achieved: Containment,
    pub landlock_abi: u32,
    /// Whether a contained child can have a network namespace here (without one its
    /// network is closed by seccomp and landlock; egress rules are then refused).
    pub netns: bool,
    /// Whether a PID namespace bounds a session here where no pids cgroup can be made.
    pub pidns: bool,
    pub session_id: String,
    pub plan: Plan,
    /// `env.allow` names present in the host environment, with their values.
    pub env_present: Vec<(String, String)>,
    /// `effective_grants` for `session_start`.
    pub grants_json: serde_json::Value,
    /// Who delegated this session, and its registration with the roost.
    pub standing: Standing,
    /// The session's network namespace and egress relay, with its decisions (an agent
    /// with a subprocess route).
    pub egress: Option<(Egress, Receiver<Event>)>,
}

/// What the kind prepared before anything of the session exists.
enum Prepared {
    Component(wasmtime::Engine, wasmtime::component::Component, String),
    Agent(Box<agent::PreparedAgent>),
}

/// A manifest and where its component comes from.
struct Source {
    manifest: Manifest,
    /// The directory `workdir/` goes under by default.
    base: PathBuf,
    component: Result<Vec<u8>, Diagnostic>,
    /// The archive a registry capsule came from (its packed files are its only files).
    archive: Option<Vec<u8>>,
    /// The sha256 of those bytes, as read.
    sha256: Option<String>,
}

/// What phase 3 prepares from.
enum Payload<'a> {
    /// An agent: its manifest, the manifest's directory, a registry capsule's archive.
    Agent(&'a Manifest, &'a Path, Option<&'a [u8]>),
    Component(&'a [u8]),
}

impl Source {
    /// The kind's payload: an agent needs none of its own; a WASM capsule its component.
    fn payload(&self) -> Result<Payload<'_>, Diagnostic> {
        if self.manifest.inference.is_some() {
            return Ok(Payload::Agent(
                &self.manifest,
                &self.base,
                self.archive.as_deref(),
            ));
        }
        match &self.component {
            Ok(bytes) => Ok(Payload::Component(bytes)),
            Err(d) => Err(d.clone()),
        }
    }
}

fn io_err(path: &Path, e: std::io::Error) -> Diagnostic {
    Diagnostic::new(
        code::IO_READ,
        path.display().to_string(),
        format!("cannot read {}: {e}", path.display()),
    )
}

fn from_path(path: &Path) -> Result<Source, Diagnostic> {
    let loaded = manifest::load_file(path, Resolve::All(&manifest::process_env))?;
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    let base = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let component = match payload::find_root_wasm(&base) {
        Ok(Some(name)) => std::fs::read(base.join(&name)).map_err(|e| io_err(&base.join(&name), e)),
        Ok(None) => Err(Diagnostic::new(
            code::BLD_WASM_PAYLOAD,
            path.display().to_string(),
            format!("no capsule.wasm (or single *.wasm) beside {}", path.display()),
        )
        .with_hint("build the component next to murmur.yaml, or name it capsule.wasm")),
        Err(d) => Err(d),
    };
    Ok(Source {
        manifest: loaded.manifest,
        base,
        component,
        archive: None,
        sha256: None,
    })
}

fn from_registry(root: &Path, name: &str, version: &str) -> Result<Source, Diagnostic> {
    let resolved = registry::resolve(root, name, version, Resolve::All(&manifest::process_env))?;
    for w in &resolved.loaded.warnings {
        eprintln!("{w}");
    }
    let component = payload::archive_component(&resolved.bytes, name);
    Ok(Source {
        manifest: resolved.loaded.manifest,
        base: PathBuf::from("."),
        component,
        archive: Some(resolved.bytes),
        sha256: Some(resolved.sha256),
    })
}

/// Run a capsule session; the exit code on success (0), a diagnostic otherwise.
pub fn run(opts: RunOptions) -> Result<u8, Diagnostic> {
    crate::http::descriptor_floor(DESCRIPTORS_WANTED)?;
    crate::runtime::wasm::invoke::ensure_async_runtime()?;
    let source = source(&opts)?;
    let pins = pinning(&opts, &source)?;
    // The threads this phase starts (the egress relay, the roost hold's reader, the
    // approval reader) outlive it: they are made with SIGTERM and SIGINT blocked, as every
    // thread of a session has them, so a signal never takes its default action on one of
    // them once the session's signal thread waits for it.
    let Some(decided) = crate::signals::with_termination_blocked(|| decide(&opts, &source))? else {
        return Ok(0);
    };
    let prepared = prepare(&opts, source.payload()?, &pins)?;
    let mut opened = open(&opts, &source.manifest, decided, &prepared)?;
    let pruning = prune_records(&opened);
    let exit = match assemble(&mut opened, prepared) {
        Ok((start, runner)) => serve::serve(opened, start, runner),
        Err(d) => Err(serve::failed_start(&mut opened, d)),
    };
    pruning.settle(PRUNE_SETTLE);
    exit
}

/// How long the end of a session waits for its launch's prune of the records root.
const PRUNE_SETTLE: std::time::Duration = std::time::Duration::from_secs(2);

/// Phase 4b: the records root pruned by the operator's policy on a thread of its own, so
/// the launch waits for none of it; this session's records are locked already. A delegated
/// child prunes nothing: its root session's launch did, and a runaway's thousand children
/// would each walk the root again.
fn prune_records(o: &Opened<'_>) -> crate::retention::Background {
    let delegated = std::env::var_os(session::WORKDIR_IDENTITY).is_some();
    match o.layout.records.parent() {
        Some(root) if !delegated => crate::retention::background(root.to_path_buf(), o.session_id.clone()),
        _ => crate::retention::Background::none(),
    }
}

/// The descriptor limit a session raises itself to when the hard limit allows.
const DESCRIPTORS_WANTED: u64 = 4096;

/// Phase 1: the manifest and where its payload comes from (a path or the registry).
fn source(opts: &RunOptions) -> Result<Source, Diagnostic> {
    match (&opts.capsule, &opts.capsule_version) {
        (Some(name), Some(version)) => {
            let root = opts.registry.clone().unwrap_or_else(registry::default_root);
            from_registry(&root, name, version)
        }
        _ => from_path(opts.manifest.as_deref().unwrap_or(Path::new("murmur.yaml"))),
    }
}

/// Phase 1b: the lock of an agent capsule run from its manifest, read (and `--locked`
/// refused without one) before anything of the session is made. A capsule from the
/// registry has no lock beside a manifest, so `--locked` refuses it rather than run it
/// unpinned; a WASM component capsule resolves no artifacts and has nothing to pin.
fn pinning(opts: &RunOptions, source: &Source) -> Result<Pinning, Diagnostic> {
    if source.manifest.inference.is_none() {
        return Ok(Pinning::none());
    }
    if source.archive.is_some() {
        if opts.locked {
            return Err(Diagnostic::new(
                code::RUN_LOCK,
                "--locked",
                "a capsule run from the registry (--capsule) has no lock beside a manifest: run it from its manifest to pin its artifacts",
            ));
        }
        return Ok(Pinning::none());
    }
    let manifest = opts.manifest.as_deref().unwrap_or(Path::new("murmur.yaml"));
    let pins = Pinning::open(&source.base, manifest, opts.registry.as_deref(), opts.locked)?;
    if let Some(w) = &pins.warning {
        eprintln!("{w}");
    }
    Ok(pins)
}

/// Phase 2: probe the host once, decide the class, make the session's identity and plan;
/// `None` when `--explain-scope` answered. An agent that can start subprocesses gets the
/// session's network namespace and egress relay before the floor is checked: a host that
/// cannot make it refuses the capsule whatever the class (E-CAP-005). E-RUN-020 and
/// E-RUN-019 come before anything of the session is made.
fn decide(opts: &RunOptions, source: &Source) -> Result<Option<Decided>, Diagnostic> {
    let m = &source.manifest;
    let caps = &m.capabilities;
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let report = crate::containment::probe_cache::probe(
        &exe,
        caps.containment.max(opts.containment.unwrap_or_default()),
        crate::places::cache_dir().as_deref(),
        crate::clock::now_ms(),
    );
    let decision: Decision =
        crate::containment::class::decide(caps.containment, opts.containment, caps.workdir_exec, &report);
    let session_id = session::new_session_id()?;
    let records_root = session::records_root().ok_or_else(|| {
        Diagnostic::new(
            code::IO_READ,
            "MURMUR_RECORDS_DIR",
            "neither MURMUR_RECORDS_DIR nor HOME is set: there is nowhere to keep the session's records",
        )
    })?;
    let mut plan = Plan::new(
        &source.base,
        opts.workdir.as_deref(),
        &session_id,
        caps.filesystem_scope.as_deref(),
        &records_root,
    );
    if let Ok(id) = std::env::var(session::WORKDIR_IDENTITY) {
        plan = plan.expect_identity(session::parse_identity(&id)?);
    }
    let env_present = env_present(caps);
    let scope = Scope {
        manifest: m,
        declared: decision.declared,
        achieved: decision.achieved,
        preopen: plan.preopen().display().to_string(),
        env_present: env_present.iter().map(|(k, _)| k.clone()).collect(),
        processes: processes_line(decision.achieved, &report),
    };
    if opts.explain {
        crate::diag::write_stdout(&if opts.json {
            scope.to_json()
        } else {
            scope.to_text()
        })?;
        return Ok(None);
    }
    crate::fsx::check_private_root(&records_root).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "MURMUR_RECORDS_DIR",
            format!("the records root cannot be used: {e}"),
        )
        .with_hint("use a directory of your own that no other user can write (chmod go-w)")
    })?;
    // With no rules and no namespace to be had, a contained child's network is closed by
    // seccomp and landlock instead (`ChildPolicy`); rules need the namespace (E-CAP-005).
    let closed = m.subprocess_rules().is_empty() && report.netns.is_err();
    let egress = if m.subprocess_route() && !closed {
        Some(egress::start(&exe, &m.subprocess_rules())?)
    } else {
        None
    };
    if let Some(refusal) = decision.refusal_for(caps.unix_sockets) {
        return Err(refusal);
    }
    if let Some(w) = delegation::lifecycle_warning(m) {
        eprintln!("{w}");
    }
    let process_env = |k: &str| std::env::var(k).ok();
    let standing = delegation::registration::settle(m, &session_id, &process_env, source.sha256.as_deref())?;
    Ok(Some(Decided {
        declared: decision.declared,
        achieved: decision.achieved,
        landlock_abi: report.landlock_abi,
        netns: report.netns.is_ok(),
        pidns: report.pidns.is_ok(),
        grants_json: scope.grants(),
        session_id,
        plan,
        env_present,
        standing,
        egress,
    }))
}

/// What bounds and ends the session's child processes, for `--explain-scope`.
fn processes_line(achieved: Containment, report: &crate::containment::class::HostReport) -> String {
    match (achieved, report.bound()) {
        (Containment::Advisory, _) => "each command's process group, and a pids cgroup per session where one can be made (advisory: a process that leaves its group with setsid is followed only by the cgroup)".into(),
        (_, Ok(b)) => b.describe().into(),
        (_, Err(why)) => format!("nothing: {why}"),
    }
}

/// Phase 3: what the kind needs, refused before any session exists (a component that is
/// not one; an agent's driver, prompt and artifacts).
fn prepare(opts: &RunOptions, payload: Payload<'_>, pins: &Pinning) -> Result<Prepared, Diagnostic> {
    match payload {
        Payload::Agent(m, base, archive) => {
            let registry = opts.registry.clone().unwrap_or_else(registry::default_root);
            let prepared = agent::prepare(m, base, archive, &registry, pins)?;
            if let Some(line) = pins.record(prepared.pins()) {
                eprintln!("{line}");
            }
            Ok(Prepared::Agent(Box::new(prepared)))
        }
        Payload::Component(bytes) => {
            let sha = registry::sha256_hex(bytes);
            let engine = wasm::engine().map_err(|e| {
                Diagnostic::new(code::RUN_COMPONENT, "", format!("cannot configure wasmtime: {e}"))
            })?;
            let (component, got) = cache::load(&engine, cache::default_dir().as_deref(), bytes, &sha)
                .map_err(|e| {
                    Diagnostic::new(
                        code::RUN_COMPONENT,
                        "",
                        format!("the component is not a valid WebAssembly component: {e:#}"),
                    )
                })?;
            Ok(Prepared::Component(
                engine,
                component,
                format!("component sha256 {sha}: {got:?}"),
            ))
        }
    }
}

/// Phase 4: the session begins. SIGTERM and SIGINT are taken by the session's signal
/// thread from here on (never the default action); the layout is made (E-CAP-007 first),
/// `task.md` written, the records, the trace and the task table opened, the door bound.
fn open<'a>(
    opts: &RunOptions,
    m: &'a Manifest,
    d: Decided,
    prepared: &Prepared,
) -> Result<Opened<'a>, Diagnostic> {
    crate::signals::block_termination()
        .map_err(|e| Diagnostic::new(code::RUN_TRAP, "", format!("cannot block SIGTERM/SIGINT: {e}")))?;
    export_roots(&d.plan, m)?;
    let layout = d.plan.create()?;
    if let Some(task) = &opts.task {
        session::write_task(&layout.work, task)?;
    }
    let health = Health::new(&layout.records);
    let mut bootstrap = Bootstrap::open(
        layout.records_dir.append("logs/bootstrap.log"),
        health.watch("logs/bootstrap.log"),
    );
    for note in &layout.notes {
        bootstrap.line(note);
    }
    if let Prepared::Component(_, _, line) = prepared {
        bootstrap.line(line);
    }
    bootstrap.line(&format!(
        "containment declared {}, achieved {}",
        d.declared.as_str(),
        d.achieved.as_str()
    ));
    let file_task = file_task(m, &layout.work, matches!(prepared, Prepared::Agent(_)))?;
    let (idle, idle_warning) = lifecycle::idle_wait();
    if let Some(w) = idle_warning {
        eprintln!("{w}");
        bootstrap.line(&w);
    }
    let stop = Arc::new(AtomicI32::new(0));
    let life = Lifecycle::new(m, file_task.as_deref(), idle, stop.clone());
    let bound = door::bind(m.internal_port)?;
    let url = bound.url();
    let trace_file = layout.records_dir.append("trace.jsonl").map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "",
            format!(
                "cannot open {}: {e}",
                layout.records.join("trace.jsonl").display()
            ),
        )
    })?;
    let (budget, budget_warning) = super::trace::budget();
    if let Some(w) = budget_warning {
        eprintln!("{w}");
        bootstrap.line(&w);
    }
    let trace = Trace::new(trace_file, &d.session_id, budget, &health);
    Ok(Opened {
        json: opts.json,
        verbose: opts.verbose,
        manifest: m,
        session_id: d.session_id,
        layout,
        bootstrap,
        trace,
        life,
        bound: Some(bound),
        achieved: d.achieved,
        url,
        stop,
        started: Instant::now(),
        standing: d.standing,
        declared: d.declared,
        landlock_abi: d.landlock_abi,
        netns: d.netns,
        pidns: d.pidns,
        env_present: d.env_present,
        grants_json: d.grants_json,
        egress: d.egress,
    })
}

/// The task the session starts with: `task.md` when there is one. A WASM capsule that
/// declares no `lifecycle:` is a script, and one under `none` has only this task: each runs
/// once even without it. An agent under `none` has nothing to run without it.
fn file_task(m: &Manifest, work: &crate::fsx::Dir, agent: bool) -> Result<Option<String>, Diagnostic> {
    let none = m.lifecycle.task_acceptance == TaskAcceptance::None;
    match work.read("task.md", MAX_TASK_BYTES) {
        Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
        Err(e) if agent && none => Err(Diagnostic::new(code::RUN_AGENT_LOOP, "--task", format!("no task: {e}")).with_hint(
            "give one with --task TEXT|FILE or put task.md in the workdir (lifecycle.task_acceptance: none takes no A2A task)",
        )),
        Err(_) if !agent && (none || !m.lifecycle.declared) => Ok(Some(String::new())),
        Err(_) => Ok(None),
    }
}

/// Phase 5: the kind's runner, built on the open session, and what the session's start says.
fn assemble(s: &mut Opened<'_>, prepared: Prepared) -> Result<(Start, Box<dyn TaskRunner>), Diagnostic> {
    match prepared {
        Prepared::Agent(p) => agent::assemble(s, *p),
        Prepared::Component(engine, component, _) => component_runner(s, engine, component),
    }
}

/// The WASM runner: the guest's environment (the `env.allow` names and the identity), its
/// two capped log sinks, and the component.
fn component_runner(
    o: &mut Opened<'_>,
    engine: wasmtime::Engine,
    component: wasmtime::component::Component,
) -> Result<(Start, Box<dyn TaskRunner>), Diagnostic> {
    let m = o.manifest;
    let mut env = o.env_present.clone();
    env.extend(identity(&m.name, &m.version, &o.session_id, &o.url));
    let sink = |name: &str| {
        let rel = format!("logs/{name}");
        let io = |e: String| {
            Diagnostic::new(
                code::IO_READ,
                "",
                format!("cannot open {}: {e}", o.layout.records.join(&rel).display()),
            )
        };
        let file = o.layout.records_dir.append(&rel).map_err(|e| io(e.to_string()))?;
        Sink::new(file, wasm::sink::LOG_CAP, o.trace.health().watch(&rel)).map_err(|e| io(e.to_string()))
    };
    let (stdout, stderr) = (sink("guest-stdout.log")?, sink("guest-stderr.log")?);
    let trace = o.trace.clone();
    let runner = ComponentRunner::new(
        ComponentParts {
            engine,
            component,
            env,
            caps: m.capabilities.clone(),
            stdout,
            stderr,
            trace,
            stop: o.stop.clone(),
            ask_secs: m.ask.map(|a| a.timeout_secs),
        },
        &o.layout,
        &o.life.tasks,
    )?;
    let start = Start {
        fields: json!({
            "capsule_name": m.name,
            "capsule_version": m.version,
            "containment_declared": o.declared.as_str(),
            "containment_achieved": o.achieved.as_str(),
            "workdir_exec": m.capabilities.workdir_exec,
            "effective_grants": grants_at(&o.grants_json, &o.layout),
        }),
        tools: Vec::new(),
        peer_key: peer_key(m)?,
    };
    Ok((start, Box::new(runner)))
}

/// The effective grants with the preopen as made (the scope phase named it as planned).
fn grants_at(planned: &serde_json::Value, layout: &session::Layout) -> serde_json::Value {
    let mut g = planned.clone();
    g["filesystem"]["preopen"] = layout.preopen.display().to_string().into();
    g
}

/// E-CAP-007, before anything of the session is made. A workdir that does not exist yet
/// holds no root, let alone a symlinked one.
fn export_roots(plan: &Plan, m: &Manifest) -> Result<(), Diagnostic> {
    match crate::fsx::Dir::open(&plan.preopen()) {
        Ok(work) => crate::resources::check_export_roots(m, &work),
        Err(_) => Ok(()),
    }
}
