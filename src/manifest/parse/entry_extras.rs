//! What an artifact entry carries besides its grants: `config` (a mapping, handed to the
//! artifact as compact JSON) and, for a hook, `records: own` (a directory of its own inside
//! the session's records, `hooks/<name>/`, never the trace or the logs). Any other shape is
//! E-MAN-003 naming the key.

use super::super::model::ArtifactRuntime;
use super::super::read::{invalid, join, Node};
use super::R;
use serde_yaml::Value;

/// The largest `config`, as compact JSON, in bytes (it travels in an environment variable).
pub const MAX_CONFIG: usize = 64 * 1024;

/// The entry's `config` as compact JSON.
pub fn config(node: &Node<'_>) -> R<Option<String>> {
    let key = join(node.path, "config");
    match node.raw("config") {
        None => Ok(None),
        Some(v @ Value::Mapping(_)) => {
            let json = serde_json::to_string(v).map_err(|e| invalid(&key, e))?;
            if json.len() > MAX_CONFIG {
                return Err(invalid(
                    &key,
                    format!("is {} bytes as JSON; at most {MAX_CONFIG}", json.len()),
                ));
            }
            Ok(Some(json))
        }
        Some(_) => Err(invalid(&key, "expected a mapping")),
    }
}

/// Whether a hook entry is granted its own records directory (`records: own`).
pub fn records(node: &Node<'_>, runtime: ArtifactRuntime) -> R<bool> {
    let key = join(node.path, "records");
    match node.string("records")?.as_deref() {
        None => Ok(false),
        Some("own") if runtime == ArtifactRuntime::Hook => Ok(true),
        Some("own") => Err(invalid(
            &key,
            "only a hook entry may be granted a records directory",
        )),
        Some(other) => Err(invalid(
            &key,
            format!("unknown value '{}' (expected own)", other.escape_debug()),
        )),
    }
}
