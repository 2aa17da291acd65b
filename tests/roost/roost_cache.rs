//! The roost's parsed-artifact cache: a republished archive is resolved from its new bytes on
//! the very next request, a cache fed more distinct artifacts than it may hold stays within
//! its bounds, an archive beyond the per-request bound is refused on its size, one rewritten
//! in place (size and modification time kept) is hashed again, and an unchanged archive is
//! read and hashed once, not per request.

use crate::common;

use common::roost::{error, json, publish, publish_files, Daemon};
use common::TempDir;
use murmur::manifest::Resolve;
use murmur::registry::{self, archive, ParsedCache};
use murmur::roost::{CACHE_BYTES, CACHE_ENTRIES, MAX_RESOLVE_BYTES};

const V: &str = "0.1.0";

fn ses(n: u32) -> String {
    format!("ses_{n:032x}")
}

/// Unix milliseconds now, plus `later_ms`: a resolve made that much later, when the files
/// written just now have settled.
fn now_ms(later_ms: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    now.as_millis() as u64 + later_ms
}

/// Resolve `w` through `cache` as if `later_ms` from now.
fn resolve_w(
    reg: &std::path::Path,
    cache: &mut ParsedCache<String>,
    later_ms: u64,
) -> Result<registry::CachedResolve<String>, murmur::diag::Diagnostic> {
    registry::resolve_cached(
        reg,
        "w",
        V,
        Resolve::Nothing,
        cache,
        MAX_RESOLVE_BYTES,
        now_ms(later_ms),
        |l| l.manifest.name,
    )
}

fn sha_of(body: &str) -> String {
    json(body)["sha256"].as_str().unwrap().to_string()
}

#[test]
fn a_republished_archive_is_resolved_from_its_new_bytes_on_the_next_request() {
    let tmp = TempDir::new("roost-cache-republish");
    let reg = tmp.path();
    publish(reg, "orch", V, "capabilities:\n  spawn: {allow: [worker]}\n");
    let first = publish(reg, "worker", V, "");
    let d = Daemon::start(reg, &["--spawn-allow", "orch", "--max-concurrent", "16"], &[]);
    let parent = d.credential(&ses(1), "orch", V, None);
    let (s, b) = d.spawn(&parent, "worker", V);
    assert_eq!((s, sha_of(&b)), (200, first.clone()));
    // Warm: the same bytes again answer the same hash.
    assert_eq!(sha_of(&d.spawn(&parent, "worker", V).1), first);

    // Republished through the registry (a new directory), with different grants.
    std::fs::remove_dir_all(reg.join("worker").join(V)).unwrap();
    publish(
        reg,
        "worker",
        V,
        "capabilities:\n  network: {allow: ['https://api.example.com']}\n",
    );
    let (s, b) = d.spawn(&parent, "worker", V);
    assert_eq!(s, 403, "the new manifest must be the one judged: {b}");
    assert!(
        error(&b).starts_with("capabilities.network.allow: the child declares 'https://api.example.com:443'"),
        "{b}"
    );

    // Rewritten in place (same paths, same inode, same second): the next request sees it.
    let bytes = archive::write(&[
        (
            "murmur.yaml".to_string(),
            format!("name: worker\nversion: {V}\ninference: {{transport: process}}\n").into_bytes(),
        ),
        ("notes.md".to_string(), b"third bytes".to_vec()),
    ])
    .unwrap();
    let third = registry::sha256_hex(&bytes);
    let dir = reg.join("worker").join(V);
    std::fs::write(dir.join(format!("worker-{V}.mur.zip")), &bytes).unwrap();
    std::fs::write(dir.join(format!("worker-{V}.sha256")), &third).unwrap();
    let (s, b) = d.spawn(&parent, "worker", V);
    assert_eq!((s, sha_of(&b)), (200, third.clone()));
    assert_ne!(third, first);

    // And back to the first bytes: a hit on an older entry is still those bytes' parse.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(publish(reg, "worker", V, ""), first);
    assert_eq!(sha_of(&d.spawn(&parent, "worker", V).1), first);

    // An approval granted for one set of bytes is refused once the bytes change.
    let a = d.approval(&parent, "worker", V);
    std::fs::remove_dir_all(&dir).unwrap();
    let changed = publish_files(reg, "worker", V, "", &[("notes.md", b"changed")]);
    let (s, b) = d.register(&ses(2), "worker", V, Some(&a));
    assert_eq!(
        (s, error(&b)),
        (403, format!("'worker@0.1.0' now resolves to a different artifact than the one this spawn approval was granted for (approved sha256 {first}, resolved sha256 {changed})"))
    );
}

#[test]
fn a_cache_fed_more_distinct_artifacts_than_it_may_hold_stays_within_its_bounds() {
    let tmp = TempDir::new("roost-cache-bound");
    let reg = tmp.path();
    let count = CACHE_ENTRIES + 40;
    let shas: Vec<String> = (0..count)
        .map(|i| publish(reg, &format!("w{i}"), V, ""))
        .collect();
    // The roost's own bounds.
    let mut cache: ParsedCache<String> = ParsedCache::new(CACHE_ENTRIES, CACHE_BYTES);
    for round in 0..2 {
        for (i, sha) in shas.iter().enumerate() {
            let r = registry::resolve_cached(
                reg,
                &format!("w{i}"),
                V,
                Resolve::Nothing,
                &mut cache,
                MAX_RESOLVE_BYTES,
                now_ms(0),
                |l| l.manifest.name,
            )
            .unwrap();
            assert_eq!(
                (&r.sha256, r.artifact.value.as_str()),
                (sha, format!("w{i}").as_str())
            );
            assert!(
                cache.len() <= CACHE_ENTRIES,
                "round {round}: {} entries",
                cache.len()
            );
            assert!(cache.bytes() <= CACHE_BYTES);
        }
    }
    assert_eq!(cache.len(), CACHE_ENTRIES);
    // A byte bound tighter than the entry bound is the one that holds.
    let mut small: ParsedCache<()> = ParsedCache::new(1000, 10 * 8192);
    for i in 0..count {
        registry::resolve_cached(
            reg,
            &format!("w{i}"),
            V,
            Resolve::Nothing,
            &mut small,
            MAX_RESOLVE_BYTES,
            now_ms(0),
            |_| (),
        )
        .unwrap();
        assert!(small.bytes() <= 10 * 8192 && small.len() <= 20);
    }
    assert!(small.len() >= 10, "{}", small.len());
}

#[test]
fn an_archive_beyond_the_per_request_bound_is_refused_on_its_size() {
    let tmp = TempDir::new("roost-cache-large");
    let reg = tmp.path();
    publish(reg, "big", V, "");
    let archive = reg.join("big").join(V).join(format!("big-{V}.mur.zip"));
    let f = std::fs::OpenOptions::new().write(true).open(&archive).unwrap();
    f.set_len(MAX_RESOLVE_BYTES + 1).unwrap();
    let d = Daemon::start(reg, &["--spawn-allow", "big"], &[]);
    let (s, b) = d.register(&ses(1), "big", V, None);
    assert_eq!(
        (s, error(&b)),
        (
            500,
            "capsule 'big@0.1.0' could not be resolved from the registry: the archive is larger than the 64 MiB this daemon reads per request".to_string()
        )
    );
    assert_eq!(d.call("GET", "/health", &[], ""), (200, "{}".into()));
}

#[test]
fn a_fifo_in_place_of_an_archive_is_refused_without_hanging_the_loop() {
    let tmp = TempDir::new("roost-cache-fifo");
    let reg = tmp.path();
    publish(reg, "pipe", V, "");
    let archive = reg.join("pipe").join(V).join(format!("pipe-{V}.mur.zip"));
    std::fs::remove_file(&archive).unwrap();
    let c = std::ffi::CString::new(archive.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let d = Daemon::start(reg, &["--spawn-allow", "pipe"], &[]);
    let (s, b) = d.register(&ses(1), "pipe", V, None);
    assert_eq!(
        (s, error(&b)),
        (
            500,
            "capsule 'pipe@0.1.0' could not be resolved from the registry: the registry could not be read"
                .to_string()
        )
    );
    assert_eq!(d.call("GET", "/health", &[], ""), (200, "{}".into()));
}

#[test]
fn a_fifo_in_place_of_a_sidecar_is_refused_without_hanging_the_loop() {
    let tmp = TempDir::new("roost-cache-fifo-sidecar");
    let reg = tmp.path();
    publish(reg, "pipe", V, "");
    let sidecar = reg.join("pipe").join(V).join(format!("pipe-{V}.sha256"));
    std::fs::remove_file(&sidecar).unwrap();
    let c = std::ffi::CString::new(sidecar.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let d = Daemon::start(reg, &["--spawn-allow", "pipe"], &[]);
    let (s, b) = d.register(&ses(1), "pipe", V, None);
    assert_eq!(
        (s, error(&b)),
        (
            500,
            "capsule 'pipe@0.1.0' could not be resolved from the registry: the archive failed its integrity check"
                .to_string()
        )
    );
    assert_eq!(d.call("GET", "/health", &[], ""), (200, "{}".into()));
}

#[test]
fn an_archive_rewritten_in_place_with_its_old_size_and_mtime_is_hashed_again() {
    let tmp = TempDir::new("roost-cache-inplace");
    let reg = tmp.path();
    let sha = publish(reg, "w", V, "");
    let archive = reg.join("w").join(V).join(format!("w-{V}.mur.zip"));
    let mut cache: ParsedCache<String> = ParsedCache::new(CACHE_ENTRIES, CACHE_BYTES);
    // Resolved as if the files had settled, so the archive's identity is remembered.
    let resolve = |cache: &mut ParsedCache<String>| resolve_w(reg, cache, 60_000);
    assert_eq!(resolve(&mut cache).unwrap().sha256, sha);
    assert_eq!(resolve(&mut cache).unwrap().sha256, sha);
    assert_eq!(
        (cache.reads(), cache.held()),
        (1, 1),
        "the unchanged archive is read once"
    );

    // Other bytes of the same size, the modification time put back: the next resolve
    // hashes what is on disk (the ctime, which no one can set back, changed).
    let before = std::fs::metadata(&archive).unwrap();
    let mut bytes = std::fs::read(&archive).unwrap();
    let at = bytes.len() - 1;
    bytes[at] ^= 0xff;
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&archive, &bytes).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&archive)
        .unwrap()
        .set_modified(before.modified().unwrap())
        .unwrap();
    let after = std::fs::metadata(&archive).unwrap();
    assert_eq!(
        (after.len(), after.modified().unwrap()),
        (before.len(), before.modified().unwrap())
    );
    let d = resolve(&mut cache)
        .err()
        .expect("the rewritten archive no longer matches its sidecar");
    assert_eq!(d.code, "E-REG-002");
    assert!(
        d.message.contains(&murmur::registry::sha256_hex(&bytes)),
        "{}",
        d.message
    );
    assert_eq!(cache.reads(), 2);
}

#[test]
fn an_unchanged_archive_is_read_once_and_any_change_to_it_or_its_sidecar_is_read_again() {
    let tmp = TempDir::new("roost-cache-identity");
    let reg = tmp.path();
    let first = publish(reg, "w", V, "");
    let dir = reg.join("w").join(V);
    let mut cache: ParsedCache<String> = ParsedCache::new(CACHE_ENTRIES, CACHE_BYTES);
    let resolve = |cache: &mut ParsedCache<String>, later_ms: u64| resolve_w(reg, cache, later_ms);

    // Files changed moments before the resolve began are read every time.
    assert_eq!(resolve(&mut cache, 0).unwrap().sha256, first);
    assert_eq!(resolve(&mut cache, 0).unwrap().sha256, first);
    assert_eq!((cache.reads(), cache.held()), (2, 0));

    // Settled: read once more, then answered from what was read.
    for _ in 0..5 {
        assert_eq!(resolve(&mut cache, 60_000).unwrap().sha256, first);
    }
    assert_eq!((cache.reads(), cache.held()), (3, 1));

    // The sidecar rewritten with the same text is a change: read again, still agrees.
    std::fs::write(dir.join(format!("w-{V}.sha256")), &first).unwrap();
    assert_eq!(resolve(&mut cache, 60_000).unwrap().sha256, first);
    assert_eq!(cache.reads(), 4);
    // The sidecar made to disagree (same length) is seen at once.
    let wrong = format!(
        "{}{}",
        if first.starts_with('0') { '1' } else { '0' },
        &first[1..]
    );
    std::fs::write(dir.join(format!("w-{V}.sha256")), &wrong).unwrap();
    assert_eq!(resolve(&mut cache, 60_000).err().unwrap().code, "E-REG-002");
    assert_eq!(cache.held(), 0, "a failed read is not remembered");

    // Republished through a new file at the same path (another inode): its bytes are read.
    std::fs::remove_dir_all(&dir).unwrap();
    let second = publish_files(reg, "w", V, "", &[("notes.md", b"second")]);
    assert_ne!(second, first);
    assert_eq!(resolve(&mut cache, 60_000).unwrap().sha256, second);
    assert_eq!(resolve(&mut cache, 60_000).unwrap().sha256, second);
    assert_eq!((cache.reads(), cache.held()), (6, 1));

    // Removed: not installed, and its descriptor is let go.
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(resolve(&mut cache, 60_000).err().unwrap().code, "E-RUN-008");
    assert_eq!(cache.held(), 0);
}

/// Bytes `pid` has read through `read` and its kin so far (`rchar` of `/proc/<pid>/io`).
fn read_bytes(pid: u32) -> u64 {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[test]
fn the_confined_daemon_reads_a_settled_archive_once_not_per_request() {
    let tmp = TempDir::new("roost-cache-daemon");
    let reg = tmp.path();
    // A MiB that does not compress: the archive is at least that.
    let payload = common::incompressible(1 << 20, 0x9e37_79b9_7f4a_7c15);
    publish_files(reg, "w", V, "", &[("payload.bin", &payload)]);
    let size = std::fs::metadata(reg.join("w").join(V).join(format!("w-{V}.mur.zip")))
        .unwrap()
        .len();
    // Older than the settling time, so its identity may be remembered.
    std::thread::sleep(std::time::Duration::from_millis(registry::cache::SETTLE_MS + 200));
    let d = Daemon::start(reg, &["--spawn-allow", "w"], &[]);
    let pid = d.run.child.id();
    let before = read_bytes(pid);
    assert_eq!(d.register(&ses(1), "w", V, None).0, 200);
    let first = read_bytes(pid) - before;
    assert!(
        first >= size,
        "the first resolve read {first} bytes of a {size}-byte archive"
    );
    let before = read_bytes(pid);
    for n in 2..=6 {
        assert_eq!(d.register(&ses(n), "w", V, None).0, 200);
    }
    let later = read_bytes(pid) - before;
    assert!(
        later < size,
        "five more resolves read {later} bytes: the {size}-byte archive again (under the daemon's seccomp filter and landlock)"
    );
}
