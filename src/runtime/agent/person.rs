//! A person in the loop: the calls `approvals` names wait for the task's caller to approve
//! or deny them, and the `ask` tool puts the model's question to the caller. Either way the
//! task waits in `input-required` on the door's task table ([`Tasks::await_input`]) with
//! no model call in flight and no child started; the caller's follow-up message on the task
//! resumes it. A denial (or a wait run out under `on_timeout: deny`) is the tool result the
//! model reads. The trace records each request and its answer (`approval_requested`,
//! `approval_answered`, `input_requested`, `input_received`), and the hooks see both as
//! `tool-call` events named `approval` or `ask` (outcome `requested`, then the answer with
//! the wait's length), which the OpenTelemetry hook shows as a span.

use super::hooks::spec::Binding;
use super::peer::redact_value;
use super::task::{Session, TRACE_INPUT_CAP};
use super::tools::{CallError, Called, Kind, Toolbox};
use crate::agent::sanitize;
use crate::agent::wire::ToolSpec;
use crate::manifest::model::{Approvals, Ask, OnTimeout};
use crate::runtime::door::tasks::input::{Awaited, Kind as Waits};
use crate::runtime::door::tasks::Tasks;
use crate::runtime::wasm::hook::{CallInfo, Event};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The `ask` tool's name.
pub const ASK: &str = "ask";
/// The longest command a shell pattern is matched against, bytes: a longer one always
/// waits for approval.
pub const MAX_MATCHED: usize = 64 << 10;
/// The most bytes of a call's arguments or a question shown in the task's status.
pub const MAX_SHOWN: usize = 2000;

/// The session's person in the loop.
pub struct Person {
    pub tasks: Arc<Tasks>,
    pub approvals: Option<Approvals>,
    pub ask: Option<Ask>,
    /// The running task: its id and who may answer it: `a2a` (the credential that sent it),
    /// else nobody (`file`: `task.md`; `completion`: a delegation's report, which no caller
    /// can see or answer).
    pub task: (String, &'static str),
}

impl Person {
    /// Whether the running task has nobody to ask: its waits are denied at once.
    fn nobody_to_ask(&self) -> bool {
        self.task.1 != "a2a"
    }
}

/// The `ask` tool's spec.
pub fn ask_spec() -> ToolSpec {
    ToolSpec {
        name: ASK.into(),
        description: "Put a question to the person who gave you this task and wait for their answer, which this tool returns".into(),
        parameters: json!({
            "type": "object",
            "properties": {"question": {"type": "string", "description": "the question, as the person will read it"}},
            "required": ["question"]
        }),
    }
}

impl Person {
    /// The person of a session whose manifest declares `approvals` or `ask`.
    pub fn of(m: &crate::manifest::model::Manifest, tasks: &Arc<Tasks>) -> Option<Person> {
        (m.approvals.is_some() || m.ask.is_some()).then(|| Person {
            tasks: tasks.clone(),
            approvals: m.approvals.clone(),
            ask: m.ask,
            task: (String::new(), "file"),
        })
    }

    /// What kind of call `name(input)` is when it waits for approval (`tool`, `shell`,
    /// `delegation`), in the toolbox's own precedence; None when it runs at once.
    fn needs(&self, name: &str, input: &Value, tools: &Toolbox) -> Option<&'static str> {
        let a = self.approvals.as_ref()?;
        if name == super::delegate::NAME && tools.delegate.is_some() {
            let capsule = input.get("capsule").and_then(Value::as_str).unwrap_or("");
            return a
                .delegations
                .iter()
                .any(|d| d == "*" || d == capsule)
                .then_some("delegation");
        }
        if a.tools.iter().any(|t| t == name) {
            return Some("tool");
        }
        let native = tools.natives.iter().any(|(n, _)| n == name);
        if native || !tools.runner.allows(name) {
            return None;
        }
        let mut rules = a.shell.iter().filter(|r| r.binary == name).peekable();
        rules.peek()?;
        let command = input.get("command").and_then(Value::as_str).unwrap_or("");
        let Some(args) = shell_subject(name, command) else {
            return Some("shell");
        };
        rules
            .any(|r| match &r.pattern {
                None => true,
                Some(_) if args.len() > MAX_MATCHED => true,
                Some(p) => glob(p.as_bytes(), args.as_bytes()),
            })
            .then_some("shell")
    }
}

/// What an `approvals.shell` pattern is matched against for `binary`'s `command`: what
/// runs, not how the model spelled it: the words the runner splits the command into (quotes
/// and backslashes gone, a leading `binary` dropped) one space apart, or a shell's script as
/// it is. None when the command does not split (then the call is asked about).
pub fn shell_subject(binary: &str, command: &str) -> Option<String> {
    if super::shell::SHELLS.contains(&binary) {
        return Some(command.to_string());
    }
    super::shell::Runner::argv(binary, command)
        .ok()
        .map(|w| w.join(" "))
}

/// Whether `text` matches `pattern` whole: `*` any run of bytes, `?` one byte, anything
/// else itself. Linear backtracking on the last `*`: O(len(pattern) × len(text)).
pub fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

impl Session {
    /// The person's part in the call `name(input)` of `turn`: None when it runs now (no
    /// approval needed, or approved); else its outcome without running it (denied, or
    /// the `ask` tool's answer).
    pub(super) fn consult(&mut self, turn: u64, name: &str, input: &Value) -> Option<Called> {
        let person = self.person.as_ref()?;
        if name == ASK && person.ask.is_some() {
            return Some(self.ask(turn, input));
        }
        let kind = person.needs(name, input, &self.tools)?;
        self.approval(turn, (kind, name), input)
    }

    /// Wait for the caller on `waits`: the task's own wait, or at once (no caller: it is
    /// denied, whatever `on_timeout` says) for a task from `task.md`.
    fn wait_for(&self, waits: Waits, prompt: &str, secs: u64) -> Awaited {
        let Some(p) = self.person.as_ref() else {
            return Awaited::Canceled;
        };
        if p.nobody_to_ask() {
            return Awaited::TimedOut;
        }
        let cancel = self.tools.runner.cancel.clone();
        p.tasks.await_input(
            &p.task.0,
            (waits, prompt),
            Duration::from_secs(secs),
            (&cancel, &self.interrupted),
        )
    }

    fn task_id(&self) -> String {
        self.person.as_ref().map(|p| p.task.0.clone()).unwrap_or_default()
    }

    /// A hook's `tool-call` event for the person's part.
    fn person_hook(&mut self, turn: u64, (name, input): (&str, &Value), outcome: &str, waited: Duration) {
        self.fire(Binding::ToolCall, || {
            Event::ToolCall(CallInfo {
                turn: u32::try_from(turn).unwrap_or(u32::MAX),
                name: name.to_string(),
                input: input.to_string(),
                outcome: outcome.to_string(),
                exit_code: None,
                duration_ms: waited.as_millis() as u64,
            })
        });
    }

    /// A call that waits for approval: None when approved (it runs), else its denial. A
    /// call whose arguments do not fit the status message is denied without asking: the
    /// person would approve what they cannot see.
    fn approval(&mut self, turn: u64, (kind, name): (&str, &str), input: &Value) -> Option<Called> {
        let a = self.person.as_ref()?.approvals.clone()?;
        let shown = redact_value(input);
        let tool = sanitize::one_line(name, 100);
        let prompt = approval_prompt((kind, &tool), &shown, &a);
        let task_id = self.task_id();
        let recorded = cut(&shown);
        self.event(
            "approval_requested",
            json!({"task_id": task_id, "turn": turn, "tool_name": name, "kind": kind,
                   "input": recorded, "timeout_secs": a.timeout_secs}),
        );
        let about = json!({"tool": name, "input": recorded});
        self.person_hook(turn, ("approval", &about), "requested", Duration::ZERO);
        let started = Instant::now();
        let (decision, by, credential) = match &prompt {
            Some(p) => self.decide(&a, p),
            None => ("denied", "too_long", None),
        };
        let waited = started.elapsed();
        self.event(
            "approval_answered",
            json!({"task_id": task_id, "turn": turn, "tool_name": name, "decision": decision,
                   "by": by, "credential": credential, "duration_ms": waited.as_millis() as u64}),
        );
        self.person_hook(turn, ("approval", &about), decision, waited);
        if decision == "approved" {
            return None;
        }
        let why = match by {
            "caller" => format!("the person who gave this task denied this call of {tool}"),
            "timeout" => format!(
                "no answer to the approval of this call of {tool} within {} s (approvals.on_timeout: deny)",
                a.timeout_secs
            ),
            "no_caller" => format!(
                "this task came from task.md: there is nobody to approve this call of {tool}"
            ),
            "too_long" => format!(
                "the arguments of this call of {tool} are too long to show for approval (at most {MAX_SHOWN} characters)"
            ),
            _ => format!("the task stopped while this call of {tool} waited for approval"),
        };
        Some(person_called(
            Kind::Denied,
            format!("error: {why}; it did not run"),
            true,
            waited,
        ))
    }

    /// Wait for the caller's decision on `prompt`: (decision, by, credential).
    fn decide(&self, a: &Approvals, prompt: &str) -> (&'static str, &'static str, Option<String>) {
        let awaited = self.wait_for(Waits::Approval, prompt, a.timeout_secs);
        let no_caller = self.person.as_ref().is_some_and(Person::nobody_to_ask);
        match awaited {
            Awaited::TimedOut if no_caller => ("denied", "no_caller", None),
            Awaited::Answered(r) if r.decision() == Some(true) => ("approved", "caller", r.by),
            Awaited::Answered(r) => ("denied", "caller", r.by),
            Awaited::TimedOut if a.on_timeout == OnTimeout::Approve => ("approved", "timeout", None),
            Awaited::TimedOut => ("denied", "timeout", None),
            Awaited::Canceled => ("canceled", "cancel", None),
            Awaited::Stopped => ("interrupted", "signal", None),
        }
    }

    /// The `ask` tool: the question to the caller, the answer its result.
    fn ask(&mut self, turn: u64, input: &Value) -> Called {
        let started = Instant::now();
        let Some(question) = input
            .get("question")
            .and_then(Value::as_str)
            .filter(|q| !q.trim().is_empty())
        else {
            let e = "error: the ask tool takes {\"question\": string}".to_string();
            return person_called(Kind::Ask, e, true, started.elapsed());
        };
        let secs = self
            .person
            .as_ref()
            .and_then(|p| p.ask)
            .map_or(0, |a| a.timeout_secs);
        // A peer handle (a credential) in the question reaches no trace, hook or caller.
        let redacted = redact_value(input);
        let question = redacted
            .get("question")
            .and_then(Value::as_str)
            .unwrap_or(question);
        let shown = sanitize::one_line(question, MAX_SHOWN);
        let task_id = self.task_id();
        self.event(
            "input_requested",
            json!({"task_id": task_id, "turn": turn, "question": cut(&Value::from(question)), "timeout_secs": secs}),
        );
        self.person_hook(turn, (ASK, &redacted), "requested", Duration::ZERO);
        let awaited = self.wait_for(Waits::Question, &shown, secs);
        let waited = started.elapsed();
        let (outcome, credential, text, is_error) = match awaited {
            Awaited::Answered(r) => ("answered", r.by.clone(), r.answer(), false),
            Awaited::TimedOut if self.person.as_ref().is_some_and(Person::nobody_to_ask) => (
                "no_caller",
                None,
                "error: this task came from task.md or a delegation's report: there is nobody to ask".into(),
                true,
            ),
            Awaited::TimedOut => (
                "timed_out",
                None,
                format!("error: no answer within {secs} s"),
                true,
            ),
            Awaited::Canceled => ("canceled", None, "error: the task was canceled".into(), true),
            Awaited::Stopped => ("interrupted", None, "error: the session is stopping".into(), true),
        };
        self.event(
            "input_received",
            json!({"task_id": task_id, "turn": turn, "outcome": outcome, "credential": credential,
                   "duration_ms": waited.as_millis() as u64}),
        );
        person_called(Kind::Ask, text, is_error, waited)
    }
}

/// The status message of a call waiting for approval; None when its arguments, as one
/// line, pass [`MAX_SHOWN`] characters (they could not be shown whole).
fn approval_prompt((kind, tool): (&str, &str), shown: &Value, a: &Approvals) -> Option<String> {
    let args = sanitize::one_line(&shown.to_string(), MAX_SHOWN + 1);
    if args.chars().count() > MAX_SHOWN {
        return None;
    }
    Some(format!(
        "approval required: the agent wants to call {kind} {tool} with {args}. Answer on this task (same taskId) with a data part {{\"approve\": true}} or {{\"approve\": false}}, or the text approve or deny; without an answer within {} s the call is {}.",
        a.timeout_secs,
        if a.on_timeout == OnTimeout::Approve { "approved" } else { "denied" }
    ))
}

/// A call's input for the trace, cut at [`TRACE_INPUT_CAP`].
fn cut(v: &Value) -> Value {
    let text = v.to_string();
    if text.len() <= TRACE_INPUT_CAP {
        return v.clone();
    }
    Value::String(sanitize::one_line(&text, TRACE_INPUT_CAP))
}

fn person_called(kind: Kind, text: String, is_error: bool, duration: Duration) -> Called {
    Called {
        error: is_error.then(|| CallError::text(text.strip_prefix("error: ").unwrap_or(&text))),
        text,
        is_error,
        kind,
        duration,
        exit_code: None,
        truncated: false,
        cut_at_cap: Vec::new(),
        events: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::{glob, shell_subject};

    /// A pattern is matched against what runs, however the model quoted or spaced it.
    #[test]
    fn a_pattern_sees_the_words_that_run_not_their_spelling() {
        for spelled in [
            "push --force",
            "git push --force",
            "git \"push\" --force",
            "git p\\ush --force",
            "\"git\" push --force",
            "git  push   --force",
            "'push' '--force'",
        ] {
            let subject = shell_subject("git", spelled).unwrap();
            assert_eq!(subject, "push --force", "{spelled}");
            assert!(glob(b"push*", subject.as_bytes()), "{spelled}");
        }
        // A command that does not split is asked about (None), a shell's script is as it is.
        assert_eq!(shell_subject("git", "push \"unterminated"), None);
        assert_eq!(
            shell_subject("bash", "echo 'a'  b").as_deref(),
            Some("echo 'a'  b")
        );
    }

    #[test]
    fn a_glob_matches_whole_commands() {
        assert!(glob(b"push*", b"push origin main"));
        assert!(glob(b"*--force*", b"push --force origin"));
        assert!(!glob(b"push*", b"pull origin"));
        assert!(glob(b"p?sh", b"push"));
        assert!(!glob(b"push", b"push origin"));
        assert!(glob(b"*", b""));
        assert!(glob(b"a*b*c", b"axxbyyc"));
        assert!(!glob(b"a*b*c", b"axxbyy"));
    }
}
