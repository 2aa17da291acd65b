//! From a YAML tree to a validated [`Manifest`]: every structural rule of NOTES.md, each
//! fault reported with its code and the dotted key it names.

use super::model::*;
use super::netrule::NetRule;
use super::read::{invalid, join, Node};
use super::{interp, units};
use crate::diag::{code, Diagnostic};
use serde_yaml::Value;

type R<T> = Result<T, Diagnostic>;

mod approvals;
mod door_auth;
mod entry_extras;
mod interpreter_runtime;
mod task_io;

/// Build the manifest from an already-interpolated tree. `api_key` is how the key was
/// written before interpolation (a variable name, or None for a literal).
pub fn manifest(root: &Value, api_key_var: Option<&str>, api_key_resolved: bool) -> R<Manifest> {
    let top = Node {
        value: root,
        path: "",
    };
    let name = required_identity(&top, "name")?;
    let version = required_identity(&top, "version")?;
    let artifacts = artifacts(&top)?;
    let capabilities = match top.mapping("capabilities")? {
        Some(v) => capabilities(Node {
            value: v,
            path: "capabilities",
        })?,
        None => Capabilities::default(),
    };
    let inference = match top.mapping("inference")? {
        Some(v) => Some(inference(
            Node {
                value: v,
                path: "inference",
            },
            api_key_var,
            api_key_resolved,
        )?),
        None => None,
    };
    let context_max_tokens = match top.mapping("context")? {
        Some(v) => Node {
            value: v,
            path: "context",
        }
        .positive("max_tokens", u64::from(u32::MAX))?,
        None => None,
    };
    let lifecycle = match top.mapping("lifecycle")? {
        Some(v) => lifecycle(Node {
            value: v,
            path: "lifecycle",
        })?,
        None => Lifecycle::default(),
    };
    let exports = match top.mapping("exports")? {
        Some(v) => exports(
            Node {
                value: v,
                path: "exports",
            },
            &lifecycle,
        )?,
        None => Exports::default(),
    };
    let internal_port = match top.mapping("network")? {
        Some(v) => Node {
            value: v,
            path: "network",
        }
        .positive("internal_port", u64::from(u16::MAX))?
        .map(|p| p as u16),
        None => None,
    };
    let requires_files = top.strings("requires_files")?.unwrap_or_default();
    let description = top.string("description")?;
    let packaged_as = top.string("runtime")?;
    let a2a = match top.mapping("a2a")? {
        Some(v) => task_io::parse(Node {
            value: v,
            path: "a2a",
        })?,
        None => TaskIo::default(),
    };
    if let Some(kind) = &packaged_as {
        if !["capsule", "tool", "driver", "hook", "skill"].contains(&kind.as_str()) {
            return Err(invalid(
                "runtime",
                format!("unknown value '{kind}' (expected capsule, tool, driver, hook or skill)"),
            ));
        }
    }
    let approvals = approvals::approvals(&top, &artifacts, &capabilities, inference.is_some())?;
    let ask = approvals::ask(&top)?;
    Ok(Manifest {
        approvals,
        ask,
        name,
        version,
        description,
        artifacts,
        capabilities,
        inference,
        context_max_tokens,
        lifecycle,
        exports,
        internal_port,
        requires_files,
        packaged_as,
        a2a,
    })
}

fn required_identity(top: &Node<'_>, key: &str) -> R<String> {
    let missing = || {
        Diagnostic::new(
            code::MAN_MISSING_FIELD,
            key,
            format!("murmur.yaml: missing required field '{key}'"),
        )
    };
    match top.raw(key) {
        None => Err(missing()),
        Some(Value::String(s)) if s.trim().is_empty() => Err(missing()),
        Some(Value::String(s)) => Ok(s.trim().to_string()),
        Some(_) => Err(invalid(key, "expected a string (quote it, e.g. '0.1.0')")),
    }
}

/// An artifact or capsule name: a bare name or `<scope>/<name>`, each part 1 to 100 of
/// `[a-z0-9-]` with no leading or trailing `-`.
pub fn name_error(name: &str) -> Option<String> {
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.len() <= 100
            && !p.starts_with('-')
            && !p.ends_with('-')
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    let parts: Vec<&str> = name.split('/').collect();
    if parts.len() <= 2 && parts.iter().all(|p| part_ok(p)) {
        None
    } else {
        Some(format!(
            "'{name}' is not a valid name (1-100 of a-z, 0-9 and '-', optionally '<scope>/<name>')"
        ))
    }
}

/// A relative path beneath the workdir, normalised ("./a//b/" is "a/b"; "" is the workdir).
pub fn relative_path(raw: &str) -> Result<String, String> {
    let s = raw.trim();
    if s.starts_with('/') || s.starts_with('\\') {
        return Err(format!("'{s}' is absolute; it must be relative to the workdir"));
    }
    if s.contains('\0') || s.contains('\\') {
        return Err(format!("'{}' contains a NUL or a backslash", s.escape_debug()));
    }
    if s.chars().any(char::is_control) {
        return Err(format!("'{}' contains a control character", s.escape_debug()));
    }
    let mut parts = Vec::new();
    for part in s.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(format!("'{s}' contains '..'; it must stay beneath the workdir")),
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

fn artifacts(top: &Node<'_>) -> R<Vec<Artifact>> {
    let Some(raw) = top.raw("artifacts") else {
        return Ok(Vec::new());
    };
    let Value::Sequence(items) = raw else {
        return Err(invalid("artifacts", "expected a list of artifact entries"));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let path = format!("artifacts[{i}]");
        if !item.is_mapping() {
            return Err(invalid(
                &path,
                "expected a mapping with name, version and runtime",
            ));
        }
        let node = Node {
            value: item,
            path: &path,
        };
        let name = match node.string("name")? {
            Some(n) if !n.trim().is_empty() => n.trim().to_string(),
            _ => return Err(invalid(&join(&path, "name"), "missing required field 'name'")),
        };
        if let Some(why) = name_error(&name) {
            return Err(invalid(&join(&path, "name"), why));
        }
        let runtime = match node.string("runtime")?.as_deref() {
            None | Some("tool") => ArtifactRuntime::Tool,
            Some("driver") => ArtifactRuntime::Driver,
            Some("hook") => ArtifactRuntime::Hook,
            Some("skill") => ArtifactRuntime::Skill,
            Some(w @ ("wasm" | "native")) => {
                return Err(invalid(
                    &join(&path, "runtime"),
                    format!("'{w}' is not an artifact runtime; use 'runtime: tool'"),
                ))
            }
            Some(other) => {
                return Err(invalid(
                    &join(&path, "runtime"),
                    format!("unknown value '{other}' (expected tool, driver, hook or skill)"),
                ))
            }
        };
        let version = node
            .string("version")?
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty());
        if version.is_none() && !node.has("source") {
            return Err(invalid(
                &join(&path, "version"),
                "missing required field 'version'",
            ));
        }
        let capabilities = match node.mapping("capabilities")? {
            Some(_) if runtime == ArtifactRuntime::Skill => {
                return Err(invalid(
                    &join(&path, "capabilities"),
                    "a skill artifact takes no capabilities",
                ))
            }
            Some(v) => Some(capabilities(Node {
                value: v,
                path: &join(&path, "capabilities"),
            })?),
            None => None,
        };
        if capabilities.as_ref().is_some_and(|c| c.door_auth.is_some()) {
            return Err(invalid(
                &join(&path, "capabilities.network.authentication"),
                "only the capsule's own capabilities may declare the door's authentication",
            ));
        }
        if out.iter().any(|a: &Artifact| a.name == name) {
            return Err(invalid(
                &join(&path, "name"),
                format!("'{name}' is declared twice"),
            ));
        }
        let config = entry_extras::config(&node)?;
        let records = entry_extras::records(&node, runtime)?;
        out.push(Artifact {
            name,
            version,
            runtime,
            capabilities,
            config,
            records,
        });
    }
    Ok(out)
}

fn net_rules(node: &Node<'_>, key: &str, bad_code: &'static str) -> R<Option<Vec<NetRule>>> {
    let path = join(node.path, key);
    let Some(entries) = node.strings(key)? else {
        return Ok(None);
    };
    let mut rules = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        match NetRule::parse(entry) {
            Ok(rule) => rules.push(rule),
            Err(why) if bad_code == code::CAP_NETWORK_ENTRY => {
                let at = format!("{path}[{i}]");
                return Err(Diagnostic::new(
                    bad_code,
                    &at,
                    format!("murmur.yaml: invalid network.allow entry '{entry}' at '{at}': {why}"),
                )
                .with_hint("use host, host:port, or http(s)://host[:port]"));
            }
            Err(why) => return Err(invalid(&format!("{path}[{i}]"), format!("'{entry}': {why}"))),
        }
    }
    Ok(Some(rules))
}

fn capabilities(node: Node<'_>) -> R<Capabilities> {
    let mut caps = Capabilities::default();
    let sub =
        |key: &str| -> R<Option<Node<'_>>> { Ok(node.mapping(key)?.map(|v| Node { value: v, path: "" })) };
    // Each block gets its own dotted path.
    let block = |key: &str| join(node.path, key);

    if let Some(n) = sub("network")? {
        let p = block("network");
        let n = Node { path: &p, ..n };
        caps.network_allow = net_rules(&n, "allow", code::CAP_NETWORK_ENTRY)?.unwrap_or_default();
        caps.unix_sockets = n.boolean("unix_sockets")?.unwrap_or(false);
        caps.door_auth = door_auth::parse(&n)?;
    }
    if let Some(n) = sub("peer_fetch")? {
        let p = block("peer_fetch");
        let n = Node { path: &p, ..n };
        match net_rules(&n, "allow", code::MAN_INVALID)? {
            Some(rules) if !rules.is_empty() => caps.peer_fetch_allow = Some(rules),
            _ => {
                return Err(invalid(
                    &join(&p, "allow"),
                    "must list at least one peer when peer_fetch is declared",
                ))
            }
        }
    }
    if let Some(n) = sub("shell")? {
        let p = block("shell");
        let n = Node { path: &p, ..n };
        let allow = n.strings("allow")?.unwrap_or_default();
        if allow.is_empty() {
            return Err(invalid(&join(&p, "allow"), "must contain at least one binary"));
        }
        for (i, bin) in allow.iter().enumerate() {
            let bare = !bin.is_empty()
                && bin != "."
                && bin != ".."
                && !bin.contains(['/', '\0'])
                && !bin.contains(char::is_whitespace);
            if !bare {
                return Err(invalid(
                    &format!("{p}.allow[{i}]"),
                    format!("'{}' is not a bare binary name", bin.escape_debug()),
                ));
            }
        }
        caps.interpreter_runtime = interpreter_runtime::parse(&n, &allow)?;
        caps.shell_allow = Some(allow);
    }
    if let Some(n) = sub("spawn")? {
        let p = block("spawn");
        let n = Node { path: &p, ..n };
        let allow = n.strings("allow")?.unwrap_or_default();
        for (i, name) in allow.iter().enumerate() {
            if let Some(why) = name_error(name) {
                return Err(invalid(&format!("{p}.allow[{i}]"), why));
            }
        }
        caps.spawn_allow = allow;
        caps.max_delegations = n.positive("max_delegations", 1_000_000)?;
    }
    if let Some(n) = sub("env")? {
        let p = block("env");
        let n = Node { path: &p, ..n };
        let allow = n.strings("allow")?.unwrap_or_default();
        for (i, var) in allow.iter().enumerate() {
            let ok = var
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
                && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !ok {
                return Err(invalid(
                    &format!("{p}.allow[{i}]"),
                    format!("'{var}' is not an environment variable name"),
                ));
            }
            // The runtime's own names (MURMUR_SPAWNER holds a delegation's id and the parent
            // door it reports to): never a guest's or a child's to be handed.
            if var.starts_with("MURMUR_") {
                return Err(invalid(
                    &format!("{p}.allow[{i}]"),
                    format!("'{var}': MURMUR_* names are the runtime's and are never passed to a guest or a command"),
                ));
            }
        }
        caps.env_allow = allow;
    }
    if let Some(n) = sub("filesystem")? {
        let p = block("filesystem");
        let n = Node { path: &p, ..n };
        if let Some(scope) = n.string("scope")? {
            let key = join(&p, "scope");
            let norm = relative_path(&scope).map_err(|why| {
                Diagnostic::new(code::CAP_SCOPE, &key, format!("murmur.yaml: '{key}' {why}"))
                    .with_hint("filesystem.scope names a directory beneath the workdir, e.g. 'data'")
            })?;
            caps.filesystem_scope = (!norm.is_empty()).then_some(norm);
        }
        caps.workdir_exec = n.boolean("workdir_exec")?.unwrap_or(false);
    }
    if let Some(n) = sub("state")? {
        let p = block("state");
        let n = Node { path: &p, ..n };
        let store = n.string("store")?;
        if let Some(s) = &store {
            if name_error(s).is_some() || s.contains('/') {
                return Err(invalid(
                    &join(&p, "store"),
                    format!("'{s}' is not a store name (a-z, 0-9 and '-')"),
                ));
            }
        }
        caps.state = Some(store);
    }
    if let Some(c) = node.string("containment")? {
        caps.containment = Containment::parse(&c).ok_or_else(|| {
            invalid(
                &block("containment"),
                format!("unknown class '{c}' (expected advisory, scoped or sealed)"),
            )
        })?;
    }
    if let Some(n) = sub("limits")? {
        let p = block("limits");
        let n = Node { path: &p, ..n };
        let l = &mut caps.limits;
        l.memory_bytes = n.positive("memory_bytes", u64::MAX)?.unwrap_or(l.memory_bytes);
        l.table_elements = n
            .positive("table_elements", u64::from(u32::MAX))?
            .unwrap_or(l.table_elements);
        l.instances = n
            .positive("instances", u64::from(u32::MAX))?
            .unwrap_or(l.instances);
        l.deadline_seconds = n.positive("deadline_seconds", 365 * 86_400)?;
    }
    if let Some(n) = sub("resources")? {
        let p = block("resources");
        let n = Node { path: &p, ..n };
        for key in [
            "max_processes",
            "max_open_files",
            "max_file_size_bytes",
            "cpu_seconds",
            "memory_bytes",
            "cgroup_pids_max",
        ] {
            n.positive(key, u64::MAX)?;
        }
    }
    Ok(caps)
}

fn is_loopback_host(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => return v6.split(']').next() == Some("::1"),
        None => authority.split(':').next().unwrap_or(""),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn inference(node: Node<'_>, api_key_var: Option<&str>, resolved: bool) -> R<Inference> {
    let p = node.path;
    let transport = match node.string("transport")?.as_deref() {
        None | Some("http") => Transport::Http,
        Some("process") => Transport::Process,
        Some(other) => {
            return Err(invalid(
                &join(p, "transport"),
                format!("unknown value '{other}' (expected http or process)"),
            ))
        }
    };
    let endpoint = node.string("endpoint")?;
    let model = node.string("model")?.filter(|m| !m.trim().is_empty());
    let driver = node.mapping("driver")?.map(|v| Node {
        value: v,
        path: "inference.driver",
    });
    let driver_artifact = match &driver {
        Some(d) => d.string("artifact")?,
        None => None,
    };
    if transport == Transport::Http {
        match &endpoint {
            None => return Err(invalid(&join(p, "endpoint"), "missing required field 'endpoint'")),
            Some(e) => {
                let authority = e
                    .split("://")
                    .nth(1)
                    .unwrap_or("")
                    .split('/')
                    .next()
                    .unwrap_or("");
                if authority.contains('@') {
                    return Err(invalid(
                        &join(p, "endpoint"),
                        format!("'{e}' must not carry userinfo ('@')"),
                    ));
                }
                let ok = match (e.strip_prefix("https://"), e.strip_prefix("http://")) {
                    (Some(rest), _) => !rest.is_empty(),
                    (None, Some(rest)) => is_loopback_host(rest.split('/').next().unwrap_or("")),
                    _ => false,
                };
                if !ok {
                    return Err(invalid(
                        &join(p, "endpoint"),
                        format!("'{e}' must be https://, or http:// to a loopback host"),
                    ));
                }
            }
        }
        if model.is_none() {
            return Err(invalid(&join(p, "model"), "missing required field 'model'"));
        }
        // A missing or undeclared driver is refused at launch (E-RUN-005), not here: `mur
        // build` packages such a manifest, and only `mur run` needs the driver.
    }
    let driver_config = match &driver {
        Some(d) => match d.raw("config") {
            None => None,
            Some(v @ Value::Mapping(_)) => {
                Some(serde_json::to_string(v).map_err(|e| invalid("inference.driver.config", e))?)
            }
            Some(_) => return Err(invalid("inference.driver.config", "expected a mapping")),
        },
        None => None,
    };
    let api_key = match (node.string("api_key")?, api_key_var) {
        (None, _) => None,
        (Some(_), Some(var)) if !resolved => Some(ApiKey::Unresolved { var: var.to_string() }),
        (Some(value), Some(var)) => Some(ApiKey::Resolved {
            var: var.to_string(),
            value,
        }),
        (Some(value), None) => Some(ApiKey::Literal(value)),
    };
    let system_prompt = node.string("system_prompt")?.map(|s| s.trim().to_string());
    let system_prompt_file = node.string("system_prompt_file")?;
    let system_prompt_artifact = node.string("system_prompt_artifact")?;
    let prompts = [&system_prompt, &system_prompt_file, &system_prompt_artifact]
        .iter()
        .filter(|s| s.is_some())
        .count();
    if prompts > 1 {
        return Err(invalid(
            &join(p, "system_prompt"),
            "system_prompt, system_prompt_file and system_prompt_artifact are mutually exclusive",
        ));
    }
    let max_tokens = node.positive("max_tokens", u64::from(u32::MAX))?;
    if max_tokens.is_some() && transport == Transport::Process {
        return Err(invalid(
            &join(p, "max_tokens"),
            "is not valid with transport: process",
        ));
    }
    let compaction_threshold = match node.mapping("compaction")? {
        Some(v) => {
            let c = Node {
                value: v,
                path: "inference.compaction",
            };
            match c.number("threshold")? {
                Some(t) if !(t > 0.0 && t <= 1.0) => {
                    return Err(invalid("inference.compaction.threshold", "must be in (0, 1]"))
                }
                Some(t) => t,
                None => DEFAULT_COMPACTION_THRESHOLD,
            }
        }
        None => DEFAULT_COMPACTION_THRESHOLD,
    };
    Ok(Inference {
        transport,
        endpoint,
        model,
        api_key,
        driver_artifact,
        driver_config,
        system_prompt,
        system_prompt_file,
        system_prompt_artifact,
        max_turns: node
            .positive("max_turns", u64::from(u32::MAX))?
            .unwrap_or(DEFAULT_MAX_TURNS),
        max_task_reopens: node
            .whole("max_task_reopens")?
            .unwrap_or(DEFAULT_MAX_TASK_REOPENS),
        max_tokens: max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
        max_session_tokens: node
            .positive("max_session_tokens", u64::MAX)?
            .unwrap_or(DEFAULT_MAX_SESSION_TOKENS),
        compaction_threshold,
    })
}

fn lifecycle(node: Node<'_>) -> R<Lifecycle> {
    let task_acceptance = match node.string("task_acceptance")?.as_deref() {
        None | Some("single") => TaskAcceptance::Single,
        Some("none") => TaskAcceptance::None,
        Some("queue") => TaskAcceptance::Queue,
        Some(other) => {
            return Err(invalid(
                "lifecycle.task_acceptance",
                format!("unknown value '{other}' (expected none, single or queue)"),
            ))
        }
    };
    let after_task = match node.string("after_task")?.as_deref() {
        None | Some("exit") => AfterTask::Exit,
        Some("sleep") => AfterTask::Sleep,
        Some(other) => {
            return Err(invalid(
                "lifecycle.after_task",
                format!("unknown value '{other}' (expected exit or sleep)"),
            ))
        }
    };
    let queue_depth = node.whole("queue_depth")?.unwrap_or(DEFAULT_QUEUE_DEPTH);
    if task_acceptance == TaskAcceptance::Queue && queue_depth == 0 {
        return Err(invalid(
            "lifecycle.queue_depth",
            "0 leaves task_acceptance: queue no room",
        ));
    }
    let delegation_deadline_secs = node
        .positive("delegation_deadline_secs", 365 * 86_400)?
        .unwrap_or(DEFAULT_DELEGATION_DEADLINE_SECS);
    let input_timeout_secs = node.positive("input_timeout_secs", 365 * 86_400)?;
    if let Some(c) = node.string("conversation")? {
        if c != "stateless" && c != "threaded" {
            return Err(invalid(
                "lifecycle.conversation",
                format!("unknown value '{c}' (expected stateless or threaded)"),
            ));
        }
    }
    Ok(Lifecycle {
        declared: true,
        task_acceptance,
        after_task,
        queue_depth,
        delegation_deadline_secs,
        input_timeout_secs,
    })
}

/// The export root, normalised, and as written.
fn export_root(node: &Node<'_>) -> R<(String, String)> {
    let key = join(node.path, "root");
    match node.string("root")? {
        None => Err(invalid(&key, "missing required field 'root'")),
        Some(root) => Ok((relative_path(&root).map_err(|why| invalid(&key, why))?, root)),
    }
}

fn export_bytes(node: &Node<'_>) -> R<u64> {
    match node.raw("max_bytes") {
        None => Ok(DEFAULT_EXPORT_MAX_BYTES),
        Some(v) => units::bytes(v).map_err(|why| invalid(&join(node.path, "max_bytes"), why)),
    }
}

fn exports(node: Node<'_>, lifecycle: &Lifecycle) -> R<Exports> {
    let mut out = Exports::default();
    if let Some(v) = node.mapping("files")? {
        let n = Node {
            value: v,
            path: "exports.files",
        };
        let root = export_root(&n)?;
        match n.string("mode")?.as_deref() {
            Some("read-only") => {}
            None => return Err(invalid("exports.files.mode", "missing required field 'mode'")),
            Some(other) => {
                return Err(invalid(
                    "exports.files.mode",
                    format!("'{other}' is not supported; the only mode is read-only"),
                ))
            }
        }
        out.files = Some(FileExport {
            root: root.0,
            root_written: root.1,
            max_bytes: export_bytes(&n)?,
        });
    }
    if let Some(v) = node.mapping("peer_files")? {
        let n = Node {
            value: v,
            path: "exports.peer_files",
        };
        let root = export_root(&n)?;
        let ttl = match n.raw("max_ttl") {
            None => None,
            Some(v) => Some(units::seconds(v).map_err(|why| invalid("exports.peer_files.max_ttl", why))?),
        };
        if lifecycle.after_task == AfterTask::Sleep && ttl.is_none_or(|t| t > MAX_SLEEPING_PEER_TTL_SECS) {
            let written = ttl.map_or("absent".to_string(), |t| format!("{t}s"));
            return Err(Diagnostic::new(
                code::CAP_PEER_TTL,
                "exports.peer_files.max_ttl",
                format!(
                    "murmur.yaml: exports.peer_files.max_ttl is {written}; a capsule with lifecycle.after_task: sleep must declare it, at most 15m"
                ),
            )
            .with_hint("a handle stays valid until the session ends; set max_ttl: 15m or less"));
        }
        out.peer_files = Some(PeerExport {
            root: root.0,
            root_written: root.1,
            max_ttl_secs: ttl.unwrap_or(DEFAULT_PEER_TTL_SECS),
            max_bytes: export_bytes(&n)?,
        });
    }
    Ok(out)
}

/// The variable `inference.api_key` references, if it is written as `${NAME}`.
pub fn api_key_reference(root: &Value) -> Option<String> {
    root.get("inference")?
        .get("api_key")?
        .as_str()
        .and_then(interp::reference)
        .map(str::to_string)
}
