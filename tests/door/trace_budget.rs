//! A session's trace has a byte budget (`MURMUR_TRACE_BUDGET_BYTES`), through the real
//! `mur run`: a flood of resource reads (each one a `resource_read` line) fills it, every
//! event past it is counted, not written, and the trace's last lines say how many
//! (`trace_dropped`) before `session_end`, which is written whatever the budget.

use crate::common;

use common::door::start;
use common::resources::{capsule, exports, put, workdir};
use common::{status_of, TempDir};
use serde_json::Value;

const BUDGET: usize = 20_000;
const READS: usize = 500;

#[test]
fn past_its_budget_a_trace_counts_events_and_its_last_lines_say_how_many() {
    let t = TempDir::new("trace-budget");
    let work = workdir(&t);
    put(&work.join("out/a.txt"), b"hello");
    let dir = capsule(&t, &exports("out/", "1048576"));
    let budget = BUDGET.to_string();
    let mut d = start(
        &t,
        &dir,
        &["--workdir", work.to_str().unwrap()],
        &[("MURMUR_TRACE_BUDGET_BYTES", &budget)],
    );
    for _ in 0..READS {
        assert_eq!(status_of(&d.get("/resources/files/a.txt")), 200);
    }
    assert_eq!(d.term().code(), Some(0));

    let text = std::fs::read_to_string(d.records.join("trace.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    let events: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["event_type"].as_str().unwrap()).collect();
    assert_eq!(kinds[n - 2..], ["trace_dropped", "session_end"], "{kinds:?}");
    let within: usize = lines[..n - 2].iter().map(|l| l.len() + 1).sum();
    assert!(within <= BUDGET, "{within} bytes before the closing lines");
    // Filled: the next resource_read line would not have fitted.
    let read_line = lines[1].len() + 1;
    assert!(within + read_line > BUDGET, "{within} + {read_line}");
    // Every event is either written or counted: session_start and one read per request.
    let written = n - 2;
    assert_eq!(events[n - 2]["dropped_events"], (1 + READS - written) as u64);
    assert_eq!(events[n - 2]["budget_bytes"], BUDGET as u64);
    println!(
        "trace.jsonl: {} bytes, {within} within the budget of {BUDGET} and {} of closing lines; \
         {written} events written, {} counted",
        text.len(),
        text.len() - within,
        1 + READS - written
    );
    // mur trace says it too.
    let shown = std::process::Command::new(common::capsule::MUR)
        .args(["trace", d.records.join("trace.jsonl").to_str().unwrap()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    let line = format!(
        "  dropped     {} events past the trace's budget of {BUDGET} bytes (counted, not written)\n",
        1 + READS - written
    );
    assert!(shown.contains(&line), "{shown}");
}
