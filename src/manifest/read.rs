//! A path-tracking reader over a parsed YAML tree, so every structural fault names the exact
//! dotted key (`murmur.yaml: invalid <area> config for '<key>': <reason>`).

use crate::diag::{code, Diagnostic};
use serde_yaml::Value;

/// The area a dotted key belongs to, as the E-MAN-003 message names it.
pub fn area(path: &str) -> &str {
    let top = path.split(['.', '[']).next().unwrap_or(path);
    match top {
        "artifacts" => "artifact",
        "context" => "inference",
        other => other,
    }
}

/// An E-MAN-003 for `path`.
pub fn invalid(path: &str, reason: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::new(
        code::MAN_INVALID,
        path,
        format!(
            "murmur.yaml: invalid {} config for '{path}': {reason}",
            area(path)
        ),
    )
}

/// A YAML value and where it sits.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    pub value: &'a Value,
    pub path: &'a str,
}

/// The dotted path of `key` under `parent`.
pub fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// A typed field read: Ok(None) when the key is absent (or null).
pub type Field<T> = Result<Option<T>, Diagnostic>;

impl<'a> Node<'a> {
    /// The value at `key` of this mapping, if present and not null.
    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        match self.value {
            Value::Mapping(m) => m.get(key).filter(|v| !v.is_null()),
            _ => None,
        }
    }

    /// Whether `key` is written at all (even as null).
    pub fn has(&self, key: &str) -> bool {
        matches!(self.value, Value::Mapping(m) if m.contains_key(key))
    }

    /// A string field.
    pub fn string(&self, key: &str) -> Field<String> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(invalid(
                &join(self.path, key),
                format!("expected a string, found {}", type_name(other)),
            )),
        }
    }

    /// A boolean field.
    pub fn boolean(&self, key: &str) -> Field<bool> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(invalid(
                &join(self.path, key),
                format!("expected true or false, found {}", type_name(other)),
            )),
        }
    }

    /// A whole number field, at least 0.
    pub fn whole(&self, key: &str) -> Field<u64> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64()),
            Some(other) => Err(invalid(
                &join(self.path, key),
                format!("expected a whole number, found {}", type_name(other)),
            )),
        }
    }

    /// A whole number field that must be greater than 0 and fit in `max`.
    pub fn positive(&self, key: &str, max: u64) -> Field<u64> {
        match self.whole(key)? {
            Some(0) => Err(invalid(&join(self.path, key), "must be greater than 0")),
            Some(n) if n > max => Err(invalid(&join(self.path, key), format!("must be at most {max}"))),
            other => Ok(other),
        }
    }

    /// A number field (integer or decimal).
    pub fn number(&self, key: &str) -> Field<f64> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(invalid(
                &join(self.path, key),
                format!("expected a number, found {}", type_name(other)),
            )),
        }
    }

    /// A list of strings.
    pub fn strings(&self, key: &str) -> Field<Vec<String>> {
        let path = join(self.path, key);
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Sequence(items)) => items
                .iter()
                .enumerate()
                .map(|(i, item)| match item {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(invalid(
                        &format!("{path}[{i}]"),
                        format!("expected a string, found {}", type_name(other)),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(invalid(
                &path,
                format!("expected a list, found {}", type_name(other)),
            )),
        }
    }

    /// A sub-mapping. A key written with no value (null) reads as an empty mapping, so a
    /// present block is still seen as present.
    pub fn mapping(&self, key: &str) -> Field<&'a Value> {
        static EMPTY: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
        if !self.has(key) {
            return Ok(None);
        }
        match self.raw(key) {
            None => Ok(Some(EMPTY.get_or_init(|| Value::Mapping(Default::default())))),
            Some(v @ Value::Mapping(_)) => Ok(Some(v)),
            Some(other) => Err(invalid(
                &join(self.path, key),
                format!("expected a mapping, found {}", type_name(other)),
            )),
        }
    }
}
