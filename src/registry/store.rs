//! The on-disk registry, in the reference layout so artifacts installed by the reference
//! `mur` resolve unchanged: `<root>/[<scope>/]<name>/<version>/<name>-<version>.mur.zip`
//! beside `<stem>.sha256` and `<stem>.meta.json`.

use super::archive::{Archive, ArchiveLimits};
use crate::diag::{code, Diagnostic};
use crate::manifest::{self, name_error, Loaded, Resolve};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Largest archive read from the registry or published into it.
pub const MAX_ARCHIVE_BYTES: u64 = 512 << 20;
const RESERVED_VERSIONS: [&str; 3] = ["latest", "stable", "edge"];

/// `$HOME/.murmur/artifacts`.
pub fn default_root() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
    home.join(".murmur").join("artifacts")
}

/// A bare (`worker-a`) or scoped (`local/worker-a`) artifact name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactName {
    pub scope: Option<String>,
    pub name: String,
}

impl ArtifactName {
    /// Parse and check a name (E-BLD-001 when malformed).
    pub fn parse(full: &str) -> Result<ArtifactName, Diagnostic> {
        if let Some(why) = name_error(full) {
            return Err(Diagnostic::new(
                code::BLD_NAME,
                full,
                format!("invalid artifact name: {why}"),
            ));
        }
        Ok(match full.split_once('/') {
            Some((scope, name)) => ArtifactName {
                scope: Some(scope.into()),
                name: name.into(),
            },
            None => ArtifactName {
                scope: None,
                name: full.into(),
            },
        })
    }

    /// The name as written: `scope/name` or `name`.
    pub fn full(&self) -> String {
        match &self.scope {
            Some(s) => format!("{s}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// Check a version string: a plain token, never one of the reserved words (E-REG-004).
pub fn check_version(version: &str) -> Result<(), Diagnostic> {
    if RESERVED_VERSIONS.iter().any(|r| r.eq_ignore_ascii_case(version)) {
        return Err(Diagnostic::new(
            code::REG_RESERVED_VERSION,
            version,
            format!("version '{version}' is reserved and resolves to nothing"),
        ));
    }
    let ok = !version.is_empty()
        && version.len() <= 64
        && !version.starts_with('.')
        && version
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
    if !ok {
        return Err(Diagnostic::new(
            code::MAN_INVALID,
            version,
            format!("'{version}' is not a valid version"),
        ));
    }
    Ok(())
}

/// Where one version of an artifact lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub dir: PathBuf,
    pub archive: PathBuf,
    pub sha256: PathBuf,
    pub meta: PathBuf,
}

/// The paths of `name` at `version` under `root`.
pub fn locate(root: &Path, name: &ArtifactName, version: &str) -> Location {
    let mut dir = root.to_path_buf();
    if let Some(scope) = &name.scope {
        dir.push(scope);
    }
    dir.push(&name.name);
    dir.push(version);
    let stem = format!("{}-{version}", name.name);
    Location {
        archive: dir.join(format!("{stem}.mur.zip")),
        sha256: dir.join(format!("{stem}.sha256")),
        meta: dir.join(format!("{stem}.meta.json")),
        dir,
    }
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    sha256_bytes(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The raw SHA-256 of `bytes`.
pub fn sha256_bytes(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// What the registry resolved: the archive bytes actually read, their hash, the manifest.
pub struct Resolved {
    pub location: Location,
    pub bytes: Vec<u8>,
    pub sha256: String,
    pub loaded: Loaded,
}

fn not_installed(full: &str, version: &str, why: &str) -> Diagnostic {
    Diagnostic::new(
        code::REG_NOT_INSTALLED,
        full,
        format!("artifact {full}@{version} is not installed: {why}"),
    )
}

fn integrity(full: &str, version: &str, why: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::new(
        code::REG_INTEGRITY,
        full,
        format!("integrity check failed for {full}@{version}: {why}"),
    )
}

fn read_capped(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_ARCHIVE_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(std::io::Error::other("archive larger than the registry allows"));
    }
    Ok(bytes)
}

/// Parse the manifest packed in `bytes`.
pub fn packed_manifest(bytes: &[u8], resolve: Resolve<'_>) -> Result<Loaded, Diagnostic> {
    let archive = Archive::open(bytes, &ArchiveLimits::default())
        .map_err(|e| Diagnostic::new(code::REG_INTEGRITY, "murmur.yaml", e.to_string()))?;
    match archive.entries().first() {
        // Refused on its declared size, before a byte is inflated: a manifest bomb must not
        // cost the roost (which resolves per request) hundreds of MiB first.
        Some(e) if e.name == "murmur.yaml" && e.size > manifest::MAX_MANIFEST_BYTES as u64 => {
            return Err(Diagnostic::new(
                code::MAN_INVALID,
                "murmur.yaml",
                format!(
                    "murmur.yaml: the packed manifest declares {} bytes, more than the {} a manifest may have",
                    e.size,
                    manifest::MAX_MANIFEST_BYTES
                ),
            ))
        }
        Some(e) if e.name == "murmur.yaml" => {}
        _ => {
            return Err(Diagnostic::new(
                code::REG_INTEGRITY,
                "murmur.yaml",
                "the archive does not start with murmur.yaml",
            ))
        }
    }
    let text = archive
        .read("murmur.yaml")
        .map_err(|e| Diagnostic::new(code::REG_INTEGRITY, "murmur.yaml", e.to_string()))?;
    let text = String::from_utf8(text)
        .map_err(|_| Diagnostic::new(code::MAN_SYNTAX, "murmur.yaml", "murmur.yaml is not UTF-8"))?;
    manifest::parse(&text, resolve)
}

/// Resolve `full@version`: read the archive, hash the bytes read, require the sidecar to
/// agree, and parse the packed manifest (whose name must be the bare name asked for).
pub fn resolve(root: &Path, full: &str, version: &str, resolve: Resolve<'_>) -> Result<Resolved, Diagnostic> {
    let name = ArtifactName::parse(full)?;
    if RESERVED_VERSIONS.iter().any(|r| r.eq_ignore_ascii_case(version)) {
        return Err(not_installed(
            full,
            version,
            "reserved versions resolve to nothing",
        ));
    }
    check_version(version)?;
    let location = locate(root, &name, version);
    let bytes = match read_capped(&location.archive) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(not_installed(
                full,
                version,
                &format!("no {}", location.archive.display()),
            ))
        }
        Err(e) => {
            return Err(Diagnostic::new(
                code::IO_READ,
                full,
                format!("cannot read {}: {e}", location.archive.display()),
            ))
        }
    };
    let sha256 = sha256_hex(&bytes);
    let sidecar = std::fs::read_to_string(&location.sha256).map_err(|e| {
        integrity(
            full,
            version,
            format!("cannot read {}: {e}", location.sha256.display()),
        )
    })?;
    if sidecar.trim() != sha256 {
        return Err(integrity(
            full,
            version,
            format!(
                "the archive hashes to {sha256}, its .sha256 says '{}'",
                sidecar.trim()
            ),
        ));
    }
    let loaded = packed_manifest(&bytes, resolve)?;
    if loaded.manifest.name != name.name {
        return Err(integrity(
            full,
            version,
            format!("the packed manifest is named '{}'", loaded.manifest.name),
        ));
    }
    if loaded.manifest.version != version {
        return Err(integrity(
            full,
            version,
            format!("the packed manifest has version '{}'", loaded.manifest.version),
        ));
    }
    Ok(Resolved {
        location,
        bytes,
        sha256,
        loaded,
    })
}

fn write_synced(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// File `bytes` into the registry under `scope` (optional). Everything is written into a
/// hidden staging directory and renamed into place without replacing anything, so a crash
/// leaves no partial version and an existing version is never overwritten (E-REG-003).
pub fn publish(
    root: &Path,
    bytes: &[u8],
    scope: Option<&str>,
) -> Result<(Location, String, Loaded), Diagnostic> {
    if bytes.len() as u64 > MAX_ARCHIVE_BYTES {
        return Err(Diagnostic::new(
            code::REG_INTEGRITY,
            "",
            "archive larger than the registry allows",
        ));
    }
    // The manifest first: its size is checked before anything is inflated.
    let loaded = packed_manifest(bytes, Resolve::Nothing)?;
    Archive::open(bytes, &ArchiveLimits::default())
        .and_then(|a| a.verify())
        .map_err(|e| Diagnostic::new(code::REG_INTEGRITY, "", e.to_string()))?;
    let m = &loaded.manifest;
    let full = match scope {
        Some(s) => format!("{s}/{}", m.name),
        None => m.name.clone(),
    };
    let name = ArtifactName::parse(&full)?;
    check_version(&m.version)?;
    let location = locate(root, &name, &m.version);
    if location.dir.exists() {
        return Err(Diagnostic::new(
            code::REG_VERSION_EXISTS,
            &full,
            format!(
                "{full}@{} is already published; versions are never overwritten",
                m.version
            ),
        ));
    }
    let parent = location.dir.parent().unwrap_or(root);
    let io =
        |what: &str, e: std::io::Error| Diagnostic::new(code::IO_READ, &full, format!("cannot {what}: {e}"));
    std::fs::create_dir_all(parent).map_err(|e| io("create the registry directory", e))?;
    let staging = parent.join(format!(
        ".staging-{}-{}",
        m.version,
        crate::token::random_hex16().unwrap_or_default()
    ));
    std::fs::create_dir(&staging).map_err(|e| io("create a staging directory", e))?;
    let sha256 = sha256_hex(bytes);
    // The full name, as the reference 0.8.0 reads it back (file names use the bare name).
    let meta = serde_json::json!({"meta": {
        "name": full,
        "version": m.version,
        "runtime": if has_root_wasm(bytes) { "wasm" } else { "static" },
        "artifact_runtime": m.packaged_as.as_deref().unwrap_or("capsule"),
        "platforms": [],
        "description": m.description,
        "tags": [],
    }});
    let file = |p: &Path| staging.join(p.file_name().unwrap_or_default());
    let staged = write_synced(&file(&location.archive), bytes)
        .and_then(|_| write_synced(&file(&location.sha256), sha256.as_bytes()))
        .and_then(|_| {
            write_synced(
                &file(&location.meta),
                serde_json::to_string_pretty(&meta).unwrap_or_default().as_bytes(),
            )
        })
        .and_then(|_| {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &staging,
                rustix::fs::CWD,
                &location.dir,
                rustix::fs::RenameFlags::NOREPLACE,
            )
            .map_err(std::io::Error::from)
        });
    if let Err(e) = staged {
        let _ = std::fs::remove_dir_all(&staging);
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            return Err(Diagnostic::new(
                code::REG_VERSION_EXISTS,
                &full,
                format!("{full}@{} is already published", m.version),
            ));
        }
        return Err(io("write the archive", e));
    }
    if let Ok(d) = std::fs::File::open(parent) {
        let _ = d.sync_all();
    }
    Ok((location, sha256, loaded))
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
