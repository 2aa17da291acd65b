//! `mur build [DIR] [-o FILE]`: validate a capsule directory and pack it into a `.mur.zip`:
//! `murmur.yaml` first, then `requires_files`, then the root WASM payload, then
//! `murmur-build.json`. Every other file of the directory is named as left out (W-BLD-002),
//! but for what is never a capsule's: hidden entries, sessions' `workdir/`, locks, archives,
//! and a Rust guest's own sources and `target/`.

use crate::diag::{code, Diagnostic};
use crate::manifest::{self, relative_path, Loaded, Resolve};
use crate::registry::{archive, sha256_hex, store::check_version, ArtifactName};
use std::path::{Path, PathBuf};

const BUILD_INFO: &str = "murmur-build.json";

/// What a build produced.
pub struct Built {
    pub path: PathBuf,
    pub sha256: String,
    pub entries: Vec<String>,
    pub loaded: Loaded,
    /// Files of the directory not packed (see [`left_out`]), sorted.
    pub left_out: Vec<String>,
}

/// The most files [`Built::left_out_warning`] names; the rest are counted.
const NAMED: usize = 20;
/// The most directory entries [`left_out`] looks at, and how deep.
const MAX_ENTRIES: usize = 10_000;
const MAX_DEPTH: usize = 16;

impl Built {
    /// W-BLD-002 naming the files the archive was built without, if any.
    pub fn left_out_warning(&self) -> Option<Diagnostic> {
        let n = self.left_out.len();
        if n == 0 {
            return None;
        }
        let mut named = self.left_out[..n.min(NAMED)].join(", ");
        if n > NAMED {
            named.push_str(&format!(" and {} more", n - NAMED));
        }
        let files = if n == 1 { "file" } else { "files" };
        Some(
            Diagnostic::new(
                code::BLD_LEFT_OUT,
                "requires_files",
                format!("{n} {files} of the capsule directory left out of the archive: {named}"),
            )
            .with_hint("an archive holds murmur.yaml, the root .wasm payload and what requires_files lists: list there what the capsule needs when it runs"),
        )
    }
}

fn bad_file(key: &str, why: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::new(code::BLD_REQUIRES_FILES, key, format!("requires_files: {why}"))
}

/// Build `dir` into `out` (default: `<name>-<version>.mur.zip` in the current directory).
pub fn build(dir: &Path, out: Option<&Path>) -> Result<Built, Diagnostic> {
    let manifest_path = dir.join("murmur.yaml");
    let loaded = manifest::load_file(&manifest_path, Resolve::Nothing)?;
    let m = &loaded.manifest;
    let name = ArtifactName::parse(&m.name)?;
    if name.scope.is_some() {
        return Err(Diagnostic::new(
            code::BLD_NAME,
            "name",
            format!("'{}': a packed manifest declares the bare name", m.name),
        )
        .with_hint("publish with --scope to file it under a scope"));
    }
    check_version(&m.version)?;
    let raw_manifest = std::fs::read(&manifest_path).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "murmur.yaml",
            format!("cannot read murmur.yaml: {e}"),
        )
    })?;
    let mut files: Vec<(String, Vec<u8>)> = vec![("murmur.yaml".into(), raw_manifest)];

    let skill = m.packaged_as.as_deref() == Some("skill");
    let requires = if m.requires_files.is_empty() && skill {
        vec!["skill.md".to_string()]
    } else {
        m.requires_files.clone()
    };
    for (i, entry) in requires.iter().enumerate() {
        let key = format!("requires_files[{i}]");
        let rel = relative_path(entry).map_err(|why| bad_file(&key, why))?;
        if rel.is_empty() {
            return Err(bad_file(&key, format!("'{entry}' names no file")));
        }
        if rel == "murmur.yaml" || rel == BUILD_INFO {
            return Err(bad_file(&key, format!("'{rel}' is written by mur build itself")));
        }
        if files.iter().any(|(n, _)| *n == rel) {
            return Err(bad_file(&key, format!("'{rel}' is listed twice")));
        }
        let path = dir.join(&rel);
        let meta = std::fs::symlink_metadata(&path).map_err(|e| {
            Diagnostic::new(
                code::IO_READ,
                &key,
                format!("requires_files: cannot read '{rel}': {e}"),
            )
        })?;
        if meta.file_type().is_symlink() {
            return Err(bad_file(
                &key,
                format!("'{rel}' is a symlink; only regular files are packed"),
            ));
        }
        if !meta.is_file() {
            return Err(bad_file(&key, format!("'{rel}' is not a regular file")));
        }
        let bytes = std::fs::read(&path).map_err(|e| {
            Diagnostic::new(
                code::IO_READ,
                &key,
                format!("requires_files: cannot read '{rel}': {e}"),
            )
        })?;
        files.push((rel, bytes));
    }

    let needs_wasm = m.inference.is_none() && !skill;
    if needs_wasm {
        let wasm = crate::registry::payload::find_root_wasm(dir)?.ok_or_else(|| {
            Diagnostic::new(
                code::BLD_WASM_PAYLOAD,
                dir.display().to_string(),
                "missing root .wasm file (capsule.wasm)",
            )
            .with_hint(
                "a WASM capsule packs capsule.wasm beside murmur.yaml; an agent capsule declares inference",
            )
        })?;
        if !files.iter().any(|(n, _)| *n == wasm) {
            let bytes = std::fs::read(dir.join(&wasm))
                .map_err(|e| Diagnostic::new(code::IO_READ, &wasm, format!("cannot read {wasm}: {e}")))?;
            files.push((wasm, bytes));
        }
    }
    files.push((BUILD_INFO.into(), b"{\"built_at_level\":1}\n".to_vec()));

    let bytes = archive::write(&files).map_err(|e| bad_file("requires_files", e))?;
    let path = match out {
        Some(p) => p.to_path_buf(),
        None => PathBuf::from(format!("{}-{}.mur.zip", m.name, m.version)),
    };
    write_atomically(&path, &bytes).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            path.display().to_string(),
            format!("cannot write {}: {e}", path.display()),
        )
    })?;
    let entries: Vec<String> = files.into_iter().map(|(n, _)| n).collect();
    Ok(Built {
        path,
        sha256: sha256_hex(&bytes),
        left_out: left_out(dir, &entries),
        entries,
        loaded,
    })
}

/// The files beneath `dir` (relative, `/`-separated, sorted) that are not among `packed`,
/// symlinks included (never packed), without following any; skipped: hidden entries, the
/// sessions' `workdir/`, locks (`*.lock`), archives (`*.mur.zip`), and beside a
/// `Cargo.toml` the Rust guest's `Cargo.toml`, `src/` and `target/` (the payload's source).
/// Bounded: [`MAX_ENTRIES`] entries, [`MAX_DEPTH`] levels.
pub fn left_out(dir: &Path, packed: &[String]) -> Vec<String> {
    let rust_guest = dir.join("Cargo.toml").is_file();
    let never = |rel: &str, name: &str, is_dir: bool| {
        name.starts_with('.')
            || (is_dir && rel == "workdir")
            || (!is_dir && (name.ends_with(".lock") || name.ends_with(".mur.zip")))
            || (rust_guest && matches!(rel, "Cargo.toml" | "src" | "target"))
    };
    let mut out = Vec::new();
    let (mut stack, mut seen) = (vec![(dir.to_path_buf(), String::new(), 0usize)], 0usize);
    while let Some((path, prefix, depth)) = stack.pop() {
        let Ok(list) = std::fs::read_dir(&path) else {
            continue;
        };
        for e in list.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                break;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            let Ok(t) = e.file_type() else { continue };
            if never(&rel, &name, t.is_dir()) {
                continue;
            }
            if t.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((e.path(), format!("{rel}/"), depth + 1));
                }
            } else if !packed.contains(&rel) {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let tmp = dir.join(format!(".{}.tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
