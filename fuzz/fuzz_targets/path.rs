//! The resource plane's path check and resolver on arbitrary request paths, against a tree
//! whose export root holds files, links within it (relative and absolute), links out of it
//! (`..`, absolute, to a sibling file and to a sibling directory sharing the root's name
//! prefix), a link loop and a fifo. Invariants, under both symlink rules: nothing panics;
//! a path `request_path` accepts has no empty, `.` or `..` component, no NUL and does not
//! start with `/`; and whatever opens is a regular file beneath the root, never a file
//! beside it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::fsx::Dir;
use murmur::resources::open::{open_file, open_root};
use murmur::resources::path::request_path;
use murmur::resources::Symlinks;
use std::collections::HashSet;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{symlink, MetadataExt};
use std::sync::OnceLock;

struct Tree {
    roots: [(Symlinks, OwnedFd); 2],
    /// (dev, ino) of every regular file beneath the root.
    inside: HashSet<(u64, u64)>,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("murmur-fuzz-path-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("work/out");
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::fs::write(base.join("work/secret"), "outside").unwrap();
        std::fs::write(root.join("f"), "file").unwrap();
        std::fs::write(root.join("d/g"), "deeper").unwrap();
        symlink("f", root.join("in")).unwrap();
        symlink("d", root.join("dl")).unwrap();
        symlink("..", root.join("up")).unwrap();
        symlink("../secret", root.join("sec")).unwrap();
        symlink("/etc/passwd", root.join("abs")).unwrap();
        symlink("/", root.join("slash")).unwrap();
        symlink("loop", root.join("loop")).unwrap();
        symlink("../../d", root.join("d/e/back")).unwrap();
        // Absolute links: into the root (followed), to the root itself, to the sibling
        // file, and to a sibling directory whose name starts with the root's.
        let real = root.canonicalize().unwrap();
        std::fs::create_dir_all(base.join("work/outer")).unwrap();
        std::fs::write(base.join("work/outer/x"), "outside").unwrap();
        symlink(real.join("f"), root.join("absin")).unwrap();
        symlink(&real, root.join("absroot")).unwrap();
        symlink(real.join("d"), root.join("d/e/absd")).unwrap();
        symlink(
            base.join("work/secret").canonicalize().unwrap(),
            root.join("absout"),
        )
        .unwrap();
        symlink(
            base.join("work/outer").canonicalize().unwrap(),
            root.join("absouter"),
        )
        .unwrap();
        let _ = std::process::Command::new("mkfifo").arg(root.join("p")).status();
        let inside = ["f", "d/g"]
            .iter()
            .map(|p| {
                let m = std::fs::metadata(root.join(p)).unwrap();
                (m.dev(), m.ino())
            })
            .collect();
        let work = Dir::open(&base.join("work")).unwrap();
        let open = |s| open_root(&work, "out", s).unwrap().unwrap();
        Tree {
            roots: [
                (Symlinks::Refuse, open(Symlinks::Refuse)),
                (Symlinks::FollowBeneath, open(Symlinks::FollowBeneath)),
            ],
            inside,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(path) = request_path(raw) else { return };
    assert!(!path.is_empty() && !path.starts_with('/') && !path.contains('\0'));
    assert!(
        path.split('/').all(|c| !c.is_empty() && c != "." && c != ".."),
        "{path:?}"
    );
    let t = tree();
    for (symlinks, root) in &t.roots {
        if let Ok(o) = open_file(root.as_fd(), &path, *symlinks, 1 << 20) {
            let m = o.file.metadata().unwrap();
            assert!(m.is_file());
            assert!(
                t.inside.contains(&(m.dev(), m.ino())),
                "{path:?} opened a file outside the root under {symlinks:?}"
            );
        }
    }
});
