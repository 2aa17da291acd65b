//! On-disk cache of compiled components, keyed by the component's sha256 and the engine's
//! configuration. A cached entry is native code, so it is never trusted blindly: the cache
//! directory and file must belong to this user and be writable by nobody else, the entry
//! carries the sha256 of its own bytes, and wasmtime checks its version and configuration
//! header. Anything that fails a check is ignored and rebuilt.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::Engine;

const MAGIC: &[u8; 8] = b"MURCWSM1";

/// Where compiled components live: `$MURMUR_CACHE_DIR`, else `$XDG_CACHE_HOME/murmur/compiled`,
/// else `$HOME/.cache/murmur/compiled`.
pub fn default_dir() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("MURMUR_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("murmur/compiled")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/murmur/compiled")))
}

/// How a component was obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Loaded from a valid cache entry.
    Cached,
    /// Compiled now; `stored` says whether the cache took the result.
    Compiled { stored: bool, rejected: Option<String> },
}

fn engine_key(engine: &Engine) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    format!("{:016x}", h.finish())
}

fn entry_path(dir: &Path, sha256: &str, engine: &Engine) -> PathBuf {
    dir.join(format!("{sha256}-{}.cwasm", engine_key(engine)))
}

/// The component for `bytes` (whose sha256 is `sha256`), from the cache when a valid entry
/// exists, else compiled and stored.
pub fn load(
    engine: &Engine,
    dir: Option<&Path>,
    bytes: &[u8],
    sha256: &str,
) -> wasmtime::Result<(Component, Source)> {
    let mut rejected = None;
    if let Some(dir) = dir {
        let path = entry_path(dir, sha256, engine);
        match read_trusted(dir, &path) {
            Ok(Some(body)) => {
                // SAFETY: `deserialize` runs the entry's native code later. The entry is only
                // reached after `read_trusted` checked that the directory and file are owned
                // by this user and writable by no one else, and that the body's sha256
                // matches the one stored with it; wasmtime then checks its own header
                // (version and engine configuration) and refuses a foreign entry.
                #[allow(unsafe_code)]
                let loaded = unsafe { Component::deserialize(engine, &body) };
                match loaded {
                    Ok(c) => return Ok((c, Source::Cached)),
                    Err(e) => rejected = Some(format!("wasmtime refused the entry: {e}")),
                }
            }
            Ok(None) => {}
            Err(why) => rejected = Some(why),
        }
    }
    let component = Component::new(engine, bytes)?;
    // Nothing is stored where it could not be trusted on the way back.
    let stored = match dir {
        Some(dir) if untrusted_parent(dir).is_none() => {
            store(dir, &entry_path(dir, sha256, engine), &component).is_ok()
        }
        _ => false,
    };
    Ok((component, Source::Compiled { stored, rejected }))
}

/// `dir` opened, and the real path of what was opened.
fn opened(dir: &Path) -> Result<(std::os::fd::OwnedFd, PathBuf), String> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    let real = std::fs::read_link(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd)))
        .map_err(|e| format!("cannot name {}: {e}", dir.display()))?;
    Ok((fd, real))
}

/// Why `start` or one of its ancestors could let someone else swap the cache, if one could:
/// each must be a directory (checked with lstat, so no symlink is followed) owned by this
/// user or root and writable by no one else, unless sticky (`/tmp`: others cannot rename
/// what they do not own).
fn untrusted_ancestors(start: &Path) -> Option<String> {
    use rustix::fs::FileType;
    let uid = rustix::process::geteuid().as_raw();
    for a in start.ancestors() {
        let st = match rustix::fs::lstat(a) {
            Ok(st) => st,
            Err(e) => return Some(format!("cannot stat {}: {e}", a.display())),
        };
        let owner_ok = st.st_uid == uid || st.st_uid == 0;
        let sticky = st.st_mode & 0o1000 != 0;
        if FileType::from_raw_mode(st.st_mode) != FileType::Directory
            || !owner_ok
            || (st.st_mode & 0o022 != 0 && !sticky)
        {
            return Some(format!(
                "the cache's ancestor {} is not owned by this user or root, or is writable by others",
                a.display()
            ));
        }
    }
    None
}

/// Why a directory cannot hold trusted native code, or `None` when it can: it must be owned
/// by this user and writable by no one else (read from the open descriptor), and so must
/// its ancestors, as [`untrusted_ancestors`] says.
fn untrusted_dir(dir: &Path) -> Option<String> {
    let (fd, real) = match opened(dir) {
        Ok(v) => v,
        Err(why) => return Some(why),
    };
    let uid = rustix::process::geteuid().as_raw();
    match rustix::fs::fstat(&fd) {
        Ok(st) if st.st_uid == uid && st.st_mode & 0o022 == 0 => {}
        Ok(_) => {
            return Some(format!(
                "{} is not owned by this user or is writable by others",
                real.display()
            ))
        }
        Err(e) => return Some(format!("cannot stat {}: {e}", dir.display())),
    }
    real.parent().and_then(untrusted_ancestors)
}

/// Whether entries may be stored under `dir` (which may not exist yet): its parent and the
/// parent's ancestors pass [`untrusted_ancestors`].
fn untrusted_parent(dir: &Path) -> Option<String> {
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match opened(parent) {
        Ok((_, real)) => untrusted_ancestors(&real),
        Err(why) => Some(why),
    }
}

/// The body of a cache entry that passes every check, `None` when there is none. The entry
/// is opened once (`O_NOFOLLOW`), and its owner, mode and type are read from that descriptor,
/// the same one its bytes come from.
fn read_trusted(dir: &Path, path: &Path) -> Result<Option<Vec<u8>>, String> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::io::Read;
    let fd = match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(format!("unreadable entry: {e}")),
    };
    if let Some(why) = untrusted_dir(dir) {
        return Err(why);
    }
    let uid = rustix::process::geteuid().as_raw();
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    if st.st_uid != uid
        || st.st_mode & 0o022 != 0
        || FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
    {
        return Err(format!(
            "{} is not owned by this user or is writable by others",
            path.display()
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("unreadable entry: {e}"))?;
    if bytes.len() < MAGIC.len() + 32 || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a cache entry".into());
    }
    let (sum, body) = bytes[MAGIC.len()..].split_at(32);
    if crate::registry::sha256_bytes(body) != sum {
        return Err("the entry's checksum does not match its bytes".into());
    }
    Ok(Some(body.to_vec()))
}

/// Write an entry atomically: a private temp file in the directory, then a rename.
fn store(dir: &Path, path: &Path, component: &Component) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let body = component.serialize().map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(MAGIC.len() + 32 + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&crate::registry::sha256_bytes(&body));
    out.extend_from_slice(&body);
    let tmp = dir.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        crate::token::random_hex16().map_err(|e| std::io::Error::other(e.to_string()))?
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(&out)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
