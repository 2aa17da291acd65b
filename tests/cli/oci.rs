//! `mur push`, `mur pull` and `mur install` against registries on 127.0.0.1: the CNCF
//! distribution registry over plain HTTP and over TLS (push, pull by tag and by digest,
//! install from a source, the lock written and then enforced when the tag moves), and a
//! registry that lies (bytes that are not their digest, a manifest of another shape, an
//! endless body, a redirect to plain HTTP, a token flow whose secrets must never show).

use crate::common;

use common::capsule::repo;
use common::oci::{answer, mur, start, Liar, Reply, Seen};
use common::TempDir;
use murmur::registry::oci::manifest::{build, Blob};
use murmur::registry::sha256_hex;
use std::path::{Path, PathBuf};

const DRIVER: &str = "murmur-driver-openai";

fn shipped() -> Vec<u8> {
    std::fs::read(repo("artifacts/murmur-driver-openai-1.0.0.mur.zip")).unwrap()
}

fn text(out: &std::process::Output) -> (Option<i32>, String, String) {
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Publish the archive `zip` into a fresh local registry `<t>/<name>`.
fn registry_with(t: &TempDir, name: &str, zip: &Path) -> PathBuf {
    let reg = t.path().join(name);
    std::fs::create_dir_all(&reg).unwrap();
    let (code, out, err) = text(&mur(
        t,
        &[
            "publish",
            zip.to_str().unwrap(),
            "--registry-path",
            reg.to_str().unwrap(),
        ],
        &[],
    ));
    assert_eq!(code, Some(0), "{out}{err}");
    reg
}

/// `mur push ARTIFACT TO --registry-path REG`: (exit code, stdout, stderr).
fn push(t: &TempDir, artifact: &str, to: &str, reg: &Path) -> (Option<i32>, String, String) {
    text(&mur(
        t,
        &["push", artifact, to, "--registry-path", reg.to_str().unwrap()],
        &[],
    ))
}

/// `mur pull FROM --registry-path REG` with `env`: (exit code, stdout, stderr).
fn pull(t: &TempDir, from: &str, reg: &Path, env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    text(&mur(
        t,
        &["pull", from, "--registry-path", reg.to_str().unwrap()],
        env,
    ))
}

/// The archive bytes a local registry holds for the driver, if any.
fn installed(reg: &Path) -> Option<Vec<u8>> {
    std::fs::read(
        reg.join(DRIVER)
            .join("1.0.0")
            .join(format!("{DRIVER}-1.0.0.mur.zip")),
    )
    .ok()
}

/// Every file under `dir`.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn an_artifact_pushed_is_pulled_back_by_tag_and_by_digest_byte_for_byte() {
    let t = TempDir::new("oci-http");
    let r = start(&t, false);
    let zip = repo("artifacts/murmur-driver-openai-1.0.0.mur.zip");
    let reg1 = registry_with(&t, "reg1", &zip);
    let repo_url = r.url("murmur/murmur-driver-openai");
    let (code, out, err) = text(&mur(
        &t,
        &[
            "push",
            &format!("{DRIVER}@1.0.0"),
            &repo_url,
            "--registry-path",
            reg1.to_str().unwrap(),
            "--json",
        ],
        &[],
    ));
    assert_eq!(code, Some(0), "{out}{err}");
    let pushed: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(pushed["sha256"].as_str(), Some(sha256_hex(&shipped()).as_str()));
    assert_eq!(pushed["to"].as_str(), Some(format!("{repo_url}:1.0.0").as_str()));
    let digest = pushed["digest"].as_str().unwrap().to_string();

    for (name, from) in [
        ("reg2", format!("{repo_url}:1.0.0")),
        ("reg3", format!("{repo_url}@{digest}")),
    ] {
        let reg = t.path().join(name);
        let (code, out, err) = pull(&t, &from, &reg, &[]);
        assert_eq!(code, Some(0), "{out}{err}");
        assert!(
            out.starts_with(&format!("installed {DRIVER}@1.0.0 from {from}\n")),
            "{out}"
        );
        assert_eq!(installed(&reg).as_deref(), Some(shipped().as_slice()), "{name}");
        let sidecar = std::fs::read_to_string(
            reg.join(DRIVER)
                .join("1.0.0")
                .join(format!("{DRIVER}-1.0.0.sha256")),
        )
        .unwrap();
        assert_eq!(sidecar.trim(), sha256_hex(&shipped()));
    }
    let again = pull(&t, &format!("{repo_url}:1.0.0"), &t.path().join("reg2"), &[]);
    assert!(
        again.0 == Some(0) && again.1.starts_with("already installed"),
        "{again:?}"
    );

    // Another OCI client copies what was pushed unchanged (same manifest digest, the layer
    // the archive's bytes), and what it pushes in the documented layout `mur pull` takes.
    let layout = t.path().join("layout");
    skopeo(&[
        "copy",
        "--src-tls-verify=false",
        &format!("docker://{}/murmur/murmur-driver-openai:1.0.0", r.host),
        &format!("oci:{}:1.0.0", layout.display()),
    ]);
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(layout.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["manifests"][0]["digest"].as_str(), Some(digest.as_str()));
    let blob = |hex: &str| std::fs::read(layout.join("blobs/sha256").join(hex)).unwrap();
    assert_eq!(blob(&sha256_hex(&shipped())), shipped());

    let theirs = t.path().join("theirs");
    let p = parts();
    write_layout(&theirs, &p);
    skopeo(&[
        "copy",
        "--dest-tls-verify=false",
        &format!("oci:{}:1.0.0", theirs.display()),
        &format!("docker://{}/elsewhere/driver:1.0.0", r.host),
    ]);
    let reg = t.path().join("reg4");
    let (code, out, err) = pull(&t, &r.url("elsewhere/driver:1.0.0"), &reg, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(installed(&reg).as_deref(), Some(shipped().as_slice()));
}

/// Run skopeo (installed by .ci/run), which must succeed.
fn skopeo(args: &[&str]) {
    let out = std::process::Command::new("skopeo")
        .args(args)
        .output()
        .expect("skopeo is not installed (apt-get install skopeo; .ci/run does)");
    assert!(out.status.success(), "skopeo {args:?}: {out:?}");
}

/// An OCI image layout (the image-spec's directory form) holding `p` tagged 1.0.0.
fn write_layout(dir: &Path, p: &Parts) {
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    for b in [p.manifest.as_bytes(), &p.meta, &p.zip] {
        std::fs::write(blobs.join(sha256_hex(b)), b).unwrap();
    }
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": p.digest, "size": p.manifest.len(),
        "annotations": {"org.opencontainers.image.ref.name": "1.0.0"}}]});
    std::fs::write(dir.join("index.json"), index.to_string()).unwrap();
}

#[test]
fn over_tls_the_registry_is_trusted_only_through_the_operators_ca() {
    let t = TempDir::new("oci-tls");
    let r = start(&t, true);
    let ca = r.ca.clone().unwrap();
    let ca_env = [("MURMUR_CA_FILE", ca.to_str().unwrap())];
    let reg1 = registry_with(&t, "reg1", &repo("artifacts/murmur-driver-openai-1.0.0.mur.zip"));
    let target = r.url("murmur/murmur-driver-openai:1.0.0");
    assert!(target.starts_with("oci://127.0.0.1:"), "{target}");
    let push = text(&mur(
        &t,
        &[
            "push",
            &format!("{DRIVER}@1.0.0"),
            &target,
            "--registry-path",
            reg1.to_str().unwrap(),
        ],
        &ca_env,
    ));
    assert_eq!(push.0, Some(0), "{push:?}");
    let reg2 = t.path().join("reg2");
    let pulled = pull(&t, &target, &reg2, &ca_env);
    assert_eq!(pulled.0, Some(0), "{pulled:?}");
    assert_eq!(installed(&reg2).as_deref(), Some(shipped().as_slice()));

    // Without the operator's CA the system's roots do not vouch for it: refused, nothing filed.
    let reg3 = t.path().join("reg3");
    let (code, out, err) = pull(&t, &target, &reg3, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.starts_with("error[E-REG-005]: ") && err.contains("certificate"),
        "{err}"
    );
    assert!(files(&reg3).is_empty());
    // A CA file that is not PEM is said to be so.
    let junk = t.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate\n").unwrap();
    let (code, _, err) = text(&mur(
        &t,
        &["pull", &target, "--registry-path", reg3.to_str().unwrap()],
        &[("MURMUR_CA_FILE", junk.to_str().unwrap())],
    ));
    assert_eq!(code, Some(1));
    assert!(err.contains("holds no certificate"), "{err}");
    // Plain HTTP is taken only to loopback, refused before any connection.
    let (code, _, err) = pull(&t, "oci+http://registry.example/a:1", &reg3, &[]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with(
            "error[E-MAN-003]: oci+http://registry.example/a:1: plain HTTP is taken only to a loopback host"
        ),
        "{err}"
    );
}

/// A copy of the driver with the same name and version but other bytes.
fn altered_driver(t: &TempDir) -> PathBuf {
    let dir = t.path().join("altered");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(
        repo("drivers/murmur-driver-openai/capsule.wasm"),
        dir.join("capsule.wasm"),
    )
    .unwrap();
    let m = std::fs::read_to_string(repo("drivers/murmur-driver-openai/murmur.yaml")).unwrap();
    let m = m.replace("description: \"", "description: \"(altered) ");
    std::fs::write(dir.join("murmur.yaml"), m).unwrap();
    let out_zip = t.path().join("altered-1.0.0.mur.zip");
    let (code, out, err) = text(&mur(
        t,
        &["build", dir.to_str().unwrap(), "-o", out_zip.to_str().unwrap()],
        &[],
    ));
    assert_eq!(code, Some(0), "{out}{err}");
    out_zip
}

#[test]
fn install_fetches_what_the_manifest_lacks_pins_it_and_a_moved_tag_changes_nothing() {
    let t = TempDir::new("oci-install");
    let r = start(&t, false);
    let original = sha256_hex(&shipped());
    let reg1 = registry_with(&t, "reg1", &repo("artifacts/murmur-driver-openai-1.0.0.mur.zip"));
    let repo_url = r.url("murmur/murmur-driver-openai");
    let pushed = push(&t, &format!("{DRIVER}@1.0.0"), &repo_url, &reg1);
    assert_eq!(pushed.0, Some(0), "{pushed:?}");

    let capsule = t.path().join("capsule");
    std::fs::create_dir_all(capsule.join(".murmur")).unwrap();
    std::fs::copy(repo("examples/agent/murmur.yaml"), capsule.join("murmur.yaml")).unwrap();
    std::fs::write(
        capsule.join(".murmur/config.yaml"),
        format!(
            "registry:\n  sources:\n    - prefix: \"murmur-\"\n      repository: {}\n",
            r.url("murmur")
        ),
    )
    .unwrap();
    let manifest = capsule.join("murmur.yaml");
    let install = |reg: &str, extra: &[&str]| {
        let mut args = vec![
            "install",
            "--manifest",
            manifest.to_str().unwrap(),
            "--registry-path",
            reg,
        ];
        args.extend_from_slice(extra);
        text(&mur(&t, &args, &[]))
    };
    let reg2 = t.path().join("reg2");
    let (code, out, err) = install(reg2.to_str().unwrap(), &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("installed {DRIVER}@1.0.0 from {repo_url}:1.0.0\n")),
        "{out}"
    );
    assert!(out.contains("murmur.lock (1 artifacts pinned)"), "{out}");
    assert_eq!(installed(&reg2).as_deref(), Some(shipped().as_slice()));
    let lock = std::fs::read_to_string(capsule.join("murmur.lock")).unwrap();
    assert!(lock.contains(&format!("sha256: {original}")), "{lock}");
    // Nothing missing: nothing fetched, the lock as it was.
    let (code, out, _) = install(reg2.to_str().unwrap(), &[]);
    assert_eq!((code, out.as_str()), (Some(0), "every artifact is installed\n"));

    // The tag moves to other bytes under the same name and version.
    let altered = altered_driver(&t);
    let moved = sha256_hex(&std::fs::read(&altered).unwrap());
    assert_ne!(moved, original);
    let reg_alt = registry_with(&t, "reg-alt", &altered);
    let pushed = push(&t, &format!("{DRIVER}@1.0.0"), &repo_url, &reg_alt);
    assert_eq!(pushed.0, Some(0), "{pushed:?}");

    // With the lock, the pinned digest is fetched: the moved tag changes nothing.
    let reg3 = t.path().join("reg3");
    let (code, out, err) = install(reg3.to_str().unwrap(), &["--locked"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains(&format!("from {repo_url}@sha256:{original}")),
        "{out}"
    );
    assert_eq!(installed(&reg3).as_deref(), Some(shipped().as_slice()));
    assert_eq!(
        std::fs::read_to_string(capsule.join("murmur.lock")).unwrap(),
        lock
    );
    // The moved tag itself is refused against what is installed, naming both hashes.
    let (code, _, err) = pull(&t, &format!("{repo_url}:1.0.0"), &reg3, &[]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("error[E-REG-002]: ") && err.contains(&original) && err.contains(&moved),
        "{err}"
    );
    assert_eq!(installed(&reg3).as_deref(), Some(shipped().as_slice()));
    // And `mur run --locked` refuses the moved bytes wherever they were installed.
    let reg4 = t.path().join("reg4");
    let pulled = pull(&t, &format!("{repo_url}:1.0.0"), &reg4, &[]);
    assert_eq!(pulled.0, Some(0), "{pulled:?}");
    // `mur install --locked` checks what is installed against the pin, as `mur run` does.
    let (code, _, err) = install(reg4.to_str().unwrap(), &["--locked"]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("error[E-REG-002]: ") && err.contains(&original) && err.contains(&moved),
        "{err}"
    );
    let run = text(&mur(
        &t,
        &[
            "run",
            "--manifest",
            manifest.to_str().unwrap(),
            "--registry-path",
            reg4.to_str().unwrap(),
            "--locked",
            "--task",
            "hi",
        ],
        &[],
    ));
    assert_eq!(run.0, Some(1), "{run:?}");
    assert!(
        run.2.contains("E-REG-002") && run.2.contains(&original) && run.2.contains(&moved),
        "{}",
        run.2
    );

    // --locked without a lock, and an artifact no source matches, are coded refusals.
    std::fs::remove_file(capsule.join("murmur.lock")).unwrap();
    let (code, _, err) = install(t.path().join("reg5").to_str().unwrap(), &["--locked"]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("error[E-RUN-003]: --locked: there is no murmur.lock"),
        "{err}"
    );
    std::fs::write(capsule.join(".murmur/config.yaml"), "registry:\n  sources: []\n").unwrap();
    let (code, _, err) = install(t.path().join("reg5").to_str().unwrap(), &[]);
    assert_eq!(code, Some(1));
    assert!(err.starts_with(&format!("error[E-REG-005]: {DRIVER} is not in the local registry and no registry.sources entry matches it")), "{err}");
    assert!(!capsule.join("murmur.lock").exists());
}

/// The driver as a well-formed artifact: manifest text, its digest, meta.json, archive.
struct Parts {
    manifest: String,
    digest: String,
    meta: Vec<u8>,
    zip: Vec<u8>,
}

fn parts() -> Parts {
    let zip = shipped();
    let meta = format!(r#"{{"meta": {{"name": "{DRIVER}", "version": "1.0.0"}}}}"#).into_bytes();
    let blob = |b: &[u8]| Blob {
        digest: format!("sha256:{}", sha256_hex(b)),
        size: b.len() as u64,
    };
    let manifest = build(&blob(&meta), &blob(&zip), "x.mur.zip");
    Parts {
        digest: format!("sha256:{}", sha256_hex(manifest.as_bytes())),
        manifest,
        meta,
        zip,
    }
}

/// The honest answer of a registry holding `p` (None: not found).
fn honest(p: &Parts, req: &Seen) -> Reply {
    let zip_digest = format!("sha256:{}", sha256_hex(&p.zip));
    let meta_digest = format!("sha256:{}", sha256_hex(&p.meta));
    if req.path.contains("/manifests/") {
        answer(
            "200 OK",
            &[("content-type", "application/vnd.oci.image.manifest.v1+json")],
            p.manifest.as_bytes(),
        )
    } else if req.path.ends_with(&zip_digest) {
        answer("200 OK", &[], &p.zip)
    } else if req.path.ends_with(&meta_digest) {
        answer("200 OK", &[], &p.meta)
    } else {
        answer(
            "404 Not Found",
            &[],
            b"{\"errors\":[{\"code\":\"BLOB_UNKNOWN\"}]}",
        )
    }
}

#[test]
fn a_registry_that_lies_is_refused_with_a_code_and_nothing_is_installed() {
    let t = TempDir::new("oci-lies");
    let elsewhere = Liar::start(|_| answer("200 OK", &[], b"x"));
    let elsewhere_host = elsewhere.host.clone();
    type Lie = Box<dyn Fn(&Parts, &Seen) -> Reply + Send + Sync>;
    let lies: Vec<(&str, &str, Lie, &str)> = vec![
        ("other bytes", ":1.0.0", Box::new(|p: &Parts, r: &Seen| {
            if r.path.contains("/blobs/") && !r.path.ends_with(&sha256_hex(&p.meta)) {
                let mut bad = p.zip.clone();
                bad[100] ^= 1;
                answer("200 OK", &[], &bad)
            } else {
                honest(p, r)
            }
        }), "error[E-REG-002]: the archive blob asked for as sha256:"),
        ("another shape", ":1.0.0", Box::new(|p: &Parts, r: &Seen| {
            if r.path.contains("/manifests/") {
                let m = p.manifest.replace("application/vnd.murmur.artifact.layer.v1+zip", "application/vnd.oci.image.layer.v1.tar+gzip");
                answer("200 OK", &[], m.as_bytes())
            } else {
                honest(p, r)
            }
        }), "error[E-REG-005]: not a murmur artifact: the manifest's layer is not of media type application/vnd.murmur.artifact.layer.v1+zip"),
        ("an endless body", ":1.0.0", Box::new(|p: &Parts, r: &Seen| {
            if r.path.ends_with(&sha256_hex(&p.zip)) {
                Reply::Endless
            } else {
                honest(p, r)
            }
        }), "error[E-REG-002]: the archive blob sha256:"),
        ("a manifest that is not its digest", "@sha256:0000000000000000000000000000000000000000000000000000000000000000", Box::new(honest), "error[E-REG-002]: the manifest asked for as sha256:0000"),
    ];
    for (what, target, lie, expected) in lies {
        let p = parts();
        let liar = Liar::start(move |r| lie(&p, r));
        let reg = t.path().join(format!("reg-{}", what.replace(' ', "-")));
        let (code, out, err) = pull(&t, &format!("{}{target}", liar.url("m/d")), &reg, &[]);
        assert_eq!(code, Some(1), "{what}: {out}{err}");
        assert!(err.starts_with(expected), "{what}: {err}");
        assert!(files(&reg).is_empty(), "{what}: {:?}", files(&reg));
        if what == "another shape" {
            let seen = liar.seen.lock().unwrap();
            assert!(
                seen.iter().all(|s| !s.path.contains("/blobs/")),
                "no blob is fetched: {seen:?}"
            );
        }
    }

    // A redirect of a blob to plain HTTP elsewhere is not followed.
    let p = parts();
    let to = format!("http://{elsewhere_host}/storage/blob");
    let liar = Liar::start(move |r| {
        if r.path.contains("/blobs/") && !r.path.ends_with(&sha256_hex(&p.meta)) {
            answer("307 Temporary Redirect", &[("location", to.as_str())], b"")
        } else {
            honest(&p, r)
        }
    });
    let reg = t.path().join("reg-redirect");
    let (code, _, err) = pull(&t, &liar.url("m/d:1.0.0"), &reg, &[]);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with(&format!(
            "error[E-REG-005]: a redirect to plain HTTP ({elsewhere_host}) refused"
        )),
        "{err}"
    );
    assert!(elsewhere.seen.lock().unwrap().is_empty());
    assert!(files(&reg).is_empty());

    // The honest registry, asked by the manifest's digest, is believed.
    let p = parts();
    let digest = p.digest.clone();
    let liar = Liar::start(move |r| honest(&p, r));
    let reg = t.path().join("reg-honest");
    let (code, out, err) = pull(&t, &liar.url(&format!("m/d@{digest}")), &reg, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(installed(&reg).as_deref(), Some(shipped().as_slice()));

    // A registry that is busy for a moment is tried again.
    let p = parts();
    let busy = std::sync::atomic::AtomicUsize::new(0);
    let liar = Liar::start(move |r| {
        if r.path.contains("/manifests/") && busy.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 {
            answer("503 Service Unavailable", &[("retry-after", "0")], b"")
        } else {
            honest(&p, r)
        }
    });
    let reg = t.path().join("reg-busy");
    let (code, out, err) = pull(&t, &liar.url("m/d:1.0.0"), &reg, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(installed(&reg).as_deref(), Some(shipped().as_slice()));
}

#[test]
fn a_token_protected_registry_gets_the_operators_credentials_which_never_show() {
    let t = TempDir::new("oci-token");
    let p = parts();
    let listener_host = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let host = listener_host.clone();
    let liar = Liar::start(move |r| {
        let realm = format!(
            "Bearer realm=\"http://{}/token\",service=\"liar\"",
            host.lock().unwrap()
        );
        if r.path.starts_with("/token?") {
            let basic = format!("Basic {}", murmur::b64::encode_standard(b"ann:pw-SECRET"));
            return if r.authorization.as_deref() == Some(basic.as_str())
                && r.path == "/token?service=liar&scope=repository%3Am%2Fd%3Apull"
            {
                answer("200 OK", &[], b"{\"token\": \"tok-SECRET\"}")
            } else {
                answer("401 Unauthorized", &[], b"")
            };
        }
        if r.authorization.as_deref() != Some("Bearer tok-SECRET") {
            return answer(
                "401 Unauthorized",
                &[("www-authenticate", realm.as_str())],
                b"{\"errors\":[{\"code\":\"UNAUTHORIZED\"}]}",
            );
        }
        honest(&p, r)
    });
    *listener_host.lock().unwrap() = liar.host.clone();

    // No credentials: refused with a hint, nothing installed.
    let reg = t.path().join("reg-anon");
    let (code, out, err) = pull(&t, &liar.url("m/d:1.0.0"), &reg, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.starts_with("error[E-REG-005]: the registry asks for credentials and none are configured for it"),
        "{err}"
    );
    assert!(files(&reg).is_empty());

    let auth_file = t.path().join("auth.json");
    let auth = murmur::b64::encode_standard(b"ann:pw-SECRET");
    std::fs::write(
        &auth_file,
        format!(r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#, liar.host),
    )
    .unwrap();
    let env = [("REGISTRY_AUTH_FILE", auth_file.to_str().unwrap())];
    let reg = t.path().join("reg-auth");
    let (code, out, err) = text(&mur(
        &t,
        &[
            "pull",
            &liar.url("m/d:1.0.0"),
            "--registry-path",
            reg.to_str().unwrap(),
            "--json",
        ],
        &env,
    ));
    assert_eq!(code, Some(0), "{out}{err}");
    assert_eq!(installed(&reg).as_deref(), Some(shipped().as_slice()));
    let secrets = ["SECRET", &murmur::b64::encode_standard(b"ann:pw-SECRET")[..]];
    assert!(
        secrets.iter().all(|x| !out.contains(x) && !err.contains(x)),
        "{out}{err}"
    );
    let seen = liar.seen.lock().unwrap();
    assert!(seen.iter().any(|s| s.path.starts_with("/token?")));
    assert!(
        seen.iter()
            .filter(|s| s.path.contains("/blobs/"))
            .all(|s| s.authorization.as_deref() == Some("Bearer tok-SECRET")),
        "{seen:?}"
    );
    drop(seen);

    // Wrong credentials: refused, and still no secret in the words.
    write_auth(&auth_file, &liar.host, b"ann:wrong-SECRET");
    let reg = t.path().join("reg-wrong");
    let (code, out, err) = pull(&t, &liar.url("m/d:1.0.0"), &reg, &env);
    assert_eq!(code, Some(1));
    assert!(
        err.starts_with("error[E-REG-005]: the token realm refused the credentials (401)"),
        "{err}"
    );
    assert!(!out.contains("SECRET") && !err.contains("SECRET"), "{out}{err}");
}

#[test]
fn install_refuses_a_source_that_holds_another_artifact_and_files_nothing() {
    let t = TempDir::new("oci-other");
    let mut p = parts();
    p.meta = br#"{"meta": {"name": "acme/tool", "version": "1.0.0"}}"#.to_vec();
    let blob = |b: &[u8]| Blob {
        digest: format!("sha256:{}", sha256_hex(b)),
        size: b.len() as u64,
    };
    p.manifest = build(&blob(&p.meta), &blob(&p.zip), "x.mur.zip");
    let liar = Liar::start(move |r| honest(&p, r));
    let capsule = t.path().join("capsule");
    std::fs::create_dir_all(capsule.join(".murmur")).unwrap();
    std::fs::copy(repo("examples/agent/murmur.yaml"), capsule.join("murmur.yaml")).unwrap();
    std::fs::write(
        capsule.join(".murmur/config.yaml"),
        format!(
            "registry:\n  sources:\n    - prefix: \"\"\n      repository: {}\n",
            liar.url("m")
        ),
    )
    .unwrap();
    let reg = t.path().join("reg");
    let manifest = capsule.join("murmur.yaml");
    let (code, out, err) = text(&mur(
        &t,
        &[
            "install",
            "--manifest",
            manifest.to_str().unwrap(),
            "--registry-path",
            reg.to_str().unwrap(),
        ],
        &[],
    ));
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.starts_with(&format!(
            "error[E-REG-002]: {} holds acme/tool@1.0.0, not {DRIVER}@1.0.0",
            liar.url("m/murmur-driver-openai")
        )),
        "{err}"
    );
    assert!(files(&reg).is_empty(), "{:?}", files(&reg));
    assert!(!capsule.join("murmur.lock").exists());
    let seen = liar.seen.lock().unwrap();
    let zip = sha256_hex(&shipped());
    assert!(
        seen.iter().all(|s| !s.path.ends_with(&zip)),
        "the archive is never fetched: {seen:?}"
    );
}

#[test]
fn a_blob_over_a_mebibyte_prints_progress_and_arrives_whole() {
    let t = TempDir::new("oci-progress");
    let r = start(&t, false);
    let dir = t.path().join("big");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo("examples/hello/capsule.wasm"), dir.join("capsule.wasm")).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        "name: big\nversion: 1.0.0\nrequires_files: [data.bin]\n",
    )
    .unwrap();
    // 3 MiB that do not compress: the archive stays over 1 MiB.
    let data = common::incompressible(3 << 20, 0x2545_f491_4f6c_dd1d);
    std::fs::write(dir.join("data.bin"), &data).unwrap();
    let zip = t.path().join("big-1.0.0.mur.zip");
    let built = text(&mur(
        &t,
        &["build", dir.to_str().unwrap(), "-o", zip.to_str().unwrap()],
        &[],
    ));
    assert_eq!(built.0, Some(0), "{built:?}");
    let reg1 = registry_with(&t, "reg1", &zip);
    let pushed = push(&t, "big@1.0.0", &r.url("bench/big"), &reg1);
    assert_eq!(pushed.0, Some(0), "{pushed:?}");
    assert!(pushed.2.starts_with("mur: pushing the archive ("), "{}", pushed.2);
    let reg2 = t.path().join("reg2");
    let (code, out, err) = pull(&t, &r.url("bench/big:1.0.0"), &reg2, &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    let bytes = std::fs::read(&zip).unwrap();
    let short = &format!("sha256:{}", sha256_hex(&bytes))[..19];
    let total = bytes.len() / 1024;
    let last = err.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!("mur: pulling the archive {short}: {total} of {total} KiB"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(reg2.join("big/1.0.0/big-1.0.0.mur.zip")).unwrap(),
        bytes
    );
}

/// A token realm on another origin than the registry (here another loopback port) is sent
/// the operator's credentials only when `MURMUR_TOKEN_REALMS` names it; the registry's own
/// origin always may be.
#[test]
fn a_token_realm_on_another_origin_gets_credentials_only_when_the_operator_names_it() {
    let t = TempDir::new("oci-realm");
    let p = parts();
    let basic = format!("Basic {}", murmur::b64::encode_standard(b"ann:pw-SECRET"));
    let want = basic.clone();
    let tokens = Liar::start(move |r| {
        if r.path.starts_with("/token?") && r.authorization.as_deref() == Some(want.as_str()) {
            answer("200 OK", &[], b"{\"token\": \"tok-SECRET\"}")
        } else {
            answer("401 Unauthorized", &[], b"")
        }
    });
    let realm = format!("Bearer realm=\"http://{}/token\",service=\"liar\"", tokens.host);
    let liar = Liar::start(move |r| {
        if r.authorization.as_deref() != Some("Bearer tok-SECRET") {
            return answer("401 Unauthorized", &[("www-authenticate", realm.as_str())], b"");
        }
        honest(&p, r)
    });
    let auth_file = t.path().join("auth.json");
    write_auth(&auth_file, &liar.host, b"ann:pw-SECRET");
    let auth = auth_file.to_str().unwrap();
    // Not named: the other origin gets no credentials, and the refusal says why.
    let reg = t.path().join("reg-unnamed");
    let (code, out, err) = pull(&t, &liar.url("m/d:1.0.0"), &reg, &[("REGISTRY_AUTH_FILE", auth)]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("is on another origin than the registry"), "{err}");
    assert!(
        tokens
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|s| s.authorization.is_none()),
        "credentials reached the other origin"
    );
    assert!(files(&reg).is_empty());
    // Named: it gets them, and the pull goes through.
    let named = format!("http://{}", tokens.host);
    let reg = t.path().join("reg-named");
    let (code, out, err) = pull(
        &t,
        &liar.url("m/d:1.0.0"),
        &reg,
        &[("REGISTRY_AUTH_FILE", auth), ("MURMUR_TOKEN_REALMS", &named)],
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(tokens
        .seen
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.authorization.as_deref() == Some(basic.as_str())));
}

/// Registry errors that say what to do: a host that does not resolve is named; a
/// plain-HTTP registry asked over `oci://` is named as such with the `oci+http://` hint;
/// the registry's own error message is carried into E-REG-005.
#[test]
fn registry_errors_name_the_cause_and_what_to_do() {
    let t = TempDir::new("oci-errors");
    let reg = t.path().join("reg");
    let (code, out, err) = pull(&t, "oci://no-such-registry.invalid/m/d:1.0.0", &reg, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("cannot resolve no-such-registry.invalid"), "{err}");
    // A plain-HTTP server answers a TLS hello as a real one does: 400, in clear text.
    let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let plain_host = plain.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for s in plain.incoming().flatten().take(8) {
            let mut s = s;
            let mut b = [0u8; 512];
            let _ = std::io::Read::read(&mut s, &mut b);
            let _ = std::io::Write::write_all(
                &mut s,
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    let url = format!("oci://{plain_host}/m/d:1.0.0");
    let (code, out, err) = pull(&t, &url, &reg, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("hint: the registry answered in plain HTTP, not TLS: name it oci+http://"),
        "{err}"
    );
    let says = Liar::start(|_| {
        answer(
            "404 Not Found",
            &[("content-type", "application/json")],
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown to this registry"}]}"#,
        )
    });
    let (code, out, err) = pull(&t, &says.url("m/d:1.0.0"), &reg, &[]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("(MANIFEST_UNKNOWN: manifest unknown to this registry)"),
        "{err}"
    );
}

/// A registry serving the common self-signed certificate (a CA certificate as its own
/// server certificate), named in MURMUR_CA_FILE, is refused with a hint that says which
/// kind of certificate works.
#[test]
fn a_self_signed_registry_certificate_is_refused_with_what_works() {
    let t = TempDir::new("oci-self-signed");
    let r = common::oci::start_self_signed(&t);
    let reg = t.path().join("reg");
    let ca = r.ca.as_ref().unwrap().to_str().unwrap().to_string();
    let (code, out, err) = pull(&t, &r.url("m/d:1.0.0"), &reg, &[("MURMUR_CA_FILE", &ca)]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(err.contains("CaUsedAsEndEntity"), "{err}");
    assert!(
        err.contains(
            "hint: the registry's certificate is a CA certificate serving as its own server certificate"
        ),
        "{err}"
    );
    assert!(err.contains("MURMUR_CA_FILE"), "{err}");
}

/// A `REGISTRY_AUTH_FILE` at `path` holding `user:secret` for `host`.
fn write_auth(path: &Path, host: &str, user_secret: &[u8]) {
    std::fs::write(
        path,
        format!(
            r#"{{"auths": {{"{host}": {{"auth": "{}"}}}}}}"#,
            murmur::b64::encode_standard(user_secret)
        ),
    )
    .unwrap();
}
