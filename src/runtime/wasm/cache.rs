//! On-disk cache of compiled components, keyed by the component's sha256 and the engine's
//! configuration. A cached entry is native code, so it is never trusted blindly: the cache
//! directory and file must belong to this user and be writable by nobody else, the entry
//! carries the sha256 of its own bytes, and wasmtime checks its version and configuration
//! header. Anything that fails a check is ignored and rebuilt.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::Engine;

/// Entry layout: this magic, the sha256 of the component it was compiled from, the sha256
/// of the body, the body (wasmtime's serialized component).
const MAGIC: &[u8; 8] = b"MURCWSM2";
const HEADER: usize = 8 + 32 + 32;

pub use crate::places::cache_dir as default_dir;

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

fn entry_name(sha256: &str, engine: &Engine) -> String {
    format!("{sha256}-{}.cwasm", engine_key(engine))
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
    let name = entry_name(sha256, engine);
    if let Some(dir) = dir {
        match trusted_dir(dir).and_then(|d| d.map_or(Ok(None), |d| read_trusted(&d, &name, sha256))) {
            Ok(Some(body)) => {
                // SAFETY: `deserialize` runs the entry's native code later. The body was read
                // from one O_NOFOLLOW descriptor, opened relative to the cache directory's own
                // descriptor after that directory, its ancestors and the file itself were
                // checked (owned by this user, or root for ancestors; writable by no one
                // else), and it carries the sha256 of the component asked for and of its own
                // bytes, both matching; wasmtime then checks its own header (version and
                // engine configuration) and refuses a foreign entry.
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
        Some(dir) if untrusted_parent(dir).is_none() => store(dir, &name, sha256, &component).is_ok(),
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

/// The cache directory, opened once and checked from that descriptor: owned by this user
/// and writable by no one else, and so its ancestors, as [`untrusted_ancestors`] says.
/// `Ok(None)` when it does not exist; `Err(why)` when it cannot hold trusted native code.
fn trusted_dir(dir: &Path) -> Result<Option<std::os::fd::OwnedFd>, String> {
    let (fd, real) = match opened(dir) {
        Ok(v) => v,
        Err(_) if !dir.exists() => return Ok(None),
        Err(why) => return Err(why),
    };
    let uid = rustix::process::geteuid().as_raw();
    match rustix::fs::fstat(&fd) {
        Ok(st) if st.st_uid == uid && st.st_mode & 0o022 == 0 => {}
        Ok(_) => {
            return Err(format!(
                "{} is not owned by this user or is writable by others",
                real.display()
            ))
        }
        Err(e) => return Err(format!("cannot stat {}: {e}", dir.display())),
    }
    match real.parent().and_then(untrusted_ancestors) {
        Some(why) => Err(why),
        None => Ok(Some(fd)),
    }
}

/// Whether entries may be stored under `dir` (which may not exist yet): its parent and the
/// parent's ancestors pass [`untrusted_ancestors`].
fn untrusted_parent(dir: &Path) -> Option<String> {
    let mut parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    // A fresh home has no `~/.cache/murmur` yet: what `store` creates below the nearest
    // existing ancestor is this user's (0700), so that ancestor is the one to check.
    while rustix::fs::lstat(parent).is_err() {
        match parent.parent() {
            Some(p) if !p.as_os_str().is_empty() => parent = p,
            _ => break,
        }
    }
    match opened(parent) {
        Ok((_, real)) => untrusted_ancestors(&real),
        Err(why) => Some(why),
    }
}

/// The body of the entry `name` in the checked directory `dir` that passes every check,
/// `None` when there is none. The entry is opened once, relative to `dir`, with
/// `O_NOFOLLOW`; its owner, mode and type are read from that descriptor, the same one its
/// bytes come from; it must name `sha256` as its source.
fn read_trusted(dir: &std::os::fd::OwnedFd, name: &str, sha256: &str) -> Result<Option<Vec<u8>>, String> {
    use rustix::fs::{FileType, Mode, OFlags};
    use std::io::Read;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(format!("unreadable entry {name}: {e}")),
    };
    let uid = rustix::process::geteuid().as_raw();
    let st = rustix::fs::fstat(&fd).map_err(|e| format!("cannot stat {name}: {e}"))?;
    if st.st_uid != uid
        || st.st_mode & 0o022 != 0
        || FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
    {
        return Err(format!(
            "{name} is not owned by this user or is writable by others"
        ));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("unreadable entry: {e}"))?;
    if bytes.len() < HEADER || &bytes[..MAGIC.len()] != MAGIC {
        return Err("not a cache entry".into());
    }
    let (source, rest) = bytes[MAGIC.len()..].split_at(32);
    if hex(source) != sha256 {
        return Err("the entry was compiled from another component".into());
    }
    let (sum, body) = rest.split_at(32);
    if crate::registry::sha256_bytes(body) != sum {
        return Err("the entry's checksum does not match its bytes".into());
    }
    Ok(Some(body.to_vec()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Write an entry atomically: a private temp file created in the checked directory's
/// descriptor, then renamed within it.
fn store(dir: &Path, name: &str, sha256: &str, component: &Component) -> std::io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let dfd = match trusted_dir(dir) {
        Ok(Some(fd)) => fd,
        Ok(None) => return Err(std::io::Error::other("the cache directory vanished")),
        Err(why) => return Err(std::io::Error::other(why)),
    };
    let source_bytes: Vec<u8> = (0..sha256.len() / 2)
        .filter_map(|i| u8::from_str_radix(sha256.get(2 * i..2 * i + 2)?, 16).ok())
        .collect();
    if source_bytes.len() != 32 || sha256.len() != 64 {
        return Err(std::io::Error::other("not a sha256"));
    }
    let body = component.serialize().map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(HEADER + body.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&source_bytes);
    out.extend_from_slice(&crate::registry::sha256_bytes(&body));
    out.extend_from_slice(&body);
    let tmp = format!(
        ".tmp-{}-{}",
        std::process::id(),
        crate::token::random_hex16().map_err(|e| std::io::Error::other(e.to_string()))?
    );
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(&dfd, tmp.as_str(), flags, Mode::from_raw_mode(0o600))?;
    let mut f = std::fs::File::from(fd);
    let written = f.write_all(&out).and_then(|_| f.sync_all());
    drop(f);
    let renamed = written.and_then(|_| Ok(rustix::fs::renameat(&dfd, tmp.as_str(), &dfd, name)?));
    if renamed.is_err() {
        let _ = rustix::fs::unlinkat(&dfd, tmp.as_str(), rustix::fs::AtFlags::empty());
    }
    renamed
}
