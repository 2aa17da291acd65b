//! `mur eval run` through the real binaries against the mock provider: a dataset of four
//! cases (a `start` directory copied in, a check that passes, one that fails, one that runs
//! past its deadline) over a capsule and a variant, `--repeat 2 --jobs 2`: each run's
//! verdict and reason in the JSON, the table's figures, the JUnit file read back by Python's
//! XML parser and held to the attributes Jenkins' JUnit schema requires, the tokens from the
//! traces; relative paths from another directory, quoted checks, and an interrupt (its run
//! not counted); a dataset whose paths climb out, a check that does not split or a capsule
//! that cannot load is refused before anything runs.

use crate::common;

use common::agent::{Drv, Spec, World, KEY, KEY_VAR};
use common::capsule::MUR;
use common::provider::{last_user_text, Provider, Recorded, Step};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// Every request answered with a text naming the model that was asked; a task saying
/// `crash` gets a 401 instead (the session fails at once).
fn responder(req: &Recorded) -> Step {
    if last_user_text(req).contains("crash") {
        return Step::status(401, "bad key");
    }
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    Step::text(&format!("answer from {}", body["model"].as_str().unwrap_or("?")))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn eval_run(w: &World, args: &[&str]) -> Output {
    Command::new(MUR)
        .arg("eval")
        .arg("run")
        .args(args)
        .env("MURMUR_RECORDS_DIR", w.t.path().join("records"))
        .env("MURMUR_EVAL_DIR", w.t.path().join("eval"))
        .env("MURMUR_CACHE_DIR", w.t.path().join("cache"))
        .env(KEY_VAR, KEY)
        .output()
        .unwrap()
}

/// `mur eval run MANIFEST --registry-path REGISTRY --dataset DATASET --json`: the output,
/// its JSON and its stderr.
fn eval_json(w: &World, manifest: &str, registry: &str, dataset: &str) -> (Output, Value, String) {
    let out = eval_run(
        w,
        &[
            manifest,
            "--registry-path",
            registry,
            "--dataset",
            dataset,
            "--json",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (out, v, stderr)
}

/// A capsule (model `mock-1`) and its variant (model `mock-2`), `test` and `sleep` allowed.
fn capsules(w: &World, p: &Provider) -> (String, String) {
    let mut spec = Spec::new(Drv::OpenAi, p);
    spec.shell = vec!["test".into(), "sleep".into()];
    spec.max_turns = 2;
    w.manifest(&spec);
    let variant = w.t.path().join("variant/murmur.yaml");
    write(&variant, &spec.yaml().replace("model: mock-1", "model: mock-2"));
    (
        w.dir.join("murmur.yaml").display().to_string(),
        variant.display().to_string(),
    )
}

#[test]
fn a_dataset_runs_every_case_contained_with_variants_repeats_and_junit() {
    let w = World::new("eval-run");
    let p = Provider::start_responder(responder);
    let (manifest, variant) = capsules(&w, &p);
    let data = w.t.path().join("data");
    write(&data.join("tasks/t.md"), "do the task\n");
    write(&data.join("tasks/crash.md"), "crash now\n");
    write(&data.join("starts/one/in/seed.txt"), "seed\n");
    write(
        &data.join("cases.jsonl"),
        concat!(
            r#"{"case_id":"seeded","task_path":"tasks/t.md","start":"starts/one","check":"test -s in/seed.txt"}"#,
            "\n",
            r#"{"case_id":"answered","task_path":"tasks/t.md","check":{"command":"test -s out/result.txt","timeout_secs":30}}"#,
            "\n",
            r#"{"case_id":"missing","task_path":"tasks/t.md","check":"test -f out/nothing"}"#,
            "\n",
            r#"{"case_id":"slow","task_path":"tasks/t.md","check":{"command":"sleep 30","timeout_secs":1}}"#,
            "\n",
            r#"{"case_id":"crashing","task_path":"tasks/crash.md","check":"test -s out/result.txt"}"#,
            "\n"
        ),
    );
    let dataset = data.join("cases.jsonl").display().to_string();
    let junit = w.t.path().join("junit.xml");
    let registry = w.reg.display().to_string();
    let out = eval_run(
        &w,
        &[
            &manifest,
            "--variant",
            &variant,
            "--registry-path",
            &registry,
            "--dataset",
            &dataset,
            "--repeat",
            "2",
            "--jobs",
            "2",
            "--json",
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "three cases fail: {stderr}");
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with('[')).count(),
        20,
        "{stderr}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(v["repeat"], 2);
    for (i, model) in [(0, "mock-1"), (1, "mock-2")] {
        let var = &v["variants"][i];
        assert_eq!(
            (var["runs"].as_u64(), var["passes"].as_u64()),
            (Some(10), Some(4)),
            "{var}"
        );
        assert_eq!(var["pass_rate"], 0.4);
        assert_eq!(var["pass_hat_k"], 0.4);
        assert!(var["input_tokens"].as_u64().unwrap() > 0, "{var}");
        let summed: u64 = var["cases"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["runs"].as_array().unwrap())
            .map(|r| r["wall_ms"].as_u64().unwrap())
            .sum();
        assert_eq!(var["run_ms"].as_u64(), Some(summed), "{var}");
        assert!(summed > 0);
        let cases = var["cases"].as_array().unwrap();
        let verdicts: Vec<(String, Vec<bool>)> = cases
            .iter()
            .map(|c| {
                let runs = c["runs"].as_array().unwrap();
                (
                    c["case_id"].as_str().unwrap().to_string(),
                    runs.iter().map(|r| r["pass"] == true).collect(),
                )
            })
            .collect();
        let want = |id: &str, pass: bool| (id.to_string(), vec![pass, pass]);
        assert_eq!(
            verdicts,
            [
                want("seeded", true),
                want("answered", true),
                want("missing", false),
                want("slow", false),
                want("crashing", false)
            ]
        );
        let reason = |c: usize| cases[c]["runs"][0]["reason"].as_str().unwrap().to_string();
        assert!(
            reason(4).starts_with("the session failed (exit 1): error["),
            "{}",
            reason(4)
        );
        assert!(
            reason(2).starts_with("the check `test -f out/nothing` exited 1"),
            "{}",
            reason(2)
        );
        assert_eq!(reason(3), "the check ran past 1 s and was ended");
        // The answer really came from this variant's model, in its own workdir.
        let workdir = cases[1]["runs"][0]["workdir"].as_str().unwrap();
        let result = std::fs::read_to_string(Path::new(workdir).join("out/result.txt")).unwrap();
        assert_eq!(result.trim(), format!("answer from {model}"));
        let sid = cases[1]["runs"][0]["session_id"].as_str().unwrap();
        assert!(w.t.path().join("records").join(sid).join("trace.jsonl").is_file());
    }

    assert_eq!(
        junit_suites(&junit),
        "variant 1 10 6 0 0 crashing#1,crashing#2,missing#1,missing#2,slow#1,slow#2\nvariant 2 10 6 0 0 crashing#1,crashing#2,missing#1,missing#2,slow#1,slow#2\n",
    );
}

/// The JUnit file read by Python's XML parser and held to the attributes Jenkins' JUnit
/// schema (xunit-plugin's junit-10.xsd) requires: `name`, `tests`, `failures` and `errors`
/// on every `<testsuite>` (whole numbers, agreeing with its test cases, as `skipped` must
/// too), `name` on every `<testcase>`, times as decimals. Each suite as `name tests failures
/// errors skipped failed-cases`, a line each.
fn junit_suites(path: &Path) -> String {
    let script = r#"
import re, sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
assert root.tag == 'testsuites', root.tag
for s in root.findall('testsuite'):
    for a in ('name', 'tests', 'failures', 'errors'):
        assert s.get(a) is not None, 'testsuite %s lacks %s' % (s.get('name'), a)
    cases = s.findall('testcase')
    assert all(c.get('name') for c in cases), 'a testcase lacks its name'
    assert all(re.fullmatch(r'[0-9]*(\.[0-9]*)?', c.get('time', '0')) for c in cases)
    having = lambda tag: [c.get('name') for c in cases if c.find(tag) is not None]
    assert int(s.get('tests')) == len(cases), s.attrib
    assert int(s.get('failures')) == len(having('failure')), s.attrib
    assert int(s.get('errors')) == len(having('error')), s.attrib
    assert int(s.get('skipped', '0')) == len(having('skipped')), s.attrib
    print(s.get('name'), s.get('tests'), s.get('failures'), s.get('errors'), s.get('skipped'),
          ','.join(sorted(having('failure'))))
"#;
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stderr}\n{}",
        std::fs::read_to_string(path).unwrap()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_dataset_whose_paths_climb_out_is_refused_before_anything_runs() {
    let w = World::new("eval-run-escape");
    let p = Provider::start_responder(responder);
    let (manifest, _) = capsules(&w, &p);
    let data = w.t.path().join("data");
    write(&data.join("secret.md"), "not for the dataset\n");
    for (line, why) in [
        (
            r#"{"case_id":"c","task_path":"../secret.md"}"#,
            "line 1: 'task_path' climbs out with '..'",
        ),
        (
            r#"{"case_id":"c","task_path":"/etc/hostname"}"#,
            "line 1: 'task_path' is absolute",
        ),
        (
            r#"{"case_id":"c","task_path":"nothing.md"}"#,
            "case c: task_path nothing.md: ",
        ),
        (
            r#"{"case_id":"c","task_path":"link.md"}"#,
            "case c: task_path link.md: ",
        ),
        (
            r#"{"case_id":"c","task_path":"t.md","start":"start"}"#,
            "case c: start start: the file could not be read: sub/out is a symlink",
        ),
    ] {
        write(&data.join("inner/t.md"), "task\n");
        write(&data.join("inner/start/sub/in.txt"), "fine\n");
        let out_link = data.join("inner/start/sub/out");
        if std::fs::symlink_metadata(&out_link).is_err() {
            std::os::unix::fs::symlink("/etc", &out_link).unwrap();
        }
        let link = data.join("inner/link.md");
        if std::fs::symlink_metadata(&link).is_err() {
            std::fs::create_dir_all(data.join("inner")).unwrap();
            std::os::unix::fs::symlink("../secret.md", &link).unwrap();
        }
        write(&data.join("inner/cases.jsonl"), line);
        let dataset = data.join("inner/cases.jsonl").display().to_string();
        let out = eval_run(&w, &[&manifest, "--dataset", &dataset]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.starts_with("error[E-IO-003]: "), "{stderr}");
        assert!(stderr.contains(why), "{why}: {stderr}");
        assert!(!w.t.path().join("records").exists(), "a session ran: {stderr}");
    }
}

/// The README's form from another directory: every path relative to the caller's (the
/// manifest, the variant, the registry, the dataset, the JUnit file, the records and eval
/// roots), and every run passes; a variant that cannot load fails the evaluation once,
/// naming its file, before any session starts.
#[test]
fn relative_paths_from_another_directory_and_a_bad_variant_checked_up_front() {
    let w = World::new("eval-run-relative");
    let p = Provider::start_responder(responder);
    capsules(&w, &p);
    let data = w.t.path().join("data");
    write(&data.join("t.md"), "do the task\n");
    write(
        &data.join("cases.jsonl"),
        concat!(
            r#"{"case_id":"answered","task_path":"t.md","check":"test -s out/result.txt"}"#,
            "\n"
        ),
    );
    let from = w.t.path().join("elsewhere");
    std::fs::create_dir_all(&from).unwrap();
    let eval_run_here = |variant: &str| {
        Command::new(MUR)
            .current_dir(&from)
            .args(["eval", "run", "../capsule/murmur.yaml", "--variant", variant])
            .args([
                "--registry-path",
                "../registry",
                "--dataset",
                "../data/cases.jsonl",
            ])
            .args(["--junit", "junit.xml", "--json"])
            .env("MURMUR_RECORDS_DIR", "../records")
            .env("MURMUR_EVAL_DIR", "../eval")
            .env("MURMUR_CACHE_DIR", w.t.path().join("cache"))
            .env(KEY_VAR, KEY)
            .output()
            .unwrap()
    };
    let out = eval_run_here("../variant/murmur.yaml");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    for var in v["variants"].as_array().unwrap() {
        assert_eq!(
            (var["runs"].as_u64(), var["passes"].as_u64()),
            (Some(1), Some(1)),
            "{var}"
        );
    }
    assert!(from.join("junit.xml").is_file());
    assert!(w.t.path().join("records").is_dir());

    // A variant that is not there, then one whose `${NAME}` is unset: refused once, named.
    write(
        &w.t.path().join("unset/murmur.yaml"),
        &std::fs::read_to_string(w.t.path().join("variant/murmur.yaml"))
            .unwrap()
            .replace(KEY_VAR, "MURMUR_TEST_UNSET_KEY"),
    );
    std::fs::remove_dir_all(w.t.path().join("records")).unwrap();
    for (variant, why) in [
        ("../nothing/murmur.yaml", "error[E-IO-001]: manifest not found: "),
        ("../unset/murmur.yaml", "error[E-MAN-003]: "),
    ] {
        let out = eval_run_here(variant);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.starts_with(why), "{why}: {stderr}");
        let first = stderr.lines().next().unwrap();
        let file = variant.trim_start_matches("..");
        assert!(first.contains(file), "the file is not named: {stderr}");
        assert_eq!(stderr.matches("error[").count(), 1, "{stderr}");
        assert!(!w.t.path().join("records").exists(), "a session ran: {stderr}");
    }
}

/// A `check` is split by POSIX shell quoting: `grep -q "answer from mock-1" out/result.txt`
/// gives grep the pattern `answer from mock-1` (split on whitespace it would look for
/// `"answer`), likewise single quotes and a backslash; a check with an unterminated quote
/// refuses the dataset, naming the line, before anything runs.
#[test]
fn a_quoted_check_keeps_its_words_and_an_unterminated_quote_is_refused() {
    let w = World::new("eval-run-quoted");
    let p = Provider::start_responder(responder);
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.shell = vec!["grep".into()];
    spec.max_turns = 2;
    w.manifest(&spec);
    let manifest = w.dir.join("murmur.yaml").display().to_string();
    let registry = w.reg.display().to_string();
    let data = w.t.path().join("data");
    write(&data.join("t.md"), "do the task\n");
    write(
        &data.join("cases.jsonl"),
        concat!(
            r#"{"case_id":"double","task_path":"t.md","check":"grep -q \"answer from mock-1\" out/result.txt"}"#,
            "\n",
            r#"{"case_id":"single","task_path":"t.md","check":"grep -q 'answer from' out/result.txt"}"#,
            "\n",
            r#"{"case_id":"backslash","task_path":"t.md","check":"grep -q answer\\ from out/result.txt"}"#,
            "\n",
            r#"{"case_id":"wrong","task_path":"t.md","check":"grep -q \"answer from mock-2\" out/result.txt"}"#,
            "\n"
        ),
    );
    let dataset = data.join("cases.jsonl").display().to_string();
    let (_, v, stderr) = eval_json(&w, &manifest, &registry, &dataset);
    let cases = v["variants"][0]["cases"].as_array().unwrap();
    let pass: Vec<(&str, bool)> = cases
        .iter()
        .map(|c| (c["case_id"].as_str().unwrap(), c["runs"][0]["pass"] == true))
        .collect();
    assert_eq!(
        pass,
        [
            ("double", true),
            ("single", true),
            ("backslash", true),
            ("wrong", false)
        ],
        "{v}\n{stderr}"
    );

    write(
        &data.join("cases.jsonl"),
        concat!(
            r#"{"case_id":"fine","task_path":"t.md","check":"grep -q x out/result.txt"}"#,
            "\n",
            r#"{"case_id":"open","task_path":"t.md","check":"grep -q \"DONE. The out/result.txt"}"#,
            "\n"
        ),
    );
    let out = eval_run(
        &w,
        &[&manifest, "--registry-path", &registry, "--dataset", &dataset],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error[E-IO-003]: ")
            && stderr.contains(
                "cases.jsonl line 2: 'check.command' does not split into words: unterminated double quote"
            ),
        "{stderr}"
    );
    assert!(!stderr.contains("] variant"), "a case ran: {stderr}");
}

#[test]
fn an_interrupted_run_ends_its_cases_and_prints_what_finished() {
    let w = World::new("eval-run-sigint");
    let p = Provider::start_responder(responder);
    let (manifest, _) = capsules(&w, &p);
    let data = w.t.path().join("data");
    write(&data.join("t.md"), "go\n");
    write(
        &data.join("cases.jsonl"),
        concat!(
            r#"{"case_id":"quick","task_path":"t.md"}"#,
            "\n",
            r#"{"case_id":"long","task_path":"t.md","check":{"command":"sleep 40","timeout_secs":60}}"#,
            "\n"
        ),
    );
    let dataset = data.join("cases.jsonl").display().to_string();
    let registry = w.reg.display().to_string();
    let junit = w.t.path().join("junit.xml");
    let child = Command::new(MUR)
        .args([
            "eval",
            "run",
            &manifest,
            "--registry-path",
            &registry,
            "--dataset",
            &dataset,
            "--jobs",
            "1",
            "--junit",
            junit.to_str().unwrap(),
        ])
        .env("MURMUR_RECORDS_DIR", w.t.path().join("records"))
        .env("MURMUR_EVAL_DIR", w.t.path().join("eval"))
        .env("MURMUR_CACHE_DIR", w.t.path().join("cache"))
        .env(KEY_VAR, KEY)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the long case's check (a `sleep 40` under mur exec) is running.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let sleeping = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            cmd == b"sleep\x0040\x00" || cmd.ends_with(b"/sleep\x0040\x00")
        })
    };
    while !sleeping() {
        assert!(std::time::Instant::now() < until, "the check never started");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let began = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        began.elapsed() < std::time::Duration::from_secs(20),
        "{:?}",
        began.elapsed()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with("interrupted: the table holds the runs that finished"),
        "{stdout}"
    );
    let row = |case: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(case))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
    };
    // The run the interrupt ended is reported as such and counted nowhere: not a failure.
    assert_eq!(row("quick"), Some(vec!["quick", "1/1"]), "{stdout}");
    assert_eq!(row("long"), Some(vec!["long", "0/0"]), "{stdout}");
    assert!(
        stdout.contains("pass rate 100.0% (1 of 1 runs; 1 interrupted, not counted)"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("case long run 1: interrupted (") && !stderr.contains("FAIL"),
        "{stderr}"
    );
    assert_eq!(junit_suites(&junit), "variant 1 2 0 0 1 \n");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<skipped message=\"interrupted: "), "{xml}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!sleeping(), "the interrupted check outlived the run");
}

/// An agent that plants what would make its check pass (a Python `usercustomize.py` in its
/// user site, a `.bashrc` and `.profile`, and its own version of the dataset's check
/// script) still gets the check's true verdict: the check's HOME is not the agent's, and
/// the check script is copied in again from the dataset after the agent ended.
#[test]
fn a_check_the_agent_planted_for_still_gives_the_true_verdict() {
    let w = World::new("eval-planted");
    let plant = concat!(
        "site=$(python3 -c 'import site; print(site.getusersitepackages())'); ",
        "mkdir -p \"$site\" && echo 'import os; os._exit(0)' > \"$site/usercustomize.py\"; ",
        "echo 'exit 0' > ~/.bashrc; echo 'exit 0' > ~/.profile; ",
        "echo 'exit 0' > check.sh; echo 'import sys; sys.exit(0)' > check.py; echo planted"
    );
    // Each case's agent plants, then answers.
    let p = Provider::start_responder(move |req| {
        if common::provider::last_is_tool_result(req) {
            Step::text("done")
        } else {
            Step::tool("c1", "bash", serde_json::json!({"command": plant}))
        }
    });
    let mut spec = Spec::new(Drv::OpenAi, &p);
    spec.shell = vec!["bash".into(), "python3".into(), "mkdir".into()];
    w.manifest(&spec);
    let data = w.t.path().join("data");
    write(&data.join("tasks/t.md"), "make the check pass\n");
    // The dataset's own check scripts fail: the true verdict of both cases.
    write(&data.join("starts/s/check.sh"), "exit 1\n");
    write(&data.join("starts/s/check.py"), "import sys\nsys.exit(1)\n");
    write(
        &data.join("cases.jsonl"),
        concat!(
            r#"{"case_id":"shell","task_path":"tasks/t.md","start":"starts/s","check":"bash check.sh"}"#,
            "\n",
            r#"{"case_id":"python","task_path":"tasks/t.md","start":"starts/s","check":"python3 check.py"}"#,
            "\n"
        ),
    );
    let manifest = w.dir.join("murmur.yaml").display().to_string();
    let dataset = data.join("cases.jsonl").display().to_string();
    let registry = w.reg.display().to_string();
    let (out, v, stderr) = eval_json(&w, &manifest, &registry, &dataset);
    assert_eq!(v["variants"][0]["passes"], 0, "{v}\n{stderr}");
    assert_eq!(v["variants"][0]["runs"], 2, "{v}\n{stderr}");
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The agents really planted them, so the verdicts are the checks' own.
    for case in v["variants"][0]["cases"].as_array().unwrap() {
        let work = Path::new(case["runs"][0]["workdir"].as_str().unwrap());
        assert!(work.join(".home/.bashrc").is_file(), "{case}");
        let planted = common::agent::files_under(&work.join(".home"))
            .into_iter()
            .any(|(p, _)| p.ends_with("usercustomize.py"));
        assert!(planted, "{case}");
        assert!(
            case["runs"][0]["reason"].as_str().unwrap().contains("exited 1"),
            "{case}"
        );
    }
}
