//! Helpers for the roost tests: a temporary registry filled through the registry library,
//! and the real `mur-roost` binary on an OS-assigned loopback port.
#![allow(dead_code)]

use super::{exchange, Running, TempDir};
use murmur::registry::{self, archive};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub const ROOST: &str = env!("CARGO_BIN_EXE_mur-roost");

/// Publish a manifest-only capsule `name@version` with `body` after its identity lines.
pub fn publish(reg: &Path, name: &str, version: &str, body: &str) -> String {
    publish_files(reg, name, version, body, &[])
}

/// Publish with extra archive entries (to vary the bytes at the same coordinates).
pub fn publish_files(reg: &Path, name: &str, version: &str, body: &str, extra: &[(&str, &[u8])]) -> String {
    let bare = name.rsplit('/').next().unwrap();
    let scope = name.split_once('/').map(|(s, _)| s);
    // Manifest-only capsules are agent capsules; keep the caller's own inference block.
    let agent = if body.contains("inference:") {
        ""
    } else {
        "inference: {transport: process}\n"
    };
    let yaml = format!("name: {bare}\nversion: {version}\n{agent}{body}");
    let mut files = vec![("murmur.yaml".to_string(), yaml.into_bytes())];
    for (n, b) in extra {
        files.push((n.to_string(), b.to_vec()));
    }
    let bytes = archive::write(&files).unwrap();
    let (_, sha, _) = registry::publish(reg, &bytes, scope).unwrap_or_else(|d| panic!("publish {name}: {d}"));
    sha
}

/// A running daemon.
pub struct Daemon {
    pub run: Running,
    pub addr: SocketAddr,
    pub ceiling_line: String,
    pub cwd: TempDir,
}

impl Daemon {
    /// Start `mur-roost --port 0 --registry-path REG ARGS...` in an empty working directory,
    /// with only `env` in its environment.
    pub fn start(reg: &Path, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        Daemon::start_with(reg, args, env, None)
    }

    /// [`Daemon::start`] with its descriptor limit (`RLIMIT_NOFILE`) set to `nofile` first.
    pub fn start_with(reg: &Path, args: &[&str], env: &[(&str, &str)], nofile: Option<u64>) -> Daemon {
        let cwd = TempDir::new("roost-cwd");
        let mut cmd = Command::new(ROOST);
        if let Some(n) = nofile {
            use std::os::unix::process::CommandExt;
            // SAFETY: one setrlimit on a stack value between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    let r = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd.arg("--port")
            .arg("0")
            .arg("--registry-path")
            .arg(reg)
            .args(args);
        cmd.env_clear().envs(env.iter().copied()).current_dir(cwd.path());
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut run = Running::spawn(cmd);
        let first = run.line();
        let port: u16 = first
            .strip_prefix("mur-roost: listening on 127.0.0.1:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected startup line {first:?}"));
        let ceiling_line = run.line();
        Daemon {
            run,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            ceiling_line,
            cwd,
        }
    }

    /// A request with `headers` and a raw body; (status, body).
    pub fn call(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let raw = self.raw(method, path, headers, body);
        (super::status_of(&raw), super::body_of(&raw).to_string())
    }

    /// The whole raw response. Unless `headers` name their own, a request carries the
    /// `host` a local client sends (`127.0.0.1:<port>`) and a POST carries
    /// `content-type: application/json`; name either to send another value, and see
    /// [`Daemon::send`] to leave one out.
    pub fn raw(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> String {
        let named = |want: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(want));
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        if !named("host") {
            req.push_str(&format!("host: {}\r\n", self.host()));
        }
        if method == "POST" && !named("content-type") {
            req.push_str("content-type: application/json\r\n");
        }
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        if method == "POST" {
            req.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.send(req.as_bytes())
    }

    /// Exactly `bytes` on a fresh connection; the whole raw response.
    pub fn send(&self, bytes: &[u8]) -> String {
        exchange(self.addr, bytes)
    }

    /// The `host` value naming this daemon: `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }

    /// Register `sid` as `name@version`, optionally with an approval; (status, body).
    pub fn register(&self, sid: &str, name: &str, version: &str, approval: Option<&str>) -> (u16, String) {
        let body = format!(r#"{{"session_id":"{sid}","name":"{name}","version":"{version}"}}"#);
        match approval {
            Some(a) => self.call("POST", "/register", &[("x-murmur-spawn-approval", a)], &body),
            None => self.call("POST", "/register", &[], &body),
        }
    }

    /// Register and return the credential, panicking on refusal.
    pub fn credential(&self, sid: &str, name: &str, version: &str, approval: Option<&str>) -> String {
        let (status, body) = self.register(sid, name, version, approval);
        assert_eq!(status, 200, "register {sid} as {name}: {body}");
        json(&body)["credential"].as_str().unwrap().to_string()
    }

    pub fn spawn(&self, credential: &str, name: &str, version: &str) -> (u16, String) {
        let body = format!(r#"{{"name":"{name}","version":"{version}"}}"#);
        self.call(
            "POST",
            "/spawn",
            &[("x-murmur-spawn-credential", credential)],
            &body,
        )
    }

    /// Spawn and return the approval, panicking on refusal.
    pub fn approval(&self, credential: &str, name: &str, version: &str) -> String {
        let (status, body) = self.spawn(credential, name, version);
        assert_eq!(status, 200, "spawn {name}: {body}");
        json(&body)["approval"].as_str().unwrap().to_string()
    }

    pub fn deregister(&self, credential: &str, outcome: &str) -> (u16, String) {
        let body = format!(r#"{{"outcome":"{outcome}"}}"#);
        self.call(
            "POST",
            "/deregister",
            &[("x-murmur-spawn-credential", credential)],
            &body,
        )
    }

    /// `GET /status/{sid}` as JSON (panics unless 200).
    pub fn status(&self, sid: &str) -> serde_json::Value {
        let (status, body) = self.call("GET", &format!("/status/{sid}"), &[], "");
        assert_eq!(status, 200, "{body}");
        json(&body)
    }
}

pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

pub fn error(body: &str) -> String {
    json(body)["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error field: {body}"))
        .to_string()
}

/// Every file under `dir` with its bytes, for before/after comparisons.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.push((p.clone(), Vec::new()));
                stack.push(p);
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}
