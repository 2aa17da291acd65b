//! The set of known manifest keys, and W-SEC-019 for every key outside it (naming the
//! nearest known sibling). Unknown keys are reported, never silently accepted, never fatal.

use super::read::join;
use crate::diag::{code, Diagnostic};
use serde_yaml::Value;

/// The shape of a known key's value.
enum Shape {
    /// A scalar or list of scalars; nothing below it is checked.
    Leaf,
    /// A free-form block (observability, trace, driver config): nothing below is checked.
    Opaque,
    /// A mapping with these keys.
    Map(&'static [(&'static str, Shape)]),
    /// A list of mappings with these keys.
    ListOf(&'static [(&'static str, Shape)]),
}

use Shape::{Leaf, ListOf, Map, Opaque};

const LIMITS: &[(&str, Shape)] = &[
    ("memory_bytes", Leaf),
    ("table_elements", Leaf),
    ("instances", Leaf),
    ("deadline_seconds", Leaf),
];

const RESOURCES: &[(&str, Shape)] = &[
    ("max_processes", Leaf),
    ("max_open_files", Leaf),
    ("max_file_size_bytes", Leaf),
    ("cpu_seconds", Leaf),
    ("memory_bytes", Leaf),
    ("cgroup_pids_max", Leaf),
];

const CAPABILITIES: &[(&str, Shape)] = &[
    (
        "network",
        Map(&[
            ("allow", Leaf),
            ("unix_sockets", Leaf),
            (
                "authentication",
                Map(&[
                    ("scheme", Leaf),
                    ("credentials", ListOf(&[("name", Leaf), ("scopes", Leaf)])),
                ]),
            ),
        ]),
    ),
    ("peer_fetch", Map(&[("allow", Leaf)])),
    (
        "shell",
        Map(&[
            ("allow", Leaf),
            (
                "interpreter_runtime",
                ListOf(&[
                    ("binary", Leaf),
                    ("dirs", ListOf(&[("path", Leaf), ("list_dir", Leaf)])),
                ]),
            ),
        ]),
    ),
    ("spawn", Map(&[("allow", Leaf), ("max_delegations", Leaf)])),
    ("env", Map(&[("allow", Leaf)])),
    ("filesystem", Map(&[("scope", Leaf), ("workdir_exec", Leaf)])),
    ("state", Map(&[("store", Leaf)])),
    ("containment", Leaf),
    ("limits", Map(LIMITS)),
    ("resources", Map(RESOURCES)),
];

const ARTIFACT: &[(&str, Shape)] = &[
    ("name", Leaf),
    ("version", Leaf),
    ("runtime", Leaf),
    ("capabilities", Map(CAPABILITIES)),
    ("source", Leaf),
    ("local_source", Leaf),
    ("prompt_payload", Leaf),
    ("on_overflow", Leaf),
    ("config", Opaque),
    ("records", Leaf),
];

const INFERENCE: &[(&str, Shape)] = &[
    ("transport", Leaf),
    ("endpoint", Leaf),
    ("model", Leaf),
    ("api_key", Leaf),
    ("driver", Map(&[("artifact", Leaf), ("config", Opaque)])),
    ("system_prompt", Leaf),
    ("system_prompt_file", Leaf),
    ("system_prompt_artifact", Leaf),
    ("max_turns", Leaf),
    ("max_task_reopens", Leaf),
    ("max_tokens", Leaf),
    ("max_session_tokens", Leaf),
    (
        "compaction",
        Map(&[
            ("threshold", Leaf),
            ("model", Leaf),
            ("system_prompt", Leaf),
            ("system_prompt_file", Leaf),
            ("dump_summaries", Leaf),
        ]),
    ),
];

const LIFECYCLE: &[(&str, Shape)] = &[
    ("task_acceptance", Leaf),
    ("after_task", Leaf),
    ("queue_depth", Leaf),
    ("delegation_deadline_secs", Leaf),
    ("input_timeout_secs", Leaf),
    ("conversation", Leaf),
];

const EXPORTS: &[(&str, Shape)] = &[
    (
        "files",
        Map(&[("root", Leaf), ("mode", Leaf), ("max_bytes", Leaf)]),
    ),
    (
        "peer_files",
        Map(&[("root", Leaf), ("max_ttl", Leaf), ("max_bytes", Leaf)]),
    ),
];

const APPROVALS: &[(&str, Shape)] = &[
    ("tools", Leaf),
    ("shell", Leaf),
    ("delegations", Leaf),
    ("timeout_secs", Leaf),
    ("on_timeout", Leaf),
];

const A2A: &[(&str, Shape)] = &[
    (
        "input",
        Map(&[
            ("parts", Leaf),
            ("media_types", Leaf),
            ("dir", Leaf),
            ("max_bytes", Leaf),
        ]),
    ),
    (
        "output",
        Map(&[
            ("dir", Leaf),
            ("max_bytes", Leaf),
            ("data", Leaf),
            ("links", Leaf),
        ]),
    ),
    ("answer", Leaf),
    ("push", Map(&[("allow", Leaf)])),
];

const TOP: &[(&str, Shape)] = &[
    ("name", Leaf),
    ("version", Leaf),
    ("description", Leaf),
    ("artifacts", ListOf(ARTIFACT)),
    ("capabilities", Map(CAPABILITIES)),
    ("inference", Map(INFERENCE)),
    ("context", Map(&[("max_tokens", Leaf)])),
    ("lifecycle", Map(LIFECYCLE)),
    ("exports", Map(EXPORTS)),
    ("approvals", Map(APPROVALS)),
    ("ask", Map(&[("timeout_secs", Leaf)])),
    ("a2a", Map(A2A)),
    ("network", Map(&[("internal_port", Leaf)])),
    ("requires_files", Leaf),
    ("runtime", Leaf),
    ("implementation", Leaf),
    ("execution", Leaf),
    // A tool's parameters (JSON Schema) and a driver's credential header: keys of an
    // artifact's own manifest, read by the agent runtime.
    ("input_schema", Opaque),
    ("upstream_auth", Map(&[("header", Leaf), ("value", Leaf)])),
    // A hook artifact's own contract.
    ("binding", Leaf),
    ("execution_mode", Leaf),
    ("commit_policy", Leaf),
    ("observability", Opaque),
    ("trace", Opaque),
];

/// A W-SEC-019 for every key of `root` the schema does not know, in document order.
pub fn unknown_keys(root: &Value) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    walk(root, TOP, "", &mut out);
    out
}

fn walk(value: &Value, known: &[(&str, Shape)], path: &str, out: &mut Vec<Diagnostic>) {
    let Value::Mapping(map) = value else { return };
    for (key, child) in map {
        let Some(key) = key.as_str() else { continue };
        let here = join(path, key);
        match known.iter().find(|(k, _)| *k == key) {
            Some((_, Map(inner))) => walk(child, inner, &here, out),
            Some((_, ListOf(inner))) => {
                if let Value::Sequence(items) = child {
                    for (i, item) in items.iter().enumerate() {
                        walk(item, inner, &format!("{here}[{i}]"), out);
                    }
                }
            }
            Some((_, Leaf | Opaque)) => {}
            None => {
                let nearest = known
                    .iter()
                    .map(|(k, _)| *k)
                    .min_by_key(|k| distance(k, key))
                    .unwrap_or("");
                out.push(
                    Diagnostic::new(
                        code::SEC_UNKNOWN_KEY,
                        &here,
                        format!("murmur.yaml: unknown key '{here}' is ignored"),
                    )
                    .with_hint(format!("the nearest known key is '{}'", join(path, nearest))),
                );
            }
        }
    }
}

/// Levenshtein distance, bounded to short keys (manifest keys are under 64 bytes).
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), &b.as_bytes()[..b.len().min(64)]);
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_nearest_sibling() {
        let v: Value = serde_yaml::from_str("name: a\ncapabilities:\n  netwrok: {}\n  limits: {memory: 1}\nartifacts:\n  - {name: x, runtim: tool}\nobservability: {anything: 1}\n").unwrap();
        let d = unknown_keys(&v);
        let keys: Vec<_> = d.iter().map(|d| d.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "capabilities.netwrok",
                "capabilities.limits.memory",
                "artifacts[0].runtim"
            ]
        );
        assert_eq!(
            d[0].hint.as_deref(),
            Some("the nearest known key is 'capabilities.network'")
        );
        assert_eq!(
            d[2].hint.as_deref(),
            Some("the nearest known key is 'artifacts[0].runtime'")
        );
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
