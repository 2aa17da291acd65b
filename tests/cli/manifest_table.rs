//! A table of manifests: every key's happy path and every diagnostic, checked for the exact
//! code and the dotted key it names. A representative subset also runs through `mur build`.

use crate::common;

use murmur::manifest::{
    parse, AfterTask, ApiKey, ArtifactRuntime, Containment, Loaded, OnTimeout, Resolve, TaskAcceptance,
};
use murmur::resources::check_export_roots;
use std::process::Command;

const MUR: &str = env!("CARGO_BIN_EXE_mur");

fn env(name: &str) -> Option<String> {
    match name {
        "PROVIDER_KEY" => Some("sk-test-value".into()),
        "MODEL_NAME" => Some("model-from-env".into()),
        _ => None,
    }
}

fn runtime(yaml: &str) -> Result<Loaded, murmur::diag::Diagnostic> {
    parse(yaml, Resolve::All(&env))
}

const HEAD: &str = "name: cap\nversion: 0.1.0\n";

/// An agent capsule's artifacts (tool `t`, skill `s`, the driver), shell, spawn and model.
const AGENT: &str = "artifacts:\n  - {name: t, version: 1.0.0}\n  - {name: local/s, version: 1.0.0, runtime: skill}\n  - {name: drv, version: 1.0.0, runtime: driver}\ncapabilities: {shell: {allow: [rm, git]}, spawn: {allow: [worker]}}\ninference: {endpoint: 'http://127.0.0.1:8080', model: m, driver: {artifact: drv}}\n";

fn with_head(body: &str) -> String {
    format!("{HEAD}{body}")
}

type Check = fn(&Loaded);

enum Expect {
    Ok(Check),
    Err(&'static str, &'static str),
}

fn cases() -> Vec<(&'static str, String, Expect)> {
    use Expect::{Err, Ok};
    vec![
        ("minimal manifest gets every default", HEAD.to_string(), Ok(|l| {
            let m = &l.manifest;
            assert_eq!((m.name.as_str(), m.version.as_str()), ("cap", "0.1.0"));
            assert_eq!(m.capabilities.containment, Containment::Advisory);
            assert_eq!(m.capabilities.limits.memory_bytes, 536_870_912);
            assert_eq!(m.capabilities.limits.table_elements, 100_000);
            assert_eq!(m.capabilities.limits.instances, 1000);
            assert_eq!((m.capabilities.limits.deadline(), m.capabilities.limits.hook_deadline()), (600, 30));
            assert_eq!(m.lifecycle.task_acceptance, TaskAcceptance::Single);
            assert_eq!((m.lifecycle.queue_depth, m.lifecycle.delegation_deadline_secs), (1, 600));
            assert!(m.inference.is_none() && m.exports.files.is_none() && l.warnings.is_empty());
        })),
        ("artifact runtimes", with_head("artifacts:\n  - {name: t, version: 1.0.0}\n  - {name: d, version: 1.0.0, runtime: driver}\n  - {name: h, version: 1.0.0, runtime: hook, capabilities: {network: {allow: [x.org]}}}\n  - {name: s, version: 1.0.0, runtime: skill}\n"), Ok(|l| {
            let kinds: Vec<_> = l.manifest.artifacts.iter().map(|a| a.runtime).collect();
            assert_eq!(kinds, [ArtifactRuntime::Tool, ArtifactRuntime::Driver, ArtifactRuntime::Hook, ArtifactRuntime::Skill]);
            assert_eq!(l.manifest.artifacts[2].capabilities.as_ref().unwrap().network_allow[0].host, "x.org");
        })),
        ("network allow forms and unix sockets", with_head("capabilities:\n  network:\n    allow: [Example.com, 'api.x.org:8443', 'https://y.org', 'http://[::1]:9']\n    unix_sockets: true\n"), Ok(|l| {
            let rules: Vec<String> = l.manifest.capabilities.network_allow.iter().map(|r| r.to_string()).collect();
            assert_eq!(rules, ["example.com", "api.x.org:8443", "https://y.org:443", "http://[::1]:9"]);
            assert!(l.manifest.capabilities.unix_sockets);
        })),
        ("peer fetch allow", with_head("capabilities:\n  peer_fetch:\n    allow: ['localhost:41234']\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.peer_fetch_allow.as_ref().unwrap()[0].port, Some(41234));
        })),
        ("shell allow", with_head("capabilities:\n  shell:\n    allow: [git, python3]\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.shell_allow.as_deref().unwrap(), ["git", "python3"]);
        })),
        ("shell interpreter runtime", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime:\n      - binary: python3\n        dirs:\n          - {path: /opt/py/lib, list_dir: true}\n          - {path: /opt/py/share/, list_dir: false}\n"), Ok(|l| {
            let r = &l.manifest.capabilities.interpreter_runtime;
            assert_eq!(r.len(), 1);
            assert_eq!(r[0].binary, "python3");
            let dirs: Vec<(String, bool)> = r[0].dirs.iter().map(|d| (d.path.display().to_string(), d.list_dir)).collect();
            assert_eq!(dirs, [("/opt/py/lib".to_string(), true), ("/opt/py/share/".to_string(), false)]);
            assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        })),
        ("spawn allow bare and scoped", with_head("capabilities:\n  spawn:\n    allow: [worker-a, local/worker-b]\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.spawn_allow, ["worker-a", "local/worker-b"]);
        })),
        ("env allow", with_head("capabilities:\n  env:\n    allow: [LANG, MY_VAR_2]\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.env_allow, ["LANG", "MY_VAR_2"]);
        })),
        ("filesystem scope normalised and workdir_exec", with_head("capabilities:\n  filesystem:\n    scope: ./data//sub/\n    workdir_exec: true\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.filesystem_scope.as_deref(), Some("data/sub"));
            assert!(l.manifest.capabilities.workdir_exec);
        })),
        ("scope '.' is the whole workdir", with_head("capabilities:\n  filesystem: {scope: .}\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.filesystem_scope, None);
        })),
        ("state store named and defaulted", with_head("capabilities:\n  state: {store: notes}\nartifacts:\n  - {name: t, version: 1.0.0, capabilities: {state: {}}}\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.state, Some(Some("notes".into())));
            assert_eq!(l.manifest.artifacts[0].capabilities.as_ref().unwrap().state, Some(None));
        })),
        ("containment sealed", with_head("capabilities:\n  containment: sealed\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.containment, Containment::Sealed);
        })),
        ("limits", with_head("capabilities:\n  limits: {memory_bytes: 1048576, table_elements: 10, instances: 2, deadline_seconds: 5}\n"), Ok(|l| {
            let lim = l.manifest.capabilities.limits;
            assert_eq!((lim.memory_bytes, lim.table_elements, lim.instances, lim.deadline(), lim.hook_deadline()), (1_048_576, 10, 2, 5, 5));
        })),
        ("full inference block resolves the api key", with_head("artifacts:\n  - {name: drv, version: 1.0.0, runtime: driver}\ninference:\n  endpoint: https://api.example.com/v1\n  model: m-1\n  api_key: ${PROVIDER_KEY}\n  driver: {artifact: drv, config: {temperature: 0}}\n  max_turns: 4\n  max_task_reopens: 0\n  max_tokens: 1000\n  compaction: {threshold: 0.5}\n"), Ok(|l| {
            let i = l.manifest.inference.as_ref().unwrap();
            assert_eq!(i.api_key, Some(ApiKey::Resolved { var: "PROVIDER_KEY".into(), value: "sk-test-value".into() }));
            assert_eq!((i.max_turns, i.max_task_reopens, i.max_tokens, i.compaction_threshold), (4, 0, 1000, 0.5));
            assert_eq!(i.driver_config.as_deref(), Some(r#"{"temperature":0}"#));
            assert!(!format!("{i:?}").contains("sk-test-value"), "Debug must not print the key");
        })),
        ("inference defaults and loopback http endpoint", with_head("artifacts: [{name: drv, version: 1.0.0, runtime: driver}]\ninference: {endpoint: 'http://127.0.0.1:8080', model: '${MODEL_NAME}', driver: {artifact: drv}}\n"), Ok(|l| {
            let i = l.manifest.inference.as_ref().unwrap();
            assert_eq!(i.model.as_deref(), Some("model-from-env"));
            assert_eq!((i.max_turns, i.max_task_reopens, i.max_tokens, i.compaction_threshold), (10, 1, 8192, 0.98));
        })),
        ("approvals and ask", with_head(&format!("{AGENT}approvals:\n  tools: [t, s, share-file]\n  shell: [rm, 'git push *']\n  delegations: [worker]\n  timeout_secs: 60\n  on_timeout: approve\nask: {{timeout_secs: 90}}\n")), Ok(|l| {
            let a = l.manifest.approvals.as_ref().unwrap();
            assert_eq!(a.tools, ["t", "s", "share-file"]);
            let shell: Vec<_> = a.shell.iter().map(|r| (r.binary.as_str(), r.pattern.as_deref())).collect();
            assert_eq!(shell, [("rm", None), ("git", Some("push *"))]);
            assert_eq!((a.delegations.as_slice(), a.timeout_secs, a.on_timeout), (&["worker".to_string()][..], 60, OnTimeout::Approve));
            assert_eq!(l.manifest.ask.map(|a| a.timeout_secs), Some(90));
            assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        })),
        ("approvals and ask defaults", with_head(&format!("{AGENT}approvals: {{delegations: ['*']}}\nask: true\n")), Ok(|l| {
            let a = l.manifest.approvals.as_ref().unwrap();
            assert_eq!((a.timeout_secs, a.on_timeout), (300, OnTimeout::Deny));
            assert_eq!(l.manifest.ask.map(|a| a.timeout_secs), Some(600));
        })),
        ("ask false offers nothing", with_head(&format!("{AGENT}ask: false\n")), Ok(|l| {
            assert!(l.manifest.ask.is_none() && l.manifest.approvals.is_none());
        })),
        ("approvals without a model", with_head("capabilities: {shell: {allow: [rm]}}\napprovals: {shell: [rm]}\n"), Err("E-MAN-003", "approvals")),
        ("ask without a model: a WASM capsule's out/ask.txt", with_head("ask: {timeout_secs: 30}\n"), Ok(|l| {
            assert_eq!(l.manifest.ask.map(|a| a.timeout_secs), Some(30));
        })),
        ("ask not a flag or block", with_head(&format!("{AGENT}ask: yes please\n")), Err("E-MAN-003", "ask")),
        ("approvals naming nothing", with_head(&format!("{AGENT}approvals: {{timeout_secs: 5}}\n")), Err("E-MAN-003", "approvals")),
        ("approval of an undeclared tool", with_head(&format!("{AGENT}approvals: {{tools: [t, typo]}}\n")), Err("E-MAN-003", "approvals.tools[1]")),
        ("approval of delegate-task as a tool", with_head(&format!("{AGENT}approvals: {{tools: [delegate-task]}}\n")), Err("E-MAN-003", "approvals.tools[0]")),
        ("approval of a binary outside shell allow", with_head(&format!("{AGENT}approvals: {{shell: [rm, curl]}}\n")), Err("E-MAN-003", "approvals.shell[1]")),
        ("approval of an undeclared delegation", with_head(&format!("{AGENT}approvals: {{delegations: [other]}}\n")), Err("E-MAN-003", "approvals.delegations[0]")),
        ("approval timeout of zero", with_head(&format!("{AGENT}approvals: {{shell: [rm], timeout_secs: 0}}\n")), Err("E-MAN-003", "approvals.timeout_secs")),
        ("approval timeout past a day", with_head(&format!("{AGENT}approvals: {{shell: [rm], timeout_secs: 86401}}\n")), Err("E-MAN-003", "approvals.timeout_secs")),
        ("unknown on_timeout", with_head(&format!("{AGENT}approvals: {{shell: [rm], on_timeout: ask}}\n")), Err("E-MAN-003", "approvals.on_timeout")),
        ("ask timeout of zero", with_head(&format!("{AGENT}ask: {{timeout_secs: 0}}\n")), Err("E-MAN-003", "ask.timeout_secs")),
        ("unknown approvals key", with_head(&format!("{AGENT}approvals: {{shell: [rm], timeout: 5}}\n")), Ok(|l| {
            assert_eq!(l.warnings.iter().map(|w| w.key.as_str()).collect::<Vec<_>>(), ["approvals.timeout"]);
        })),
        ("context max tokens", with_head("context: {max_tokens: 64000}\n"), Ok(|l| {
            assert_eq!(l.manifest.context_max_tokens, Some(64000));
        })),
        ("queue lifecycle with a short peer ttl", with_head("lifecycle: {task_acceptance: queue, after_task: sleep, queue_depth: 3, delegation_deadline_secs: 60, input_timeout_secs: 30}\nexports:\n  peer_files: {root: share, max_ttl: 15m}\n"), Ok(|l| {
            let lc = &l.manifest.lifecycle;
            assert_eq!((lc.task_acceptance, lc.after_task, lc.queue_depth), (TaskAcceptance::Queue, AfterTask::Sleep, 3));
            assert_eq!((lc.delegation_deadline_secs, lc.input_timeout_secs), (60, Some(30)));
            assert_eq!(l.manifest.exports.peer_files.as_ref().unwrap().max_ttl_secs, 900);
        })),
        ("operator export with a suffixed size", with_head("exports:\n  files: {root: out/, mode: read-only, max_bytes: 2Mi}\n"), Ok(|l| {
            let f = l.manifest.exports.files.as_ref().unwrap();
            assert_eq!((f.root.as_str(), f.max_bytes), ("out", 2_097_152));
        })),
        ("operator export with a size in MiB", with_head("exports:\n  files: {root: out/, mode: read-only, max_bytes: 1MiB}\n"), Ok(|l| {
            assert_eq!(l.manifest.exports.files.as_ref().unwrap().max_bytes, 1_048_576);
        })),
        ("a2a block: kinds, media types, dirs, answer", with_head("a2a:\n  input: {parts: [file, data], media_types: ['image/*'], dir: inbox, max_bytes: 4Ki}\n  output: {dir: out/files}\n  answer: message\n"), Ok(|l| {
            let io = &l.manifest.a2a;
            assert!(!io.input.text && io.input.file && io.input.data && l.warnings.is_empty());
            assert_eq!((io.input.media_types.as_slice(), io.input.dir.as_str(), io.input.max_bytes), (&["image/*".to_string()][..], "inbox", 4096));
            assert_eq!(io.output.as_ref().map(|o| (o.dir.as_str(), o.max_bytes)), Some(("out/files", 512 << 10)));
            assert_eq!(io.answer, murmur::manifest::AnswerAs::Message);
        })),
        ("peer export defaults", with_head("exports:\n  peer_files: {root: out}\n"), Ok(|l| {
            let p = l.manifest.exports.peer_files.as_ref().unwrap();
            assert_eq!((p.max_ttl_secs, p.max_bytes), (3600, 10_485_760));
        })),
        ("internal port", with_head("network: {internal_port: 41234}\n"), Ok(|l| {
            assert_eq!(l.manifest.internal_port, Some(41234));
        })),
        ("unknown keys warn with the nearest known key", with_head("capabilties: {}\nlifecycle: {after_tsk: exit}\n"), Ok(|l| {
            let w: Vec<_> = l.warnings.iter().map(|w| (w.code, w.key.as_str(), w.hint.as_deref().unwrap_or(""))).collect();
            assert_eq!(w, [
                ("W-SEC-019", "capabilties", "the nearest known key is 'capabilities'"),
                ("W-SEC-019", "lifecycle.after_tsk", "the nearest known key is 'lifecycle.after_task'"),
            ]);
        })),
        ("a literal api key warns", with_head("artifacts: [{name: drv, version: 1.0.0, runtime: driver}]\ninference: {endpoint: 'https://a.b', model: m, api_key: sk-literal, driver: {artifact: drv}}\n"), Ok(|l| {
            assert_eq!(l.warnings.iter().map(|w| w.code).collect::<Vec<_>>(), ["W-SEC-004"]);
        })),
        ("missing name", "version: 0.1.0\n".to_string(), Err("E-MAN-001", "name")),
        ("blank version", "name: cap\nversion: '  '\n".to_string(), Err("E-MAN-001", "version")),
        ("version written as a number", "name: cap\nversion: 0.1\n".to_string(), Err("E-MAN-003", "version")),
        ("YAML syntax error", "name: cap\nversion: [0.1.0\n".to_string(), Err("E-MAN-002", "")),
        ("document is a list", "- name\n- version\n".to_string(), Err("E-MAN-003", "murmur.yaml")),
        ("bad network entry", with_head("capabilities:\n  network:\n    allow: [ok.org, 'ftp://x.org']\n"), Err("E-CAP-001", "capabilities.network.allow[1]")),
        ("network entry with a path", with_head("capabilities:\n  network:\n    allow: ['https://x.org/api']\n"), Err("E-CAP-001", "capabilities.network.allow[0]")),
        ("network entry with a wildcard", with_head("capabilities:\n  network:\n    allow: ['*.x.org']\n"), Err("E-CAP-001", "capabilities.network.allow[0]")),
        ("absolute scope", with_head("capabilities:\n  filesystem: {scope: /etc}\n"), Err("E-CAP-002", "capabilities.filesystem.scope")),
        ("escaping scope", with_head("capabilities:\n  filesystem: {scope: data/../../x}\n"), Err("E-CAP-002", "capabilities.filesystem.scope")),
        ("empty shell allow", with_head("capabilities:\n  shell: {allow: []}\n"), Err("E-MAN-003", "capabilities.shell.allow")),
        ("shell allow with a path", with_head("capabilities:\n  shell: {allow: [git, /bin/sh]}\n"), Err("E-MAN-003", "capabilities.shell.allow[1]")),
        ("interpreter runtime not a list", with_head("capabilities:\n  shell: {allow: [python3], interpreter_runtime: {binary: python3}}\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime")),
        ("interpreter runtime binary not allowed", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime: [{binary: node, dirs: [{path: /opt/n, list_dir: true}]}]\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime[0].binary")),
        ("interpreter runtime without binary", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime: [{dirs: [{path: /opt/n, list_dir: true}]}]\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime[0].binary")),
        ("interpreter runtime without dirs", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime: [{binary: python3}]\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime[0].dirs")),
        ("interpreter runtime relative path", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime: [{binary: python3, dirs: [{path: opt/py, list_dir: false}]}]\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime[0].dirs[0].path")),
        ("interpreter runtime dotdot path", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime: [{binary: python3, dirs: [{path: /opt/../etc, list_dir: false}]}]\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime[0].dirs[0].path")),
        ("interpreter runtime the root", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime: [{binary: python3, dirs: [{path: /, list_dir: false}]}]\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime[0].dirs[0].path")),
        ("interpreter runtime without list_dir", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime: [{binary: python3, dirs: [{path: /opt/py}]}]\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime[0].dirs[0].list_dir")),
        ("interpreter runtime list_dir not a boolean", with_head("capabilities:\n  shell:\n    allow: [python3]\n    interpreter_runtime: [{binary: python3, dirs: [{path: /opt/py, list_dir: yes please}]}]\n"), Err("E-MAN-003", "capabilities.shell.interpreter_runtime[0].dirs[0].list_dir")),
        ("peer fetch without entries", with_head("capabilities:\n  peer_fetch: {}\n"), Err("E-MAN-003", "capabilities.peer_fetch.allow")),
        ("unknown containment class", with_head("capabilities: {containment: strict}\n"), Err("E-MAN-003", "capabilities.containment")),
        ("zero memory limit", with_head("capabilities:\n  limits: {memory_bytes: 0}\n"), Err("E-MAN-003", "capabilities.limits.memory_bytes")),
        ("non-numeric instances", with_head("capabilities:\n  limits: {instances: many}\n"), Err("E-MAN-003", "capabilities.limits.instances")),
        ("spawn allow with a bad name", with_head("capabilities:\n  spawn: {allow: [Worker_A]}\n"), Err("E-MAN-003", "capabilities.spawn.allow[0]")),
        ("env allow with a bad name", with_head("capabilities:\n  env: {allow: [A-B]}\n"), Err("E-MAN-003", "capabilities.env.allow[0]")),
        ("env allow naming the runtime's MURMUR_SPAWNER", with_head("capabilities:\n  env: {allow: [LANG, MURMUR_SPAWNER]}\n"), Err("E-MAN-003", "capabilities.env.allow[1]")),
        ("spawn max_delegations", with_head("capabilities:\n  spawn: {allow: [w], max_delegations: 5}\n"), Ok(|l| {
            assert_eq!(l.manifest.capabilities.max_delegations, Some(5));
        })),
        ("spawn max_delegations of 0", with_head("capabilities:\n  spawn: {allow: [w], max_delegations: 0}\n"), Err("E-MAN-003", "capabilities.spawn.max_delegations")),
        ("capabilities not a mapping", with_head("capabilities: [network]\n"), Err("E-MAN-003", "capabilities")),
        ("artifact without a name", with_head("artifacts:\n  - {version: 1.0.0}\n"), Err("E-MAN-003", "artifacts[0].name")),
        ("artifact runtime wasm", with_head("artifacts:\n  - {name: t, version: 1.0.0, runtime: wasm}\n"), Err("E-MAN-003", "artifacts[0].runtime")),
        ("artifact without a version", with_head("artifacts:\n  - {name: t}\n"), Err("E-MAN-003", "artifacts[0].version")),
        ("skill with capabilities", with_head("artifacts:\n  - {name: s, version: 1.0.0, runtime: skill, capabilities: {}}\n"), Err("E-MAN-003", "artifacts[0].capabilities")),
        ("userinfo hiding a remote host behind localhost", with_head("artifacts: [{name: drv, version: 1.0.0, runtime: driver}]\ninference: {endpoint: 'http://localhost:80@evil.example/v1', model: m, driver: {artifact: drv}}\n"), Err("E-MAN-003", "inference.endpoint")),
        ("plain http to a remote endpoint", with_head("artifacts: [{name: drv, version: 1.0.0, runtime: driver}]\ninference: {endpoint: 'http://example.com', model: m, driver: {artifact: drv}}\n"), Err("E-MAN-003", "inference.endpoint")),
        ("inference without a model", with_head("artifacts: [{name: drv, version: 1.0.0, runtime: driver}]\ninference: {endpoint: 'https://a.b', driver: {artifact: drv}}\n"), Err("E-MAN-003", "inference.model")),
        ("compaction threshold above 1", with_head("inference: {transport: process, compaction: {threshold: 1.5}}\n"), Err("E-MAN-003", "inference.compaction.threshold")),
        ("zero max turns", with_head("inference: {transport: process, max_turns: 0}\n"), Err("E-MAN-003", "inference.max_turns")),
        ("two system prompts", with_head("inference: {transport: process, system_prompt: a, system_prompt_file: b.md}\n"), Err("E-MAN-003", "inference.system_prompt")),
        ("zero context tokens", with_head("context: {max_tokens: 0}\n"), Err("E-MAN-003", "context.max_tokens")),
        ("unknown task acceptance", with_head("lifecycle: {task_acceptance: many}\n"), Err("E-MAN-003", "lifecycle.task_acceptance")),
        ("queue without room", with_head("lifecycle: {task_acceptance: queue, queue_depth: 0}\n"), Err("E-MAN-003", "lifecycle.queue_depth")),
        ("writable export", with_head("exports:\n  files: {root: out, mode: read-write}\n"), Err("E-MAN-003", "exports.files.mode")),
        ("escaping export root", with_head("exports:\n  files: {root: ../x, mode: read-only}\n"), Err("E-MAN-003", "exports.files.root")),
        ("a2a part kind unknown", with_head("a2a:\n  input: {parts: [video]}\n"), Err("E-MAN-003", "a2a.input.parts")),
        ("a2a media type malformed", with_head("a2a:\n  input: {parts: [file], media_types: ['text']}\n"), Err("E-MAN-003", "a2a.input.media_types")),
        ("a2a part bound zero", with_head("a2a:\n  input: {max_bytes: 0}\n"), Err("E-MAN-003", "a2a.input.max_bytes")),
        ("a2a output dir escaping", with_head("a2a:\n  output: {dir: ../x}\n"), Err("E-MAN-003", "a2a.output.dir")),
        ("a2a output bound past one answer", with_head("a2a:\n  output: {dir: o, max_bytes: 1Mi}\n"), Err("E-MAN-003", "a2a.output.max_bytes")),
        ("a2a answer unknown", with_head("a2a:\n  answer: file\n"), Err("E-MAN-003", "a2a.answer")),
        ("export size with a bad suffix", with_head("exports:\n  files: {root: out, mode: read-only, max_bytes: 10MB}\n"), Err("E-MAN-003", "exports.files.max_bytes")),
        ("sleeping capsule without a peer ttl", with_head("lifecycle: {after_task: sleep}\nexports:\n  peer_files: {root: out}\n"), Err("E-CAP-008", "exports.peer_files.max_ttl")),
        ("sleeping capsule with a long peer ttl", with_head("lifecycle: {after_task: sleep}\nexports:\n  peer_files: {root: out, max_ttl: 1h}\n"), Err("E-CAP-008", "exports.peer_files.max_ttl")),
        ("unset variable", with_head("capabilities:\n  state: {store: '${NOT_SET_ANYWHERE}'}\n"), Err("E-MAN-003", "capabilities.state.store")),
        ("port out of range", with_head("network: {internal_port: 70000}\n"), Err("E-MAN-003", "network.internal_port")),
    ]
}

#[test]
fn the_table() {
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    for (label, yaml, expect) in cases {
        match (runtime(&yaml), expect) {
            (Ok(loaded), Expect::Ok(check)) => check(&loaded),
            (Err(d), Expect::Err(code, key)) => {
                assert_eq!((d.code, d.key.as_str()), (code, key), "{label}: {d}");
                if code == "E-MAN-003" && key != "murmur.yaml" {
                    assert!(
                        d.message.starts_with("murmur.yaml: invalid "),
                        "{label}: {}",
                        d.message
                    );
                    assert!(
                        d.message.contains(&format!(" config for '{key}': ")),
                        "{label}: {}",
                        d.message
                    );
                }
            }
            (Ok(_), Expect::Err(code, key)) => panic!("{label}: accepted, expected {code} at {key}"),
            (Err(d), Expect::Ok(_)) => panic!("{label}: refused with {d}"),
        }
    }
}

#[test]
fn syntax_errors_carry_line_and_column() {
    let d = runtime("name: cap\nversion: [0.1.0\n").unwrap_err();
    assert!(d.message.contains("at line "), "{}", d.message);
    assert!(d.message.contains(", column "), "{}", d.message);
    let d = runtime("context: {max_tokens: 0}\nname: a\nversion: b\n").unwrap_err();
    assert_eq!(
        d.message,
        "murmur.yaml: invalid inference config for 'context.max_tokens': must be greater than 0"
    );
}

#[test]
fn the_daemon_loader_never_reads_the_api_key() {
    let yaml = with_head("artifacts: [{name: drv, version: 1.0.0, runtime: driver}]\ninference: {endpoint: 'https://a.b', model: m, api_key: '${DAEMON_NEVER_HAS_THIS}', driver: {artifact: drv}}\n");
    let nothing = |_: &str| -> Option<String> { None };
    let loaded = parse(&yaml, Resolve::AllButApiKey(&nothing)).unwrap();
    let key = loaded.manifest.inference.unwrap().api_key;
    assert_eq!(
        key,
        Some(ApiKey::Unresolved {
            var: "DAEMON_NEVER_HAS_THIS".into()
        })
    );
    // ...while every other reference is still resolved, and an unset one fails.
    let other = with_head("capabilities:\n  state: {store: '${STORE}'}\n");
    let d = parse(&other, Resolve::AllButApiKey(&nothing)).unwrap_err();
    assert_eq!(
        (d.code, d.key.as_str()),
        ("E-MAN-003", "capabilities.state.store")
    );
    assert!(d.message.contains("${STORE}"), "{}", d.message);
    let store = |n: &str| (n == "STORE").then(|| "shared".to_string());
    let ok = parse(&other, Resolve::AllButApiKey(&store)).unwrap();
    assert_eq!(ok.manifest.capabilities.state, Some(Some("shared".into())));
    // The runtime's loader refuses the same manifest when the key's variable is unset.
    let d = parse(&yaml, Resolve::All(&nothing)).unwrap_err();
    assert_eq!((d.code, d.key.as_str()), ("E-MAN-003", "inference.api_key"));
}

#[test]
fn export_root_symlink_leaving_the_workdir_is_e_cap_007() {
    let dir = common::TempDir::new("export-root");
    let workdir = dir.path().join("workdir");
    std::fs::create_dir_all(workdir.join("inside")).unwrap();
    std::os::unix::fs::symlink(dir.path(), workdir.join("out")).unwrap();
    std::os::unix::fs::symlink("inside", workdir.join("fine")).unwrap();
    let leaving = runtime(&with_head("exports:\n  files: {root: out, mode: read-only}\n")).unwrap();
    let work = murmur::fsx::Dir::open(&workdir).unwrap();
    let d = check_export_roots(&leaving.manifest, &work).unwrap_err();
    assert_eq!((d.code, d.key.as_str()), ("E-CAP-007", "exports.files.root"));
    let staying = runtime(&with_head(
        "exports:\n  peer_files: {root: fine}\n  files: {root: not-yet, mode: read-only}\n",
    ))
    .unwrap();
    assert!(check_export_roots(&staying.manifest, &work).is_ok());
}

/// The same diagnostics through the real `mur build` binary.
#[test]
fn mur_build_reports_the_same_codes() {
    let subset: [(&str, &str, &str); 8] = [
        ("version: 0.1.0\n", "E-MAN-001", "missing required field 'name'"),
        ("name: cap\nversion: [\n", "E-MAN-002", "line"),
        ("name: cap\nversion: 0.1.0\ncapabilities:\n  network: {allow: ['ftp://x']}\n", "E-CAP-001", "capabilities.network.allow[0]"),
        ("name: cap\nversion: 0.1.0\ncapabilities:\n  filesystem: {scope: ../up}\n", "E-CAP-002", "capabilities.filesystem.scope"),
        ("name: cap\nversion: 0.1.0\ncapabilities:\n  shell: {allow: []}\n", "E-MAN-003", "capabilities.shell.allow"),
        ("name: cap\nversion: 0.1.0\nlifecycle: {after_task: sleep}\nexports:\n  peer_files: {root: out, max_ttl: 1h}\n", "E-CAP-008", "max_ttl"),
        ("name: Cap_1\nversion: 0.1.0\n", "E-BLD-001", "Cap_1"),
        ("name: cap\nversion: latest\n", "E-REG-004", "latest"),
    ];
    for (yaml, code, mention) in subset {
        let (dir, out) = build_with("build-table", yaml);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{yaml}: {err}");
        assert!(err.starts_with(&format!("error[{code}]: ")), "{yaml}: {err}");
        assert!(err.lines().next().unwrap().contains(mention), "{yaml}: {err}");
        assert!(
            !dir.path().join("x.mur.zip").exists(),
            "a refused build wrote an archive"
        );
    }
    // An unknown key is a warning on stderr, and the build still succeeds.
    let (_dir, out) = build_with("build-warn", "name: cap\nversion: 0.1.0\nlifecycel: {}\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err,
        "warning[W-SEC-019]: murmur.yaml: unknown key 'lifecycel' is ignored\n  hint: the nearest known key is 'lifecycle'\n"
    );
}

/// `mur build DIR -o DIR/x.mur.zip` of a directory holding `yaml` and a minimal component;
/// the directory (kept while the caller looks at it) and the command's output.
fn build_with(label: &str, yaml: &str) -> (common::TempDir, std::process::Output) {
    let dir = common::TempDir::new(label);
    std::fs::write(dir.path().join("murmur.yaml"), yaml).unwrap();
    std::fs::write(dir.path().join("capsule.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let out = Command::new(MUR)
        .arg("build")
        .arg(dir.path())
        .arg("-o")
        .arg(dir.path().join("x.mur.zip"))
        .output()
        .unwrap();
    (dir, out)
}

/// `exports.files.max_bytes` through `mur build`: the binary units in both spellings are
/// taken (`1MiB` as `1Mi`), and a form that is not one names every form that is.
#[test]
fn export_sizes_take_binary_units_and_a_refusal_names_the_forms() {
    let build = |size: &str| {
        let yaml = format!("name: cap\nversion: 0.1.0\nexports:\n  files: {{root: out, mode: read-only, max_bytes: {size}}}\n");
        let (_dir, out) = build_with("build-size", &yaml);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for size in ["1048576", "1Mi", "1MiB", "1024KiB", "1GiB"] {
        assert_eq!(build(size), (Some(0), String::new()), "{size}");
    }
    for size in ["1MB", "1 M", "1.5Mi"] {
        let (code, err) = build(size);
        assert_eq!(code, Some(1), "{size}: {err}");
        assert_eq!(
            err,
            format!("error[E-MAN-003]: murmur.yaml: invalid exports config for 'exports.files.max_bytes': '{size}' is not a size: a size in bytes is a whole number (10485760) or one with a binary unit: Ki, Mi or Gi (10Mi), also written KiB, MiB or GiB (10MiB)\n"),
        );
    }
}

#[test]
fn build_time_loading_validates_shape_around_unresolved_references() {
    let yaml = with_head("artifacts: [{name: drv, version: 1.0.0, runtime: driver}]\ninference: {endpoint: '${ENDPOINT}', model: m, api_key: '${KEY}', driver: {artifact: drv}}\ncapabilities:\n  state: {store: '${STORE}'}\n  env: {allow: ['${VAR_NAME}']}\n");
    let loaded = parse(&yaml, Resolve::Nothing).unwrap();
    let keys: Vec<(&str, &str)> = loaded
        .unresolved
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            ("inference.endpoint", "ENDPOINT"),
            ("capabilities.state.store", "STORE"),
            ("capabilities.env.allow[0]", "VAR_NAME")
        ]
    );
    assert_eq!(
        loaded.manifest.inference.unwrap().api_key,
        Some(ApiKey::Unresolved { var: "KEY".into() })
    );
    // Shape faults around them are still caught.
    let bad = with_head("capabilities:\n  state: {store: '${STORE}'}\n  containment: '${CLASS}'\n");
    let d = parse(&bad, Resolve::Nothing).unwrap_err();
    assert_eq!(
        (d.code, d.key.as_str()),
        ("E-MAN-003", "capabilities.containment")
    );
}
