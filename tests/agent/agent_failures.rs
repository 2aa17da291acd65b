//! How an agent capsule fails through the real `mur run`: the launch refusals that leave no
//! session behind, each provider failure with its exact outcome (requests made, retries
//! traced, `out/result.txt`, exit code and message), and a session whose contained calls
//! could not install their containment.

use crate::common;

use common::agent::{assert_floor_refusal, events, host_backs, publish_zip, Drv, Run, Spec, World};
use common::capsule::repo;
use common::provider::{Provider, Step, CUT_TEXT};
use serde_json::json;
use std::time::Duration;

/// A launch refused before any session exists: exit 1, `error[CODE]` first, and neither a
/// workdir nor a records directory.
fn refused(w: &World, code: &str, message: &str) -> Run {
    let run = w.run("never runs", &[]);
    assert_eq!(run.code(), Some(1), "{}", run.both());
    let stderr = run.stderr();
    assert!(stderr.starts_with(&format!("error[{code}]: ")), "{}", run.both());
    assert!(stderr.contains(message), "want {message:?}\n{}", run.both());
    assert!(!run.stdout().contains("session: "), "{}", run.both());
    w.assert_no_session();
    run
}

#[test]
fn a_manifest_without_a_driver_is_refused_before_any_session() {
    let w = World::new("agent-nodriver");
    let p = Provider::start(Vec::new());
    let yaml = Spec::new(Drv::OpenAi, &p).yaml();
    let without: String = yaml
        .lines()
        .filter(|l| !l.starts_with("  driver:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(without, yaml);
    w.manifest_text(&without);
    refused(&w, "E-RUN-005", "no inference driver is configured");
    assert!(p.requests().is_empty());
}

#[test]
fn a_driver_entry_naming_a_non_driver_artifact_is_refused() {
    let w = World::new("agent-baddriver");
    publish_zip(&w.reg, &repo("tests/fixtures/echo-tool/echo-tool-1.0.0.mur.zip"));
    let p = Provider::start(Vec::new());
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec!["{name: echo-tool, version: 1.0.0, runtime: tool}".into()];
    let yaml = spec.yaml().replace(
        "driver: {artifact: murmur-driver-openai}",
        "driver: {artifact: echo-tool}",
    );
    w.manifest_text(&yaml);
    refused(
        &w,
        "E-RUN-005",
        "inference.driver.artifact 'echo-tool' names no declared 'runtime: driver' artifact",
    );
    assert!(p.requests().is_empty());
}

#[test]
fn an_artifact_missing_from_the_registry_is_refused() {
    let w = World::new("agent-missing");
    let p = Provider::start(Vec::new());
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.artifacts = vec!["{name: not-published, version: 1.0.0, runtime: tool}".into()];
    w.manifest(&spec);
    refused(&w, "E-RUN-008", "not-published");
    assert!(p.requests().is_empty());
}

#[test]
fn a_missing_system_prompt_file_is_refused() {
    let w = World::new("agent-prompt");
    let p = Provider::start(Vec::new());
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.inference_extra = "  system_prompt_file: missing.md\n".into();
    w.manifest(&spec);
    refused(&w, "E-RUN-009", "cannot read the system prompt file");
    assert!(p.requests().is_empty());
}

#[test]
fn a_driver_missing_from_the_registry_is_e_run_006() {
    let w = World::new("agent-nodriver");
    let p = Provider::start(Vec::new());
    let spec = Spec::new(Drv::OpenAi, &p);
    w.manifest_text(
        &spec
            .yaml()
            .replace("murmur-driver-openai", "murmur-driver-absent"),
    );
    refused(&w, "E-RUN-006", "murmur-driver-absent");
    assert!(p.requests().is_empty());
}

#[test]
fn a_system_prompt_file_outside_the_capsule_is_refused() {
    for path in ["../outside.md", "/etc/hostname", "a/../../b.md"] {
        let w = World::new("agent-prompt-escape");
        std::fs::write(w.t.path().join("outside.md"), "secret prompt").unwrap();
        let p = Provider::start(Vec::new());
        let mut spec = Spec::new(Drv::OpenAi, &p);
        spec.inference_extra = format!("  system_prompt_file: {path:?}\n");
        w.manifest(&spec);
        refused(
            &w,
            "E-RUN-009",
            "it must be a relative path inside the capsule, without '..'",
        );
        assert!(p.requests().is_empty());
    }
    // A symlink beside the manifest is not followed.
    let w = World::new("agent-prompt-link");
    std::fs::write(w.t.path().join("outside.md"), "secret prompt").unwrap();
    std::os::unix::fs::symlink(w.t.path().join("outside.md"), w.dir.join("prompt.md")).unwrap();
    let p = Provider::start(Vec::new());
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.inference_extra = "  system_prompt_file: prompt.md\n".into();
    w.manifest(&spec);
    refused(&w, "E-RUN-009", "cannot read the system prompt file prompt.md");
    assert!(p.requests().is_empty());
}

/// A driver whose own manifest asks for the key in a header a server could reflect back
/// (`origin`) is refused at launch: only the providers' credential forms are sent.
#[test]
fn a_driver_declaring_a_reflectable_key_header_is_refused() {
    let w = World::new("agent-badauth");
    let wasm = std::fs::read(repo("drivers/murmur-driver-openai/capsule.wasm")).unwrap();
    let yaml = b"name: reflect-driver\nversion: \"1.0.0\"\nruntime: driver\nupstream_auth: {header: origin, value: \"{key}\"}\n";
    common::agent::publish_files(&w.reg, &[("murmur.yaml", yaml), ("capsule.wasm", &wasm)]);
    let p = Provider::start(Vec::new());
    let spec = Spec::new(Drv::OpenAi, &p);
    w.manifest_text(&spec.yaml().replace("murmur-driver-openai", "reflect-driver"));
    refused(
        &w,
        "E-RUN-005",
        "upstream_auth 'origin: {key}' is not a credential form this runtime sends",
    );
    assert!(p.requests().is_empty());
}

/// Run `script` with a one-shell-binary capsule on `drv`; the run and the provider.
fn session(drv: Drv, script: Vec<Step>, deadline: Option<u64>) -> (World, Provider, Run) {
    let w = World::new("agent-fail");
    let p = Provider::start(script);
    let mut spec = Spec::new(drv, &p);
    spec.deadline_seconds = deadline;
    w.manifest(&spec);
    let run = w.run("try", &[]);
    (w, p, run)
}

fn unauthorized(drv: Drv) {
    let (w, p, run) = session(
        drv,
        vec![Step::status(401, "invalid x-api-key"), Step::text("unused")],
        None,
    );
    let message = "provider returned 401: invalid x-api-key";
    run.assert_failed(message);
    assert_eq!(p.model_requests().len(), 1, "a 401 is final: {drv:?}");
    let sid = run.sid();
    assert_eq!(w.result(&sid), format!("error: {message}\n"));
    let all = w.trace(&sid);
    assert!(events(&all, "inference_retry").is_empty());
    let i = events(&all, "inference")[0];
    assert_eq!(i["decision"], "error");
    assert_eq!(i["error"], message);
    assert_eq!(events(&all, "task_end")[0]["exit_status"], "failed");
    assert_eq!(events(&all, "session_end")[0]["exit_status"], "failed");
}

#[test]
fn openai_401_fails_after_one_request() {
    unauthorized(Drv::OpenAi);
}

#[test]
fn anthropic_401_fails_after_one_request() {
    unauthorized(Drv::Anthropic);
}

#[test]
fn a_429_with_retry_after_is_waited_out_then_succeeds() {
    let (w, p, run) = session(
        Drv::OpenAi,
        vec![
            Step::retry_after(429, "slow down", 1),
            Step::text("after the wait"),
        ],
        None,
    );
    run.assert_ok();
    assert_eq!(p.model_requests().len(), 2);
    let sid = run.sid();
    assert_eq!(w.result(&sid), "after the wait\n");
    let all = w.trace(&sid);
    let retries = events(&all, "inference_retry");
    assert_eq!(retries.len(), 1, "{all:?}");
    let r = retries[0];
    assert_eq!(r["turn"], 1);
    assert_eq!(r["attempt"], 1);
    assert_eq!(r["delay_ms"], 1000, "retry-after honoured");
    assert_eq!(r["reason"], "provider returned 429: slow down");
    // The successful try is turn 1 still; the mock counted two requests.
    let i = events(&all, "inference");
    assert_eq!(i.len(), 1);
    assert_eq!(i[0]["turn"], 1);
    assert_eq!(i[0]["decision"], "end_turn");
    assert_eq!(i[0]["input_tokens"], 20, "the mock's second request");
}

#[test]
fn three_500s_fail_after_three_requests() {
    let (w, p, run) = session(
        Drv::OpenAi,
        vec![
            Step::status(500, "boom"),
            Step::status(500, "boom"),
            Step::status(500, "boom"),
            Step::text("unused"),
        ],
        None,
    );
    let message = "provider returned 500: boom (after 3 tries)";
    run.assert_failed(message);
    assert_eq!(p.model_requests().len(), 3);
    let sid = run.sid();
    assert_eq!(w.result(&sid), format!("error: {message}\n"));
    let all = w.trace(&sid);
    let retries = events(&all, "inference_retry");
    assert_eq!(retries.len(), 2);
    for (n, (r, base)) in retries.iter().zip([500u64, 1000]).enumerate() {
        assert_eq!(r["attempt"], n as u64 + 1);
        assert_eq!(r["reason"], "provider returned 500: boom");
        let d = r["delay_ms"].as_u64().unwrap();
        assert!(
            d >= base * 3 / 4 - 1 && d <= base * 5 / 4 + 1,
            "backoff {d} around {base}"
        );
    }
    assert_eq!(events(&all, "inference").len(), 1);
    assert!(run.elapsed < Duration::from_secs(20), "{:?}", run.elapsed);
}

fn malformed(drv: Drv, step: Step) {
    let (w, p, run) = session(drv, vec![step, Step::text("unused")], None);
    assert_eq!(run.code(), Some(1), "{}", run.both());
    assert!(
        run.stderr()
            .contains("error[E-RUN-007]: unparsable provider response: "),
        "{}",
        run.both()
    );
    assert_eq!(
        p.model_requests().len(),
        1,
        "an unparsable answer is not retried: {drv:?}"
    );
    let result = w.result(&run.sid());
    assert!(
        result.starts_with("error: unparsable provider response: "),
        "{result}"
    );
    assert!(
        result.ends_with('\n') && result.lines().count() == 1,
        "{result:?}"
    );
}

#[test]
fn a_malformed_body_fails_as_unparsable() {
    malformed(Drv::OpenAi, Step::Malformed);
    malformed(Drv::Anthropic, Step::Malformed);
}

#[test]
fn a_body_that_is_not_json_fails_as_unparsable() {
    malformed(Drv::OpenAi, Step::NotJson);
}

#[test]
fn an_answer_slower_than_the_deadline_fails_at_the_deadline() {
    let (w, p, run) = session(
        Drv::OpenAi,
        vec![Step::slow(Duration::from_secs(10), Step::text("too late"))],
        Some(2),
    );
    assert!(
        run.elapsed < Duration::from_secs(7),
        "the deadline (2 s + grace) ends the call, not the 10 s answer: {:?}",
        run.elapsed
    );
    let sid = run.sid();
    let result = w.result(&sid);
    assert!(
        result.starts_with(
            "error: driver murmur-driver-openai: guest trapped (deadline): deadline of 2 s exceeded"
        ),
        "{result}"
    );
    assert!(
        result.ends_with("(capabilities.limits.deadline_seconds)\n"),
        "{result}"
    );
    run.assert_failed("driver murmur-driver-openai: guest trapped (deadline): deadline of 2 s exceeded");
    assert_eq!(p.model_requests().len(), 1, "a deadline is not retried");
    assert!(events(&w.trace(&sid), "inference_retry").is_empty());
}

#[test]
fn a_connection_closed_mid_body_is_retried() {
    let (w, p, run) = session(
        Drv::OpenAi,
        vec![Step::CloseMidBody, Step::text("second try")],
        None,
    );
    run.assert_ok();
    assert_eq!(p.model_requests().len(), 2);
    let sid = run.sid();
    assert_eq!(w.result(&sid), "second try\n");
    assert!(!w.result(&sid).contains(CUT_TEXT));
    let all = w.trace(&sid);
    let retries = events(&all, "inference_retry");
    assert_eq!(retries.len(), 1, "{all:?}");
    assert_eq!(retries[0]["attempt"], 1);
    assert_eq!(events(&all, "inference")[0]["decision"], json!("end_turn"));
}

/// A provider whose name does not resolve is named so ("cannot resolve HOST"), not shown as
/// a dump of the error code the driver was handed. The session runs in a network namespace
/// of its own holding only `lo`, so the lookup fails on this host and no query leaves it.
#[test]
fn an_endpoint_that_does_not_resolve_is_named() {
    let own_netns = std::process::Command::new("unshare")
        .args(["--net", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !own_netns {
        eprintln!("skipped: unshare --net is not available here");
        return;
    }
    let w = World::new("agent-unresolvable");
    let p = Provider::start(Vec::new());
    let spec = Spec::new(Drv::OpenAi, &p);
    let host = "api.unresolvable.invalid";
    let yaml = spec
        .yaml()
        .replace(&spec.endpoint, &format!("https://{host}/v1"))
        .replace(&spec.origin(), &format!("https://{host}"));
    w.manifest_text(&yaml);
    let out = std::process::Command::new("unshare")
        .args(["--net", "sh", "-c", "ip link set lo up && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_mur"))
        .args(["run", "--manifest", &common::capsule::manifest_arg(&w.dir)])
        .arg("--registry-path")
        .arg(&w.reg)
        .args(["--task", "hello"])
        .env("MURMUR_CACHE_DIR", w.t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", w.t.path().join("records"))
        .env("MURMUR_SPEND_DIR", w.t.path().join("spend"))
        .env(common::agent::KEY_VAR, common::agent::KEY)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("driver murmur-driver-openai: cannot resolve {host}: ")),
        "{stderr}"
    );
    assert!(
        !stderr.contains("ErrorCode") && !stderr.contains("DnsErrorPayload"),
        "{stderr}"
    );
    assert!(p.requests().is_empty());
}

#[test]
fn an_answer_cut_at_max_tokens_ends_the_task_with_its_text() {
    let (w, p, run) = session(Drv::Anthropic, vec![Step::MaxTokens("partial answ".into())], None);
    run.assert_ok();
    assert_eq!(p.model_requests().len(), 1);
    let sid = run.sid();
    assert_eq!(w.result(&sid), "partial answ\n");
    let all = w.trace(&sid);
    assert_eq!(events(&all, "inference")[0]["decision"], "max_tokens");
    assert_eq!(events(&all, "task_end")[0]["exit_status"], "ok");
    let log = std::fs::read_to_string(w.records(&sid).join("logs/bootstrap.log")).unwrap();
    assert!(
        log.contains("the final answer was cut at inference.max_tokens"),
        "{log}"
    );
}

/// A session that started but cannot reach its task (here MURMUR.md cannot be written: a
/// directory of that name sits in the reused workdir) still ends its trace and says why
/// in `out/result.txt`.
#[test]
fn a_session_failing_before_its_task_still_ends_its_trace() {
    let w = World::new("agent-early-failure");
    let p = Provider::start(vec![Step::text("never asked")]);
    w.manifest(&Spec::new(Drv::OpenAi, &p));
    let work = w.t.path().join("reused");
    std::fs::create_dir_all(work.join("MURMUR.md")).unwrap();
    std::fs::write(work.join("MURMUR.md").join("keep"), "x").unwrap();
    let out = common::capsule::mur(
        &w.t,
        &[
            "--manifest",
            &common::capsule::manifest_arg(&w.dir),
            "--registry-path",
            w.reg.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
            "--task",
            "hello",
        ],
        &[(common::agent::KEY_VAR, common::agent::KEY)],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot write MURMUR.md"), "{stderr}");
    assert!(p.requests().is_empty());
    // The session id was never announced (announcing follows session_start): the one
    // records directory is its.
    let records: Vec<_> = std::fs::read_dir(w.t.path().join("records")).unwrap().collect();
    assert_eq!(records.len(), 1);
    let sid = records[0].as_ref().unwrap().file_name().into_string().unwrap();
    let all = common::capsule::trace(&w.t, &sid);
    let last = all.last().unwrap();
    assert_eq!(last["event_type"], "session_end", "{all:?}");
    assert_eq!(last["exit_status"], "failed");
    let result = std::fs::read_to_string(work.join("out/result.txt")).unwrap();
    assert!(result.starts_with("error: cannot write MURMUR.md"), "{result}");
}

/// A task whose answer cannot be written (the model's own command left a directory where
/// `out/result.txt` goes) ends failed, and the trace says so at `task_end`, not only at
/// `session_end`.
#[test]
fn a_result_that_cannot_be_written_fails_the_task_in_the_trace() {
    let w = World::new("agent-unwritable-result");
    let p = Provider::start(vec![
        Step::tool("c1", "bash", json!({"command": "mkdir -p out/result.txt/held"})),
        Step::text("the answer"),
    ]);
    w.manifest(&Spec::new(Drv::OpenAi, &p));
    let run = w.run("answer", &[]);
    run.assert_failed("cannot write out/result.txt");
    let all = w.trace(&run.sid());
    let ends = events(&all, "task_end");
    assert_eq!(ends.len(), 1, "{all:?}");
    assert_eq!(ends[0]["exit_status"], "failed", "{all:?}");
    assert_eq!(all.last().unwrap()["exit_status"], "failed");
}

/// A full disk when the answer is written: the task fails for it, and what the model's own
/// command had left in `out/result.txt` is removed rather than left to be taken for the
/// answer.
#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: mounts a tmpfs")]
fn an_answer_the_full_disk_refuses_leaves_no_stale_result() {
    let w = World::new("agent-full-result");
    let mounted = match common::tmpfs::Tmpfs::mount(&w.dir.join("workdir"), "256k") {
        Ok(m) => m,
        Err(why) => panic!("mounting a tmpfs was refused: {why}"),
    };
    let p = Provider::start(vec![
        Step::tool(
            "c1",
            "bash",
            json!({"command": "mkdir -p out; head -c 1000000 /dev/zero | tr '\\0' x > out/result.txt; true"}),
        ),
        Step::text("the answer"),
    ]);
    w.manifest(&Spec::new(Drv::OpenAi, &p));
    let run = w.run("answer", &[]);
    run.assert_failed("cannot write out/result.txt");
    assert!(
        !w.workdir(&run.sid()).join("out/result.txt").exists(),
        "the shell command's bytes were left as the result"
    );
    drop(mounted);
}

/// What the first of a session's containment failures says on stderr.
const INSTALL_FAILED: &str = "error[E-RUN-014]: containment could not be installed, the command was not run: install the landlock ruleset (landlock_restrict_self): ";

/// Contained calls whose containment cannot be installed (`MURMUR_FAULT=landlock`) reach the
/// operator: the first is one E-RUN-014 line on stderr (the second call's is not repeated),
/// each call's `tool_call` and `shell` events carry the code and the message, `mur trace`
/// prints them, and the session, in which no contained call could start, ends
/// `containment_failed` with exit 1 though its task ended ok.
#[test]
fn a_session_whose_every_contained_call_failed_its_containment_ends_containment_failed() {
    let w = World::new("agent-containment-failed");
    let p = Provider::start(vec![
        Step::tool("c1", "bash", json!({"command": "touch one"})),
        Step::tool("c2", "bash", json!({"command": "touch two"})),
        Step::text("done"),
    ]);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.containment = Some("scoped".into());
    w.manifest(&spec);
    let run = w.run("touch two files", &[("MURMUR_FAULT", "landlock")]);
    if !host_backs("scoped") {
        return assert_floor_refusal(&run);
    }
    assert_eq!(run.code(), Some(1), "{}", run.both());
    assert_eq!(
        run.stdout().lines().last(),
        Some("status:  containment_failed"),
        "{}",
        run.both()
    );
    let stderr = run.stderr();
    let failures: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("containment could not be installed"))
        .collect();
    assert_eq!(failures.len(), 1, "{}", run.both());
    assert!(failures[0].starts_with(INSTALL_FAILED), "{}", run.both());
    assert!(
        stderr.contains("error[E-RUN-014]: all 2 of the session's contained calls failed to start: none could install its containment, so nothing ran and the session ended containment_failed"),
        "{}",
        run.both()
    );
    let sid = run.sid();
    for f in ["one", "two"] {
        assert!(!w.workdir(&sid).join(f).exists(), "{f}: the command ran");
    }
    let results = common::provider::tool_results(&p.model_requests()[1]);
    assert!(
        results[0].contains("error: containment could not be installed"),
        "{results:?}"
    );
    let all = w.trace(&sid);
    let message = &INSTALL_FAILED["error[E-RUN-014]: ".len()..];
    for kind in ["tool_call", "shell"] {
        let calls = events(&all, kind);
        assert_eq!(calls.len(), 2, "{kind}");
        for e in calls {
            assert_eq!(e["error_code"], "E-RUN-014", "{e}");
            assert!(e["error"].as_str().unwrap().starts_with(message), "{e}");
        }
    }
    assert_eq!(events(&all, "tool_call")[0]["status"], "error");
    assert_eq!(events(&all, "shell")[0]["exit_code"], json!(null));
    assert_eq!(events(&all, "task_end")[0]["exit_status"], "ok");
    let end = events(&all, "session_end")[0];
    assert_eq!(end["exit_status"], "containment_failed", "{end}");
    assert_eq!(end["error_code"], "E-RUN-014", "{end}");
    let shown = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["trace", "--session", &sid])
        .env("MURMUR_RECORDS_DIR", w.t.path().join("records"))
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    let tool_lines: Vec<&str> = shown
        .lines()
        .filter(|l| l.contains("tool bash error in "))
        .collect();
    assert_eq!(tool_lines.len(), 2, "{shown}");
    for l in tool_lines {
        assert!(l.contains(&format!(": E-RUN-014 {message}")), "{shown}");
    }
    assert!(shown.contains("not run (E-RUN-014)"), "{shown}");
    assert!(
        shown.contains("session ended containment_failed after "),
        "{shown}"
    );
}
