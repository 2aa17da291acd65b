//! The tools a model may call and their dispatch, in the spec's precedence: a staged native
//! binary, then `shell.allow`, then a skill (`skill.md` returned), then a WASM tool, and
//! otherwise an error result fed back to the model (the session goes on).

use super::grants::GuestGrants;
use super::shell::Runner;
use crate::agent::sanitize;
use crate::agent::wire::ToolSpec;
use crate::diag::Diagnostic;
use crate::fsx::Dir;
use crate::runtime::wasm::tool::{trap_line, PreparedTool, ToolStatus};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How a call was dispatched, for the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Native,
    Shell,
    Skill,
    Wasm,
    /// `share-file` or `fetch-peer-file`, run by the runtime itself.
    Peer,
    /// `delegate-task`, run by the runtime itself.
    Delegate,
    /// A call a person denied (or whose approval ran out): it did not run.
    Denied,
    /// The `ask` tool: the caller's answer.
    Ask,
    Unknown,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Native => "native",
            Kind::Shell => "shell",
            Kind::Skill => "skill",
            Kind::Wasm => "wasm",
            Kind::Peer => "peer",
            Kind::Delegate => "delegate",
            Kind::Denied => "denied",
            Kind::Ask => "ask",
            Kind::Unknown => "unknown",
        }
    }
}

/// Why a call failed, for the trace: the code where the failure has one (E-RUN-014 for a
/// child whose containment could not be installed), the message and its hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallError {
    pub code: Option<&'static str>,
    pub message: String,
    pub hint: Option<String>,
}

impl CallError {
    /// A failure without a code.
    pub fn text(message: impl Into<String>) -> CallError {
        CallError {
            code: None,
            message: message.into(),
            hint: None,
        }
    }
}

impl From<Diagnostic> for CallError {
    fn from(d: Diagnostic) -> CallError {
        CallError {
            code: Some(d.code),
            message: d.message,
            hint: d.hint,
        }
    }
}

/// The outcome of one call.
#[derive(Debug)]
pub struct Called {
    pub text: String,
    pub is_error: bool,
    pub kind: Kind,
    pub duration: Duration,
    /// For a shell call: the exit code (None when killed or not started).
    pub exit_code: Option<i32>,
    pub truncated: bool,
    /// Streams of a shell or native call cut at the records' cap: name, bytes in all.
    pub cut_at_cap: Vec<(&'static str, u64)>,
    /// Trace events the call itself produced (a peer tool's), written before its
    /// `tool_call` record.
    pub events: Vec<(&'static str, Value)>,
    /// Why a call that is an error failed (None for one that ran, whatever its exit).
    pub error: Option<CallError>,
}

/// A WASM tool, linked, with its grants.
pub struct WasmTool {
    pub prepared: PreparedTool,
    pub grants: GuestGrants,
}

/// Every callable tool of the session.
pub struct Toolbox {
    pub specs: Vec<ToolSpec>,
    pub natives: Vec<(String, PathBuf)>,
    pub skills: Vec<(String, String)>,
    pub wasm: Vec<(String, WasmTool)>,
    pub runner: Runner,
    /// `share-file` and `fetch-peer-file`, when the manifest grants either.
    pub peer: Option<super::peer::PeerTools>,
    /// `delegate-task`, when `capabilities.spawn.allow` names a capsule.
    pub delegate: Option<super::delegate::Delegate>,
    seq: u32,
}

/// The parameters of a shell tool.
pub fn shell_schema(binary: &str) -> Value {
    let how = if super::shell::SHELLS.contains(&binary) {
        format!("the script {binary} runs with -c")
    } else {
        format!("the arguments of {binary}, split like a POSIX shell would (quotes, backslashes) but never expanded; a leading '{binary}' is optional")
    };
    json!({
        "type": "object",
        "properties": {"command": {"type": "string", "description": how}},
        "required": ["command"]
    })
}

/// The description a shell tool carries.
pub fn shell_description(binary: &str) -> String {
    format!("Run {binary} in the capsule's working directory, contained; returns the exit code, stdout and stderr")
}

/// The parameters of a tool whose manifest declares none.
pub fn open_schema() -> Value {
    json!({"type": "object", "properties": {}})
}

/// A tool's description, made one inert line.
pub fn clean_description(text: &str) -> String {
    sanitize::one_line(text, sanitize::MAX_DESCRIPTION)
}

impl Toolbox {
    pub fn new(runner: Runner) -> Toolbox {
        Toolbox {
            specs: Vec::new(),
            natives: Vec::new(),
            skills: Vec::new(),
            wasm: Vec::new(),
            runner,
            peer: None,
            delegate: None,
            seq: 0,
        }
    }

    /// Offer `spec` to the model unless a tool of that name is already listed.
    pub fn offer(&mut self, spec: ToolSpec) {
        if !self.specs.iter().any(|s| s.name == spec.name) {
            self.specs.push(spec);
        }
    }

    /// Call `name` with `input`.
    pub fn call(&mut self, name: &str, input: &Value, records: &Dir) -> Called {
        self.seq += 1;
        let seq = self.seq;
        let started = Instant::now();
        let done = |kind: Kind, text: String, is_error: bool| Called {
            error: is_error.then(|| CallError::text(text.strip_prefix("error: ").unwrap_or(&text))),
            text,
            is_error,
            kind,
            duration: started.elapsed(),
            exit_code: None,
            truncated: false,
            cut_at_cap: Vec::new(),
            events: Vec::new(),
        };
        // The runtime's own peer tools come first: no artifact can stand in for them.
        if let Some(out) = self.peer.as_ref().and_then(|p| p.call(name, input)) {
            return Called {
                events: vec![out.event],
                ..done(Kind::Peer, out.text, out.is_error)
            };
        }
        if let Some((text, is_error)) = self.delegate.as_ref().and_then(|d| d.call(name, input)) {
            return done(Kind::Delegate, text, is_error);
        }
        if let Some((_, program)) = self.natives.iter().find(|(n, _)| n == name) {
            let ran = self
                .runner
                .native(name, program, input.to_string().as_bytes(), records, seq);
            return Called {
                text: ran.text,
                is_error: ran.is_error,
                kind: Kind::Native,
                duration: ran.duration,
                exit_code: ran.exit_code,
                truncated: ran.truncated,
                cut_at_cap: ran.cut_at_cap,
                events: Vec::new(),
                error: ran.error,
            };
        }
        if self.runner.allows(name) {
            let Some(command) = input.get("command").and_then(Value::as_str) else {
                return done(
                    Kind::Shell,
                    format!("error: the {name} tool takes {{\"command\": string}}"),
                    true,
                );
            };
            let ran = self.runner.shell(name, command, records, seq);
            return Called {
                text: ran.text,
                is_error: ran.is_error,
                kind: Kind::Shell,
                duration: ran.duration,
                exit_code: ran.exit_code,
                truncated: ran.truncated,
                cut_at_cap: ran.cut_at_cap,
                events: Vec::new(),
                error: ran.error,
            };
        }
        if let Some((_, text)) = self.skills.iter().find(|(n, _)| n == name) {
            return done(Kind::Skill, text.clone(), false);
        }
        if let Some((_, tool)) = self.wasm.iter().find(|(n, _)| n == name) {
            let (text, is_error) = call_wasm(name, tool, input);
            return done(Kind::Wasm, text, is_error);
        }
        let shown = sanitize::one_line(name, 100);
        let known: Vec<&str> = self.specs.iter().map(|s| s.name.as_str()).collect();
        done(
            Kind::Unknown,
            format!(
                "error: unknown tool '{shown}'; the tools are: {}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
            true,
        )
    }
}

fn call_wasm(name: &str, tool: &WasmTool, input: &Value) -> (String, bool) {
    let host = match tool.grants.host(None, None, None) {
        Ok(h) => h,
        Err(e) => return (format!("error: cannot prepare {name}'s grants: {e}"), true),
    };
    match tool.prepared.call(host, tool.grants.deadline, input.to_string()) {
        Err(d) => (format!("error: {}", d.message), true),
        Ok(Err(trap)) => (format!("error: tool {name}: {}", trap_line(&trap)), true),
        Ok(Ok(reply)) => {
            let mut text = String::new();
            if let Some(s) = &reply.summary {
                let mut end = s.len().min(super::shell::SHOW_CAP);
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                text.push_str(&s[..end]);
            }
            let mut data = reply.data.clone();
            if data.is_none() {
                if let (Some(p), Some(dir)) = (&reply.data_path, &tool.grants.preopen) {
                    data = Some(match dir.read(p, super::shell::SHOW_CAP as u64) {
                        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                        Err(e) => format!("(cannot read data-path {p}: {e})"),
                    });
                }
            }
            if let Some(d) = data {
                if !text.is_empty() {
                    text.push('\n');
                }
                let mut end = d.len().min(super::shell::SHOW_CAP);
                while !d.is_char_boundary(end) {
                    end -= 1;
                }
                text.push_str(&d[..end]);
                if end < d.len() || reply.truncated {
                    text.push_str("\n[truncated]");
                }
            }
            (text, reply.status == ToolStatus::Error)
        }
    }
}
