//! Spans in OTLP/HTTP JSON (the protobuf JSON mapping, with trace and span ids as hex and
//! 64-bit integers as strings): a task attempt's spans from its observations, the session
//! span, and the request body that carries them.

use crate::obs::{span_id, Obs, Session};
use serde_json::{json, Value};

/// The span kinds used (`opentelemetry.proto.trace.v1.Span.SpanKind`).
const INTERNAL: u8 = 1;
const SERVER: u8 = 2;
const CLIENT: u8 = 3;
/// `Status.StatusCode.STATUS_CODE_ERROR`.
const ERROR: u8 = 2;
/// The most characters of a name or a text attribute taken from the session (a tool name
/// is the model's choice).
pub const MAX_TEXT: usize = 256;

/// Who the spans are about: the resource attributes.
pub struct Resource<'a> {
    pub capsule: &'a str,
    pub version: &'a str,
    pub session_id: &'a str,
}

/// How a task attempt ended (`task-end`).
pub struct AttemptEnd<'a> {
    pub t: u64,
    pub task_id: &'a str,
    pub exit_status: &'a str,
    pub turns: u32,
    /// Observations were left out (the attempt's file reached its cap).
    pub truncated: bool,
}

/// Format characters a trace UI or a terminal would act on (bidi controls and overrides,
/// zero-width characters, the byte-order mark, the soft hyphen).
fn invisible(c: char) -> bool {
    matches!(c, '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{206f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// Session text made safe to show: one line, at most [`MAX_TEXT`] characters, without
/// control or invisible format characters.
fn clip(s: &str) -> String {
    let visible: String = s.chars().filter(|c| !invisible(*c)).collect();
    driver_common::outcome::one_line(&visible, MAX_TEXT)
}

fn text(key: &str, v: &str) -> Value {
    json!({"key": key, "value": {"stringValue": clip(v)}})
}

fn int(key: &str, v: i64) -> Value {
    json!({"key": key, "value": {"intValue": v.to_string()}})
}

fn uint(key: &str, v: u64) -> Value {
    int(key, i64::try_from(v).unwrap_or(i64::MAX))
}

fn double(key: &str, v: f64) -> Value {
    // JSON has no NaN nor infinity; protobuf's JSON mapping spells them as these strings.
    let value = if v.is_nan() {
        json!("NaN")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "Infinity" } else { "-Infinity" })
    } else {
        json!(v)
    };
    json!({"key": key, "value": {"doubleValue": value}})
}

/// One span being built.
struct Span {
    trace_id: String,
    span_id: String,
    parent: Option<String>,
    name: String,
    kind: u8,
    start: u64,
    end: u64,
    attributes: Vec<Value>,
    events: Vec<Value>,
    links: Vec<Value>,
    error: Option<String>,
}

impl Span {
    fn new(
        trace_id: &str,
        span_id: String,
        parent: Option<String>,
        name: &str,
        kind: u8,
        (start, end): (u64, u64),
    ) -> Span {
        Span {
            trace_id: trace_id.to_string(),
            span_id,
            parent,
            name: clip(name),
            kind,
            start: start.min(end),
            end,
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            error: None,
        }
    }

    fn json(self) -> Value {
        let mut v = json!({
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": self.kind,
            "startTimeUnixNano": self.start.to_string(),
            "endTimeUnixNano": self.end.to_string(),
            "attributes": self.attributes,
        });
        if let Some(p) = self.parent {
            v["parentSpanId"] = json!(p);
        }
        if !self.events.is_empty() {
            v["events"] = json!(self.events);
        }
        if !self.links.is_empty() {
            v["links"] = json!(self.links);
        }
        if let Some(message) = self.error {
            v["status"] = json!({"code": ERROR, "message": clip(&message)});
        }
        v
    }
}

fn event(t: u64, name: &str, attributes: Vec<Value>) -> Value {
    json!({"timeUnixNano": t.to_string(), "name": name, "attributes": attributes})
}

/// What an attempt's start says: when, its context, source, attempt number and caller.
struct Head<'a> {
    start: u64,
    context_id: &'a str,
    source: &'a str,
    attempt: u32,
    traceparent: Option<&'a str>,
}

/// Step: the attempt's start; a missing one (an event the runtime's queue dropped) is made
/// up from what there is.
fn head<'a>(obs: &'a [Obs], end: &AttemptEnd<'_>) -> Head<'a> {
    obs.iter()
        .find_map(|o| match o {
            Obs::Start {
                t,
                context_id,
                source,
                attempt,
                traceparent,
                ..
            } => Some(Head {
                start: *t,
                context_id,
                source,
                attempt: *attempt,
                traceparent: traceparent.as_deref(),
            }),
            _ => None,
        })
        .unwrap_or(Head {
            start: obs.first().map_or(end.t, Obs::t),
            context_id: "",
            source: "",
            attempt: 1,
            traceparent: None,
        })
}

/// Step: the task span (child of the session span), with its reopen event and its link to
/// a caller that is not the session's parent.
fn task_span(session: &Session, id: String, h: &Head<'_>, end: &AttemptEnd<'_>) -> Span {
    let mut task = Span::new(
        &session.trace_id,
        id,
        Some(session.span_id.clone()),
        "mur.task",
        INTERNAL,
        (h.start, end.t),
    );
    task.attributes = vec![
        text("murmur.task.id", end.task_id),
        text("murmur.context.id", h.context_id),
        text("murmur.task.source", h.source),
        int("murmur.task.attempt", i64::from(h.attempt)),
        int("murmur.task.turns", i64::from(end.turns)),
        text("murmur.task.exit_status", end.exit_status),
    ];
    if end.truncated {
        task.attributes
            .push(json!({"key": "murmur.task.observations_truncated", "value": {"boolValue": true}}));
    }
    if h.attempt > 1 {
        task.events.push(event(
            h.start,
            "reopen",
            vec![int("murmur.task.attempt", i64::from(h.attempt))],
        ));
    }
    if let Some((trace, span)) = session.link(h.traceparent) {
        task.links.push(json!({"traceId": trace, "spanId": span}));
    }
    if end.exit_status != "ok" {
        task.error = Some(end.exit_status.to_string());
    }
    task
}

/// Where a child span of the task goes: its trace, its parent, and its own id.
struct Child<'a> {
    trace_id: &'a str,
    parent: &'a str,
    id: String,
}

/// What one inference turn was: its number, the driver's decision, the model asked, the
/// tokens the provider reported, and the provider.
struct Turn<'a> {
    turn: u32,
    decision: &'a str,
    model: &'a str,
    usage: (u64, u64),
    provider: Option<&'a str>,
}

/// Step: an inference turn's span, from the last boundary (the task's start or the end of
/// the call or turn before) to when the turn was seen. A failed call has no usage (the
/// runtime reports 0 for tokens nobody counted): its span carries no token attributes
/// rather than claim 0.
fn inference_span(c: Child<'_>, from: u64, t: u64, turn: &Turn<'_>) -> Value {
    let mut s = Span::new(
        c.trace_id,
        c.id,
        Some(c.parent.to_string()),
        &format!("chat {}", turn.model),
        CLIENT,
        (from, t),
    );
    s.attributes = vec![
        text("gen_ai.operation.name", "chat"),
        text("gen_ai.request.model", turn.model),
    ];
    if let Some(provider) = turn.provider {
        s.attributes.push(text("gen_ai.provider.name", provider));
    }
    if turn.decision == "error" {
        s.error = Some("the driver call failed".into());
    } else {
        s.attributes.extend([
            uint("gen_ai.usage.input_tokens", turn.usage.0),
            uint("gen_ai.usage.output_tokens", turn.usage.1),
        ]);
    }
    s.attributes.extend([
        int("murmur.turn", i64::from(turn.turn)),
        text("murmur.decision", turn.decision),
    ]);
    s.json()
}

/// Step: a tool or shell call's span, its duration back from when it was seen, never
/// before `task_start` (the times are when the hook saw the events).
fn call_span(c: Child<'_>, task_start: u64, o: &Obs) -> Option<Value> {
    let Obs::Call {
        t,
        shell,
        turn,
        name,
        outcome,
        exit,
        ms,
    } = o
    else {
        return None;
    };
    let began = t.saturating_sub(ms.saturating_mul(1_000_000)).max(task_start);
    let title = if *shell {
        format!("shell {name}")
    } else {
        format!("execute_tool {name}")
    };
    let mut s = Span::new(
        c.trace_id,
        c.id,
        Some(c.parent.to_string()),
        &title,
        INTERNAL,
        (began, *t),
    );
    s.attributes = if *shell {
        vec![text("murmur.shell.binary", name)]
    } else {
        vec![
            text("gen_ai.operation.name", "execute_tool"),
            text("gen_ai.tool.name", name),
        ]
    };
    s.attributes.extend([
        int("murmur.turn", i64::from(*turn)),
        text("murmur.call.outcome", outcome),
        uint("murmur.duration_ms", *ms),
    ]);
    if let Some(code) = exit {
        s.attributes.push(int("process.exit.code", i64::from(*code)));
    }
    if outcome == "error" {
        s.error = Some(format!("the call of {} failed", clip(name)));
    } else if let Some(code) = exit.filter(|c| *c != 0) {
        // The model reads a non-zero exit as data, but the command failed: ERROR, as
        // OpenTelemetry marks a process that exits non-zero.
        s.error = Some(format!("{} exited with {code}", clip(name)));
    }
    Some(s.json())
}

/// The spans of one task attempt: the task span (child of the session span), and under it
/// a span per inference turn and per tool or shell call; compaction and a reopen are events
/// of the task span. `obs` are the attempt's observations in order.
pub fn attempt_spans(session: &Session, session_id: &str, obs: &[Obs], end: &AttemptEnd<'_>) -> Vec<Value> {
    let h = head(obs, end);
    let attempt_text = h.attempt.to_string();
    let task_id = span_id(&[session_id, "task", end.task_id, &attempt_text]);
    let mut task = task_span(session, task_id.clone(), &h, end);
    let mut spans = Vec::new();
    let mut boundary = h.start;
    for (index, o) in obs.iter().enumerate() {
        let child = |what: &str| Child {
            trace_id: &session.trace_id,
            parent: &task_id,
            id: span_id(&[session_id, end.task_id, &attempt_text, what, &index.to_string()]),
        };
        match o {
            Obs::Start { .. } => {}
            Obs::Compaction { t, tokens, threshold } => task.events.push(event(
                *t,
                "compaction",
                vec![
                    uint("murmur.session_tokens", *tokens),
                    double("murmur.threshold", *threshold),
                ],
            )),
            Obs::Inference {
                t,
                turn,
                decision,
                model,
                input,
                output,
                provider,
            } => {
                let seen = Turn {
                    turn: *turn,
                    decision,
                    model,
                    usage: (*input, *output),
                    provider: provider.as_deref(),
                };
                spans.push(inference_span(child("inference"), boundary, *t, &seen));
                boundary = *t;
            }
            Obs::Call { t, .. } => {
                spans.extend(call_span(child("call"), h.start, o));
                boundary = *t;
            }
        }
    }
    spans.insert(0, task.json());
    spans
}

/// The session span: from `session-start` to `end_t`, child of the caller's span when the
/// first task carried a `traceparent`; `ERROR` when the session did not end `ok`.
pub fn session_span(session: &Session, session_id: &str, end_t: u64, exit_status: &str) -> Value {
    let kind = if session.parent.is_some() {
        SERVER
    } else {
        INTERNAL
    };
    let mut s = Span::new(
        &session.trace_id,
        session.span_id.clone(),
        session.parent.clone(),
        "mur.session",
        kind,
        (session.start, end_t),
    );
    s.attributes = vec![
        text("murmur.session.id", session_id),
        text("murmur.session.exit_status", exit_status),
    ];
    if exit_status != "ok" {
        s.error = Some(exit_status.to_string());
    }
    s.json()
}

/// The body of `POST /v1/traces` (`ExportTraceServiceRequest`) carrying `spans`.
pub fn export(resource: &Resource<'_>, spans: Vec<Value>) -> String {
    json!({"resourceSpans": [{
        "resource": {"attributes": [
            text("service.name", resource.capsule),
            text("service.version", resource.version),
            text("service.instance.id", resource.session_id),
            text("murmur.session.id", resource.session_id),
        ]},
        "scopeSpans": [{
            "scope": {"name": "murmur-hook-otel", "version": env!("CARGO_PKG_VERSION")},
            "spans": spans,
        }],
    }]})
    .to_string()
}

#[cfg(test)]
mod tests;
