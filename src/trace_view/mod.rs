//! Reading a session's `trace.jsonl` for a person: bounded line splitting, sanitising what
//! reaches the terminal, a timeline and a summary. A trace is untrusted input (a capsule's
//! tool inputs and a guest's messages end up in it), so nothing here panics on any bytes,
//! no line longer than [`MAX_LINE`] is parsed, and every string printed passes [`clean`].
//! The same events laid out on a time axis ([`Spans`]) make the page of `mur trace --html`
//! ([`html`]), where every string is also escaped for HTML.

mod clean;
mod fields;
pub mod html;
mod lines;
mod spans;
mod summary;
mod timeline;

pub use clean::{clean, clean_into};
pub use lines::{Line, Splitter};
pub use spans::{Group, Lane, Row, Spans};
pub use summary::Summary;
pub use timeline::{Event, Rendered, Timeline};

/// The longest line parsed; a longer one is reported and skipped.
pub const MAX_LINE: usize = 256 * 1024;

/// The byte budget of a session's trace unless the operator sets another
/// (`MURMUR_TRACE_BUDGET_BYTES`): past it the runtime counts events instead of writing them.
pub const DEFAULT_TRACE_BUDGET: u64 = 64 * 1024 * 1024;

/// The most bytes of one trace read (`mur trace` stops there and says so): a trace of the
/// default budget and its closing lines (`trace_dropped`, `session_end`) with room to spare.
pub const MAX_FILE: u64 = DEFAULT_TRACE_BUDGET + 1024 * 1024;

/// Render a whole trace held in memory: the timeline, then the summary; problems (malformed
/// lines) are part of the summary. Used by the fuzz target and tests.
pub fn render_all(bytes: &[u8]) -> (String, Summary) {
    let mut split = Splitter::new(MAX_LINE);
    let mut timeline = Timeline::new();
    let mut out = String::new();
    let mut lines = split.feed(bytes);
    lines.extend(split.finish());
    for line in lines {
        for text in timeline.push(line) {
            out.push_str(&text);
            out.push('\n');
        }
    }
    (out, timeline.into_summary())
}

#[cfg(test)]
mod tests {
    #[test]
    fn malformed_lines_are_counted_and_escapes_never_printed() {
        let trace = b"{\"event_type\":\"session_start\",\"timestamp\":10,\"capsule_name\":\"a\\u001b[2J\"}\n\
                      junk\n{\"event_type\":\"trap\",\"timestamp\":20,\"trap_kind\":\"deadline\",\"message\":\"m\"}\n{\"event_type\":";
        let (text, summary) = super::render_all(trace);
        assert!(text.contains("session - a[2J -"), "{text}");
        assert!(text.contains("   +0.010s !   trap deadline: m"), "{text}");
        assert!(!text.contains('\u{1b}'));
        assert_eq!(summary.problems.len(), 2);
        assert_eq!(summary.problems[1].0, 4);
        assert_eq!(summary.refusals, 1);
    }
}
