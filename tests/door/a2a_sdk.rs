//! The capsule's A2A door driven by a real client: the official Python SDK (a2a-sdk 1.3.0)
//! runs tests/sdk/a2a_client.py against a served tests/fixtures/slow capsule, once over the
//! 1.0 JSON-RPC transport and once over the 0.3 one (polling send and GetTask, a streamed
//! task, a cancelled `sleep 20`), and again against an authenticated door with the SDK's own
//! auth options (AuthInterceptor and a CredentialService holding a token `mur token` prints,
//! handed over in the environment). The SDK lives in a virtualenv made by
//! `scripts/a2a-sdk-venv.sh`; its python is `$MURMUR_A2A_SDK_PYTHON`, else
//! `target/a2a-sdk-venv/bin/python3`. Without it the test fails, it never skips. The same
//! SDK also sends a file in and receives a file artifact with its media type, in both
//! generations, through tests/sdk/a2a_files.py against a tests/fixtures/files capsule.

use crate::common;

use common::capsule::{capsule, repo, serve};
use common::TempDir;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Longer than the script's own worst case (three 30 s polls per generation).
const SCRIPT_DEADLINE: Duration = Duration::from_secs(180);

struct ScriptRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
}

/// `python tests/sdk/<script> BASE GENERATION`, its output kept in files under `t` (no
/// pipe to fill), killed past the deadline.
fn run_script(
    t: &TempDir,
    (python, script): (&Path, &str),
    base: &str,
    generation: &str,
    env: &[(&str, &str)],
) -> ScriptRun {
    let out_path = t.path().join(format!("sdk-{generation}.stdout"));
    let err_path = t.path().join(format!("sdk-{generation}.stderr"));
    let mut child = Command::new(python)
        .arg(repo(&format!("tests/sdk/{script}")))
        .args([base, generation])
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        // httpx honours proxy variables; the door is on loopback.
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
    let started = Instant::now();
    let (code, timed_out) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (status.code(), false);
        }
        if started.elapsed() > SCRIPT_DEADLINE {
            let _ = child.kill();
            let status = child.wait().unwrap();
            break (status.code(), true);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    ScriptRun {
        code,
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        timed_out,
    }
}

fn sigterm(pid: u32) {
    let pid = pid.to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
}

const LIFECYCLE: &str = "lifecycle:\n  task_acceptance: queue\n  after_task: sleep\n  queue_depth: 4\n";

#[test]
fn the_official_a2a_sdk_client_drives_the_door_over_1_0_and_0_3() {
    drive("a2a-sdk", LIFECYCLE, None);
}

const TAKES: &str = "a2a:\n  input:\n    parts: [text, file, data]\n    media_types: [text/csv]\n  output:\n    dir: out/files\n";

#[test]
fn the_official_a2a_sdk_client_sends_a_file_and_receives_a_file_artifact_over_1_0_and_0_3() {
    drive_with(
        "a2a-sdk-files",
        ("tests/fixtures/files/capsule.wasm", "a2a_files.py"),
        &format!("{LIFECYCLE}{TAKES}"),
        None,
    );
}

/// The 0.3 generation's own SDK reads the card a door serves without `A2A-Version` (the
/// merged form: its AgentCard requires `url`) and sends a file and reads the file artifact.
#[test]
fn the_0_3_sdk_reads_the_default_card_and_gets_a_file_artifact_back() {
    let python = common::sdk::python_03();
    let t = TempDir::new("a2a-sdk03-files");
    let dir = capsule(
        &t,
        "tests/fixtures/files/capsule.wasm",
        &format!("{LIFECYCLE}{TAKES}"),
    );
    let (mut running, line) = serve(&t, &dir);
    let base = format!(
        "http://{}",
        line["url"].as_str().unwrap().replace("localhost", "127.0.0.1")
    );
    let out = Command::new(python)
        .arg(repo("tests/sdk/a2a_files_03.py"))
        .arg(&base)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    sigterm(running.child.id());
    let _ = running.child.wait();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "--- stdout\n{stdout}--- stderr\n{stderr}"
    );
    assert!(stdout.contains("[0.3.26] send: task tsk_"), "{stdout}");
}

#[test]
fn the_official_a2a_sdk_client_reads_a_message_answer_holding_the_file_over_1_0_and_0_3() {
    drive_with(
        "a2a-sdk-message",
        ("tests/fixtures/files/capsule.wasm", "a2a_files.py"),
        &format!("{LIFECYCLE}{TAKES}  answer: message\n"),
        None,
    );
}

#[test]
fn the_official_a2a_sdk_client_authenticates_with_its_own_auth_options() {
    let auth = "capabilities:\n  network:\n    authentication:\n      scheme: bearer\n      credentials:\n        - {name: client, scopes: ['*']}\n";
    drive("a2a-sdk-auth", &format!("{LIFECYCLE}{auth}"), Some("client"));
}

/// Serve the slow capsule with `extra` manifest YAML and run the script over both
/// generations, with the token of `credential` (printed by `mur token`) when named.
fn drive(label: &str, extra: &str, credential: Option<&str>) {
    drive_with(
        label,
        ("tests/fixtures/slow/capsule.wasm", "a2a_client.py"),
        extra,
        credential,
    );
}

/// [`drive`] of `script` against a capsule of `wasm`.
fn drive_with(label: &str, (wasm, script): (&str, &str), extra: &str, credential: Option<&str>) {
    let python = common::sdk::python();
    let t = TempDir::new(label);
    let dir = capsule(&t, wasm, extra);
    let (mut running, line) = serve(&t, &dir);
    let token = credential.map(|name| {
        let sid = line["session_id"].as_str().unwrap();
        let out = Command::new(common::capsule::MUR)
            .args(["token", "--session", sid, name])
            .env("MURMUR_RECORDS_DIR", t.path().join("records"))
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    });
    let url = line["url"]
        .as_str()
        .unwrap_or_else(|| panic!("no url in the announcement {line}"));
    let hostport = url.replace("localhost", "127.0.0.1");
    let base = format!("http://{hostport}");

    let mut failures = Vec::new();
    for generation in ["1.0", "0.3"] {
        let mut env: Vec<(&str, &str)> = token.iter().map(|t| ("A2A_DOOR_TOKEN", t.as_str())).collect();
        if extra.contains("answer: message") {
            env.push(("A2A_ANSWER", "message"));
        }
        let run = run_script(&t, (&python, script), &base, generation, &env);
        println!("--- {script} {generation}\n{}{}", run.stdout, run.stderr);
        if run.code != Some(0) {
            failures.push(format!(
                "{script} {base} {generation} {}\n--- stdout\n{}--- stderr\n{}",
                if run.timed_out {
                    format!("was killed after {}s", SCRIPT_DEADLINE.as_secs())
                } else {
                    format!("exited {:?}", run.code)
                },
                run.stdout,
                run.stderr
            ));
        }
    }

    assert!(
        running.child.try_wait().unwrap().is_none(),
        "the capsule exited while the SDK client drove it"
    );
    sigterm(running.child.id());
    let status = running.child.wait().unwrap();
    let mut capsule_stderr = String::new();
    if let Some(mut err) = running.child.stderr.take() {
        use std::io::Read;
        let _ = err.read_to_string(&mut capsule_stderr);
    }
    assert!(
        failures.is_empty(),
        "{}\n--- mur run stderr\n{capsule_stderr}",
        failures.join("\n")
    );
    assert_eq!(
        status.code(),
        Some(0),
        "mur run after SIGTERM: {status}\n--- stderr\n{capsule_stderr}"
    );
    assert!(
        std::net::TcpStream::connect(&hostport).is_err(),
        "the door outlived the session"
    );
}

/// The SDK's client sets push-notification configs (on a send, and with the four config
/// methods) and a webhook on loopback receives the task's updates with the bearer
/// credentials, over 1.0 and 0.3; a destination the manifest does not allow is refused and
/// never called (tests/sdk/a2a_push.py).
#[test]
fn the_official_a2a_sdk_client_configures_push_and_a_webhook_receives_the_updates_over_1_0_and_0_3() {
    use common::webhook::Webhook;
    const SECRET: &str = "sdk-push-secret";
    let python = common::sdk::python();
    let t = TempDir::new("a2a-sdk-push");
    let (hook, other) = (Webhook::start(), Webhook::start());
    let extra = format!(
        "{LIFECYCLE}a2a:\n  push:\n    allow: [http://127.0.0.1:{}]\n",
        hook.port
    );
    let dir = capsule(&t, "tests/fixtures/slow/capsule.wasm", &extra);
    let (mut running, line) = serve(&t, &dir);
    let base = format!(
        "http://{}",
        line["url"].as_str().unwrap().replace("localhost", "127.0.0.1")
    );
    for generation in ["1.0", "0.3"] {
        let env = [
            ("A2A_PUSH_WEBHOOK", hook.url("")),
            ("A2A_PUSH_REFUSED", other.url("")),
            ("A2A_PUSH_SECRET", SECRET.to_string()),
        ];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let run = run_script(&t, (&python, "a2a_push.py"), &base, generation, &env);
        println!("--- a2a_push.py {generation}\n{}{}", run.stdout, run.stderr);
        assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
        let id = run
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("sent "))
            .unwrap()
            .to_string();
        let path = format!("/sdk-{generation}");
        let hits = hook.wait(&path, Duration::from_secs(15), |h| {
            h.body["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
                || h.body["status"]["state"] == "completed"
        });
        for h in &hits {
            assert_eq!(
                h.header("authorization"),
                Some(format!("Bearer {SECRET}").as_str())
            );
            assert_eq!(
                h.header("x-a2a-notification-token"),
                Some(format!("tok-{generation}").as_str())
            );
            let about = if generation == "1.0" {
                let (_, ev) = h.body.as_object().unwrap().iter().next().unwrap();
                ev.get("taskId").unwrap_or(&ev["id"]).clone()
            } else {
                h.body["id"].clone()
            };
            assert_eq!(about, id.as_str(), "{:?}", h.body);
        }
        assert!(
            hook.on(&format!("{path}-extra")).is_empty(),
            "a deleted config was called"
        );
    }
    assert!(other.hits().is_empty(), "{:?}", other.hits());
    sigterm(running.child.id());
    let status = running.child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "mur run after SIGTERM: {status}");
}
