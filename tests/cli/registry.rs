//! The registry and the archive through the real binaries: build, publish, resolve with the
//! hash `sha256sum` prints, tampering, overwrites, and hostile archives.

use crate::common;

use common::TempDir;
use murmur::manifest::Resolve;
use murmur::registry::{self, archive};
use std::path::Path;
use std::process::Command;

const MUR: &str = env!("CARGO_BIN_EXE_mur");

fn mur(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(MUR).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn capsule_dir(root: &Path) -> std::path::PathBuf {
    let dir = root.join("cap");
    std::fs::create_dir_all(dir.join("prompts")).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        "name: worker-a\nversion: 0.1.0\nrequires_files: [prompts/system.md]\ncapabilities:\n  network: {allow: [api.example.com]}\n",
    )
    .unwrap();
    std::fs::write(dir.join("prompts/system.md"), "be brief\n").unwrap();
    std::fs::write(dir.join("capsule.wasm"), b"\0asm\x01\0\0\0").unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn build_publish_resolve_with_the_sha256sum_hash() {
    let tmp = TempDir::new("registry-roundtrip");
    let dir = capsule_dir(tmp.path());
    let zip = tmp.path().join("worker-a-0.1.0.mur.zip");
    let reg = tmp.path().join("reg");
    let (code, out, err) = mur(&["build", s(&dir), "-o", s(&zip), "--json"]);
    assert_eq!(code, 0, "{err}");
    let built: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        built["entries"],
        serde_json::json!([
            "murmur.yaml",
            "prompts/system.md",
            "capsule.wasm",
            "murmur-build.json"
        ])
    );

    let (code, _, err) = mur(&["publish", s(&zip), "--registry-path", s(&reg), "--scope", "local"]);
    assert_eq!(code, 0, "{err}");
    let sum = Command::new("sha256sum").arg(&zip).output().unwrap();
    let sum = String::from_utf8(sum.stdout).unwrap();
    let expected = sum.split_whitespace().next().unwrap();

    let resolved = registry::resolve(&reg, "local/worker-a", "0.1.0", Resolve::Nothing).unwrap();
    assert_eq!(resolved.sha256, expected);
    assert_eq!(resolved.bytes, std::fs::read(&zip).unwrap());
    assert_eq!(resolved.loaded.manifest.name, "worker-a");
    let base = reg.join("local/worker-a/0.1.0");
    assert_eq!(
        std::fs::read_to_string(base.join("worker-a-0.1.0.sha256")).unwrap(),
        expected
    );
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("worker-a-0.1.0.meta.json")).unwrap())
            .unwrap();
    assert_eq!(meta["meta"]["name"], "local/worker-a");
    assert_eq!(meta["meta"]["runtime"], "wasm");
    assert_eq!(meta["meta"]["artifact_runtime"], "capsule");

    let (code, out, _) = mur(&[
        "inspect",
        "local/worker-a@0.1.0",
        "--registry-path",
        s(&reg),
        "--json",
    ]);
    assert_eq!(code, 0);
    let inspected: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(inspected["sha256"], expected);
    assert_eq!(
        inspected["capabilities"]["network_allow"],
        serde_json::json!(["api.example.com"])
    );

    // The bare layout resolves too, and a missing version is E-RUN-008.
    let (code, _, err) = mur(&["publish", s(&zip), "--registry-path", s(&reg)]);
    assert_eq!(code, 0, "{err}");
    assert!(reg.join("worker-a/0.1.0/worker-a-0.1.0.mur.zip").is_file());
    let missing = registry::resolve(&reg, "worker-a", "9.9.9", Resolve::Nothing)
        .err()
        .unwrap();
    assert_eq!(missing.code, "E-RUN-008");
    let reserved = registry::resolve(&reg, "worker-a", "Latest", Resolve::Nothing)
        .err()
        .unwrap();
    assert_eq!(reserved.code, "E-RUN-008");
}

#[test]
fn tampering_after_publish_is_an_integrity_error() {
    let tmp = TempDir::new("registry-tamper");
    let dir = capsule_dir(tmp.path());
    let zip = tmp.path().join("w.mur.zip");
    let reg = tmp.path().join("reg");
    assert_eq!(mur(&["build", s(&dir), "-o", s(&zip)]).0, 0);
    assert_eq!(mur(&["publish", s(&zip), "--registry-path", s(&reg)]).0, 0);
    let filed = reg.join("worker-a/0.1.0/worker-a-0.1.0.mur.zip");
    let mut bytes = std::fs::read(&filed).unwrap();
    let last = bytes.len() - 30;
    bytes[last] ^= 0x55;
    std::fs::write(&filed, &bytes).unwrap();
    let d = registry::resolve(&reg, "worker-a", "0.1.0", Resolve::Nothing)
        .err()
        .unwrap();
    assert_eq!(d.code, "E-REG-002");
    let (code, _, err) = mur(&["inspect", "worker-a@0.1.0", "--registry-path", s(&reg)]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-REG-002]: integrity check failed for worker-a@0.1.0"),
        "{err}"
    );
    // A matching sidecar does not make a foreign manifest acceptable under another name.
    let other = reg.join("worker-b/0.1.0");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(&zip, other.join("worker-b-0.1.0.mur.zip")).unwrap();
    std::fs::write(
        other.join("worker-b-0.1.0.sha256"),
        registry::sha256_hex(&std::fs::read(&zip).unwrap()),
    )
    .unwrap();
    let d = registry::resolve(&reg, "worker-b", "0.1.0", Resolve::Nothing)
        .err()
        .unwrap();
    assert_eq!(d.code, "E-REG-002");
    assert!(d.message.contains("named 'worker-a'"), "{}", d.message);
}

#[test]
fn publish_never_overwrites_and_refuses_reserved_versions() {
    let tmp = TempDir::new("registry-overwrite");
    let dir = capsule_dir(tmp.path());
    let zip = tmp.path().join("w.mur.zip");
    let reg = tmp.path().join("reg");
    assert_eq!(mur(&["build", s(&dir), "-o", s(&zip)]).0, 0);
    assert_eq!(mur(&["publish", s(&zip), "--registry-path", s(&reg)]).0, 0);
    let original = std::fs::read(reg.join("worker-a/0.1.0/worker-a-0.1.0.mur.zip")).unwrap();
    std::fs::write(dir.join("prompts/system.md"), "changed\n").unwrap();
    assert_eq!(mur(&["build", s(&dir), "-o", s(&zip)]).0, 0);
    let (code, _, err) = mur(&["publish", s(&zip), "--registry-path", s(&reg)]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-REG-003]: worker-a@0.1.0 is already published"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(reg.join("worker-a/0.1.0/worker-a-0.1.0.mur.zip")).unwrap(),
        original
    );
    let entries: Vec<_> = std::fs::read_dir(reg.join("worker-a"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["0.1.0"], "no staging directory is left behind");

    let reserved = archive::write(&[("murmur.yaml".into(), b"name: w\nversion: stable\n".to_vec())]).unwrap();
    let path = tmp.path().join("reserved.mur.zip");
    std::fs::write(&path, reserved).unwrap();
    let (code, _, err) = mur(&["publish", s(&path), "--registry-path", s(&reg)]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-REG-004]: version 'stable' is reserved"),
        "{err}"
    );
}

/// Byte offsets of every zip header with `sig` in `bytes`.
fn headers(bytes: &[u8], sig: u32) -> Vec<usize> {
    let sig = sig.to_le_bytes();
    (0..bytes.len().saturating_sub(4))
        .filter(|&i| bytes[i..i + 4] == sig)
        .collect()
}

/// Set the declared (uncompressed) size of every entry.
fn declare_size(bytes: &mut [u8], size: u32) {
    for at in headers(bytes, 0x0403_4b50) {
        bytes[at + 22..at + 26].copy_from_slice(&size.to_le_bytes());
    }
    for at in headers(bytes, 0x0201_4b50) {
        bytes[at + 24..at + 28].copy_from_slice(&size.to_le_bytes());
    }
}

fn replace_all(bytes: &mut [u8], from: &[u8], to: &[u8]) {
    assert_eq!(from.len(), to.len());
    for i in 0..bytes.len() - from.len() {
        if &bytes[i..i + from.len()] == from {
            bytes[i..i + from.len()].copy_from_slice(to);
        }
    }
}

fn publish_refusal(tmp: &TempDir, label: &str, bytes: &[u8]) -> String {
    let path = tmp.path().join(format!("{label}.mur.zip"));
    std::fs::write(&path, bytes).unwrap();
    let reg = tmp.path().join("reg");
    let (code, _, err) = mur(&["publish", s(&path), "--registry-path", s(&reg)]);
    assert_eq!(code, 1, "{label} was accepted");
    assert!(!reg.join("w").exists(), "{label} left files in the registry");
    err
}

#[test]
fn hostile_archives_are_refused_with_clear_errors() {
    let tmp = TempDir::new("registry-hostile");
    let manifest = b"name: w\nversion: 1.0.0\n".to_vec();

    // Huge declared inflation in a tiny archive.
    let mut declared = archive::write(&[("murmur.yaml".into(), manifest.clone())]).unwrap();
    declare_size(&mut declared, 600 << 20);
    let err = publish_refusal(&tmp, "declared", &declared);
    assert!(
        err.contains("archive too large when inflated: entry 'murmur.yaml' declares 629145600 bytes"),
        "{err}"
    );

    // Actual inflation far beyond what the entry declares: 32 MiB of zeros claiming 1 KiB.
    let mut zeros = manifest.clone();
    zeros.resize(32 << 20, b'\n');
    let mut actual = archive::write(&[("murmur.yaml".into(), zeros)]).unwrap();
    assert!(actual.len() < 200_000, "the bomb is tiny: {} bytes", actual.len());
    declare_size(&mut actual, 1024);
    let err = publish_refusal(&tmp, "actual", &actual);
    assert!(err.contains("inflates beyond its declared 1024 bytes"), "{err}");

    // A manifest bomb under the archive cap: 64 MiB of comment lines inflate from a few
    // hundred KiB. Refused on the declared size, before inflating, with its own message.
    let mut comments = manifest.clone();
    comments.resize(64 << 20, b'#');
    let bomb = archive::write(&[("murmur.yaml".into(), comments)]).unwrap();
    assert!(bomb.len() < 1 << 20, "the bomb is small: {} bytes", bomb.len());
    let err = publish_refusal(&tmp, "manifest-bomb", &bomb);
    assert!(
        err.contains(
            "the packed manifest declares 67108864 bytes, more than the 1048576 a manifest may have"
        ),
        "{err}"
    );

    // A bomb in an entry publish would otherwise never read.
    let mut hidden = archive::write(&[
        ("murmur.yaml".into(), manifest.clone()),
        ("big.bin".into(), vec![0; 8 << 20]),
    ])
    .unwrap();
    for at in headers(&hidden, 0x0201_4b50).into_iter().skip(1) {
        hidden[at + 24..at + 28].copy_from_slice(&16u32.to_le_bytes());
    }
    for at in headers(&hidden, 0x0403_4b50).into_iter().skip(1) {
        hidden[at + 22..at + 26].copy_from_slice(&16u32.to_le_bytes());
    }
    let err = publish_refusal(&tmp, "hidden", &hidden);
    assert!(err.contains("entry 'big.bin' inflates beyond"), "{err}");

    // Path traversal names, written with a same-length placeholder and patched.
    for (placeholder, evil) in [
        (&b"xx/etc"[..], &b"../etc"[..]),
        (b"xetc/p", b"/etc/p"),
        (b"a_b", b"a\\b"),
    ] {
        let mut bytes = archive::write(&[
            ("murmur.yaml".into(), manifest.clone()),
            (String::from_utf8(placeholder.to_vec()).unwrap(), b"x".to_vec()),
        ])
        .unwrap();
        replace_all(&mut bytes, placeholder, evil);
        let err = publish_refusal(&tmp, "traversal", &bytes);
        assert!(err.contains("is not a safe relative path"), "{err}");
    }

    // Duplicate names.
    let mut dup = archive::write(&[
        ("murmur.yaml".into(), manifest.clone()),
        ("one.txt".into(), b"1".to_vec()),
        ("two.txt".into(), b"2".to_vec()),
    ])
    .unwrap();
    replace_all(&mut dup, b"two.txt", b"one.txt");
    let err = publish_refusal(&tmp, "dup", &dup);
    assert!(err.contains("archive entry 'one.txt' appears twice"), "{err}");

    // Not a zip at all, and a zip whose first entry is not the manifest.
    let err = publish_refusal(&tmp, "garbage", b"this is not a zip archive at all");
    assert!(err.contains("not a valid .mur.zip"), "{err}");
    let wrong_order =
        archive::write(&[("a.txt".into(), b"a".to_vec()), ("murmur.yaml".into(), manifest)]).unwrap();
    let err = publish_refusal(&tmp, "order", &wrong_order);
    assert!(err.contains("does not start with murmur.yaml"), "{err}");
}

#[test]
fn build_refuses_bad_requires_files_and_payloads() {
    let tmp = TempDir::new("build-files");
    let dir = tmp.path().join("cap");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("capsule.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let out = tmp.path().join("o.mur.zip");
    let cases: [(&str, &str); 5] = [
        ("requires_files: [../secret]", "error[E-BLD-002]"),
        ("requires_files: [/etc/passwd]", "error[E-BLD-002]"),
        ("requires_files: [link.md]", "error[E-BLD-002]"),
        ("requires_files: [missing.md]", "error[E-IO-003]"),
        ("requires_files: [murmur-build.json]", "error[E-BLD-002]"),
    ];
    std::os::unix::fs::symlink("/etc/hostname", dir.join("link.md")).unwrap();
    for (extra, expected) in cases {
        std::fs::write(
            dir.join("murmur.yaml"),
            format!("name: w\nversion: 1.0.0\n{extra}\n"),
        )
        .unwrap();
        let (code, _, err) = mur(&["build", s(&dir), "-o", s(&out)]);
        assert_eq!(code, 1, "{extra}");
        assert!(err.starts_with(expected), "{extra}: {err}");
    }
    std::fs::write(dir.join("murmur.yaml"), "name: w\nversion: 1.0.0\n").unwrap();
    std::fs::write(dir.join("other.wasm"), b"\0asm\x01\0\0\0").unwrap();
    std::fs::remove_file(dir.join("capsule.wasm")).unwrap();
    let (code, _, err) = mur(&["build", s(&dir), "-o", s(&out)]);
    assert_eq!(code, 0, "one root .wasm is the payload: {err}");
    std::fs::write(dir.join("third.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let (code, _, err) = mur(&["build", s(&dir), "-o", s(&out)]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-BLD-003]: multiple root .wasm files found: other.wasm, third.wasm"),
        "{err}"
    );
    // An agent capsule is manifest-only.
    let agent = tmp.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(
        agent.join("murmur.yaml"),
        "name: a\nversion: 1.0.0\ninference: {transport: process}\n",
    )
    .unwrap();
    let (code, out_json, err) = mur(&["build", s(&agent), "-o", s(&out), "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out_json).unwrap();
    assert_eq!(
        v["entries"],
        serde_json::json!(["murmur.yaml", "murmur-build.json"])
    );
    let (code, _, err) = mur(&["build", s(&agent), "-o", "x.zip"]);
    assert_eq!(code, 2, "{err}");
}

/// `mur build` names every file of the capsule directory it leaves out of the archive
/// (W-BLD-002), never what is not a capsule's (hidden entries, sessions' `workdir/`, locks,
/// archives); listed in `requires_files`, a file is packed and the warning goes.
#[test]
fn build_names_the_files_it_leaves_out() {
    let tmp = TempDir::new("build-left-out");
    let dir = tmp.path().join("cap");
    let write = |rel: &str| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x\n").unwrap();
    };
    for rel in [
        "check.sh",
        "data/x.json",
        "data/deep/y.json",
        ".env",
        ".git/HEAD",
        "workdir/ses_0/out/result.txt",
        "murmur.lock",
        "cap-0.1.0.mur.zip",
    ] {
        write(rel);
    }
    std::fs::write(dir.join("capsule.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let yaml = |requires: &str| format!("name: cap\nversion: 0.1.0\nrequires_files: [{requires}]\n");
    std::fs::write(dir.join("murmur.yaml"), yaml("data/x.json")).unwrap();
    let out = tmp.path().join("o.mur.zip");
    let (code, json, err) = mur(&["build", s(&dir), "-o", s(&out), "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        err,
        "warning[W-BLD-002]: 2 files of the capsule directory left out of the archive: check.sh, data/deep/y.json\n  hint: an archive holds murmur.yaml, the root .wasm payload and what requires_files lists: list there what the capsule needs when it runs\n"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["left_out"], serde_json::json!(["check.sh", "data/deep/y.json"]));

    std::fs::write(
        dir.join("murmur.yaml"),
        yaml("data/x.json, data/deep/y.json, check.sh"),
    )
    .unwrap();
    let (code, json, err) = mur(&["build", s(&dir), "-o", s(&out), "--json"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["entries"],
        serde_json::json!([
            "murmur.yaml",
            "data/x.json",
            "data/deep/y.json",
            "check.sh",
            "capsule.wasm",
            "murmur-build.json"
        ])
    );
    assert_eq!(v["left_out"], serde_json::json!([]));
}

/// `mur publish` names a delegation that could never work, both ways round: a capsule whose
/// `spawn.allow` names a script in the registry, and a script that a registered capsule's
/// `spawn.allow` names (W-BLD-001); `mur build` says so against the default registry.
#[test]
fn build_and_publish_name_a_spawn_allow_capsule_that_takes_no_task() {
    let tmp = TempDir::new("takes-no-task");
    let reg = tmp.path().join("reg");
    let script = capsule_dir(tmp.path());
    let parent = tmp.path().join("parent");
    std::fs::create_dir_all(&parent).unwrap();
    std::fs::write(
        parent.join("murmur.yaml"),
        "name: boss\nversion: 1.0.0\ninference: {transport: process}\ncapabilities:\n  spawn: {allow: [worker-a]}\nlifecycle: {task_acceptance: queue, queue_depth: 2}\n",
    )
    .unwrap();
    let (script_zip, parent_zip) = (tmp.path().join("w.mur.zip"), tmp.path().join("b.mur.zip"));
    assert_eq!(mur(&["build", s(&script), "-o", s(&script_zip)]).0, 0);
    assert_eq!(mur(&["build", s(&parent), "-o", s(&parent_zip)]).0, 0);
    // The script first: nothing names it yet.
    let (code, _, err) = mur(&["publish", s(&script_zip), "--registry-path", s(&reg)]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("W-BLD-001"), "{err}");
    // Then the capsule that names it.
    let (code, _, err) = mur(&["publish", s(&parent_zip), "--registry-path", s(&reg)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning[W-BLD-001]: worker-a@0.1.0 in the registry declares no lifecycle and takes no task: every delegation to it will be refused"),
        "{err}"
    );
    // And the other way round, in a fresh registry: the parent first, then the script.
    let reg2 = tmp.path().join("reg2");
    assert_eq!(
        mur(&["publish", s(&parent_zip), "--registry-path", s(&reg2)]).0,
        0
    );
    let (code, _, err) = mur(&["publish", s(&script_zip), "--registry-path", s(&reg2)]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("warning[W-BLD-001]: boss@1.0.0 in the registry lists worker-a in capabilities.spawn.allow, and this capsule declares no lifecycle and takes no task"),
        "{err}"
    );
}

/// `mur` with HOME (so the default registry) at `home` and the system registry at `system`.
fn mur_with_system(home: &Path, system: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(MUR)
        .args(args)
        .env("HOME", home)
        .env("MURMUR_SYSTEM_REGISTRY", system)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn an_artifact_absent_from_the_users_registry_resolves_from_the_system_one_and_only_then() {
    let tmp = TempDir::new("registry-system");
    let dir = capsule_dir(tmp.path());
    let zip = tmp.path().join("w.mur.zip");
    let system = tmp.path().join("usr-share-murmur-artifacts");
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    assert_eq!(mur(&["build", s(&dir), "-o", s(&zip)]).0, 0);
    assert_eq!(mur(&["publish", s(&zip), "--registry-path", s(&system)]).0, 0);
    let system_sha = registry::sha256_hex(&std::fs::read(&zip).unwrap());
    let inspect = ["inspect", "worker-a@0.1.0", "--json"];

    // 1. Nothing in the user's registry: the package's copy, no publish step.
    let (code, out, err) = mur_with_system(&home, s(&system), &inspect);
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["sha256"], system_sha.as_str());

    // 2. The system registry turned off (set but empty): not installed, as before.
    let (code, _, err) = mur_with_system(&home, "", &inspect);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-RUN-008]: artifact worker-a@0.1.0 is not installed"),
        "{err}"
    );

    // 3. The user's own copy of the same coordinates wins over the system's.
    std::fs::write(
        dir.join("murmur.yaml"),
        "name: worker-a\nversion: 0.1.0\ndescription: the user's own\nrequires_files: [prompts/system.md]\n",
    )
    .unwrap();
    let own = tmp.path().join("own.mur.zip");
    assert_eq!(mur(&["build", s(&dir), "-o", s(&own)]).0, 0);
    let (code, _, err) = mur_with_system(&home, s(&system), &["publish", s(&own)]);
    assert_eq!(code, 0, "{err}");
    let own_sha = registry::sha256_hex(&std::fs::read(&own).unwrap());
    assert_ne!(own_sha, system_sha);
    let (code, out, err) = mur_with_system(&home, s(&system), &inspect);
    assert_eq!(code, 0, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["sha256"], own_sha.as_str());

    // 4. The user's copy failing its check is an error, never a reason to read the system's.
    let filed = home.join(".murmur/artifacts/worker-a/0.1.0/worker-a-0.1.0.sha256");
    std::fs::write(&filed, system_sha.as_bytes()).unwrap();
    let (code, _, err) = mur_with_system(&home, s(&system), &inspect);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-REG-002]: integrity check failed for worker-a@0.1.0"),
        "{err}"
    );

    // 5. A tampered system copy is refused as one (its sidecar still applies).
    std::fs::remove_dir_all(home.join(".murmur/artifacts/worker-a")).unwrap();
    let sys_zip = system.join("worker-a/0.1.0/worker-a-0.1.0.mur.zip");
    let mut bytes = std::fs::read(&sys_zip).unwrap();
    let last = bytes.len() - 30;
    bytes[last] ^= 0x55;
    std::fs::write(&sys_zip, &bytes).unwrap();
    let (code, _, err) = mur_with_system(&home, s(&system), &inspect);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error[E-REG-002]: integrity check failed for worker-a@0.1.0"),
        "{err}"
    );
}
