//! The typed manifest every part of the project reads, with the defaults of NOTES.md in one
//! place (the `DEFAULT_*` constants and the `Default` impls below).

use super::netrule::NetRule;
use std::fmt;

pub const DEFAULT_MEMORY_BYTES: u64 = 536_870_912;
pub const DEFAULT_TABLE_ELEMENTS: u64 = 100_000;
pub const DEFAULT_INSTANCES: u64 = 1000;
pub const DEFAULT_DEADLINE_SECONDS: u64 = 600;
pub const DEFAULT_HOOK_DEADLINE_SECONDS: u64 = 30;
pub const DEFAULT_MAX_TURNS: u64 = 10;
pub const DEFAULT_MAX_TASK_REOPENS: u64 = 1;
pub const DEFAULT_MAX_TOKENS: u64 = 8192;
/// `inference.max_session_tokens`: about what one long working session of a person with a
/// frontier model takes (a few dozen turns of a large context); a runaway loop reaches it in
/// minutes and stops there, at the price of a few dollars.
pub const DEFAULT_MAX_SESSION_TOKENS: u64 = 2_000_000;
pub const DEFAULT_COMPACTION_THRESHOLD: f64 = 0.98;
pub const DEFAULT_QUEUE_DEPTH: u64 = 1;
pub const DEFAULT_DELEGATION_DEADLINE_SECS: u64 = 600;
pub const DEFAULT_EXPORT_MAX_BYTES: u64 = 10_485_760;
pub const DEFAULT_PEER_TTL_SECS: u64 = 3600;
/// With `after_task: sleep`, `exports.peer_files.max_ttl` must be at most this.
pub const MAX_SLEEPING_PEER_TTL_SECS: u64 = 900;

/// A parsed, validated `murmur.yaml`.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub name: String,
    pub version: String,
    pub description: Option<String>,
    pub artifacts: Vec<Artifact>,
    pub capabilities: Capabilities,
    pub inference: Option<Inference>,
    /// `context.max_tokens`; absent means no compaction.
    pub context_max_tokens: Option<u64>,
    pub lifecycle: Lifecycle,
    pub exports: Exports,
    /// Top-level `network.internal_port`; absent means OS-assigned.
    pub internal_port: Option<u16>,
    /// Files `mur build` packs after the manifest.
    pub requires_files: Vec<String>,
    /// Top-level `runtime`: what kind of artifact this package is (None: a capsule).
    pub packaged_as: Option<String>,
    /// `approvals`: calls that wait for a person's yes (None: none do).
    pub approvals: Option<Approvals>,
    /// `ask`: an agent's `ask` tool, a WASM run's `out/ask.txt` (None: neither).
    pub ask: Option<Ask>,
    /// `a2a.*`: the part kinds a task takes, where its files land, what comes back.
    pub a2a: TaskIo,
}

impl Manifest {
    /// Why a delegated task can never be taken by this capsule, if it cannot: a WASM
    /// capsule that declares no `lifecycle:` is a script (its `run` is called once at
    /// launch, with no task), and `task_acceptance: none` refuses every message.
    pub fn takes_no_task(&self) -> Option<&'static str> {
        if self.lifecycle.task_acceptance == TaskAcceptance::None {
            return Some("declares lifecycle.task_acceptance: none and takes no task");
        }
        if self.inference.is_none() && !self.lifecycle.declared {
            return Some("declares no lifecycle and takes no task");
        }
        None
    }

    /// Whether the capsule can start subprocesses: an agent with shell commands or tool
    /// artifacts (which may be native binaries).
    pub fn subprocess_route(&self) -> bool {
        self.inference.is_some()
            && (self.capabilities.shell_allow.is_some()
                || self.artifacts.iter().any(|a| a.runtime == ArtifactRuntime::Tool))
    }

    /// The destinations a subprocess may reach: `capabilities.network.allow` less every rule
    /// that covers the inference endpoint. The endpoint is the driver's destination; a
    /// command reaching it could send the workdir to the model provider under a key of its
    /// own.
    pub fn subprocess_rules(&self) -> Vec<NetRule> {
        let endpoint = self
            .inference
            .as_ref()
            .and_then(|i| i.endpoint.as_deref())
            .map(super::netrule::endpoint);
        self.capabilities
            .network_allow
            .iter()
            .filter(|r| match &endpoint {
                None | Some(None) => true,
                Some(Some(dest)) => !r.covers(dest),
            })
            .cloned()
            .collect()
    }
}

/// The kind of a declared artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactRuntime {
    Tool,
    Driver,
    Hook,
    Skill,
}

impl ArtifactRuntime {
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactRuntime::Tool => "tool",
            ArtifactRuntime::Driver => "driver",
            ArtifactRuntime::Hook => "hook",
            ArtifactRuntime::Skill => "skill",
        }
    }
}

/// One `artifacts[]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub name: String,
    pub version: Option<String>,
    pub runtime: ArtifactRuntime,
    /// Per-artifact grants; None means the capsule's ceiling applies.
    pub capabilities: Option<Capabilities>,
    /// `config` as compact JSON: handed to a hook as `MURMUR_ARTIFACT_CONFIG`.
    pub config: Option<String>,
    /// A hook granted `records: own`: the directory `hooks/<name>/` of the session's records.
    pub records: bool,
}

/// A containment floor, ordered `advisory < scoped < sealed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Containment {
    #[default]
    Advisory,
    Scoped,
    Sealed,
}

impl Containment {
    pub fn parse(s: &str) -> Option<Containment> {
        match s {
            "advisory" => Some(Containment::Advisory),
            "scoped" => Some(Containment::Scoped),
            "sealed" => Some(Containment::Sealed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Containment::Advisory => "advisory",
            Containment::Scoped => "scoped",
            Containment::Sealed => "sealed",
        }
    }
}

impl fmt::Display for Containment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many delegations a session may start over its life when its manifest says nothing:
/// enough for any orchestration a person would run, and an end to a model that delegates
/// on every completion.
pub const DEFAULT_MAX_DELEGATIONS: u64 = 1000;

/// `capabilities.*`, capsule-wide or per artifact.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Capabilities {
    pub network_allow: Vec<NetRule>,
    pub unix_sockets: bool,
    /// None: the block is absent and no peer fetch is possible.
    pub peer_fetch_allow: Option<Vec<NetRule>>,
    /// None: no shell block; Some is never empty.
    pub shell_allow: Option<Vec<String>>,
    /// `shell.interpreter_runtime`: host directories opened read-only to contained children
    /// (W-SEC-009 at launch). Each names a binary of `shell_allow`.
    pub interpreter_runtime: Vec<InterpreterRuntime>,
    pub spawn_allow: Vec<String>,
    /// `capabilities.spawn.max_delegations`: how many delegations the session may start
    /// over its life (None: [`DEFAULT_MAX_DELEGATIONS`]).
    pub max_delegations: Option<u64>,
    pub env_allow: Vec<String>,
    /// Normalised relative scope ("a/b"); None is the whole workdir.
    pub filesystem_scope: Option<String>,
    pub workdir_exec: bool,
    /// None: no `state` block; Some(None): a block without `store` (the capsule's name).
    pub state: Option<Option<String>>,
    pub containment: Containment,
    pub limits: Limits,
    /// `network.authentication`: the door's bearer credentials (capsule-wide only); None
    /// is the spec's unauthenticated loopback door.
    pub door_auth: Option<DoorAuth>,
}

/// What a door credential's scope may name besides `*`: the door's methods by their A2A
/// 1.0 names (a 0.3 method needs the scope of its 1.0 twin) and the operator plane.
pub const DOOR_SCOPES: &[&str] = &[
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "GetExtendedAgentCard",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "resources.files",
];

/// The credential a delegated child mints for the parent that launched it (its task
/// delivery); no manifest may declare it.
pub const SPAWNER_CREDENTIAL: &str = "spawner";

/// `capabilities.network.authentication` (scheme `bearer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoorAuth {
    /// At least one; names unique.
    pub credentials: Vec<DoorCredential>,
}

/// One named credential and what it may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DoorCredential {
    pub name: String,
    /// Names of [`DOOR_SCOPES`], or `*`.
    pub scopes: Vec<String>,
}

/// One `capabilities.shell.interpreter_runtime[]` entry: what an allowed interpreter needs
/// to read that the runtime does not derive itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterpreterRuntime {
    /// A name of `shell.allow`.
    pub binary: String,
    pub dirs: Vec<RuntimeDir>,
}

/// A directory of an [`InterpreterRuntime`]: read beneath it, and list it only with
/// `list_dir`. Never execute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeDir {
    /// Absolute, without `.` or `..` components, not `/`.
    pub path: std::path::PathBuf,
    pub list_dir: bool,
}

/// `capabilities.limits.*` with defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub memory_bytes: u64,
    pub table_elements: u64,
    pub instances: u64,
    /// None: 600 s for capsules, tools and drivers; 30 s for a hook call.
    pub deadline_seconds: Option<u64>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            memory_bytes: DEFAULT_MEMORY_BYTES,
            table_elements: DEFAULT_TABLE_ELEMENTS,
            instances: DEFAULT_INSTANCES,
            deadline_seconds: None,
        }
    }
}

impl Limits {
    /// The deadline for a capsule, tool or driver.
    pub fn deadline(&self) -> u64 {
        self.deadline_seconds.unwrap_or(DEFAULT_DEADLINE_SECONDS)
    }

    /// The deadline for one hook call.
    pub fn hook_deadline(&self) -> u64 {
        self.deadline_seconds.unwrap_or(DEFAULT_HOOK_DEADLINE_SECONDS)
    }
}

/// A provider key as written: never printed by `Debug`.
#[derive(Clone, PartialEq)]
pub enum ApiKey {
    /// A literal value in the manifest (W-SEC-004 at build).
    Literal(String),
    /// `${NAME}` resolved from the environment.
    Resolved { var: String, value: String },
    /// `${NAME}` left unread (the daemon's loader).
    Unresolved { var: String },
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiKey::Literal(_) => f.write_str("ApiKey::Literal(<redacted>)"),
            ApiKey::Resolved { var, .. } => write!(f, "ApiKey::Resolved(${{{var}}})"),
            ApiKey::Unresolved { var } => write!(f, "ApiKey::Unresolved(${{{var}}})"),
        }
    }
}

impl ApiKey {
    /// The variable it came from (a literal has none) and its value; `None` when unread.
    pub fn secret(&self) -> Option<(Option<String>, String)> {
        match self {
            ApiKey::Literal(v) => Some((None, v.clone())),
            ApiKey::Resolved { var, value } => Some((Some(var.clone()), value.clone())),
            ApiKey::Unresolved { .. } => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Http,
    Process,
}

/// `inference.*`: present means an agent capsule.
#[derive(Debug, Clone, PartialEq)]
pub struct Inference {
    pub transport: Transport,
    pub endpoint: Option<String>,
    pub model: Option<String>,
    pub api_key: Option<ApiKey>,
    pub driver_artifact: Option<String>,
    /// `inference.driver.config` as compact JSON.
    pub driver_config: Option<String>,
    pub system_prompt: Option<String>,
    pub system_prompt_file: Option<String>,
    pub system_prompt_artifact: Option<String>,
    pub max_turns: u64,
    pub max_task_reopens: u64,
    pub max_tokens: u64,
    /// `inference.max_session_tokens`: input + output tokens, as the provider reports them,
    /// the session (and every child delegated from it) may spend.
    pub max_session_tokens: u64,
    pub compaction_threshold: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskAcceptance {
    None,
    #[default]
    Single,
    Queue,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AfterTask {
    #[default]
    Exit,
    Sleep,
}

/// `lifecycle.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifecycle {
    /// The manifest has a `lifecycle:` block. A WASM capsule without one is a script: its
    /// `run` is called once at launch, task or not.
    pub declared: bool,
    pub task_acceptance: TaskAcceptance,
    pub after_task: AfterTask,
    pub queue_depth: u64,
    pub delegation_deadline_secs: u64,
    pub input_timeout_secs: Option<u64>,
}

impl Default for Lifecycle {
    fn default() -> Lifecycle {
        Lifecycle {
            declared: false,
            task_acceptance: TaskAcceptance::default(),
            after_task: AfterTask::default(),
            queue_depth: DEFAULT_QUEUE_DEPTH,
            delegation_deadline_secs: DEFAULT_DELEGATION_DEADLINE_SECS,
            input_timeout_secs: None,
        }
    }
}

/// `exports.files`: the operator plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileExport {
    /// Normalised relative root ("out"); "" is the whole workdir.
    pub root: String,
    /// The root as the manifest wrote it ("out/"), echoed verbatim on the wire.
    pub root_written: String,
    pub max_bytes: u64,
}

/// `exports.peer_files`: the peer plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerExport {
    pub root: String,
    /// The root as the manifest wrote it.
    pub root_written: String,
    pub max_ttl_secs: u64,
    pub max_bytes: u64,
}

/// `exports.*`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Exports {
    pub files: Option<FileExport>,
    pub peer_files: Option<PeerExport>,
}

/// `approvals.timeout_secs` when the block does not say.
pub const DEFAULT_APPROVAL_TIMEOUT_SECS: u64 = 300;
/// `ask.timeout_secs` when the block does not say.
pub const DEFAULT_ASK_TIMEOUT_SECS: u64 = 600;

/// `approvals`: the calls of an agent's model that wait for a person's yes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approvals {
    /// Tool names (artifacts of runtime `tool` or `skill`, the peer tools).
    pub tools: Vec<String>,
    pub shell: Vec<ShellApproval>,
    /// Capsule names `delegate-task` may name, or `*` for every delegation.
    pub delegations: Vec<String>,
    pub timeout_secs: u64,
    pub on_timeout: OnTimeout,
}

/// One `approvals.shell` entry: a binary of `shell.allow`, and optionally a pattern its
/// command must match (`*` any run of characters, `?` one) for the call to need approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellApproval {
    pub binary: String,
    pub pattern: Option<String>,
}

/// What a call that waited `approvals.timeout_secs` without an answer gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnTimeout {
    #[default]
    Deny,
    Approve,
}

impl OnTimeout {
    pub fn as_str(self) -> &'static str {
        match self {
            OnTimeout::Deny => "deny",
            OnTimeout::Approve => "approve",
        }
    }
}

/// `ask`: the `ask` tool, by which the model puts a question to the task's caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask {
    pub timeout_secs: u64,
}

/// `a2a.input.max_bytes`: the largest file or data part taken (decoded bytes).
pub const DEFAULT_PART_MAX_BYTES: u64 = 512 << 10;
/// `a2a.output.max_bytes`: the largest output file sent back whole.
pub const DEFAULT_OUTPUT_MAX_BYTES: u64 = 512 << 10;
/// The most output bytes one task sends back, all files together: base64 and all, one
/// answer's events stay under the 1 MiB a stream may hold unread (larger files are for
/// `exports.files`).
pub const MAX_OUTPUT_BYTES: u64 = 640 << 10;
/// `a2a.input.dir`: where a task's file and data parts land (per task, beneath it).
pub const DEFAULT_INPUT_DIR: &str = "in";

/// `a2a.input`: which part kinds a message may carry, and where files land.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputParts {
    pub text: bool,
    pub file: bool,
    pub data: bool,
    /// The media types (or `type/*`, `*/*` ranges) file parts may have.
    pub media_types: Vec<String>,
    /// Relative to the accessible workdir; each task's parts land in `<dir>/<task id>/`.
    pub dir: String,
    pub max_bytes: u64,
}

impl Default for InputParts {
    fn default() -> InputParts {
        InputParts {
            text: true,
            file: false,
            data: false,
            media_types: Vec::new(),
            dir: DEFAULT_INPUT_DIR.into(),
            max_bytes: DEFAULT_PART_MAX_BYTES,
        }
    }
}

/// `a2a.output`: the directory whose files come back as file artifacts, and the optional
/// directories whose files come back as data parts (`data`: each file one JSON object) and
/// as files by reference (`links`: each file one `http(s)` URL, the file's name the
/// artifact's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFiles {
    /// Relative to the accessible workdir.
    pub dir: String,
    pub max_bytes: u64,
    pub data: Option<String>,
    pub links: Option<String>,
}

impl OutputFiles {
    /// Every directory a task's answer is collected from: the files', then data's, then
    /// links'.
    pub fn dirs(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.dir.as_str())
            .chain(self.data.as_deref())
            .chain(self.links.as_deref())
    }
}

/// `a2a.answer`: what a send that waits for the task gets when it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AnswerAs {
    /// The Task (the default).
    #[default]
    Task,
    /// A Message holding the answer's parts (A2A lets an agent answer so).
    Message,
}

/// `a2a.*`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskIo {
    pub input: InputParts,
    pub output: Option<OutputFiles>,
    pub answer: AnswerAs,
    /// `a2a.push.allow`: the webhooks a caller may name for push notifications (empty:
    /// the door answers PushNotificationNotSupported).
    pub push_allow: Vec<NetRule>,
}
