//! Helpers for the agent-capsule tests: a temporary registry holding the inference drivers
//! and test tools, an agent manifest pointed at the mock provider, one `mur run`, and what
//! the session left behind (result, trace, workdir, records).
#![allow(dead_code)]

use super::capsule::{manifest_arg, mur, records, repo, session_of, text, trace};
use super::provider::Provider;
use super::TempDir;
use murmur::registry::{self, archive};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

/// The provider key every test runs with, and the variable it comes from.
pub const KEY: &str = "sk-test-0123456789abcdef";
pub const KEY_VAR: &str = "MOCK_API_KEY";
/// The model name every manifest asks for.
pub const MODEL: &str = "mock-1";

/// The two real drivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drv {
    OpenAi,
    Anthropic,
}

impl Drv {
    pub const BOTH: [Drv; 2] = [Drv::OpenAi, Drv::Anthropic];

    pub fn name(self) -> &'static str {
        match self {
            Drv::OpenAi => "murmur-driver-openai",
            Drv::Anthropic => "murmur-driver-anthropic",
        }
    }

    /// The committed archive of the driver.
    pub fn archive(self) -> PathBuf {
        repo(&format!("artifacts/{}-1.0.0.mur.zip", self.name()))
    }

    /// `inference.endpoint` for the mock.
    pub fn endpoint(self, p: &Provider) -> String {
        match self {
            Drv::OpenAi => p.base_openai(),
            Drv::Anthropic => p.base_anthropic(),
        }
    }

    /// The header the driver's `upstream_auth` declares, and its value with [`KEY`].
    pub fn auth(self) -> (&'static str, String) {
        match self {
            Drv::OpenAi => ("authorization", format!("Bearer {KEY}")),
            Drv::Anthropic => ("x-api-key", KEY.to_string()),
        }
    }
}

/// Publish archive `bytes` into the registry at `reg`.
pub fn publish_bytes(reg: &Path, bytes: &[u8]) {
    registry::publish(reg, bytes, None).unwrap_or_else(|d| panic!("publish: {d}"));
}

/// Publish a committed `.mur.zip`.
pub fn publish_zip(reg: &Path, zip: &Path) {
    publish_bytes(
        reg,
        &std::fs::read(zip).unwrap_or_else(|e| panic!("{}: {e}", zip.display())),
    );
}

/// Publish an archive of `files` (`murmur.yaml` first).
pub fn publish_files(reg: &Path, files: &[(&str, &[u8])]) {
    let files: Vec<(String, Vec<u8>)> = files.iter().map(|(n, b)| (n.to_string(), b.to_vec())).collect();
    publish_bytes(reg, &archive::write(&files).unwrap());
}

/// A skill `name@1.0.0` whose `skill.md` is `body`.
pub fn publish_skill(reg: &Path, name: &str, description: &str, body: &str) {
    let yaml = format!("name: {name}\nversion: \"1.0.0\"\nruntime: skill\ndescription: {description:?}\n");
    publish_files(
        reg,
        &[("murmur.yaml", yaml.as_bytes()), ("skill.md", body.as_bytes())],
    );
}

/// A native tool `name@1.0.0` whose `bin/<name>` is `script`.
pub fn publish_native(reg: &Path, name: &str, script: &str) {
    let yaml =
        format!("name: {name}\nversion: \"1.0.0\"\nruntime: tool\ndescription: \"a native test tool\"\n");
    let bin = format!("bin/{name}");
    publish_files(
        reg,
        &[("murmur.yaml", yaml.as_bytes()), (&bin, script.as_bytes())],
    );
}

/// A WASM tool `name@1.0.0`: the echo-tool's component under the manifest `yaml_rest`
/// (everything after the identity lines and `runtime: tool`).
pub fn publish_wasm_tool(reg: &Path, name: &str, yaml_rest: &str) {
    let yaml = format!("name: {name}\nversion: \"1.0.0\"\nruntime: tool\n{yaml_rest}");
    let wasm = std::fs::read(repo("tests/fixtures/echo-tool/capsule.wasm")).unwrap();
    publish_files(reg, &[("murmur.yaml", yaml.as_bytes()), ("capsule.wasm", &wasm)]);
}

/// What a test capsule declares.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    /// The driver artifact (published and declared).
    pub driver: String,
    /// `inference.endpoint`.
    pub endpoint: String,
    /// Extra `network.allow` entries beside the endpoint's origin.
    pub network: Vec<String>,
    pub shell: Vec<String>,
    pub env_allow: Vec<String>,
    /// `capabilities.containment` (None: the default).
    pub containment: Option<String>,
    pub deadline_seconds: Option<u64>,
    /// More `artifacts:` entries, one flow mapping each (`{name: x, version: 1.0.0, runtime: tool}`).
    pub artifacts: Vec<String>,
    pub max_turns: u64,
    /// More lines under `inference:` (indented by two spaces already).
    pub inference_extra: String,
    /// `inference.driver.config`, as a YAML flow mapping.
    pub driver_config: Option<String>,
    /// The driver entry's own `capabilities:`, as a YAML flow mapping.
    pub driver_caps: Option<String>,
}

impl Spec {
    /// A capsule for `drv` talking to `p`, with `shell.allow: [bash]` and three turns.
    pub fn new(drv: Drv, p: &Provider) -> Spec {
        Spec {
            name: "agent-x".into(),
            driver: drv.name().into(),
            endpoint: drv.endpoint(p),
            network: Vec::new(),
            shell: vec!["bash".into()],
            env_allow: Vec::new(),
            containment: None,
            deadline_seconds: None,
            artifacts: Vec::new(),
            max_turns: 3,
            inference_extra: String::new(),
            driver_config: None,
            driver_caps: None,
        }
    }

    /// The origin of the endpoint (`http://127.0.0.1:P`).
    pub fn origin(&self) -> String {
        let (scheme, rest) = self.endpoint.split_once("://").expect("an absolute endpoint");
        format!("{scheme}://{}", rest.split('/').next().unwrap())
    }

    /// The manifest text.
    pub fn yaml(&self) -> String {
        let mut y = format!("name: {}\nversion: 0.1.0\nartifacts:\n", self.name);
        let caps = match &self.driver_caps {
            Some(c) => format!(", capabilities: {c}"),
            None => String::new(),
        };
        y.push_str(&format!(
            "  - {{name: {}, version: 1.0.0, runtime: driver{caps}}}\n",
            self.driver
        ));
        for a in &self.artifacts {
            y.push_str(&format!("  - {a}\n"));
        }
        y.push_str("capabilities:\n");
        let mut allow = vec![format!("{:?}", self.origin())];
        allow.extend(self.network.iter().map(|n| format!("{n:?}")));
        y.push_str(&format!("  network: {{allow: [{}]}}\n", allow.join(", ")));
        if !self.shell.is_empty() {
            y.push_str(&format!("  shell: {{allow: [{}]}}\n", self.shell.join(", ")));
        }
        if !self.env_allow.is_empty() {
            y.push_str(&format!("  env: {{allow: [{}]}}\n", self.env_allow.join(", ")));
        }
        if let Some(d) = self.deadline_seconds {
            y.push_str(&format!("  limits: {{deadline_seconds: {d}}}\n"));
        }
        if let Some(c) = &self.containment {
            y.push_str(&format!("  containment: {c}\n"));
        }
        y.push_str("inference:\n");
        y.push_str(&format!("  endpoint: {}\n", self.endpoint));
        y.push_str(&format!("  model: {MODEL}\n"));
        y.push_str(&format!("  api_key: ${{{KEY_VAR}}}\n"));
        match &self.driver_config {
            Some(c) => y.push_str(&format!("  driver: {{artifact: {}, config: {c}}}\n", self.driver)),
            None => y.push_str(&format!("  driver: {{artifact: {}}}\n", self.driver)),
        }
        y.push_str(&format!("  max_turns: {}\n", self.max_turns));
        y.push_str(&self.inference_extra);
        y
    }
}

/// A test world: a temp dir with a registry (both drivers published) and a capsule dir.
pub struct World {
    pub t: TempDir,
    pub reg: PathBuf,
    pub dir: PathBuf,
}

impl World {
    pub fn new(label: &str) -> World {
        let t = TempDir::new(label);
        let reg = t.path().join("registry");
        std::fs::create_dir_all(&reg).unwrap();
        for d in Drv::BOTH {
            publish_zip(&reg, &d.archive());
        }
        let dir = t.path().join("capsule");
        std::fs::create_dir_all(&dir).unwrap();
        World { t, reg, dir }
    }

    /// Write the manifest of `spec`.
    pub fn manifest(&self, spec: &Spec) {
        self.manifest_text(&spec.yaml());
    }

    pub fn manifest_text(&self, yaml: &str) {
        std::fs::write(self.dir.join("murmur.yaml"), yaml).unwrap();
    }

    /// `mur run --manifest .. --registry-path .. --task TASK` with the key in the
    /// environment and `env` added.
    pub fn run(&self, task: &str, env: &[(&str, &str)]) -> Run {
        self.run_opt(Some(task), env)
    }

    /// [`World::run`], with `--task` only when `task` is given.
    pub fn run_opt(&self, task: Option<&str>, env: &[(&str, &str)]) -> Run {
        let mut all: Vec<(&str, &str)> = vec![(KEY_VAR, KEY)];
        all.extend_from_slice(env);
        let manifest = manifest_arg(&self.dir);
        let mut args = vec![
            "--manifest",
            &manifest,
            "--registry-path",
            self.reg.to_str().unwrap(),
        ];
        if let Some(t) = task {
            args.extend(["--task", t]);
        }
        let started = Instant::now();
        let out = mur(&self.t, &args, &all);
        Run {
            elapsed: started.elapsed(),
            out,
        }
    }

    /// `mur run` as [`World::run`] does, not waited for (stdout and stderr discarded).
    pub fn start(&self, task: &str, env: &[(&str, &str)]) -> std::process::Child {
        self.command(task, env)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    }

    /// [`World::start`] with stdout and stderr kept, for [`World::stop`].
    pub fn start_piped(&self, task: &str) -> std::process::Child {
        self.command(task, &[])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// SIGTERM to a `mur run` from [`World::start_piped`], and its end, which must come
    /// within 10 s.
    pub fn stop(&self, child: std::process::Child) -> Run {
        let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
        let started = Instant::now();
        let out = child.wait_with_output().unwrap();
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?} after SIGTERM");
        Run { out, elapsed }
    }

    /// `mur run` as [`World::start`] runs it, as `account` (the world handed over to it
    /// first, its home inside the world), not started.
    pub fn command_as(&self, account: &super::unprivileged::Account, task: &str) -> std::process::Command {
        super::unprivileged::chown_tree(self.t.path());
        let mut c = account.command(self.command(task, &[]));
        c.env("HOME", self.t.path());
        c
    }

    fn command(&self, task: &str, env: &[(&str, &str)]) -> std::process::Command {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_mur"));
        c.args(["run", "--manifest", &manifest_arg(&self.dir), "--registry-path"])
            .arg(&self.reg)
            .args(["--task", task])
            .env("MURMUR_CACHE_DIR", self.t.path().join("cache"))
            .env("MURMUR_RECORDS_DIR", self.t.path().join("records"))
            .env("MURMUR_SPEND_DIR", self.t.path().join("spend"))
            .env(KEY_VAR, KEY)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null());
        c
    }

    /// The session's workdir.
    pub fn workdir(&self, sid: &str) -> PathBuf {
        self.dir.join("workdir").join(sid)
    }

    pub fn records(&self, sid: &str) -> PathBuf {
        records(&self.t, sid)
    }

    pub fn trace(&self, sid: &str) -> Vec<Value> {
        trace(&self.t, sid)
    }

    /// `out/result.txt` of the session.
    pub fn result(&self, sid: &str) -> String {
        let p = self.workdir(sid).join("out/result.txt");
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Whether any session left a workdir or a records directory.
    pub fn assert_no_session(&self) {
        assert!(!self.dir.join("workdir").exists(), "a workdir was created");
        let recs = self.t.path().join("records");
        let left: Vec<_> = std::fs::read_dir(&recs)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "records were created: {left:?}");
    }
}

/// One finished `mur run`.
pub struct Run {
    pub out: Output,
    pub elapsed: Duration,
}

impl Run {
    pub fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    pub fn stdout(&self) -> String {
        text(&self.out.stdout)
    }

    pub fn stderr(&self) -> String {
        text(&self.out.stderr)
    }

    pub fn sid(&self) -> String {
        session_of(&self.out)
    }

    /// Both streams, for assertion messages.
    pub fn both(&self) -> String {
        format!(
            "exit {:?}\n--- stdout ---\n{}--- stderr ---\n{}",
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }

    /// Exit 0 and `status:  ok` last.
    pub fn assert_ok(&self) {
        assert_eq!(self.code(), Some(0), "{}", self.both());
        assert_eq!(
            self.stdout().lines().last(),
            Some("status:  ok"),
            "{}",
            self.both()
        );
    }

    /// Exit 1, `status:  failed` last, and the E-RUN-007 line carrying `message`.
    pub fn assert_failed(&self, message: &str) {
        assert_eq!(self.code(), Some(1), "{}", self.both());
        assert_eq!(
            self.stdout().lines().last(),
            Some("status:  failed"),
            "{}",
            self.both()
        );
        assert!(
            self.stderr().contains(&format!("error[E-RUN-007]: {message}")),
            "want E-RUN-007 {message:?}\n{}",
            self.both()
        );
    }
}

/// The events of `kind`, in order.
pub fn events<'a>(all: &'a [Value], kind: &str) -> Vec<&'a Value> {
    all.iter().filter(|e| e["event_type"] == kind).collect()
}

/// The event types, in order.
pub fn kinds(all: &[Value]) -> Vec<String> {
    all.iter()
        .map(|e| e["event_type"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// The keys of an event, sorted.
pub fn keys(e: &Value) -> Vec<String> {
    let mut k: Vec<String> = e.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

/// Every regular file under `dir` (symlinks not followed) with its bytes.
pub fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let e = e.unwrap();
            let ty = e.file_type().unwrap();
            let p = e.path();
            if ty.is_dir() {
                stack.push(p);
            } else if ty.is_file() {
                let bytes = std::fs::read(&p).unwrap_or_else(|err| panic!("{}: {err}", p.display()));
                out.push((p, bytes));
            }
        }
    }
    out
}

/// Whether `hay` contains `needle`.
pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// How many times `needle` occurs in `hay`.
pub fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

/// The bytes a request carried over the wire, near enough: head lines and body.
pub fn request_bytes(r: &super::provider::Recorded) -> Vec<u8> {
    let mut b = format!("{} {}\n", r.method, r.target).into_bytes();
    for (n, v) in &r.headers {
        b.extend_from_slice(format!("{n}: {v}\n").as_bytes());
    }
    b.extend_from_slice(&r.body);
    b
}

/// Whether this host backs containment `class` (`scoped` or `sealed`); when it does not,
/// `mur run` refuses with E-CAP-003 and the tests assert that instead.
pub fn host_backs(class: &str) -> bool {
    use super::probe::probe_ok;
    let scoped = probe_ok(&["landlock", "seccomp", "netns", "processes"]);
    match class {
        "scoped" => scoped,
        "sealed" => scoped && probe_ok(&["sealed"]),
        _ => true,
    }
}

/// The E-CAP-003 refusal of a class this host cannot back.
pub fn assert_floor_refusal(run: &Run) {
    assert_eq!(run.code(), Some(1), "{}", run.both());
    assert!(
        run.stderr()
            .starts_with("error[E-CAP-003]: containment floor not met"),
        "{}",
        run.both()
    );
}

/// The committed archive of hook fixture `name` (`tests/fixtures/hooks/<name>/`).
pub fn hook_fixture(name: &str) -> PathBuf {
    repo(&format!("tests/fixtures/hooks/{name}/{name}-1.0.0.mur.zip"))
}

/// The committed archive of the example hook `name` (`artifacts/<name>-1.0.0.mur.zip`).
pub fn hook_example(name: &str) -> PathBuf {
    repo(&format!("artifacts/{name}-1.0.0.mur.zip"))
}

/// Publish hook fixture `name` as committed.
pub fn publish_hook(reg: &Path, name: &str) {
    publish_zip(reg, &hook_fixture(name));
}

/// Publish a hook `name@1.0.0` running the component of hook fixture `wasm_of` under a
/// manifest of our own: the identity lines, `runtime: hook`, then `contract` (the
/// `binding` / `execution_mode` / `commit_policy` lines, each ending in a newline).
pub fn publish_hook_as(reg: &Path, name: &str, wasm_of: &str, contract: &str) {
    let yaml = format!("name: {name}\nversion: \"1.0.0\"\nruntime: hook\n{contract}");
    let wasm_path = repo(&format!("tests/fixtures/hooks/{wasm_of}/capsule.wasm"));
    let wasm = std::fs::read(&wasm_path).unwrap_or_else(|e| panic!("{}: {e}", wasm_path.display()));
    publish_files(reg, &[("murmur.yaml", yaml.as_bytes()), ("capsule.wasm", &wasm)]);
}

/// The `artifacts:` entry of hook `name`, with its `capabilities:` flow mapping when given.
pub fn hook_entry(name: &str, caps: Option<&str>) -> String {
    match caps {
        Some(c) => format!("{{name: {name}, version: 1.0.0, runtime: hook, capabilities: {c}}}"),
        None => format!("{{name: {name}, version: 1.0.0, runtime: hook}}"),
    }
}

/// The text of `logs/<file>` in the records of session `sid`; empty when it is absent.
pub fn log_text(w: &World, sid: &str, file: &str) -> String {
    std::fs::read_to_string(w.records(sid).join("logs").join(file)).unwrap_or_default()
}

/// `logs/hook-<name>.log` of session `sid`, one entry per line.
pub fn hook_log_lines(w: &World, sid: &str, name: &str) -> Vec<String> {
    log_text(w, sid, &format!("hook-{name}.log"))
        .lines()
        .map(str::to_string)
        .collect()
}

/// The messages of a model request, as the wire carried them (empty when there are none).
pub fn request_messages(req: &super::provider::Recorded) -> Vec<Value> {
    req.json
        .as_ref()
        .and_then(|b| b.get("messages"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}
