//! One task's inference loop: a turn is one driver call with the whole conversation; a
//! `tool_call` response runs each call in order and appends the assistant message and one
//! tool message per call; `end_turn` or `max_tokens` ends the task with the response's
//! text; `inference.max_turns` turns without an end is `max_turns_reached`; a call a spend
//! ceiling refuses before it is sent is `spend_ceiling_reached` ([`super::spend`]); a driver
//! error, an unparsable response or a trap fails the task. Every step is traced.
//!
//! The loop owns no I/O beyond its [`Session`]: tasks from `task.md` today, from A2A next,
//! and hooks and compaction plug in around [`Session::run_task`] and its turns.

use super::driver::Driver;
use super::hooks::spec::{Binding, Policy};
use super::hooks::{self, convert, Hooks};
use super::peer::redact_value;
use super::spend::{Ceiling, Meter, Refusal};
use super::tools::{CallError, Toolbox};
use crate::agent::wire::{self, Message, Role, StopReason, Usage};
use crate::fsx::Dir;
use crate::runtime::trace::Trace;
use crate::runtime::wasm::hook::{
    CallInfo, CompactionInfo, Event, InferenceInfo, Output, TaskEndInfo, TaskInfo, Usage as HookUsage,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A hook's deadline once the session has been told to stop, seconds.
pub const SHUTDOWN_HOOK_SECS: u64 = 2;
/// The most bytes of a tool call's input written into the trace.
pub const TRACE_INPUT_CAP: usize = 4096;

/// A task to run.
pub struct Task {
    pub id: String,
    pub context_id: String,
    /// Where it came from: `file` (`task.md` or `--task`) or `a2a`.
    pub source: &'static str,
    /// Who gave it (`file`, `event`, `peer`, `completion`): a `completion` runs in the
    /// background lane.
    pub origin: String,
    /// The trust class of its origin (`trusted` or `untrusted`): a delegation made from
    /// it carries this class.
    pub trust: String,
    /// The caller's W3C `traceparent`, when the A2A request carried a well-formed one.
    pub traceparent: Option<String>,
    pub text: String,
    /// Set when the task is canceled (over A2A): the loop stops at its next safe point.
    pub cancel: Arc<AtomicBool>,
    /// The earlier tasks of its context, oldest first: the conversation it continues.
    pub earlier: Vec<super::contexts::Exchange>,
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
    /// Canceled over A2A; the loop stopped at a safe point.
    Canceled,
    /// A hook still asked to reopen when the reopen budget (or the turns) ran out, after
    /// `reopens` reopens.
    ReopenBudgetExhausted {
        reopens: u64,
        out_of_turns: bool,
    },
    /// A spend ceiling refused the next model call before it was sent.
    SpendCeiling(Ceiling),
}

impl TaskEnd {
    pub fn exit_status(&self) -> &'static str {
        match self {
            TaskEnd::Done { .. } => "ok",
            TaskEnd::MaxTurns => "max_turns_reached",
            TaskEnd::Failed(_) => "failed",
            TaskEnd::Canceled => "canceled",
            TaskEnd::ReopenBudgetExhausted { .. } => "reopen_budget_exhausted",
            TaskEnd::SpendCeiling(_) => SPEND_CEILING_REACHED,
        }
    }
}

/// The exit status of a task (and session) a spend ceiling ended.
pub const SPEND_CEILING_REACHED: &str = "spend_ceiling_reached";

/// The session's running totals.
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    pub turns: u64,
    pub usage: Usage,
    pub tool_calls: u64,
    pub shell_calls: u64,
}

/// What a task needs from its session.
pub struct Session {
    pub driver: Driver,
    pub tools: Toolbox,
    pub trace: Trace,
    pub records: Dir,
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
    pub hooks: Hooks,
    /// `context.max_tokens` (None: no compaction) and `inference.compaction.threshold`.
    pub context_max_tokens: Option<u64>,
    pub threshold: f64,
    /// `inference.max_task_reopens`.
    pub max_task_reopens: u64,
    /// A compaction hook failed: no further turn and no reopening (the spec's fatal case).
    pub halted: bool,
    /// The spend ceilings and the ledger every model call is checked against and charged to.
    pub spend: Meter,
    /// A spend ceiling refused a call: no further task (a ceiling stays reached).
    pub spent: bool,
    /// `approvals` and `ask`: the task's caller in the loop (None: neither declared).
    pub person: Option<super::person::Person>,
}

fn input_for_trace(input: &Value) -> Value {
    let text = input.to_string();
    if text.len() <= TRACE_INPUT_CAP {
        return input.clone();
    }
    Value::String(cut_for_trace(&text))
}

/// `text` cut at [`TRACE_INPUT_CAP`] bytes, saying how long it was.
fn cut_for_trace(text: &str) -> String {
    if text.len() <= TRACE_INPUT_CAP {
        return text.to_string();
    }
    let mut end = TRACE_INPUT_CAP;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// A failed call's `error_code` (when it has one), `error` and `hint` added to the trace
/// `fields` of its `tool_call` or `shell` event; no peer handle reaches the trace.
fn with_error(mut fields: Value, error: Option<&CallError>) -> Value {
    let Some(e) = error else {
        return fields;
    };
    if let Some(code) = e.code {
        fields["error_code"] = code.into();
    }
    fields["error"] = redact_value(&Value::String(cut_for_trace(&e.message)));
    if let Some(hint) = &e.hint {
        fields["hint"] = redact_value(&Value::String(cut_for_trace(hint)));
    }
    fields
}

impl Session {
    /// Write one trace event; a failed write ends the task (`broken`).
    pub fn event(&mut self, kind: &str, fields: Value) {
        if let Err(e) = self.trace.event(kind, fields) {
            self.notes.push(format!("trace: cannot write {kind}: {e}"));
            self.broken
                .get_or_insert_with(|| format!("cannot write trace.jsonl ({kind}): {e}"));
        }
    }

    /// Trace the failures of blocking hooks at `b` (their logs have them already).
    fn hook_failures(&mut self, b: Binding, failures: Vec<hooks::Failure>) {
        for f in failures {
            self.event(
                "hook_error",
                json!({"hook_name": f.hook, "binding": b.as_str(), "error": f.error}),
            );
        }
    }

    /// Trace one hook's failure at `b`.
    pub fn trace_hook_failure(&mut self, b: Binding, f: hooks::Failure) {
        self.hook_failures(b, vec![f]);
    }

    /// Fire `b` and keep the answers; failures are traced.
    pub fn fire(&mut self, b: Binding, event: impl FnOnce() -> Event) -> Vec<hooks::Answer> {
        if self.interrupted.load(Ordering::SeqCst) != 0 {
            self.hooks.cap_deadlines(SHUTDOWN_HOOK_SECS);
        }
        let fired = self.hooks.fire(b, event);
        self.hook_failures(b, fired.failures);
        fired.answers
    }

    /// Run `task` to its end: attempts of the loop, each followed by `on-task-end`, which
    /// may reopen the task within `inference.max_task_reopens` and the turn budget (shared
    /// by every attempt).
    /// `settle` records the end where it must go (`out/result.txt`) before `task_end` is
    /// traced, and may turn it into a failure (a result that could not be written), so the
    /// trace never says `ok` for a task whose answer was lost.
    pub fn run_task(&mut self, task: &Task, settle: impl FnOnce(TaskEnd) -> TaskEnd) -> (TaskEnd, Totals) {
        let started = Instant::now();
        let mut totals = Totals::default();
        let mut start = json!({"task_id": task.id, "context_id": task.context_id, "source": task.source,
                   "origin": task.origin, "trust": task.trust});
        if !task.earlier.is_empty() {
            // The model sees the context's earlier tasks first: the trace says how many.
            start["earlier_tasks"] = task.earlier.len().into();
        }
        self.event("task_start", start);
        self.fire(Binding::TaskStart, || {
            Event::TaskStart(TaskInfo {
                task_id: task.id.clone(),
                context_id: task.context_id.clone(),
                source: task.source.to_string(),
                input_bytes: task.text.len() as u64,
                traceparent: task.traceparent.clone(),
            })
        });
        if let Some(d) = self.tools.delegate.as_mut() {
            d.set_task(&task.context_id, &task.trust);
        }
        // A shell or native call in progress is killed when this task is canceled.
        self.tools.runner.cancel = task.cancel.clone();
        if let Some(p) = self.person.as_mut() {
            let who = if task.origin == "completion" {
                "completion"
            } else {
                task.source
            };
            p.task = (task.id.clone(), who);
        }
        let mut text = task.text.clone();
        let mut reopens = 0u64;
        let end = loop {
            let end = self.attempt((&task.earlier, &text), &task.cancel, &mut totals);
            let result_text = match &end {
                TaskEnd::Done { text, .. } => text.clone(),
                TaskEnd::Failed(e) => format!("error: {e}"),
                TaskEnd::Canceled => "error: canceled".into(),
                TaskEnd::MaxTurns => "error: max_turns reached".into(),
                TaskEnd::ReopenBudgetExhausted { .. } => String::new(),
                TaskEnd::SpendCeiling(c) => {
                    format!("error: {SPEND_CEILING_REACHED}: {}", c.reason(&self.spend_id()))
                }
            };
            let answers = self.fire(Binding::TaskEnd, || {
                Event::TaskEnd(TaskEndInfo {
                    task_id: task.id.clone(),
                    exit_status: end.exit_status().to_string(),
                    turns: u32::try_from(totals.turns).unwrap_or(u32::MAX),
                    result_text,
                })
            });
            let reopen = answers.into_iter().find_map(|a| match a.output {
                Output::ReopenTask(reason) if a.effective && a.policy == Policy::ReopenTask => {
                    Some((a.hook, reason))
                }
                _ => None,
            });
            let Some((hook, reason)) = reopen else { break end };
            let stopped = self.halted
                || self.spent
                || self.broken.is_some()
                || self.interrupted.load(Ordering::SeqCst) != 0
                || task.cancel.load(Ordering::SeqCst);
            if stopped {
                break end;
            }
            if reopens >= self.max_task_reopens || totals.turns >= self.max_turns {
                break TaskEnd::ReopenBudgetExhausted {
                    reopens,
                    out_of_turns: reopens < self.max_task_reopens,
                };
            }
            reopens += 1;
            let reason = crate::agent::sanitize::one_line(&reason, 4000);
            self.event(
                "task_reopened",
                json!({"task_id": task.id, "hook_name": hook, "reason": reason, "reopen_number": reopens}),
            );
            text = format!(
                "{text}\n\nFeedback on the previous attempt (reopen {reopens}, from {hook}): {reason}"
            );
        };
        let end = settle(end);
        self.finish_task(task, &end, &totals, reopens, started);
        (end, totals)
    }

    fn finish_task(&mut self, task: &Task, end: &TaskEnd, totals: &Totals, reopens: u64, started: Instant) {
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
                "reopen_count": reopens,
                "input_tokens": totals.usage.input_tokens,
                "output_tokens": totals.usage.output_tokens,
            }),
        );
    }

    /// One run of the loop on `text`, counting into `totals` (turns are cumulative).
    /// A new conversation: the system prompt and tools, the context's earlier exchanges,
    /// then the task's text.
    fn conversation(&self, earlier: &[super::contexts::Exchange], text: &str) -> wire::Conversation {
        let mut conversation = wire::Conversation::new(
            &self.model,
            self.max_tokens,
            &self.system,
            &self.tools.specs,
            &self.params,
        );
        for x in earlier {
            conversation.push(Message::user(&x.asked));
            conversation.push(Message::assistant(&x.answered));
        }
        conversation.push(Message::user(text));
        conversation
    }

    fn attempt(
        &mut self,
        (earlier, text): (&[super::contexts::Exchange], &str),
        cancel: &AtomicBool,
        totals: &mut Totals,
    ) -> TaskEnd {
        let mut conversation = self.conversation(earlier, text);
        loop {
            if let Some(end) = self.before_turn(cancel, totals) {
                return end;
            }
            if let Some(end) = self.before_call(totals.turns + 1) {
                return end;
            }
            totals.turns += 1;
            let turn = totals.turns;
            let mut retries = Vec::new();
            let response = self
                .driver
                .call(conversation.request(), |r| retries.push(r.clone()));
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
                    let model = self.model.clone();
                    self.fire(Binding::Inference, || {
                        inference_event(turn, "error", (0, 0), &model)
                    });
                    // A call dropped by a signal fails for the signal, as a tool call does.
                    return match self.interrupted.load(Ordering::SeqCst) {
                        0 => TaskEnd::Failed(e),
                        sig => TaskEnd::Failed(format!("interrupted by signal {sig}")),
                    };
                }
            };
            let charged = self.charge(&response.usage);
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
            let (i, o) = (response.usage.input_tokens, response.usage.output_tokens);
            let decision = response.stop_reason.as_str();
            let model = self.model.clone();
            self.fire(Binding::Inference, || {
                inference_event(turn, decision, (i, o), &model)
            });
            // Tokens spent and not charged: no further call is made unmetered.
            if let Err(e) = charged {
                return TaskEnd::Failed(e);
            }
            // A cancel that arrived while the model answered: the answer is not the task's.
            if cancel.load(Ordering::SeqCst) {
                return TaskEnd::Canceled;
            }
            let assistant = Message {
                role: Role::Assistant,
                content: response.content.clone(),
                tool_call_id: None,
                is_error: false,
            };
            if response.stop_reason != StopReason::ToolCall {
                return TaskEnd::Done {
                    text: assistant.text(),
                    truncated: response.stop_reason == StopReason::MaxTokens,
                };
            }
            conversation.push(assistant);
            for (id, name, input) in calls {
                if self.interrupted.load(Ordering::SeqCst) != 0 || cancel.load(Ordering::SeqCst) {
                    break;
                }
                let answer = self.call_tool(turn, &id, &name, &input, totals);
                conversation.push(answer);
            }
            // A cancel during the tool calls: no compaction for a task that is over.
            if cancel.load(Ordering::SeqCst) {
                return TaskEnd::Canceled;
            }
            let tokens = response
                .usage
                .input_tokens
                .saturating_add(response.usage.output_tokens);
            if let Err(e) = self.maybe_compact(turn, tokens, &mut conversation) {
                return TaskEnd::Failed(e);
            }
        }
    }

    /// Why the loop stops before another turn: a failed trace, a cancel, a signal, or the
    /// turn budget spent.
    fn before_turn(&self, cancel: &AtomicBool, totals: &Totals) -> Option<TaskEnd> {
        if let Some(e) = self.broken.clone() {
            return Some(TaskEnd::Failed(e));
        }
        if cancel.load(Ordering::SeqCst) {
            return Some(TaskEnd::Canceled);
        }
        let sig = self.interrupted.load(Ordering::SeqCst);
        if sig != 0 {
            return Some(TaskEnd::Failed(format!("interrupted by signal {sig}")));
        }
        (totals.turns >= self.max_turns).then_some(TaskEnd::MaxTurns)
    }

    /// Whether the spend meter lets the call of `turn` go: a reached ceiling is traced
    /// (`spend_ceiling`: which, whose, its limit and what was used) and ends the task.
    fn before_call(&mut self, turn: u64) -> Option<TaskEnd> {
        match self.spend.check(crate::clock::now_ms()) {
            Ok(()) => None,
            Err(Refusal::Ledger(e)) => Some(TaskEnd::Failed(e)),
            Err(Refusal::Ceiling(c)) => {
                self.event(
                    "spend_ceiling",
                    json!({"turn": turn, "ceiling": c.which, "ceiling_session_id": c.session, "key": c.key(),
                           "limit": c.limit, "used": c.used, "reason": c.reason(&self.spend_id())}),
                );
                self.spent = true;
                Some(TaskEnd::SpendCeiling(c))
            }
        }
    }

    /// Charge a call's reported input and output tokens to the ledger.
    fn charge(&mut self, usage: &Usage) -> Result<(), String> {
        let tokens = usage.input_tokens.saturating_add(usage.output_tokens);
        self.spend.charge(tokens, crate::clock::now_ms()).map_err(|e| {
            format!("the model call's {tokens} tokens could not be charged to the spend ledger: {e}")
        })
    }

    /// This session's id, as its spend meter knows it.
    pub fn spend_id(&self) -> String {
        self.spend.session_id().to_string()
    }

    /// One tool call of the model's: run, traced (`tool_call`, and `shell` for a shell
    /// binary), its hook fired; the tool message the model reads next.
    fn call_tool(&mut self, turn: u64, id: &str, name: &str, input: &Value, totals: &mut Totals) -> Message {
        let mut called = match self.consult(turn, name, input) {
            Some(answered) => answered,
            None => self.tools.call(name, input, &self.records),
        };
        totals.tool_calls += 1;
        // A call with no exit of its own while the session was stopping or its task was
        // canceled was killed for that: it is `interrupted`, not a call that went fine.
        let stopping =
            self.interrupted.load(Ordering::SeqCst) != 0 || self.tools.runner.cancel.load(Ordering::SeqCst);
        let status = match (called.is_error, called.exit_code, stopping) {
            (false, None, true) => "interrupted",
            (true, _, _) => "error",
            _ => "ok",
        };
        // No peer handle reaches a trace line or a hook: each is named by its id.
        let recorded = redact_value(input);
        for (kind, fields) in std::mem::take(&mut called.events) {
            self.event(kind, redact_value(&fields));
        }
        let mut fields = json!({
            "turn": turn,
            "tool_name": name,
            "kind": called.kind.as_str(),
            "input": input_for_trace(&recorded),
            "duration_ms": called.duration.as_millis() as u64,
            "status": status,
        });
        if called.truncated {
            fields["truncated"] = true.into();
        }
        // A stream cut at the records' cap says so, with how much there was.
        if !called.cut_at_cap.is_empty() {
            let cut: serde_json::Map<String, Value> = called
                .cut_at_cap
                .iter()
                .map(|(name, bytes)| {
                    let at = json!({"bytes": bytes, "cap": super::shell::SAVE_CAP});
                    (name.to_string(), at)
                })
                .collect();
            fields["truncated_at_cap"] = Value::Object(cut);
        }
        let error = called.error.as_ref().filter(|_| called.is_error);
        self.event("tool_call", with_error(fields, error));
        if called.kind == super::tools::Kind::Shell {
            totals.shell_calls += 1;
            let fields = json!({
                "turn": turn,
                "binary": name,
                "exit_code": called.exit_code,
                "duration_ms": called.duration.as_millis() as u64,
            });
            self.event("shell", with_error(fields, error));
        }
        let shell = called.kind == super::tools::Kind::Shell;
        let binding = if shell { Binding::Shell } else { Binding::ToolCall };
        self.fire(binding, || {
            let info = CallInfo {
                turn: u32::try_from(turn).unwrap_or(u32::MAX),
                name: name.to_string(),
                input: recorded.to_string(),
                outcome: status.to_string(),
                exit_code: called.exit_code,
                duration_ms: called.duration.as_millis() as u64,
            };
            if shell {
                Event::Shell(info)
            } else {
                Event::ToolCall(info)
            }
        });
        Message::tool(id, called.text, called.is_error)
    }

    /// After a tool turn: when `context.max_tokens` is set and this turn's tokens reach
    /// the threshold, `on-compaction` replaces the history (never a turn); with no hook
    /// bound, a note and the history as it is; a bound hook's failure ends the task.
    fn maybe_compact(
        &mut self,
        turn: u64,
        tokens: u64,
        conversation: &mut wire::Conversation,
    ) -> Result<(), String> {
        let Some(max) = self.context_max_tokens else {
            return Ok(());
        };
        if (tokens as f64) < self.threshold * max as f64 {
            return Ok(());
        }
        if !self.hooks.has_compactor() {
            let note = format!(
                "warning: turn {turn}: {tokens} tokens reach inference.compaction.threshold of context.max_tokens ({max}), but no hook is bound to on-compaction; the history is kept"
            );
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
            return Ok(());
        }
        let before: Vec<Message> = conversation.messages().to_vec();
        let (model, system, threshold) = (self.model.clone(), self.system.clone(), self.threshold);
        if self.interrupted.load(Ordering::SeqCst) != 0 {
            self.hooks.cap_deadlines(SHUTDOWN_HOOK_SECS);
        }
        let fired = self.hooks.fire(Binding::Compaction, || {
            Event::Compaction(CompactionInfo {
                messages: before.iter().map(convert::to_hook).collect(),
                session_tokens: tokens,
                threshold,
                model: Some(model),
                system_prompt: Some(system),
            })
        });
        // Only a compactor's failure is the session's: an observer's is traced, no more.
        let fatal = fired
            .failures
            .iter()
            .find(|f| f.compactor)
            .map(|f| format!("compaction hook {} failed: {}", f.hook, f.error));
        self.hook_failures(Binding::Compaction, fired.failures);
        if let Some(e) = fatal {
            self.halted = true;
            return Err(e);
        }
        let replaced = fired.answers.into_iter().find_map(|a| match a.output {
            Output::ReplaceContext(list) if a.effective && a.policy == Policy::ReplaceContext => {
                Some((a.hook, list))
            }
            _ => None,
        });
        if let Some((hook, list)) = replaced {
            let history = match convert::from_hook(&list, &before) {
                Ok(h) => h,
                Err(why) => {
                    self.halted = true;
                    return Err(format!("compaction hook {hook} failed: {why}"));
                }
            };
            conversation.replace(history);
            self.event(
                "compaction",
                json!({"turn": turn, "tokens_before": tokens, "tokens_after": convert::estimate_tokens(conversation.messages())}),
            );
        }
        Ok(())
    }
}

fn inference_event(turn: u64, decision: &str, usage: (u64, u64), model: &str) -> Event {
    Event::Inference(InferenceInfo {
        turn: u32::try_from(turn).unwrap_or(u32::MAX),
        decision: decision.to_string(),
        usage: HookUsage {
            input_tokens: usage.0,
            output_tokens: usage.1,
        },
        model: model.to_string(),
    })
}

/// Milliseconds since `t`.
pub fn ms(t: Instant) -> u64 {
    t.elapsed().as_millis() as u64
}
