//! Egress of an agent session's shell tool (issue 17) through the real `mur run`: a
//! `curl` the model asks for reaches the allowed `localhost:P` and nothing else; each
//! decision is a `network` trace event (bytes each way at close); `--explain-scope` shows
//! the effective egress rules; a host that cannot make the namespace refuses the capsule
//! with E-CAP-005 whatever the class; floods are counted, and a flood under a trace budget
//! leaves a trace within it.

use crate::common;

use common::agent::{Drv, Spec, World};
use common::provider::{tool_results, Provider, Step};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;

/// A host HTTP server on 127.0.0.1 answering every request `hello`; its port and how many
/// connections it took.
fn http_server() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut head = Vec::new();
            let mut b = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&b[..n]),
                }
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
        }
    });
    (port, count)
}

fn spec_for(p: &Provider, class: &str, port: u16) -> Spec {
    let mut spec = Spec::new(Drv::OpenAi, p);
    spec.shell = vec!["sh".into(), "curl".into()];
    spec.network = vec![format!("localhost:{port}")];
    spec.containment = Some(class.into());
    spec.max_turns = 2;
    spec
}

fn session_reaches_only_the_allowed_host(class: &str) {
    let (port, served) = http_server();
    // The model's endpoint is in capabilities.network.allow for the driver; a command gets
    // no route to it (its origin reaches the command through env.allow).
    let command = format!(
        "curl -sS -m 5 http://localhost:{port}/; echo; curl -sS -m 5 http://127.0.0.2:{port}/; echo rc=$?; \
         curl -sS -m 5 $PROVIDER_ORIGIN/v1/models; echo provider=$?"
    );
    let p = Provider::start(vec![
        Step::tool("c1", "sh", json!({ "command": command })),
        Step::text("done"),
    ]);
    let w = World::new(&format!("egress-{class}"));
    let mut spec = spec_for(&p, class, port);
    spec.env_allow = vec!["PROVIDER_ORIGIN".into()];
    let origin = spec.origin();
    w.manifest(&spec);
    let run = w.run("fetch it", &[("PROVIDER_ORIGIN", &origin)]);
    let err = String::from_utf8_lossy(&run.out.stderr).into_owned();
    if run.code() == Some(1) && err.contains("E-CAP-003") {
        // A host that cannot back the class refuses the launch.
        return;
    }
    run.assert_ok();
    let results = tool_results(&p.model_requests()[1]);
    assert!(results[0].contains("hello\n"), "{results:?}");
    // The refused connection is reset at once: curl reports a failed connect (7), an empty
    // reply (52) or a reset (56), never a page.
    assert!(
        ["rc=7", "rc=52", "rc=56"]
            .iter()
            .any(|rc| results[0].contains(rc)),
        "{results:?}"
    );
    assert_eq!(results[0].matches("hello").count(), 1, "{results:?}");
    assert!(results[0].contains("provider=7"), "{results:?}");
    assert_eq!(
        p.model_requests().len(),
        2,
        "a command reached the model provider"
    );
    assert_eq!(
        served.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the refused address reached the host"
    );
    let net: Vec<Value> = w
        .trace(&run.sid())
        .into_iter()
        .filter(|e| e["event_type"] == "network")
        .collect();
    let allowed: Vec<&Value> = net
        .iter()
        .filter(|e| e["proto"] == "tcp" && e["decision"] == "allowed")
        .collect();
    assert_eq!(allowed.len(), 1, "{net:#?}");
    assert_eq!(allowed[0]["name"], "localhost");
    assert_eq!(allowed[0]["address"], "127.0.0.1");
    assert_eq!(allowed[0]["port"], port);
    assert!(allowed[0]["bytes_up"].as_u64().unwrap() > 20, "{:?}", allowed[0]);
    assert!(
        allowed[0]["bytes_down"].as_u64().unwrap() > 40,
        "{:?}",
        allowed[0]
    );
    let refused: Vec<&Value> = net.iter().filter(|e| e["decision"] == "refused").collect();
    assert_eq!(refused.len(), 1, "{net:#?}");
    assert_eq!(refused[0]["address"], "127.0.0.2");
    assert_eq!(refused[0]["port"], port);
    assert_eq!(refused[0]["reason"], "not in capabilities.network.allow");
}

#[test]
fn a_scoped_session_shell_reaches_the_allowed_host_and_every_decision_is_traced() {
    session_reaches_only_the_allowed_host("scoped");
}

#[test]
fn a_sealed_session_shell_reaches_the_allowed_host_and_every_decision_is_traced() {
    session_reaches_only_the_allowed_host("sealed");
}

#[test]
fn explain_scope_shows_the_effective_egress_rules() {
    let p = Provider::start(vec![]);
    let w = World::new("egress-explain");
    let mut spec = spec_for(&p, "scoped", 8443);
    spec.network.push("api.example.com".into());
    w.manifest(&spec);
    let dir = w.dir.join("murmur.yaml");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["run", "--explain-scope", "--manifest"])
        .env(common::agent::KEY_VAR, common::agent::KEY)
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("subprocesses:"))
        .unwrap_or_else(|| panic!("{text}"));
    if text.contains("achieved scoped") {
        // The inference endpoint is the driver's destination, never a command's.
        assert_eq!(
            line.trim(),
            "subprocesses: by name through the session's egress relay to localhost port 8443; \
             api.example.com port 80, 443; DNS answers only those names; IPv4 only, no UDP but DNS"
        );
    } else {
        assert_eq!(
            line.trim(),
            "subprocesses: NOT constrained (containment is advisory)"
        );
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mur"))
        .args(["run", "--explain-scope", "--json", "--manifest"])
        .env(common::agent::KEY_VAR, common::agent::KEY)
        .arg(&dir)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = &v["effective_grants"]["network"]["subprocess_egress"];
    assert_eq!(e["subprocesses"], true);
    let mut ports: Vec<u64> = e["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_u64().unwrap())
        .collect();
    ports.sort();
    assert!(
        ports.contains(&80) && ports.contains(&443) && ports.contains(&8443),
        "{e}"
    );
}

#[test]
fn a_host_without_the_namespace_refuses_the_capsule_whatever_the_class() {
    for class in ["advisory", "scoped", "sealed"] {
        let p = Provider::start(vec![Step::text("never asked")]);
        let w = World::new(&format!("egress-nons-{class}"));
        w.manifest(&spec_for(&p, class, 9));
        let run = w.run("x", &[("MURMUR_PROBE_DENY", "netns")]);
        let err = String::from_utf8_lossy(&run.out.stderr).into_owned();
        assert_eq!(run.code(), Some(1), "{class}: {err}");
        assert!(err.starts_with("error[E-CAP-005]: "), "{class}: {err}");
        assert!(p.model_requests().is_empty(), "{class}: the session ran");
        assert!(!w.dir.join("workdir").exists(), "{class}: a workdir was made");
    }
}

#[test]
fn a_flood_of_refusals_is_counted_and_never_hides_an_allowed_connection() {
    let (port, served) = http_server();
    let command = format!(
        "escape-probe dns-flood 3000 flood.test; curl -sS -m 5 http://localhost:{port}/; echo; \
         escape-probe dns-flood 3000 flood2.test"
    );
    let Some(Probed { result, net, .. }) = probe_session("egress-flood", port, &command, &[]) else {
        return;
    };
    assert!(result.contains("hello"), "{result}");
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);
    let allowed = net
        .iter()
        .filter(|e| e["proto"] == "tcp" && e["decision"] == "allowed" && e["name"] == "localhost")
        .count();
    assert_eq!(allowed, 1, "the allowed connection is missing from the trace");
    let refused = net.iter().filter(|e| e["decision"] == "refused").count();
    let suppressed: u64 = net
        .iter()
        .filter(|e| e["decision"] == "suppressed")
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    println!("{refused} refusals traced one by one, {suppressed} counted");
    assert!(suppressed > 0, "nothing was counted instead of traced");
    assert!(refused < 6000, "{refused}");
}

/// The same allowed name asked 20,000 times (each answered from the relay's cache) is not
/// 20,000 trace lines: allowed decisions have a per-second cap of their own, and the rest
/// are counted.
#[test]
fn a_flood_of_answered_questions_is_counted_not_traced_line_by_line() {
    let (port, _served) = http_server();
    let Some(Probed { result, net, .. }) = probe_session(
        "egress-answer-flood",
        port,
        "escape-probe dns-repeat 20000 localhost",
        &[],
    ) else {
        return;
    };
    assert!(result.contains("dns-repeat recv 0 allowed 20000"), "{result}");
    let answered = net
        .iter()
        .filter(|e| e["proto"] == "dns" && e["decision"] == "allowed")
        .count();
    let suppressed: u64 = net
        .iter()
        .filter(|e| e["decision"] == "suppressed")
        .map(|e| e["count"].as_u64().unwrap())
        .sum();
    println!("{answered} answers traced one by one, {suppressed} counted");
    assert!(answered > 0, "no answer was traced");
    assert!(suppressed > 0, "nothing was counted instead of traced");
    assert!(answered < 20_000, "{answered}");
}

/// A DNS flood of about 30 s (600,000 questions) under a 256 KiB trace budget
/// (`MURMUR_TRACE_BUDGET_BYTES`): the trace stays within it plus its closing lines, which
/// count what was not written (without the budget, 4 MB and growing with the flood).
#[test]
fn a_dns_flood_keeps_the_trace_within_its_budget() {
    const BUDGET: usize = 256 << 10;
    let (port, _served) = http_server();
    let started = std::time::Instant::now();
    let Some(Probed { result, trace, .. }) = probe_session(
        "egress-budget",
        port,
        "escape-probe dns-repeat 600000 localhost",
        &[("MURMUR_TRACE_BUDGET_BYTES", &BUDGET.to_string())],
    ) else {
        return;
    };
    let took = started.elapsed();
    assert!(result.contains("dns-repeat recv 0 allowed 600000"), "{result}");
    let text = String::from_utf8(trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len();
    let last: Vec<Value> = lines[n - 2..]
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        last[0]["event_type"],
        "trace_dropped",
        "{} bytes, {n} lines: {}",
        text.len(),
        lines[n - 2]
    );
    assert_eq!(last[1]["event_type"], "session_end", "{}", lines[n - 1]);
    let within: usize = lines[..n - 2].iter().map(|l| l.len() + 1).sum();
    assert!(within <= BUDGET, "{within} bytes before the closing lines");
    let dropped = last[0]["dropped_events"].as_u64().unwrap();
    assert!(dropped > 0, "{}", lines[n - 2]);
    println!(
        "a DNS flood of {:.1} s: trace.jsonl {} bytes ({within} within the budget of {BUDGET}, {} of \
         closing lines), {} lines written, {dropped} events counted",
        took.as_secs_f64(),
        text.len(),
        text.len() - within,
        n
    );
}

/// What a probe session left: the tool's result, the trace's `network` events, the trace.
struct Probed {
    result: String,
    net: Vec<Value>,
    trace: Vec<u8>,
}

/// A `scoped` session whose model runs `command` once through `sh` (with `escape-probe` on
/// PATH and allowed) with `env`; `None` where the host cannot back `scoped` (the launch
/// refused with E-CAP-003).
fn probe_session(label: &str, port: u16, command: &str, env: &[(&str, &str)]) -> Option<Probed> {
    let probe_dir = common::probe::probe_binary()
        .parent()
        .unwrap()
        .display()
        .to_string();
    let p = Provider::start(vec![
        Step::tool("c1", "sh", json!({ "command": command })),
        Step::text("done"),
    ]);
    let w = World::new(label);
    let mut spec = spec_for(&p, "scoped", port);
    spec.shell.push("escape-probe".into());
    w.manifest(&spec);
    let path = format!("{probe_dir}:/usr/local/bin:/usr/bin:/bin");
    let mut all = vec![("PATH", path.as_str())];
    all.extend_from_slice(env);
    let run = w.run("flood", &all);
    let err = String::from_utf8_lossy(&run.out.stderr).into_owned();
    if run.code() == Some(1) && err.contains("E-CAP-003") {
        return None;
    }
    run.assert_ok();
    let result = tool_results(&p.model_requests()[1]).remove(0);
    let net = w
        .trace(&run.sid())
        .into_iter()
        .filter(|e| e["event_type"] == "network")
        .collect();
    let trace = std::fs::read(w.records(&run.sid()).join("trace.jsonl")).unwrap();
    Some(Probed { result, net, trace })
}
