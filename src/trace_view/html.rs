//! A session's timeline as one self-contained page (`mur trace --html`): the summary and
//! what was skipped, the tasks and their events on a time axis drawn by the page's one
//! script from embedded JSON, then the failures with their reasons and the time per tool as
//! static HTML. The script draws a few hundred rows at a time, so a 60,000-event trace
//! opens at once. Every piece of trace text is escaped ([`crate::page`]); the script only
//! ever sets `textContent`.

use super::spans::{Group, Lane, Row, Spans};
use super::summary::Summary;
use crate::page::{escape, Page};
use serde_json::{json, Value};
use std::fmt::Write as _;

const STYLE: &str = include_str!("../page.css");
const SCRIPT: &str = include_str!("timeline.js");
/// The most failures listed in the page's static list (all are in the timeline).
const MAX_FAILURES: usize = 200;

/// The page of a trace read into `spans`.
pub fn page(spans: &Spans) -> String {
    let s = spans.summary();
    let title = format!(
        "mur trace {}",
        s.session_id.as_deref().unwrap_or("(no session id)")
    );
    let mut body = String::new();
    header(&mut body, s);
    skipped(&mut body, s);
    timeline(&mut body);
    failures(&mut body, &spans.rows);
    per_tool(&mut body, s);
    crate::page::render(&Page {
        title: &title,
        style: STYLE,
        script: Some(SCRIPT),
        data: Some(&data(spans)),
        body: &body,
    })
}

fn or_dash(v: &Option<String>) -> String {
    escape(v.as_deref().unwrap_or("-"))
}

/// Step: who ran, how it ended, the totals.
fn header(out: &mut String, s: &Summary) {
    let j = s.to_json();
    let num = |k: &str| j[k].as_u64().unwrap_or(0);
    let _ = writeln!(
        out,
        "<header><h1>Session <span class=\"text\">{}</span></h1>\n<p class=\"meta\">capsule {} {} · containment declared {}, achieved {} · outcome <b class=\"{}\">{}</b></p>",
        or_dash(&s.session_id),
        or_dash(&s.capsule),
        or_dash(&s.version),
        or_dash(&s.declared),
        or_dash(&s.achieved),
        if s.exit_status.as_deref() == Some("ok") { "" } else { "st-bad" },
        or_dash(&s.exit_status)
    );
    out.push_str("<dl class=\"totals\">");
    let wall = format!("{:.3} s", s.wall_ms() as f64 / 1000.0);
    let items = [
        ("tasks", s.tasks.to_string()),
        ("turns", num("turns").to_string()),
        ("tool calls", num("tool_calls").to_string()),
        ("shell calls", num("shell_calls").to_string()),
        (
            "tokens",
            format!("{} in / {} out", num("input_tokens"), num("output_tokens")),
        ),
        ("wall time", wall),
        ("events", s.events.to_string()),
        ("compactions", s.compactions.to_string()),
        ("refusals or failures", s.refusals.to_string()),
    ];
    for (k, v) in items {
        let _ = write!(out, "<div><dt>{k}</dt><dd>{}</dd></div>", escape(&v));
    }
    out.push_str("</dl></header>\n");
}

/// Step: what the page does not show, and why: malformed lines, the read cap, dropped
/// events, incomplete records.
fn skipped(out: &mut String, s: &Summary) {
    if let Some(why) = &s.records_error {
        let _ = writeln!(
            out,
            "<p class=\"notice bad\">records incomplete: {}</p>",
            escape(why)
        );
    } else if !s.ended {
        out.push_str("<p class=\"notice\">no session_end: the session is still running, or its records are incomplete</p>\n");
    }
    if s.dropped_events > 0 {
        let _ = writeln!(
            out,
            "<p class=\"notice\">{} events past the trace's budget of {} bytes were counted, not written</p>",
            s.dropped_events,
            s.budget_bytes.map_or_else(|| "-".into(), |b| b.to_string())
        );
    }
    if s.cut_at_cap {
        let _ = writeln!(
            out,
            "<p class=\"notice bad\">only the first {} bytes of the trace were read</p>",
            super::MAX_FILE
        );
    }
    if s.problem_count > 0 {
        let _ = write!(
            out,
            "<div class=\"notice bad\" id=\"skipped\">{} lines skipped:<ul>",
            s.problem_count
        );
        for (line, why) in &s.problems {
            let _ = write!(out, "<li>line {line}: {}</li>", escape(why));
        }
        if s.problem_count > s.problems.len() as u64 {
            out.push_str("<li>…</li>");
        }
        out.push_str("</ul></div>\n");
    }
}

fn secs(ms: u64) -> String {
    format!("+{:.3} s", ms as f64 / 1000.0)
}

/// Step: every refusal or failure with its reason (the first [`MAX_FAILURES`]).
fn failures(out: &mut String, rows: &[Row]) {
    let failed: Vec<&Row> = rows.iter().filter(|r| r.mark == '!').collect();
    if failed.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<section id=\"failures\"><h2>Refusals and failures ({})</h2><ol class=\"failures\">",
        failed.len()
    );
    for r in failed.iter().take(MAX_FAILURES) {
        let _ = write!(
            out,
            "<li class=\"fail\"><span class=\"when\">{}</span> <span class=\"text\">{}</span></li>",
            secs(r.start_ms.saturating_add(r.dur_ms)),
            escape(&r.text)
        );
    }
    if failed.len() > MAX_FAILURES {
        let _ = write!(
            out,
            "<li class=\"muted\">and {} more in the timeline</li>",
            failed.len() - MAX_FAILURES
        );
    }
    out.push_str("</ol></section>\n");
}

/// Step: where the time of calls went, per tool.
fn per_tool(out: &mut String, s: &Summary) {
    let mut tools: Vec<(&String, &(u64, u64))> = s.per_tool().collect();
    if tools.is_empty() {
        return;
    }
    tools.sort_by_key(|t| std::cmp::Reverse(t.1 .1));
    out.push_str("<section id=\"tools\"><h2>Time per tool</h2><table><tr><th>tool</th><th class=\"n\">calls</th><th class=\"n\">ms</th></tr>");
    for (name, (calls, ms)) in tools {
        let _ = write!(
            out,
            "<tr><td class=\"text\">{}</td><td class=\"n\">{calls}</td><td class=\"n\">{ms}</td></tr>",
            escape(name)
        );
    }
    out.push_str("</table></section>\n");
}

/// Step: the place the script draws the axis and the groups in.
fn timeline(out: &mut String) {
    out.push_str("<section id=\"timeline\"><h2>Timeline</h2><p class=\"legend\">");
    for lane in [
        Lane::Task,
        Lane::Turn,
        Lane::Tool,
        Lane::Shell,
        Lane::Delegation,
        Lane::Other,
    ] {
        let _ = write!(out, "<span><i class=\"k-{0}\"></i>{0}</span>", lane.word());
    }
    out.push_str("<span><i class=\"k-bad\"></i>failed</span></p>\n<div class=\"axis\" id=\"axis\"></div>\n<div id=\"groups\"></div></section>\n");
}

fn lane_index(l: Lane) -> u8 {
    match l {
        Lane::Task => 0,
        Lane::Turn => 1,
        Lane::Tool => 2,
        Lane::Shell => 3,
        Lane::Delegation => 4,
        Lane::Other => 5,
    }
}

fn group_json(g: &Group) -> Value {
    json!([
        g.label,
        g.start_ms,
        g.end_ms.max(g.start_ms),
        g.status,
        u8::from(g.failed),
        g.tokens.0,
        g.tokens.1,
        g.rows,
        g.why
    ])
}

/// The script's data: the axis's length, the groups and the rows (see `timeline.js`).
fn data(spans: &Spans) -> Value {
    let rows: Vec<Value> = spans
        .rows
        .iter()
        .map(|r| {
            let mark = match r.mark {
                '!' => 2,
                '*' => 1,
                _ => 0,
            };
            json!([
                r.group,
                r.start_ms,
                r.dur_ms,
                mark,
                lane_index(r.lane),
                r.text,
                r.tokens.0,
                r.tokens.1
            ])
        })
        .collect();
    json!({
        "span": spans.span_ms(),
        "groups": spans.groups.iter().map(group_json).collect::<Vec<_>>(),
        "rows": rows,
    })
}

/// A whole trace held in memory as a page (tests, the fuzz target and the bench).
pub fn page_of(bytes: &[u8]) -> String {
    let mut split = super::Splitter::new(super::MAX_LINE);
    let mut spans = Spans::new();
    for line in split.feed(bytes) {
        spans.push(line);
    }
    spans.finish(split.finish());
    page(&spans)
}

#[cfg(test)]
mod tests {
    const PLANTED: &str = "<script>alert(1)</script> </script><img src=x onerror=alert(1)> <!--";

    #[test]
    fn planted_markup_is_only_ever_escaped() {
        let events = [
            serde_json::json!({"event_type": "session_start", "timestamp": 0, "session_id": "ses_1", "capsule_name": PLANTED}),
            serde_json::json!({"event_type": "task_start", "timestamp": 1, "task_id": PLANTED, "source": PLANTED}),
            serde_json::json!({"event_type": "tool_call", "timestamp": 5, "tool_name": PLANTED, "duration_ms": 3,
                "status": "error", "error": PLANTED, "input": {"x": PLANTED}}),
            serde_json::json!({"event_type": PLANTED, "timestamp": 6}),
        ];
        let trace: String = events.iter().map(|e| format!("{e}\n")).collect();
        let page = super::page_of(format!("{trace}{PLANTED}\n").as_bytes());
        assert_eq!(page.matches("<script").count(), 2, "{page}");
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert!(!page.contains("<img") && !page.contains("<!--"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"), "{page}");
        assert!(page.contains("\\u003c/script\\u003e\\u003cimg src=x"), "{page}");
    }
}
