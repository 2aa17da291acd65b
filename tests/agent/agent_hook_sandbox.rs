//! What a hook's sandbox lets it reach, through the real `mur run`: the probe fixture (on
//! `session-start`, blocking and async) reports every file, environment and HTTP attempt
//! as its error, which lands in `logs/hook-<name>.log`. With no grant a hook opens no file
//! (absolute, relative, `.`), sees only the identity variables and reaches no host, not
//! even one the capsule allows; with a grant it reaches exactly its scope, its hosts within
//! the capsule's ceiling and its `env.allow` names. The `on-stage` path is checked with the
//! recorder's component bound there.

use crate::common;

use common::agent::{
    events, hook_entry, hook_log_lines, log_text, publish_hook, publish_hook_as, publish_skill, Drv, Spec,
    World,
};
use common::provider::{tool_results, Provider, Recorded, Step};
use serde_json::json;

/// A host variable the capsule passes on (its `env.allow`) and that no hook is granted.
const HOST_VAR: &str = "HOOK_HOST_SETTING";
const HOST_VALUE: &str = "visible-to-the-shell";
/// The identity variables every hook gets, and the provider a shipped driver speaks
/// (`MURMUR_INFERENCE_PROVIDER`), sorted.
const IDENTITY: &str =
    "MURMUR_CAPSULE_NAME,MURMUR_CAPSULE_URL,MURMUR_CAPSULE_VERSION,MURMUR_INFERENCE_PROVIDER,MURMUR_SESSION_ID";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Blocking,
    Async,
}

impl Mode {
    /// The hook's name: the committed fixture, or its component under an async contract.
    fn hook(self, reg: &std::path::Path) -> &'static str {
        match self {
            Mode::Blocking => {
                publish_hook(reg, "hook-probe");
                "hook-probe"
            }
            Mode::Async => {
                publish_hook_as(
                    reg,
                    "async-probe",
                    "hook-probe",
                    "execution_mode: async\ncommit_policy: none\n",
                );
                "async-probe"
            }
        }
    }
}

/// What the probe's entry is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Grant {
    /// No `capabilities:` at all.
    Nothing,
    /// Only `env.allow: [PROBE_PORT]` (so it knows where to knock; no host, no directory).
    PortOnly,
    /// Scope `tools/guide` (a staged skill's directory), the sink's origin and `PROBE_PORT`.
    Full,
}

/// One probed session.
struct Probed {
    w: World,
    sid: String,
    /// The report before `; details: `, and the details.
    head: String,
    details: String,
    /// Every request the sink (an allowed host of the capsule) received.
    sink: Vec<Recorded>,
}

fn probe(label: &str, mode: Mode, grant: Grant) -> Probed {
    let w = World::new(label);
    let hook = mode.hook(&w.reg);
    publish_skill(&w.reg, "guide", "a guide", "GUIDE TEXT\n");
    let sink = Provider::start_sink();
    let sink_origin = format!("http://127.0.0.1:{}", sink.port());
    let p = Provider::start(vec![
        Step::tool(
            "c1",
            "bash",
            json!({"command": format!("echo \"setting=${HOST_VAR}\"")}),
        ),
        Step::text("probed"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.network = vec![sink_origin.clone()];
    spec.env_allow = vec!["PROBE_PORT".into(), HOST_VAR.into()];
    let caps = match grant {
        Grant::Nothing => None,
        Grant::PortOnly => Some("{env: {allow: [PROBE_PORT]}}".to_string()),
        Grant::Full => Some(format!(
            "{{filesystem: {{scope: tools/guide}}, network: {{allow: [\"{sink_origin}\"]}}, env: {{allow: [PROBE_PORT]}}}}"
        )),
    };
    spec.artifacts = vec![
        "{name: guide, version: 1.0.0, runtime: skill}".into(),
        hook_entry(hook, caps.as_deref()),
    ];
    w.manifest(&spec);
    let port = sink.port().to_string();
    let run = w.run("probe the hook", &[("PROBE_PORT", &port), (HOST_VAR, HOST_VALUE)]);
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "probed\n");
    // The control: the capsule does pass the variable on (to its shell child).
    let reqs = p.model_requests();
    assert_eq!(reqs.len(), 2);
    assert!(
        tool_results(&reqs[1])[0].contains(&format!("setting={HOST_VALUE}")),
        "{:?}",
        tool_results(&reqs[1])
    );
    let lines = hook_log_lines(&w, &sid, hook);
    assert_eq!(lines.len(), 1, "{mode:?} {grant:?}: {lines:?}");
    let report = lines[0]
        .strip_prefix("on-session-start: the hook returned an error: ")
        .unwrap_or_else(|| panic!("{lines:?}"));
    let (head, details) = report
        .split_once("; details: ")
        .unwrap_or_else(|| panic!("{report}"));
    let all = w.trace(&sid);
    let traced = events(&all, "hook_error");
    match mode {
        Mode::Blocking => {
            assert_eq!(traced.len(), 1, "{all:?}");
            assert_eq!(traced[0]["hook_name"], hook);
            assert_eq!(traced[0]["error"], lines[0]["on-session-start: ".len()..]);
        }
        // An async hook's error is in its log only.
        Mode::Async => assert!(traced.is_empty(), "{all:?}"),
    }
    Probed {
        sid,
        head: head.to_string(),
        details: details.to_string(),
        sink: sink.requests(),
        w,
    }
}

fn no_grant(mode: Mode) {
    let got = probe("hook-probe-none", mode, Grant::Nothing);
    // Nothing to open (an absolute path, a relative one, `.`, a new file), no host
    // variable, not even where to knock (its port is in a file and a variable it cannot read).
    assert_eq!(
        got.head,
        format!(
            "probe: hostname=denied x=denied list=denied create=denied home=unset env=[{IDENTITY}] http=no-port"
        ),
        "{mode:?}: {}",
        got.details
    );
    assert!(got.sink.is_empty(), "{:?}", got.sink);
    assert!(!got.w.workdir(&got.sid).join("probe.txt").exists());
}

#[test]
fn a_blocking_hook_with_no_grant_opens_no_file_and_sees_no_host_variable() {
    no_grant(Mode::Blocking);
}

#[test]
fn an_async_hook_with_no_grant_opens_no_file_and_sees_no_host_variable() {
    no_grant(Mode::Async);
}

fn no_host(mode: Mode) {
    let got = probe("hook-probe-port", mode, Grant::PortOnly);
    assert_eq!(
        got.head,
        format!(
            "probe: hostname=denied x=denied list=denied create=denied home=unset env=[{IDENTITY},PROBE_PORT] http=denied"
        ),
        "{mode:?}: {}",
        got.details
    );
    assert!(
        got.sink.is_empty(),
        "a host of the capsule, not of the hook: {:?}",
        got.sink
    );
}

#[test]
fn a_blocking_hook_granted_no_host_cannot_reach_an_allowed_host_of_the_capsule() {
    no_host(Mode::Blocking);
}

#[test]
fn an_async_hook_granted_no_host_cannot_reach_an_allowed_host_of_the_capsule() {
    no_host(Mode::Async);
}

fn full_grant(mode: Mode) {
    let got = probe("hook-probe-full", mode, Grant::Full);
    // Its cwd is exactly its scope (the skill's directory): it lists and writes there and
    // nowhere else; the sink is reached once; still no variable beyond its own allow-list.
    assert_eq!(
        got.head,
        format!(
            "probe: hostname=denied x=denied list=[murmur.yaml,skill.md] create=ok home=unset env=[{IDENTITY},PROBE_PORT] http=status 200"
        ),
        "{mode:?}: {}",
        got.details
    );
    assert_eq!(got.sink.len(), 1, "{:?}", got.sink);
    assert_eq!(
        (got.sink[0].method.as_str(), got.sink[0].path.as_str()),
        ("GET", "/probe")
    );
    let work = got.w.workdir(&got.sid);
    let written = std::fs::read_to_string(work.join("tools/guide/probe.txt")).unwrap();
    assert!(written.starts_with(&got.head), "{written}");
    assert!(!work.join("probe.txt").exists(), "nothing outside the scope");
    assert_eq!(
        std::fs::read_to_string(work.join("tools/guide/skill.md")).unwrap(),
        "GUIDE TEXT\n"
    );
}

#[test]
fn a_blocking_hook_with_a_grant_reaches_exactly_its_scope_hosts_and_variables() {
    full_grant(Mode::Blocking);
}

#[test]
fn an_async_hook_with_a_grant_reaches_exactly_its_scope_hosts_and_variables() {
    full_grant(Mode::Async);
}

#[test]
fn a_hook_host_outside_the_capsule_ceiling_is_dropped_with_w_sec_007() {
    let w = World::new("hook-probe-ceiling");
    publish_hook(&w.reg, "hook-probe");
    let outside = Provider::start_sink();
    let outside_origin = format!("http://127.0.0.1:{}", outside.port());
    let p = Provider::start(vec![Step::text("probed")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.env_allow = vec!["PROBE_PORT".into()];
    spec.artifacts = vec![hook_entry(
        "hook-probe",
        Some(&format!(
            "{{network: {{allow: [\"{outside_origin}\"]}}, env: {{allow: [PROBE_PORT]}}}}"
        )),
    )];
    w.manifest(&spec);
    let port = outside.port().to_string();
    let run = w.run("probe the hook", &[("PROBE_PORT", &port)]);
    run.assert_ok();
    let sid = run.sid();
    let warning = format!(
        "W-SEC-007]: '{outside_origin}' for artifact hook-probe is outside the capsule's capabilities.network.allow; dropped"
    );
    assert!(run.stderr().contains(&warning), "{}", run.both());
    assert!(log_text(&w, &sid, "bootstrap.log").contains(&warning));
    let lines = hook_log_lines(&w, &sid, "hook-probe");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains(" http=denied;"), "{lines:?}");
    assert!(outside.requests().is_empty(), "{:?}", outside.requests());
}

/// The recorder's component bound `on-stage` (blocking, `commit_policy: none`), granted
/// `caps`; the session's id and world.
fn stage_recorder(label: &str, caps: Option<&str>) -> (World, String) {
    let w = World::new(label);
    publish_hook_as(
        &w.reg,
        "stage-recorder",
        "hook-recorder",
        "binding: on-stage\nexecution_mode: blocking\ncommit_policy: none\n",
    );
    let p = Provider::start(vec![Step::text("staged")]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.shell = vec!["bash".into(), "cat".into()];
    spec.artifacts = vec![hook_entry("stage-recorder", caps)];
    w.manifest(&spec);
    let run = w.run("stage", &[]);
    run.assert_ok();
    let sid = run.sid();
    assert_eq!(w.result(&sid), "staged\n");
    (w, sid)
}

#[test]
fn an_on_stage_hook_with_no_grant_cannot_create_a_file() {
    let (w, sid) = stage_recorder("hook-stage-none", None);
    let lines = hook_log_lines(&w, &sid, "stage-recorder");
    assert_eq!(lines.len(), 1, "fired on stage only: {lines:?}");
    assert!(
        lines[0].starts_with("on-stage: the hook returned an error: cannot write events.log: "),
        "{lines:?}"
    );
    let boot = log_text(&w, &sid, "bootstrap.log");
    assert!(
        boot.contains(
            "hook stage-recorder (on-stage): the hook returned an error: cannot write events.log: "
        ),
        "{boot}"
    );
    assert!(!w.workdir(&sid).join("events.log").exists());
}

#[test]
fn an_on_stage_hook_with_a_grant_writes_in_its_scope_only() {
    let (w, sid) = stage_recorder("hook-stage-scope", Some("{filesystem: {scope: stage-notes}}"));
    let work = w.workdir(&sid);
    assert_eq!(
        std::fs::read_to_string(work.join("stage-notes/events.log")).unwrap(),
        "stage binaries=bash,cat\n",
        "one line, for on-stage only"
    );
    assert!(!work.join("events.log").exists());
    assert!(hook_log_lines(&w, &sid, "stage-recorder").is_empty());
}

#[test]
fn an_on_stage_hook_failure_is_traced_like_any_blocking_hook_failure() {
    let (w, sid) = stage_recorder("hook-stage-trace", None);
    let all = w.trace(&sid);
    let errs = events(&all, "hook_error");
    assert_eq!(
        errs.len(),
        1,
        "one hook_error for the failed on-stage call: {all:?}"
    );
    assert_eq!(errs[0]["hook_name"], "stage-recorder");
    assert_eq!(errs[0]["binding"], "on-stage");
    let error = errs[0]["error"].as_str().unwrap();
    assert!(
        error.starts_with("the hook returned an error: cannot write events.log: "),
        "{error}"
    );
}
