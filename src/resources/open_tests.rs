use super::*;
use crate::resources::list::{list, Entry};
use std::os::fd::AsFd;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

/// A tree: `work/out/` is the export root, with files, links in and out, a fifo, a
/// directory and a sparse file over the cap; `work/outside.txt` lies beside the root.
struct Tree {
    _tmp: PathBuf,
    work: PathBuf,
}

const CAP: u64 = 1024;

fn tree(label: &str) -> Tree {
    let tmp = std::env::temp_dir().join(format!("murmur-res-{label}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let work = tmp.join("work");
    let out = work.join("out");
    std::fs::create_dir_all(out.join("sub")).unwrap();
    std::fs::write(out.join("a.txt"), "hello").unwrap();
    std::fs::write(out.join("sub/b.txt"), "bee").unwrap();
    std::fs::write(work.join("outside.txt"), "secret").unwrap();
    symlink("a.txt", out.join("link_in")).unwrap();
    symlink("../outside.txt", out.join("link_out")).unwrap();
    symlink("/etc/hostname", out.join("link_abs")).unwrap();
    symlink("sub", out.join("dirlink")).unwrap();
    symlink("loop", out.join("loop")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        out.join("fifo").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let big = std::fs::File::create(out.join("big")).unwrap();
    big.set_len(2 << 30).unwrap();
    Tree { _tmp: tmp, work }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self._tmp);
    }
}

fn root(t: &Tree, symlinks: Symlinks) -> OwnedFd {
    let work = Dir::open(&t.work).unwrap();
    open_root(&work, "out/", symlinks).unwrap().unwrap()
}

fn read(t: &Tree, path: &str, symlinks: Symlinks) -> Result<String, Refusal> {
    let r = root(t, symlinks);
    let mut o = open_file(r.as_fd(), path, symlinks, CAP)?;
    let (_, n) = digest(&mut o.file, CAP)?;
    assert_eq!(n, o.size);
    let mut text = String::new();
    let mut again = open_file(r.as_fd(), path, symlinks, CAP)?;
    again.file.read_to_string(&mut text).unwrap();
    Ok(text)
}

#[test]
fn scoped_refuses_every_symlink_and_reads_plain_files() {
    let t = tree("scoped");
    let s = Symlinks::Refuse;
    assert_eq!(read(&t, "a.txt", s).unwrap(), "hello");
    assert_eq!(read(&t, "sub/b.txt", s).unwrap(), "bee");
    for p in ["link_in", "link_out", "link_abs", "dirlink/b.txt", "loop"] {
        assert_eq!(read(&t, p, s), Err(Refusal::SymlinkRefused), "{p}");
    }
    assert_eq!(read(&t, "fifo", s), Err(Refusal::NotARegularFile));
    assert_eq!(read(&t, "sub", s), Err(Refusal::NotARegularFile));
    assert_eq!(read(&t, "big", s), Err(Refusal::TooLarge));
    assert_eq!(read(&t, "nope", s), Err(Refusal::NotFound));
    assert_eq!(read(&t, "a.txt/x", s), Err(Refusal::NotFound));
}

#[test]
fn advisory_and_sealed_follow_only_beneath_the_root() {
    let t = tree("follow");
    let s = Symlinks::FollowBeneath;
    assert_eq!(read(&t, "link_in", s).unwrap(), "hello");
    assert_eq!(read(&t, "dirlink/b.txt", s).unwrap(), "bee");
    assert_eq!(read(&t, "link_out", s), Err(Refusal::OutsideRoot));
    assert_eq!(read(&t, "link_abs", s), Err(Refusal::OutsideRoot));
    assert_eq!(read(&t, "loop", s), Err(Refusal::NotFound));
    // `..` reaching the fd layer (it never should: path::check refuses it) is still held.
    assert_eq!(read(&t, "../outside.txt", s), Err(Refusal::OutsideRoot));
    assert_eq!(read(&t, "sub/../../outside.txt", s), Err(Refusal::OutsideRoot));
}

#[test]
fn the_root_may_be_missing_but_never_a_link_out() {
    let t = tree("root");
    let work = Dir::open(&t.work).unwrap();
    assert!(open_root(&work, "missing/", Symlinks::Refuse).unwrap().is_none());
    assert!(open_root(&work, "", Symlinks::Refuse).unwrap().is_some());
    symlink("/tmp", t.work.join("rootlink")).unwrap();
    assert_eq!(
        open_root(&work, "rootlink", Symlinks::FollowBeneath).unwrap_err(),
        Refusal::OutsideRoot
    );
    assert_eq!(
        open_root(&work, "rootlink", Symlinks::Refuse).unwrap_err(),
        Refusal::SymlinkRefused
    );
}

fn paths(entries: &[Entry]) -> Vec<&str> {
    entries.iter().map(|e| e.path.as_str()).collect()
}

#[test]
fn listings_hold_regular_files_sorted_with_one_open_each() {
    let t = tree("list");
    let scoped = list(root(&t, Symlinks::Refuse).as_fd(), Symlinks::Refuse, CAP).unwrap();
    assert_eq!(paths(&scoped), ["a.txt", "big", "sub/b.txt"]);
    let a = &scoped[0];
    assert_eq!(a.size, 5);
    assert_eq!(
        a.sha256.as_deref(),
        Some("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")
    );
    assert!(a.mtime_ms > 1_600_000_000_000);
    // Over the cap: listed with its real size, no digest.
    assert_eq!((scoped[1].size, scoped[1].sha256.clone()), (2 << 30, None));
    let follow = list(
        root(&t, Symlinks::FollowBeneath).as_fd(),
        Symlinks::FollowBeneath,
        CAP,
    )
    .unwrap();
    assert_eq!(paths(&follow), ["a.txt", "big", "link_in", "sub/b.txt"]);
    assert_eq!(follow[2].sha256, follow[0].sha256);
}

#[test]
fn an_empty_or_missing_tree_lists_nothing() {
    let t = tree("empty");
    std::fs::create_dir_all(t.work.join("void")).unwrap();
    let work = Dir::open(&t.work).unwrap();
    let r = open_root(&work, "void", Symlinks::Refuse).unwrap().unwrap();
    assert!(list(r.as_fd(), Symlinks::Refuse, CAP).unwrap().is_empty());
}

#[test]
fn absolute_links_are_followed_only_to_targets_beneath_the_root() {
    let t = tree("abs");
    let out = t.work.join("out").canonicalize().unwrap();
    symlink(out.join("a.txt"), t.work.join("out/abs_in")).unwrap();
    symlink(out.join("sub"), t.work.join("out/abs_dir")).unwrap();
    symlink(&out, t.work.join("out/abs_root")).unwrap();
    symlink(t.work.join("outside.txt"), t.work.join("out/abs_out")).unwrap();
    // A sibling whose name starts with the root's: not beneath it.
    std::fs::create_dir_all(t.work.join("outer")).unwrap();
    std::fs::write(t.work.join("outer/x"), "no").unwrap();
    symlink(t.work.join("outer/x"), t.work.join("out/abs_prefix")).unwrap();
    let f = Symlinks::FollowBeneath;
    assert_eq!(read(&t, "abs_in", f).unwrap(), "hello");
    assert_eq!(read(&t, "abs_dir/b.txt", f).unwrap(), "bee");
    assert_eq!(read(&t, "abs_root/sub/b.txt", f).unwrap(), "bee");
    assert_eq!(read(&t, "abs_out", f).unwrap_err(), Refusal::OutsideRoot);
    assert_eq!(read(&t, "abs_prefix", f).unwrap_err(), Refusal::OutsideRoot);
    assert_eq!(read(&t, "link_abs", f).unwrap_err(), Refusal::OutsideRoot);
    assert_eq!(
        read(&t, "abs_in", Symlinks::Refuse).unwrap_err(),
        Refusal::SymlinkRefused
    );
    let r = root(&t, f);
    let listed: Vec<String> = list(r.as_fd(), f, CAP)
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert!(listed.contains(&"abs_in".to_string()), "{listed:?}");
    assert!(!listed.contains(&"abs_out".to_string()));
    // A root that is an absolute link to a directory inside the workdir opens; one that
    // leaves the workdir is outside it.
    symlink(&out, t.work.join("root_abs")).unwrap();
    let work = Dir::open(&t.work).unwrap();
    assert!(open_root(&work, "root_abs", f).unwrap().is_some());
    symlink("/tmp", t.work.join("root_away")).unwrap();
    assert_eq!(
        open_root(&work, "root_away", f).unwrap_err(),
        Refusal::OutsideRoot
    );
}
