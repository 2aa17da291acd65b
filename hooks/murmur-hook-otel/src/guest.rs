//! The component glue: each event observed into `/records` ([`crate::obs`]), a task
//! attempt's spans sent at `task-end` and the session span at `session-end`
//! ([`crate::spans`]), over wasi:http.
wit_bindgen::generate!({ path: "../../wit/hook", world: "murmur:hook/hook", generate_all });

use crate::config::Config;
use crate::obs::{Obs, Session, BACKOFF_NS};
use crate::spans::{attempt_spans, export, session_span, AttemptEnd, Resource};
use driver_common::drive::{body_prefix, TransportError};
use exports::murmur::hook::lifecycle::Guest;
use murmur::hook::types::{CallInfo, Event, Output};
use std::io::Write;
use std::time::Duration;

const SESSION: &str = "/records/session.json";
/// Where the runtime names the inference provider (`gen_ai.provider.name`'s value), when it
/// knows it.
const PROVIDER_VAR: &str = "MURMUR_INFERENCE_PROVIDER";
const TASK: &str = "/records/task.jsonl";
const NO_GRANT: &str =
    "murmur-hook-otel has no records directory to keep its state in: grant its entry `records: own`";
/// The most bytes of a collector's answer read; a longer 2xx answer still counts as accepted.
const ANSWER_CAP: usize = 64 << 10;
/// The most bytes of observations kept for one attempt (about 25 000 turns and calls); past
/// it the attempt's task span says its observations were truncated.
const MAX_TASK_BYTES: u64 = 4 << 20;
/// The most spans in one request (a collector refuses a body past its own limit).
const SPANS_PER_REQUEST: usize = 512;

struct Otel;

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_default()
}

fn session_id() -> String {
    var("MURMUR_SESSION_ID")
}

fn config() -> Result<Config, String> {
    Config::parse(std::env::var("MURMUR_ARTIFACT_CONFIG").ok().as_deref())
}

fn granted(e: std::io::Error, path: &str) -> String {
    format!("{NO_GRANT} ({path}: {e})")
}

/// The session's state; a session whose start was not seen (or whose state is unreadable)
/// starts now.
fn load_session() -> Session {
    std::fs::read_to_string(SESSION)
        .ok()
        .and_then(|t| Session::parse(&t))
        .unwrap_or_else(|| Session::new(&session_id(), now_ns()))
}

fn save_session(s: &Session) -> Result<(), String> {
    std::fs::write(SESSION, s.to_text()).map_err(|e| granted(e, SESSION))
}

/// The running attempt's observations (none when no attempt is open; a line that is not
/// one is skipped), and whether the file reached its cap.
fn attempt() -> (Vec<Obs>, bool) {
    let Ok(bytes) = std::fs::read(TASK) else {
        return (Vec::new(), false);
    };
    let full = bytes.len() as u64 >= MAX_TASK_BYTES;
    let text = String::from_utf8_lossy(&bytes);
    (text.lines().filter_map(Obs::parse).collect(), full)
}

fn append(o: &Obs, fresh: bool) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(!fresh)
        .truncate(fresh)
        .open(TASK)
        .map_err(|e| granted(e, TASK))?;
    if !fresh && f.metadata().is_ok_and(|m| m.len() >= MAX_TASK_BYTES) {
        return Ok(());
    }
    f.write_all(o.to_line().as_bytes())
        .map_err(|e| format!("cannot write {TASK}: {e}"))
}

/// Observe `o` in the running attempt; a turn or call after an attempt ended is a reopen
/// of that task: its next attempt starts.
fn observe(o: Obs) -> Result<(), String> {
    if std::fs::metadata(TASK).is_err() {
        if let Some(start) = load_session().reopen(o.t()) {
            append(&start, true)?;
        }
    }
    append(&o, false)
}

fn call(c: CallInfo, shell: bool) -> Obs {
    Obs::Call {
        t: now_ns(),
        shell,
        turn: c.turn,
        name: c.name,
        outcome: c.outcome,
        exit: c.exit_code,
        ms: c.duration_ms,
    }
}

/// Why one request failed, and whether the collector should be left alone for a while
/// (it is unreachable, slow or overloaded, not refusing this one body).
struct Failed {
    why: String,
    back_off: bool,
}

/// POST the spans, at most [`SPANS_PER_REQUEST`] per request, unless the collector failed
/// within the backoff. The failure is noted in `session` and saved *before* each request,
/// so a call cut off while it waits (its deadline, the session's end) leaves the collector
/// backed off; it is cleared on success. An error says how many spans were lost and why.
fn send(session: &mut Session, spans: Vec<serde_json::Value>, what: &str) -> Result<(), String> {
    let config = config()?;
    let count = spans.len();
    let now = now_ns();
    if let Some(secs) = session.backing_off(now) {
        return Err(format!(
            "{count} spans of {what} dropped: the collector {} failed {secs} s ago (tried again {} s after a failure)",
            config.traces,
            BACKOFF_NS / 1_000_000_000
        ));
    }
    let mut sent = 0;
    let mut rest = spans;
    while !rest.is_empty() {
        let batch: Vec<serde_json::Value> = rest.drain(..rest.len().min(SPANS_PER_REQUEST)).collect();
        let size = batch.len();
        let before = session.failed_at;
        session.failed_at = Some(now_ns());
        save_session(session)?;
        match post(&config, batch) {
            Ok(()) => {
                session.failed_at = None;
                sent += size;
            }
            Err(f) => {
                session.failed_at = if f.back_off { session.failed_at } else { before };
                save_session(session)?;
                return Err(format!(
                    "{} of {count} spans of {what} not exported to {}: {}",
                    count - sent,
                    config.traces,
                    f.why
                ));
            }
        }
    }
    save_session(session)
}

/// One export request.
fn post(config: &Config, spans: Vec<serde_json::Value>) -> Result<(), Failed> {
    let (name, version, sid) = (
        var("MURMUR_CAPSULE_NAME"),
        var("MURMUR_CAPSULE_VERSION"),
        session_id(),
    );
    let body = export(
        &Resource {
            capsule: &name,
            version: &version,
            session_id: &sid,
        },
        spans,
    );
    let answer = driver_common::http::post_within(
        &config.traces,
        &[("content-type", "application/json")],
        body.as_bytes(),
        ANSWER_CAP,
        Some(Duration::from_millis(config.timeout_ms)),
    );
    let answer = match answer {
        Ok(a) => a,
        Err(TransportError::TooLarge { status }) if (200..300).contains(&status) => return Ok(()),
        Err(TransportError::TooLarge { status }) => {
            return Err(Failed {
                why: format!("HTTP {status} with an answer over {ANSWER_CAP} bytes"),
                back_off: status >= 500 || status == 429,
            })
        }
        Err(TransportError::Denied(why)) => return Err(Failed { why, back_off: false }),
        Err(TransportError::Failed(why)) => return Err(Failed { why, back_off: true }),
    };
    if (200..300).contains(&answer.status) {
        return Ok(());
    }
    Err(Failed {
        why: format!("HTTP {}: {}", answer.status, body_prefix(&answer.body)),
        back_off: answer.status >= 500 || answer.status == 429,
    })
}

fn task_end(task_id: &str, exit_status: &str, turns: u32) -> Result<(), String> {
    let t = now_ns();
    let mut session = load_session();
    let (mut obs, truncated) = attempt();
    let mut notes = Vec::new();
    // The start of another task means this one's start (and that one's end) were dropped
    // from the runtime's full queue: the observations are that task's, not this one's.
    if let Some(Obs::Start { task_id: other, .. }) = obs.first() {
        if other != task_id {
            notes.push(format!(
                "{} observations of task {} dropped: its end was not seen",
                obs.len(),
                driver_common::outcome::one_line(other, 80)
            ));
            obs.clear();
        }
    }
    if !matches!(obs.first(), Some(Obs::Start { .. })) {
        // Every event of the attempt's start was dropped: a reopen of the task that ended
        // last when it is this one, else a first attempt.
        let start = session
            .reopen(t)
            .filter(|s| matches!(s, Obs::Start { task_id: last, .. } if last == task_id))
            .unwrap_or(Obs::Start {
                t: obs.first().map_or(t, Obs::t),
                task_id: task_id.to_string(),
                context_id: String::new(),
                source: String::new(),
                attempt: 1,
                traceparent: None,
            });
        obs.insert(0, start);
    }
    let end = AttemptEnd {
        t,
        task_id,
        exit_status,
        turns,
        truncated,
    };
    let spans = attempt_spans(&session, &session_id(), &obs, &end);
    session.last = obs.into_iter().next();
    // The attempt is over whatever the export does.
    save_session(&session)?;
    let _ = std::fs::remove_file(TASK);
    let what = format!("task {}", driver_common::outcome::one_line(task_id, 80));
    if let Err(e) = send(&mut session, spans, &what) {
        notes.push(e);
    }
    if notes.is_empty() {
        Ok(())
    } else {
        Err(notes.join("; "))
    }
}

fn session_end(exit_status: &str) -> Result<(), String> {
    let mut session = load_session();
    let span = session_span(&session, &session_id(), now_ns(), exit_status);
    let sent = send(&mut session, vec![span], "the session");
    let _ = std::fs::remove_file(TASK);
    let _ = std::fs::remove_file(SESSION);
    sent
}

impl Guest for Otel {
    fn on_event(event: Event) -> Result<Output, String> {
        if matches!(event, Event::Stage(_)) {
            return Ok(Output::None);
        }
        // Without its state the hook could send only unparented fragments: nothing at all.
        std::fs::metadata("/records").map_err(|_| NO_GRANT.to_string())?;
        match event {
            Event::SessionStart => {
                config()?;
                save_session(&Session::new(&session_id(), now_ns()))?;
            }
            Event::TaskStart(info) => {
                let mut session = load_session();
                session.task_started(info.traceparent.as_deref());
                save_session(&session)?;
                append(
                    &Obs::Start {
                        t: now_ns(),
                        task_id: info.task_id,
                        context_id: info.context_id,
                        source: info.source,
                        attempt: 1,
                        traceparent: info.traceparent,
                    },
                    true,
                )?;
            }
            Event::Inference(i) => observe(Obs::Inference {
                t: now_ns(),
                turn: i.turn,
                decision: i.decision,
                model: i.model,
                input: i.usage.input_tokens,
                output: i.usage.output_tokens,
                provider: std::env::var(PROVIDER_VAR).ok().filter(|p| !p.is_empty()),
            })?,
            Event::ToolCall(c) => observe(call(c, false))?,
            Event::Shell(c) => observe(call(c, true))?,
            Event::Compaction(c) => observe(Obs::Compaction {
                t: now_ns(),
                tokens: c.session_tokens,
                threshold: c.threshold,
            })?,
            Event::TaskEnd(info) => task_end(&info.task_id, &info.exit_status, info.turns)?,
            Event::SessionEnd(info) => session_end(&info.exit_status)?,
            Event::Stage(_) => {}
        }
        Ok(Output::None)
    }
}

export!(Otel);
