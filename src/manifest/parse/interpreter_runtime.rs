//! `capabilities.shell.interpreter_runtime`: a list of `{binary, dirs: [{path, list_dir}]}`.
//! `binary` must be a name of the same block's `allow`; every `path` absolute (no `.` or
//! `..` component, not `/` itself); `list_dir` is mandatory, so opening a directory for
//! listing is always a written choice. Any other shape is E-MAN-003 naming the key.

use super::super::model::{InterpreterRuntime, RuntimeDir};
use super::super::read::{invalid, join, Node};
use super::R;
use serde_yaml::Value;
use std::path::{Component, Path, PathBuf};

/// The entries under the `shell` block `node`, each `binary` checked against `allow`.
pub fn parse(node: &Node<'_>, allow: &[String]) -> R<Vec<InterpreterRuntime>> {
    let key = join(node.path, "interpreter_runtime");
    let Some(raw) = node.raw("interpreter_runtime") else {
        return Ok(Vec::new());
    };
    let Value::Sequence(items) = raw else {
        return Err(invalid(&key, "expected a list of {binary, dirs} entries"));
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{key}[{i}]");
        if !matches!(item, Value::Mapping(_)) {
            return Err(invalid(&at, "expected a mapping with 'binary' and 'dirs'"));
        }
        let entry = Node {
            value: item,
            path: &at,
        };
        let binary = entry
            .string("binary")?
            .ok_or_else(|| invalid(&join(&at, "binary"), "missing required field 'binary'"))?;
        if !allow.iter().any(|a| a == &binary) {
            return Err(invalid(
                &join(&at, "binary"),
                format!("'{binary}' is not in capabilities.shell.allow"),
            ));
        }
        let dirs_key = join(&at, "dirs");
        let dirs = match entry.raw("dirs") {
            Some(Value::Sequence(d)) if !d.is_empty() => d,
            Some(Value::Sequence(_)) => return Err(invalid(&dirs_key, "must list at least one directory")),
            Some(_) => return Err(invalid(&dirs_key, "expected a list of {path, list_dir} entries")),
            None => return Err(invalid(&dirs_key, "missing required field 'dirs'")),
        };
        let mut parsed = Vec::new();
        for (j, d) in dirs.iter().enumerate() {
            let dat = format!("{dirs_key}[{j}]");
            if !matches!(d, Value::Mapping(_)) {
                return Err(invalid(&dat, "expected a mapping with 'path' and 'list_dir'"));
            }
            let dn = Node { value: d, path: &dat };
            let path = dn
                .string("path")?
                .ok_or_else(|| invalid(&join(&dat, "path"), "missing required field 'path'"))?;
            if let Some(why) = path_error(&path) {
                return Err(invalid(
                    &join(&dat, "path"),
                    format!("'{}' {why}", path.escape_debug()),
                ));
            }
            let list_dir = dn.boolean("list_dir")?.ok_or_else(|| {
                invalid(
                    &join(&dat, "list_dir"),
                    "missing required field 'list_dir' (true or false: whether the directory may be listed)",
                )
            })?;
            parsed.push(RuntimeDir {
                path: PathBuf::from(path),
                list_dir,
            });
        }
        out.push(InterpreterRuntime { binary, dirs: parsed });
    }
    Ok(out)
}

/// Why `p` is not an acceptable runtime directory, if it is not.
fn path_error(p: &str) -> Option<&'static str> {
    if !p.starts_with('/') {
        return Some("is not an absolute path");
    }
    if p.contains('\0') {
        return Some("contains a NUL byte");
    }
    let path = Path::new(p);
    if path
        .components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
        || p.split('/').any(|s| s == "." || s == "..")
    {
        return Some("has a '.' or '..' component");
    }
    if path.components().all(|c| c == Component::RootDir) {
        return Some("is the root directory (that would open the whole host)");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::path_error;

    #[test]
    fn only_plain_absolute_directories_below_the_root_pass() {
        assert_eq!(path_error("/opt/py/lib"), None);
        assert_eq!(path_error("/opt/py/lib/"), None);
        assert!(path_error("opt/py").is_some());
        assert!(path_error("/opt/../etc").is_some());
        assert!(path_error("/opt/./x").is_some());
        assert!(path_error("/").is_some());
        assert!(path_error("//").is_some());
        assert!(path_error("").is_some());
    }
}
