//! `${NAME}` references: only a whole string value `${NAME}` with `NAME` matching
//! `[A-Z_][A-Z0-9_]*` is a reference; anything else is literal text.

use super::read::{invalid, join};
use crate::diag::Diagnostic;
use serde_yaml::Value;

/// The variable a whole value references, if it is a reference.
pub fn reference(s: &str) -> Option<&str> {
    let name = s.strip_prefix("${")?.strip_suffix('}')?;
    let mut bytes = name.bytes();
    let first = bytes.next()?;
    let ok = (first.is_ascii_uppercase() || first == b'_')
        && bytes.all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
    ok.then_some(name)
}

/// Replace every reference in `value` with its variable's value from `lookup`, except at the
/// dotted paths in `skip` (left as written). An unset variable is E-MAN-003 naming the key
/// and the variable.
pub fn resolve(
    value: &mut Value,
    path: &str,
    skip: &[&str],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), Diagnostic> {
    if skip.contains(&path) {
        return Ok(());
    }
    match value {
        Value::String(s) => {
            if let Some(var) = reference(s) {
                match lookup(var) {
                    Some(v) => *s = v,
                    None => {
                        return Err(invalid(
                            path,
                            format!("references ${{{var}}} but the environment variable is not set"),
                        ))
                    }
                }
            }
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                resolve(item, &format!("{path}[{i}]"), skip, lookup)?;
            }
        }
        Value::Mapping(map) => {
            for (key, item) in map.iter_mut() {
                let key = key.as_str().unwrap_or("?");
                resolve(item, &join(path, key), skip, lookup)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Stand in for every reference outside `skip` (for loaders that resolve nothing): the
/// manifest's shape is still validated, with a value that passes any string-shape check at
/// that key, and each reference is recorded as `(key, variable)`.
pub fn placehold(value: &mut Value, path: &str, skip: &[&str], out: &mut Vec<(String, String)>) {
    if skip.contains(&path) {
        return;
    }
    match value {
        Value::String(s) => {
            if let Some(var) = reference(s).map(str::to_string) {
                *s = if path.ends_with("endpoint") {
                    "https://unresolved.invalid".into()
                } else if path.contains("env.allow") {
                    var.clone()
                } else {
                    "unresolved".into()
                };
                out.push((path.to_string(), var));
            }
        }
        Value::Sequence(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                placehold(item, &format!("{path}[{i}]"), skip, out);
            }
        }
        Value::Mapping(map) => {
            for (key, item) in map.iter_mut() {
                let key = key.as_str().unwrap_or("?");
                placehold(item, &join(path, key), skip, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_uppercase_references() {
        assert_eq!(reference("${API_KEY}"), Some("API_KEY"));
        assert_eq!(reference("${_X1}"), Some("_X1"));
        for literal in ["${api_key}", "x${A}", "${A}x", "${1A}", "${}", "$A", "${A-B}"] {
            assert_eq!(reference(literal), None, "{literal}");
        }
    }

    #[test]
    fn resolves_everywhere_but_the_skipped_key() {
        let mut v: Value =
            serde_yaml::from_str("a: ${X}\nb: ['${X}', lit]\ninference: {api_key: '${MISSING}'}\n").unwrap();
        let lookup = |n: &str| (n == "X").then(|| "x-value".to_string());
        resolve(&mut v, "", &["inference.api_key"], &lookup).unwrap();
        assert_eq!(v["a"], Value::from("x-value"));
        assert_eq!(v["b"][0], Value::from("x-value"));
        assert_eq!(v["inference"]["api_key"], Value::from("${MISSING}"));
        let err = resolve(&mut v, "", &[], &lookup).unwrap_err();
        assert_eq!(err.key, "inference.api_key");
        assert!(err.message.contains("${MISSING}"), "{}", err.message);
    }
}
