//! The on-disk registry, in the reference layout so artifacts installed by the reference
//! `mur` resolve unchanged: `<root>/[<scope>/]<name>/<version>/<name>-<version>.mur.zip`
//! beside `<stem>.sha256` and `<stem>.meta.json`.

use super::archive::{Archive, ArchiveLimits};
use super::cache::{Artifact, ParsedCache, Stamp};
use crate::diag::{code, Diagnostic};
use crate::manifest::{self, name_error, Loaded, Resolve};
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest archive read from the registry or published into it.
pub const MAX_ARCHIVE_BYTES: u64 = 512 << 20;
const RESERVED_VERSIONS: [&str; 3] = ["latest", "stable", "edge"];

pub use crate::places::registry_root as default_root;

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
    hex(&sha256_bytes(bytes))
}

/// Lowercase hex of `bytes`, in one allocation.
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
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
    let mut bytes = Vec::new();
    match read_bounded(path, &mut bytes, MAX_ARCHIVE_BYTES)? {
        Bounded::Read(_) => Ok(bytes),
        Bounded::TooLarge(_) => Err(std::io::Error::other("archive larger than the registry allows")),
    }
}

/// A regular file's bytes, at most `max` of them (a larger file is an error; a FIFO is
/// never waited on): a published version's `meta.json`, the operator's config files.
pub fn read_small(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    match read_bounded(path, &mut bytes, max)? {
        Bounded::Read(_) => Ok(bytes),
        Bounded::TooLarge(_) => Err(std::io::Error::other(format!("larger than {max} bytes"))),
    }
}

/// `path` opened for reading, non-blocking, and kept only when it is a regular file: a FIFO
/// planted in the registry can neither hang the reader nor be read as an artifact.
fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok((file, meta.len()))
}

/// Parse the manifest packed in `bytes`.
pub fn packed_manifest(bytes: &[u8], resolve: Resolve<'_>) -> Result<Loaded, Diagnostic> {
    manifest::parse(&packed_manifest_text(bytes)?, resolve)
}

/// The text of the manifest packed in `bytes`, refused on its declared size before a byte
/// of it is inflated.
fn packed_manifest_text(bytes: &[u8]) -> Result<String, Diagnostic> {
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
    String::from_utf8(text)
        .map_err(|_| Diagnostic::new(code::MAN_SYNTAX, "murmur.yaml", "murmur.yaml is not UTF-8"))
}

/// The checks on the coordinates asked, before the filesystem is touched.
fn coordinates(full: &str, version: &str) -> Result<ArtifactName, Diagnostic> {
    let name = ArtifactName::parse(full)?;
    if RESERVED_VERSIONS.iter().any(|r| r.eq_ignore_ascii_case(version)) {
        return Err(not_installed(
            full,
            version,
            "reserved versions resolve to nothing",
        ));
    }
    check_version(version)?;
    Ok(name)
}

/// The archive could not be opened or read.
fn read_error(full: &str, version: &str, location: &Location, e: std::io::Error) -> Diagnostic {
    if e.kind() == std::io::ErrorKind::NotFound {
        return not_installed(full, version, &format!("no {}", location.archive.display()));
    }
    Diagnostic::new(
        code::IO_READ,
        full,
        format!("cannot read {}: {e}", location.archive.display()),
    )
}

/// A regular file's text (the sidecar is a hash and a name: 4 KiB is plenty), with the
/// stamp of the file read when it was the same before and after the read.
fn read_sidecar(path: &Path) -> std::io::Result<(String, Option<Stamp>)> {
    let mut text = String::new();
    let (mut file, _) = open_regular(path)?;
    let before = file.metadata().map(|m| Stamp::of(&m));
    (&mut file).take(4096).read_to_string(&mut text)?;
    let after = file.metadata().map(|m| Stamp::of(&m));
    let same = match (before, after) {
        (Ok(b), Ok(a)) if a == b => Some(a),
        _ => None,
    };
    Ok((text, same))
}

/// The `.sha256` sidecar must name the hash of the bytes read; the stamp of the sidecar
/// that did (see [`read_sidecar`]).
fn check_sidecar(
    full: &str,
    version: &str,
    location: &Location,
    sha256: &str,
) -> Result<Option<Stamp>, Diagnostic> {
    let (sidecar, stamp) = read_sidecar(&location.sha256).map_err(|e| {
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
    Ok(stamp)
}

/// The packed manifest must carry the coordinates asked for.
fn check_packed(
    full: &str,
    version: &str,
    name: &ArtifactName,
    packed_name: &str,
    packed_version: &str,
) -> Result<(), Diagnostic> {
    if packed_name != name.name {
        return Err(integrity(
            full,
            version,
            format!("the packed manifest is named '{packed_name}'"),
        ));
    }
    if packed_version != version {
        return Err(integrity(
            full,
            version,
            format!("the packed manifest has version '{packed_version}'"),
        ));
    }
    Ok(())
}

/// The [`Diagnostic::key`] of a cached resolve refused because the archive is larger than
/// the caller's per-resolve bound (never an artifact name, which has no space).
pub const ARCHIVE_TOO_LARGE: &str = "archive size";

/// What [`resolve_cached`] answers: the hash of the bytes read and what they parsed to.
pub struct CachedResolve<V> {
    pub sha256: String,
    pub artifact: Arc<Artifact<V>>,
}

/// Largest read buffer a cache keeps between resolves.
const KEEP_SCRATCH: usize = 1 << 20;

/// [`resolve`] for a daemon that resolves per request: the same reads and checks in the
/// same order (read the archive, hash the bytes read, require the sidecar to agree, require
/// the packed manifest to carry the coordinates asked), but the inflate, the parse and
/// `lower` run only when `cache` holds nothing for that hash, and the read, the hash and the
/// sidecar check only when the archive or its sidecar changed since they last passed (see
/// [`ParsedCache`]; `now_ms`, unix milliseconds, is when this resolve began). An archive
/// larger than `max_bytes` is refused on its size, before it is read (key
/// [`ARCHIVE_TOO_LARGE`]). `cache` must only ever see one `resolve` mode.
#[allow(clippy::too_many_arguments)]
pub fn resolve_cached<V>(
    root: &Path,
    full: &str,
    version: &str,
    resolve: Resolve<'_>,
    cache: &mut ParsedCache<V>,
    max_bytes: u64,
    now_ms: u64,
    lower: impl FnOnce(Loaded) -> V,
) -> Result<CachedResolve<V>, Diagnostic> {
    let name = coordinates(full, version)?;
    let location = locate(root, &name, version);
    let stamps = Stamp::at(&location.archive).zip(Stamp::at(&location.sha256));
    let known = stamps.and_then(|s| cache.known(&location.archive, s));
    if let Some((digest, artifact)) = known.and_then(|d| Some((d, cache.get(&d)?))) {
        check_packed(full, version, &name, &artifact.name, &artifact.version)?;
        return Ok(CachedResolve {
            sha256: hex(&digest),
            artifact,
        });
    }
    cache.forget(&location.archive);
    let mut buf = std::mem::take(&mut cache.scratch);
    cache.read_once();
    let read = read_bounded(&location.archive, &mut buf, max_bytes.min(MAX_ARCHIVE_BYTES));
    let answer = (|| {
        let held = match read {
            Ok(Bounded::Read(file)) => file,
            Ok(Bounded::TooLarge(size)) => {
                return Err(Diagnostic::new(
                    code::IO_READ,
                    ARCHIVE_TOO_LARGE,
                    format!("the archive is {size} bytes, more than the {max_bytes} a resolve here may read"),
                ))
            }
            Err(e) => return Err(read_error(full, version, &location, e)),
        };
        let digest = sha256_bytes(&buf);
        let sha256 = hex(&digest);
        let sidecar = check_sidecar(full, version, &location, &sha256)?;
        let artifact = match cache.get(&digest) {
            Some(hit) => hit,
            None => {
                let text = packed_manifest_text(&buf)?;
                let loaded = manifest::parse(&text, resolve)?;
                let artifact = Artifact {
                    name: loaded.manifest.name.clone(),
                    version: loaded.manifest.version.clone(),
                    value: lower(loaded),
                };
                cache.insert(digest, artifact, text.len())
            }
        };
        // Remembered only when the files read are the ones the paths named before (same
        // device and inode) and unchanged through the read, each stamped through the
        // descriptor it was read from, on a filesystem whose stat answers from the disk.
        let after = held.metadata().ok().map(|m| Stamp::of(&m)).zip(sidecar);
        if let (Some(before), Some(after)) = (stamps, after) {
            if before == after && super::cache::local_filesystem(&held) {
                cache.remember(&location.archive, held, before, digest, now_ms);
            }
        }
        check_packed(full, version, &name, &artifact.name, &artifact.version)?;
        Ok(CachedResolve { sha256, artifact })
    })();
    if buf.capacity() <= KEEP_SCRATCH {
        buf.clear();
        cache.scratch = buf;
    }
    answer
}

/// Read `path` into `buf` (cleared first) unless it is larger than `max`: `TooLarge(size)`
/// then, decided on the opened file's size before a byte is read (and again on the bytes
/// read, should the file grow meanwhile). Opened non-blocking and refused unless it is a
/// regular file, so a FIFO planted in the registry cannot hang the caller's thread.
fn read_bounded(path: &Path, buf: &mut Vec<u8>, max: u64) -> std::io::Result<Bounded> {
    buf.clear();
    let (mut file, size) = open_regular(path)?;
    if size > max {
        return Ok(Bounded::TooLarge(size));
    }
    buf.reserve(size as usize + 1);
    (&mut file).take(max + 1).read_to_end(buf)?;
    if buf.len() as u64 > max {
        return Ok(Bounded::TooLarge(buf.len() as u64));
    }
    Ok(Bounded::Read(file))
}

/// What [`read_bounded`] did: read the whole file (still open), or refused it at its size.
enum Bounded {
    Read(std::fs::File),
    TooLarge(u64),
}

/// Resolve `full@version`: read the archive, hash the bytes read, require the sidecar to
/// agree, and parse the packed manifest (whose name must be the bare name asked for).
pub fn resolve(root: &Path, full: &str, version: &str, resolve: Resolve<'_>) -> Result<Resolved, Diagnostic> {
    let name = coordinates(full, version)?;
    let (location, bytes) = read_installed(root, &name, full, version)?;
    let sha256 = sha256_hex(&bytes);
    check_sidecar(full, version, &location, &sha256)?;
    let loaded = packed_manifest(&bytes, resolve)?;
    let m = &loaded.manifest;
    check_packed(full, version, &name, &m.name, &m.version)?;
    Ok(Resolved {
        location,
        bytes,
        sha256,
        loaded,
    })
}

/// The archive of `name@version` from `root`, else, only when `root` has no such archive, from
/// the system registry ([`crate::places::system_registry_root`]): a package's drivers and hooks
/// resolve without a publish step, and the user's own copy always wins. An archive the user's
/// registry holds but cannot be read, or a system copy that fails its sidecar, is an error,
/// never a reason to look elsewhere.
fn read_installed(
    root: &Path,
    name: &ArtifactName,
    full: &str,
    version: &str,
) -> Result<(Location, Vec<u8>), Diagnostic> {
    let location = locate(root, name, version);
    let missing = match read_capped(&location.archive) {
        Ok(b) => return Ok((location, b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => read_error(full, version, &location, e),
        Err(e) => return Err(read_error(full, version, &location, e)),
    };
    let system = match crate::places::system_registry_root() {
        Some(s) if s != root => locate(&s, name, version),
        _ => return Err(missing),
    };
    match read_capped(&system.archive) {
        Ok(b) => Ok((system, b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(missing),
        Err(e) => Err(read_error(full, version, &system, e)),
    }
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
        "runtime": if super::payload::has_root_wasm(bytes) { "wasm" } else { "static" },
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
