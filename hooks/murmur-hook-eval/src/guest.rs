//! The component glue: observe each event into `/records/observed.jsonl`, score at
//! `session-end` into `/records/eval.jsonl` (see [`crate::score`]).
wit_bindgen::generate!({ path: "../../wit/hook-0.1", world: "murmur:hook/hook", generate_all });

use crate::score::{records, Config, Observed};
use exports::murmur::hook::lifecycle::Guest;
use murmur::hook::types::{Event, Output};
use std::io::Write;

const OBSERVED: &str = "/records/observed.jsonl";
const EVAL: &str = "/records/eval.jsonl";
const NO_GRANT: &str = "murmur-hook-eval has no records directory to write: grant its entry `records: own`";

struct Eval;

fn append(o: &Observed) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(OBSERVED)
        .map_err(|e| format!("{NO_GRANT} ({OBSERVED}: {e})"))?;
    f.write_all(o.to_line().as_bytes())
        .map_err(|e| format!("cannot write {OBSERVED}: {e}"))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn finish() -> Result<(), String> {
    let config = Config::parse(std::env::var("MURMUR_ARTIFACT_CONFIG").ok().as_deref())?;
    let text = match std::fs::read_to_string(OBSERVED) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{NO_GRANT} ({OBSERVED}: {e})")),
    };
    let seen: Vec<Observed> = text.lines().filter_map(Observed::parse).collect();
    let exists = |p: &str| std::fs::metadata(p).is_ok();
    let mut body = String::new();
    for line in records(&config, &seen, now_ms(), &exists) {
        body.push_str(&line);
        body.push('\n');
    }
    std::fs::write(EVAL, body).map_err(|e| format!("{NO_GRANT} ({EVAL}: {e})"))?;
    let _ = std::fs::remove_file(OBSERVED);
    Ok(())
}

impl Guest for Eval {
    fn on_event(event: Event) -> Result<Output, String> {
        match event {
            Event::SessionStart => {
                // Say at once (in the hook's log) when nothing could be written.
                std::fs::metadata("/records").map_err(|_| NO_GRANT.to_string())?;
                Config::parse(std::env::var("MURMUR_ARTIFACT_CONFIG").ok().as_deref())?;
            }
            Event::TaskEnd(info) => append(&Observed::TaskEnd {
                exit_status: info.exit_status,
                turns: info.turns,
                result: info.result_text,
            })?,
            Event::ToolCall(c) | Event::Shell(c) if c.outcome == "error" => {
                append(&Observed::CallError { name: c.name })?
            }
            Event::SessionEnd => finish()?,
            _ => {}
        }
        Ok(Output::None)
    }
}

export!(Eval);
