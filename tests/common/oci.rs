//! Registries for the `mur push/pull/install` tests, all on 127.0.0.1: the CNCF
//! distribution registry (Debian's `docker-registry`, installed by `.ci/run`) as its own
//! process with a temporary storage directory, over plain HTTP or over TLS with a CA and
//! certificate made by `openssl` here, stopped by PID; and a scripted registry that lies.

use super::{Running, TempDir};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::capsule::MUR;

/// A running distribution registry.
pub struct Registry {
    _process: Running,
    pub host: String,
    /// The CA that signed its certificate (TLS only).
    pub ca: Option<PathBuf>,
}

impl Registry {
    /// `oci://` (TLS) or `oci+http://` and the host, then `/REPO`.
    pub fn url(&self, repo: &str) -> String {
        let scheme = if self.ca.is_some() { "oci" } else { "oci+http" };
        format!("{scheme}://{}/{repo}", self.host)
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Start `docker-registry` with its storage under `t`, over TLS when `tls`.
pub fn start(t: &TempDir, tls: bool) -> Registry {
    start_as(t, if tls { "tls" } else { "http" })
}

/// Start `docker-registry` over TLS with a self-signed certificate of the common kind (one
/// `openssl req -x509`: a CA certificate serving as its own server certificate); `ca` is
/// that certificate.
pub fn start_self_signed(t: &TempDir) -> Registry {
    start_as(t, "self-signed")
}

/// `kind`: `http`, `tls` (a CA and a server certificate it signed) or `self-signed`.
fn start_as(t: &TempDir, kind: &str) -> Registry {
    let dir = t.path().join(format!("registry-{kind}"));
    std::fs::create_dir_all(dir.join("storage")).unwrap();
    let tls = kind != "http";
    let ca = match kind {
        "tls" => Some(make_certificate(&dir)),
        "self-signed" => Some(make_self_signed(&dir)),
        _ => None,
    };
    let port = free_port();
    let tls_block = if tls {
        format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("server.pem").display(),
            dir.join("server.key").display()
        )
    } else {
        String::new()
    };
    let config = format!(
        "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n{tls_block}",
        dir.join("storage").display()
    );
    std::fs::write(dir.join("config.yml"), config).unwrap();
    let binary = ["/usr/bin/docker-registry", "/usr/sbin/docker-registry"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("docker-registry is not installed (apt-get install docker-registry; .ci/run does)");
    let mut cmd = Command::new(binary);
    cmd.arg("serve")
        .arg(dir.join("config.yml"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let process = Running::spawn(cmd);
    let until = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "docker-registry did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    Registry {
        _process: process,
        host: format!("127.0.0.1:{port}"),
        ca,
    }
}

/// `openssl ARGS` in `dir`, which must succeed.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// One self-signed certificate for 127.0.0.1 (`server.pem`, `server.key`) in `dir`, as
/// `openssl req -x509` makes it by default (basic constraints CA:TRUE); its path.
fn make_self_signed(dir: &Path) -> PathBuf {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
    );
    dir.join("server.pem")
}

/// A CA and a server certificate for 127.0.0.1 signed by it, in `dir`; the CA's path.
pub fn make_certificate(dir: &Path) -> PathBuf {
    let run = |args: &[&str]| openssl(dir, args);
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=murmur test CA",
    ]);
    run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    dir.join("ca.pem")
}

/// `mur ARGS` with HOME under `t` (no credentials, no user config) and `env`.
pub fn mur(t: &TempDir, args: &[&str], env: &[(&str, &str)]) -> Output {
    let home = t.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = Command::new(MUR);
    cmd.args(args)
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("REGISTRY_AUTH_FILE")
        .env_remove("DOCKER_CONFIG")
        .env_remove("MURMUR_CA_FILE")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// One request as the lying registry saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub authorization: Option<String>,
}

/// What the lying registry answers a request with: raw bytes, written and then the
/// connection closed (or, for `Endless`, a body that never ends).
pub enum Reply {
    Raw(Vec<u8>),
    Endless,
}

/// An HTTP/1.1 answer with a content-length.
pub fn answer(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut out = format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    Reply::Raw(bytes)
}

/// A scripted registry on 127.0.0.1: each request goes to `script`; every request is kept.
pub struct Liar {
    pub host: String,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
}

impl Liar {
    pub fn start(script: impl Fn(&Seen) -> Reply + Send + 'static) -> Liar {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        listener.set_nonblocking(true).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                let Some(req) = read_request(&mut s) else { continue };
                seen2.lock().unwrap().push(req.clone());
                match script(&req) {
                    Reply::Raw(bytes) => {
                        let _ = s.write_all(&bytes);
                    }
                    Reply::Endless => {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n");
                        let chunk = vec![b'z'; 64 * 1024];
                        while s.write_all(&chunk).is_ok() {}
                    }
                }
            }
        });
        Liar { host, seen, stop }
    }

    pub fn url(&self, repo: &str) -> String {
        format!("oci+http://{}/{repo}", self.host)
    }
}

impl Drop for Liar {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The request line and authorization of one request (its body read and dropped).
fn read_request(s: &mut TcpStream) -> Option<Seen> {
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let end = loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_string();
    let mut lines = head.lines();
    let mut first = lines.next()?.split(' ');
    let (method, path) = (first.next()?.to_string(), first.next()?.to_string());
    let mut authorization = None;
    let mut length = 0usize;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            match k.trim().to_ascii_lowercase().as_str() {
                "authorization" => authorization = Some(v.trim().to_string()),
                "content-length" => length = v.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    let mut have = buf.len() - end;
    while have < length {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        have += n;
    }
    Some(Seen {
        method,
        path,
        authorization,
    })
}
