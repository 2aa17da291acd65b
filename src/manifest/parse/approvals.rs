//! `approvals` and `ask`: a person in the loop of an agent capsule. `approvals` names the
//! calls that wait for a person's yes (`tools`, `shell` binaries or `binary pattern`
//! entries, `delegations`), how long they wait (`timeout_secs`) and what the wait running
//! out means (`on_timeout`: `deny`, the default, or `approve`); `ask` offers the `ask` tool
//! (`ask: true`, or `{timeout_secs}`). Each entry must name something the capsule declares,
//! so a typo never leaves a call unguarded: anything else is E-MAN-003 naming the key.

use super::super::model::{
    Approvals, Artifact, ArtifactRuntime, Ask, Capabilities, OnTimeout, ShellApproval,
    DEFAULT_APPROVAL_TIMEOUT_SECS, DEFAULT_ASK_TIMEOUT_SECS,
};
use super::super::read::{invalid, Node};
use super::R;
use serde_yaml::Value;

/// The longest wait a manifest may ask for, seconds (one day).
pub const MAX_WAIT_SECS: u64 = 86_400;
/// The longest shell pattern, bytes.
const MAX_PATTERN: usize = 256;
/// The runtime's own tools an approval may name (the peer plane's; `delegate-task` is
/// `delegations`).
const RUNTIME_TOOLS: [&str; 2] = ["share-file", "fetch-peer-file"];

/// `approvals`, when declared.
pub fn approvals(
    top: &Node<'_>,
    artifacts: &[Artifact],
    caps: &Capabilities,
    agent: bool,
) -> R<Option<Approvals>> {
    let Some(block) = top.mapping("approvals")? else {
        return Ok(None);
    };
    if !agent {
        return Err(invalid(
            "approvals",
            "only an agent capsule (one with an inference block) makes calls to approve",
        ));
    }
    let n = Node {
        value: block,
        path: "approvals",
    };
    let tools = tools(&n, artifacts)?;
    let shell = shell(&n, caps)?;
    let delegations = delegations(&n, caps)?;
    if tools.is_empty() && shell.is_empty() && delegations.is_empty() {
        return Err(invalid(
            "approvals",
            "names no tool, shell binary or delegation to approve (tools, shell, delegations)",
        ));
    }
    let timeout_secs = n
        .positive("timeout_secs", MAX_WAIT_SECS)?
        .unwrap_or(DEFAULT_APPROVAL_TIMEOUT_SECS);
    let on_timeout = match n.string("on_timeout")?.as_deref() {
        None | Some("deny") => OnTimeout::Deny,
        Some("approve") => OnTimeout::Approve,
        Some(other) => {
            return Err(invalid(
                "approvals.on_timeout",
                format!(
                    "unknown value '{}' (expected deny or approve)",
                    other.escape_debug()
                ),
            ))
        }
    };
    Ok(Some(Approvals {
        tools,
        shell,
        delegations,
        timeout_secs,
        on_timeout,
    }))
}

/// `approvals.tools`: each a tool artifact's or skill's bare name, or a peer tool.
fn tools(n: &Node<'_>, artifacts: &[Artifact]) -> R<Vec<String>> {
    let declared: Vec<&str> = artifacts
        .iter()
        .filter(|a| matches!(a.runtime, ArtifactRuntime::Tool | ArtifactRuntime::Skill))
        .map(|a| a.name.rsplit('/').next().unwrap_or(&a.name))
        .chain(RUNTIME_TOOLS)
        .collect();
    let list = n.strings("tools")?.unwrap_or_default();
    for (i, t) in list.iter().enumerate() {
        if t == "delegate-task" {
            return Err(invalid(
                &format!("approvals.tools[{i}]"),
                "delegations are approved under approvals.delegations (a capsule name, or '*')",
            ));
        }
        if !declared.contains(&t.as_str()) {
            return Err(invalid(
                &format!("approvals.tools[{i}]"),
                format!(
                    "'{}' is not a tool this capsule declares (its tools: {})",
                    t.escape_debug(),
                    declared.join(", ")
                ),
            ));
        }
    }
    Ok(list)
}

/// `approvals.shell`: `binary` or `binary pattern`, the binary one of `shell.allow`.
fn shell(n: &Node<'_>, caps: &Capabilities) -> R<Vec<ShellApproval>> {
    let allowed = caps.shell_allow.clone().unwrap_or_default();
    let mut out = Vec::new();
    for (i, entry) in n.strings("shell")?.unwrap_or_default().iter().enumerate() {
        let key = format!("approvals.shell[{i}]");
        let entry = entry.trim();
        let (binary, pattern) = match entry.split_once(char::is_whitespace) {
            Some((b, p)) => (b, Some(p.trim())),
            None => (entry, None),
        };
        if !allowed.iter().any(|a| a == binary) {
            return Err(invalid(
                &key,
                format!(
                    "'{}' is not a binary of capabilities.shell.allow ({})",
                    binary.escape_debug(),
                    if allowed.is_empty() {
                        "none declared".to_string()
                    } else {
                        allowed.join(", ")
                    }
                ),
            ));
        }
        if let Some(p) = pattern {
            if p.len() > MAX_PATTERN || p.chars().any(char::is_control) {
                return Err(invalid(
                    &key,
                    format!("the pattern must be one line of at most {MAX_PATTERN} bytes"),
                ));
            }
        }
        out.push(ShellApproval {
            binary: binary.to_string(),
            pattern: pattern.map(str::to_string),
        });
    }
    Ok(out)
}

/// `approvals.delegations`: capsule names of `spawn.allow`, or `*`.
fn delegations(n: &Node<'_>, caps: &Capabilities) -> R<Vec<String>> {
    let list = n.strings("delegations")?.unwrap_or_default();
    for (i, d) in list.iter().enumerate() {
        if d != "*" && !caps.spawn_allow.contains(d) {
            return Err(invalid(
                &format!("approvals.delegations[{i}]"),
                format!(
                    "'{}' is not a capsule of capabilities.spawn.allow (name one, or '*')",
                    d.escape_debug()
                ),
            ));
        }
    }
    Ok(list)
}

/// `ask`: `true`/`false`, or a block with `timeout_secs`. An agent's model asks with the
/// `ask` tool, a WASM capsule's run by leaving `out/ask.txt` (runtime::component_ask).
pub fn ask(top: &Node<'_>) -> R<Option<Ask>> {
    let timeout_secs = match top.raw("ask") {
        None | Some(Value::Bool(false)) => return Ok(None),
        Some(Value::Bool(true)) => DEFAULT_ASK_TIMEOUT_SECS,
        Some(Value::Mapping(_)) => {
            let block = top.mapping("ask")?.unwrap_or(&Value::Null);
            Node {
                value: block,
                path: "ask",
            }
            .positive("timeout_secs", MAX_WAIT_SECS)?
            .unwrap_or(DEFAULT_ASK_TIMEOUT_SECS)
        }
        Some(_) => {
            return Err(invalid(
                "ask",
                "expected true, false or a block with timeout_secs",
            ))
        }
    };
    Ok(Some(Ask { timeout_secs }))
}
