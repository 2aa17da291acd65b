//! An agent capsule's artifacts: each `artifacts:` entry resolved through the one registry
//! resolver (the bytes hashed are the bytes staged) before the session starts, then staged
//! under `workdir/tools/<name>/` through the symlink-safe writer. A native binary is staged
//! in the records directory instead (private to the runtime), so nothing a contained command
//! can write is ever executed as a tool.

use crate::diag::{code, Diagnostic};
use crate::fsx::Dir;
use crate::manifest::model::{Artifact, ArtifactRuntime};
use crate::manifest::Resolve;
use crate::registry::archive::{Archive, ArchiveLimits};
use crate::registry::{self, payload};
use crate::runtime::pinning::Pinning;
use crate::runtime::wasm::cache;
use serde_json::Value;
use std::path::Path;

/// The largest `input_schema` offered to a model, bytes of JSON.
pub const MAX_SCHEMA_BYTES: usize = 16 << 10;
/// The largest `skill.md` staged and returned to a model, bytes.
pub const MAX_SKILL_BYTES: usize = 256 << 10;

/// How a resolved artifact runs.
pub enum Payload {
    /// A component (a tool or driver exporting `murmur:tool/run@0.1.0`, or a hook), compiled.
    Wasm(wasmtime::component::Component),
    /// `bin/<name>` from the archive.
    Native(Vec<u8>),
    /// `skill.md`.
    Skill(String),
}

/// One resolved artifact, not yet staged.
pub struct Resolved {
    pub entry: Artifact,
    /// The bare name: the `tools/` directory and the name a model calls.
    pub bare: String,
    pub sha256: String,
    /// The packed `murmur.yaml`, verbatim.
    pub manifest_text: String,
    /// The packed manifest as YAML (for `description`, `input_schema`, `upstream_auth`).
    pub own: serde_yaml::Value,
    pub payload: Payload,
    /// How the component was obtained (for the bootstrap log).
    pub compiled: Option<cache::Source>,
}

impl Resolved {
    /// A top-level string of the artifact's own manifest.
    pub fn own_str(&self, key: &str) -> Option<&str> {
        self.own.get(key).and_then(serde_yaml::Value::as_str)
    }

    /// The artifact's `input_schema` as JSON, when it declares an object schema of at most
    /// [`MAX_SCHEMA_BYTES`] (publisher text the model reads: bounded like a description).
    pub fn input_schema(&self) -> Option<Value> {
        let v = self.own.get("input_schema")?;
        serde_json::to_value(v)
            .ok()
            .filter(Value::is_object)
            .filter(|v| v.to_string().len() <= MAX_SCHEMA_BYTES)
    }
}

fn bare(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Resolve every entry of `artifacts` from `root`, check each against `murmur.lock`, and
/// compile the components; any failure is the launch refusal (E-RUN-008 not installed,
/// E-REG-002 integrity, E-RUN-003 not what the lock pins, E-RUN-002 a component that does
/// not compile).
pub fn resolve_all(
    root: &Path,
    artifacts: &[Artifact],
    engine: &wasmtime::Engine,
    cache_dir: Option<&Path>,
    pins: &Pinning,
) -> Result<Vec<Resolved>, Diagnostic> {
    let mut out = Vec::new();
    for a in artifacts {
        let key = format!("artifacts[{}]", a.name);
        let Some(version) = &a.version else {
            return Err(Diagnostic::new(
                code::REG_NOT_INSTALLED,
                &key,
                format!(
                    "artifact {} has no version to resolve (source: entries are not supported by mur run)",
                    a.name
                ),
            ));
        };
        let r = registry::resolve(root, &a.name, version, Resolve::Nothing)?;
        pins.check(&a.name, version, &r.sha256)?;
        let bad = |m: String| Diagnostic::new(code::RUN_COMPONENT, &key, m);
        let archive = Archive::open(&r.bytes, &ArchiveLimits::default())
            .map_err(|e| bad(format!("{}@{version}: unreadable archive: {e}", a.name)))?;
        let manifest_text = String::from_utf8(
            archive
                .read("murmur.yaml")
                .map_err(|e| bad(format!("{}@{version}: {e}", a.name)))?,
        )
        .map_err(|_| bad(format!("{}@{version}: murmur.yaml is not UTF-8", a.name)))?;
        let own: serde_yaml::Value = serde_yaml::from_str(&manifest_text).unwrap_or(serde_yaml::Value::Null);
        let b = bare(&a.name).to_string();
        let native_entry = format!("bin/{b}");
        let mut compiled = None;
        let payload = match a.runtime {
            ArtifactRuntime::Skill => {
                let text = archive
                    .read("skill.md")
                    .map_err(|e| bad(format!("{}@{version}: a skill needs skill.md: {e}", a.name)))?;
                if text.len() > MAX_SKILL_BYTES {
                    return Err(bad(format!(
                        "{}@{version}: skill.md is larger than {MAX_SKILL_BYTES} bytes",
                        a.name
                    )));
                }
                Payload::Skill(String::from_utf8_lossy(&text).into_owned())
            }
            ArtifactRuntime::Tool if archive.contains(&native_entry) => Payload::Native(
                archive
                    .read(&native_entry)
                    .map_err(|e| bad(format!("{}@{version}: {e}", a.name)))?,
            ),
            ArtifactRuntime::Tool | ArtifactRuntime::Driver | ArtifactRuntime::Hook => {
                let wasm = payload::archive_component(&r.bytes, &a.name)?;
                let sha = registry::sha256_hex(&wasm);
                let (component, got) = cache::load(engine, cache_dir, &wasm, &sha).map_err(|e| {
                    bad(format!(
                        "{}@{version} is not a valid WebAssembly component: {e:#}",
                        a.name
                    ))
                })?;
                compiled = Some(got);
                Payload::Wasm(component)
            }
        };
        out.push(Resolved {
            entry: a.clone(),
            bare: b,
            sha256: r.sha256,
            manifest_text,
            own,
            payload,
            compiled,
        });
    }
    Ok(out)
}

/// Stage every artifact: `tools/<name>/murmur.yaml` (and `skill.md`) in the workdir, a
/// native binary as `bin/<name>` (mode 0500) in the records directory.
pub fn stage(work: &Dir, records: &Dir, all: &[Resolved]) -> Result<(), Diagnostic> {
    let io = |what: String, e: crate::fsx::FsError| {
        Diagnostic::new(code::IO_READ, "", format!("cannot stage {what}: {e}"))
    };
    for r in all {
        let dir = format!("tools/{}", r.bare);
        work.mkdirs(&dir, 0o755).map_err(|e| io(dir.clone(), e))?;
        let m = format!("{dir}/murmur.yaml");
        work.replace(&m, r.manifest_text.as_bytes())
            .map_err(|e| io(m.clone(), e))?;
        match &r.payload {
            Payload::Skill(text) => {
                let s = format!("{dir}/skill.md");
                work.replace(&s, text.as_bytes()).map_err(|e| io(s.clone(), e))?;
            }
            Payload::Native(bytes) => {
                use std::io::Write;
                use std::os::unix::fs::PermissionsExt;
                let rel = format!("bin/{}", r.bare);
                let mut f = records.create_new(&rel).map_err(|e| io(rel.clone(), e))?;
                f.write_all(bytes)
                    .and_then(|_| f.set_permissions(std::fs::Permissions::from_mode(0o500)))
                    .and_then(|_| f.sync_all())
                    .map_err(|e| Diagnostic::new(code::IO_READ, "", format!("cannot stage {rel}: {e}")))?;
            }
            Payload::Wasm(_) => {}
        }
    }
    Ok(())
}
