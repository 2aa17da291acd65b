use super::*;
use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn temp(label: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "murmur-fsx-{label}-{}-{}",
        std::process::id(),
        crate::token::random_hex16().unwrap()
    ));
    std::fs::create_dir_all(&p).unwrap();
    p
}

#[test]
fn names_are_checked_without_the_filesystem() {
    for bad in [
        "",
        "/etc/passwd",
        "a/../b",
        "..",
        ".",
        "a//b",
        "a/",
        "a\0b",
        "./a",
    ] {
        assert!(matches!(split(bad), Err(FsError::BadName { .. })), "{bad:?}");
    }
    let deep = vec!["d"; MAX_DEPTH + 1].join("/");
    assert!(split(&deep).is_err());
    assert!(split(&"x".repeat(MAX_PATH + 1)).is_err());
    assert_eq!(split("out/result.txt").unwrap(), vec!["out", "result.txt"]);
    assert_eq!(split("..a/b..").unwrap(), vec!["..a", "b.."]);
}

#[test]
fn a_symlinked_file_is_replaced_never_followed() {
    let root = temp("file");
    let outside = root.join("outside.txt");
    std::fs::write(&outside, "keep").unwrap();
    let work = root.join("work");
    std::fs::create_dir_all(work.join("out")).unwrap();
    symlink("../../outside.txt", work.join("out/result.txt")).unwrap();
    let d = Dir::open(&work).unwrap();
    d.replace("out/result.txt", b"error: x\n").unwrap();
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
    assert_eq!(
        std::fs::read_to_string(work.join("out/result.txt")).unwrap(),
        "error: x\n"
    );
    assert!(!std::fs::symlink_metadata(work.join("out/result.txt"))
        .unwrap()
        .file_type()
        .is_symlink());
    // append and create_new refuse the link, naming it
    symlink("../outside.txt", work.join("log")).unwrap();
    let e = d.append("log").unwrap_err();
    assert!(matches!(e, FsError::Symlink { .. }), "{e}");
    assert!(e.to_string().contains("log"), "{e}");
    let e = d.create_new("log").unwrap_err();
    assert!(matches!(e, FsError::Symlink { .. }), "{e}");
    let e = d.read("log", 100).unwrap_err();
    assert!(matches!(e, FsError::Symlink { .. }), "{e}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_symlinked_directory_is_refused() {
    let root = temp("dir");
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    symlink(&elsewhere, work.join("out")).unwrap();
    let d = Dir::open(&work).unwrap();
    let e = d.replace("out/result.txt", b"x").unwrap_err();
    assert!(matches!(e, FsError::Symlink { .. }), "{e}");
    let e = d.mkdirs("out/deeper", 0o755).unwrap_err();
    assert!(matches!(e, FsError::Symlink { .. }), "{e}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    // a file where a directory must be
    std::fs::write(work.join("tools"), "").unwrap();
    let e = d.mkdirs("tools/x", 0o755).unwrap_err();
    assert!(matches!(e, FsError::WrongType { .. }), "{e}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn reads_are_capped_and_typed() {
    let root = temp("read");
    let d = Dir::open(&root).unwrap();
    d.replace("a/b.txt", b"hello").unwrap();
    assert_eq!(d.read("a/b.txt", 5).unwrap(), b"hello");
    assert!(matches!(d.read("a/b.txt", 4), Err(FsError::TooLarge { .. })));
    assert!(matches!(d.read("a", 10), Err(FsError::WrongType { .. })));
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        root.join("fifo").as_path(),
        Mode::from_raw_mode(0o600),
    )
    .unwrap();
    assert!(matches!(d.read("fifo", 10), Err(FsError::WrongType { .. })));
    assert!(matches!(d.append("fifo"), Err(FsError::WrongType { .. })));
    d.remove_file("a/b.txt").unwrap();
    d.remove_file("a/b.txt").unwrap();
    assert!(!root.join("a/b.txt").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

/// A second thread flips `work/a` between a real directory and a symlink to `outside`
/// while the writer creates and replaces files below it: nothing may ever land outside.
#[test]
fn a_symlink_planted_between_calls_never_redirects_a_write() {
    let root = temp("race");
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let work = root.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (work, outside, stop) = (work.clone(), outside.clone(), stop.clone());
        std::thread::spawn(move || {
            let a = work.join("a");
            let parked = work.join("parked");
            while !stop.load(Ordering::Relaxed) {
                // real directory -> symlink -> real directory
                if std::fs::rename(&a, &parked).is_ok() {
                    let _ = symlink(&outside, &a);
                    std::thread::yield_now();
                    let _ = std::fs::remove_file(&a);
                    let _ = std::fs::rename(&parked, &a);
                }
                std::thread::yield_now();
            }
        })
    };
    let d = Dir::open(&work).unwrap();
    let (mut ok, mut refused) = (0, 0);
    for i in 0..3000 {
        let r = d
            .replace(&format!("a/b/f{}", i % 7), b"data")
            .and_then(|_| d.append("a/log").map(|_| ()))
            .and_then(|_| d.mkdirs("a/b/c", 0o755).map(|_| ()));
        if r.is_ok() {
            ok += 1
        } else {
            refused += 1
        }
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    let leaked: Vec<_> = std::fs::read_dir(&outside).unwrap().collect();
    assert!(
        leaked.is_empty(),
        "wrote outside: {leaked:?} ({ok} ok, {refused} refused)"
    );
    assert!(ok > 0, "the writer never got through ({refused} refused)");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn proc_path_names_the_held_directory() {
    let root = temp("proc");
    let d = Dir::open(&root).unwrap().mkdirs("x", 0o755).unwrap();
    std::fs::rename(root.join("x"), root.join("y")).unwrap();
    std::fs::write(d.proc_path().join("f"), "z").unwrap();
    assert_eq!(std::fs::read_to_string(root.join("y/f")).unwrap(), "z");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_private_dir_is_new_and_private_and_containment_is_by_inode() {
    use std::os::unix::fs::PermissionsExt;
    let root = temp("private");
    let d = private_dir(&root.join("records"), "ses_1").unwrap();
    assert_eq!(
        std::fs::metadata(root.join("records/ses_1"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );
    // planted in advance: never adopted
    assert!(private_dir(&root.join("records"), "ses_1").is_err());
    symlink(&root, root.join("records/ses_2")).unwrap();
    assert!(private_dir(&root.join("records"), "ses_2").is_err());
    assert!(private_dir(&root.join("records"), "a/b").is_err());
    let top = Dir::open(&root).unwrap();
    assert!(is_within(&d, &top).unwrap());
    assert!(is_within(&d, &d).unwrap());
    assert!(!is_within(&top, &d).unwrap());
    let other = Dir::open(&temp("elsewhere")).unwrap();
    assert!(!is_within(&d, &other).unwrap());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn rename_replaces_a_planted_symlink_and_takes_single_names_only() {
    let root = temp("rename");
    std::fs::write(root.join("outside.txt"), "keep").unwrap();
    let work = root.join("work");
    std::fs::create_dir_all(work.join("sub")).unwrap();
    symlink("../outside.txt", work.join("dest")).unwrap();
    std::fs::write(work.join("tmp"), "new").unwrap();
    let d = Dir::open(&work).unwrap();
    d.rename("tmp", "dest").unwrap();
    assert_eq!(std::fs::read_to_string(work.join("dest")).unwrap(), "new");
    assert!(!std::fs::symlink_metadata(work.join("dest"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(root.join("outside.txt")).unwrap(), "keep");
    std::fs::write(work.join("tmp2"), "x").unwrap();
    assert!(matches!(d.rename("tmp2", "sub"), Err(FsError::WrongType { .. })));
    for bad in ["a/b", "..", "", "sub/x"] {
        assert!(
            matches!(d.rename("tmp2", bad), Err(FsError::BadName { .. })),
            "{bad:?}"
        );
    }
    std::fs::remove_dir_all(&root).unwrap();
}
