//! The world of a delegation test: `/proc` readers, the temp dir with its registry, records
//! root, `HOME` and roost, and the capsules the test starts itself.

use super::*;
use crate::common::agent::{files_under, publish_zip, Drv, KEY, KEY_VAR};
use crate::common::capsule::MUR;
use crate::common::provider::Provider;
use crate::common::roost::Daemon;
use crate::common::TempDir;
use murmur::registry::{self, archive};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Processes.
// ---------------------------------------------------------------------------------------

/// A process as `/proc` shows it.
#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    pub args: Vec<String>,
    pub environ: Vec<u8>,
}

impl Proc {
    /// The arguments joined by spaces.
    pub fn cmdline(&self) -> String {
        self.args.join(" ")
    }

    /// The environment as name → value.
    pub fn env(&self) -> BTreeMap<String, String> {
        self.environ
            .split(|b| *b == 0)
            .filter(|e| !e.is_empty())
            .filter_map(|e| {
                let s = String::from_utf8_lossy(e);
                s.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect()
    }

    /// Whether `args` holds `pair[0]` immediately followed by `pair[1]`.
    pub fn has_pair(&self, flag: &str, value: &str) -> bool {
        self.args.windows(2).any(|w| w[0] == flag && w[1] == value)
    }
}

/// Every process (but this one) whose command line mentions `needle`.
pub fn procs_mentioning(needle: &str) -> Vec<Proc> {
    let me = std::process::id();
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args.iter().any(|a| a.contains(needle)) {
            continue;
        }
        let status = std::fs::read_to_string(e.path().join("status")).unwrap_or_default();
        let ppid = crate::common::status_field(&status, "PPid:").parse().unwrap_or(0);
        let environ = std::fs::read(e.path().join("environ")).unwrap_or_default();
        out.push(Proc {
            pid,
            ppid,
            args,
            environ,
        });
    }
    out
}

/// SIGKILL to `pid`.
pub fn sigkill(pid: u32) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
}

// ---------------------------------------------------------------------------------------
// A formation's world.
// ---------------------------------------------------------------------------------------

/// A temp dir holding a registry (the OpenAI driver published), the records root, a `HOME`,
/// the workdirs of the capsules the test starts itself, their output, and (once started) the
/// roost.
pub struct Formation {
    pub t: TempDir,
    pub reg: PathBuf,
    pub records: PathBuf,
    pub home: PathBuf,
    pub work: PathBuf,
    pub logs: PathBuf,
    pub roost: Option<Daemon>,
    n: AtomicUsize,
}

/// The arguments of `mur run` for registry capsule `name` over `workdir`.
pub fn run_args(reg: &Path, name: &str, workdir: &Path, task: Option<&str>) -> Vec<String> {
    let mut a: Vec<String> = [
        "run",
        "--capsule",
        name,
        "--capsule-version",
        V,
        "--registry-path",
        reg.to_str().unwrap(),
        "--workdir",
        workdir.to_str().unwrap(),
        "--json",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(t) = task {
        a.push("--task".into());
        a.push(t.into());
    }
    a
}

/// A finished `mur run`.
#[derive(Debug)]
pub struct Ended {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ended {
    pub fn both(&self) -> String {
        format!(
            "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    /// The session id of the `--json` line.
    pub fn sid(&self) -> String {
        let line = self.stdout.lines().next().unwrap_or_default();
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {}", self.both()));
        sv(&v, "session_id").to_string()
    }

    /// Exit 1, nothing on stdout, and `error[<code>]` on stderr carrying every `part`.
    pub fn assert_refused(&self, code: &str, parts: &[&str]) {
        assert_eq!(self.code, Some(1), "{}", self.both());
        assert_eq!(self.stdout, "", "{}", self.both());
        assert!(
            self.stderr.contains(&format!("error[{code}]")),
            "want {code}\n{}",
            self.both()
        );
        for p in parts {
            assert!(self.stderr.contains(p), "want {p:?}\n{}", self.both());
        }
    }
}

impl Formation {
    pub fn new(label: &str) -> Formation {
        let t = TempDir::new(label);
        let reg = t.path().join("registry");
        let records = t.path().join("records");
        let home = t.path().join("home");
        let work = t.path().join("work");
        let logs = t.path().join("logs");
        for d in [&reg, &records, &home, &work, &logs] {
            std::fs::create_dir_all(d).unwrap();
        }
        publish_zip(&reg, &Drv::OpenAi.archive());
        Formation {
            t,
            reg,
            records,
            home,
            work,
            logs,
            roost: None,
            n: AtomicUsize::new(0),
        }
    }

    /// Publish `cap` pointed at `p`; its sha256.
    pub fn publish(&self, p: &Provider, cap: &Cap) -> String {
        self.publish_yaml(&cap.yaml(p), &[])
    }

    /// Publish a manifest with extra archive entries; its sha256.
    pub fn publish_yaml(&self, yaml: &str, extra: &[(&str, &[u8])]) -> String {
        let mut files = vec![("murmur.yaml".to_string(), yaml.as_bytes().to_vec())];
        files.extend(extra.iter().map(|(n, b)| (n.to_string(), b.to_vec())));
        let bytes = archive::write(&files).unwrap();
        let (_, sha, _) =
            registry::publish(&self.reg, &bytes, None).unwrap_or_else(|d| panic!("publish: {d}"));
        sha
    }

    /// Start `mur-roost` on the registry with `--spawn-allow` for each of `top`, then `args`.
    pub fn start_roost(&mut self, top: &[&str], args: &[&str]) {
        let mut all: Vec<&str> = Vec::new();
        for t in top {
            all.extend(["--spawn-allow", t]);
        }
        all.extend_from_slice(args);
        self.roost = Some(Daemon::start(&self.reg, &all, &[]));
    }

    pub fn roost(&self) -> &Daemon {
        self.roost.as_ref().expect("the roost is started")
    }

    /// `http://127.0.0.1:<port>` of the roost.
    pub fn roost_url(&self) -> String {
        format!("http://{}", self.roost().host())
    }

    /// The environment a top-level capsule starts with: `PATH`, `HOME`, the records root,
    /// the provider key and, once the roost runs, `MURMUR_ROOST_URL`; nothing else.
    pub fn env(&self) -> BTreeMap<String, String> {
        let mut e = BTreeMap::new();
        e.insert(
            "PATH".into(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
        );
        e.insert("HOME".into(), self.home.display().to_string());
        e.insert("MURMUR_RECORDS_DIR".into(), self.records.display().to_string());
        e.insert(KEY_VAR.into(), KEY.into());
        if self.roost.is_some() {
            e.insert("MURMUR_ROOST_URL".into(), self.roost_url());
        }
        e
    }

    /// A fresh workdir for a capsule the test starts itself.
    pub fn workdir(&self, name: &str) -> PathBuf {
        let n = self.n.fetch_add(1, Ordering::SeqCst);
        let d = self.work.join(format!("{name}-{n}"));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn command(
        &self,
        args: &[String],
        env: &BTreeMap<String, String>,
        tag: &str,
    ) -> (Command, PathBuf, PathBuf) {
        let n = self.n.fetch_add(1, Ordering::SeqCst);
        let out = self.logs.join(format!("{tag}-{n}.stdout"));
        let err = self.logs.join(format!("{tag}-{n}.stderr"));
        let mut cmd = Command::new(MUR);
        cmd.args(args)
            .env_clear()
            .envs(env)
            .current_dir(self.t.path())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap());
        (cmd, out, err)
    }

    /// Start registry capsule `name` with `task`, in a fresh workdir and `env`; waits for its
    /// `--json` line.
    pub fn start(&self, name: &str, task: Option<&str>, env: &BTreeMap<String, String>) -> Capsule {
        let wd = self.workdir(name);
        let (mut cmd, out, err) = self.command(&run_args(&self.reg, name, &wd, task), env, name);
        cmd.stdin(Stdio::null());
        let child = cmd.spawn().unwrap();
        Capsule::announced(child, out, err)
    }

    /// `mur` with `args` and `env` to its end (at most 180 s); `stdin` written and closed when
    /// given, else standard input is empty.
    pub fn run_to_end(&self, args: &[String], env: &BTreeMap<String, String>, stdin: Option<&str>) -> Ended {
        let (mut cmd, out, err) = self.command(args, env, "run");
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd.spawn().unwrap();
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            let _ = pipe.write_all(text.as_bytes());
        }
        let until = Instant::now() + ANNOUNCE;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() >= until {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "mur {args:?} ran past {ANNOUNCE:?}\n{}",
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        };
        Ended {
            code: status.code(),
            stdout: std::fs::read_to_string(&out).unwrap_or_default(),
            stderr: std::fs::read_to_string(&err).unwrap_or_default(),
        }
    }

    /// The records directory of session `sid`.
    pub fn records_of(&self, sid: &str) -> PathBuf {
        self.records.join(sid)
    }

    /// What `mur trace --session SID` prints of session `sid`.
    pub fn trace_text(&self, sid: &str) -> String {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
            .args(["trace", "--session", sid])
            .env("MURMUR_RECORDS_DIR", &self.records)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The trace of session `sid` so far (complete lines).
    pub fn trace(&self, sid: &str) -> Vec<Value> {
        crate::common::trace_lines(&self.records_of(sid))
    }

    /// `completion.json` of session `sid`: its text and its value, when it is there and whole.
    pub fn completion(&self, sid: &str) -> Option<(String, Value)> {
        let text = std::fs::read_to_string(self.records_of(sid).join("completion.json")).ok()?;
        let v = serde_json::from_str(&text).ok()?;
        Some((text, v))
    }

    /// `completion.json` of `sid` once its `delivered` is `delivered`.
    pub fn settled_completion(&self, sid: &str, delivered: bool) -> (String, Value) {
        wait_for(
            WAIT,
            &format!("completion.json of {sid} with delivered {delivered}"),
            || self.completion(sid).filter(|(_, v)| v["delivered"] == delivered),
        )
    }

    /// The session directories under the records root.
    pub fn sessions(&self) -> Vec<String> {
        names_in(&self.records)
    }

    /// Every process whose command line mentions this test's directory, but the roost.
    pub fn procs(&self) -> Vec<Proc> {
        let roost = self.roost.as_ref().map(|d| d.run.child.id());
        procs_mentioning(self.t.path().to_str().unwrap())
            .into_iter()
            .filter(|p| Some(p.pid) != roost)
            .collect()
    }

    /// Wait until no process but the roost mentions this test's directory, and no session
    /// of the formation still has a pids cgroup (`murmur-<session id>` beside this test's
    /// own cgroup, where every `mur` of the formation makes its session's).
    pub fn assert_nothing_left(&self) {
        let until = Instant::now() + WAIT;
        loop {
            let left = self.procs();
            let cgroups: Vec<PathBuf> = own_cgroup_dir()
                .map(|dir| {
                    self.sessions()
                        .iter()
                        .map(|sid| dir.join(format!("murmur-{sid}")))
                        .filter(|d| d.exists())
                        .collect()
                })
                .unwrap_or_default();
            if left.is_empty() && cgroups.is_empty() {
                return;
            }
            assert!(
                Instant::now() < until,
                "session cgroups outlived the formation: {cgroups:#?}"
            );
            assert!(
                Instant::now() < until,
                "processes outlived the formation: {:#?}",
                left.iter().map(Proc::cmdline).collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `GET /status/<sid>` once its `status` is `want`.
    pub fn roost_status(&self, sid: &str, want: &str) -> Value {
        wait_for(WAIT, &format!("roost status {want} of {sid}"), || {
            let s = self.roost().status(sid);
            (s["status"] == want).then_some(s)
        })
    }

    /// What every session left, for assertion messages: each trace's event types and the
    /// output of the processes the test started.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for sid in self.sessions() {
            let kinds: Vec<String> = self
                .trace(&sid)
                .iter()
                .map(|e| {
                    let k = e["event_type"].as_str().unwrap_or("?").to_string();
                    match e.get("status") {
                        Some(st) if k == "delegation" => format!("{k}({st})"),
                        _ => k,
                    }
                })
                .collect();
            s.push_str(&format!("--- {sid}: {}\n", kinds.join(" ")));
        }
        for name in names_in(&self.logs) {
            let text = std::fs::read_to_string(self.logs.join(&name)).unwrap_or_default();
            if !text.is_empty() {
                s.push_str(&format!("--- {name}\n{text}"));
            }
        }
        s
    }

    /// No file under the test's directory holds a roost token.
    pub fn assert_no_token_in_files(&self) {
        let files = files_under(self.t.path());
        assert!(
            files.iter().any(|(p, _)| p.ends_with("trace.jsonl")),
            "no trace at all under {}",
            self.t.path().display()
        );
        for (path, bytes) in files {
            assert!(!holds_token(&bytes), "{} holds a roost token", path.display());
        }
    }
}

/// A capsule started by the test, left running; stdout and stderr go to files.
pub struct Capsule {
    pub child: Child,
    /// The `--json` line.
    pub line: Value,
    pub sid: String,
    pub port: u16,
    /// The accessible workdir, as announced.
    pub workdir: PathBuf,
    pub started: Instant,
    out: PathBuf,
    err: PathBuf,
    exit: Option<ExitStatus>,
}

impl Capsule {
    fn announced(child: Child, out: PathBuf, err: PathBuf) -> Capsule {
        let mut c = Capsule {
            child,
            line: Value::Null,
            sid: String::new(),
            port: 0,
            workdir: PathBuf::new(),
            started: Instant::now(),
            out,
            err,
            exit: None,
        };
        let out = c.out.clone();
        let line = crate::common::announcement(&out, ANNOUNCE, || c.try_exit().is_some())
            .unwrap_or_else(|| panic!("mur run never announced itself\n{}", c.both()));
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("announcement {line:?}: {e}\n{}", c.both()));
        c.sid = sv(&v, "session_id").to_string();
        c.port = sv(&v, "url")
            .strip_prefix("localhost:")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected url in {v}"));
        c.workdir = PathBuf::from(sv(&v, "workdir"));
        c.line = v;
        c
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    pub fn both(&self) -> String {
        format!(
            "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.exit,
            self.stdout(),
            self.stderr()
        )
    }

    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none() {
            self.exit = self.child.try_wait().unwrap();
        }
        self.exit
    }

    /// Wait up to `timeout` for the process to end.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(s) = self.try_exit() {
                return Some(s);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// The exit code, once it ended by itself within `timeout` (else panic, with `dump`).
    pub fn finish(&mut self, timeout: Duration, dump: impl Fn() -> String) -> Option<i32> {
        match self.wait_exit(timeout) {
            Some(s) => s.code(),
            None => panic!(
                "the capsule did not end within {timeout:?}\n{}\n{}",
                self.both(),
                dump()
            ),
        }
    }

    pub fn sigterm(&self) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}

impl Drop for Capsule {
    fn drop(&mut self) {
        if self.try_exit().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// This process's cgroup v2 directory, when there is one (children of the test start in it).
fn own_cgroup_dir() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = Path::new("/sys/fs/cgroup").join(rel.trim().trim_start_matches('/'));
    dir.is_dir().then_some(dir)
}
