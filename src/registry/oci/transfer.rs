//! What `mur push`, `mur pull` and `mur install` do with a registry session: file a local
//! artifact as an OCI artifact, and fetch one (by tag, by manifest digest, or by the
//! archive's own sha256 as a lock pins it) into the local registry.

use super::manifest::{self, Blob, MAX_CONFIG_BYTES};
use super::reference::Target;
use super::session::Session;
use crate::diag::{code, Diagnostic};
use crate::manifest::Resolve;
use crate::registry::store::{self, ArtifactName, Location, MAX_ARCHIVE_BYTES};
use std::path::Path;

/// An artifact filed in a remote registry.
#[derive(Debug)]
pub struct Pushed {
    pub tag: String,
    /// The manifest's digest (`sha256:…`): `mur pull …@<digest>` fetches exactly this.
    pub digest: String,
    /// The archive's sha256 (the layer's digest without its prefix).
    pub sha256: String,
}

/// An artifact fetched into the local registry.
#[derive(Debug)]
pub struct Pulled {
    pub full: String,
    pub version: String,
    pub sha256: String,
    pub location: Location,
    /// It was in the local registry already, with the same bytes.
    pub already: bool,
}

/// File `full@version` from the local registry under `tag`.
pub fn push(
    session: &mut Session,
    root: &Path,
    full: &str,
    version: &str,
    tag: &str,
) -> Result<Pushed, Diagnostic> {
    let local = store::resolve(root, full, version, Resolve::Nothing)?;
    let meta = store::read_small(&local.location.meta, MAX_CONFIG_BYTES).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            full,
            format!("cannot read the meta.json of {full}@{version}: {e}"),
        )
    })?;
    let config = Blob {
        digest: format!("sha256:{}", store::sha256_hex(&meta)),
        size: meta.len() as u64,
    };
    let layer = Blob {
        digest: format!("sha256:{}", local.sha256),
        size: local.bytes.len() as u64,
    };
    session.upload(&config.digest, &meta, "meta.json")?;
    session.upload(&layer.digest, &local.bytes, "archive")?;
    let title = local
        .location
        .archive
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digest = session.put_manifest(tag, &manifest::build(&config, &layer, &title))?;
    Ok(Pushed {
        tag: tag.to_string(),
        digest,
        sha256: local.sha256,
    })
}

/// Fetch the artifact a tag or manifest digest names: its manifest judged, its meta.json
/// (which names it) and its archive checked against their digests, then published. With
/// `expect` (a full name and version), a meta.json naming anything else is refused before
/// the archive is fetched, so a source can never file an artifact it was not asked for.
pub fn pull(
    session: &mut Session,
    root: &Path,
    target: &Target,
    expect: Option<(&str, &str)>,
) -> Result<Pulled, Diagnostic> {
    let text = match target {
        Target::Tag(t) | Target::Digest(t) => t.clone(),
    };
    let (bytes, _digest) = session.manifest(&text)?;
    let refused = |why: String| Diagnostic::new(code::REG_REMOTE, session.reference().to_text(), why);
    let m = manifest::parse(&bytes, MAX_ARCHIVE_BYTES)
        .map_err(|why| refused(format!("not a murmur artifact: {why}")))?;
    let meta = session.blob(&m.config, "meta.json")?;
    let refused = |why: String| Diagnostic::new(code::REG_REMOTE, session.reference().to_text(), why);
    let (full, version) = named_by(&meta).map_err(|why| refused(format!("its meta.json: {why}")))?;
    if let Some((want, want_version)) = expect {
        if (full.as_str(), version.as_str()) != (want, want_version) {
            return Err(Diagnostic::new(
                code::REG_INTEGRITY,
                session.reference().to_text(),
                format!(
                    "{} holds {full}@{version}, not {want}@{want_version}",
                    session.reference().to_text()
                ),
            ));
        }
    }
    let archive = session.blob(&m.layer, "archive")?;
    file(root, &archive, &full, &version)
}

/// Fetch `full@version` by the archive's own sha256 (a lock's pin): a moved tag changes
/// nothing, and the bytes must hash to the pin.
pub fn pull_pinned(
    session: &mut Session,
    root: &Path,
    full: &str,
    version: &str,
    sha256: &str,
) -> Result<Pulled, Diagnostic> {
    let blob = Blob {
        digest: format!("sha256:{sha256}"),
        size: MAX_ARCHIVE_BYTES,
    };
    let archive = session.blob_within(&blob, "archive")?;
    file(root, &archive, full, version)
}

/// The artifact's full name and version from its meta.json (`{"meta": {name, version}}`).
fn named_by(meta: &[u8]) -> Result<(String, String), String> {
    let v: serde_json::Value = serde_json::from_slice(meta).map_err(|_| "not JSON".to_string())?;
    let field = |k: &str| {
        v.pointer(&format!("/meta/{k}"))
            .and_then(|x| x.as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("no meta.{k}"))
    };
    let (name, version) = (field("name")?, field("version")?);
    ArtifactName::parse(&name).map_err(|d| d.message)?;
    store::check_version(&version).map_err(|d| d.message)?;
    Ok((name, version))
}

/// Publish `archive` as `full@version`: the archive's own manifest must name it; the same
/// bytes already there are fine, other bytes under the version are E-REG-002.
fn file(root: &Path, archive: &[u8], full: &str, version: &str) -> Result<Pulled, Diagnostic> {
    let name = ArtifactName::parse(full)?;
    let sha256 = store::sha256_hex(archive);
    let packed = store::packed_manifest(archive, Resolve::Nothing)?;
    if packed.manifest.name != name.name || packed.manifest.version != version {
        return Err(Diagnostic::new(
            code::REG_INTEGRITY,
            full,
            format!(
                "the archive fetched for {full}@{version} is {}@{}",
                packed.manifest.name, packed.manifest.version
            ),
        ));
    }
    let location = store::locate(root, &name, version);
    if location.dir.exists() {
        let have = store::resolve(root, full, version, Resolve::Nothing)?;
        if have.sha256 != sha256 {
            return Err(Diagnostic::new(
                code::REG_INTEGRITY,
                full,
                format!(
                    "{full}@{version} is in the local registry with sha256 {}, the remote one has sha256 {sha256}",
                    have.sha256
                ),
            ));
        }
        return Ok(Pulled {
            full: full.to_string(),
            version: version.to_string(),
            sha256,
            location,
            already: true,
        });
    }
    let (location, sha256, _) = store::publish(root, archive, name.scope.as_deref())?;
    Ok(Pulled {
        full: full.to_string(),
        version: version.to_string(),
        sha256,
        location,
        already: false,
    })
}
