//! What an agent launch settles before a session exists: the driver entry, the system
//! prompt file, the provider key and how the driver carries it, and the endpoint's origin.

use super::stage::Resolved;
use crate::diag::{code, Diagnostic};
use crate::manifest::model::{ArtifactRuntime, Inference, Manifest, Transport};
use std::path::Path;

/// The largest system prompt file read, bytes.
pub const MAX_PROMPT_BYTES: u64 = 1 << 20;

pub fn no_driver(why: String) -> Diagnostic {
    Diagnostic::new(code::RUN_NO_DRIVER, "inference.driver.artifact", why).with_hint(
        "declare the driver under artifacts: with runtime: driver and name it in inference.driver.artifact",
    )
}

/// The launch refusals that need no session: the driver entry and the system prompt file.
pub fn check(
    m: &Manifest,
    inf: &Inference,
    base: &Path,
    archive: Option<&[u8]>,
) -> Result<(String, Option<String>), Diagnostic> {
    if inf.transport == Transport::Process {
        return Err(Diagnostic::new(
            code::RUN_NO_DRIVER,
            "inference.transport",
            "inference.transport: process is not supported by this runtime; use http with a driver",
        ));
    }
    let driver = match &inf.driver_artifact {
        None => {
            return Err(no_driver(
                "no inference driver is configured (inference.driver.artifact)".into(),
            ))
        }
        Some(d) => d.clone(),
    };
    if !m
        .artifacts
        .iter()
        .any(|a| a.name == driver && a.runtime == ArtifactRuntime::Driver)
    {
        return Err(no_driver(format!(
            "inference.driver.artifact '{driver}' names no declared 'runtime: driver' artifact"
        )));
    }
    let prompt = match (&inf.system_prompt, &inf.system_prompt_file) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(file)) => Some(read_prompt(file, base, archive)?),
        (None, None) => None,
    };
    Ok((driver, prompt))
}

/// `inference.system_prompt_file`: a relative path with no `..`, read without following a
/// symlink below the manifest's directory, or from a registry capsule's own archive (never
/// from wherever `mur` happens to run).
fn read_prompt(file: &str, base: &Path, archive: Option<&[u8]>) -> Result<String, Diagnostic> {
    let unreadable = |why: String| {
        Diagnostic::new(
            code::RUN_PROMPT_FILE,
            "inference.system_prompt_file",
            format!("cannot read the system prompt file {file}: {why}"),
        )
    };
    crate::fsx::split(file)
        .map_err(|_| unreadable("it must be a relative path inside the capsule, without '..'".into()))?;
    let bytes = match archive {
        Some(zip) => {
            use crate::registry::archive::{Archive, ArchiveLimits};
            let a = Archive::open(zip, &ArchiveLimits::default()).map_err(|e| unreadable(e.to_string()))?;
            let b = a
                .read(file)
                .map_err(|e| unreadable(format!("not in the capsule's archive ({e})")))?;
            if b.len() as u64 > MAX_PROMPT_BYTES {
                return Err(unreadable(format!("larger than {MAX_PROMPT_BYTES} bytes")));
            }
            b
        }
        None => crate::fsx::Dir::open(base)
            .and_then(|d| d.read(file, MAX_PROMPT_BYTES))
            .map_err(|e| unreadable(e.to_string()))?,
    };
    String::from_utf8(bytes).map_err(|_| unreadable("not UTF-8".into()))
}

/// The provider key (its variable, its value), when one was read.
pub fn key_of(inf: &Inference) -> Option<(Option<String>, String)> {
    inf.api_key.as_ref()?.secret()
}

/// The driver artifact's `upstream_auth: {header, value}`.
pub fn upstream_auth(r: &Resolved) -> Option<(String, String)> {
    let a = r.own.get("upstream_auth")?;
    let header = a.get("header")?.as_str()?.to_string();
    let value = a.get("value")?.as_str()?.to_string();
    Some((header, value))
}

pub fn io_diag(what: &str, e: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::new(code::IO_READ, "", format!("{what}: {e}"))
}

/// Whether `rule` covers the endpoint's destination (one parse with the subprocess rules').
pub fn endpoint_covered(rule: &crate::manifest::netrule::NetRule, endpoint: &str) -> bool {
    crate::manifest::netrule::endpoint(endpoint).is_some_and(|dest| rule.covers(&dest))
}

/// `scheme://host:port` of the endpoint.
pub fn endpoint_origin(endpoint: &str) -> String {
    endpoint
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| crate::runtime::wasm::credential::origin_of(&u))
        .map(|o| format!("{}://{}:{}", o.scheme, o.host, o.port))
        .unwrap_or_else(|| endpoint.to_string())
}

pub fn hex16() -> Result<String, Diagnostic> {
    crate::token::random_hex16().map_err(|e| io_diag("no randomness", e))
}
