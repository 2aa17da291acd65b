//! Approval expiry with an injected clock, at the library level: no test waits 60 s.

use crate::common;

use common::roost::publish;
use common::TempDir;
use murmur::http::{Request, Response};
use murmur::roost::{flags, Config, Roost, APPROVAL_TTL_MS};

/// A POST as the runtime's client sends it: declared JSON.
fn post(path: &str, headers: &[(&str, &str)], body: &str) -> Request {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    Request::new("POST", path, &all, body.as_bytes())
}

fn get(path: &str) -> Request {
    Request::new("GET", path, &[], b"")
}

fn json(r: &Response) -> serde_json::Value {
    serde_json::from_slice(&r.body).unwrap()
}

fn config(reg: &std::path::Path) -> Config {
    let args = ["--spawn-allow", "orch", "--registry-path", reg.to_str().unwrap()];
    flags::parse(murmur::cli::Args::new(args.iter().map(|s| s.to_string()))).unwrap()
}

#[test]
fn an_expired_reservation_is_released_when_read_and_refused_at_register() {
    let tmp = TempDir::new("roost-clock");
    publish(
        tmp.path(),
        "orch",
        "0.1.0",
        "capabilities:\n  spawn: {allow: [worker]}\n",
    );
    publish(tmp.path(), "worker", "0.1.0", "");
    let mut roost = Roost::with_env(config(tmp.path()), Box::new(|_| None)).unwrap();
    let t0 = 1_800_000_000_000u64;
    let reg = roost.handle(
        &post(
            "/register",
            &[],
            r#"{"session_id":"ses_p","name":"orch","version":"0.1.0"}"#,
        ),
        t0,
    );
    let cred = json(&reg)["credential"].as_str().unwrap().to_string();
    let h = [("x-murmur-spawn-credential", cred.as_str())];
    let spawned = roost.handle(&post("/spawn", &h, r#"{"name":"worker","version":"0.1.0"}"#), t0);
    assert_eq!(spawned.status, 200);
    assert_eq!(json(&spawned)["expires_at_ms"], t0 + APPROVAL_TTL_MS);
    let approval = json(&spawned)["approval"].as_str().unwrap().to_string();
    let status = |roost: &mut Roost, t: u64| json(&roost.handle(&get("/status/ses_p"), t));
    assert_eq!(status(&mut roost, t0 + APPROVAL_TTL_MS - 1)["live_children"], 1);
    assert_eq!(status(&mut roost, t0 + APPROVAL_TTL_MS - 1)["live_capsules"], 2);
    // At the expiry instant the census counts it as released, without any sweep.
    let s = status(&mut roost, t0 + APPROVAL_TTL_MS);
    assert_eq!(
        (s["live_children"].as_u64(), s["live_capsules"].as_u64()),
        (Some(0), Some(1))
    );
    let late = roost.handle(
        &post(
            "/register",
            &[("x-murmur-spawn-approval", &approval)],
            r#"{"session_id":"ses_c","name":"worker","version":"0.1.0"}"#,
        ),
        t0 + APPROVAL_TTL_MS,
    );
    assert_eq!(late.status, 403);
    assert_eq!(
        json(&late)["error"],
        "this spawn approval has passed its expiry; an approval is valid for 60 seconds from the POST /spawn that granted it"
    );
    // One millisecond earlier the same approval would have been redeemed.
    let spawned = roost.handle(
        &post("/spawn", &h, r#"{"name":"worker","version":"0.1.0"}"#),
        t0 + 100_000,
    );
    let approval = json(&spawned)["approval"].as_str().unwrap().to_string();
    let ok = roost.handle(
        &post(
            "/register",
            &[("x-murmur-spawn-approval", &approval)],
            r#"{"session_id":"ses_c","name":"worker","version":"0.1.0"}"#,
        ),
        t0 + 100_000 + APPROVAL_TTL_MS - 1,
    );
    assert_eq!(ok.status, 200, "{}", String::from_utf8_lossy(&ok.body));
}
