//! The workdir I/O module on arbitrary relative paths, against a tree with planted
//! symlinks (`up -> ..`, `out -> <outside>`, `abs -> /`, a file `f`). Invariants: nothing
//! panics; a path `split` accepts has no empty, `.`, `..` or absolute component and no NUL;
//! and whatever `mkdirs`/`replace`/`append` do with it, nothing is ever created outside
//! the root. (Symlinks planted between two calls by another thread are beyond a fuzzer:
//! `src/fsx/tests.rs` races them in a unit test.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::fsx::{split, Dir};
use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::OnceLock;

struct Tree {
    root: PathBuf,
    outside: PathBuf,
    dir: Dir,
}

fn tree() -> &'static Tree {
    static TREE: OnceLock<Tree> = OnceLock::new();
    TREE.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("murmur-fuzz-fsx-{}", std::process::id()));
        let (root, outside) = (base.join("root"), base.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        symlink("..", root.join("up")).unwrap();
        symlink(&outside, root.join("out")).unwrap();
        symlink("/", root.join("abs")).unwrap();
        std::fs::write(root.join("f"), "file").unwrap();
        let dir = Dir::open(&root).unwrap();
        Tree { root, outside, dir }
    })
}

const PLANTED: [&str; 4] = ["up", "out", "abs", "f"];

fuzz_target!(|data: &[u8]| {
    let Ok(rel) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parts) = split(rel) else { return };
    for p in &parts {
        assert!(!p.is_empty() && *p != "." && *p != ".." && !p.contains('/') && !p.contains('\0'));
    }
    let t = tree();
    let _ = t.dir.mkdirs(rel, 0o755);
    let _ = t.dir.replace(rel, b"x");
    let _ = t.dir.append(rel);
    let _ = t.dir.read(rel, 16);
    assert_eq!(
        std::fs::read_dir(&t.outside).unwrap().count(),
        0,
        "{rel:?} wrote outside the root"
    );
    // Keep the tree small: drop what this input created, never the planted entries.
    if !PLANTED.contains(&parts[0]) {
        let top = t.root.join(parts[0]);
        let _ = std::fs::remove_dir_all(&top).or_else(|_| std::fs::remove_file(&top));
    }
});
