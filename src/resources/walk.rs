//! Absolute symlinks beneath an export root, under `advisory` and `sealed`.
//!
//! `openat2(RESOLVE_BENEATH)` refuses every absolute symlink (`EXDEV`), even one whose
//! target is inside the root (an agent that sees the workdir at its host path writes such
//! links). When that happens the path is walked here one component at a time: relative
//! links are expanded in place, and an absolute one is rewritten relative to the root when
//! it names the root's own canonical path (as the kernel reports it for the held root
//! descriptor) or something beneath it, else refused as `outside_root`. The result is a
//! path with no symlinks left in it, which is then opened with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`: the comparison only decides which path to try, and the kernel
//! still confines the open. A link swapped in between the walk and the open is refused by
//! that open, never followed.

use super::Refusal;
use rustix::fs::{self as rfs, AtFlags, FileType};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, BorrowedFd};

/// The most symlinks one resolution follows (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// `path` beneath `root` with every symlink expanded, as a root-relative path that names
/// no symlink ("" for the root itself).
pub fn expand(root: BorrowedFd<'_>, path: &str) -> Result<String, Refusal> {
    let root_real = std::fs::read_link(format!("/proc/self/fd/{}", root.as_raw_fd()))
        .map_err(|e| Refusal::Io(e.to_string()))?;
    let root_real = root_real
        .to_str()
        .ok_or_else(|| Refusal::Io("the export root's path is not UTF-8".into()))?
        .to_string();
    let mut todo: VecDeque<String> = path.split('/').map(str::to_string).collect();
    let mut done: Vec<String> = Vec::new();
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        match c.as_str() {
            "" | "." => continue,
            ".." => {
                // `done` names real directories only, so popping is exact.
                if done.pop().is_none() {
                    return Err(Refusal::OutsideRoot);
                }
                continue;
            }
            _ => {}
        }
        done.push(c);
        let here = done.join("/");
        let st = match rfs::statat(root, here.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::NOENT) | Err(Errno::NOTDIR) => return Err(Refusal::NotFound),
            Err(e) => return Err(Refusal::Io(e.to_string())),
        };
        if FileType::from_raw_mode(st.st_mode) != FileType::Symlink {
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(Refusal::NotFound);
        }
        let target =
            rfs::readlinkat(root, here.as_str(), Vec::new()).map_err(|e| Refusal::Io(e.to_string()))?;
        let target = target.to_str().map_err(|_| Refusal::NotFound)?.to_string();
        done.pop();
        let rest: Vec<String> = if let Some(abs) = target.strip_prefix('/') {
            let inside = if root_real == "/" {
                Some(abs)
            } else {
                let r = root_real.trim_start_matches('/');
                abs.strip_prefix(r)
                    .filter(|tail| tail.is_empty() || tail.starts_with('/'))
            };
            let Some(tail) = inside else {
                return Err(Refusal::OutsideRoot);
            };
            done.clear();
            tail.split('/').map(str::to_string).collect()
        } else {
            target.split('/').map(str::to_string).collect()
        };
        for part in rest.into_iter().rev() {
            todo.push_front(part);
        }
    }
    Ok(done.join("/"))
}
