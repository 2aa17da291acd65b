//! `mur run` from flags to exit: find the manifest and component, settle the containment
//! class, stage the workdir, open the door, run the guest, record the trace, honour the
//! lifecycle.

use super::component;
use super::delegation::{self, registration::Standing};
use super::door;
use super::explain::Scope;
use super::lifecycle::{self, Lifecycle};
use super::session::{self, Plan};
use super::trace::Trace;
use super::wasm::{self, cache};
use crate::diag::{code, Diagnostic};
use crate::manifest::model::{AfterTask, Containment, Manifest, TaskAcceptance};
use crate::manifest::{self, Resolve};
use crate::registry::{self, payload};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicI32;
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
}

/// What an agent session starts from: the settled decisions of the common launch.
pub struct Prelude<'a> {
    pub opts: &'a RunOptions,
    pub manifest: &'a Manifest,
    /// The manifest's directory (a system prompt file is read relative to it).
    pub base: &'a Path,
    /// A registry capsule's archive: its system prompt file is read from there.
    pub archive: Option<&'a [u8]>,
    pub registry: &'a Path,
    pub plan: Plan,
    pub task: Option<&'a str>,
    pub session_id: &'a str,
    pub declared: Containment,
    pub achieved: Containment,
    pub landlock_abi: u32,
    pub sleeps: bool,
    /// `env.allow` names present in the host environment, with their values.
    pub env_present: &'a [(String, String)],
    /// `effective_grants` for `session_start`.
    pub grants_json: serde_json::Value,
    /// Who delegated this session, and its registration with the roost.
    pub standing: Standing,
    /// The session's network namespace and egress relay, with its decisions (an agent
    /// with a subprocess route).
    pub egress: Option<(
        crate::containment::egress::Egress,
        std::sync::mpsc::Receiver<crate::containment::egress::event::Event>,
    )>,
}

/// The destinations a session's subprocesses may reach: `capabilities.network.allow` less
/// every rule that covers the inference endpoint. The endpoint is the driver's destination;
/// a shell command reaching it could send the workdir to the model provider under a key of
/// its own.
pub fn subprocess_rules(m: &Manifest) -> Vec<crate::manifest::netrule::NetRule> {
    let endpoint = m.inference.as_ref().and_then(|i| i.endpoint.as_deref());
    m.capabilities
        .network_allow
        .iter()
        .filter(|r| endpoint.is_none_or(|e| !super::agent::preflight::endpoint_covered(r, e)))
        .cloned()
        .collect()
}

/// Whether a capsule can start subprocesses: shell commands, or tool artifacts (which may
/// be native binaries).
pub fn subprocess_route(m: &Manifest) -> bool {
    m.capabilities.shell_allow.is_some()
        || m.artifacts
            .iter()
            .any(|a| a.runtime == crate::manifest::model::ArtifactRuntime::Tool)
}

/// A manifest and where its component comes from.
struct Source {
    manifest: Manifest,
    /// The directory `workdir/` goes under by default.
    base: PathBuf,
    component: Result<Vec<u8>, Diagnostic>,
    /// The archive a registry capsule came from (its packed files are its only files).
    archive: Option<Vec<u8>>,
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
    })
}

/// Run a capsule session; the exit code on success (0), a diagnostic otherwise.
pub fn run(opts: RunOptions) -> Result<u8, Diagnostic> {
    let source = match (&opts.capsule, &opts.capsule_version) {
        (Some(name), Some(version)) => {
            let root = opts.registry.clone().unwrap_or_else(registry::default_root);
            from_registry(&root, name, version)?
        }
        _ => from_path(opts.manifest.as_deref().unwrap_or(Path::new("murmur.yaml")))?,
    };
    let m = &source.manifest;
    let caps = &m.capabilities;
    // The host is probed once per session, before anything is staged, in a child process.
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let floor = caps.containment.max(opts.containment.unwrap_or_default());
    let report = crate::containment::probe::probe(&exe, floor);
    let decision =
        crate::containment::class::decide(caps.containment, opts.containment, caps.workdir_exec, &report);
    let (declared, achieved) = (decision.declared, decision.achieved);
    let sleeps =
        m.lifecycle.task_acceptance == TaskAcceptance::Queue && m.lifecycle.after_task == AfterTask::Sleep;
    let session_id = session::new_session_id()?;
    let records_root = session::records_root().ok_or_else(|| {
        Diagnostic::new(
            code::IO_READ,
            "MURMUR_RECORDS_DIR",
            "neither MURMUR_RECORDS_DIR nor HOME is set: there is nowhere to keep the session's records",
        )
    })?;
    let plan = Plan::new(
        &source.base,
        opts.workdir.as_deref(),
        &session_id,
        caps.filesystem_scope.as_deref(),
        &records_root,
    );
    let env_present: Vec<(String, String)> = caps
        .env_allow
        .iter()
        .filter(|n| !super::explain::IDENTITY_VARS.contains(&n.as_str()))
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect();
    let scope = |preopen: String| Scope {
        manifest: m,
        declared,
        achieved,
        preopen,
        env_present: env_present.iter().map(|(k, _)| k.clone()).collect(),
    };
    if opts.explain {
        let s = scope(plan.preopen().display().to_string());
        print!("{}", if opts.json { s.to_json() } else { s.to_text() });
        return Ok(0);
    }
    // An agent that can start subprocesses gets the session's network namespace and egress
    // relay before the floor is checked: a host that cannot make it refuses the capsule
    // whatever the class (E-CAP-005).
    let egress = if m.inference.is_some() && subprocess_route(m) {
        Some(crate::containment::egress::start(&exe, &subprocess_rules(m))?)
    } else {
        None
    };
    if let Some(refusal) = decision.refusal_for(caps.unix_sockets) {
        return Err(refusal);
    }
    if let Some(w) = delegation::lifecycle_warning(m) {
        eprintln!("{w}");
    }
    // E-RUN-020 and E-RUN-019 before anything of the session is made.
    let process_env = |k: &str| std::env::var(k).ok();
    let standing = delegation::registration::settle(m, &session_id, &process_env)?;
    if m.inference.is_some() {
        let registry = opts.registry.clone().unwrap_or_else(registry::default_root);
        let grants_json = scope(plan.preopen().display().to_string()).grants();
        return super::agent::run(Prelude {
            opts: &opts,
            manifest: m,
            base: &source.base,
            archive: source.archive.as_deref(),
            registry: &registry,
            plan,
            task: opts.task.as_deref(),
            session_id: &session_id,
            declared,
            achieved,
            landlock_abi: report.landlock_abi,
            sleeps,
            env_present: &env_present,
            grants_json,
            standing,
            egress,
        });
    }
    let component_bytes = source.component?;
    // SIGTERM and SIGINT are taken by the session's signal thread (never the default
    // action), so a session that is waiting or running ends with its trace closed.
    crate::signals::block_termination()
        .map_err(|e| Diagnostic::new(code::RUN_TRAP, "", format!("cannot block SIGTERM/SIGINT: {e}")))?;
    export_roots(&plan, m)?;
    let layout = plan.create()?;
    if let Some(task) = &opts.task {
        session::write_task(&layout.work, task)?;
    }
    let started = Instant::now();
    let mut bootstrap = Bootstrap(layout.records_dir.append("logs/bootstrap.log").ok());
    let sha = registry::sha256_hex(&component_bytes);
    let engine = wasm::engine()
        .map_err(|e| Diagnostic::new(code::RUN_COMPONENT, "", format!("cannot configure wasmtime: {e}")))?;
    let cache_dir = cache::default_dir();
    let (component, got) =
        cache::load(&engine, cache_dir.as_deref(), &component_bytes, &sha).map_err(|e| {
            Diagnostic::new(
                code::RUN_COMPONENT,
                "",
                format!("the component is not a valid WebAssembly component: {e:#}"),
            )
        })?;
    bootstrap.line(&format!("component sha256 {sha}: {got:?}"));
    bootstrap.line(&format!(
        "containment declared {}, achieved {}",
        declared.as_str(),
        achieved.as_str()
    ));
    // The file task: task.md when there is one; under `none` the component runs once even
    // without it (it may need no task).
    let file_task = match layout.work.read("task.md", lifecycle::MAX_TASK_BYTES) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(_) if m.lifecycle.task_acceptance == TaskAcceptance::None => Some(String::new()),
        Err(_) => None,
    };
    let (idle, idle_warning) = lifecycle::idle_wait();
    if let Some(w) = idle_warning {
        eprintln!("{w}");
        bootstrap.line(&w);
    }
    let stop = Arc::new(AtomicI32::new(0));
    let life = Lifecycle::new(m, file_task.as_deref(), idle, stop.clone());
    let bound = door::bind(m.internal_port)?;
    let url = bound.url();
    let trace_path = layout.records.join("trace.jsonl");
    let trace_file = layout
        .records_dir
        .append("trace.jsonl")
        .map_err(|e| io_err(&trace_path, e.into()))?;
    let mut trace = Trace::new(trace_file, &session_id);
    let s = scope(layout.preopen.display().to_string());
    let mut start = json!({
        "capsule_name": m.name,
        "capsule_version": m.version,
        "containment_declared": declared.as_str(),
        "containment_achieved": achieved.as_str(),
        "workdir_exec": caps.workdir_exec,
        "effective_grants": s.grants(),
    });
    delegation::session_start_fields(standing.spawner.as_ref(), &mut start);
    trace
        .event("session_start", start)
        .map_err(|e| trace_err(&trace_path, e))?;

    let mut env = env_present.clone();
    env.push(("MURMUR_CAPSULE_NAME".into(), m.name.clone()));
    env.push(("MURMUR_CAPSULE_VERSION".into(), m.version.clone()));
    env.push(("MURMUR_SESSION_ID".into(), session_id.clone()));
    env.push(("MURMUR_CAPSULE_URL".into(), url.clone()));
    let sink = |name: &str| {
        let rel = format!("logs/{name}");
        let file = layout
            .records_dir
            .append(&rel)
            .map_err(|e| io_err(&layout.records.join(&rel), e.into()))?;
        wasm::sink::Sink::new(file, wasm::sink::LOG_CAP)
            .map_err(|e| io_err(&layout.records.join("logs").join(name), e))
    };
    let (out_sink, err_sink) = (sink("guest-stdout.log")?, sink("guest-stderr.log")?);
    let door = bound.open(door::Setup {
        manifest: m,
        tools: Vec::new(),
        tasks: life.tasks.clone(),
        session_id: &session_id,
        work: door_workdir(&layout)?,
        class: achieved,
        trace: trace.try_clone().ok(),
        peer_key: peer_key(m)?,
    })?;
    announce(&opts, bound_port(&url), &session_id, m, &layout);
    let runner = component::Runner {
        engine: &engine,
        component: &component,
        layout: &layout,
        env: &env,
        caps,
        stdout: &out_sink.write_end,
        stderr: &err_sink.write_end,
    };
    let ended = component::serve(life, &runner, &mut trace, &mut bootstrap, stop.clone());
    // The guest's stores (holding the pipes' write ends) are gone: the copiers end.
    for (name, s) in [("stdout", out_sink), ("stderr", err_sink)] {
        match s.finish() {
            Ok(n) if n > wasm::sink::LOG_CAP => bootstrap.line(&format!(
                "guest {name}: {n} bytes, the first {} kept",
                wasm::sink::LOG_CAP
            )),
            Ok(_) => {}
            Err(e) => bootstrap.line(&format!("guest {name}: log copy failed: {e}")),
        }
    }
    let end = match ended {
        Ok(end) => end,
        Err(d) => {
            let _ = trace.event(
                "session_end",
                json!({"exit_status": "failed", "duration_ms": ms(started), "error": d.message}),
            );
            door.close();
            return Err(d);
        }
    };
    delegation::finish(
        standing,
        &delegation::Ended {
            manifest: m,
            session_id: &session_id,
            ok: end.exit_status() == "ok",
            signalled: stop.load(std::sync::atomic::Ordering::SeqCst) != 0,
            records: &layout.records_dir,
            work: &layout.work,
            workdir: &layout.workdir,
            duration_ms: ms(started),
        },
    );
    let mut fields =
        json!({"exit_status": end.exit_status(), "duration_ms": ms(started), "tasks": end.tasks});
    if let Some((kind, _)) = &end.trapped {
        fields["trap_kind"] = kind.as_str().into();
    }
    trace
        .event("session_end", fields)
        .map_err(|e| trace_err(&trace_path, e))?;
    door.close();
    if !opts.json {
        println!("status:  {}", end.status_word());
    }
    end.into_exit()
}

/// E-CAP-007, before anything of the session is made. A workdir that does not exist yet
/// holds no root, let alone a symlinked one.
pub(crate) fn export_roots(plan: &Plan, m: &Manifest) -> Result<(), Diagnostic> {
    match crate::fsx::Dir::open(&plan.preopen()) {
        Ok(work) => crate::resources::check_export_roots(m, &work),
        Err(_) => Ok(()),
    }
}

/// The door's own handle on the accessible workdir, for `/resources/`.
pub(crate) fn door_workdir(layout: &session::Layout) -> Result<crate::fsx::Dir, Diagnostic> {
    layout.preopen_dir.try_clone().map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            layout.preopen.display().to_string(),
            format!("cannot hold the workdir for the resource plane: {e}"),
        )
    })
}

/// The peer plane's minting key: 32 random bytes, made only when `exports.peer_files` is
/// declared, held in memory and overwritten when the last holder drops it.
pub(crate) fn peer_key(m: &Manifest) -> Result<Option<Arc<crate::token::Key>>, Diagnostic> {
    if m.exports.peer_files.is_none() {
        return Ok(None);
    }
    crate::token::Key::generate_shared().map(Some).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "",
            format!("cannot make the peer plane's key: {e}"),
        )
    })
}

fn trace_err(path: &Path, e: std::io::Error) -> Diagnostic {
    Diagnostic::new(
        code::RUN_AGENT_LOOP,
        "",
        format!("cannot write {}: {e}", path.display()),
    )
}

fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

fn bound_port(url: &str) -> &str {
    url.trim_start_matches("http://")
}

pub(crate) fn announce(
    opts: &RunOptions,
    hostport: &str,
    session_id: &str,
    m: &Manifest,
    layout: &session::Layout,
) {
    let mut out = std::io::stdout().lock();
    if opts.json {
        // Written by hand so the keys keep the documented order.
        let q = |v: &str| serde_json::Value::from(v).to_string();
        let _ = writeln!(
            out,
            "{{\"url\":{},\"pid\":{},\"session_id\":{},\"name\":{},\"version\":{},\"workdir\":{}}}",
            q(hostport),
            std::process::id(),
            q(session_id),
            q(&m.name),
            q(&m.version),
            q(&layout.workdir.display().to_string())
        );
    } else {
        let _ = writeln!(out, "murmur: url {hostport}\nsession: {session_id}");
        if opts.verbose {
            let _ = writeln!(
                out,
                "workdir: {}\nrecords: {}\nmanifest: {} v{}",
                layout.workdir.display(),
                layout.records.display(),
                m.name,
                m.version
            );
        }
    }
    let _ = out.flush();
}

/// `logs/bootstrap.log`: what the runtime decided, line by line; best effort.
pub(crate) struct Bootstrap(pub(crate) Option<std::fs::File>);

impl Bootstrap {
    pub(crate) fn line(&mut self, text: &str) {
        if let Some(f) = self.0.as_mut() {
            let _ = f.write_all(format!("{text}\n").as_bytes());
        }
    }
}
