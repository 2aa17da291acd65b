//! `mur run` for an agent capsule, from the settled containment decision to the exit code.

use super::driver::Driver;
use super::grants::{self, GuestGrants};
use super::hooks;
use super::murmur_md::{self, Inventory};
use super::preflight::{check, endpoint_covered, endpoint_origin, io_diag, key_of, no_driver, upstream_auth};
use super::shell::Runner;
use super::stage::{self, Payload, Resolved};
use super::task::{self, Session, Task, TaskEnd};
use super::tools::{self, Toolbox, WasmTool};
use crate::a2a::shapes::State;
use crate::agent::wire::ToolSpec;
use crate::containment::cgroup::Cgroup;
use crate::containment::class::Class;
use crate::diag::{code, Diagnostic};
use crate::manifest::model::ArtifactRuntime;
use crate::manifest::model::TaskAcceptance;
use crate::runtime::component;
use crate::runtime::delegation;
use crate::runtime::door;
use crate::runtime::door::tasks::Acceptance;
use crate::runtime::launch::{announce, Bootstrap, Prelude};
use crate::runtime::lifecycle::{self, Lifecycle, MAX_TASK_BYTES};
use crate::runtime::session;
use crate::runtime::trace::Trace;
use crate::runtime::wasm::hook::Event;
use crate::runtime::wasm::{self, cache, credential::Credential, sink::Sink, tool::Prepared};
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The time limit of one shell or native tool call.
pub const TOOL_TIME_LIMIT: Duration = Duration::from_secs(300);

/// Run an agent session.
pub fn run(p: Prelude<'_>) -> Result<u8, Diagnostic> {
    let m = p.manifest;
    let caps = &m.capabilities;
    let inf = m
        .inference
        .as_ref()
        .ok_or_else(|| no_driver("no inference block".into()))?;
    let (driver_name, prompt) = check(m, inf, p.base, p.archive)?;
    let engine = wasm::engine().map_err(|e| io_diag("cannot configure wasmtime", e))?;
    let cache_dir = cache::default_dir();
    let resolved =
        stage::resolve_all(p.registry, &m.artifacts, &engine, cache_dir.as_deref()).map_err(|d| {
            if d.code == code::REG_NOT_INSTALLED && d.key == driver_name {
                Diagnostic {
                    code: code::RUN_DRIVER_NOT_INSTALLED,
                    ..d
                }
            } else {
                d
            }
        })?;
    let key = key_of(inf);
    if key.is_some() {
        // The key is in this process's memory and, when it came from `${VAR}`, in its
        // initial environment: not dumpable means no core file and no /proc/<pid>/environ
        // or /proc/<pid>/mem for other processes of this uid without CAP_SYS_PTRACE (a
        // contained child has none; an advisory one run by root still could).
        let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    }
    let driver_art = resolved
        .iter()
        .find(|r| r.entry.name == driver_name)
        .ok_or_else(|| no_driver(format!("driver '{driver_name}' did not resolve")))?;
    let endpoint = inf.endpoint.clone().unwrap_or_default();
    let credential = match (&key, upstream_auth(driver_art)) {
        (None, _) => None,
        (Some((_, k)), Some((header, value))) => Some(
            Credential::new(&endpoint, &header, &value, k)
                .map_err(|e| no_driver(format!("driver {driver_name}: {e}")))?,
        ),
        (Some(_), None) => {
            let why =
                format!("inference.api_key is set but driver {driver_name} declares no upstream_auth header");
            return Err(no_driver(why));
        }
    };
    let Payload::Wasm(driver_component) = &driver_art.payload else {
        return Err(no_driver(format!(
            "driver {driver_name} has no WebAssembly component"
        )));
    };
    let driver_prepared = Prepared::new(&engine, driver_component, &driver_name).map_err(no_driver)?;
    // Every WASM tool is linked now, so one that does not fit the tool world is refused
    // before the session starts.
    let mut prepared_tools: Vec<Option<Prepared>> = Vec::new();
    for r in &resolved {
        prepared_tools.push(match (&r.payload, r.entry.runtime) {
            (Payload::Wasm(component), ArtifactRuntime::Tool) => {
                Some(Prepared::new(&engine, component, &r.entry.name).map_err(|e| {
                    Diagnostic::new(code::RUN_COMPONENT, format!("artifacts[{}]", r.entry.name), e)
                })?)
            }
            _ => None,
        });
    }
    let linked_hooks = hooks::load::link(&engine, &resolved)?;
    // Before any thread starts, so every thread inherits the mask: SIGTERM and SIGINT are
    // taken by sigwait (the signal thread below, or the sleep after the task), never by
    // the default action, so the session's children are killed and the trace ends.
    crate::signals::block_termination().map_err(|e| io_diag("cannot block SIGTERM/SIGINT", e))?;

    // The session starts here.
    crate::runtime::launch::export_roots(&p.plan, m)?;
    let layout = p.plan.create()?;
    if let Some(t) = p.task {
        session::write_task(&layout.work, t)?;
    }
    let started = Instant::now();
    let mut bootstrap = Bootstrap(layout.records_dir.append("logs/bootstrap.log").ok());
    bootstrap.line(&format!(
        "containment declared {}, achieved {}",
        p.declared.as_str(),
        p.achieved.as_str()
    ));
    for r in &resolved {
        bootstrap.line(&format!(
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
    let peer_key = crate::runtime::launch::peer_key(m)?;
    stage::stage(&layout.work, &layout.records_dir, &resolved)?;
    // The file task: task.md when there is one. Under `none` it is the only task there can
    // be, so its absence is an error; otherwise the session waits for an A2A task.
    let file_task = match layout.work.read("task.md", MAX_TASK_BYTES) {
        Ok(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Err(e) if m.lifecycle.task_acceptance == TaskAcceptance::None => {
            return Err(
                Diagnostic::new(code::RUN_AGENT_LOOP, "--task", format!("no task: {e}")).with_hint(
                    "give one with --task TEXT|FILE or put task.md in the workdir (lifecycle.task_acceptance: none takes no A2A task)",
                ),
            )
        }
        Err(_) => None,
    };
    let (idle, idle_warning) = lifecycle::idle_wait();
    if let Some(w) = idle_warning {
        eprintln!("{w}");
        bootstrap.line(&w);
    }
    let interrupted = Arc::new(AtomicI32::new(0));
    let mut life = Lifecycle::new(m, file_task.as_deref(), idle, interrupted.clone());
    let bound = door::bind(m.internal_port)?;
    let url = bound.url();
    let trace_file = layout
        .records_dir
        .append("trace.jsonl")
        .map_err(|e| io_diag("cannot open trace.jsonl", e))?;
    let mut trace = Trace::new(trace_file, p.session_id);
    let model = inf.model.clone().unwrap_or_default();

    // Identity, shared by the driver, WASM tools and every child.
    let identity = [
        ("MURMUR_CAPSULE_NAME".to_string(), m.name.clone()),
        ("MURMUR_CAPSULE_VERSION".to_string(), m.version.clone()),
        ("MURMUR_SESSION_ID".to_string(), p.session_id.to_string()),
        ("MURMUR_CAPSULE_URL".to_string(), url.clone()),
    ];
    // No guest and no child ever gets the key, whatever env.allow says.
    let key_var = key.as_ref().and_then(|(v, _)| v.clone());
    let key_value = key.as_ref().map(|(_, v)| v.clone());
    let safe = |n: &str, v: &str| {
        !crate::containment::host_env::credential_shaped(n)
            && Some(n) != key_var.as_deref()
            && key_value
                .as_deref()
                .is_none_or(|k| k.is_empty() || !v.contains(k))
    };
    let allowed_env: Vec<(String, String)> = p
        .env_present
        .iter()
        .filter(|(n, v)| safe(n, v))
        .cloned()
        .collect();

    // Guest logs: one capped sink per stream, shared by the driver and WASM tools.
    let sink = |name: &str| -> Result<Sink, Diagnostic> {
        let f = layout
            .records_dir
            .append(&format!("logs/{name}"))
            .map_err(|e| io_diag("cannot open a guest log", e))?;
        Sink::redacting(f, wasm::sink::LOG_CAP, key_value.as_deref().map(str::as_bytes))
            .map_err(|e| io_diag("cannot open a guest log", e))
    };
    let (out_sink, err_sink) = (
        sink("guest-stdout.log").map_err(|d| failed_start(&mut trace, &layout.work, d))?,
        sink("guest-stderr.log").map_err(|d| failed_start(&mut trace, &layout.work, d))?,
    );
    let mut warnings = Vec::new();
    let guest_grants = |r: &Resolved,
                        extra: &[(String, String)],
                        warnings: &mut Vec<Diagnostic>|
     -> Result<GuestGrants, Diagnostic> {
        let n = grants::narrow(
            &r.entry.name,
            caps,
            r.entry.capabilities.as_ref(),
            &layout.work,
            &layout.preopen_dir,
        )?;
        warnings.extend(n.warnings);
        let (limits, deadline) = grants::narrow_limits(&caps.limits, r.entry.capabilities.as_ref(), false);
        let mut env: Vec<(String, String)> = allowed_env
            .iter()
            .filter(|(k, _)| n.env_names.as_ref().is_none_or(|names| names.contains(k)))
            .cloned()
            .collect();
        env.extend(identity.iter().cloned());
        env.extend(extra.iter().filter(|(n, v)| safe(n, v)).cloned());
        Ok(GuestGrants {
            preopen: n.preopen,
            env,
            network_allow: n.network_allow,
            limits,
            deadline,
            stdout: out_sink
                .write_end
                .try_clone()
                .map_err(|e| io_diag("guest log", e))?,
            stderr: err_sink
                .write_end
                .try_clone()
                .map_err(|e| io_diag("guest log", e))?,
        })
    };
    let mut driver_env = vec![
        ("MURMUR_INFERENCE_TRANSPORT".to_string(), "http".to_string()),
        ("MURMUR_INFERENCE_ENDPOINT".to_string(), endpoint.clone()),
        ("MURMUR_INFERENCE_MODEL".to_string(), model.clone()),
        ("MURMUR_INFERENCE_DRIVER".to_string(), driver_name.clone()),
    ];
    if let Some(c) = &inf.driver_config {
        driver_env.push(("MURMUR_INFERENCE_DRIVER_CONFIG".to_string(), c.clone()));
    }
    let driver_grants = guest_grants(driver_art, &driver_env, &mut warnings)
        .map_err(|d| failed_start(&mut trace, &layout.work, d))?;
    if !driver_grants
        .network_allow
        .iter()
        .any(|r| endpoint_covered(r, &endpoint))
    {
        bootstrap.line(&format!(
            "warning: inference.endpoint {endpoint} is not in the driver's network allow-list: every model call will be refused"
        ));
    }
    if key.is_some()
        && driver_grants
            .network_allow
            .iter()
            .any(|r| !endpoint_covered(r, &endpoint) || r.port.is_none() || r.scheme.is_none())
    {
        let w = format!(
            "warning: driver {driver_name} sends the provider key to the endpoint and may also reach other hosts of capabilities.network.allow; \
             narrow it with capabilities.network.allow: [{}] on its artifacts entry",
            endpoint_origin(&endpoint)
        );
        eprintln!("{w}");
        bootstrap.line(&w);
    }
    let driver = Driver::new(
        &driver_name,
        driver_prepared,
        driver_grants,
        credential,
        key_value.clone(),
    );

    // Contained children: shell and native tools.
    let host_path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    let shell_allow = caps.shell_allow.clone().unwrap_or_default();
    let allowed: Vec<(String, Option<PathBuf>)> = shell_allow
        .iter()
        .map(|b| {
            (
                b.clone(),
                crate::containment::host_env::resolve_binary(b, &host_path),
            )
        })
        .collect();
    let workdir_real = std::fs::canonicalize(layout.preopen_dir.proc_path())
        .map_err(|e| io_diag("cannot resolve the workdir", e))
        .map_err(|d| failed_start(&mut trace, &layout.work, d))?;
    layout
        .preopen_dir
        .mkdirs(".home", 0o700)
        .map_err(|e| io_diag("cannot create the session home", e))
        .map_err(|d| failed_start(&mut trace, &layout.work, d))?;
    let mut child_env = vec![
        ("PATH".to_string(), host_path.clone()),
        (
            "HOME".to_string(),
            workdir_real.join(".home").display().to_string(),
        ),
    ];
    child_env.extend(
        allowed_env
            .iter()
            .filter(|(k, _)| k != "PATH" && k != "HOME")
            .cloned(),
    );
    child_env.extend(identity.iter().cloned());
    let cgroup = match Cgroup::create(p.session_id, crate::containment::host_env::PIDS_MAX) {
        Ok(c) => Some(c),
        Err(e) if p.achieved >= Class::Scoped => {
            let d = Diagnostic::new(
                code::RUN_CONTAINMENT,
                "",
                format!("cannot create the session's pids cgroup: {e}"),
            );
            return Err(failed_start(&mut trace, &layout.work, d));
        }
        Err(_) => None,
    };
    let allowed_paths: Vec<PathBuf> = allowed.iter().filter_map(|(_, p)| p.clone()).collect();
    let reads = crate::containment::runtime_dirs::read_grants(p.achieved, &allowed_paths, caps);
    warnings.extend(reads.warnings);
    let cgroup = cgroup.map(Arc::new);
    {
        // A signal stops the running task (its children killed) and ends a waiting session.
        let (flag, cg, tasks) = (interrupted.clone(), cgroup.clone(), life.tasks.clone());
        std::thread::spawn(move || {
            if let Ok(sig) = crate::signals::wait_for_termination() {
                flag.store(sig, Ordering::SeqCst);
                if let Some(cg) = cg {
                    cg.kill_all();
                }
                tasks.wake();
            }
        });
    }
    // Every decision of the egress relay goes to the trace as a `network` event.
    let net = match p.egress {
        Some((egress, events)) => {
            if p.achieved == Class::Advisory {
                warnings.push(crate::containment::egress::advisory_warning());
            }
            if let Ok(mut t) = trace.try_clone() {
                std::thread::spawn(move || {
                    for e in events {
                        let _ = t.event("network", e.to_json());
                    }
                });
            }
            Some(Arc::new(egress))
        }
        None => None,
    };
    let runner = Runner {
        class: p.achieved,
        landlock_abi: p.landlock_abi,
        allowed,
        workdir: workdir_real,
        held: layout.preopen_dir.try_clone().ok(),
        workdir_exec: caps.workdir_exec,
        unix_sockets: caps.unix_sockets,
        env: child_env,
        read_dirs: reads.paths,
        read_unlisted: reads.unlisted,
        cgroup,
        net,
        time_limit: TOOL_TIME_LIMIT,
        cancel: Arc::default(),
    };

    // Hooks: default-deny grants, then on-stage (its manifests feed the shell tools below).
    let (mut hook_set, hook_warnings, hook_notes) = hooks::load::grant(
        linked_hooks,
        &resolved,
        &hooks::load::Base {
            ceiling: caps,
            work: &layout.work,
            records: &layout.records_dir,
            identity: &identity,
            allowed_env: &allowed_env,
            stdout: &out_sink.write_end,
            stderr: &err_sink.write_end,
        },
    )
    .map_err(|d| failed_start(&mut trace, &layout.work, d))?;
    warnings.extend(hook_warnings);
    let staged = hooks::load::stage(&mut hook_set, &shell_allow, &layout.work);
    for n in hook_notes.iter().chain(&staged.notes) {
        bootstrap.line(n);
    }
    let staged_manifests = staged.manifests;
    // The tools, in the manifest's order, then the shell binaries.
    let mut toolbox = Toolbox::new(runner);
    // The peer plane's tools, offered first so that no artifact takes their names.
    if m.exports.peer_files.is_some() || caps.peer_fetch_allow.is_some() {
        let work = crate::runtime::launch::door_workdir(&layout)
            .map_err(|d| failed_start(&mut trace, &layout.work, d))?;
        toolbox.peer =
            super::peer::PeerTools::new(m, p.session_id, bound.port, work, p.achieved, peer_key.clone());
    }
    // The runtime's own tools (peer plane, delegation), offered before any artifact's.
    let mut runtime_specs = toolbox.peer.as_ref().map(|t| t.specs()).unwrap_or_default();
    // `delegate-task`, when the manifest names capsules it may spawn (it registered).
    if let (Some(reg), false) = (&p.standing.registration, caps.spawn_allow.is_empty()) {
        let tool = super::delegate::Delegate::new(delegation::launcher::Launcher::new(
            delegation::launcher::Parent {
                session_id: p.session_id.to_string(),
                stop: interrupted.clone(),
                door_url: format!("http://127.0.0.1:{}", bound.port),
                work: crate::runtime::launch::door_workdir(&layout)
                    .map_err(|d| failed_start(&mut trace, &layout.work, d))?,
                work_path: layout.preopen.clone(),
                registry: p.registry.to_path_buf(),
                env_allow: caps.env_allow.clone(),
                spawn_allow: caps.spawn_allow.clone(),
                deadline: delegation::deadline(m, &|k: &str| std::env::var(k).ok()),
                records_root: layout.records.parent().map(PathBuf::from).unwrap_or_default(),
            },
            reg.roost.clone(),
            reg.credential.clone(),
            delegation::watch::Watch::new(life.tasks.clone(), trace.try_clone().ok()),
        ));
        runtime_specs.push(tool.spec());
        toolbox.delegate = Some(tool);
    }
    for spec in &runtime_specs {
        toolbox.offer(spec.clone());
    }
    let mut listed: Vec<(String, &'static str, String)> = Vec::new();
    for (r, prepared) in resolved.iter().zip(prepared_tools) {
        let desc = tools::clean_description(r.own_str("description").unwrap_or(""));
        let params = r.input_schema().unwrap_or_else(tools::open_schema);
        let spec = ToolSpec {
            name: r.bare.clone(),
            description: desc.clone(),
            parameters: params,
        };
        match (&r.payload, r.entry.runtime) {
            (Payload::Native(_), ArtifactRuntime::Tool) => {
                toolbox
                    .natives
                    .push((r.bare.clone(), layout.records.join("bin").join(&r.bare)));
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
                let g = guest_grants(r, &[], &mut warnings)
                    .map_err(|d| failed_start(&mut trace, &layout.work, d))?;
                toolbox
                    .wasm
                    .push((r.bare.clone(), WasmTool { prepared, grants: g }));
                listed.push((r.bare.clone(), "wasm tool", desc));
                toolbox.offer(spec);
            }
            _ => {}
        }
    }
    for b in &shell_allow {
        // A manifest an on-stage hook wrote for this binary enriches its entry.
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
        toolbox.offer(ToolSpec {
            name: b.clone(),
            description,
            parameters,
        });
    }
    for w in &warnings {
        eprintln!("{w}");
        bootstrap.line(&w.to_string());
    }
    let listed_names: Vec<String> = listed.iter().map(|(n, _, _)| n.clone()).collect();
    listed.extend(
        runtime_specs
            .into_iter()
            .map(|s| (s.name, "runtime tool", s.description)),
    );
    let inventory = Inventory {
        name: &m.name,
        version: &m.version,
        session_id: p.session_id,
        url: &url,
        model: &model,
        max_tokens: inf.max_tokens,
        context_max_tokens: m.context_max_tokens,
        max_turns: inf.max_turns,
        containment: p.achieved.as_str(),
        tools: listed,
        shell: shell_allow.clone(),
    };
    layout
        .work
        .replace("MURMUR.md", murmur_md::render(&inventory).as_bytes())
        .map_err(|e| io_diag("cannot write MURMUR.md", e))
        .map_err(|d| failed_start(&mut trace, &layout.work, d))?;

    let tools_declared: Vec<&str> = toolbox.specs.iter().map(|s| s.name.as_str()).collect();
    let mut start = json!({
        "capsule_name": m.name,
        "capsule_version": m.version,
        "model": model,
        "max_turns": inf.max_turns,
        "tools_declared": tools_declared,
        "containment_declared": p.declared.as_str(),
        "containment_achieved": p.achieved.as_str(),
        "workdir_exec": caps.workdir_exec,
        "effective_grants": p.grants_json,
    });
    delegation::session_start_fields(p.standing.spawner.as_ref(), &mut start);
    trace
        .event("session_start", start)
        .map_err(|e| io_diag("cannot write trace.jsonl", e))
        .map_err(|d| failed_start(&mut trace, &layout.work, d))?;
    let door = bound
        .open(door::Setup {
            manifest: m,
            tools: listed_names,
            tasks: life.tasks.clone(),
            session_id: p.session_id,
            work: crate::runtime::launch::door_workdir(&layout)
                .map_err(|d| failed_start(&mut trace, &layout.work, d))?,
            class: p.achieved,
            trace: trace.try_clone().ok(),
            peer_key: peer_key.clone(),
        })
        .map_err(|d| failed_start(&mut trace, &layout.work, d))?;
    announce(
        p.opts,
        url.trim_start_matches("http://"),
        p.session_id,
        m,
        &layout,
    );

    let system = format!(
        "{}\n{}",
        super::identity_block(&m.name, &m.version, p.session_id, &url),
        prompt.as_deref().unwrap_or(super::DEFAULT_SYSTEM_PROMPT)
    );
    let signalled = interrupted.clone();
    let mut session = Session {
        driver,
        tools: toolbox,
        trace: &mut trace,
        records: &layout.records_dir,
        model,
        max_tokens: inf.max_tokens,
        max_turns: inf.max_turns,
        system,
        params: json!({}),
        totals: task::Totals::default(),
        notes: Vec::new(),
        broken: None,
        interrupted,
        hooks: hook_set,
        context_max_tokens: m.context_max_tokens,
        threshold: inf.compaction_threshold,
        max_task_reopens: inf.max_task_reopens,
        halted: false,
    };
    // On-stage ran before the trace began: its failures are traced now, after session_start.
    for f in staged.failures {
        session.trace_hook_failure(hooks::spec::Binding::Stage, f);
    }
    session.fire(hooks::spec::Binding::SessionStart, || Event::SessionStart);
    let mut last: Option<TaskEnd> = None;
    while let Some(taken) = life.next_task() {
        let task = Task {
            id: taken.id.clone(),
            context_id: taken.context_id.clone(),
            source: taken.source,
            trust: taken.origin.trust.clone(),
            text: taken.text.clone(),
            cancel: taken.cancel.clone(),
        };
        if taken.source == "a2a" {
            session.event("a2a_task_received", component::received(&taken));
            // Each A2A task's answer is its own: none is left from the one before.
            if let Err(e) = layout.work.remove_file("out/result.txt") {
                bootstrap.line(&format!("cannot remove out/result.txt: {e}"));
            }
        }
        let (end, _) = session.run_task(&task);
        let (end, wrote) = write_result(&layout.work, end, inf, &mut bootstrap);
        let state = match &end {
            TaskEnd::Done { .. } => State::Completed,
            TaskEnd::Canceled => State::Canceled,
            _ => State::Failed,
        };
        // out/result.txt is this task's only when it was written now (else it may be the
        // previous task's): otherwise the answer is what the runtime knows.
        let fallback = match &end {
            TaskEnd::Failed(e) => format!("error: {e}\n"),
            _ => "error: no result\n".to_string(),
        };
        life.finish(
            &taken,
            lifecycle::outcome(state, wrote.then_some(&layout.work), &fallback),
        );
        last = Some(end);
        if session.interrupted.load(Ordering::SeqCst) != 0 || session.broken.is_some() || session.halted {
            break;
        }
    }
    life.close();
    if last.is_none() {
        bootstrap.line("no task arrived: the session ends idle");
    }
    // How the last task ended, before a queue session's exit forgets it.
    let last_ok = matches!(last, Some(TaskEnd::Done { .. }));
    let queue = matches!(life.tasks.acceptance(), Acceptance::Queue(_));
    // A queue session's exit does not hang on its last task; others answer for their one.
    let end = match last {
        Some(end) if !queue => end,
        Some(TaskEnd::Done { text, truncated }) => TaskEnd::Done { text, truncated },
        _ => TaskEnd::Done {
            text: String::new(),
            truncated: false,
        },
    };
    // Children still running are ended with this session (recorded, posted to nobody).
    if let Some(d) = session.tools.delegate.as_ref() {
        d.launcher.watch.shutdown();
    }
    // on-session-end: after the task loop exits (and after the sleep of a queue session).
    session.fire(hooks::spec::Binding::SessionEnd, || Event::SessionEnd);
    let totals = session.totals;
    for n in std::mem::take(&mut session.notes) {
        bootstrap.line(&n);
    }
    let hook_set = std::mem::replace(&mut session.hooks, hooks::Hooks::none());
    drop(session);
    hook_set.finish(Duration::from_secs(5));
    let _ = trace.event(
        "session_end",
        json!({
            "exit_status": end.exit_status(),
            "duration_ms": task::ms(started),
            "turns": totals.turns,
            "tool_calls": totals.tool_calls,
            "shell_calls": totals.shell_calls,
            "input_tokens": totals.usage.input_tokens,
            "output_tokens": totals.usage.output_tokens,
        }),
    );
    door.close();
    delegation::finish(
        p.standing,
        &delegation::Ended {
            manifest: m,
            session_id: p.session_id,
            ok: last_ok,
            signalled: signalled.load(Ordering::SeqCst) != 0,
            records: &layout.records_dir,
            work: &layout.work,
            workdir: &layout.workdir,
            duration_ms: task::ms(started),
        },
    );
    for (name, s) in [("stdout", out_sink), ("stderr", err_sink)] {
        if let Ok(n) = s.finish() {
            if n > wasm::sink::LOG_CAP {
                bootstrap.line(&format!(
                    "guest {name}: {n} bytes, the first {} kept",
                    wasm::sink::LOG_CAP
                ));
            }
        }
    }
    let ok = matches!(end, TaskEnd::Done { .. });
    if !p.opts.json {
        println!("status:  {}", if ok { "ok" } else { "failed" });
    }
    match end {
        TaskEnd::Done { .. } => Ok(0),
        TaskEnd::MaxTurns => Err(Diagnostic::new(
            code::RUN_AGENT_LOOP,
            "inference.max_turns",
            format!(
                "the task reached inference.max_turns ({}) before the model finished",
                inf.max_turns
            ),
        )),
        TaskEnd::Failed(e) => Err(Diagnostic::new(code::RUN_AGENT_LOOP, "", e)),
        TaskEnd::Canceled => Err(Diagnostic::new(code::RUN_AGENT_LOOP, "", "the task was canceled")),
        TaskEnd::ReopenBudgetExhausted {
            reopens,
            out_of_turns,
        } => Err(Diagnostic::new(
            code::RUN_AGENT_LOOP,
            "inference.max_task_reopens",
            format!(
                "the task ended reopen_budget_exhausted: {}",
                exhausted(reopens, out_of_turns, inf.max_task_reopens, inf.max_turns)
            ),
        )),
    }
}

/// Write the task's answer (or why it has none) to `out/result.txt`, and whether it was
/// written; a failed write fails the task.
fn write_result(
    work: &crate::fsx::Dir,
    end: TaskEnd,
    inf: &crate::manifest::model::Inference,
    bootstrap: &mut Bootstrap,
) -> (TaskEnd, bool) {
    let result = match &end {
        TaskEnd::Done { text, truncated } => {
            if *truncated {
                bootstrap.line("the final answer was cut at inference.max_tokens");
            }
            format!("{text}\n")
        }
        TaskEnd::MaxTurns => format!(
            "error: the task reached inference.max_turns ({}) before the model finished\n",
            inf.max_turns
        ),
        TaskEnd::Failed(e) => format!("error: {e}\n"),
        TaskEnd::Canceled => "error: the task was canceled\n".to_string(),
        TaskEnd::ReopenBudgetExhausted {
            reopens,
            out_of_turns,
        } => format!(
            "error: {}\n",
            exhausted(*reopens, *out_of_turns, inf.max_task_reopens, inf.max_turns)
        ),
    };
    match work.replace("out/result.txt", result.as_bytes()) {
        Ok(()) => (end, true),
        Err(e) => {
            bootstrap.line(&format!("cannot write out/result.txt: {e}"));
            (
                TaskEnd::Failed(format!("cannot write out/result.txt: {e}")),
                false,
            )
        }
    }
}

/// Why a task ended `reopen_budget_exhausted`.
fn exhausted(reopens: u64, out_of_turns: bool, budget: u64, max_turns: u64) -> String {
    if out_of_turns {
        format!("a hook still asked to reopen the task after {reopens} reopen(s), but its turns ran out (inference.max_turns = {max_turns})")
    } else {
        format!("a hook still asked to reopen the task after {reopens} reopen(s), its whole budget (inference.max_task_reopens = {budget})")
    }
}

/// A session that started (its trace is open) but failed before its task ran: the trace
/// ends with `session_end` failed and `out/result.txt` says why, like any other failure.
fn failed_start(trace: &mut Trace, work: &crate::fsx::Dir, d: Diagnostic) -> Diagnostic {
    let _ = trace.event(
        "session_end",
        json!({"exit_status": "failed", "error": d.message, "turns": 0}),
    );
    let _ = work.replace("out/result.txt", format!("error: {}\n", d.message).as_bytes());
    d
}
