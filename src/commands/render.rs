//! Human and JSON output of the registry commands.

use super::Built;
use crate::manifest::{Capabilities, Manifest};
use crate::registry::{Location, Resolved};
use serde_json::{json, Value};

fn list<T: ToString>(items: &[T]) -> String {
    if items.is_empty() {
        "-".into()
    } else {
        items
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn caps_json(c: &Capabilities) -> Value {
    json!({
        "network_allow": c.network_allow.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "unix_sockets": c.unix_sockets,
        "peer_fetch_allow": c.peer_fetch_allow.as_ref().map(|r| r.iter().map(ToString::to_string).collect::<Vec<_>>()),
        "shell_allow": c.shell_allow.clone().unwrap_or_default(),
        "spawn_allow": c.spawn_allow,
        "env_allow": c.env_allow,
        "filesystem_scope": c.filesystem_scope,
        "workdir_exec": c.workdir_exec,
        "containment": c.containment.as_str(),
    })
}

fn caps_text(m: &Manifest) -> String {
    let c = &m.capabilities;
    let mut out = String::new();
    out.push_str(&format!("  containment:  {}\n", c.containment));
    out.push_str(&format!("  network:      {}\n", list(&c.network_allow)));
    out.push_str(&format!(
        "  shell:        {}\n",
        list(c.shell_allow.as_deref().unwrap_or_default())
    ));
    out.push_str(&format!("  spawn:        {}\n", list(&c.spawn_allow)));
    out.push_str(&format!("  env:          {}\n", list(&c.env_allow)));
    out.push_str(&format!(
        "  filesystem:   {}\n",
        c.filesystem_scope.as_deref().unwrap_or("whole workdir")
    ));
    if let Some(f) = &m.exports.files {
        out.push_str(&format!(
            "  exports.files: {}/ (read-only, {} bytes per file)\n",
            f.root, f.max_bytes
        ));
    }
    if let Some(p) = &m.exports.peer_files {
        out.push_str(&format!(
            "  exports.peer_files: {}/ (ttl {}s)\n",
            p.root, p.max_ttl_secs
        ));
    }
    out
}

fn kind(m: &Manifest, wasm: bool) -> &'static str {
    match (m.inference.is_some(), wasm) {
        (true, _) => "agent",
        (false, true) => "wasm",
        (false, false) => "static",
    }
}

/// `mur build` output.
pub fn built(b: &Built, as_json: bool) -> String {
    let m = &b.loaded.manifest;
    if as_json {
        return json!({
            "name": m.name, "version": m.version, "path": b.path.display().to_string(),
            "sha256": b.sha256, "entries": b.entries, "left_out": b.left_out,
        })
        .to_string()
            + "\n";
    }
    format!(
        "built {} {} -> {}\n  sha256: {}\n  entries: {}\n",
        m.name,
        m.version,
        b.path.display(),
        b.sha256,
        b.entries.join(", ")
    )
}

/// `mur publish` output.
pub fn published(full: &str, m: &Manifest, loc: &Location, sha256: &str, as_json: bool) -> String {
    if as_json {
        return json!({"name": full, "version": m.version, "path": loc.archive.display().to_string(), "sha256": sha256})
            .to_string()
            + "\n";
    }
    format!(
        "published {full}@{}\n  path: {}\n  sha256: {sha256}\n",
        m.version,
        loc.archive.display()
    )
}

/// `mur inspect` output.
pub fn inspected(full: &str, r: &Resolved, wasm: bool, as_json: bool) -> String {
    let m = &r.loaded.manifest;
    if as_json {
        return json!({
            "name": full, "version": m.version, "sha256": r.sha256, "runtime": kind(m, wasm),
            "path": r.location.archive.display().to_string(), "capabilities": caps_json(&m.capabilities),
            "unresolved": r.loaded.unresolved.iter().map(|(k, v)| json!({"key": k, "variable": v})).collect::<Vec<_>>(),
        })
        .to_string()
            + "\n";
    }
    let mut out = format!(
        "{full}@{}\n  sha256:       {}\n  runtime:      {}\n  path:         {}\n{}",
        m.version,
        r.sha256,
        kind(m, wasm),
        r.location.archive.display(),
        caps_text(m)
    );
    for (key, var) in &r.loaded.unresolved {
        out.push_str(&format!(
            "  {key}: ${{{var}}} (resolved where the capsule runs)\n"
        ));
    }
    out
}
