//! The numbers of a trace: turns, tool and shell calls, tokens, wall time and where it went,
//! notable events and the malformed lines skipped; as text and as one JSON object.

use super::clean::clean;
use super::fields::n;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Most malformed lines remembered by number (all are counted).
const MAX_PROBLEMS: usize = 100;
/// Most distinct tool names timed separately (the rest are counted as `(other)`).
const MAX_TOOLS: usize = 32;

#[derive(Debug, Default, Clone)]
pub struct Summary {
    pub session_id: Option<String>,
    pub capsule: Option<String>,
    pub version: Option<String>,
    pub declared: Option<String>,
    pub achieved: Option<String>,
    pub exit_status: Option<String>,
    pub events: u64,
    pub tasks: u64,
    pub turns: u64,
    pub tool_calls: u64,
    pub shell_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// `session_end` totals, used when they exceed what the events add up to.
    reported: [u64; 5],
    first_ms: Option<i64>,
    last_ms: Option<i64>,
    session_ms: u64,
    pub tools_ms: u64,
    pub shell_ms: u64,
    pub delegations_ms: u64,
    per_tool: BTreeMap<String, (u64, u64)>,
    pub compactions: u64,
    pub reopens: u64,
    pub refusals: u64,
    pub other_sessions: u64,
    pub problems: Vec<(u64, String)>,
    pub problem_count: u64,
    /// The file was longer than `MAX_FILE` and was read only that far.
    pub cut_at_cap: bool,
    /// A `session_end` was read.
    pub ended: bool,
    /// Why the session's records are incomplete (`session_end.records_error`).
    pub records_error: Option<String>,
    /// Events the runtime counted past the trace's budget instead of writing them.
    pub dropped_events: u64,
    pub budget_bytes: Option<u64>,
}

fn text(o: &Map<String, Value>, key: &str) -> Option<String> {
    o.get(key).and_then(Value::as_str).map(|v| clean(v, 120))
}

fn add(a: &mut u64, v: Option<u64>) {
    *a = a.saturating_add(v.unwrap_or(0));
}

impl Summary {
    /// A line that could not be used.
    pub fn problem(&mut self, line: u64, why: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push((line, why));
        }
    }

    /// Count one well-formed event.
    pub fn record(&mut self, line: u64, kind: &str, o: &Map<String, Value>) {
        self.events += 1;
        if let Some(ts) = o.get("timestamp").and_then(Value::as_i64) {
            self.first_ms = Some(self.first_ms.map_or(ts, |f| f.min(ts)));
            self.last_ms = Some(self.last_ms.map_or(ts, |l| l.max(ts)));
        }
        match (&self.session_id, text(o, "session_id")) {
            (None, Some(id)) => self.session_id = Some(id),
            (Some(a), Some(b)) if *a != b => {
                self.other_sessions += 1;
                self.problem(line, format!("session_id {b} differs from the trace's {a}"));
            }
            _ => {}
        }
        let refused = match o.get("outcome") {
            Some(Value::String(v)) => !matches!(v.as_str(), "ok" | "completed"),
            _ => false,
        };
        if refused {
            self.refusals += 1;
        }
        match kind {
            "session_start" => {
                self.capsule = text(o, "capsule_name").or(self.capsule.take());
                self.version = text(o, "capsule_version").or(self.version.take());
                self.declared = text(o, "containment_declared").or(self.declared.take());
                self.achieved = text(o, "containment_achieved").or(self.achieved.take());
            }
            "session_end" => {
                self.ended = true;
                self.exit_status = text(o, "exit_status");
                self.records_error = o
                    .get("records_error")
                    .and_then(Value::as_str)
                    .map(|v| clean(v, 300));
                add(&mut self.session_ms, n(o, "duration_ms"));
                for (slot, key) in self.reported.iter_mut().zip([
                    "total_turns",
                    "total_tool_calls",
                    "total_shell_calls",
                    "total_input_tokens",
                    "total_output_tokens",
                ]) {
                    *slot = (*slot).max(n(o, key).unwrap_or(0));
                }
            }
            "task_start" => self.tasks += 1,
            "inference" => {
                self.turns += 1;
                add(&mut self.input_tokens, n(o, "input_tokens"));
                add(&mut self.output_tokens, n(o, "output_tokens"));
            }
            "tool_call" => {
                self.tool_calls += 1;
                let ms = n(o, "duration_ms").unwrap_or(0);
                self.tools_ms = self.tools_ms.saturating_add(ms);
                let mut name = text(o, "tool_name").unwrap_or_else(|| "-".into());
                if !self.per_tool.contains_key(&name) && self.per_tool.len() >= MAX_TOOLS {
                    name = "(other)".into();
                }
                let slot = self.per_tool.entry(name).or_default();
                *slot = (slot.0 + 1, slot.1.saturating_add(ms));
            }
            "shell" => {
                self.shell_calls += 1;
                add(&mut self.shell_ms, n(o, "duration_ms"));
                if n(o, "exit_code") != Some(0) {
                    self.refusals += 1;
                }
            }
            "delegation" => add(&mut self.delegations_ms, n(o, "duration_ms")),
            "compaction" => self.compactions += 1,
            "task_reopened" => self.reopens += 1,
            "trap" | "hook_dispatch_error" => self.refusals += 1,
            "trace_dropped" => {
                add(&mut self.dropped_events, n(o, "dropped_events"));
                self.budget_bytes = n(o, "budget_bytes");
            }
            _ => {}
        }
        if kind == "tool_call" && matches!(o.get("status"), Some(Value::String(v)) if v != "ok") {
            self.refusals += 1;
        }
    }

    fn totals(&self) -> [u64; 5] {
        let own = [
            self.turns,
            self.tool_calls,
            self.shell_calls,
            self.input_tokens,
            self.output_tokens,
        ];
        let mut out = own;
        for (o, r) in out.iter_mut().zip(self.reported) {
            *o = (*o).max(r);
        }
        out
    }

    /// Per tool name: (calls, ms), the names beyond the first 32 as `(other)`.
    pub fn per_tool(&self) -> impl Iterator<Item = (&String, &(u64, u64))> {
        self.per_tool.iter()
    }

    /// Wall time: the sessions' own `duration_ms`, else first to last timestamp.
    pub fn wall_ms(&self) -> u64 {
        let span = match (self.first_ms, self.last_ms) {
            (Some(a), Some(b)) => u64::try_from(i128::from(b) - i128::from(a)).unwrap_or(0),
            _ => 0,
        };
        if self.session_ms > 0 {
            self.session_ms
        } else {
            span
        }
    }

    fn rest_ms(&self) -> u64 {
        let spent = self
            .tools_ms
            .saturating_add(self.shell_ms)
            .saturating_add(self.delegations_ms);
        self.wall_ms().saturating_sub(spent)
    }

    /// The summary as one JSON object (`mur trace --json`).
    pub fn to_json(&self) -> Value {
        let [turns, tool_calls, shell_calls, input_tokens, output_tokens] = self.totals();
        let tools: Map<String, Value> = self
            .per_tool
            .iter()
            .map(|(k, (calls, ms))| (k.clone(), json!({"calls": calls, "ms": ms})))
            .collect();
        json!({
            "session_id": self.session_id, "capsule_name": self.capsule, "capsule_version": self.version,
            "containment_declared": self.declared, "containment_achieved": self.achieved,
            "exit_status": self.exit_status, "events": self.events, "tasks": self.tasks, "turns": turns,
            "tool_calls": tool_calls, "shell_calls": shell_calls, "input_tokens": input_tokens,
            "output_tokens": output_tokens, "wall_ms": self.wall_ms(),
            "time_ms": {"tools": self.tools_ms, "shell": self.shell_ms, "delegations": self.delegations_ms,
                        "rest": self.rest_ms(), "per_tool": tools},
            "compactions": self.compactions, "reopens": self.reopens, "refusals": self.refusals,
            "malformed_lines": self.problem_count,
            "malformed": self.problems.iter().map(|(l, w)| json!({"line": l, "reason": w})).collect::<Vec<_>>(),
            "read_cut_at_cap": self.cut_at_cap,
            "records": self.records_word(), "records_error": self.records_error,
            "dropped_events": self.dropped_events, "budget_bytes": self.budget_bytes,
        })
    }

    /// Whether the records are whole: `complete`, `incomplete` (a records write failed), or
    /// `no session_end` (the session still runs, or its end could not be written).
    fn records_word(&self) -> &'static str {
        match (&self.records_error, self.ended) {
            (Some(_), _) => "incomplete",
            (None, true) => "complete",
            (None, false) => "no session_end",
        }
    }

    /// The summary for a person.
    pub fn to_text(&self) -> String {
        let [turns, tool_calls, shell_calls, input_tokens, output_tokens] = self.totals();
        let or = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        let mut out = String::from("summary\n");
        out.push_str(&format!(
            "  session     {} {} {} (containment declared {}, achieved {})\n",
            or(&self.session_id),
            or(&self.capsule),
            or(&self.version),
            or(&self.declared),
            or(&self.achieved)
        ));
        out.push_str(&format!("  outcome     {}\n", or(&self.exit_status)));
        out.push_str(&format!(
            "  work        {} tasks, {turns} turns, {tool_calls} tool calls, {shell_calls} shell calls\n",
            self.tasks
        ));
        out.push_str(&format!(
            "  tokens      {input_tokens} in / {output_tokens} out\n"
        ));
        out.push_str(&format!(
            "  wall time   {:.3} s\n",
            self.wall_ms() as f64 / 1000.0
        ));
        let mut by_tool: Vec<_> = self.per_tool.iter().collect();
        by_tool.sort_by_key(|t| std::cmp::Reverse(t.1 .1));
        let tools = by_tool
            .iter()
            .take(5)
            .map(|(k, (c, ms))| format!("{k} {ms} ms x{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "  time went   tools {} ms{}, shell {} ms, delegations {} ms, the rest (model, runtime, guest) {} ms\n",
            self.tools_ms,
            if tools.is_empty() { String::new() } else { format!(" ({tools})") },
            self.shell_ms,
            self.delegations_ms,
            self.rest_ms()
        ));
        out.push_str(&format!(
            "  notable     {} compactions, {} reopens, {} refusals or failures\n",
            self.compactions, self.reopens, self.refusals
        ));
        match (&self.records_error, self.ended) {
            (Some(why), _) => out.push_str(&format!("  records     incomplete: {why}\n")),
            (None, false) => out.push_str(
                "  records     no session_end: the session is still running, or its records are incomplete\n",
            ),
            (None, true) => {}
        }
        if self.dropped_events > 0 {
            out.push_str(&format!(
                "  dropped     {} events past the trace's budget of {} bytes (counted, not written)\n",
                self.dropped_events,
                self.budget_bytes
                    .map_or_else(|| "-".to_string(), |b| b.to_string())
            ));
        }
        if self.problem_count > 0 {
            let lines = self
                .problems
                .iter()
                .map(|(l, _)| l.to_string())
                .collect::<Vec<_>>()
                .join(", ");
            out.push_str(&format!(
                "  malformed   {} lines skipped (lines {lines})\n",
                self.problem_count
            ));
        }
        if self.cut_at_cap {
            out.push_str(&format!(
                "  read only the first {} bytes of the trace\n",
                super::MAX_FILE
            ));
        }
        out
    }
}
