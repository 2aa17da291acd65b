//! Agent capsules left running with their door open (`mur run --json`), and the A2A calls
//! the door tests make: `World::serve`, `Served`, and the request builders.
#![allow(dead_code)]

use super::agent::*;
use super::capsule::*;
use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// A served agent capsule: `mur run --json` left running, its door driven over raw HTTP.
// ---------------------------------------------------------------------------------------

/// The `lifecycle:` block of a manifest: `task_acceptance`, then `after_task` and
/// `queue_depth` when given.
pub fn lifecycle_yaml(acceptance: &str, after_task: Option<&str>, queue_depth: Option<u64>) -> String {
    let mut y = format!("lifecycle:\n  task_acceptance: {acceptance}\n");
    if let Some(a) = after_task {
        y.push_str(&format!("  after_task: {a}\n"));
    }
    if let Some(d) = queue_depth {
        y.push_str(&format!("  queue_depth: {d}\n"));
    }
    y
}

/// A unique message id for the tests' A2A messages.
pub fn message_id() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "msg-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// 1.0 `SendMessage` params for `text` (a fresh `messageId`), `returnImmediately` as given.
pub fn send_params_10(text: &str, return_immediately: bool) -> Value {
    serde_json::json!({
        "message": {"messageId": message_id(), "role": "ROLE_USER", "parts": [{"text": text}]},
        "configuration": {"returnImmediately": return_immediately},
    })
}

/// 0.3 `message/send` / `message/stream` params for `text`, `blocking` as given.
pub fn send_params_03(text: &str, blocking: bool) -> Value {
    serde_json::json!({
        "message": {"kind": "message", "messageId": message_id(), "role": "user", "parts": [{"kind": "text", "text": text}]},
        "configuration": {"blocking": blocking},
    })
}

/// One `mur run --json` of a world's capsule, left running. Its stdout and stderr go to
/// files (no pipe to fill); dropping it kills the process if it still runs.
pub struct Served {
    pub child: std::process::Child,
    /// The door's port (from the announcement's `url`, `localhost:<port>`).
    pub port: u16,
    pub sid: String,
    /// The announcement line.
    pub announced: Value,
    /// When the announcement was read.
    pub announced_at: Instant,
    out_path: PathBuf,
    err_path: PathBuf,
    exit: Option<std::process::ExitStatus>,
}

/// How long a served capsule may take to announce itself.
pub const ANNOUNCE_DEADLINE: Duration = Duration::from_secs(120);

impl World {
    /// `mur run --json --manifest .. --registry-path .. [--task TASK]` with the key and `env`
    /// in the environment, left running; waits for its announcement line.
    pub fn serve(&self, task: Option<&str>, env: &[(&str, &str)]) -> Served {
        self.serve_with(task, env, &[])
    }

    /// [`World::serve`] with more `mur run` arguments (`--workdir DIR`, ...).
    pub fn serve_with(&self, task: Option<&str>, env: &[(&str, &str)], args: &[&str]) -> Served {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let out_path = self.t.path().join(format!("served-{n}.stdout"));
        let err_path = self.t.path().join(format!("served-{n}.stderr"));
        let mut cmd = Command::new(super::capsule::MUR);
        cmd.args([
            "run",
            "--json",
            "--manifest",
            &manifest_arg(&self.dir),
            "--registry-path",
        ])
        .arg(&self.reg)
        .args(args);
        if let Some(t) = task {
            cmd.args(["--task", t]);
        }
        cmd.env("MURMUR_CACHE_DIR", self.t.path().join("cache"))
            .env("MURMUR_RECORDS_DIR", self.t.path().join("records"))
            .env("MURMUR_SPEND_DIR", self.t.path().join("spend"))
            .env(KEY_VAR, KEY)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap());
        let child = cmd.spawn().unwrap();
        let mut served = Served {
            child,
            port: 0,
            sid: String::new(),
            announced: Value::Null,
            announced_at: Instant::now(),
            out_path,
            err_path,
            exit: None,
        };
        let out_path = served.out_path.clone();
        let line = super::announcement(&out_path, ANNOUNCE_DEADLINE, || served.try_exit().is_some())
            .unwrap_or_else(|| panic!("mur run never announced itself\n{}", served.both()));
        served.announced_at = Instant::now();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("announcement {line:?}: {e}\n{}", served.both()));
        let url = v["url"].as_str().unwrap_or_default();
        served.port = url
            .strip_prefix("localhost:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected url in {v}"));
        served.sid = v["session_id"].as_str().unwrap_or_default().to_string();
        served.announced = v;
        served
    }

    /// `mur run --manifest .. --registry-path ..` without `--task`, to its end.
    pub fn run_without_task(&self, env: &[(&str, &str)]) -> Run {
        self.run_opt(None, env)
    }
}

impl Served {
    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Its stdout so far.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out_path).unwrap_or_default()
    }

    /// Its stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err_path).unwrap_or_default()
    }

    /// Both streams and the exit status, for assertion messages.
    pub fn both(&self) -> String {
        format!(
            "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.exit,
            self.stdout(),
            self.stderr()
        )
    }

    /// The exit status if the process has ended.
    pub fn try_exit(&mut self) -> Option<std::process::ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().unwrap();
        }
        self.exit
    }

    /// Wait up to `timeout` for the process to end.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_exit() {
                return Some(s);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM to the process, by its PID.
    pub fn sigterm(&self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    }

    /// SIGTERM, then its exit code (it must end within 60 s).
    pub fn stop(&mut self) -> Option<i32> {
        self.sigterm();
        let status = self.wait_exit(Duration::from_secs(60));
        assert!(
            status.is_some(),
            "mur run outlived SIGTERM by 60 s\n{}",
            self.both()
        );
        status.unwrap().code()
    }

    /// One raw request to the door: `POST /` with `body`, the loopback `host`, JSON content
    /// type and `headers`; the status and body of the answer.
    pub fn post(&self, body: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut req = format!(
            "POST / HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.port,
            body.len()
        );
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        let answer = super::exchange(self.addr(), req.as_bytes());
        (super::status_of(&answer), super::body_of(&answer).to_string())
    }

    /// A JSON-RPC call of `method` (a name without `/` is 1.0 and gets `A2A-Version: 1.0`)
    /// with `params` and `headers`; the whole response object (HTTP 200 asserted).
    pub fn rpc(&self, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut all: Vec<(&str, &str)> = headers.to_vec();
        if !method.contains('/') {
            all.push(("A2A-Version", "1.0"));
        }
        let (status, text) = self.post(&body.to_string(), &all);
        assert_eq!(status, 200, "{method}: {text}");
        // A 0.3 streaming call's error is the one event of an event stream.
        let json = match text.strip_prefix("data: ") {
            Some(event) if method.contains('/') => event.trim_end(),
            _ => text.as_str(),
        };
        serde_json::from_str(json).unwrap_or_else(|e| panic!("{method}: {e}: {text:?}"))
    }

    /// The `result` of a call that must succeed.
    pub fn result(&self, method: &str, params: Value, headers: &[(&str, &str)]) -> Value {
        let v = self.rpc(method, params, headers);
        assert!(v.get("error").is_none(), "{method}: {v}");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        assert_eq!(v["id"], 7, "{v}");
        v["result"].clone()
    }

    /// 1.0 `GetTask` of `id`: the task.
    pub fn get_task(&self, id: &str) -> Value {
        self.result("GetTask", serde_json::json!({"id": id}), &[])
    }

    /// Poll `GetTask` until the task is in a terminal state (or `timeout` passes: panic).
    pub fn settled(&self, id: &str, timeout: Duration) -> Value {
        let until = Instant::now() + timeout;
        loop {
            let t = self.get_task(id);
            let s = t["status"]["state"].as_str().unwrap_or("");
            if matches!(
                s,
                "TASK_STATE_COMPLETED" | "TASK_STATE_FAILED" | "TASK_STATE_CANCELED" | "TASK_STATE_REJECTED"
            ) {
                return t;
            }
            assert!(
                Instant::now() < until,
                "task {id} still {s} after {timeout:?}: {t}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Poll `GetTask` until the task's state is `state` (or `timeout` passes: panic).
    pub fn wait_state(&self, id: &str, state: &str, timeout: Duration) -> Value {
        let until = Instant::now() + timeout;
        loop {
            let t = self.get_task(id);
            if t["status"]["state"] == state {
                return t;
            }
            assert!(Instant::now() < until, "task {id} never reached {state}: {t}");
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// A streaming call: the raw answer (head and body, read until the door closes it or
    /// `timeout` passes) and the `data:` frames of its body, parsed.
    pub fn stream(&self, method: &str, params: Value, timeout: Duration) -> (String, Vec<Value>) {
        use std::io::{Read, Write};
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params}).to_string();
        let mut req = format!(
            "POST / HTTP/1.1\r\nhost: 127.0.0.1:{}\r\ncontent-type: application/json\r\naccept: text/event-stream\r\ncontent-length: {}\r\n",
            self.port,
            body.len()
        );
        if !method.contains('/') {
            req.push_str("A2A-Version: 1.0\r\n");
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let mut s = std::net::TcpStream::connect(self.addr()).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let until = Instant::now() + timeout;
        let mut out = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let left = until.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "the stream stayed open past {timeout:?}: {}",
                String::from_utf8_lossy(&out)
            );
            s.set_read_timeout(Some(left)).unwrap();
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => out.extend_from_slice(&chunk[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => panic!("stream read: {e}"),
            }
        }
        let raw = String::from_utf8_lossy(&out).into_owned();
        let frames = super::body_of(&raw)
            .split("\n\n")
            .filter_map(|f| f.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("frame {d:?}: {e}")))
            .collect();
        (raw, frames)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Helpers of the agent door tests (tests/agent_door*.rs): capsules with a lifecycle block,
/// recording hooks, and readers of the door's task shapes.
pub mod door_kit {
    use super::super::provider::Provider;
    use super::{
        hook_entry, kinds, lifecycle_yaml, publish_hook, publish_hook_as, send_params_10, Drv, Served, Spec,
        World,
    };
    use serde_json::{json, Value};
    use std::time::{Duration, Instant};

    /// How long a task of these tests may take to settle.
    pub const SETTLE: Duration = Duration::from_secs(60);
    pub const BUSY: &str = "task rejected: capsule is busy";

    /// A world whose capsule (OpenAI driver, mock `p`) has the lifecycle block `lifecycle`.
    pub fn world(label: &str, p: &Provider, lifecycle: &str) -> World {
        let w = World::new(label);
        manifest(&w, &Spec::new(Drv::OpenAi, p), lifecycle);
        w
    }

    /// Write `spec`'s manifest with the lifecycle block `lifecycle` after it.
    pub fn manifest(w: &World, spec: &Spec, lifecycle: &str) {
        w.manifest_text(&format!("{}{lifecycle}", spec.yaml()));
    }

    /// A world whose capsule also binds the recording hooks: `hook-recorder` unbound (every
    /// event, `hook-state/events.log`), and recorders bound to `on-task-start` only
    /// (`start-state/events.log`) and to `on-task-end` only (`end-state/events.log`).
    pub fn recorded_world(label: &str, p: &Provider, lifecycle: &str) -> World {
        let w = World::new(label);
        publish_hook(&w.reg, "hook-recorder");
        publish_hook_as(&w.reg, "rec-start", "hook-recorder", "binding: on-task-start\n");
        publish_hook_as(&w.reg, "rec-end", "hook-recorder", "binding: on-task-end\n");
        let mut spec = Spec::new(Drv::OpenAi, p);
        spec.artifacts = vec![
            hook_entry("hook-recorder", Some("{filesystem: {scope: hook-state}}")),
            hook_entry("rec-start", Some("{filesystem: {scope: start-state}}")),
            hook_entry("rec-end", Some("{filesystem: {scope: end-state}}")),
        ];
        manifest(&w, &spec, lifecycle);
        w
    }

    /// The lines a recorder wrote to `<scope>/events.log`, a call line's `ms=N` made `ms=_`.
    pub fn recorded(w: &World, sid: &str, scope: &str) -> Vec<String> {
        let path = w.workdir(sid).join(scope).join("events.log");
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .lines()
            .map(|l| match l.rfind(" ms=") {
                Some(at) => format!("{} ms=_", &l[..at]),
                None => l.to_string(),
            })
            .collect()
    }

    /// Whether a process whose command line contains `pattern` runs.
    pub fn alive(pattern: &str) -> bool {
        let out = std::process::Command::new("pgrep")
            .args(["-f", pattern])
            .output()
            .unwrap();
        !out.stdout.is_empty()
    }

    /// Wait until `f` holds or `timeout` passes; whether it held.
    pub fn until(timeout: Duration, f: impl Fn() -> bool) -> bool {
        let end = Instant::now() + timeout;
        loop {
            if f() {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The JSON-RPC error of a response (asserting it has no result): (code, message).
    pub fn rpc_error(v: &Value) -> (i64, String) {
        assert!(v.get("result").is_none(), "{v}");
        assert_eq!((&v["jsonrpc"], &v["id"]), (&json!("2.0"), &json!(7)), "{v}");
        (
            v["error"]["code"]
                .as_i64()
                .unwrap_or_else(|| panic!("no error code: {v}")),
            v["error"]["message"].as_str().unwrap_or_default().to_string(),
        )
    }

    pub fn queue_sleep(depth: u64) -> String {
        lifecycle_yaml("queue", Some("sleep"), Some(depth))
    }

    /// `tsk_`/`ctx_` followed by 32 hex digits.
    pub fn hex_id(v: &Value, prefix: &str) -> bool {
        v.as_str()
            .and_then(|s| s.strip_prefix(prefix))
            .is_some_and(|h| h.len() == 32 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    }

    /// An RFC 3339 UTC timestamp (`…Z`).
    pub fn rfc3339_z(v: &Value) -> bool {
        v.as_str()
            .is_some_and(|s| s.len() >= 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T')
    }

    /// The messageId a send's params carry.
    pub fn mid(params: &Value) -> String {
        params["message"]["messageId"].as_str().unwrap().to_string()
    }

    /// 1.0 `SendMessage` with `returnImmediately`: the task as answered (`result.task`).
    pub fn submit(s: &Served, text: &str, headers: &[(&str, &str)]) -> Value {
        let r = s.result("SendMessage", send_params_10(text, true), headers);
        assert_eq!(
            r.as_object().unwrap().len(),
            1,
            "a 1.0 send result is {{\"task\":…}}: {r}"
        );
        r["task"].clone()
    }

    pub fn id(task: &Value) -> String {
        task["id"].as_str().unwrap().to_string()
    }

    /// The one `response` artifact of a 1.0 task, as its text.
    pub fn response_10(task: &Value) -> String {
        let a = task["artifacts"]
            .as_array()
            .unwrap_or_else(|| panic!("no artifacts: {task}"));
        assert_eq!(a.len(), 1, "{task}");
        assert_eq!(
            a[0],
            json!({
                "artifactId": format!("{}-response", id(task)),
                "name": "response",
                "parts": [{"text": a[0]["parts"][0]["text"]}],
            }),
            "{task}"
        );
        a[0]["parts"][0]["text"].as_str().unwrap().to_string()
    }

    /// The event types of the trace without `inference` (its fields are checked elsewhere).
    pub fn outline(all: &[Value]) -> Vec<String> {
        kinds(all).into_iter().filter(|k| k != "inference").collect()
    }
}
