//! What the hook keeps between calls (it is instantiated afresh for each event): one line
//! per observation of the running task attempt, the session's trace context, and the ids.
//! Lines it cannot read back are skipped, never fatal: they are its own files, but a
//! crash mid-write must not stop the export.

use serde_json::{json, Value};

/// One observation of a task attempt, in the order the events came.
#[derive(Debug, Clone, PartialEq)]
pub enum Obs {
    /// The attempt began: a task's start (attempt 1), or a reopen (the next attempt).
    Start {
        t: u64,
        task_id: String,
        context_id: String,
        source: String,
        attempt: u32,
        traceparent: Option<String>,
    },
    Inference {
        t: u64,
        turn: u32,
        decision: String,
        model: String,
        input: u64,
        output: u64,
        /// `gen_ai.provider.name`, when the runtime names it (`MURMUR_INFERENCE_PROVIDER`).
        provider: Option<String>,
    },
    /// A tool call, or (`shell`) a shell command.
    Call {
        t: u64,
        shell: bool,
        turn: u32,
        name: String,
        outcome: String,
        exit: Option<i32>,
        ms: u64,
    },
    Compaction {
        t: u64,
        tokens: u64,
        threshold: f64,
    },
}

fn text(v: &Value, k: &str) -> Option<String> {
    v.get(k)?.as_str().map(str::to_string)
}

fn num(v: &Value, k: &str) -> Option<u64> {
    v.get(k)?.as_u64()
}

fn small(v: &Value, k: &str) -> Option<u32> {
    u32::try_from(num(v, k)?).ok()
}

impl Obs {
    /// When it was observed, Unix nanoseconds.
    pub fn t(&self) -> u64 {
        match self {
            Obs::Start { t, .. }
            | Obs::Inference { t, .. }
            | Obs::Call { t, .. }
            | Obs::Compaction { t, .. } => *t,
        }
    }

    /// One JSON line, newline-terminated.
    pub fn to_line(&self) -> String {
        format!("{}\n", self.to_value())
    }

    /// A line written by [`Obs::to_line`]; anything else is `None`.
    pub fn parse(line: &str) -> Option<Obs> {
        Obs::from_value(&serde_json::from_str(line).ok()?)
    }

    fn to_value(&self) -> Value {
        match self {
            Obs::Start {
                t,
                task_id,
                context_id,
                source,
                attempt,
                traceparent,
            } => json!({"k": "start", "t": t, "task_id": task_id, "context_id": context_id,
                        "source": source, "attempt": attempt, "traceparent": traceparent}),
            Obs::Inference {
                t,
                turn,
                decision,
                model,
                input,
                output,
                provider,
            } => json!({"k": "inference", "t": t, "turn": turn, "decision": decision, "model": model,
                        "input": input, "output": output, "provider": provider}),
            Obs::Call {
                t,
                shell,
                turn,
                name,
                outcome,
                exit,
                ms,
            } => json!({"k": "call", "t": t, "shell": shell, "turn": turn, "name": name,
                        "outcome": outcome, "exit": exit, "ms": ms}),
            Obs::Compaction { t, tokens, threshold } => {
                json!({"k": "compaction", "t": t, "tokens": tokens, "threshold": threshold})
            }
        }
    }

    fn from_value(v: &Value) -> Option<Obs> {
        let t = num(v, "t")?;
        Some(match v.get("k")?.as_str()? {
            "start" => Obs::Start {
                t,
                task_id: text(v, "task_id")?,
                context_id: text(v, "context_id")?,
                source: text(v, "source")?,
                attempt: small(v, "attempt")?,
                traceparent: text(v, "traceparent"),
            },
            "inference" => Obs::Inference {
                t,
                turn: small(v, "turn")?,
                decision: text(v, "decision")?,
                model: text(v, "model")?,
                input: num(v, "input")?,
                output: num(v, "output")?,
                provider: text(v, "provider"),
            },
            "call" => Obs::Call {
                t,
                shell: v.get("shell")?.as_bool()?,
                turn: small(v, "turn")?,
                name: text(v, "name")?,
                outcome: text(v, "outcome")?,
                exit: v
                    .get("exit")
                    .and_then(Value::as_i64)
                    .and_then(|e| i32::try_from(e).ok()),
                ms: num(v, "ms")?,
            },
            "compaction" => Obs::Compaction {
                t,
                tokens: num(v, "tokens")?,
                threshold: v.get("threshold")?.as_f64()?,
            },
            _ => return None,
        })
    }
}

/// The session's trace context, decided at its first task: the caller's trace (and span,
/// as the session span's parent) when that task's A2A request carried a `traceparent`,
/// else a trace of the session's own (its id's 128 bits).
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// Unix nanoseconds of `session-start` (or of the first event seen).
    pub start: u64,
    pub trace_id: String,
    pub span_id: String,
    /// The caller's span, the session span's parent.
    pub parent: Option<String>,
    /// Whether the first task has fixed the trace.
    pub decided: bool,
    /// The start of the last attempt that ended: a reopen is the next attempt of it.
    pub last: Option<Obs>,
    /// When an export last failed (Unix nanoseconds): none is tried for [`BACKOFF_NS`] after.
    pub failed_at: Option<u64>,
}

/// After a failed export, how long the collector is left alone, nanoseconds: a collector
/// that never answers then costs one wait per 30 s of session, not one per task.
pub const BACKOFF_NS: u64 = 30_000_000_000;

impl Session {
    /// The next attempt of the last task that ended, starting at `t` (a reopen), if one
    /// ended.
    pub fn reopen(&self, t: u64) -> Option<Obs> {
        match self.last.clone()? {
            Obs::Start {
                task_id,
                context_id,
                source,
                attempt,
                traceparent,
                ..
            } => Some(Obs::Start {
                t,
                task_id,
                context_id,
                source,
                attempt: attempt.saturating_add(1),
                traceparent,
            }),
            _ => None,
        }
    }

    /// A session starting at `t`, in a trace of its own.
    pub fn new(session_id: &str, t: u64) -> Session {
        Session {
            start: t,
            trace_id: own_trace_id(session_id),
            span_id: span_id(&[session_id, "session"]),
            parent: None,
            decided: false,
            last: None,
            failed_at: None,
        }
    }

    /// At a task's start: the first task decides the trace (its caller's, when it carried
    /// a well-formed `traceparent`).
    pub fn task_started(&mut self, traceparent: Option<&str>) {
        if self.decided {
            return;
        }
        self.decided = true;
        if let Some((trace, span)) = traceparent.and_then(parse_traceparent) {
            self.trace_id = trace;
            self.parent = Some(span);
        }
    }

    /// The caller's span context of a task whose `traceparent` is not the session span's
    /// parent (a later task from another caller): its task span links to it.
    pub fn link(&self, traceparent: Option<&str>) -> Option<(String, String)> {
        traceparent
            .and_then(parse_traceparent)
            .filter(|(trace, span)| !(trace == &self.trace_id && self.parent.as_ref() == Some(span)))
    }

    /// Whether an export at `now` is held back, the collector having failed within
    /// [`BACKOFF_NS`]: the seconds since, when it is.
    pub fn backing_off(&self, now: u64) -> Option<u64> {
        let at = self.failed_at?;
        let since = now.saturating_sub(at);
        (since < BACKOFF_NS).then_some(since / 1_000_000_000)
    }

    pub fn to_text(&self) -> String {
        let last = self.last.as_ref().map(Obs::to_value);
        json!({"start": self.start, "trace_id": self.trace_id, "span_id": self.span_id,
               "parent": self.parent, "decided": self.decided, "last": last,
               "failed_at": self.failed_at})
        .to_string()
    }

    /// Text written by [`Session::to_text`] with well-formed ids; anything else is `None`.
    pub fn parse(saved: &str) -> Option<Session> {
        let v: Value = serde_json::from_str(saved).ok()?;
        let id = |k: &str, len: usize| text(&v, k).filter(|s| is_id(s, len));
        let last = match v.get("last")? {
            Value::Null => None,
            l => Some(Obs::from_value(l).filter(|o| matches!(o, Obs::Start { .. }))?),
        };
        Some(Session {
            start: num(&v, "start")?,
            trace_id: id("trace_id", 32)?,
            span_id: id("span_id", 16)?,
            parent: match v.get("parent")? {
                Value::Null => None,
                _ => Some(id("parent", 16)?),
            },
            decided: v.get("decided")?.as_bool()?,
            last,
            failed_at: v.get("failed_at").and_then(Value::as_u64),
        })
    }
}

/// `len` lowercase hex digits, not all zero (an all-zero trace or span id is invalid).
pub fn is_id(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        && s.bytes().any(|b| b != b'0')
}

/// A W3C `traceparent`'s trace and span ids: `<version>-<trace>-<span>-<flags>`, version two
/// hex digits but not `ff` (version `00` has exactly these four fields; a later version may
/// add more), ids valid as [`is_id`] says.
pub fn parse_traceparent(s: &str) -> Option<(String, String)> {
    let mut parts = s.trim().split('-');
    let version = parts.next()?;
    let (trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?);
    let hex2 = |x: &str| x.len() == 2 && x.bytes().all(|b| b.is_ascii_hexdigit());
    if !hex2(version) || version.eq_ignore_ascii_case("ff") || !hex2(flags) {
        return None;
    }
    if version == "00" && parts.next().is_some() {
        return None;
    }
    (is_id(trace, 32) && is_id(span, 16)).then(|| (trace.to_string(), span.to_string()))
}

/// 64-bit FNV-1a of `parts`, each followed by a separator byte.
fn fnv(parts: &[&str], seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for p in parts {
        for b in p.bytes().chain([0x1f]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// A span id derived from `parts` (the session id first): the same parts give the same id,
/// so spans sent in separate requests agree on their parents. Never all zero.
pub fn span_id(parts: &[&str]) -> String {
    format!("{:016x}", fnv(parts, 0).max(1))
}

/// The session's own trace id: the 128 bits of a `ses_<32 hex>` id, else a hash of it.
pub fn own_trace_id(session_id: &str) -> String {
    match session_id.strip_prefix("ses_") {
        Some(hex) if is_id(hex, 32) => hex.to_string(),
        _ => format!(
            "{:016x}{:016x}",
            fnv(&[session_id], 1),
            fnv(&[session_id], 2).max(1)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SES: &str = "ses_0123456789abcdef0123456789abcdef";
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn lines_round_trip_and_foreign_lines_are_skipped() {
        let all = [
            Obs::Start {
                t: 1,
                task_id: "t1".into(),
                context_id: "c1".into(),
                source: "a2a".into(),
                attempt: 1,
                traceparent: Some(TP.into()),
            },
            Obs::Inference {
                t: 2,
                turn: 1,
                decision: "tool_call".into(),
                model: "m".into(),
                input: 10,
                output: 5,
                provider: Some("openai".into()),
            },
            Obs::Call {
                t: 3,
                shell: true,
                turn: 1,
                name: "ls".into(),
                outcome: "ok".into(),
                exit: Some(-1),
                ms: 7,
            },
            Obs::Compaction {
                t: 4,
                tokens: 900,
                threshold: 0.5,
            },
        ];
        for o in &all {
            let line = o.to_line();
            assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
            assert_eq!(Obs::parse(&line).as_ref(), Some(o));
        }
        for bad in [
            "",
            "{",
            "{\"k\":\"start\"}",
            "{\"k\":\"x\",\"t\":1}",
            "{\"k\":\"inference\",\"t\":-1}",
        ] {
            assert_eq!(Obs::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_traceparent_is_taken_only_when_well_formed() {
        assert_eq!(
            parse_traceparent(TP),
            Some((
                "4bf92f3577b34da6a3ce929d0e0e4736".into(),
                "00f067aa0ba902b7".into()
            ))
        );
        assert!(parse_traceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra").is_some());
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(parse_traceparent(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_first_task_decides_the_trace_and_a_later_caller_is_linked() {
        let mut s = Session::new(SES, 5);
        assert_eq!(s.trace_id, "0123456789abcdef0123456789abcdef");
        assert!(is_id(&s.span_id, 16));
        s.task_started(Some(TP));
        assert_eq!(s.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(s.parent.as_deref(), Some("00f067aa0ba902b7"));
        assert_eq!(s.link(Some(TP)), None, "the same caller is the parent already");
        let other = "00-11111111111111111111111111111111-2222222222222222-00";
        s.task_started(Some(other));
        assert_eq!(s.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736", "the trace stays");
        assert_eq!(
            s.link(Some(other)),
            Some((
                "11111111111111111111111111111111".into(),
                "2222222222222222".into()
            ))
        );
        assert_eq!(s.link(Some("00-bad")), None);
        // A first task without a traceparent keeps the session's own trace.
        let mut s = Session::new(SES, 5);
        s.task_started(None);
        s.task_started(Some(TP));
        assert_eq!(s.parent, None);
        assert_eq!(s.link(Some(TP)).map(|l| l.1), Some("00f067aa0ba902b7".into()));
    }

    #[test]
    fn the_session_state_round_trips_and_bad_ids_are_refused() {
        let mut s = Session::new(SES, 5);
        s.task_started(Some(TP));
        s.last = Some(Obs::Start {
            t: 3,
            task_id: "t".into(),
            context_id: "c".into(),
            source: "a2a".into(),
            attempt: 2,
            traceparent: Some(TP.into()),
        });
        s.failed_at = Some(7);
        assert_eq!(Session::parse(&s.to_text()), Some(s.clone()));
        let forged = s.to_text().replace(&s.trace_id, "zz");
        assert_eq!(Session::parse(&forged), None);
        assert_eq!(Session::parse("not json"), None);
    }

    #[test]
    fn after_a_failed_export_the_collector_is_left_alone_for_the_backoff() {
        let mut s = Session::new(SES, 0);
        assert_eq!(s.backing_off(5), None);
        s.failed_at = Some(1_000_000_000);
        assert_eq!(s.backing_off(3_500_000_000), Some(2));
        assert_eq!(s.backing_off(1_000_000_000 + BACKOFF_NS - 1), Some(29));
        assert_eq!(s.backing_off(1_000_000_000 + BACKOFF_NS), None);
        assert_eq!(
            s.backing_off(0),
            Some(0),
            "a clock that went back still backs off"
        );
    }

    #[test]
    fn ids_are_stable_distinct_and_never_zero() {
        assert_eq!(span_id(&["a", "b"]), span_id(&["a", "b"]));
        assert_ne!(span_id(&["a", "b"]), span_id(&["ab"]));
        assert!(is_id(&span_id(&[]), 16));
        let own = own_trace_id("not-a-session-id");
        assert!(is_id(&own, 32), "{own}");
        assert_ne!(own, own_trace_id("another"));
    }
}
