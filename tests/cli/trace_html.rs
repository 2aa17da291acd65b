//! `mur trace --html`: a trace whose task and tool result carry `<script>`, `</script>`,
//! an `<img onerror>` and `<!--` becomes a page where that text is only ever escaped, under
//! a content-security policy naming the page's own style and script by hash; loaded in
//! headless Chromium (Debian's `chromium`) it logs no console error and no CSP violation,
//! the planted script never runs, and the rows a person reads are in the DOM. A page that
//! cannot be written whole (a full disk) is an error and leaves no file.

use crate::common;

use common::capsule::{text, MUR};
use common::TempDir;
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What a planted payload would do if it ran: change the title, add an element.
const SCRIPT: &str = "<script>document.title='PWNED'</script>";
const BREAKOUT: &str =
    "</script><img src=x onerror=\"document.body.appendChild(document.createElement('pwned'))\">";
const COMMENT: &str = "<!--";
const SID: &str = "ses_0123456789abcdef0123456789abcdef";

fn planted() -> String {
    format!("{SCRIPT} {BREAKOUT} {COMMENT} <script>alert(1)</script>")
}

/// A session with one failed task: a turn, a tool call failing with the planted text as
/// its result, a delegation; then a garbled line and a last line cut short.
fn hostile_trace(dir: &Path) -> PathBuf {
    let p = planted();
    let events = [
        json!({"event_type": "session_start", "timestamp": 1_000, "session_id": SID,
            "capsule_name": "probe", "capsule_version": "1.0.0"}),
        json!({"event_type": "task_start", "timestamp": 1_010, "task_id": format!("t1 {p}"),
            "source": p, "context_id": "c1"}),
        json!({"event_type": "inference", "timestamp": 1_400, "turn": 1, "input_tokens": 700,
            "output_tokens": 30, "decision": "tool_call", "tool_name": "bash"}),
        json!({"event_type": "tool_call", "timestamp": 1_700, "turn": 1, "tool_name": "bash",
            "input": {"command": p}, "duration_ms": 250, "status": "error",
            "error": format!("exit 1: boom {p}")}),
        json!({"event_type": "delegation", "timestamp": 1_900, "delegation_id": "dlg_1",
            "capsule": "worker", "version": "1.0.0", "status": "failed",
            "child_session_id": "ses_c", "duration_ms": 120, "output": p}),
        json!({"event_type": "task_end", "timestamp": 2_000, "task_id": "t1", "exit_status": "failed",
            "turns": 1, "tool_calls": 1, "input_tokens": 700, "output_tokens": 30, "duration_ms": 990}),
        json!({"event_type": "session_end", "timestamp": 2_100, "exit_status": "failed", "duration_ms": 1_100}),
    ];
    let mut body: String = events.iter().map(|e| format!("{e}\n")).collect();
    body.push_str(&format!(
        "{p}\n{{\"event_type\":\"tool_call\",\"tool_name\":\"{SCRIPT}"
    ));
    let path = dir.join("trace.jsonl");
    std::fs::write(&path, body).unwrap();
    path
}

fn html(trace: &Path, out: &Path) -> Output {
    Command::new(MUR)
        .args(["trace", trace.to_str().unwrap(), "--html", out.to_str().unwrap()])
        .output()
        .unwrap()
}

/// The text between `open` and the next `</script>`.
fn element<'a>(page: &'a str, open: &str) -> &'a str {
    let start = page.find(open).unwrap_or_else(|| panic!("no {open} in the page")) + open.len();
    &page[start..start + page[start..].find("</script>").unwrap()]
}

#[test]
fn planted_markup_in_a_task_and_a_tool_result_is_only_escaped() {
    let t = TempDir::new("trace-html-escape");
    let trace = hostile_trace(t.path());
    let out_path = t.path().join("page.html");
    let out = html(&trace, &out_path);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let page = std::fs::read_to_string(&out_path).unwrap();
    assert!(
        text(&out.stdout).starts_with(&format!(
            "wrote {}: 7 events, {} bytes",
            out_path.display(),
            page.len()
        )),
        "{}",
        text(&out.stdout)
    );
    // Line 8 (garbled) and line 9 (cut short) are named on stderr and in the page.
    assert!(
        text(&out.stderr).contains("line 8: not JSON"),
        "{}",
        text(&out.stderr)
    );
    assert!(page.contains("2 lines skipped:") && page.contains("line 9: truncated (no newline)"));

    // Exactly the page's own two script elements, no planted element, comment or handler.
    assert_eq!(page.matches("<script").count(), 2, "{page}");
    assert_eq!(page.matches("</script>").count(), 2, "{page}");
    for raw in [
        "<img",
        "<!--",
        "onerror=\"",
        "<pwned",
        "<script>document",
        "<script>alert",
    ] {
        assert!(!page.contains(raw), "{raw} unescaped in the page");
    }
    // The text is there, escaped: as HTML in the static parts, as \u escapes in the JSON.
    assert!(page.contains("exit 1: boom &lt;script&gt;document.title=&#39;PWNED&#39;&lt;/script&gt; &lt;/script&gt;&lt;img src=x onerror="), "{page}");
    let data = element(&page, "<script type=\"application/json\" id=\"page-data\">");
    assert!(data.contains("t1 \\u003cscript\\u003edocument.title='PWNED'\\u003c/script\\u003e \\u003c/script\\u003e\\u003cimg src=x"));
    assert!(data.contains("\\u003c!--"));
    let rows: serde_json::Value = serde_json::from_str(data).unwrap();
    assert!(rows["rows"]
        .to_string()
        .contains(&serde_json::to_string(&planted()).unwrap()[1..40]));

    // The policy: nothing by default, the page's exact style and script by SHA-256.
    let script = element(&page, "<script>");
    let style = &page[page.find("<style>").unwrap() + 7..page.find("</style>").unwrap()];
    let csp = format!(
        "default-src &#39;none&#39;; style-src {}; script-src {};",
        murmur::page::escape(&murmur::page::hash_source(style)),
        murmur::page::escape(&murmur::page::hash_source(script))
    );
    assert!(
        page.contains(&format!(
            "<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}"
        )),
        "{page}"
    );
    assert!(!page.contains("unsafe-inline") && !page.contains("http://") && !page.contains("https://"));
}

#[test]
fn a_real_session_by_id_becomes_a_page() {
    use common::capsule::{capsule, manifest_arg, mur, session_of};
    let t = TempDir::new("trace-html-real");
    let dir = capsule(&t, "examples/hello/capsule.wasm", "");
    let sid = session_of(&mur(
        &t,
        &["--manifest", &manifest_arg(&dir), "--task", "go"],
        &[],
    ));
    let page = t.path().join("page.html");
    let out = Command::new(MUR)
        .args(["trace", "--session", &sid, "--html", page.to_str().unwrap()])
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(": 4 events,"), "{}", text(&out.stdout));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains(&format!("<title>mur trace {sid}</title>")));
    assert!(html.contains("outcome <b class=\"\">ok</b>"), "{html}");
    assert!(!html.contains("id=\"failures\"") && !html.contains("lines skipped"));
    let data = element(&html, "<script type=\"application/json\" id=\"page-data\">");
    let data: serde_json::Value = serde_json::from_str(data).unwrap();
    // The session's group and its one task, which ended ok.
    assert_eq!(data["groups"].as_array().unwrap().len(), 2, "{data}");
    assert_eq!(data["groups"][1][3], "ok");
    assert_eq!(data["rows"].as_array().unwrap().len(), 4);
}

#[test]
fn html_takes_neither_follow_nor_json_and_an_unwritable_page_is_an_error() {
    let t = TempDir::new("trace-html-flags");
    let trace = hostile_trace(t.path());
    for flag in ["--follow", "--json"] {
        let out = Command::new(MUR)
            .args(["trace", trace.to_str().unwrap(), "--html", "x.html", flag])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", text(&out.stderr));
    }
    let out = html(&trace, &t.path().join("no-such-dir/page.html"));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot write"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
#[cfg_attr(not(murmur_test_root), ignore = "needs root: mounts a tmpfs")]
fn a_page_that_does_not_fit_the_disk_is_an_error_and_leaves_no_file() {
    let t = TempDir::new("trace-html-full");
    let disk = common::tmpfs::Tmpfs::mount(&t.path().join("disk"), "16k")
        .unwrap_or_else(|why| panic!("mounting a tmpfs was refused: {why}"));
    let trace = t.path().join("big.jsonl");
    let line = |i: u64| {
        json!({"event_type": "tool_call", "timestamp": i, "tool_name": "bash", "duration_ms": 1,
            "status": "ok", "input": {"command": format!("echo {i} {}", "x".repeat(60))}})
    };
    let body: String = (0..500).map(|i| format!("{}\n", line(i))).collect();
    std::fs::write(&trace, body).unwrap();
    let out = html(&trace, &disk.path().join("page.html"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains("No space left on device"),
        "{}",
        text(&out.stderr)
    );
    let left: Vec<_> = std::fs::read_dir(disk.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Debian's `chromium`, or why the test cannot run: absent, it fails naming the install
/// step, unless `MURMUR_SKIP_BROWSER=1` says to skip (then it says so).
pub fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if found.is_none() && std::env::var("MURMUR_SKIP_BROWSER").as_deref() == Ok("1") {
        eprintln!("skipped: chromium is not installed and MURMUR_SKIP_BROWSER=1");
        return None;
    }
    Some(found.unwrap_or_else(|| {
        panic!("chromium is not installed: apt-get install -y chromium (or set MURMUR_SKIP_BROWSER=1 to skip the browser tests)")
    }))
}

/// Load `page` in headless Chromium with no network (a dead loopback proxy, every host
/// name unresolvable, background networking off): the DOM after its scripts ran, and the
/// browser's log (console messages and CSP violations are its `CONSOLE` lines).
pub fn load(browser: &str, page: &Path, scratch: &Path) -> (String, Vec<String>) {
    let url = format!("file://{}", page.display());
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--proxy-server=127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            scratch.join("chromium-profile").display()
        ))
        .args(["--dump-dom", &url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    // Read both pipes while it runs (the DOM of a big page is megabytes).
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            // The whole browser: its renderer and GPU processes are in its group.
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("chromium did not finish loading {url} in 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = (stdout.join().unwrap(), stderr.join().unwrap());
    let console = text(&out.1)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (text(&out.0), console)
}

#[test]
fn the_page_loads_in_chromium_with_no_error_and_the_planted_script_never_runs() {
    let Some(browser) = chromium() else { return };
    let t = TempDir::new("trace-html-chromium");
    let trace = hostile_trace(t.path());
    let page = t.path().join("page.html");
    assert_eq!(html(&trace, &page).status.code(), Some(0));
    let (dom, console) = load(browser, &page, t.path());
    assert!(
        console.is_empty(),
        "console errors or CSP violations: {console:#?}"
    );
    assert!(dom.contains(&format!("<title>mur trace {SID}</title>")), "{dom}");
    assert!(
        !dom.contains("PWNED</title>") && !dom.contains("<pwned") && !dom.contains("<img"),
        "{dom}"
    );
    // The page's own script ran and drew the rows a person reads.
    assert!(dom.contains("data-ready=\"1\""), "{dom}");
    for wanted in [
        "<details class=\"group\" data-group=\"1\" open=\"\">",
        "<span class=\"text\">task t1 &lt;script&gt;document.title='PWNED'&lt;/script&gt;",
        "<div class=\"row bad\">",
        "tool bash error in 250 ms",
        "exit 1: boom &lt;script&gt;",
        "delegation to worker@1.0.0 (dlg_1) child ses_c in 120 ms: failed",
        "<span class=\"num\">700 in / 30 out</span>",
    ] {
        assert!(dom.contains(wanted), "{wanted} not in the DOM:\n{dom}");
    }
}

#[test]
fn a_sixty_thousand_event_trace_opens_with_its_tasks_collapsed() {
    let Some(browser) = chromium() else { return };
    let t = TempDir::new("trace-html-big");
    let mut body = String::new();
    let mut ts = 1_000u64;
    for task in 0..600 {
        body.push_str(&format!(
            "{}\n",
            json!({"event_type": "task_start", "timestamp": ts, "task_id": format!("task-{task}")})
        ));
        for turn in 0..49 {
            ts += 10;
            body.push_str(&format!("{}\n", json!({"event_type": "inference", "timestamp": ts, "turn": turn, "input_tokens": 100, "output_tokens": 5})));
            ts += 10;
            body.push_str(&format!("{}\n", json!({"event_type": "tool_call", "timestamp": ts, "tool_name": "bash", "duration_ms": 9, "status": "ok", "input": {"command": "ls"}})));
        }
        body.push_str(&format!("{}\n", json!({"event_type": "task_end", "timestamp": ts, "task_id": format!("task-{task}"), "exit_status": "ok"})));
    }
    let trace = t.path().join("trace.jsonl");
    std::fs::write(&trace, body).unwrap();
    let page = t.path().join("page.html");
    let out = html(&trace, &page);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(": 60000 events,"),
        "{}",
        text(&out.stdout)
    );
    let started = Instant::now();
    let (dom, console) = load(browser, &page, t.path());
    let took = started.elapsed();
    assert!(console.is_empty(), "{console:#?}");
    // 300 of the 601 groups drawn, none opened: a few thousand elements, not 60,000 rows.
    assert_eq!(dom.matches("<details class=\"group\"").count(), 300);
    assert_eq!(dom.matches("<div class=\"row ").count(), 0);
    assert!(
        dom.contains("show 300 more of 301 tasks"),
        "{}",
        &dom[dom.len().saturating_sub(2000)..]
    );
    eprintln!("a 60,000-event page loaded in {:.1} s", took.as_secs_f64());
}
