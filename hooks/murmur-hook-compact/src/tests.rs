//! The compaction selection on realistic histories.

use crate::compact::{compact, excerpt, summary, text_of, tool_call_ids, Message, EXCERPT_CHARS};
use serde_json::{json, Value};

fn user(text: &str) -> Message {
    Message {
        role: "user".into(),
        content: json!(text).to_string(),
        tool_call_id: None,
        is_error: false,
    }
}

fn assistant(text: &str, calls: &[&str]) -> Message {
    let mut blocks = vec![json!({"type": "text", "text": text})];
    for id in calls {
        blocks.push(json!({"type": "tool_call", "id": id, "name": "bash", "input": {"command": "ls"}}));
    }
    Message {
        role: "assistant".into(),
        content: Value::Array(blocks).to_string(),
        tool_call_id: None,
        is_error: false,
    }
}

fn tool(id: &str, text: &str) -> Message {
    Message {
        role: "tool".into(),
        content: json!(text).to_string(),
        tool_call_id: Some(id.into()),
        is_error: false,
    }
}

/// The summary message's decoded text (it must be a JSON string).
fn summary_text(m: &Message) -> String {
    assert_eq!(m.role, "user");
    assert_eq!(m.tool_call_id, None);
    match serde_json::from_str::<Value>(&m.content).unwrap() {
        Value::String(s) => s,
        other => panic!("summary content is not a JSON string: {other}"),
    }
}

#[test]
fn short_histories_come_back_unchanged() {
    for n in 0..=5 {
        let history: Vec<Message> = (0..n).map(|i| user(&format!("m{i}"))).collect();
        assert_eq!(compact(history.clone()), history);
    }
}

#[test]
fn six_messages_drop_one() {
    let history = vec![
        user("the task"),
        assistant("first thoughts", &[]),
        user("more"),
        assistant("second", &[]),
        user("again"),
        assistant("done", &[]),
    ];
    let out = compact(history.clone());
    assert_eq!(out.len(), 6);
    assert_eq!(out[0], history[0]);
    assert_eq!(
        summary_text(&out[1]),
        "[compacted: 1 earlier messages summarised] assistant: first thoughts"
    );
    assert_eq!(out[2..], history[2..]);
}

#[test]
fn a_tail_starting_with_a_tool_result_is_pushed_past_it() {
    let history = vec![
        user("the task"),
        assistant("look", &["c1"]),
        tool("c1", "a.txt"),
        assistant("two at once", &["c2", "c3"]),
        tool("c2", "out two"),
        tool("c3", "out three"),
        assistant("again", &["c4"]),
        tool("c4", "out four"),
    ];
    let out = compact(history.clone());
    // The last four start at tool(c2): it and tool(c3) are summarised with their call.
    assert_eq!(out.len(), 4);
    assert_eq!(out[0], history[0]);
    assert_eq!(
        summary_text(&out[1]),
        "[compacted: 5 earlier messages summarised] assistant: look [tool_call bash] | tool: a.txt \
         | assistant: two at once [tool_call bash] [tool_call bash] | tool: out two | tool: out three"
    );
    assert_eq!(out[2..], history[6..]);
}

#[test]
fn a_tail_of_tool_results_only_is_summarised_whole() {
    let history = vec![
        user("the task"),
        assistant("many", &["a", "b", "c", "d", "e"]),
        tool("a", "1"),
        tool("b", "2"),
        tool("c", "3"),
        tool("d", "4"),
        tool("e", "5"),
    ];
    let out = compact(history.clone());
    assert_eq!(out.len(), 2);
    assert_eq!(out[0], history[0]);
    assert!(summary_text(&out[1]).starts_with("[compacted: 6 earlier messages summarised] assistant: many"));
}

#[test]
fn a_consistent_tail_is_kept_verbatim() {
    let history = vec![
        user("the task"),
        assistant("look", &["c1"]),
        tool("c1", "a.txt"),
        assistant("two at once", &["c2", "c3"]),
        tool("c2", "out two"),
        tool("c3", "out three"),
        assistant("final answer", &[]),
    ];
    let out = compact(history.clone());
    assert_eq!(out.len(), 6);
    assert_eq!(out[2..], history[3..]);
    assert!(summary_text(&out[1]).starts_with("[compacted: 2 earlier messages summarised]"));
    // Every kept tool result answers a kept call.
    let calls: Vec<String> = out.iter().flat_map(|m| tool_call_ids(&m.content)).collect();
    for m in out.iter().filter(|m| m.role == "tool") {
        assert!(calls.contains(m.tool_call_id.as_ref().unwrap()));
    }
}

#[test]
fn a_kept_tool_result_whose_call_was_dropped_is_summarised() {
    let history = vec![
        user("the task"),
        assistant("look", &["c1"]),
        user("interjection"),
        assistant("other", &["c2"]),
        tool("c1", "late result"),
        user("go on"),
    ];
    let out = compact(history.clone());
    assert_eq!(out.len(), 5);
    assert_eq!(
        summary_text(&out[1]),
        "[compacted: 2 earlier messages summarised] assistant: look [tool_call bash] | tool: late result"
    );
    assert_eq!(out[2], history[2]);
    assert_eq!(out[3], history[3]);
    assert_eq!(out[4], history[5]);
}

#[test]
fn a_tool_result_without_an_id_is_never_kept() {
    let mut orphan = tool("x", "no id");
    orphan.tool_call_id = None;
    let history = vec![
        user("t"),
        user("a"),
        assistant("b", &[]),
        user("c"),
        orphan,
        assistant("d", &[]),
    ];
    let out = compact(history);
    assert!(out.iter().all(|m| m.role != "tool"));
}

#[test]
fn excerpts_are_cut_at_80_characters_and_collapse_whitespace() {
    let long = "é".repeat(100);
    assert_eq!(excerpt(&long, EXCERPT_CHARS), format!("{}...", "é".repeat(80)));
    assert_eq!(excerpt(&"x".repeat(80), EXCERPT_CHARS), "x".repeat(80));
    assert_eq!(excerpt("  a\n\tb   c ", EXCERPT_CHARS), "a b c");
}

#[test]
fn text_of_reads_strings_blocks_and_raw_text() {
    assert_eq!(text_of(r#""plain""#), "plain");
    assert_eq!(
        text_of(
            r#"[{"type":"text","text":"hi"},{"type":"tool_call","id":"1","name":"ls","input":{}},{"type":"image"}]"#
        ),
        "hi [tool_call ls] [image]"
    );
    assert_eq!(text_of("not json"), "not json");
    assert_eq!(text_of("42"), "42");
}

#[test]
fn failed_tool_results_are_marked() {
    let mut failed = tool("c", "boom");
    failed.is_error = true;
    assert_eq!(
        summary(&[failed]),
        "[compacted: 1 earlier messages summarised] tool (error): boom"
    );
}
