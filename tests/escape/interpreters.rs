//! Interpreters and everyday tools, contained: the Debian `python3.11` (resolved with
//! `PATH=/usr/bin:/bin`, not a pyenv shim) imports its standard library and C extensions
//! (`ssl`, `sqlite3`) under `scoped` and `sealed`, and still cannot read outside its
//! grants, write its own library, or execute anything but the allowed binaries; `cat` reads
//! the zone database; a declared `interpreter_runtime` opens exactly its directories, with
//! W-SEC-009. Where the host backs no class, each test asserts the E-CAP-003 refusal.

use super::common::TempDir;
use super::{host_backs_scoped, host_backs_sealed, text, MUR};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const PYTHON: &str = "/usr/bin/python3.11";

/// A capsule allowed `python3.11` and `cat`, with `extra` appended under `capabilities:`.
struct Capsule {
    t: TempDir,
    manifest: PathBuf,
    workdir: PathBuf,
}

fn capsule(label: &str, extra: &str) -> Capsule {
    let t = TempDir::new(label);
    let manifest = t.path().join("murmur.yaml");
    std::fs::write(
        &manifest,
        format!(
            "name: interp\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [python3.11, cat]\n{extra}"
        ),
    )
    .unwrap();
    let workdir = t.path().join("work");
    std::fs::create_dir_all(&workdir).unwrap();
    Capsule { t, manifest, workdir }
}

impl Capsule {
    fn exec(&self, class: &str, cmd: &[&str]) -> Output {
        Command::new(MUR)
            .args(["exec", "--manifest"])
            .arg(&self.manifest)
            .arg("--workdir")
            .arg(&self.workdir)
            .args(["--containment", class, "--"])
            .args(cmd)
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

/// The classes to run: each backed class, or `Err(class)` for one the host does not back
/// (the caller asserts its refusal).
fn classes() -> Vec<Result<&'static str, &'static str>> {
    let scoped = host_backs_scoped();
    let sealed = scoped && host_backs_sealed();
    vec![
        if scoped { Ok("scoped") } else { Err("scoped") },
        if sealed { Ok("sealed") } else { Err("sealed") },
    ]
}

fn assert_refused(class: &str, out: &Output) {
    assert_eq!(out.status.code(), Some(1), "{class}: {}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.lines()
            .any(|l| l.starts_with("error[E-CAP-003]: containment floor not met")),
        "{class}: {err}"
    );
}

/// Whether the Debian python this test is about is installed (it is on the CI image).
fn have_python() -> bool {
    let ok = Path::new(PYTHON).exists() && Path::new("/usr/lib/python3.11/lib-dynload").is_dir();
    if !ok {
        eprintln!("skipped: no Debian {PYTHON} on this host");
    }
    ok
}

#[test]
fn python_imports_its_library_and_c_extensions_contained() {
    if !have_python() {
        return;
    }
    let c = capsule("py-imports", "");
    let code = "import json, ssl, sqlite3; print(json.dumps([1+1, ssl.OPENSSL_VERSION[:7], sqlite3.sqlite_version_info[0]]))";
    for class in classes() {
        let out = c.exec(class.unwrap_or_else(|c| c), &["python3.11", "-c", code]);
        match class {
            Err(class) => assert_refused(class, &out),
            Ok(class) => {
                assert_eq!(
                    (text(&out.stdout).as_str(), out.status.code()),
                    ("[2, \"OpenSSL\", 3]\n", Some(0)),
                    "{class}: {}",
                    text(&out.stderr)
                );
            }
        }
    }
}

/// Each attempt of the python probe below, by name: `ok` or the errno it failed with.
const PROBE: &str = r#"
import json, os, sys
outside, ldso = sys.argv[1], sys.argv[2]
home = sys.argv[3:]
def run(path, argv):
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open("/dev/null", os.O_WRONLY), 1)
        try:
            os.execv(path, argv)
        except OSError as e:
            os._exit(e.errno)
    _, st = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(st)
    if code:
        raise OSError(code, "exit status")
def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return e.errno
r = {
    "read-shadow": attempt(lambda: open("/etc/shadow").read()),
    "read-outside": attempt(lambda: open(outside).read()),
    "write-stdlib": attempt(lambda: open("/usr/lib/python3.11/murmur-escape.py", "w").write("x")),
    "exec-copy": attempt(lambda: run("./id-copy", ["id"])),
    "exec-usr-bin-id": attempt(lambda: run("/usr/bin/id", ["id"])),
    "ldso-usr-bin-id": attempt(lambda: run(ldso, [ldso, "/usr/bin/id"])),
    "read-stdlib": attempt(lambda: open("/usr/lib/python3.11/os.py").read()),
}
for i, h in enumerate(home):
    r["read-home-%d" % i] = attempt(lambda: open(h).read())
print(json.dumps(r, sort_keys=True))
"#;

/// A readable regular file of the host in `/root` or `/home` (one level down), if any.
fn host_home_file() -> Option<PathBuf> {
    let mut dirs = vec![PathBuf::from("/root")];
    if let Ok(rd) = std::fs::read_dir("/home") {
        dirs.extend(rd.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()) && std::fs::File::open(p).is_ok())
}

#[test]
fn a_contained_python_reads_nothing_else_writes_nothing_and_runs_nothing_else() {
    if !have_python() {
        return;
    }
    let c = capsule("py-refusals", "");
    std::fs::write(c.workdir.join("probe.py"), PROBE).unwrap();
    std::fs::copy("/usr/bin/id", c.workdir.join("id-copy")).unwrap();
    let outside = c.t.path().join("outside.txt");
    std::fs::write(&outside, "outside the workdir\n").unwrap();
    let ldso = ["/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("the dynamic loader");
    let home = host_home_file();
    let mut args = vec!["python3.11".to_string(), "probe.py".into()];
    args.push(outside.display().to_string());
    args.push(ldso.to_string());
    args.extend(home.iter().map(|h| h.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for class in classes() {
        let out = c.exec(class.unwrap_or_else(|c| c), &args);
        let class = match class {
            Err(class) => {
                assert_refused(class, &out);
                continue;
            }
            Ok(class) => class,
        };
        let stdout = text(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{class}: {stdout} {}",
            text(&out.stderr)
        );
        let r: serde_json::Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{class}: {e}: {stdout} {}", text(&out.stderr)));
        println!("{class}: {r}");
        // Absent from the composed root under sealed; refused by landlock under scoped.
        let absent = if class == "sealed" { 2 } else { 13 };
        assert_eq!(r["read-shadow"], absent, "{class}: {r}");
        assert_eq!(r["read-outside"], absent, "{class}: {r}");
        if home.is_some() {
            assert_eq!(r["read-home-0"], absent, "{class}: {r} ({home:?})");
        }
        // Its own library: readable, not writable (landlock; a read-only bind under sealed).
        assert_eq!(r["read-stdlib"], "ok", "{class}: {r}");
        let write = r["write-stdlib"].as_i64();
        assert!(matches!(write, Some(13) | Some(30)), "{class}: {r}");
        assert!(!Path::new("/usr/lib/python3.11/murmur-escape.py").exists());
        // Nothing but the allowed binaries runs: not a copy in the workdir, not a system
        // binary outside shell.allow (EACCES: landlock, and `noexec` under sealed), not
        // through the allowed loader either (ld.so exits 127: the file is unreadable under
        // scoped, on a `noexec` mount under sealed).
        assert_eq!(r["exec-copy"], 13, "{class}: {r}");
        assert_eq!(r["exec-usr-bin-id"], 13, "{class}: {r}");
        assert_eq!(r["ldso-usr-bin-id"], 127, "{class}: {r}");
    }
}

#[test]
fn cat_reads_the_zone_database_contained() {
    let c = capsule("zoneinfo", "");
    if !Path::new("/usr/share/zoneinfo/UTC").exists() {
        return eprintln!("skipped: no /usr/share/zoneinfo/UTC here");
    }
    for class in classes() {
        let out = c.exec(class.unwrap_or_else(|c| c), &["cat", "/usr/share/zoneinfo/UTC"]);
        match class {
            Err(class) => assert_refused(class, &out),
            Ok(class) => {
                assert_eq!(out.status.code(), Some(0), "{class}: {}", text(&out.stderr));
                assert!(out.stdout.starts_with(b"TZif"), "{class}");
            }
        }
    }
}

/// Reads and lists the two declared directories: `ok` or the errno.
const RUNTIME_PROBE: &str = r#"
import json, os, sys
listed, hidden = sys.argv[1], sys.argv[2]
def attempt(f):
    try:
        return f()
    except OSError as e:
        return e.errno
print(json.dumps({
    "read-listed": attempt(lambda: open(os.path.join(listed, "mod.py")).read().strip()),
    "list-listed": attempt(lambda: sorted(os.listdir(listed))),
    "read-hidden": attempt(lambda: open(os.path.join(hidden, "data.txt")).read().strip()),
    "list-hidden": attempt(lambda: sorted(os.listdir(hidden))),
}, sort_keys=True))
"#;

#[test]
fn a_declared_interpreter_runtime_opens_its_directories_with_w_sec_009() {
    if !have_python() {
        return;
    }
    // Outside /tmp: under sealed a grant below /tmp would land in the private /tmp.
    let base =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("murmur-interp-rt-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (listed, hidden) = (base.join("listed"), base.join("hidden"));
    std::fs::create_dir_all(&listed).unwrap();
    std::fs::create_dir_all(&hidden).unwrap();
    std::fs::write(listed.join("mod.py"), "listed-content\n").unwrap();
    std::fs::write(hidden.join("data.txt"), "hidden-content\n").unwrap();
    let declared = capsule(
        "interp-rt",
        &format!(
            "    interpreter_runtime:\n      - binary: python3.11\n        dirs:\n          - {{path: {}, list_dir: true}}\n          - {{path: {}, list_dir: false}}\n",
            listed.display(),
            hidden.display()
        ),
    );
    let plain = capsule("interp-rt-plain", "");
    for c in [&declared, &plain] {
        std::fs::write(c.workdir.join("rt.py"), RUNTIME_PROBE).unwrap();
    }
    let args = [
        "python3.11",
        "rt.py",
        listed.to_str().unwrap(),
        hidden.to_str().unwrap(),
    ];
    for class in classes() {
        let name = class.unwrap_or_else(|c| c);
        let out = declared.exec(name, &args);
        let stderr = text(&out.stderr);
        let class = match class {
            Err(class) => {
                assert_refused(class, &out);
                continue;
            }
            Ok(class) => class,
        };
        // The warning names what it opens, at every launch.
        let warning = stderr
            .lines()
            .find(|l| l.starts_with("warning[W-SEC-009]: "))
            .unwrap_or_else(|| panic!("{class}: no W-SEC-009: {stderr}"));
        assert!(
            warning.contains(&format!("{} (read, list)", listed.display()))
                && warning.contains(&format!("{} (read, no listing)", hidden.display())),
            "{warning}"
        );
        let r: serde_json::Value = serde_json::from_str(text(&out.stdout).trim())
            .unwrap_or_else(|e| panic!("{class}: {e}: {}", stderr));
        assert_eq!(
            r,
            serde_json::json!({
                "read-listed": "listed-content",
                "list-listed": ["mod.py"],
                "read-hidden": "hidden-content",
                "list-hidden": 13,
            }),
            "{class}"
        );
        // Without the declaration, the same directories stay closed.
        let out = plain.exec(class, &args);
        assert!(!text(&out.stderr).contains("W-SEC-009"), "{class}");
        let r: serde_json::Value = serde_json::from_str(text(&out.stdout).trim())
            .unwrap_or_else(|e| panic!("{class}: {e}: {}", text(&out.stderr)));
        let closed = if class == "sealed" { 2 } else { 13 };
        for k in ["read-listed", "list-listed", "read-hidden", "list-hidden"] {
            assert_eq!(r[k], closed, "{class}: {r}");
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn a_runtime_directory_declared_in_the_workdir_cannot_be_redirected_by_the_command() {
    // The command may leave a symlink where the manifest declares a runtime directory
    // inside its workdir; the next launch must not resolve it into a grant of wherever it
    // points (here a host directory holding a secret).
    let base =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("murmur-interp-redirect-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let secret_dir = base.join("secret-dir");
    std::fs::create_dir_all(&secret_dir).unwrap();
    let secret = secret_dir.join("secret.txt");
    std::fs::write(&secret, "host secret\n").unwrap();
    let t = TempDir::new("interp-redirect");
    let workdir = std::fs::canonicalize(t.path()).unwrap().join("work");
    std::fs::create_dir_all(&workdir).unwrap();
    let declared = workdir.join("rt");
    let c = capsule(
        "interp-redirect",
        &format!(
            "    interpreter_runtime:\n      - binary: cat\n        dirs:\n          - {{path: {}, list_dir: true}}\n",
            declared.display()
        ),
    );
    // What a previous run of the command left behind.
    std::os::unix::fs::symlink(&secret_dir, &declared).unwrap();
    let exec = |class: &str| {
        Command::new(MUR)
            .args(["exec", "--manifest"])
            .arg(&c.manifest)
            .arg("--workdir")
            .arg(&workdir)
            .args(["--containment", class, "--", "cat"])
            .arg(&secret)
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    for class in classes() {
        let out = exec(class.unwrap_or_else(|c| c));
        match class {
            Err(class) => assert_refused(class, &out),
            Ok(class) => {
                assert_ne!(out.status.code(), Some(0), "{class}: {}", text(&out.stdout));
                assert!(!text(&out.stdout).contains("host secret"), "{class}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
