//! The operator resource plane (`exports.files`) through the real `mur run` and raw HTTP on
//! 127.0.0.1: the listing and reads with their validators, every refusal code and the 405 for
//! anything but GET, no plane without the declaration, a root that appears later, max_bytes,
//! symlinks by achieved containment class, E-CAP-007, the generation counter across tasks,
//! a file replaced by rename while it is read, and the `resource_list`/`resource_read` trace.

use crate::common;

use common::door::{secs, wait_for};
use common::resources::{
    assert_listing_reads_back, assert_refused, assert_served, capsule, entry, exports, launch, mtime_ms,
    paths_of, put, replace, sha_hex, up, up_at, workdir, Launch,
};
use common::TempDir;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TEN_MI: u64 = 10 * 1024 * 1024;
/// The content of `secret.txt`, in the workdir beside (outside) the export root.
const SECRET: &[u8] = b"SECRET-CONTENT beside the export root\n";

fn leaks(body: &[u8]) -> bool {
    body.windows(14).any(|w| w == b"SECRET-CONTENT") || body.windows(7).any(|w| w == b"root:x:")
}

#[test]
fn the_listing_and_reads_describe_the_same_bytes_and_are_traced() {
    let t = TempDir::new("res-list");
    let w = workdir(&t);
    let report = b"# Report\n\nThirty-two bytes here\n".to_vec();
    put(&w.join("out/report.md"), &report);
    put(&w.join("out/a.txt"), b"alpha\n");
    put(&w.join("out/sub/deep/b.txt"), b"deep bee\n");
    put(&w.join("out/my report.txt"), b"spaced\n");
    put(&w.join("out/z-empty"), b"");
    std::fs::create_dir_all(w.join("out/emptydir")).unwrap();
    put(&w.join("secret.txt"), SECRET);
    let dir = capsule(&t, &exports("out/", "10Mi"));
    let p = up(&t, &dir, &w);

    let l = p.list();
    let mut keys: Vec<&str> = l.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    let want = [
        "containment_achieved",
        "entries",
        "generation",
        "max_bytes",
        "mode",
        "root",
    ];
    assert_eq!(keys, want, "{l}");
    assert_eq!(l["root"], "out/", "the root is echoed verbatim: {l}");
    assert_eq!(l["mode"], "read-only");
    assert_eq!(l["max_bytes"], TEN_MI);
    assert_eq!(l["generation"], 0);
    assert_eq!(l["containment_achieved"], "advisory");
    // Recursive, regular files only, sorted, root-relative, `/`-separated.
    assert_eq!(
        paths_of(&l),
        ["a.txt", "my report.txt", "report.md", "sub/deep/b.txt", "z-empty"],
        "{l}"
    );
    let mut total = 0;
    for e in l["entries"].as_array().unwrap() {
        let path = e["path"].as_str().unwrap();
        let bytes = std::fs::read(w.join("out").join(path)).unwrap();
        assert_eq!(e.as_object().unwrap().len(), 4, "{e}");
        assert_eq!(e["size_bytes"], bytes.len() as u64, "{e}");
        assert_eq!(e["sha256"], sha_hex(&bytes), "{e}");
        let m = e["mtime_ms"].as_u64().unwrap();
        assert!(m.abs_diff(mtime_ms(&w.join("out").join(path))) <= 1, "{e}");
        total += bytes.len() as u64;
    }

    // Reads: the bytes and every validator header.
    let r = p.read("report.md");
    let etag = assert_served(&r, &report, 0, "advisory", "out/", "report.md");
    let listed = entry(&l, "report.md")["sha256"].as_str().unwrap();
    assert_eq!(etag, format!("\"sha256:{listed}\""));
    assert_eq!(
        r.header("x-murmur-mtime-ms").unwrap().parse::<u64>().unwrap(),
        entry(&l, "report.md")["mtime_ms"].as_u64().unwrap()
    );
    p.served("sub/deep/b.txt", b"deep bee\n", 0);
    p.served("my%20report.txt", b"spaced\n", 0);
    p.served("z-empty", b"", 0);
    p.served("sub%2Fdeep%2Fb.txt", b"deep bee\n", 0);
    assert_listing_reads_back(&p, &l);

    // A read serves the current bytes: a rewrite shows at once, with a new etag.
    let newer = b"# Report\n\nrewritten\n".to_vec();
    replace(&w.join("out/report.md"), &newer);
    let again = p.served("report.md", &newer, 0);
    assert_ne!(again, etag);
    assert_eq!(
        entry(&p.list(), "report.md")["sha256"],
        sha_hex(&newer),
        "the listing follows the rewrite too"
    );

    // Both surfaces land in the trace.
    let e = p.event_where("resource_list", "of the first listing", |e| e["entry_count"] == 5);
    assert_eq!(e["root"], "out/", "{e}");
    assert_eq!(e["total_bytes"], total, "{e}");
    assert_eq!(e["generation"], 0, "{e}");
    assert_eq!(e["containment_achieved"], "advisory", "{e}");
    assert_eq!(e["outcome"], "ok", "{e}");
    assert!(e.get("reason").is_some_and(Value::is_null), "{e}");
    let e = p.read_event("my report.txt", "ok");
    assert_eq!(e["bytes"], 7, "{e}");
    assert_eq!(e["sha256"], sha_hex(b"spaced\n"), "{e}");
    assert_eq!(
        (&e["generation"], &e["containment_achieved"]),
        (&json!(0), &json!("advisory"))
    );
    let e = p.read_event("sub/deep/b.txt", "ok");
    assert_eq!(e["bytes"], 9, "{e}");
    assert_eq!(p.card_status(), 200, "the door still serves the card");
}

#[test]
fn paths_that_escape_or_name_nothing_are_refused_never_normalised() {
    let t = TempDir::new("res-paths");
    let w = workdir(&t);
    put(&w.join("out/a.txt"), b"alpha\n");
    put(&w.join("out/sub/deep/b.txt"), b"deep bee\n");
    put(&w.join("secret.txt"), SECRET);
    let dir = capsule(&t, &exports("out/", "10Mi"));
    let p = up(&t, &dir, &w);

    // (request path after /resources/files/, status, code, decoded path in the trace)
    let cases: &[(&str, u16, &str, Option<&str>)] = &[
        ("missing.txt", 404, "not_found", Some("missing.txt")),
        ("sub/missing.txt", 404, "not_found", Some("sub/missing.txt")),
        ("nodir/a.txt", 404, "not_found", Some("nodir/a.txt")),
        ("a.txt/more", 404, "not_found", Some("a.txt/more")),
        ("", 404, "not_found", Some("")),
        ("sub//deep/b.txt", 404, "not_found", Some("sub//deep/b.txt")),
        ("./a.txt", 404, "not_found", Some("./a.txt")),
        ("sub/./deep/b.txt", 404, "not_found", Some("sub/./deep/b.txt")),
        ("sub/deep/b.txt/", 404, "not_found", Some("sub/deep/b.txt/")),
        ("%2e/a.txt", 404, "not_found", Some("./a.txt")),
        ("a.txt%00", 404, "not_found", None),
        ("../secret.txt", 403, "outside_root", Some("../secret.txt")),
        ("..", 403, "outside_root", Some("..")),
        ("%2e%2e/secret.txt", 403, "outside_root", Some("../secret.txt")),
        ("%2E%2E%2Fsecret.txt", 403, "outside_root", Some("../secret.txt")),
        ("sub/../a.txt", 403, "outside_root", Some("sub/../a.txt")),
        ("sub/deep/../../../secret.txt", 403, "outside_root", None),
        ("%2Fetc%2Fpasswd", 403, "outside_root", Some("/etc/passwd")),
        ("/etc/passwd", 403, "outside_root", None),
    ];
    for (rel, status, code, _) in cases {
        let r = p.read(rel);
        assert_refused(&r, *status, code, rel);
        assert!(!leaks(&r.body), "{rel}");
    }
    // The files themselves are servable: the refusals are about the paths.
    assert_eq!(p.read("a.txt").status, 200);
    assert_eq!(p.read("sub/deep/b.txt").status, 200);
    for (rel, _, code, traced) in cases {
        if let Some(path) = traced {
            let e = p.read_event(path, code);
            assert_eq!(e["containment_achieved"], "advisory", "{rel}: {e}");
            assert_eq!(e["generation"], 0, "{rel}: {e}");
        }
    }
    assert_eq!(p.card_status(), 200);
}

#[test]
fn directories_fifos_and_sockets_are_not_regular_files() {
    let t = TempDir::new("res-kinds");
    let w = workdir(&t);
    put(&w.join("out/a.txt"), b"alpha\n");
    std::fs::create_dir_all(w.join("out/sub")).unwrap();
    let fifo = std::ffi::CString::new(w.join("out/pipe").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0, "mkfifo");
    let _sock = std::os::unix::net::UnixListener::bind(w.join("out/sock")).unwrap();
    let dir = capsule(&t, &exports("out/", "10Mi"));
    let p = up(&t, &dir, &w);

    assert_eq!(p.paths(), ["a.txt"], "only regular files are listed");
    for rel in ["sub", "pipe", "sock"] {
        let began = Instant::now();
        let r = p.read(rel);
        assert_refused(&r, 403, "not_a_regular_file", rel);
        assert!(began.elapsed() < secs(5), "{rel}: took {:?}", began.elapsed());
        p.read_event(rel, "not_a_regular_file");
    }
    // A read of the fifo opened nothing a writer could be waiting on, and the door is fine.
    p.served("a.txt", b"alpha\n", 0);
    assert_eq!(p.card_status(), 200);
}

#[test]
fn every_method_but_get_under_resources_is_405_and_writes_nothing() {
    let t = TempDir::new("res-405");
    let w = workdir(&t);
    put(&w.join("out/a.txt"), b"alpha\n");
    let dir = capsule(&t, &exports("out/", "10Mi"));
    let p = up(&t, &dir, &w);

    let targets = [
        "/resources/files",
        "/resources/files/a.txt",
        "/resources/files/sub/new.txt",
        "/resources/x",
    ];
    for method in ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"] {
        for target in targets {
            let what = format!("{method} {target}");
            let r = p.request(method, target, b"overwritten");
            assert_refused(&r, 405, "method_not_allowed", &what);
            assert_eq!(r.header("allow"), Some("GET"), "{what}: {r:?}");
        }
    }
    assert_eq!(std::fs::read(w.join("out/a.txt")).unwrap(), b"alpha\n");
    assert!(!w.join("out/sub").exists(), "a write path made something");
    assert_eq!(p.paths(), ["a.txt"]);
    p.served("a.txt", b"alpha\n", 0);
    assert_eq!(p.card_status(), 200);
}

#[test]
fn without_exports_files_there_is_no_resource_plane() {
    let t = TempDir::new("res-none");
    let w = workdir(&t);
    put(&w.join("out/a.txt"), b"alpha\n");
    put(&w.join("a.txt"), b"root file\n");
    let dir = capsule(&t, "");
    let p = up(&t, &dir, &w);

    for target in [
        "/resources/files",
        "/resources/files/a.txt",
        "/resources/files/out/a.txt",
        "/resources/files/missing.txt",
    ] {
        let r = p.get(target);
        assert_refused(&r, 404, "no_resource_plane", target);
        assert!(!r.body.windows(5).any(|w| w == b"alpha"), "{target}");
    }
    let e = p.event_where("resource_list", "refused", |e| {
        e["outcome"] == "no_resource_plane"
    });
    assert_eq!(e["root"], "", "an undeclared root is recorded as \"\": {e}");
    assert!(e["reason"].as_str().is_some_and(|r| !r.is_empty()), "{e}");
    p.read_event("a.txt", "no_resource_plane");
    assert_eq!(p.card_status(), 200);
}

#[test]
fn a_missing_root_lists_empty_and_serves_what_appears_later() {
    let t = TempDir::new("res-later");
    let w = workdir(&t);
    let dir = capsule(&t, &exports("later/reports/", "1Ki"));
    let p = up(&t, &dir, &w);

    let l = p.list();
    assert_eq!(l["entries"], json!([]), "{l}");
    assert_eq!(l["root"], "later/reports/");
    assert_eq!(l["max_bytes"], 1024);
    assert_refused(&p.read("x.txt"), 404, "not_found", "root missing");
    let e = p.event_where("resource_list", "of the empty root", |e| e["entry_count"] == 0);
    assert_eq!(e["total_bytes"], 0, "{e}");
    assert_eq!(e["outcome"], "ok", "{e}");
    p.read_event("x.txt", "not_found");

    put(&w.join("later/reports/x.txt"), b"arrived\n");
    assert_eq!(p.paths(), ["x.txt"]);
    let r = p.read("x.txt");
    assert_served(&r, b"arrived\n", 0, "advisory", "later/reports/", "x.txt");
    assert_eq!(p.card_status(), 200);
}

#[test]
fn a_file_over_max_bytes_is_listed_with_its_size_and_refused_on_read() {
    let t = TempDir::new("res-large");
    let w = workdir(&t);
    let out = w.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let sparse = |name: &str, len: u64| {
        let f = std::fs::File::create(out.join(name)).unwrap();
        f.set_len(len).unwrap();
    };
    sparse("huge.bin", 2 * 1024 * 1024 * 1024);
    sparse("exact.bin", TEN_MI);
    sparse("over.bin", TEN_MI + 1);
    put(&out.join("small.txt"), b"small\n");
    let dir = capsule(&t, &exports("out/", "10Mi"));
    let p = up(&t, &dir, &w);

    let l = p.list();
    assert_eq!(
        paths_of(&l),
        ["exact.bin", "huge.bin", "over.bin", "small.txt"],
        "{l}"
    );
    assert_eq!(entry(&l, "huge.bin")["size_bytes"], 2147483648u64, "{l}");
    assert_eq!(entry(&l, "over.bin")["size_bytes"], TEN_MI + 1, "{l}");
    for name in ["huge.bin", "over.bin"] {
        let sha = &entry(&l, name)["sha256"];
        assert!(
            sha.is_null() || sha.as_str().is_some_and(|s| s.len() == 64),
            "{name}: {sha}"
        );
        let began = Instant::now();
        let r = p.read(name);
        assert_refused(&r, 413, "too_large", name);
        let took = began.elapsed();
        assert!(took < secs(10), "{name}: refused only after {took:?}");
        p.read_event(name, "too_large");
    }
    let zeros = vec![0u8; TEN_MI as usize];
    assert_eq!(
        entry(&l, "exact.bin")["sha256"],
        sha_hex(&zeros),
        "exactly max_bytes is servable"
    );
    let r = p.request_within("GET", "/resources/files/exact.bin", b"", secs(60));
    assert_served(&r, &zeros, 0, "advisory", "out/", "exact.bin");
    assert_eq!(p.card_status(), 200);
}

/// Under `out/`: real.txt, sub/inner.txt and links: link.txt -> real.txt, abs-link.txt ->
/// <abs>/out/real.txt, sub/up-link.txt -> ../real.txt, dirlink -> sub, escape.txt ->
/// ../secret.txt, etc-link -> /etc/passwd, out-dir -> .. (the workdir).
fn symlink_tree(w: &Path) {
    let out = w.join("out");
    put(&out.join("real.txt"), b"the real file\n");
    put(&out.join("sub/inner.txt"), b"inner\n");
    put(&w.join("secret.txt"), SECRET);
    let link = |target: &Path, at: &str| std::os::unix::fs::symlink(target, out.join(at)).unwrap();
    link(Path::new("real.txt"), "link.txt");
    link(&w.canonicalize().unwrap().join("out/real.txt"), "abs-link.txt");
    link(Path::new("../real.txt"), "sub/up-link.txt");
    link(Path::new("sub"), "dirlink");
    link(Path::new("../secret.txt"), "escape.txt");
    link(Path::new("/etc/passwd"), "etc-link");
    link(Path::new(".."), "out-dir");
}

fn symlinks_followed_beneath_the_root(class: &str) {
    let t = TempDir::new(&format!("res-links-{class}"));
    let w = workdir(&t);
    symlink_tree(&w);
    let dir = capsule(&t, &exports("out/", "10Mi"));
    let Some(p) = up_at(&t, &dir, &w, class) else {
        return;
    };

    let l = p.list();
    assert_eq!(l["containment_achieved"], class, "{l}");
    let listed = paths_of(&l);
    for must in ["real.txt", "sub/inner.txt"] {
        assert!(listed.contains(&must), "{must} not listed: {l}");
    }
    for leaked in [
        "escape.txt",
        "etc-link",
        "out-dir/secret.txt",
        "out-dir/out/real.txt",
    ] {
        assert!(
            !listed.contains(&leaked),
            "{leaked} leads outside the root yet is listed: {l}"
        );
    }
    assert!(!l.to_string().contains(&sha_hex(SECRET)), "{l}");
    assert_listing_reads_back(&p, &l);

    let real = b"the real file\n";
    for rel in ["real.txt", "link.txt", "sub/up-link.txt"] {
        p.served(rel, real, 0);
    }
    p.served("dirlink/inner.txt", b"inner\n", 0);
    for rel in [
        "escape.txt",
        "etc-link",
        "out-dir/secret.txt",
        "dirlink/../../secret.txt",
    ] {
        let r = p.read(rel);
        assert_refused(&r, 403, "outside_root", rel);
        assert!(!leaks(&r.body), "{rel}");
    }
    let e = p.read_event("etc-link", "outside_root");
    assert_eq!(e["containment_achieved"], class, "{e}");
    let e = p.read_event("link.txt", "ok");
    assert_eq!(e["sha256"], sha_hex(real), "{e}");
    assert_eq!(p.card_status(), 200);
    // Last, as the one a beneath-only resolver gets wrong: an absolute link whose canonical
    // target is beneath the root is inside the root ("follow, then require the canonical
    // target under the export root").
    p.served("abs-link.txt", real, 0);
}

#[test]
fn symlinks_inside_the_root_are_followed_under_advisory() {
    symlinks_followed_beneath_the_root("advisory");
}

#[test]
fn symlinks_inside_the_root_are_followed_under_sealed() {
    symlinks_followed_beneath_the_root("sealed");
}

#[test]
fn every_symlink_is_refused_and_unlisted_under_scoped() {
    let t = TempDir::new("res-links-scoped");
    let w = workdir(&t);
    symlink_tree(&w);
    let dir = capsule(&t, &exports("out/", "10Mi"));
    let Some(p) = up_at(&t, &dir, &w, "scoped") else {
        return;
    };

    let l = p.list();
    assert_eq!(l["containment_achieved"], "scoped", "{l}");
    assert_eq!(
        paths_of(&l),
        ["real.txt", "sub/inner.txt"],
        "symlinked entries are omitted: {l}"
    );
    p.served("real.txt", b"the real file\n", 0);
    p.served("sub/inner.txt", b"inner\n", 0);
    for rel in [
        "link.txt",
        "abs-link.txt",
        "sub/up-link.txt",
        "dirlink/inner.txt",
        "escape.txt",
        "etc-link",
        "out-dir/secret.txt",
    ] {
        let r = p.read(rel);
        assert_refused(&r, 403, "symlink_refused", rel);
        let e = p.read_event(rel, "symlink_refused");
        assert_eq!(e["containment_achieved"], "scoped", "{e}");
    }
    assert_eq!(p.card_status(), 200);
}

#[test]
fn an_export_root_symlinked_out_of_the_workdir_refuses_the_launch() {
    let t = TempDir::new("res-root-escape");
    let w = workdir(&t);
    let elsewhere = t.path().join("elsewhere");
    put(&elsewhere.join("loot.txt"), b"not the workdir's\n");
    std::os::unix::fs::symlink(&elsewhere, w.join("exported")).unwrap();
    let dir = capsule(&t, &exports("exported/", "10Mi"));
    match launch(&t, &dir, &w, None) {
        Launch::Up(p) => {
            let r = p.get("/resources/files");
            panic!("the launch was not refused; listing: {r:?}");
        }
        Launch::Refused { code, stderr } => {
            assert_eq!(code, Some(1), "{stderr}");
            assert!(
                stderr.lines().any(|l| l.starts_with("error[E-CAP-007]")),
                "{stderr}"
            );
            assert!(stderr.contains("exports.files.root"), "{stderr}");
        }
    }
    // Before any session ran: no session has a trace.
    let records = t.path().join("records");
    for d in std::fs::read_dir(&records).into_iter().flatten() {
        let trace = d.unwrap().path().join("trace.jsonl");
        assert!(!trace.exists(), "a session ran: {}", trace.display());
    }
}

#[test]
fn generation_counts_finished_tasks_while_the_etag_follows_content() {
    let t = TempDir::new("res-generation");
    let w = workdir(&t);
    put(&w.join("out/stable.txt"), b"unchanged across tasks\n");
    let dir = capsule(&t, &exports("out/", "10Mi"));
    let p = up(&t, &dir, &w);
    let stable = b"unchanged across tasks\n";
    let mtime = mtime_ms(&w.join("out/stable.txt"));

    assert_eq!(p.list()["generation"], 0);
    let etag = p.served("stable.txt", stable, 0);

    // Answered in the middle of a task, without waiting for it, still generation 0.
    let id = p.submit("sleep 3");
    p.wait_state(&id, "working", secs(10));
    let began = Instant::now();
    p.served("stable.txt", stable, 0);
    assert_eq!(p.list()["generation"], 0);
    assert!(
        began.elapsed() < secs(2),
        "a read waited for the task: {:?}",
        began.elapsed()
    );
    p.wait_state(&id, "completed", secs(15));

    let generation_reaches = |n: u64| {
        wait_for(secs(5), &format!("generation {n}"), || {
            let l = p.list();
            (l["generation"] == n).then_some(l)
        })
    };
    let l = generation_reaches(1);
    let r = p.read("stable.txt");
    let after = assert_served(&r, stable, 1, "advisory", "out/", "after one task");
    assert_eq!(after, etag, "an unchanged file keeps its etag across a task");
    let header_mtime: u64 = r.header("x-murmur-mtime-ms").unwrap().parse().unwrap();
    assert!(header_mtime.abs_diff(mtime) <= 1, "{header_mtime} vs {mtime}");
    assert_eq!(entry(&l, "stable.txt")["sha256"], sha_hex(stable));
    // The task's own answer is in the root now.
    p.served("result.txt", b"done: sleep 3\n", 1);

    let task = p.run_task("second");
    assert_eq!(task["status"]["state"], "completed", "{task}");
    generation_reaches(2);
    p.served("result.txt", b"done: second\n", 2);
    assert_eq!(p.served("stable.txt", stable, 2), etag);

    let gens: Vec<u64> = p
        .events("resource_read")
        .iter()
        .filter(|e| e["path"] == "stable.txt" && e["outcome"] == "ok")
        .map(|e| e["generation"].as_u64().unwrap())
        .collect();
    assert_eq!(gens, [0, 0, 1, 2], "the reads of stable.txt as traced");
    assert_eq!(p.card_status(), 200);
}

#[test]
fn a_file_replaced_by_rename_mid_read_is_served_whole() {
    const SIZE: usize = 16 * 1024 * 1024;
    let t = TempDir::new("res-rename");
    let w = workdir(&t);
    let target = w.join("out/big.bin");
    let (a, b) = (vec![b'A'; SIZE], vec![b'B'; SIZE]);
    let shas = [(b'A', sha_hex(&a)), (b'B', sha_hex(&b))];
    put(&target, &a);
    let dir = capsule(&t, &exports("out/", "128Mi"));
    let p = up(&t, &dir, &w);

    let stop = Arc::new(AtomicBool::new(false));
    let renames = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (stop, renames, target) = (stop.clone(), renames.clone(), target.clone());
        let tmp = w.join("big.bin.tmp");
        std::thread::spawn(move || {
            // Bounded, so a failed assertion below cannot leave it writing for ever.
            let (began, mut i) = (Instant::now(), 0usize);
            while !stop.load(Ordering::SeqCst) && began.elapsed() < secs(300) {
                std::fs::write(&tmp, if i % 2 == 0 { &b } else { &a }).unwrap();
                std::fs::rename(&tmp, &target).unwrap();
                renames.fetch_add(1, Ordering::SeqCst);
                i += 1;
                // A rename every ~0.2 s: many per read, without flooding the page cache.
                std::thread::sleep(Duration::from_millis(150));
            }
        })
    };
    wait_for(secs(30), "the writer's first rename", || {
        (renames.load(Ordering::SeqCst) > 0).then_some(())
    });
    let before = renames.load(Ordering::SeqCst);
    let mut seen = [0usize; 2];
    for n in 0..20 {
        let r = p.request_within("GET", "/resources/files/big.bin", b"", Duration::from_secs(120));
        assert_eq!(r.status, 200, "read {n}: {r:?}");
        assert_eq!(r.body.len(), SIZE, "read {n}: a short body");
        assert_eq!(
            r.header("content-length"),
            Some(SIZE.to_string().as_str()),
            "read {n}"
        );
        let fill = r.body[0];
        let which = shas
            .iter()
            .position(|(f, _)| *f == fill)
            .unwrap_or_else(|| panic!("read {n}: unknown first byte {fill}"));
        let torn = r.body.iter().position(|&x| x != fill);
        assert_eq!(
            torn, None,
            "read {n}: a body mixing both versions (from byte {torn:?})"
        );
        // The whole body is one version, so its sha256 is that version's.
        assert_eq!(
            r.header("etag"),
            Some(format!("\"sha256:{}\"", shas[which].1).as_str()),
            "read {n}: the etag does not describe the body sent"
        );
        assert!(r.header("x-murmur-mtime-ms").is_some(), "read {n}");
        seen[which] += 1;
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    let during = renames.load(Ordering::SeqCst) - before;
    eprintln!(
        "20 reads: {} of A, {} of B, {during} renames meanwhile",
        seen[0], seen[1]
    );
    assert!(
        during >= 2,
        "the file was not being replaced while it was read ({during} renames)"
    );
    wait_for(secs(5), "20 ok resource_read events", || {
        let n = p
            .events("resource_read")
            .iter()
            .filter(|e| e["outcome"] == "ok")
            .count();
        (n == 20).then_some(())
    });
    assert_eq!(p.card_status(), 200);
}
