//! Fields of a trace event as terminal-safe text: each string cleaned and cut, composite
//! values on one line, `-` for what is absent, and an outcome read as a refusal or not.

use super::clean::{clean, clean_into};
use serde_json::{Map, Value};

/// Longest text shown for one field.
pub(super) const FIELD: usize = 120;
/// Longest rendering of a composite value (an input object, a grants list).
pub(super) const COMPOSITE: usize = 200;
/// Longest reason shown for a failure (a containment failure names its step at the end).
pub(super) const REASON: usize = 300;

pub(super) type Obj = Map<String, Value>;

/// A field as text: strings cleaned, scalars as written, `-` when absent or null.
pub(super) fn s(o: &Obj, key: &str) -> String {
    match o.get(key) {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(v)) => clean(v, FIELD),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
        Some(v) => compact(v, FIELD),
    }
}

/// `before`, the field as text, `after` when the field is present; nothing when absent.
pub(super) fn opt(o: &Obj, key: &str, before: &str, after: &str) -> String {
    match o.get(key) {
        Some(_) => format!("{before}{}{after}", s(o, key)),
        None => String::new(),
    }
}

/// A field as a whole number, if it is one.
pub(super) fn n(o: &Obj, key: &str) -> Option<u64> {
    o.get(key).and_then(Value::as_u64)
}

pub(super) fn num(o: &Obj, key: &str) -> String {
    n(o, key).map_or_else(|| "-".into(), |v| v.to_string())
}

/// A composite value on one line: arrays joined by commas, objects as `k=v`, cut to `max`.
pub(super) fn compact(v: &Value, max: usize) -> String {
    let mut out = String::new();
    write_compact(&mut out, v, max, 0);
    clean(&out, max)
}

pub(super) fn write_compact(out: &mut String, v: &Value, max: usize, depth: usize) {
    if out.len() > max * 4 || depth > 4 {
        return;
    }
    match v {
        Value::Null => out.push('-'),
        Value::String(t) => clean_into(out, t, max),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(out, item, max, depth + 1);
                if out.len() > max * 4 {
                    break;
                }
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                clean_into(out, k, 40);
                out.push('=');
                write_compact(out, item, max, depth + 1);
                if out.len() > max * 4 {
                    break;
                }
            }
            out.push('}');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// `outcome` other than ok (and other than a delegation's good outcomes).
pub(super) fn refused(o: &Obj) -> bool {
    matches!(o.get("outcome"), Some(Value::String(v)) if !matches!(v.as_str(), "ok" | "completed"))
}

/// Why an event failed, on one line: `: CODE first line of the reason`, the code when the
/// event has an `error_code`, the reason from `key`'s first line; nothing when it has no
/// reason.
pub(super) fn failure(o: &Obj, key: &str) -> String {
    let Some(Value::String(why)) = o.get(key) else {
        return String::new();
    };
    let first = why.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    match o.get("error_code") {
        Some(Value::String(c)) => format!(": {} {}", clean(c, 16), clean(first.trim(), REASON)),
        _ => format!(": {}", clean(first.trim(), REASON)),
    }
}

pub(super) fn reason(o: &Obj) -> String {
    match o.get("reason") {
        Some(Value::String(r)) => format!(": {}", clean(r, FIELD)),
        _ => String::new(),
    }
}
/// An event this renderer has no layout for: its type and scalar fields.
pub(super) fn generic(kind: &str, o: &Obj) -> String {
    let mut text = kind.to_string();
    for (k, v) in o {
        if matches!(
            k.as_str(),
            "event_type" | "session_id" | "timestamp" | "event_id" | "parent_id"
        ) {
            continue;
        }
        if text.len() > COMPOSITE * 2 {
            text.push_str(" …");
            break;
        }
        text.push(' ');
        clean_into(&mut text, k, 40);
        text.push('=');
        text.push_str(&compact(v, 60));
    }
    text
}
