//! A delegated child's workdir, tied to its records: at its start the child writes
//! `child-workdir.json` (the path and device:inode of its
//! `<parent workdir>/.murmur/children/<name>-<hex>`) into its own records, which no guest
//! reaches. A prune that removes those records removes that workdir with them, and only
//! when the parent has ended too (no shared lock on its workdir), the child has ended (no
//! lock on its records, the caller's check) and the directory found there is the one
//! recorded; a child's workdir that cannot be found is nothing to remove.

use super::tree;
use crate::fsx::{Dir, FsError};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

/// The records file that names a delegated child's workdir.
pub const FILE: &str = "child-workdir.json";
/// Where children's workdirs go beneath their parent's workdir.
const CHILDREN: &str = ".murmur/children";
/// Largest link file read.
const MAX_LINK: u64 = 4096;

/// What [`FILE`] holds.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Link {
    pub path: String,
    pub dev: u64,
    pub ino: u64,
}

/// Write the link of a delegated child's workdir `path` (device and inode `identity`) into
/// its records directory.
pub fn record(records: &Dir, path: &Path, identity: (u64, u64)) -> Result<(), FsError> {
    let link = Link {
        path: path.display().to_string(),
        dev: identity.0,
        ino: identity.1,
    };
    let bytes = serde_json::to_vec(&link).unwrap_or_default();
    records.replace(FILE, &bytes)
}

/// A child's workdir found from its records, held: its parent's workdir, the
/// `.murmur/children` directory, and the child's own name and descriptor.
pub struct Found {
    pub parent: Dir,
    pub children: Dir,
    pub name: String,
    pub child: OwnedFd,
}

impl Found {
    /// Whether the parent session has ended: nothing holds its workdir.
    pub fn parent_ended(&self) -> bool {
        let free = tree::take_if_free(self.parent.as_fd());
        if free {
            tree::release(self.parent.as_fd());
        }
        free
    }

    /// The bytes and newest mtime of the child's workdir.
    pub fn measure(&self) -> tree::Measure {
        tree::measure(self.child.as_fd())
    }

    /// Remove the child's workdir (through [`crate::fsx`]): its contents through the
    /// descriptor checked against the link, its name only while it still names that.
    pub fn remove(&self) -> Result<(), FsError> {
        self.children.remove_held(&self.name, self.child.as_fd())
    }
}

/// The workdir the records held by `records` link to, when it is still there and is still
/// the directory recorded.
pub fn find(records: &Dir) -> Option<Found> {
    let bytes = records.read(FILE, MAX_LINK).ok()?;
    let link: Link = serde_json::from_slice(&bytes).ok()?;
    let path = Path::new(&link.path);
    let name = path.file_name()?.to_str()?.to_string();
    let children_path = path.parent()?;
    let parent_path = children_path.parent()?.parent()?;
    if !path.is_absolute() || !children_path.ends_with(CHILDREN) {
        return None;
    }
    let parent = Dir::open(parent_path).ok()?;
    let children = parent.sub(CHILDREN).ok()?;
    let child = tree::open_dir(children.as_fd(), name.as_str()).ok()?;
    let st = rustix::fs::fstat(&child).ok()?;
    if (st.st_dev, st.st_ino) != (link.dev, link.ino) {
        return None;
    }
    Some(Found {
        parent,
        children,
        name,
        child,
    })
}
