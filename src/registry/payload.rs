//! A capsule's WASM payload, in a directory or packed in an archive: `capsule.wasm`, else
//! the only root `*.wasm`. Shared by `mur build`, `mur run` and `mur inspect` (and the registry's
//! published summary), so every caller agrees on which file is the component.

use super::archive::{Archive, ArchiveLimits};
use crate::diag::{code, Diagnostic};
use std::path::Path;

/// The root WASM payload of `dir`: `capsule.wasm`, else the only root `*.wasm`.
pub fn find_root_wasm(dir: &Path) -> Result<Option<String>, Diagnostic> {
    if dir.join("capsule.wasm").is_file() {
        return Ok(Some("capsule.wasm".into()));
    }
    let read = std::fs::read_dir(dir).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            dir.display().to_string(),
            format!("cannot list {}: {e}", dir.display()),
        )
    })?;
    let mut found: Vec<String> = read
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".wasm"))
        .collect();
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(Diagnostic::new(
            code::BLD_WASM_PAYLOAD,
            dir.display().to_string(),
            format!("multiple root .wasm files found: {}", found.join(", ")),
        )
        .with_hint("name the payload capsule.wasm, or keep one root .wasm file")),
    }
}

/// The archive's root `capsule.wasm`, else its only root `*.wasm`.
pub fn archive_component(bytes: &[u8], name: &str) -> Result<Vec<u8>, Diagnostic> {
    let bad = |m: String| Diagnostic::new(code::BLD_WASM_PAYLOAD, name, m);
    let a = Archive::open(bytes, &ArchiveLimits::default())
        .map_err(|e| bad(format!("unreadable archive: {e}")))?;
    let roots: Vec<&str> = a
        .entries()
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| !n.contains('/') && n.ends_with(".wasm"))
        .collect();
    let pick = if roots.contains(&"capsule.wasm") {
        "capsule.wasm"
    } else {
        match roots.as_slice() {
            [only] => only,
            [] => return Err(bad(format!("{name} has no root .wasm payload"))),
            _ => {
                return Err(bad(format!(
                    "{name} has several root .wasm files: {}",
                    roots.join(", ")
                )))
            }
        }
    };
    a.read(pick).map_err(|e| bad(format!("cannot read {pick}: {e}")))
}

/// Whether the archive carries a root `*.wasm` payload.
pub fn has_root_wasm(bytes: &[u8]) -> bool {
    Archive::open(bytes, &ArchiveLimits::default())
        .map(|a| {
            a.entries()
                .iter()
                .any(|e| !e.name.contains('/') && e.name.ends_with(".wasm"))
        })
        .unwrap_or(false)
}
