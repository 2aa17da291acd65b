//! A trace laid out on a time axis (for `mur trace --html`): each event a row with a start
//! and a duration in ms after the trace's first timestamp, its mark and text as the timeline
//! renders them, and its tokens; rows grouped by task (events outside any task belong to the
//! session's group), each task with its span, status, tokens and first failure. Times come
//! from untrusted fields, so every one is clamped: no row starts before 0 or lasts less
//! than 0.

use super::fields::n;
use super::lines::Line;
use super::summary::Summary;
use super::timeline::{Event, Timeline};
use serde_json::Value;

/// What a row is, for its colour on the axis: a fixed vocabulary, never trace text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Task,
    Turn,
    Tool,
    Shell,
    Delegation,
    Other,
}

impl Lane {
    fn of(kind: &str) -> Lane {
        match kind {
            "task_start" | "task_end" | "task_reopened" => Lane::Task,
            "inference" | "inference_retry" | "compaction" => Lane::Turn,
            "tool_call" => Lane::Tool,
            "shell" => Lane::Shell,
            "delegation" | "delegation_start" | "completion_refused" => Lane::Delegation,
            _ => Lane::Other,
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Lane::Task => "task",
            Lane::Turn => "turn",
            Lane::Tool => "tool",
            Lane::Shell => "shell",
            Lane::Delegation => "delegation",
            Lane::Other => "other",
        }
    }
}

/// One event on the axis.
#[derive(Debug, Clone)]
pub struct Row {
    pub group: usize,
    pub start_ms: u64,
    pub dur_ms: u64,
    /// `!` a refusal or failure, `*` notable, ` ` ordinary (the timeline's mark).
    pub mark: char,
    pub lane: Lane,
    /// The timeline's text of the event (its lines joined by ` · `), cleaned and cut.
    pub text: String,
    pub tokens: (u64, u64),
}

/// A task (or the session's own events) on the axis.
#[derive(Debug, Clone)]
pub struct Group {
    /// The timeline's line of its `task_start` (`session` for the session's group).
    pub label: String,
    pub start_ms: u64,
    pub end_ms: u64,
    /// Its `task_end`'s `exit_status`, or `no task_end`.
    pub status: String,
    /// It ended other than `ok` (a task that recovered from a failed call did not fail).
    pub failed: bool,
    pub tokens: (u64, u64),
    pub rows: usize,
    /// The text of its first failed event.
    pub why: Option<String>,
}

/// Rows and groups as the lines come.
pub struct Spans {
    timeline: Timeline,
    pub groups: Vec<Group>,
    pub rows: Vec<Row>,
    /// The open task's group.
    open: Option<usize>,
    /// Per group, when its last event ended (a turn runs from there to its `inference`).
    last_ms: Vec<u64>,
    /// The latest time seen: an event without a timestamp is placed there.
    now_ms: u64,
}

impl Default for Spans {
    fn default() -> Spans {
        Spans::new()
    }
}

fn group(label: &str, start_ms: u64) -> Group {
    Group {
        label: label.to_string(),
        start_ms,
        end_ms: start_ms,
        status: "no task_end".into(),
        failed: false,
        tokens: (0, 0),
        rows: 0,
        why: None,
    }
}

impl Spans {
    pub fn new() -> Spans {
        Spans {
            timeline: Timeline::new(),
            groups: vec![group("session", 0)],
            rows: Vec::new(),
            open: None,
            last_ms: vec![0],
            now_ms: 0,
        }
    }

    pub fn summary(&self) -> &Summary {
        self.timeline.summary()
    }

    /// The reader stopped at the file-size cap.
    pub fn mark_cut(&mut self) {
        self.timeline.mark_cut();
    }

    /// The axis's length: the latest end of anything on it (at least 1 ms).
    pub fn span_ms(&self) -> u64 {
        let groups = self.groups.iter().map(|g| g.end_ms);
        let rows = self.rows.iter().map(|r| r.start_ms.saturating_add(r.dur_ms));
        groups.chain(rows).max().unwrap_or(0).max(self.now_ms).max(1)
    }

    /// Take one line of the trace.
    pub fn push(&mut self, line: Line) {
        let Some(event) = self.timeline.push_event(line) else {
            return;
        };
        let at = match event.at_ms {
            Some(t) => u64::try_from(t.max(0)).unwrap_or(u64::MAX),
            None => self.now_ms,
        };
        self.now_ms = self.now_ms.max(at);
        if event.kind == "task_start" {
            self.start_task(&event, at);
        }
        let g = self.open.unwrap_or(0);
        let row = self.row(g, &event, at);
        self.account(g, &row, &event);
        self.last_ms[g] = self.last_ms[g].max(at);
        self.rows.push(row);
        if event.kind == "task_end" {
            self.end_task(g, &event.obj, at);
        }
    }

    fn start_task(&mut self, event: &Event, at: u64) {
        if let Some(g) = self.open.take() {
            self.groups[g].end_ms = self.last_ms[g];
        }
        let label = event.rows.first().map_or("task", |r| r.2.as_str());
        self.groups.push(group(label, at));
        self.last_ms.push(at);
        self.open = Some(self.groups.len() - 1);
    }

    fn end_task(&mut self, g: usize, o: &serde_json::Map<String, Value>, at: u64) {
        let gr = &mut self.groups[g];
        gr.end_ms = at.max(gr.start_ms);
        gr.status = super::fields::s(o, "exit_status");
        gr.failed = gr.status != "ok";
        if let (Some(i), Some(out)) = (n(o, "input_tokens"), n(o, "output_tokens")) {
            gr.tokens = (i, out);
        }
        if g != 0 {
            self.open = None;
        }
    }

    /// The event's row: its span (a call's `duration_ms` ends at its timestamp; a turn
    /// runs from the group's previous event), mark, text and tokens.
    fn row(&self, g: usize, event: &Event, at: u64) -> Row {
        let o = &event.obj;
        let dur = match event.kind.as_str() {
            "inference" => at.saturating_sub(self.last_ms[g]),
            "task_end" => at.saturating_sub(self.groups[g].start_ms),
            _ => n(o, "duration_ms").unwrap_or(0).min(at),
        };
        let mark = event
            .rows
            .iter()
            .map(|r| r.0)
            .max_by_key(|m| match m {
                '!' => 2,
                '*' => 1,
                _ => 0,
            })
            .unwrap_or(' ');
        let text = event
            .rows
            .iter()
            .map(|r| r.2.as_str())
            .collect::<Vec<_>>()
            .join(" · ");
        let tokens = match event.kind.as_str() {
            "inference" | "task_end" => (
                n(o, "input_tokens").unwrap_or(0),
                n(o, "output_tokens").unwrap_or(0),
            ),
            _ => (0, 0),
        };
        Row {
            group: g,
            start_ms: at - dur,
            dur_ms: dur,
            mark,
            lane: Lane::of(&event.kind),
            text,
            tokens,
        }
    }

    /// The row counted in its group: its tokens (a task's own `task_end` totals win), the
    /// group's end and its first failure.
    fn account(&mut self, g: usize, row: &Row, event: &Event) {
        let gr = &mut self.groups[g];
        gr.rows += 1;
        gr.end_ms = gr.end_ms.max(row.start_ms.saturating_add(row.dur_ms));
        if event.kind == "inference" {
            gr.tokens.0 = gr.tokens.0.saturating_add(row.tokens.0);
            gr.tokens.1 = gr.tokens.1.saturating_add(row.tokens.1);
        }
        if row.mark == '!' && gr.why.is_none() {
            gr.why = Some(row.text.clone());
        }
    }

    /// The last line of a trace that ended without its newline, and the session's group
    /// closed: its status is the session's.
    pub fn finish(&mut self, last: Option<Line>) {
        if let Some(line) = last {
            self.push(line);
        }
        let span = self.span_ms();
        let status = self.summary().exit_status.clone();
        let s = &mut self.groups[0];
        s.end_ms = span;
        s.status = status.unwrap_or_else(|| "no session_end".into());
        s.failed = s.status != "ok";
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spans(events: &[Value]) -> Spans {
        let mut s = Spans::new();
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        let mut split = super::super::Splitter::new(super::super::MAX_LINE);
        for l in split.feed(text.as_bytes()) {
            s.push(l);
        }
        s.finish(split.finish());
        s
    }

    #[test]
    fn calls_end_at_their_timestamp_and_turns_start_at_the_previous_event() {
        let s = spans(&[
            json!({"event_type": "session_start", "timestamp": 1000}),
            json!({"event_type": "task_start", "timestamp": 1010, "task_id": "t1"}),
            json!({"event_type": "inference", "timestamp": 1500, "turn": 1, "input_tokens": 7, "output_tokens": 3}),
            json!({"event_type": "tool_call", "timestamp": 1800, "tool_name": "bash", "duration_ms": 250, "status": "error", "error": "boom"}),
            json!({"event_type": "task_end", "timestamp": 1900, "task_id": "t1", "exit_status": "failed"}),
            json!({"event_type": "delegation", "timestamp": 2000, "duration_ms": 99999, "status": "completed"}),
            json!({"event_type": "session_end", "timestamp": 2100, "exit_status": "ok", "duration_ms": 1100}),
        ]);
        let r: Vec<(u64, u64, char)> = s.rows.iter().map(|r| (r.start_ms, r.dur_ms, r.mark)).collect();
        assert_eq!(
            r,
            [
                (0, 0, ' '),
                (10, 0, ' '),
                (10, 490, ' '),
                (550, 250, '!'),
                (10, 890, '!'),
                (0, 1000, '*'),
                (0, 1100, ' ')
            ]
        );
        assert_eq!(s.groups.len(), 2);
        let t = &s.groups[1];
        assert_eq!((t.start_ms, t.end_ms, t.rows, t.tokens), (10, 900, 4, (7, 3)));
        assert!(t.failed && t.status == "failed");
        assert!(t.why.as_deref().unwrap().contains("boom"), "{t:?}");
        assert_eq!((s.groups[0].status.as_str(), s.groups[0].rows), ("ok", 3));
        assert_eq!(s.span_ms(), 1100);
    }

    #[test]
    fn hostile_times_are_clamped_and_bad_lines_counted() {
        let mut s = Spans::new();
        let mut split = super::super::Splitter::new(super::super::MAX_LINE);
        let text = b"{\"event_type\":\"x\",\"timestamp\":5000}\n{\"event_type\":\"tool_call\",\"timestamp\":-9,\"duration_ms\":18446744073709551615}\nnope\n{\"event_type\":\"task_start\"}\n{\"event_type\":\"task_start\",\"timestamp\":1e400";
        for l in split.feed(text) {
            s.push(l);
        }
        s.finish(split.finish());
        assert_eq!(s.rows[1].start_ms, 0);
        assert_eq!(s.rows[1].dur_ms, 0);
        assert_eq!(s.summary().problem_count, 2);
        assert_eq!(s.groups.len(), 2);
        assert_eq!(s.groups[1].status, "no task_end");
    }
}
