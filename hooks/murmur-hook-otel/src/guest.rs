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
const TASK: &str = "/records/task.jsonl";
const NO_GRANT: &str =
    "murmur-hook-otel has no records directory to keep its state in: grant its entry `records: own`";
/// The most bytes of a collector's answer read.
const ANSWER_CAP: usize = 64 << 10;

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

/// The running attempt's observations (none when no attempt is open).
fn attempt() -> Vec<Obs> {
    std::fs::read_to_string(TASK).map_or_else(|_| Vec::new(), |t| t.lines().filter_map(Obs::parse).collect())
}

fn append(o: &Obs, fresh: bool) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(!fresh)
        .truncate(fresh)
        .open(TASK)
        .map_err(|e| granted(e, TASK))?;
    f.write_all(o.to_line().as_bytes())
        .map_err(|e| format!("cannot write {TASK}: {e}"))
}

/// Observe `o` in the running attempt; a turn or call after an attempt ended is a reopen
/// of that task: a new attempt starts.
fn observe(o: Obs) -> Result<(), String> {
    if std::fs::metadata(TASK).is_err() {
        if let Some((task_id, context_id, attempt)) = load_session().last {
            append(
                &Obs::Start {
                    t: o.t(),
                    task_id,
                    context_id,
                    source: "reopen".into(),
                    attempt: attempt.saturating_add(1),
                    traceparent: None,
                },
                true,
            )?;
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

/// POST the spans unless the collector failed within the backoff, noting a failure in
/// `session`; an error says how many spans were lost and why.
fn send(session: &mut Session, spans: Vec<serde_json::Value>, what: &str) -> Result<(), String> {
    let config = config()?;
    let count = spans.len();
    if let Some(secs) = session.backing_off(now_ns()) {
        return Err(format!(
            "{count} spans of {what} dropped: the collector {} failed {secs} s ago (tried again {} s after a failure)",
            config.traces,
            BACKOFF_NS / 1_000_000_000
        ));
    }
    let sent = post(&config, spans);
    session.failed_at = sent.is_err().then(now_ns);
    sent.map_err(|why| format!("{count} spans of {what} not exported to {}: {why}", config.traces))
}

/// One export request; why it failed.
fn post(config: &Config, spans: Vec<serde_json::Value>) -> Result<(), String> {
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
    )
    .map_err(|e| match e {
        TransportError::Denied(why) | TransportError::Failed(why) => why,
        TransportError::TooLarge { status } => {
            format!("HTTP {status} with an answer over {ANSWER_CAP} bytes")
        }
    })?;
    if !(200..300).contains(&answer.status) {
        return Err(format!("HTTP {}: {}", answer.status, body_prefix(&answer.body)));
    }
    Ok(())
}

fn task_end(task_id: &str, exit_status: &str, turns: u32) -> Result<(), String> {
    let t = now_ns();
    let mut session = load_session();
    let mut obs = attempt();
    let started = obs.iter().find_map(|o| match o {
        Obs::Start {
            context_id, attempt, ..
        } => Some((context_id.clone(), *attempt)),
        _ => None,
    });
    let (context_id, attempt) = match (started, &session.last) {
        (Some(s), _) => s,
        // Every event of the attempt was dropped: a reopen of the task that ended last.
        (None, Some((last, context, n))) if last == task_id => {
            obs.insert(
                0,
                Obs::Start {
                    t,
                    task_id: task_id.to_string(),
                    context_id: context.clone(),
                    source: "reopen".into(),
                    attempt: n.saturating_add(1),
                    traceparent: None,
                },
            );
            (context.clone(), n.saturating_add(1))
        }
        (None, _) => (String::new(), 1),
    };
    let end = AttemptEnd {
        t,
        task_id,
        exit_status,
        turns,
    };
    let spans = attempt_spans(&session, &session_id(), &obs, &end);
    session.last = Some((task_id.to_string(), context_id, attempt));
    let _ = std::fs::remove_file(TASK);
    let what = format!("task {}", driver_common::outcome::one_line(task_id, 80));
    let sent = send(&mut session, spans, &what);
    save_session(&session)?;
    sent
}

fn session_end(exit_status: &str) -> Result<(), String> {
    let mut session = load_session();
    let span = session_span(&session, &session_id(), now_ns(), exit_status);
    let _ = std::fs::remove_file(TASK);
    let _ = std::fs::remove_file(SESSION);
    send(&mut session, vec![span], "the session")
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
