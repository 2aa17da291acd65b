//! `mur eval show` and `mur eval diff` on hand-written `eval.jsonl` files of both record
//! types (the eval hook that writes them in a session is not built yet): the per-scorer and
//! per-dataset tallies in text and JSON, a file found by session id in the records root,
//! malformed lines reported by number and skipped, an unknown record type refusing the file,
//! nothing a file holds reaching the terminal as a control character, and a diff's verdict.

use crate::common;

use common::capsule::{text, MUR};
use common::TempDir;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Output};

fn eval(args: &[&str], records: Option<&Path>) -> Output {
    let mut cmd = Command::new(MUR);
    cmd.arg("eval").args(args);
    if let Some(r) = records {
        cmd.env("MURMUR_RECORDS_DIR", r);
    }
    cmd.output().unwrap()
}

fn score(scorer: &str, pass: bool, turn: Value) -> String {
    let (result, score) = if pass { ("pass", 1) } else { ("fail", 0) };
    json!({"type": "event_score", "ts": 1_765_000_000_000u64, "turn": turn, "event_type": "session_end",
        "scorer": scorer, "result": result, "score": score, "reason": "why \u{1b}[31m\u{202e}"})
    .to_string()
}

fn run(case: &str, overall: &str, exit_ok: f64) -> String {
    json!({"type": "dataset_run", "ts": 1_765_000_000_001u64, "dataset_id": "smoke", "case_id": case,
        "overall": overall, "scores": {"exit_ok": exit_ok}})
    .to_string()
}

fn write(dir: &Path, lines: &[String]) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("eval.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

#[test]
fn show_tallies_each_scorer_and_dataset_and_names_bad_lines() {
    let t = TempDir::new("eval-show");
    let sid = "ses_0123456789abcdef0123456789abcdef";
    let path = write(
        &t.path().join("records").join(sid),
        &[
            score("exit_ok", true, json!(null)),
            score("turn_limit", false, json!(3)),
            score("turn_limit", true, json!(4)),
            "{not json".into(),
            run("a", "pass", 1.0),
            run("b", "fail", 0.0),
            json!({"type": "event_score", "ts": 1, "event_type": "x", "scorer": "\u{1b}]0;pwn\u{7}",
                "result": "pass", "score": 7})
            .to_string(),
        ],
    );
    let out = eval(&["show", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout,
        "eval: 3 event scores, 2 dataset runs, 2 malformed lines skipped\n\
         scorer                     pass   fail  pass rate  mean score\n\
         exit_ok                       1      0     100.0%       1.000\n\
         turn_limit                    1      1      50.0%       0.500\n\
         dataset smoke: 2 runs: 1 pass, 1 fail, 0 no_scores (50.0% pass)\n\
         \x20 exit_ok                mean score 0.500\n"
    );
    let stderr = text(&out.stderr);
    let shown = path.display();
    assert_eq!(
        stderr,
        format!(
            "mur eval: {shown} line 4: not a JSON object; skipped\n\
             mur eval: {shown} line 7: 'score' is not a number from 0 to 1; skipped\n"
        )
    );
    assert!(!stdout.contains('\u{1b}') && !stderr.contains('\u{1b}'));

    // The same file by session id (a word and --session), as JSON.
    let records = t.path().join("records");
    for args in [
        vec!["show", "--json", sid],
        vec!["show", "--json", "--session", sid],
    ] {
        let out = eval(&args, Some(&records));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        let v: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
        assert_eq!(
            v["scorers"]["turn_limit"],
            json!({"pass": 1, "fail": 1, "pass_rate": 0.5, "mean_score": 0.5})
        );
        assert_eq!(v["datasets"]["smoke"]["pass_rate"], 0.5);
        assert_eq!(v["malformed_lines"], json!([4, 7]));
    }
}

#[test]
fn an_unknown_record_type_or_no_record_refuses_the_file() {
    let t = TempDir::new("eval-refuse");
    let path = write(
        t.path(),
        &[
            score("exit_ok", true, json!(1)),
            r#"{"type":"verdict","ts":1}"#.into(),
        ],
    );
    let out = eval(&["show", path.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "error[E-IO-003]: {} line 2: unknown record type 'verdict' (this mur reads event_score and dataset_run)",
            path.display()
        )),
        "{stderr}"
    );
    let empty = write(&t.path().join("empty"), &["".into(), "[]".into()]);
    let out = eval(&["show", empty.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no eval records in"),
        "{}",
        text(&out.stderr)
    );
    let out = eval(&["show", t.path().join("missing").to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(1));
    let out = eval(&["frobnicate"], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn diff_compares_two_runs_and_says_which_scored_better() {
    let t = TempDir::new("eval-diff");
    let a = write(
        &t.path().join("a"),
        &[
            score("exit_ok", true, json!(0)),
            score("turn_limit", false, json!(0)),
            run("a", "fail", 0.0),
        ],
    );
    let b = write(
        &t.path().join("b"),
        &[
            score("exit_ok", true, json!(0)),
            score("turn_limit", true, json!(0)),
            run("a", "pass", 1.0),
        ],
    );
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = eval(&["diff", a, b], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "pass rate                                A         B     B - A\n\
         scorer exit_ok                      100.0%    100.0%      +0.0\n\
         scorer turn_limit                     0.0%    100.0%    +100.0\n\
         dataset smoke                         0.0%    100.0%    +100.0\n\
         B scored better\n"
    );
    let out = eval(&["diff", "--json", b, a], None);
    let v: Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert_eq!(v["verdict"], "A scored better");
    assert_eq!(
        v["scorers"]["turn_limit"],
        json!({"a": 1.0, "b": 0.0, "delta": -1.0})
    );
    let out = eval(&["diff", a, a], None);
    assert!(text(&out.stdout).ends_with("A and B scored the same\n"));
    let out = eval(&["diff", a], None);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn show_html_draws_a_bar_per_scorer_and_variant_that_chromium_loads_cleanly() {
    let t = TempDir::new("eval-html");
    let planted = "</script><script>document.title='PWNED'</script><!--";
    let a = write(
        &t.path().join("a"),
        &[
            score("exit_ok", true, json!(0)),
            score("turn_limit", false, json!(0)),
            score(planted, true, json!(0)),
            run("a", "fail", 0.0),
        ],
    );
    let b = write(
        &t.path().join("b"),
        &[
            score("exit_ok", true, json!(0)),
            score("turn_limit", true, json!(0)),
            run("a", "pass", 1.0),
        ],
    );
    let page = t.path().join("eval.html");
    let (a, b, p) = (a.to_str().unwrap(), b.to_str().unwrap(), page.to_str().unwrap());
    let out = eval(&["show", "--html", p, a, b], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        text(&out.stdout),
        format!("wrote {p}: 2 variant(s), {} bytes\n", html.len())
    );
    assert!(!html.contains("<script") && !html.contains("<!--"), "{html}");
    assert!(html.contains("script-src &#39;none&#39;"), "{html}");
    // A: exit_ok and the planted scorer pass, turn_limit and the dataset fail; B passes all
    // three it has; the planted scorer is absent from B.
    for (bar, n) in [
        ("<title>variant 1: 0.0% (0/1)</title>", 2),
        ("<title>variant 1: 100.0% (1/1)</title>", 2),
        ("<title>variant 2: 100.0% (1/1)</title>", 3),
        ("<title>variant 2: -</title>", 1),
    ] {
        assert_eq!(html.matches(bar).count(), n, "{bar}");
    }
    assert_eq!(
        eval(&["show", "--html", p, "--json", a], None).status.code(),
        Some(2)
    );
    assert_eq!(eval(&["diff", "--html", p, a, b], None).status.code(), Some(2));

    let Some(browser) = crate::trace_html::chromium() else {
        return;
    };
    let (dom, console) = crate::trace_html::load(browser, &page, t.path());
    assert!(console.is_empty(), "{console:#?}");
    assert!(dom.contains("<title>mur eval show</title>"), "{dom}");
    assert!(
        !dom.contains("PWNED</title>") && !dom.contains("<script"),
        "{dom}"
    );
    assert!(dom.contains("<section id=\"scorers\">") && dom.contains("<section id=\"datasets\">"));
    assert!(
        dom.contains("&lt;/script&gt;&lt;script&gt;document.title"),
        "{dom}"
    );
}
