//! The operator plane's listing: every regular file beneath an export root, recursively,
//! sorted by path, each with size, mtime and sha256 from one open of that file. Every
//! directory is reopened beneath the root by the same confined resolution a read uses, so a
//! directory swapped for a symlink mid-walk cannot lead the walk out; under `scoped`,
//! symlinks are left out; otherwise one is listed where it resolves to a regular file
//! beneath the root. A symlink to a directory is not walked (what it names beneath the root
//! is listed under its real path), so the listing is the same whatever order the directory
//! entries come in, and no loop of links can make it endless.

use super::open::{digest, open_file};
use super::{Refusal, Symlinks};
use rustix::fs::{self as rfs, AtFlags, FileType, Mode, OFlags, ResolveFlags};
use std::collections::HashSet;
use std::os::fd::BorrowedFd;

/// The most files one listing walks; a larger tree is an `io_error`, not a partial list.
pub const MAX_ENTRIES: usize = 100_000;
/// The deepest directory walked.
pub const MAX_DEPTH: usize = 64;

/// One listed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the export root, `/`-separated.
    pub path: String,
    pub size: u64,
    pub mtime_ms: u64,
    /// `None` for a file larger than the export's `max_bytes` (listed, never read).
    pub sha256: Option<String>,
}

fn beneath(
    root: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    symlinks: Symlinks,
) -> Option<std::os::fd::OwnedFd> {
    let mut resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    if symlinks.refused() {
        resolve |= ResolveFlags::NO_SYMLINKS;
    }
    rfs::openat2(root, rel, flags | OFlags::CLOEXEC, Mode::empty(), resolve).ok()
}

/// List every regular file beneath `root`.
pub fn list(root: BorrowedFd<'_>, symlinks: Symlinks, max_bytes: u64) -> Result<Vec<Entry>, Refusal> {
    let mut out = Vec::new();
    let mut seen: HashSet<(u64, u64)> = HashSet::new();
    let mut dirs: Vec<(String, usize)> = vec![(String::new(), 0)];
    while let Some((prefix, depth)) = dirs.pop() {
        let rel = if prefix.is_empty() { "." } else { prefix.as_str() };
        let Some(dir) = beneath(root, rel, OFlags::RDONLY | OFlags::DIRECTORY, symlinks) else {
            continue;
        };
        let Ok(st) = rfs::fstat(&dir) else { continue };
        if !seen.insert((st.st_dev, st.st_ino)) {
            continue;
        }
        let Ok(mut reader) = rfs::Dir::read_from(&dir) else {
            continue;
        };
        while let Some(item) = reader.read() {
            let Ok(item) = item else { break };
            let Ok(name) = item.file_name().to_str() else {
                continue;
            };
            if name == "." || name == ".." {
                continue;
            }
            let child = if prefix.is_empty() {
                name.to_string()
            } else {
                format!("{prefix}/{name}")
            };
            let Ok(st) = rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let kind = match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink if symlinks == Symlinks::Refuse => continue,
                FileType::Symlink if symlinks == Symlinks::Fail => {
                    return Err(Refusal::Io(format!("{child} is a symlink")))
                }
                FileType::Symlink => {
                    // Listed only where it resolves beneath the root.
                    let Ok(target) = super::open::resolve(root, &child, OFlags::PATH, symlinks) else {
                        continue;
                    };
                    let Ok(t) = rfs::fstat(&target) else { continue };
                    match FileType::from_raw_mode(t.st_mode) {
                        FileType::RegularFile => FileType::RegularFile,
                        _ => continue,
                    }
                }
                other => other,
            };
            match kind {
                FileType::Directory if depth + 1 < MAX_DEPTH => dirs.push((child, depth + 1)),
                FileType::RegularFile => {
                    if out.len() >= MAX_ENTRIES {
                        return Err(Refusal::Io(format!(
                            "more than {MAX_ENTRIES} files under the export root"
                        )));
                    }
                    if let Some(e) = entry(root, child, symlinks, max_bytes) {
                        out.push(e);
                    }
                }
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| a.path.as_bytes().cmp(b.path.as_bytes()));
    Ok(out)
}

/// One file's entry from one open; `None` when it went away or stopped being a file.
fn entry(root: BorrowedFd<'_>, path: String, symlinks: Symlinks, max_bytes: u64) -> Option<Entry> {
    let mut opened = open_file(root, &path, symlinks, u64::MAX).ok()?;
    if opened.size > max_bytes {
        return Some(Entry {
            path,
            size: opened.size,
            mtime_ms: opened.mtime_ms,
            sha256: None,
        });
    }
    // The size listed is the number of bytes the digest describes.
    let (sha, n) = digest(&mut opened.file, max_bytes).ok()?;
    Some(Entry {
        path,
        size: n,
        mtime_ms: opened.mtime_ms,
        sha256: Some(sha),
    })
}
