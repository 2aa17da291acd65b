//! `mur pull` of a 10 MiB artifact from a loopback OCI registry (Debian's
//! `docker-registry`, started here on 127.0.0.1 and stopped by PID) against `skopeo copy` of
//! the same artifact into an OCI layout, alternated in one run: wall time and peak resident
//! memory (`/usr/bin/time`'s maximum RSS) of each, medians of 7. Printed, never asserted.
//! Run: `cargo bench --bench registry` (needs docker-registry, skopeo and GNU time).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 7;
const MUR: &str = env!("CARGO_BIN_EXE_mur");

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A process killed when dropped.
struct Owned(Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn check(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

/// Run `args` under `/usr/bin/time`: (wall seconds, max RSS KiB).
fn measured(args: &[&str]) -> (f64, u64) {
    let t = Instant::now();
    let out = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("@@ %M")
        .args(args)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let wall = t.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    let rss = err
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("@@ "))
        .and_then(|v| v.trim().parse().ok())
        .expect("GNU time's %M");
    (wall, rss)
}

fn median<T: PartialOrd + Copy>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// A capsule holding 10 MiB of incompressible bytes, built and published into `reg`.
fn big_artifact(base: &Path, reg: &Path) {
    let dir = base.join("big");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo("examples/hello/capsule.wasm"), dir.join("capsule.wasm")).unwrap();
    std::fs::write(
        dir.join("murmur.yaml"),
        "name: big\nversion: 1.0.0\nrequires_files: [data.bin]\n",
    )
    .unwrap();
    let mut data = vec![0u8; 10 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for chunk in data.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    std::fs::write(dir.join("data.bin"), data).unwrap();
    let zip = base.join("big-1.0.0.mur.zip");
    check(Command::new(MUR).args(["build", dir.to_str().unwrap(), "-o", zip.to_str().unwrap()]));
    check(Command::new(MUR).args([
        "publish",
        zip.to_str().unwrap(),
        "--registry-path",
        reg.to_str().unwrap(),
    ]));
}

fn main() {
    let base = std::env::temp_dir().join(format!("murmur-bench-registry-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("storage")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        base.join("config.yml"),
        format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
            base.join("storage").display()
        ),
    )
    .unwrap();
    let registry = Owned(
        Command::new("docker-registry")
            .arg("serve")
            .arg(base.join("config.yml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("docker-registry (apt-get install docker-registry)"),
    );
    let until = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "the registry did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    let reg = base.join("reg");
    big_artifact(&base, &reg);
    let host = format!("127.0.0.1:{port}");
    check(Command::new(MUR).args([
        "push",
        "big@1.0.0",
        &format!("oci+http://{host}/bench/big"),
        "--registry-path",
        reg.to_str().unwrap(),
    ]));

    let (mut mur, mut skopeo) = (Vec::new(), Vec::new());
    for i in 0..RUNS {
        let into = base.join(format!("pulled-{i}"));
        mur.push(measured(&[
            MUR,
            "pull",
            &format!("oci+http://{host}/bench/big:1.0.0"),
            "--registry-path",
            into.to_str().unwrap(),
        ]));
        let layout = base.join(format!("layout-{i}"));
        skopeo.push(measured(&[
            "skopeo",
            "copy",
            "--quiet",
            "--src-tls-verify=false",
            &format!("docker://{host}/bench/big:1.0.0"),
            &format!("oci:{}:1.0.0", layout.display()),
        ]));
        let _ = std::fs::remove_dir_all(&into);
        let _ = std::fs::remove_dir_all(&layout);
    }
    println!("pull of a 10 MiB artifact from docker-registry on 127.0.0.1, median of {RUNS}, alternated:");
    for (name, v) in [("mur pull", &mur), ("skopeo copy", &skopeo)] {
        let wall = median(v.iter().map(|x| x.0).collect());
        let rss = median(v.iter().map(|x| x.1).collect());
        println!(
            "  {name:<12} wall {:>7.1} ms   peak RSS {:>7.1} MiB",
            wall * 1000.0,
            rss as f64 / 1024.0
        );
    }
    drop(registry);
    let _ = std::fs::remove_dir_all(&base);
}
