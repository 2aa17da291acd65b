//! One event at a time into readable lines: the session header, tasks, turns, tools, shell
//! commands and the resource, peer and delegation events, with refusals and failures marked
//! `!` and other notable events `*`. Every field shown is cleaned and cut.

use super::clean::clean;
use super::fields::{compact, failure, generic, n, num, opt, reason, refused, s, Obj, COMPOSITE, FIELD};
use super::lines::Line;
use super::summary::Summary;
use serde_json::Value;

/// The renderer's state: where the timeline started, whether a task is open, the summary.
#[derive(Default)]
pub struct Timeline {
    base_ms: Option<i128>,
    in_task: bool,
    summary: Summary,
}

/// Mark (`!` a refusal or failure, `*` notable, ` ` ordinary), indent, text.
pub type Rendered = (char, usize, String);

/// One well-formed event: when (ms after the trace's first timestamp; `None` when it has
/// none), its type (cleaned), its fields as read, and its rendered lines.
pub struct Event {
    pub at_ms: Option<i128>,
    pub kind: String,
    pub obj: serde_json::Map<String, Value>,
    pub rows: Vec<Rendered>,
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// The summary so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    pub fn into_summary(self) -> Summary {
        self.summary
    }

    /// The reader stopped at the file-size cap.
    pub fn mark_cut(&mut self) {
        self.summary.cut_at_cap = true;
    }

    /// Render one line of the trace; a malformed line is recorded in the summary (with its
    /// number) and yields nothing.
    pub fn push(&mut self, line: Line) -> Vec<String> {
        let Some(event) = self.push_event(line) else {
            return Vec::new();
        };
        let when = match event.at_ms {
            Some(t) => format!("{:+9.3}s", t as f64 / 1000.0),
            None => format!("{:>10}", "?"),
        };
        event
            .rows
            .into_iter()
            .map(|(mark, indent, text)| format!("{when} {mark} {:indent$}{text}", ""))
            .collect()
    }

    /// One line of the trace as an [`Event`]: parsed, counted in the summary and rendered;
    /// `None` for a blank or malformed line (recorded in the summary with its number).
    pub fn push_event(&mut self, line: Line) -> Option<Event> {
        let (number, bytes, cut) = match line {
            Line::TooLong { number } => {
                self.summary
                    .problem(number, format!("longer than {} bytes", super::MAX_LINE));
                return None;
            }
            Line::Text { number, bytes } => (number, bytes, false),
            Line::Unterminated { number, bytes } => (number, bytes, true),
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let obj = match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(o)) => o,
            Ok(_) => {
                self.summary.problem(number, "not a JSON object".into());
                return None;
            }
            Err(e) => {
                let why = if cut { "truncated (no newline)" } else { "not JSON" };
                self.summary
                    .problem(number, format!("{why}: {}", clean(&e.to_string(), FIELD)));
                return None;
            }
        };
        let Some(kind) = obj
            .get("event_type")
            .and_then(Value::as_str)
            .map(|k| clean(k, 40))
        else {
            self.summary.problem(number, "no event_type".into());
            return None;
        };
        self.summary.record(number, &kind, &obj);
        let ts = obj.get("timestamp").and_then(Value::as_i64).map(i128::from);
        let base = *self.base_ms.get_or_insert_with(|| ts.unwrap_or(0));
        let rows = self.render(&kind, &obj);
        Some(Event {
            at_ms: ts.map(|t| t - base),
            kind,
            obj,
            rows,
        })
    }

    fn inner(&self) -> usize {
        if self.in_task {
            4
        } else {
            2
        }
    }

    fn render(&mut self, kind: &str, o: &Obj) -> Vec<Rendered> {
        let i = self.inner();
        let one = |mark: char, indent: usize, text: String| vec![(mark, indent, text)];
        match kind {
            "session_start" => self.session_start(o),
            "session_end" => {
                let ok = matches!(o.get("exit_status"), Some(Value::String(v)) if v == "ok")
                    && !o.contains_key("records_error");
                let trap = opt(o, "trap_kind", " (", ")");
                let err = failure(o, "error");
                let records = opt(o, "records_error", "; records incomplete: ", "");
                let text = format!(
                    "session ended {} after {} ms{trap}{err}{records}",
                    s(o, "exit_status"),
                    num(o, "duration_ms")
                );
                one(if ok { ' ' } else { '!' }, 0, text)
            }
            "task_start" => {
                self.in_task = true;
                let text = format!(
                    "task {} from {} (context {})",
                    s(o, "task_id"),
                    s(o, "source"),
                    s(o, "context_id")
                );
                one(' ', 2, text)
            }
            "task_end" => {
                self.in_task = false;
                let ok = matches!(o.get("exit_status"), Some(Value::String(v)) if v == "ok");
                let text = format!(
                    "task {} ended {}: {} turns, {} tool calls, {} shell, tokens {} in / {} out, reopened {}, {} ms",
                    s(o, "task_id"), s(o, "exit_status"), num(o, "turns"), num(o, "tool_calls"), num(o, "shell_calls"),
                    num(o, "input_tokens"), num(o, "output_tokens"), n(o, "reopen_count").unwrap_or(0), num(o, "duration_ms")
                );
                one(if ok { ' ' } else { '!' }, 2, text)
            }
            "inference" => {
                let tool = match o.get("tool_name") {
                    Some(Value::String(t)) => format!(" -> {}", clean(t, FIELD)),
                    _ => String::new(),
                };
                let origin = opt(o, "origin", " [", "]");
                let text = format!(
                    "turn {}: {}{tool}, tokens {} in / {} out{origin}",
                    num(o, "turn"),
                    s(o, "decision"),
                    num(o, "input_tokens"),
                    num(o, "output_tokens")
                );
                one(' ', i, text)
            }
            "tool_call" => {
                let ok = !matches!(o.get("status"), Some(Value::String(v)) if v != "ok");
                let input = o
                    .get("input")
                    .map(|v| format!(" input {}", compact(v, 80)))
                    .unwrap_or_default();
                let err = failure(o, "error");
                let cut = cut_at_cap(o);
                let text = format!(
                    "tool {} {} in {} ms{cut}{input}{err}",
                    s(o, "tool_name"),
                    s(o, "status"),
                    num(o, "duration_ms")
                );
                one(if ok { ' ' } else { '!' }, i + 2, text)
            }
            "shell" => {
                let ok = n(o, "exit_code") == Some(0)
                    && matches!(o.get("resource_limit"), None | Some(Value::Null));
                let limit = match o.get("resource_limit") {
                    None | Some(Value::Null) => String::new(),
                    Some(_) => format!(", killed by limit {}", s(o, "resource_limit")),
                };
                let cmd = o
                    .get("command")
                    .map(|v| format!(": {}", compact(v, 80)))
                    .unwrap_or_default();
                // A command that never ran: its code (the reason is on its `tool_call` line).
                let not_run = match o.get("error_code") {
                    Some(Value::String(_)) => format!(", not run ({})", s(o, "error_code")),
                    _ => String::new(),
                };
                let text = format!(
                    "shell {} exit {} in {} ms{not_run}{limit}{cmd}",
                    s(o, "binary"),
                    s(o, "exit_code"),
                    num(o, "duration_ms")
                );
                one(if ok { ' ' } else { '!' }, i + 2, text)
            }
            "compaction" => one(
                '*',
                i,
                format!(
                    "compaction at turn {}: {} -> {} tokens",
                    num(o, "turn"),
                    num(o, "tokens_before"),
                    num(o, "tokens_after")
                ),
            ),
            "task_reopened" => one(
                '*',
                2,
                format!(
                    "task {} reopened (#{}) by hook {}: {}",
                    s(o, "task_id"),
                    num(o, "reopen_number"),
                    s(o, "hook_name"),
                    s(o, "reason")
                ),
            ),
            "trap" => one('!', i, format!("trap {}: {}", s(o, "trap_kind"), s(o, "message"))),
            "spend_ceiling" => one(
                '!',
                i,
                format!(
                    "spend ceiling ({}) reached before turn {}: {} of {} tokens used; the call was refused",
                    s(o, "ceiling"),
                    num(o, "turn"),
                    num(o, "used"),
                    num(o, "limit")
                ),
            ),
            "trace_dropped" => one(
                '!',
                0,
                format!(
                    "trace budget of {} bytes reached: {} events counted, not written",
                    num(o, "budget_bytes"),
                    num(o, "dropped_events")
                ),
            ),
            "resource_list" => self.outcome(
                o,
                i,
                format!(
                    "resources listed under '{}': {} entries, {} bytes",
                    s(o, "root"),
                    num(o, "entry_count"),
                    num(o, "total_bytes")
                ),
            ),
            "resource_read" => self.outcome(
                o,
                i,
                format!("resource read {}: {} bytes", s(o, "path"), num(o, "bytes")),
            ),
            "peer_handle_mint" => self.outcome(
                o,
                i,
                format!(
                    "peer handle minted <handle:{}> for {} to {}, expires {}",
                    s(o, "handle_id"),
                    s(o, "path"),
                    s(o, "audience"),
                    num(o, "expires_at_ms")
                ),
            ),
            "peer_handle_redeem" => self.outcome(
                o,
                i,
                format!(
                    "peer handle redeemed <handle:{}> for {} by {}: {} bytes",
                    s(o, "handle_id"),
                    s(o, "path"),
                    s(o, "audience_asserted"),
                    num(o, "bytes")
                ),
            ),
            "peer_file_fetch" => self.outcome(
                o,
                i,
                format!(
                    "peer file fetched from {} <handle:{}> into {}: {} bytes",
                    s(o, "peer"),
                    s(o, "handle_id"),
                    s(o, "stored_path"),
                    num(o, "bytes")
                ),
            ),
            "delegation_start" => one(
                '*',
                i,
                format!(
                    "delegation {} started: {}@{} as {}",
                    s(o, "delegation_id"),
                    s(o, "capsule"),
                    s(o, "version"),
                    s(o, "child_session_id")
                ),
            ),
            "delegation" => {
                let text = format!(
                    "delegation to {}@{} ({}) child {} in {} ms",
                    s(o, "capsule"),
                    s(o, "version"),
                    s(o, "delegation_id"),
                    s(o, "child_session_id"),
                    num(o, "duration_ms")
                );
                match o.get("status") {
                    // A delegation that did not come to its answer: how, and why when the
                    // event says (`output`).
                    Some(Value::String(st)) if !matches!(st.as_str(), "started" | "completed" | "ok") => {
                        let why = failure(o, "output");
                        one('!', i, format!("{text}: {}{why}", s(o, "status")))
                    }
                    _ => self.outcome(o, i, text),
                }
            }
            // A completion the door refused (not an id this session is waiting for, or one
            // already taken): the delegation it claimed and the first line of why.
            "completion_refused" => one(
                '!',
                i,
                format!(
                    "completion for delegation {} refused{}",
                    s(o, "delegation_id"),
                    failure(o, "reason")
                ),
            ),
            // A person in the loop: what the task waits for, then the answer (`!` for a
            // call that did not run, or a question left unanswered).
            "approval_requested" => one(
                '*',
                i + 2,
                format!(
                    "approval asked for {} {} (waits up to {} s)",
                    s(o, "kind"),
                    s(o, "tool_name"),
                    num(o, "timeout_secs")
                ),
            ),
            "approval_answered" => one(
                if s(o, "decision") == "approved" { '*' } else { '!' },
                i + 2,
                format!(
                    "{} {} by {} after {} ms",
                    s(o, "tool_name"),
                    s(o, "decision"),
                    s(o, "by"),
                    num(o, "duration_ms")
                ),
            ),
            "input_requested" => one(
                '*',
                i + 2,
                format!("question asked (waits up to {} s)", num(o, "timeout_secs")),
            ),
            "input_received" => one(
                if s(o, "outcome") == "answered" { '*' } else { '!' },
                i + 2,
                format!("question {} after {} ms", s(o, "outcome"), num(o, "duration_ms")),
            ),
            "hook_error" => one(
                '!',
                i,
                format!(
                    "hook {} failed on {}: {}",
                    s(o, "hook_name"),
                    s(o, "binding"),
                    s(o, "error")
                ),
            ),
            "inference_retry" => one(
                '!',
                i + 2,
                format!(
                    "turn {}: retry {} in {} ms: {}",
                    num(o, "turn"),
                    num(o, "attempt"),
                    num(o, "delay_ms"),
                    s(o, "reason")
                ),
            ),
            "hook_dispatch_error" => one(
                '!',
                i,
                format!(
                    "hook {} failed on {} ({})",
                    s(o, "hook_name"),
                    s(o, "event"),
                    s(o, "arm")
                ),
            ),
            _ => {
                let mark = if refused(o) { '!' } else { ' ' };
                one(mark, i, generic(kind, o))
            }
        }
    }

    /// An event with an `outcome`: `*`, or `!` with the outcome and reason when refused.
    fn outcome(&self, o: &Obj, indent: usize, text: String) -> Vec<Rendered> {
        if refused(o) {
            vec![('!', indent, format!("{text}: {}{}", s(o, "outcome"), reason(o)))]
        } else {
            vec![('*', indent, text)]
        }
    }

    fn session_start(&mut self, o: &Obj) -> Vec<Rendered> {
        let mut v = vec![(
            ' ',
            0,
            format!(
                "session {} {} {}",
                s(o, "session_id"),
                s(o, "capsule_name"),
                s(o, "capsule_version")
            ),
        )];
        let model = o
            .get("model")
            .map(|_| format!("model {}, max_turns {}, ", s(o, "model"), num(o, "max_turns")))
            .unwrap_or_default();
        let exec = if o.get("workdir_exec") == Some(&Value::Bool(true)) {
            ", workdir_exec"
        } else {
            ""
        };
        v.push((
            ' ',
            2,
            format!(
                "{model}containment declared {} achieved {}{exec}",
                s(o, "containment_declared"),
                s(o, "containment_achieved")
            ),
        ));
        if let Some(Value::Object(g)) = o.get("effective_grants") {
            for (k, val) in g.iter().take(32) {
                if matches!(val, Value::Null) || matches!(val, Value::Array(a) if a.is_empty()) {
                    continue;
                }
                v.push((
                    ' ',
                    2,
                    format!("grant {}: {}", clean(k, 40), compact(val, COMPOSITE)),
                ));
            }
        }
        if o.contains_key("spawned_by") {
            v.push((
                '*',
                2,
                format!(
                    "spawned by {} (delegation {})",
                    s(o, "spawned_by"),
                    s(o, "delegation_id")
                ),
            ));
        }
        v
    }
}

/// `, stdout cut at CAP of N bytes` for each stream a tool call's `truncated_at_cap` names.
fn cut_at_cap(o: &Obj) -> String {
    let Some(Value::Object(streams)) = o.get("truncated_at_cap") else {
        return String::new();
    };
    streams
        .iter()
        .take(2)
        .map(|(name, at)| {
            let at = at.as_object();
            let field = |k: &str| {
                at.and_then(|a| n(a, k))
                    .map_or_else(|| "?".to_string(), |v| v.to_string())
            };
            format!(
                ", {} cut at {} of {} bytes",
                clean(name, 16),
                field("cap"),
                field("bytes")
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    const FAILED: &str = "containment could not be installed, the command was not run: install the landlock ruleset (landlock_restrict_self): State not recoverable (os error 131)";

    #[test]
    fn a_call_whose_containment_failed_shows_its_code_and_reason() {
        let events = [
            serde_json::json!({"event_type": "session_start", "timestamp": 0}),
            serde_json::json!({"event_type": "tool_call", "timestamp": 3, "turn": 1, "tool_name": "bash",
                "input": {"command": "true"}, "duration_ms": 3, "status": "error",
                "error_code": "E-RUN-014", "error": format!("{FAILED}\nsecond line"), "hint": "h"}),
            serde_json::json!({"event_type": "shell", "timestamp": 3, "turn": 1, "binary": "bash",
                "exit_code": null, "duration_ms": 3, "error_code": "E-RUN-014", "error": FAILED}),
            serde_json::json!({"event_type": "tool_call", "timestamp": 4, "turn": 1, "tool_name": "nope",
                "input": {}, "duration_ms": 0, "status": "error", "error": "unknown tool 'nope'; the tools are: bash"}),
            serde_json::json!({"event_type": "delegation", "timestamp": 5, "delegation_id": "dlg_1", "capsule": "w",
                "version": "1.0.0", "status": "failed", "child_session_id": "ses_c", "output": "it crashed\ntail"}),
            serde_json::json!({"event_type": "session_end", "timestamp": 9, "duration_ms": 9,
                "exit_status": "containment_failed", "error_code": "E-RUN-014", "error": FAILED}),
        ];
        let trace: String = events.iter().map(|e| format!("{e}\n")).collect();
        let (text, _) = super::super::render_all(trace.as_bytes());
        for line in [
            format!("!     tool bash error in 3 ms input {{command=true}}: E-RUN-014 {FAILED}"),
            "!     shell bash exit - in 3 ms, not run (E-RUN-014)".to_string(),
            "!     tool nope error in 0 ms input {}: unknown tool 'nope'; the tools are: bash".to_string(),
            "!   delegation to w@1.0.0 (dlg_1) child ses_c in - ms: failed: it crashed".to_string(),
            format!("! session ended containment_failed after 9 ms: E-RUN-014 {FAILED}"),
        ] {
            assert!(text.lines().any(|l| l.ends_with(&line)), "want {line:?}\n{text}");
        }
        assert!(!text.contains("second line") && !text.contains("tail"), "{text}");
    }

    #[test]
    fn a_refused_completion_shows_the_delegation_and_why() {
        let trace = format!(
            "{}\n",
            serde_json::json!({"event_type": "completion_refused", "timestamp": 5,
                "delegation_id": "dlg_9", "reason": "no delegation of this session has that id\nmore"})
        );
        let (text, _) = super::super::render_all(trace.as_bytes());
        let want = "completion for delegation dlg_9 refused: no delegation of this session has that id";
        assert!(
            text.lines().any(|l| l.contains("! ") && l.ends_with(want)),
            "{text}"
        );
        assert!(!text.contains("more"), "{text}");
    }

    #[test]
    fn a_persons_answers_show_what_waited_and_how_it_ended() {
        let events = [
            serde_json::json!({"event_type": "approval_requested", "timestamp": 1, "turn": 1, "tool_name": "bash",
                "kind": "shell", "input": {"command": "rm x"}, "timeout_secs": 300}),
            serde_json::json!({"event_type": "approval_answered", "timestamp": 9, "turn": 1, "tool_name": "bash",
                "decision": "denied", "by": "caller", "credential": "alice", "duration_ms": 8}),
            serde_json::json!({"event_type": "input_requested", "timestamp": 10, "question": "which?", "timeout_secs": 60}),
            serde_json::json!({"event_type": "input_received", "timestamp": 12, "outcome": "answered", "duration_ms": 2}),
        ];
        let trace: String = events.iter().map(|e| format!("{e}\n")).collect();
        let (text, _) = super::super::render_all(trace.as_bytes());
        for line in [
            "*     approval asked for shell bash (waits up to 300 s)",
            "!     bash denied by caller after 8 ms",
            "*     question asked (waits up to 60 s)",
            "*     question answered after 2 ms",
        ] {
            assert!(text.lines().any(|l| l.ends_with(line)), "want {line:?}\n{text}");
        }
    }
}
