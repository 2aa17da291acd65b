//! Helpers of the delegation tests (tests/delegation*.rs): agent capsules (OpenAI driver,
//! one responder mock for all of them, each asking for its own name as its `model`) published
//! into a temp registry, `mur-roost` on that registry, a top-level capsule started from the
//! registry with `mur run --capsule .. --json` in a cleared environment, and what a formation
//! leaves behind: traces and `completion.json` by session id, roost status, the processes
//! whose command line still mentions the test's directory.
#![allow(dead_code)]

use super::agent::{Drv, KEY_VAR};
use super::provider::{
    last_is_tool_result, last_user_text, model_of, tool_results, Provider, Recorded, Step,
};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod door;
mod world;
// Not every test binary that builds `common` uses these.
#[allow(unused_imports)]
pub use door::*;
#[allow(unused_imports)]
pub use world::*;

/// The version every test capsule is published at.
pub const V: &str = "0.1.0";
/// The delegation tool.
pub const TOOL: &str = "delegate-task";
/// The first line of every completion message.
pub const FINISHED: &str = "Delegated capsule finished.";
/// How long a whole formation may take, start to end, on a loaded two-core machine.
pub const FORMATION: Duration = Duration::from_secs(300);
/// How long one condition of these tests may take to come true.
pub const WAIT: Duration = Duration::from_secs(60);
/// How long a capsule may take to print its `--json` line (the first one compiles the driver).
pub const ANNOUNCE: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------------------
// The roost's sentences (roost API spec), written out: the tests compare them byte for byte.
// ---------------------------------------------------------------------------------------

pub fn depth_sentence(max: u32) -> String {
    format!(
        "delegation depth bound reached: this daemon allows {max} levels of delegation below a top-level capsule (--max-depth {max}), and this session has none left to spend — a capsule whose capabilities.spawn.allow names itself terminates here rather than recursing"
    )
}

pub fn concurrency_sentence(max: u32, holding: u32) -> String {
    format!(
        "delegation concurrency bound reached: this daemon allows a capsule {max} live children at a time (--max-concurrent {max}), and this session already holds {holding} — wait for one to finish, or raise --max-concurrent"
    )
}

pub fn ceiling_sentence(max: u32, holding: u32) -> String {
    format!(
        "machine capsule ceiling reached: this daemon allows {max} live capsules on this host across every formation (--max-live-capsules {max}), and it is already holding {holding} — this is the host's ceiling rather than this capsule's own --max-concurrent, so narrowing the formation does not help; the same request may be granted once other capsules finish"
    )
}

pub fn envelope_sentence(key: &str, entry: &str) -> String {
    format!(
        "{key}: the child declares '{entry}', which its parent does not hold — a spawned capsule can never hold more capability than the capsule that spawned it"
    )
}

pub const REPLAYED: &str =
    "this spawn approval has already been redeemed; an approval covers one launch, so ask POST /spawn for another";

pub fn wrong_bytes_sentence(coords: &str, approved: &str, resolved: &str) -> String {
    format!(
        "'{coords}' now resolves to a different artifact than the one this spawn approval was granted for (approved sha256 {approved}, resolved sha256 {resolved})"
    )
}

pub fn not_in_spawn_allow(name: &str) -> String {
    format!("capsule '{name}' is not in --spawn-allow")
}

// ---------------------------------------------------------------------------------------
// Capsules.
// ---------------------------------------------------------------------------------------

/// `lifecycle: {task_acceptance: queue, queue_depth: 4, after_task: exit}`.
pub fn queue_exit() -> String {
    "lifecycle:\n  task_acceptance: queue\n  queue_depth: 4\n  after_task: exit\n".into()
}

/// One test capsule: an agent on the OpenAI driver whose `model` is its own name.
#[derive(Debug, Clone)]
pub struct Cap {
    pub name: String,
    /// `capabilities.spawn.allow` (left out when empty).
    pub spawn: Vec<String>,
    /// `network.allow` entries beside the mock's origin.
    pub network: Vec<String>,
    /// `env.allow` entries beside the provider key's variable.
    pub env: Vec<String>,
    /// The whole `lifecycle:` block (empty: the default, single + exit).
    pub lifecycle: String,
    pub max_turns: u64,
    /// Its door takes bearer tokens: one credential `ops` with every scope.
    pub authenticated: bool,
}

impl Cap {
    /// A capsule that delegates nothing, with the default lifecycle.
    pub fn leaf(name: &str) -> Cap {
        Cap {
            name: name.into(),
            spawn: Vec::new(),
            network: Vec::new(),
            env: Vec::new(),
            lifecycle: String::new(),
            max_turns: 6,
            authenticated: false,
        }
    }

    /// A capsule that may delegate to `spawn`, under queue + exit.
    pub fn delegating(name: &str, spawn: &[&str]) -> Cap {
        Cap {
            spawn: spawn.iter().map(|s| s.to_string()).collect(),
            lifecycle: queue_exit(),
            ..Cap::leaf(name)
        }
    }

    /// With `lifecycle.delegation_deadline_secs: secs` (a delegating capsule's block).
    pub fn deadline(mut self, secs: u64) -> Cap {
        assert!(!self.lifecycle.is_empty(), "a deadline goes in a lifecycle block");
        self.lifecycle
            .push_str(&format!("  delegation_deadline_secs: {secs}\n"));
        self
    }

    /// With these extra `env.allow` names.
    pub fn env(mut self, names: &[&str]) -> Cap {
        self.env.extend(names.iter().map(|n| n.to_string()));
        self
    }

    /// With an authenticated door (`capabilities.network.authentication`).
    pub fn authenticated(mut self) -> Cap {
        self.authenticated = true;
        self
    }

    /// With these extra `network.allow` entries.
    pub fn network(mut self, entries: &[&str]) -> Cap {
        self.network.extend(entries.iter().map(|n| n.to_string()));
        self
    }

    /// The manifest, pointed at `p`.
    pub fn yaml(&self, p: &Provider) -> String {
        let drv = Drv::OpenAi;
        let mut y = format!("name: {}\nversion: {V}\nartifacts:\n", self.name);
        y.push_str(&format!(
            "  - {{name: {}, version: 1.0.0, runtime: driver}}\n",
            drv.name()
        ));
        y.push_str("capabilities:\n");
        let mut allow = vec![format!("{:?}", p.base_anthropic())];
        allow.extend(self.network.iter().map(|n| format!("{n:?}")));
        let auth = if self.authenticated {
            ", authentication: {scheme: bearer, credentials: [{name: ops, scopes: ['*']}]}"
        } else {
            ""
        };
        y.push_str(&format!("  network: {{allow: [{}]{auth}}}\n", allow.join(", ")));
        let mut env = vec![KEY_VAR.to_string()];
        env.extend(self.env.iter().cloned());
        y.push_str(&format!("  env: {{allow: [{}]}}\n", env.join(", ")));
        if !self.spawn.is_empty() {
            y.push_str(&format!("  spawn: {{allow: [{}]}}\n", self.spawn.join(", ")));
        }
        y.push_str("inference:\n");
        y.push_str(&format!("  endpoint: {}\n", drv.endpoint(p)));
        y.push_str(&format!("  model: {}\n", self.name));
        y.push_str(&format!("  api_key: ${{{KEY_VAR}}}\n"));
        y.push_str(&format!("  driver: {{artifact: {}}}\n", drv.name()));
        y.push_str(&format!("  max_turns: {}\n", self.max_turns));
        y.push_str(&self.lifecycle);
        y
    }
}

// ---------------------------------------------------------------------------------------
// The mock's answers: one plan per capsule (by the model it asks for).
// ---------------------------------------------------------------------------------------

/// What one capsule does with a task that is not a completion.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Call `delegate-task` once per `(capsule, task)`, all in one turn.
    Delegate(Vec<(String, String)>),
    /// Answer with this text after this delay.
    Answer(Duration, String),
}

impl Plan {
    pub fn delegate(calls: &[(&str, &str)]) -> Plan {
        Plan::Delegate(
            calls
                .iter()
                .map(|(c, t)| (c.to_string(), t.to_string()))
                .collect(),
        )
    }

    pub fn answer(text: &str) -> Plan {
        Plan::Answer(Duration::ZERO, text.into())
    }

    pub fn answer_after(delay: Duration, text: &str) -> Plan {
        Plan::Answer(delay, text.into())
    }
}

/// What a capsule answers once its delegate-task calls have their results.
pub fn delegated_text(model: &str) -> String {
    format!("OUTPUT-{model}-delegated")
}

/// What a capsule answers to a completion task (its last answer, so its `out/result.txt`).
pub fn after_completion_text(model: &str) -> String {
    format!("OUTPUT-{model}-after-completion")
}

/// Whether `req` is the first request of a completion task.
pub fn is_completion(req: &Recorded) -> bool {
    !last_is_tool_result(req) && last_user_text(req).contains(FINISHED)
}

/// A responder for [`Provider::start_responder`]: after a tool result, [`delegated_text`];
/// for a completion, [`after_completion_text`]; for any other task, the capsule's plan.
pub fn responder(plans: &[(&str, Plan)]) -> impl Fn(&Recorded) -> Step + Send + Sync + 'static {
    let plans: BTreeMap<String, Plan> = plans.iter().map(|(m, p)| (m.to_string(), p.clone())).collect();
    move |req: &Recorded| {
        let model = model_of(req);
        let Some(plan) = plans.get(&model) else {
            return Step::status(400, &format!("mock: no plan for model {model:?}"));
        };
        if last_is_tool_result(req) {
            return Step::text(&delegated_text(&model));
        }
        if is_completion(req) {
            return Step::text(&after_completion_text(&model));
        }
        match plan {
            Plan::Delegate(calls) => Step::Tools(
                calls
                    .iter()
                    .enumerate()
                    .map(|(i, (c, t))| {
                        (
                            format!("call_{model}_{i}"),
                            TOOL.to_string(),
                            json!({"capsule": c, "version": V, "task": t}),
                        )
                    })
                    .collect(),
            ),
            Plan::Answer(d, text) if d.is_zero() => Step::text(text),
            Plan::Answer(d, text) => Step::slow(*d, Step::text(text)),
        }
    }
}

/// The model requests of capsule `model`, in order.
pub fn requests_of(p: &Provider, model: &str) -> Vec<Recorded> {
    p.model_requests()
        .into_iter()
        .filter(|r| model_of(r) == model)
        .collect()
}

/// The tool results of each request of `model` that carried any, in order.
pub fn results_of(p: &Provider, model: &str) -> Vec<Vec<String>> {
    requests_of(p, model)
        .iter()
        .map(tool_results)
        .filter(|r| !r.is_empty())
        .collect()
}

/// The completion messages `model` was given, in order.
pub fn completions_to(p: &Provider, model: &str) -> Vec<String> {
    requests_of(p, model)
        .iter()
        .filter(|r| is_completion(r))
        .map(last_user_text)
        .collect()
}

/// The schema of tool `name` as `req` offered it (OpenAI `tools[].function.parameters`).
pub fn tool_schema(req: &Recorded, name: &str) -> Option<Value> {
    let tools = req.json.as_ref()?.get("tools")?.as_array()?;
    tools.iter().find_map(|t| {
        let f = t.get("function").unwrap_or(t);
        (f.get("name")? == name).then(|| {
            f.get("parameters")
                .or_else(|| f.get("input_schema"))
                .cloned()
                .unwrap_or(Value::Null)
        })
    })
}

/// The names of the tools `req` offered.
#[allow(unused_imports)]
pub use super::provider::offered;

// ---------------------------------------------------------------------------------------
// Shapes.
// ---------------------------------------------------------------------------------------

/// `prefix` followed by 32 lowercase hex digits.
pub fn is_id(s: &str, prefix: &str) -> bool {
    s.strip_prefix(prefix).is_some_and(|h| {
        h.len() == 32
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// A string field of a JSON value.
pub fn sv<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("no string {key} in {v}"))
}

/// The keys of a JSON object, sorted.
pub fn keys_of(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort();
    k
}

/// A `delegate-task` result of `started` for `capsule`, checked field by field and parsed.
pub fn started(text: &str, capsule: &str) -> Value {
    let v: Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("the tool result is not JSON ({e}): {text}"));
    assert_eq!(
        keys_of(&v),
        [
            "capsule",
            "child_workdir",
            "delegation_id",
            "session_id",
            "status",
            "version"
        ],
        "{v}"
    );
    assert_eq!(v["status"], "started", "{v}");
    assert_eq!(v["capsule"], capsule, "{v}");
    assert_eq!(v["version"], V, "{v}");
    assert!(is_id(sv(&v, "delegation_id"), "dlg_"), "{v}");
    assert!(is_id(sv(&v, "session_id"), "ses_"), "{v}");
    let dir = sv(&v, "child_workdir");
    let hex = dir
        .strip_prefix(&format!(".murmur/children/{capsule}-"))
        .unwrap_or_else(|| panic!("child_workdir {dir:?}"));
    assert!(
        hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()),
        "child_workdir {dir:?}"
    );
    v
}

/// The completion message's lines for these fields, `duration_ms` shown as `_`.
pub fn completion_lines(
    dlg: &str,
    capsule: &str,
    sid: &str,
    status: &str,
    workdir: &Path,
    result_path: Option<&str>,
) -> Vec<String> {
    let mut l = vec![
        FINISHED.to_string(),
        format!("delegation_id: {dlg}"),
        format!("capsule: {capsule}@{V}"),
        format!("session_id: {sid}"),
        format!("status: {status}"),
        "duration_ms: _".to_string(),
        format!("workdir: {}", workdir.display()),
    ];
    if let Some(r) = result_path {
        l.push(format!("result_path: {r}"));
    }
    l
}

/// A completion message's lines from its first one on, `duration_ms` (a whole number) shown
/// as `_`.
pub fn message_lines(text: &str) -> Vec<String> {
    let at = text
        .find(FINISHED)
        .unwrap_or_else(|| panic!("not a completion: {text:?}"));
    text[at..]
        .lines()
        .map(|l| match l.strip_prefix("duration_ms: ") {
            Some(n) => {
                assert!(
                    !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()),
                    "duration_ms {n:?}"
                );
                "duration_ms: _".to_string()
            }
            None => l.to_string(),
        })
        .collect()
}

/// `path` made canonical (it must exist).
pub fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The names in `dir` (empty when it does not exist), sorted.
#[allow(unused_imports)]
pub use super::peer::names_in;

/// The one polling helper of the tests.
#[allow(unused_imports)]
pub use super::door::wait_for;

/// The events of `kind` in `trace`.
pub fn events_of<'a>(trace: &'a [Value], kind: &str) -> Vec<&'a Value> {
    trace.iter().filter(|e| e["event_type"] == kind).collect()
}

/// The one `session_start` of a trace.
pub fn session_start(trace: &[Value]) -> &Value {
    let s = events_of(trace, "session_start");
    assert_eq!(s.len(), 1, "{trace:?}");
    s[0]
}

/// The timestamp (unix ms) of an event.
pub fn ts(e: &Value) -> u64 {
    e["timestamp"]
        .as_u64()
        .unwrap_or_else(|| panic!("no timestamp: {e}"))
}

/// Whether `bytes` hold a roost token's tag (`msc1.` or `msa1.`).
pub fn holds_token(bytes: &[u8]) -> bool {
    bytes.windows(5).any(|w| w == b"msc1." || w == b"msa1.")
}
