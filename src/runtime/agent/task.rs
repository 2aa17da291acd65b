//! One task's inference loop: a turn is one driver call with the whole conversation; a
//! `tool_call` response runs each call in order and appends the assistant message and one
//! tool message per call; `end_turn` or `max_tokens` ends the task with the response's
//! text; `inference.max_turns` turns without an end is `max_turns_reached`; a driver error,
//! an unparsable response or a trap fails the task. Every step is traced.
//!
//! The loop owns no I/O beyond its [`Session`]: tasks from `task.md` today, from A2A next,
//! and hooks and compaction plug in around [`Session::run_task`] and its turns.

use super::driver::Driver;
use super::tools::Toolbox;
use crate::agent::wire::{self, Message, Role, StopReason, Usage};
use crate::fsx::Dir;
use crate::runtime::trace::Trace;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The most bytes of a tool call's input written into the trace.
pub const TRACE_INPUT_CAP: usize = 4096;

/// A task to run.
pub struct Task {
    pub id: String,
    pub context_id: String,
    /// Where it came from: `task.md` (the file or `--task`).
    pub source: &'static str,
    pub text: String,
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEnd {
    /// `end_turn` (or `max_tokens`, `truncated`): the final text.
    Done {
        text: String,
        truncated: bool,
    },
    MaxTurns,
    Failed(String),
}

impl TaskEnd {
    pub fn exit_status(&self) -> &'static str {
        match self {
            TaskEnd::Done { .. } => "ok",
            TaskEnd::MaxTurns => "max_turns_reached",
            TaskEnd::Failed(_) => "failed",
        }
    }
}

/// The session's running totals.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub turns: u64,
    pub usage: Usage,
    pub tool_calls: u64,
    pub shell_calls: u64,
}

/// What a task needs from its session.
pub struct Session<'a> {
    pub driver: Driver,
    pub tools: Toolbox,
    pub trace: &'a mut Trace,
    pub records: &'a Dir,
    pub model: String,
    pub max_tokens: u64,
    pub max_turns: u64,
    pub system: String,
    pub params: Value,
    pub totals: Totals,
    /// Launch and loop notes for `logs/bootstrap.log`.
    pub notes: Vec<String>,
    /// A trace write failed: the task ends (a session is never run untraced).
    pub broken: Option<String>,
    /// The SIGTERM or SIGINT that stopped the session (0: none).
    pub interrupted: Arc<AtomicI32>,
}

fn input_for_trace(input: &Value) -> Value {
    let text = input.to_string();
    if text.len() <= TRACE_INPUT_CAP {
        return input.clone();
    }
    let mut end = TRACE_INPUT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Value::String(format!("{}… ({} bytes)", &text[..end], text.len()))
}

impl Session<'_> {
    fn event(&mut self, kind: &str, fields: Value) {
        if let Err(e) = self.trace.event(kind, fields) {
            self.notes.push(format!("trace: cannot write {kind}: {e}"));
            self.broken
                .get_or_insert_with(|| format!("cannot write trace.jsonl ({kind}): {e}"));
        }
    }

    /// Run `task` to its end.
    pub fn run_task(&mut self, task: &Task) -> (TaskEnd, Totals) {
        let started = Instant::now();
        let mut totals = Totals::default();
        self.event(
            "task_start",
            json!({"task_id": task.id, "context_id": task.context_id, "source": task.source}),
        );
        let mut messages = vec![Message::user(&task.text)];
        let end = loop {
            if let Some(e) = self.broken.clone() {
                break TaskEnd::Failed(e);
            }
            let sig = self.interrupted.load(Ordering::SeqCst);
            if sig != 0 {
                break TaskEnd::Failed(format!("interrupted by signal {sig}"));
            }
            if totals.turns >= self.max_turns {
                break TaskEnd::MaxTurns;
            }
            totals.turns += 1;
            let turn = totals.turns;
            let request = wire::request(
                &self.model,
                self.max_tokens,
                &self.system,
                &messages,
                &self.tools.specs,
                &self.params,
            );
            let mut retries = Vec::new();
            let response = self.driver.call(&request, |r| retries.push(r.clone()));
            for r in retries {
                self.event(
                    "inference_retry",
                    json!({"turn": turn, "attempt": r.attempt, "reason": r.reason, "delay_ms": r.delay.as_millis() as u64}),
                );
            }
            let response = match response {
                Ok(r) => r,
                Err(e) => {
                    self.event(
                        "inference",
                        json!({"turn": turn, "input_tokens": 0, "output_tokens": 0, "decision": "error", "tool_name": null, "error": e}),
                    );
                    break TaskEnd::Failed(e);
                }
            };
            let u = &mut totals.usage;
            u.input_tokens = u.input_tokens.saturating_add(response.usage.input_tokens);
            u.output_tokens = u.output_tokens.saturating_add(response.usage.output_tokens);
            u.cached_tokens = u.cached_tokens.saturating_add(response.usage.cached_tokens);
            let calls: Vec<(String, String, Value)> = response
                .calls()
                .into_iter()
                .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
                .collect();
            self.event(
                "inference",
                json!({
                    "turn": turn,
                    "input_tokens": response.usage.input_tokens,
                    "output_tokens": response.usage.output_tokens,
                    "decision": response.stop_reason.as_str(),
                    "tool_name": calls.first().map(|c| c.1.clone()),
                    "tool_calls": calls.len(),
                }),
            );
            let assistant = Message {
                role: Role::Assistant,
                content: response.content.clone(),
                tool_call_id: None,
                is_error: false,
            };
            if response.stop_reason != StopReason::ToolCall {
                break TaskEnd::Done {
                    text: assistant.text(),
                    truncated: response.stop_reason == StopReason::MaxTokens,
                };
            }
            messages.push(assistant);
            for (id, name, input) in calls {
                if self.interrupted.load(Ordering::SeqCst) != 0 {
                    break;
                }
                let called = self.tools.call(&name, &input, self.records);
                totals.tool_calls += 1;
                let status = if called.is_error { "error" } else { "ok" };
                let mut fields = json!({
                    "turn": turn,
                    "tool_name": name,
                    "kind": called.kind.as_str(),
                    "input": input_for_trace(&input),
                    "duration_ms": called.duration.as_millis() as u64,
                    "status": status,
                });
                if called.truncated {
                    fields["truncated"] = true.into();
                }
                self.event("tool_call", fields);
                if called.kind == super::tools::Kind::Shell {
                    totals.shell_calls += 1;
                    self.event(
                        "shell",
                        json!({
                            "turn": turn,
                            "binary": name,
                            "exit_code": called.exit_code,
                            "duration_ms": called.duration.as_millis() as u64,
                        }),
                    );
                }
                messages.push(Message::tool(&id, called.text, called.is_error));
            }
        };
        let t = &mut self.totals;
        t.turns += totals.turns;
        t.usage.input_tokens = t.usage.input_tokens.saturating_add(totals.usage.input_tokens);
        t.usage.output_tokens = t.usage.output_tokens.saturating_add(totals.usage.output_tokens);
        t.usage.cached_tokens = t.usage.cached_tokens.saturating_add(totals.usage.cached_tokens);
        self.totals.tool_calls += totals.tool_calls;
        self.totals.shell_calls += totals.shell_calls;
        self.event(
            "task_end",
            json!({
                "task_id": task.id,
                "exit_status": end.exit_status(),
                "turns": totals.turns,
                "tool_calls": totals.tool_calls,
                "shell_calls": totals.shell_calls,
                "duration_ms": ms(started),
                "reopen_count": 0,
                "input_tokens": totals.usage.input_tokens,
                "output_tokens": totals.usage.output_tokens,
            }),
        );
        (end, totals)
    }
}

/// Milliseconds since `t`.
pub fn ms(t: Instant) -> u64 {
    t.elapsed().as_millis() as u64
}
