//! The operator resource plane (`exports.files`) through the real `mur run --json`: the slow
//! fixture kept up between tasks over a workdir the test owns, launched with an optional
//! containment floor (an E-CAP-003 refusal comes back to be asserted, never skipped), raw
//! HTTP/1.1 requests whose bodies stay bytes, blocking A2A sends, and the session's trace.
#![allow(dead_code)]

use super::capsule::{manifest_arg, MUR};
use super::door::{lifecycle, send_params, wait_for, SLOW};
use super::{Running, TempDir};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// An `exports.files` block.
pub fn exports(root: &str, max_bytes: &str) -> String {
    format!("exports:\n  files:\n    root: {root}\n    mode: read-only\n    max_bytes: {max_bytes}\n")
}

/// A capsule directory of the slow fixture that stays up between tasks (`queue` + `sleep`),
/// with `extra` manifest YAML.
pub fn capsule(t: &TempDir, extra: &str) -> PathBuf {
    let life = lifecycle(&["task_acceptance: queue", "after_task: sleep", "queue_depth: 2"]);
    super::capsule::capsule(t, SLOW, &format!("{life}{extra}"))
}

/// The workdir the test owns, `<t>/work` (created); the records go to `<t>/records`.
pub fn workdir(t: &TempDir) -> PathBuf {
    let w = t.path().join("work");
    std::fs::create_dir_all(&w).unwrap();
    w
}

/// Write `bytes` at `path`, creating its parents.
pub fn put(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Lowercase hex of sha256(`b`).
pub fn sha_hex(b: &[u8]) -> String {
    Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

/// A file's modification time in Unix milliseconds (not following a symlink).
pub fn mtime_ms(p: &Path) -> u64 {
    let m = std::fs::symlink_metadata(p).unwrap().modified().unwrap();
    m.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A rename-into-place rewrite, as the spec tells a writer to do.
pub fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp-rewrite");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The listing's entry for `path` (panics when it is not listed).
pub fn entry<'a>(listing: &'a Value, path: &str) -> &'a Value {
    let all = listing["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries: {listing}"));
    all.iter()
        .find(|e| e["path"] == path)
        .unwrap_or_else(|| panic!("{path} not listed: {listing}"))
}

/// The listing's entry paths, in the order given.
pub fn paths_of(listing: &Value) -> Vec<&str> {
    let all = listing["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries: {listing}"));
    all.iter().map(|e| e["path"].as_str().unwrap()).collect()
}

/// One HTTP answer, its body kept as bytes.
pub struct Resp {
    pub status: u16,
    pub head: String,
    /// Field names lowercased, values trimmed, in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics with the whole answer if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

impl std::fmt::Debug for Resp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = &self.body[..self.body.len().min(600)];
        write!(
            f,
            "{}[{} body bytes] {}",
            self.head,
            self.body.len(),
            String::from_utf8_lossy(shown)
        )
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Read more of `s` into `buf` before `until`; false at the end of the stream.
fn fill(s: &mut TcpStream, buf: &mut Vec<u8>, until: Instant, what: &str) -> bool {
    let mut chunk = [0u8; 65536];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no whole answer to {what} in time; have {} bytes",
            buf.len()
        );
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return true;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                ) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return false,
            Err(e) => panic!("{what}: read failed after {} bytes: {e}", buf.len()),
        }
    }
}

/// Send `request` on a fresh connection; the answer (head, then `content-length` bytes of
/// body, or everything to the close when there is no length) within `within`.
pub fn exchange(addr: SocketAddr, request: &[u8], within: Duration) -> Resp {
    let what = String::from_utf8_lossy(&request[..request.len().min(120)]).into_owned();
    let until = Instant::now() + within;
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(request).unwrap();
    let mut buf = Vec::new();
    let end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let more = fill(&mut s, &mut buf, until, &what);
        assert!(
            more,
            "{what}: closed before a whole head: {:?}",
            String::from_utf8_lossy(&buf)
        );
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = super::status_of(&head);
    let headers: Vec<(String, String)> = head
        .split("\r\n")
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length = headers.iter().find(|(n, _)| n == "content-length").map(|(_, v)| {
        v.parse::<usize>()
            .unwrap_or_else(|_| panic!("bad content-length in {head}"))
    });
    if let Some(n) = length {
        buf.reserve(n);
    }
    while length.is_none_or(|n| buf.len() < end + n) {
        if !fill(&mut s, &mut buf, until, &what) {
            break;
        }
    }
    Resp {
        status,
        head,
        headers,
        body: buf.split_off(end),
    }
}

/// A running `mur run --json` over the test's workdir.
pub struct Plane {
    pub running: Running,
    pub addr: SocketAddr,
    pub port: u16,
    pub session_id: String,
    /// The workdir as announced.
    pub workdir: PathBuf,
    pub records: PathBuf,
    /// The achieved class and the export root [`Plane::served`] expects (advisory, `out/`).
    pub class: String,
    pub root: String,
    next_id: AtomicU64,
}

/// What a launch came to.
pub enum Launch {
    Up(Box<Plane>),
    /// The process ended before announcing: its exit code and stderr.
    Refused {
        code: Option<i32>,
        stderr: String,
    },
}

/// `mur run --json --manifest <dir>/murmur.yaml --workdir <workdir> [--containment <floor>]`
/// with private cache and records directories under `t`.
pub fn launch(t: &TempDir, dir: &Path, workdir: &Path, floor: Option<&str>) -> Launch {
    let mut cmd = Command::new(MUR);
    cmd.args(["run", "--json", "--manifest", &manifest_arg(dir)])
        .arg("--workdir")
        .arg(workdir);
    if let Some(c) = floor {
        cmd.args(["--containment", c]);
    }
    cmd.env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .env("MURMUR_SPEND_DIR", t.path().join("spend"))
        .env_remove("MURMUR_A2A_TIMEOUT_SECS")
        .env_remove("MURMUR_PROBE_DENY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut running = Running::spawn(cmd);
    // stderr is passed on as it comes and kept, so a refusal can be asserted.
    let mut err = running.child.stderr.take().unwrap();
    let drain = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut chunk = [0u8; 4096];
        while let Ok(n) = err.read(&mut chunk) {
            if n == 0 {
                break;
            }
            let _ = std::io::stderr().write_all(&chunk[..n]);
            all.extend_from_slice(&chunk[..n]);
        }
        all
    });
    let line = running.line();
    if line.is_empty() {
        let child = &mut running.child;
        let status = wait_for(Duration::from_secs(15), "a refused mur run to exit", || {
            child.try_wait().unwrap()
        });
        let stderr = String::from_utf8_lossy(&drain.join().unwrap()).into_owned();
        return Launch::Refused {
            code: status.code(),
            stderr,
        };
    }
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("announcement {line:?}: {e}"));
    let url = v["url"].as_str().unwrap();
    let port: u16 = url
        .strip_prefix("localhost:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected url {url:?}"));
    let session_id = v["session_id"].as_str().unwrap().to_string();
    Launch::Up(Box::new(Plane {
        running,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        port,
        records: t.path().join("records").join(&session_id),
        workdir: PathBuf::from(v["workdir"].as_str().unwrap()),
        session_id,
        class: "advisory".into(),
        root: "out/".into(),
        next_id: AtomicU64::new(1),
    }))
}

/// A launch without a floor (achieved `advisory`); panics if it does not come up.
pub fn up(t: &TempDir, dir: &Path, workdir: &Path) -> Plane {
    match launch(t, dir, workdir, None) {
        Launch::Up(p) => *p,
        Launch::Refused { code, stderr } => panic!("mur run ended ({code:?}): {stderr}"),
    }
}

/// A launch at floor `class` (`advisory` passes no flag). `None` when this host cannot back
/// the class, after asserting that the launch was refused with E-CAP-003 naming it.
pub fn up_at(t: &TempDir, dir: &Path, workdir: &Path, class: &str) -> Option<Plane> {
    let floor = (class != "advisory").then_some(class);
    match launch(t, dir, workdir, floor) {
        Launch::Up(mut p) => {
            p.class = class.into();
            Some(*p)
        }
        Launch::Refused { code, stderr } => {
            let want = format!("error[E-CAP-003]: containment floor not met: declared '{class}'");
            assert_eq!(code, Some(1), "{stderr}");
            assert!(
                stderr.lines().any(|l| l.starts_with(&want)),
                "a '{class}' launch failed other than by E-CAP-003: {stderr}"
            );
            eprintln!(
                "this host cannot back '{class}': the launch was refused with E-CAP-003, as it must be"
            );
            None
        }
    }
}

impl Plane {
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `method target` with `body` on a fresh connection (answered within 20 s).
    pub fn request(&self, method: &str, target: &str, body: &[u8]) -> Resp {
        self.request_within(method, target, body, Duration::from_secs(20))
    }

    pub fn request_within(&self, method: &str, target: &str, body: &[u8], within: Duration) -> Resp {
        let mut req = format!(
            "{method} {target} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n",
            self.host()
        );
        if method != "GET" || !body.is_empty() {
            req.push_str(&format!("content-length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        exchange(self.addr, &bytes, within)
    }

    pub fn get(&self, target: &str) -> Resp {
        self.request("GET", target, b"")
    }

    /// `GET /resources/files/<rel>`, `rel` sent exactly as given.
    pub fn read(&self, rel: &str) -> Resp {
        self.get(&format!("/resources/files/{rel}"))
    }

    /// [`assert_served`] of a read of `rel` with this plane's class and root; the etag.
    pub fn served(&self, rel: &str, body: &[u8], generation: u64) -> String {
        assert_served(&self.read(rel), body, generation, &self.class, &self.root, rel)
    }

    /// `GET /resources/files`, which must answer 200 with a JSON object.
    pub fn list(&self) -> Value {
        let r = self.get("/resources/files");
        assert_eq!(r.status, 200, "{r:?}");
        assert!(
            r.header("content-type")
                .is_some_and(|c| c.starts_with("application/json")),
            "{r:?}"
        );
        let v = r.json();
        assert!(v.is_object(), "{v}");
        v
    }

    /// The listing's entry paths.
    pub fn paths(&self) -> Vec<String> {
        paths_of(&self.list()).into_iter().map(str::to_string).collect()
    }

    pub fn card_status(&self) -> u16 {
        self.get("/.well-known/agent-card.json").status
    }

    /// An A2A 0.3 JSON-RPC call; its `result` (it must not fail).
    pub fn rpc(&self, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let body =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
                .unwrap();
        let req = format!(
            "POST / HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            self.host(),
            body.len()
        );
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(&body);
        let r = exchange(self.addr, &bytes, Duration::from_secs(30));
        assert_eq!(r.status, 200, "{method}: {r:?}");
        let v = r.json();
        assert!(v.get("error").is_none(), "{method}: {v}");
        v["result"].clone()
    }

    /// `message/send` of `text`, blocking until the task settles; the task.
    pub fn run_task(&self, text: &str) -> Value {
        self.rpc(
            "message/send",
            send_params("message/send", text, json!({"blocking": true})),
        )
    }

    /// `message/send` of `text` answered at once; the task id.
    pub fn submit(&self, text: &str) -> String {
        let t = self.rpc(
            "message/send",
            send_params("message/send", text, json!({"blocking": false})),
        );
        t["id"].as_str().unwrap().to_string()
    }

    /// Wait until task `id` is in the 0.3 `state`.
    pub fn wait_state(&self, id: &str, state: &str, within: Duration) {
        wait_for(within, &format!("{id} to be {state}"), || {
            let t = self.rpc("tasks/get", json!({ "id": id }));
            (t["status"]["state"] == state).then_some(())
        })
    }

    /// The session's trace so far (complete lines only).
    pub fn trace(&self) -> Vec<Value> {
        super::trace_lines(&self.records)
    }

    pub fn events(&self, kind: &str) -> Vec<Value> {
        super::trace_events(&self.records, kind)
    }

    /// The first `kind` event that `pred` accepts, waited for up to 5 s.
    pub fn event_where(&self, kind: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        wait_for(Duration::from_secs(5), &format!("a {kind} event {what}"), || {
            self.events(kind).into_iter().find(|e| pred(e))
        })
    }

    /// The `resource_read` event of decoded `path` with `outcome`, checked against the
    /// spec's fields.
    pub fn read_event(&self, path: &str, outcome: &str) -> Value {
        let e = self.event_where("resource_read", &format!("for {path:?} with {outcome}"), |e| {
            e["path"] == path && e["outcome"] == outcome
        });
        for k in ["generation", "containment_achieved", "reason", "bytes", "sha256"] {
            assert!(e.get(k).is_some(), "resource_read without {k}: {e}");
        }
        assert_eq!(e["session_id"], self.session_id.as_str(), "{e}");
        if outcome == "ok" {
            assert!(e["bytes"].is_u64() && e["sha256"].is_string(), "{e}");
            assert!(e["reason"].is_null(), "{e}");
        } else {
            assert!(e["bytes"].is_null() && e["sha256"].is_null(), "{e}");
            assert!(e["reason"].as_str().is_some_and(|r| !r.is_empty()), "{e}");
        }
        e
    }
}

/// Assert `r` is the refusal `status`/`code`: a JSON body of exactly `error` and a non-empty
/// `message`.
pub fn assert_refused(r: &Resp, status: u16, code: &str, what: &str) {
    assert_eq!(r.status, status, "{what}: {r:?}");
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{what}: {r:?}"
    );
    let v = r.json();
    assert_eq!(v["error"], code, "{what}: {v}");
    assert!(
        v["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {v}"
    );
    assert_eq!(
        v.as_object().unwrap().len(),
        2,
        "{what}: only error and message: {v}"
    );
}

/// Assert `r` is a 200 read of exactly `body` with every validator header the spec lists;
/// the etag.
pub fn assert_served(r: &Resp, body: &[u8], generation: u64, class: &str, root: &str, what: &str) -> String {
    assert_eq!(r.status, 200, "{what}: {r:?}");
    assert!(
        r.body == body,
        "{what}: served {} bytes, expected {}",
        r.body.len(),
        body.len()
    );
    assert_eq!(
        r.header("content-type"),
        Some("application/octet-stream"),
        "{what}: {r:?}"
    );
    assert_eq!(
        r.header("content-length"),
        Some(body.len().to_string().as_str()),
        "{what}: {r:?}"
    );
    let etag = format!("\"sha256:{}\"", sha_hex(body));
    assert_eq!(r.header("etag"), Some(etag.as_str()), "{what}: {r:?}");
    assert!(
        r.header("x-murmur-mtime-ms")
            .is_some_and(|m| m.parse::<u64>().is_ok()),
        "{what}: {r:?}"
    );
    assert_eq!(
        r.header("x-murmur-generation"),
        Some(generation.to_string().as_str()),
        "{what}: {r:?}"
    );
    assert_eq!(r.header("x-murmur-containment"), Some(class), "{what}: {r:?}");
    assert_eq!(r.header("x-murmur-export-root"), Some(root), "{what}: {r:?}");
    assert!(
        r.header("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close")),
        "{what}: {r:?}"
    );
    etag
}

/// Assert every listed entry with a digest reads back as exactly what the listing says.
pub fn assert_listing_reads_back(p: &Plane, listing: &Value) {
    for e in listing["entries"].as_array().unwrap() {
        let path = e["path"].as_str().unwrap();
        let Some(sha) = e["sha256"].as_str() else { continue };
        let r = p.read(&encode(path));
        assert_eq!(r.status, 200, "listed {path} does not read: {r:?}");
        assert_eq!(
            r.header("etag"),
            Some(format!("\"sha256:{sha}\"").as_str()),
            "{path}"
        );
        assert_eq!(e["size_bytes"], r.body.len() as u64, "{path}");
        assert_eq!(sha, sha_hex(&r.body), "{path}");
    }
}

/// Percent-encode everything but unreserved characters and `/`.
pub fn encode(path: &str) -> String {
    path.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
