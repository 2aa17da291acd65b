//! Diagnostics: every `E-`/`W-` code the project emits, with the manifest key or flag at
//! fault, rendered as `error[CODE]: message` (or `warning[...]`) plus an optional hint line.

use std::fmt;

/// `CALL: errno N (TEXT)`: a failed system call as the host probe reports it, the form
/// `mur doctor` reads the errno back from.
pub fn errno_text(call: &str, e: &std::io::Error) -> String {
    format!("{call}: errno {} ({e})", e.raw_os_error().unwrap_or(0))
}

/// Every diagnostic code, in one place. The spec's codes are normative.
pub mod code {
    pub const IO_MANIFEST_MISSING: &str = "E-IO-001";
    pub const IO_READ: &str = "E-IO-003";
    /// `mur new` asked to write into a directory that holds anything: nothing is overwritten.
    /// (A number of its own: the reference's E-IO-002 is not known here, so not reused.)
    pub const IO_NOT_EMPTY: &str = "E-IO-004";
    pub const MAN_MISSING_FIELD: &str = "E-MAN-001";
    pub const MAN_SYNTAX: &str = "E-MAN-002";
    pub const MAN_INVALID: &str = "E-MAN-003";
    pub const CAP_NETWORK_ENTRY: &str = "E-CAP-001";
    pub const CAP_SCOPE: &str = "E-CAP-002";
    pub const CAP_FLOOR: &str = "E-CAP-003";
    /// Decision: a command `mur exec` was asked to run that `shell.allow` does not list.
    pub const CAP_SHELL: &str = "E-CAP-004";
    /// The host cannot give the subprocess tree its own network namespace.
    pub const CAP_NO_NETNS: &str = "E-CAP-005";
    pub const CAP_EXPORT_ROOT_ESCAPES: &str = "E-CAP-007";
    pub const CAP_PEER_TTL: &str = "E-CAP-008";
    pub const REG_NOT_INSTALLED: &str = "E-RUN-008";
    pub const REG_INTEGRITY: &str = "E-REG-002";
    pub const REG_VERSION_EXISTS: &str = "E-REG-003";
    pub const REG_RESERVED_VERSION: &str = "E-REG-004";
    /// A remote (OCI) registry unreachable, refusing, or answering what is not an artifact.
    pub const REG_REMOTE: &str = "E-REG-005";
    pub const BLD_NAME: &str = "E-BLD-001";
    pub const BLD_REQUIRES_FILES: &str = "E-BLD-002";
    pub const BLD_WASM_PAYLOAD: &str = "E-BLD-003";
    pub const RUN_TRAP: &str = "E-RUN-001";
    /// Decision: a component that does not load, or does not fit the capsule world.
    pub const RUN_COMPONENT: &str = "E-RUN-002";
    /// `murmur.lock` refuses the launch: an artifact it does not pin, another version than it
    /// pins, a lock that does not parse, or none under `--locked`. (Other bytes under a pinned
    /// version are E-REG-002.)
    pub const RUN_LOCK: &str = "E-RUN-003";
    /// An agent capsule with no driver (or `inference.driver.artifact` naming no declared
    /// `runtime: driver` artifact).
    pub const RUN_NO_DRIVER: &str = "E-RUN-005";
    /// The inference driver artifact is not installed.
    pub const RUN_DRIVER_NOT_INSTALLED: &str = "E-RUN-006";
    pub const RUN_AGENT_LOOP: &str = "E-RUN-007";
    pub const RUN_PROMPT_FILE: &str = "E-RUN-009";
    pub const RUN_PORT_IN_USE: &str = "E-RUN-010";
    /// A containment mechanism failed to install after the probe passed; nothing ran.
    pub const RUN_CONTAINMENT: &str = "E-RUN-014";
    /// Registration with the roost failed, or `MURMUR_ROOST_URL` is unset where it is needed.
    pub const RUN_ROOST: &str = "E-RUN-019";
    /// `MURMUR_SPAWNER` is set but cannot be read: the child refuses to launch.
    pub const RUN_SPAWNER: &str = "E-RUN-020";
    /// Too few file descriptors (`ulimit -n`) for a session, or none left: refused up front
    /// rather than failing at some later step under another step's code.
    pub const RUN_DESCRIPTORS: &str = "E-RUN-060";
    /// `mur stop`, `cancel` or `watch` named a session that is not alive (no records, or
    /// nothing holds their lock) or not this user's (its records belong to another account).
    pub const RUN_SESSION_NOT_LIVE: &str = "E-RUN-061";
    /// The session's door refused `mur cancel` (an unknown task, one already finished): the
    /// message carries the door's A2A error code and words.
    pub const RUN_CANCEL_REFUSED: &str = "E-RUN-062";
    /// A write to the session's records (`trace.jsonl`, `logs/`) failed: warned once, and the
    /// session ends `incomplete`. (`W-RUN-001` is the reference murmur's "final text cut at
    /// max_tokens"; not reused for another meaning.)
    pub const RUN_RECORDS_INCOMPLETE: &str = "W-RUN-002";
    /// `murmur.lock` could not be written beside the manifest (a read-only directory, a full
    /// disk): the session runs, its artifacts unpinned.
    pub const RUN_LOCK_UNWRITTEN: &str = "W-RUN-003";
    /// The records retention policy could not be applied at launch (an unreadable
    /// `records:` block, a root that cannot be used): the session runs, nothing is pruned.
    pub const RUN_RECORDS_PRUNE: &str = "W-RUN-004";
    /// A hook whose work is kept in its records directory (the shipped eval and OTel hooks)
    /// declared without `records: own`: it runs and keeps nothing, so the launch says so.
    pub const RUN_HOOK_NO_RECORDS: &str = "W-RUN-005";
    /// Advisory containment with a subprocess route: nothing constrains its network.
    pub const SEC_ADVISORY_NETWORK: &str = "W-SEC-003";
    pub const SEC_LITERAL_SECRET: &str = "W-SEC-004";
    /// A per-artifact grant outside the capsule's ceiling, dropped.
    pub const SEC_OUTSIDE_CEILING: &str = "W-SEC-007";
    /// An interpreter's runtime directories opened to contained children.
    pub const SEC_INTERPRETER_RUNTIME: &str = "W-SEC-009";
    pub const SEC_WORKDIR_EXEC: &str = "W-SEC-011";
    pub const SEC_UNKNOWN_KEY: &str = "W-SEC-019";
    /// `capabilities.spawn.allow` under a lifecycle that cannot receive a completion.
    pub const SEC_NO_COMPLETIONS: &str = "W-SEC-020";
    /// A door that takes no credentials: what any local user can do through it.
    pub const SEC_OPEN_DOOR: &str = "W-SEC-025";
    /// A capsule's lock (or the directory it is kept in) that another user can write:
    /// whoever can write it can change which bytes the capsule runs.
    pub const SEC_SHARED_LOCK: &str = "W-SEC-026";
    /// A capsule named in `capabilities.spawn.allow` that takes no task (a script, or
    /// `task_acceptance: none`): every delegation to it would be refused.
    pub const BLD_TAKES_NO_TASK: &str = "W-BLD-001";
    /// Files of the capsule directory `mur build` did not pack (not `murmur.yaml`, the
    /// payload, nor listed in `requires_files`): the archive runs without them.
    pub const BLD_LEFT_OUT: &str = "W-BLD-002";
}

/// One diagnostic: a code, the manifest key or flag it names, the message, an optional hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: &'static str,
    /// The dotted manifest key, flag or file at fault ("" where none applies).
    pub key: String,
    pub message: String,
    pub hint: Option<String>,
}

impl Diagnostic {
    /// A diagnostic without a hint.
    pub fn new(code: &'static str, key: impl Into<String>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            key: key.into(),
            message: message.into(),
            hint: None,
        }
    }

    /// Add a hint line.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    /// Warnings are the `W-` codes.
    pub fn is_warning(&self) -> bool {
        self.code.starts_with("W-")
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = if self.is_warning() { "warning" } else { "error" };
        write!(f, "{level}[{}]: {}", self.code, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, "\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}

/// A command's output on stdout, flushed. A stdout that cannot take it (closed, full) is
/// `E-IO-003`, never a panic: the output is what the command was for.
pub fn write_stdout(text: &str) -> Result<(), Diagnostic> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Diagnostic::new(code::IO_READ, "", format!("cannot write to standard output: {e}")))
}
