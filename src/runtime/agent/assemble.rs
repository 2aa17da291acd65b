//! The agent runner, built in named steps: [`prepare`] refuses what cannot run before any
//! session exists (E-RUN-005 driver, E-RUN-009 system prompt file, E-RUN-008 artifacts)
//! and links every component; [`assemble`], on the open session, stages the artifacts,
//! gives the guests their grants, builds the driver, the child policy of the shell and
//! native tools, the hooks, the toolbox and `MURMUR.md`, and hands the skeleton a runner.

use super::driver::Driver;
use super::grants::{self, GuestGrants};
use super::hooks;
use super::murmur_md::{self, Inventory};
use super::preflight::{check, endpoint_covered, endpoint_origin, io_diag, key_of, no_driver, upstream_auth};
use super::runner::AgentRunner;
use super::shell::Runner;
use super::spend::Meter;
use super::stage::{self, Payload, Resolved};
use super::task::{self, Session};
use super::tools::{self, Toolbox, WasmTool};
use crate::agent::wire::ToolSpec;
use crate::containment::child_policy::{safe_env, ChildPolicy, PolicyInputs, DEFAULT_PATH};
use crate::containment::class::Class;
use crate::containment::host_env::identity;
use crate::diag::{code, Diagnostic};
use crate::manifest::lock::Pin;
use crate::manifest::model::{ArtifactRuntime, Inference, Manifest};
use crate::runtime::delegation;
use crate::runtime::pinning::{ChildPins, Pinning};
use crate::runtime::serve::{door_workdir, peer_key, Opened as Launching, Start, TaskRunner};
use crate::runtime::wasm::credential::{Credential, Endpoint};
use crate::runtime::wasm::{self, cache, sink::Sink, tool::PreparedTool as Linked};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What `MURMUR.md` lists: each tool's name, kind and description.
type Listed = Vec<(String, &'static str, String)>;

/// The time limit of one shell or native tool call.
pub const TOOL_TIME_LIMIT: Duration = Duration::from_secs(300);

/// What an agent needs, checked and linked before its session exists.
pub struct PreparedAgent {
    driver_name: String,
    prompt: Option<String>,
    resolved: Vec<Resolved>,
    /// The provider key: its variable and its value.
    key: Option<(Option<String>, String)>,
    credential: Option<Credential>,
    /// `inference.endpoint`, when it parses (preflight has said so when it does not).
    endpoint: Option<Endpoint>,
    driver: Option<Linked>,
    /// Each resolved artifact's linked WASM tool, in the same order.
    tools: Vec<Option<Linked>>,
    hooks: Vec<hooks::load::Linked>,
    origin: Origin,
}

/// Where the session's artifacts and delegated children come from, and the lock that pins
/// the children.
pub struct Origin {
    registry: PathBuf,
    children: Option<Arc<ChildPins>>,
    /// `MURMUR_SPEND_CHAIN` for each child: the session ceilings it spends under.
    spend_chain: String,
}

impl PreparedAgent {
    /// Every resolved artifact as `murmur.lock` pins it.
    pub fn pins(&self) -> Vec<Pin> {
        pins_of(&self.resolved)
    }
}

/// Resolved artifacts as `murmur.lock` pins them.
fn pins_of(resolved: &[Resolved]) -> Vec<Pin> {
    resolved
        .iter()
        .map(|r| Pin {
            name: r.entry.name.clone(),
            version: r.entry.version.clone().unwrap_or_default(),
            sha256: r.sha256.clone(),
        })
        .collect()
}

/// Refuse what cannot run, and link every component, before the session starts.
pub fn prepare(
    m: &Manifest,
    base: &Path,
    archive: Option<&[u8]>,
    registry: &Path,
    pins: &Pinning,
) -> Result<PreparedAgent, Diagnostic> {
    let inf = m
        .inference
        .as_ref()
        .ok_or_else(|| no_driver("no inference block".into()))?;
    let (driver_name, prompt) = check(m, inf, base, archive)?;
    let engine = wasm::engine().map_err(|e| io_diag("cannot configure wasmtime", e))?;
    let resolved = resolve(m, &engine, registry, &driver_name, pins)?;
    let key = key_of(inf);
    if key.is_some() {
        // The key is in this process's memory and, when it came from `${VAR}`, in its
        // initial environment: not dumpable means no core file and no /proc/<pid>/environ
        // or /proc/<pid>/mem for other processes of this uid without CAP_SYS_PTRACE (a
        // contained child has none; an advisory one run by root still could).
        let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    }
    let driver_art = driver_of(&resolved, &driver_name)?;
    let credential = credential(inf, &key, driver_art, &driver_name)?;
    let endpoint = inf.endpoint.as_deref().and_then(|e| Endpoint::parse(e).ok());
    let Payload::Wasm(driver_component) = &driver_art.payload else {
        return Err(no_driver(format!(
            "driver {driver_name} has no WebAssembly component"
        )));
    };
    let driver = Linked::new(&engine, driver_component, &driver_name).map_err(no_driver)?;
    let tools = link_tools(&engine, &resolved)?;
    let hooks = hooks::load::link(&engine, &resolved)?;
    let children = pins.for_children(pins_of(&resolved))?.map(Arc::new);
    Ok(PreparedAgent {
        driver_name,
        prompt,
        resolved,
        key,
        credential,
        endpoint,
        driver: Some(driver),
        tools,
        hooks,
        origin: Origin {
            registry: registry.to_path_buf(),
            children,
            spend_chain: String::new(),
        },
    })
}

/// Every artifact from the registry; the driver missing is E-RUN-005.
fn resolve(
    m: &Manifest,
    engine: &wasmtime::Engine,
    registry: &Path,
    driver: &str,
    pins: &Pinning,
) -> Result<Vec<Resolved>, Diagnostic> {
    stage::resolve_all(
        registry,
        &m.artifacts,
        engine,
        cache::default_dir().as_deref(),
        pins,
    )
    .map_err(|d| {
        if d.code == code::REG_NOT_INSTALLED && d.key == driver {
            Diagnostic {
                code: code::RUN_DRIVER_NOT_INSTALLED,
                ..d
            }
        } else {
            d
        }
    })
}

fn driver_of<'a>(resolved: &'a [Resolved], name: &str) -> Result<&'a Resolved, Diagnostic> {
    resolved
        .iter()
        .find(|r| r.entry.name == name)
        .ok_or_else(|| no_driver(format!("driver '{name}' did not resolve")))
}

/// The provider credential the host attaches for the driver: a key needs the driver's
/// `upstream_auth` header.
fn credential(
    inf: &Inference,
    key: &Option<(Option<String>, String)>,
    driver: &Resolved,
    name: &str,
) -> Result<Option<Credential>, Diagnostic> {
    let endpoint = inf.endpoint.clone().unwrap_or_default();
    match (key, upstream_auth(driver)) {
        (None, _) => Ok(None),
        (Some((_, k)), Some((header, value))) => Credential::new(&endpoint, &header, &value, k)
            .map(Some)
            .map_err(|e| no_driver(format!("driver {name}: {e}"))),
        (Some(_), None) => Err(no_driver(format!(
            "inference.api_key is set but driver {name} declares no upstream_auth header"
        ))),
    }
}

/// Every WASM tool linked now, so one that does not fit the tool world is refused before
/// the session starts.
fn link_tools(engine: &wasmtime::Engine, resolved: &[Resolved]) -> Result<Vec<Option<Linked>>, Diagnostic> {
    resolved
        .iter()
        .map(|r| match (&r.payload, r.entry.runtime) {
            (Payload::Wasm(component), ArtifactRuntime::Tool) => {
                Linked::new(engine, component, &r.entry.name)
                    .map(Some)
                    .map_err(|e| {
                        Diagnostic::new(code::RUN_COMPONENT, format!("artifacts[{}]", r.entry.name), e)
                    })
            }
            _ => Ok(None),
        })
        .collect()
}

/// What the guests of the session (driver, WASM tools) share.
struct Guests {
    identity: Vec<(String, String)>,
    /// The `env.allow` variables no guest or child is kept from.
    allowed_env: Vec<(String, String)>,
    stdout: Sink,
    stderr: Sink,
    warnings: Vec<Diagnostic>,
}

impl Guests {
    /// One artifact's grants: the capsule's narrowed by its own `capabilities`.
    fn grants(
        &mut self,
        s: &Launching<'_>,
        r: &Resolved,
        extra: &[(String, String)],
        secret: Option<&(Option<String>, String)>,
    ) -> Result<GuestGrants, Diagnostic> {
        let layout = &s.layout;
        let caps = &s.manifest.capabilities;
        let n = grants::narrow(
            &r.entry.name,
            caps,
            r.entry.capabilities.as_ref(),
            &layout.work,
            &layout.preopen_dir,
        )?;
        self.warnings.extend(n.warnings);
        let (limits, deadline) = grants::narrow_limits(&caps.limits, r.entry.capabilities.as_ref(), false);
        let mut env: Vec<(String, String)> = self
            .allowed_env
            .iter()
            .filter(|(k, _)| n.env_names.as_ref().is_none_or(|names| names.contains(k)))
            .cloned()
            .collect();
        env.extend(self.identity.iter().cloned());
        let extra: Vec<(String, String)> = extra.to_vec();
        env.extend(safe_env(&extra, secret));
        let clone = |f: &std::fs::File| f.try_clone().map_err(|e| io_diag("guest log", e));
        Ok(GuestGrants {
            preopen: n.preopen,
            records: None,
            env,
            network_allow: n.network_allow,
            limits,
            deadline,
            stdout: clone(&self.stdout.write_end)?,
            stderr: clone(&self.stderr.write_end)?,
        })
    }
}

/// Build the agent's runner on the open session.
pub fn assemble(
    s: &mut Launching<'_>,
    mut p: PreparedAgent,
) -> Result<(Start, Box<dyn TaskRunner>), Diagnostic> {
    let peer_key = peer_key(s.manifest)?;
    stage_artifacts(s, &p)?;
    let mut guests = guests(s, &p)?;
    let driver = driver(s, &mut p, &mut guests)?;
    let runner = children(s, &p, &mut guests)?;
    let ((hook_set, stage_failures), staged) = hooks(s, &mut p, &mut guests)?;
    let meter = meter(s)?;
    p.origin.spend_chain = meter.child_chain();
    let linked = std::mem::take(&mut p.tools);
    let (toolbox, listed) = toolbox(
        s,
        linked,
        &p.resolved,
        &p.origin,
        runner,
        &staged.manifests,
        &mut guests,
        &peer_key,
    )?;
    for w in &guests.warnings {
        eprintln!("{w}");
        s.bootstrap.line(&w.to_string());
    }
    let tools: Vec<String> = listed.iter().map(|(n, _, _)| n.clone()).collect();
    write_murmur_md(s, listed)?;
    let fields = start_fields(s, &toolbox)?;
    let session = session(s, driver, toolbox, hook_set, p.prompt.as_deref(), meter)?;
    let inference = s
        .manifest
        .inference
        .clone()
        .ok_or_else(|| no_driver("no inference block".into()))?;
    let work = s
        .layout
        .work
        .try_clone()
        .map_err(|e| io_diag("cannot hold the workdir", e))?;
    let runner = AgentRunner::new(
        session,
        work,
        inference,
        stage_failures,
        guests.stdout,
        guests.stderr,
        s.life.tasks.clone(),
    );
    Ok((
        Start {
            fields,
            tools,
            peer_key,
        },
        Box::new(runner),
    ))
}

/// `session_start`'s fields for an agent.
fn start_fields(s: &Launching<'_>, toolbox: &Toolbox) -> Result<serde_json::Value, Diagnostic> {
    let m = s.manifest;
    let inf = m
        .inference
        .as_ref()
        .ok_or_else(|| no_driver("no inference block".into()))?;
    let tools_declared: Vec<&str> = toolbox.specs.iter().map(|sp| sp.name.as_str()).collect();
    Ok(json!({
        "capsule_name": m.name,
        "capsule_version": m.version,
        "model": inf.model.clone().unwrap_or_default(),
        "max_turns": inf.max_turns,
        "tools_declared": tools_declared,
        "containment_declared": s.declared.as_str(),
        "containment_achieved": s.achieved.as_str(),
        "workdir_exec": m.capabilities.workdir_exec,
        "effective_grants": s.grants_json,
    }))
}

/// Step: the loop's session: the driver, the tools, the hooks, the system prompt (the
/// identity block, then the manifest's prompt or the default) and the budgets.
fn session(
    s: &Launching<'_>,
    driver: Driver,
    tools: Toolbox,
    hooks: hooks::Hooks,
    prompt: Option<&str>,
    spend: Meter,
) -> Result<Session, Diagnostic> {
    let m = s.manifest;
    let inf = m
        .inference
        .as_ref()
        .ok_or_else(|| no_driver("no inference block".into()))?;
    let system = format!(
        "{}\n{}",
        super::identity_block(&m.name, &m.version, &s.session_id, &s.url),
        prompt.unwrap_or(super::DEFAULT_SYSTEM_PROMPT)
    );
    Ok(Session {
        driver,
        tools,
        trace: s.trace.clone(),
        records: s
            .layout
            .records_dir
            .try_clone()
            .map_err(|e| io_diag("cannot hold the records", e))?,
        model: inf.model.clone().unwrap_or_default(),
        max_tokens: inf.max_tokens,
        max_turns: inf.max_turns,
        system,
        params: json!({}),
        totals: task::Totals::default(),
        notes: Vec::new(),
        broken: None,
        interrupted: s.stop.clone(),
        hooks,
        context_max_tokens: m.context_max_tokens,
        threshold: inf.compaction_threshold,
        max_task_reopens: inf.max_task_reopens,
        halted: false,
        spend,
        spent: false,
        person: super::person::Person::of(m, &s.life.tasks),
    })
}

/// Step: the spend meter: `inference.max_session_tokens`, the ceilings of the sessions this
/// one was delegated from (`MURMUR_SPEND_CHAIN`), the user's per-day ceiling (its config
/// file) and the user's ledger.
fn meter(s: &Launching<'_>) -> Result<Meter, Diagnostic> {
    let own = s
        .manifest
        .inference
        .as_ref()
        .map_or(crate::spend::DEFAULT_SESSION_TOKENS, |i| i.max_session_tokens);
    let machine = crate::spend::machine_ceiling()
        .map_err(|e| Diagnostic::new(code::MAN_INVALID, "spend.machine_tokens_per_day", e))?;
    let chain = std::env::var(crate::spend::CHAIN_VAR).ok();
    Meter::new(
        &s.session_id,
        own,
        chain.as_deref(),
        &machine,
        crate::spend::user_store(),
    )
    .map_err(|e| Diagnostic::new(code::RUN_SPAWNER, crate::spend::CHAIN_VAR, e))
}

/// Step: each artifact's hash in the bootstrap log, then every artifact staged.
fn stage_artifacts(s: &mut Launching<'_>, p: &PreparedAgent) -> Result<(), Diagnostic> {
    for r in &p.resolved {
        s.bootstrap.line(&format!(
            "artifact {}@{} ({}) sha256 {}{}",
            r.entry.name,
            r.entry.version.as_deref().unwrap_or(""),
            r.entry.runtime.as_str(),
            r.sha256,
            r.compiled
                .as_ref()
                .map(|c| format!(": {c:?}"))
                .unwrap_or_default()
        ));
    }
    stage::stage(&s.layout.work, &s.layout.records_dir, &p.resolved)
}

/// Step: what every guest shares: the identity, the `env.allow` variables that are not
/// the key's, and one capped (key-redacting) log sink per stream.
fn guests(s: &Launching<'_>, p: &PreparedAgent) -> Result<Guests, Diagnostic> {
    let o = s;
    let key_value = p.key.as_ref().map(|(_, v)| v.clone());
    let sink = |name: &str| -> Result<Sink, Diagnostic> {
        let f = o
            .layout
            .records_dir
            .append(&format!("logs/{name}"))
            .map_err(|e| io_diag("cannot open a guest log", e))?;
        let watched = o.trace.health().watch(&format!("logs/{name}"));
        Sink::redacting(
            f,
            wasm::sink::LOG_CAP,
            key_value.as_deref().map(str::as_bytes),
            watched,
        )
        .map_err(|e| io_diag("cannot open a guest log", e))
    };
    Ok(Guests {
        identity: identity(&o.manifest.name, &o.manifest.version, &o.session_id, &o.url),
        allowed_env: safe_env(&s.env_present, p.key.as_ref()),
        stdout: sink("guest-stdout.log")?,
        stderr: sink("guest-stderr.log")?,
        warnings: Vec::new(),
    })
}

/// Step: the driver, with its grants and the credential; a warning when the endpoint is
/// out of its reach or the key could travel elsewhere.
fn driver(s: &mut Launching<'_>, p: &mut PreparedAgent, guests: &mut Guests) -> Result<Driver, Diagnostic> {
    let inf = s
        .manifest
        .inference
        .as_ref()
        .ok_or_else(|| no_driver("no inference block".into()))?;
    let endpoint = inf.endpoint.clone().unwrap_or_default();
    let mut env = vec![
        ("MURMUR_INFERENCE_TRANSPORT".to_string(), "http".to_string()),
        ("MURMUR_INFERENCE_ENDPOINT".to_string(), endpoint.clone()),
        (
            "MURMUR_INFERENCE_MODEL".to_string(),
            inf.model.clone().unwrap_or_default(),
        ),
        ("MURMUR_INFERENCE_DRIVER".to_string(), p.driver_name.clone()),
    ];
    if let Some(c) = &inf.driver_config {
        env.push(("MURMUR_INFERENCE_DRIVER_CONFIG".to_string(), c.clone()));
    }
    let art = driver_of(&p.resolved, &p.driver_name)?;
    let g = guests.grants(s, art, &env, p.key.as_ref())?;
    if !g.network_allow.iter().any(|r| endpoint_covered(r, &endpoint)) {
        s.bootstrap.line(&format!(
            "warning: inference.endpoint {endpoint} is not in the driver's network allow-list: every model call will be refused"
        ));
    }
    let wide = g
        .network_allow
        .iter()
        .any(|r| !endpoint_covered(r, &endpoint) || r.port.is_none() || r.scheme.is_none());
    if p.key.is_some() && wide {
        let w = format!(
            "warning: driver {} sends the provider key to the endpoint and may also reach other hosts of capabilities.network.allow; \
             narrow it with capabilities.network.allow: [{}] on its artifacts entry",
            p.driver_name,
            endpoint_origin(&endpoint)
        );
        eprintln!("{w}");
        s.bootstrap.line(&w);
    }
    let linked = p
        .driver
        .take()
        .ok_or_else(|| no_driver(format!("driver {} was already built", p.driver_name)))?;
    Ok(Driver::new(
        &p.driver_name,
        linked,
        g,
        p.credential.take(),
        p.endpoint.take(),
        p.key.as_ref().map(|(_, v)| v.clone()),
    ))
}

/// Step: the child policy of the shell and native tools (the session's egress relay
/// traced as `network` events) and the runner of their calls.
fn children(s: &mut Launching<'_>, p: &PreparedAgent, guests: &mut Guests) -> Result<Runner, Diagnostic> {
    let net = match s.egress.take() {
        Some((egress, events)) => {
            if s.achieved == Class::Advisory {
                guests
                    .warnings
                    .push(crate::containment::egress::advisory_warning());
            }
            let mut t = s.trace.clone();
            std::thread::spawn(move || {
                for e in events {
                    let _ = t.event("network", e.to_json());
                }
            });
            Some(Arc::new(egress))
        }
        None => None,
    };
    let o = &*s;
    let (policy, warnings) = ChildPolicy::new(PolicyInputs {
        caps: &o.manifest.capabilities,
        class: o.achieved,
        landlock_abi: s.landlock_abi,
        netns: s.netns,
        pidns: s.pidns,
        workdir: &o.layout.preopen_dir,
        session_id: &o.session_id,
        identity: &identity(&o.manifest.name, &o.manifest.version, &o.session_id, &o.url),
        env_present: &s.env_present,
        secret: p.key.clone(),
        host_path: std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into()),
        net,
        home: None,
    })?;
    guests.warnings.extend(warnings);
    Ok(Runner {
        policy,
        time_limit: TOOL_TIME_LIMIT,
        cancel: Arc::default(),
        health: s.trace.health().clone(),
        starts: Default::default(),
    })
}

/// Step: hooks with default-deny grants, then on-stage (its manifests feed the shell
/// tools' specs); the on-stage failures are traced after `session_start`.
fn hooks(
    s: &mut Launching<'_>,
    p: &mut PreparedAgent,
    guests: &mut Guests,
) -> Result<((hooks::Hooks, Vec<hooks::Failure>), hooks::load::Staged), Diagnostic> {
    let o = &*s;
    let (mut set, warnings, notes) = hooks::load::grant(
        std::mem::take(&mut p.hooks),
        &p.resolved,
        &hooks::load::Base {
            ceiling: &o.manifest.capabilities,
            work: &o.layout.work,
            records: &o.layout.records_dir,
            health: o.trace.health(),
            identity: &guests.identity,
            allowed_env: &guests.allowed_env,
            secret: p.key.as_ref(),
            driver: &p.driver_name,
            stdout: &guests.stdout.write_end,
            stderr: &guests.stderr.write_end,
        },
    )?;
    guests.warnings.extend(warnings);
    let shell_allow = o.manifest.capabilities.shell_allow.clone().unwrap_or_default();
    let mut staged = hooks::load::stage(&mut set, &shell_allow, &o.layout.work);
    for n in notes.iter().chain(&staged.notes) {
        s.bootstrap.line(n);
    }
    let failures = std::mem::take(&mut staged.failures);
    Ok(((set, failures), staged))
}

/// Step: the tools in the manifest's order (the runtime's own first: the peer plane's and
/// `delegate-task`), then the shell binaries; and what `MURMUR.md` lists.
#[allow(clippy::too_many_arguments)]
fn toolbox(
    s: &mut Launching<'_>,
    linked: Vec<Option<Linked>>,
    resolved: &[Resolved],
    origin: &Origin,
    runner: Runner,
    staged_manifests: &[(String, String)],
    guests: &mut Guests,
    peer_key: &Option<Arc<crate::token::Key>>,
) -> Result<(Toolbox, Listed), Diagnostic> {
    let mut toolbox = Toolbox::new(runner);
    let mut runtime_specs = runtime_tools(s, &mut toolbox, origin, peer_key)?;
    for spec in &runtime_specs {
        toolbox.offer(spec.clone());
    }
    let mut listed: Listed = Vec::new();
    for (r, prepared) in resolved.iter().zip(linked) {
        let desc = tools::clean_description(r.own_str("description").unwrap_or(""));
        let spec = ToolSpec {
            name: r.bare.clone(),
            description: desc.clone(),
            parameters: r.input_schema().unwrap_or_else(tools::open_schema),
        };
        match (&r.payload, r.entry.runtime) {
            (Payload::Native(_), ArtifactRuntime::Tool) => {
                toolbox
                    .natives
                    .push((r.bare.clone(), s.layout.records.join("bin").join(&r.bare)));
                listed.push((r.bare.clone(), "native tool", desc));
                toolbox.offer(spec);
            }
            (Payload::Skill(text), _) => {
                toolbox.skills.push((r.bare.clone(), text.clone()));
                listed.push((r.bare.clone(), "skill", desc));
                toolbox.offer(spec);
            }
            (Payload::Wasm(_), ArtifactRuntime::Tool) => {
                let Some(prepared) = prepared else { continue };
                let g = guests.grants(s, r, &[], None)?;
                toolbox
                    .wasm
                    .push((r.bare.clone(), WasmTool { prepared, grants: g }));
                listed.push((r.bare.clone(), "wasm tool", desc));
                toolbox.offer(spec);
            }
            _ => {}
        }
    }
    for b in s.manifest.capabilities.shell_allow.iter().flatten() {
        toolbox.offer(shell_spec(b, staged_manifests));
    }
    listed.extend(
        runtime_specs
            .drain(..)
            .map(|sp| (sp.name, "runtime tool", sp.description)),
    );
    Ok((toolbox, listed))
}

/// The runtime's own tools: the peer plane's (when exports or peer_fetch are declared)
/// and `delegate-task` (when the manifest names capsules it may spawn and it registered).
fn runtime_tools(
    s: &mut Launching<'_>,
    toolbox: &mut Toolbox,
    origin: &Origin,
    peer_key: &Option<Arc<crate::token::Key>>,
) -> Result<Vec<ToolSpec>, Diagnostic> {
    let o = &*s;
    let m = o.manifest;
    let caps = &m.capabilities;
    let port = o.bound.as_ref().map(|b| b.port).unwrap_or_default();
    if m.exports.peer_files.is_some() || caps.peer_fetch_allow.is_some() {
        let work = door_workdir(&o.layout)?;
        toolbox.peer =
            super::peer::PeerTools::new(m, &o.session_id, port, work, o.achieved, peer_key.clone());
    }
    let mut specs = toolbox.peer.as_ref().map(|t| t.specs()).unwrap_or_default();
    if let (Some(reg), false) = (&o.standing.registration, caps.spawn_allow.is_empty()) {
        let tool = super::delegate::Delegate::new(delegation::launcher::Launcher::new(
            delegation::launcher::Parent {
                session_id: o.session_id.clone(),
                stop: o.stop.clone(),
                door_url: format!("http://127.0.0.1:{port}"),
                work: door_workdir(&o.layout)?,
                work_path: o.layout.preopen.clone(),
                registry: origin.registry.clone(),
                child_pins: origin.children.clone(),
                env_allow: caps.env_allow.clone(),
                spawn_allow: caps.spawn_allow.clone(),
                max_delegations: caps
                    .max_delegations
                    .unwrap_or(crate::manifest::model::DEFAULT_MAX_DELEGATIONS),
                deadline: delegation::deadline(m, &|k: &str| std::env::var(k).ok()),
                records_root: o.layout.records.parent().map(PathBuf::from).unwrap_or_default(),
                spend_chain: origin.spend_chain.clone(),
            },
            reg.roost.clone(),
            reg.credential.clone(),
            delegation::watch::Watch::new(o.life.tasks.clone(), Some(o.trace.clone())),
        ));
        specs.push(tool.spec());
        toolbox.delegate = Some(tool);
    }
    specs.extend(m.ask.map(|_| super::person::ask_spec()));
    Ok(specs)
}

/// A shell binary's spec: what an on-stage hook's manifest for it says, else the default.
fn shell_spec(b: &str, staged_manifests: &[(String, String)]) -> ToolSpec {
    let staged: Option<serde_yaml::Value> = staged_manifests
        .iter()
        .find(|(bin, _)| bin == b)
        .and_then(|(_, text)| serde_yaml::from_str(text).ok());
    let description = staged
        .as_ref()
        .and_then(|v| v.get("description"))
        .and_then(serde_yaml::Value::as_str)
        .map(tools::clean_description)
        .unwrap_or_else(|| tools::shell_description(b));
    let parameters = staged
        .as_ref()
        .and_then(|v| v.get("input_schema"))
        .and_then(|v| serde_json::to_value(v).ok())
        .filter(|v| v.is_object() && v.to_string().len() <= stage::MAX_SCHEMA_BYTES)
        .unwrap_or_else(|| tools::shell_schema(b));
    ToolSpec {
        name: b.to_string(),
        description,
        parameters,
    }
}

/// Step: `MURMUR.md`, the inventory the model reads.
fn write_murmur_md(s: &Launching<'_>, listed: Listed) -> Result<(), Diagnostic> {
    let o = s;
    let m = o.manifest;
    let inf = m
        .inference
        .as_ref()
        .ok_or_else(|| no_driver("no inference block".into()))?;
    let model = inf.model.clone().unwrap_or_default();
    let inventory = Inventory {
        name: &m.name,
        version: &m.version,
        session_id: &o.session_id,
        url: &o.url,
        model: &model,
        max_tokens: inf.max_tokens,
        context_max_tokens: m.context_max_tokens,
        max_turns: inf.max_turns,
        containment: o.achieved.as_str(),
        tools: listed,
        shell: m.capabilities.shell_allow.clone().unwrap_or_default(),
    };
    o.layout
        .work
        .replace("MURMUR.md", murmur_md::render(&inventory).as_bytes())
        .map_err(|e| io_diag("cannot write MURMUR.md", e))
}
