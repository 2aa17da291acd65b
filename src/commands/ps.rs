//! `mur ps [--json]`: the live sessions of this user, one row each (id, capsule, class,
//! state, tasks open/total, age, door, parent), from each session's `session.json`; the
//! dead are forgotten by the lock each live session holds on its records. A live session
//! whose `session.json` cannot be read is listed `unreadable` (`--json`: with its `error`).

use super::sessions::{self, Live};
use crate::diag::Diagnostic;
use serde_json::{json, Value};

/// Run `mur ps`: the table (or the JSON array) to print.
pub fn ps(json: bool, now_ms: u64) -> Result<String, Diagnostic> {
    let live = sessions::list()?;
    Ok(if json {
        to_json(&live, now_ms)
    } else {
        to_table(&live, now_ms)
    })
}

/// One session's facts as `--json` gives them.
fn row(l: &Live, now_ms: u64) -> Value {
    let s = &l.status;
    let tasks = &s["tasks"];
    let mut v = json!({
        "session_id": l.id,
        "capsule": s.get("capsule"),
        "version": s.get("version"),
        "class": s.get("class"),
        "state": s.get("state").cloned().unwrap_or_else(|| "starting".into()),
        "tasks": {"open": tasks.get("open"), "total": tasks.get("total")},
        "age_secs": age_ms(s, now_ms) / 1000,
        "url": s.get("url"),
        "parent": s.get("parent"),
        "pid": s.get("pid"),
    });
    if let Some(why) = &l.problem {
        v["state"] = "unreadable".into();
        v["error"] = why.as_str().into();
    }
    v
}

fn age_ms(s: &Value, now_ms: u64) -> u64 {
    s.get("started_ms")
        .and_then(Value::as_u64)
        .map_or(0, |t| now_ms.saturating_sub(t))
}

fn to_json(live: &[Live], now_ms: u64) -> String {
    let rows: Vec<Value> = live.iter().map(|l| row(l, now_ms)).collect();
    format!("{}\n", Value::Array(rows))
}

/// The table: a header and a row per session, columns as wide as their widest cell.
fn to_table(live: &[Live], now_ms: u64) -> String {
    let mut rows = vec![[
        "SESSION", "CAPSULE", "CLASS", "STATE", "TASKS", "AGE", "DOOR", "PARENT",
    ]
    .map(String::from)];
    for l in live {
        let s = &l.status;
        let num = |k: &str| s["tasks"].get(k).and_then(Value::as_u64);
        let tasks = match (num("open"), num("total")) {
            (Some(o), Some(t)) => format!("{o}/{t}"),
            _ => "-".into(),
        };
        let state = match (l.field("state").as_str(), &l.problem) {
            (_, Some(_)) => "unreadable".to_string(),
            ("-", None) => "starting".to_string(),
            (other, None) => other.to_string(),
        };
        rows.push([
            l.id.clone(),
            format!("{}@{}", l.field("capsule"), l.field("version")),
            l.field("class"),
            state,
            tasks,
            age(age_ms(s, now_ms) / 1000),
            l.field("url"),
            l.field("parent"),
        ]);
    }
    let widths: Vec<usize> = (0..8)
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// An age as a person reads it: `42s`, `7m`, `3h12m`, `2d4h`.
pub fn age(secs: u64) -> String {
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        3600..=86_399 => format!("{}h{}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{}h", secs / 86_400, secs % 86_400 / 3600),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ages_read_as_a_person_says_them() {
        assert_eq!(super::age(5), "5s");
        assert_eq!(super::age(125), "2m");
        assert_eq!(super::age(3 * 3600 + 720), "3h12m");
        assert_eq!(super::age(2 * 86_400 + 4 * 3600), "2d4h");
    }
}
