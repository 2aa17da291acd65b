//! Arbitrary requests through the roost's route function, against a small real registry.
//! The placeholders `CRED` and `APPR` in any header or body become a live credential and a
//! live approval, so the fuzzer reaches the checks behind the MAC. Invariants: no panic;
//! every answer is JSON with a known status; the identity refusal is one exact body. The
//! loopback guard is off here (it runs in the HTTP layer, fuzzed by `http_request`), so
//! inputs need no `host`; the content-type check (415) is the route's and is reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use murmur::http::request::{Progress, Reader};
use murmur::http::Request;
use murmur::roost::{flags, Roost, IDENTITY};
use std::path::PathBuf;
use std::sync::OnceLock;

fn registry() -> &'static PathBuf {
    static REG: OnceLock<PathBuf> = OnceLock::new();
    REG.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("murmur-fuzz-roost-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for (name, body) in [
            ("orch", "capabilities:\n  spawn: {allow: [worker, orch]}\n"),
            ("worker", ""),
        ] {
            let yaml = format!("name: {name}\nversion: 0.1.0\ninference: {{transport: process}}\n{body}");
            let bytes =
                murmur::registry::archive::write(&[("murmur.yaml".into(), yaml.into_bytes())]).unwrap();
            murmur::registry::publish(&dir, &bytes, None).unwrap();
        }
        dir
    })
}

fn post(path: &str, headers: &[(&str, &str)], body: &str) -> Request {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    Request::new("POST", path, &all, body.as_bytes())
}

fn splice(bytes: &[u8], cred: &str, appr: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    text.replace("CRED", cred).replace("APPR", appr).into_bytes()
}

fuzz_target!(|data: &[u8]| {
    let args = [
        "--spawn-allow",
        "orch",
        "--max-live-capsules",
        "8",
        "--registry-path",
        registry().to_str().unwrap(),
    ];
    let config = flags::parse(murmur::cli::Args::new(args.iter().map(|s| s.to_string()))).unwrap();
    let mut roost = Roost::with_env(config, Box::new(|_| None)).unwrap();
    let now = 1_800_000_000_000u64;
    let reg = roost.handle(
        &post(
            "/register",
            &[],
            r#"{"session_id":"ses_p","name":"orch","version":"0.1.0"}"#,
        ),
        now,
    );
    let cred: serde_json::Value = serde_json::from_slice(&reg.body).unwrap();
    let cred = cred["credential"].as_str().unwrap().to_string();
    let spawn = roost.handle(
        &post(
            "/spawn",
            &[("x-murmur-spawn-credential", &cred)],
            r#"{"name":"worker","version":"0.1.0"}"#,
        ),
        now,
    );
    let appr: serde_json::Value = serde_json::from_slice(&spawn.body).unwrap();
    let appr = appr["approval"].as_str().unwrap().to_string();

    for (i, chunk) in data.split(|&b| b == 0xff).take(8).enumerate() {
        let limits = murmur::http::Limits {
            loopback_only: false,
            ..murmur::roost::limits()
        };
        let mut reader = Reader::new(&limits, 7700);
        let Progress::Done(mut req) = reader.feed(&splice(chunk, &cred, &appr)) else {
            continue;
        };
        req.body = splice(&req.body, &cred, &appr);
        let t = now + (i as u64) * 7_000 + u64::from(chunk.first().copied().unwrap_or(0)) * 500;
        let resp = roost.handle(&req, t);
        assert!(
            [200, 400, 403, 404, 415, 500].contains(&resp.status),
            "status {}",
            resp.status
        );
        assert_eq!(resp.header_value("content-type"), Some("application/json"));
        let body: serde_json::Value = serde_json::from_slice(&resp.body).unwrap();
        if resp.status == 403 && body["error"] == IDENTITY {
            assert_eq!(resp.body, murmur::http::Response::error(403, IDENTITY).body);
        }
        // The parent's record is always readable.
        let status = roost.handle(&Request::new("GET", "/status/ses_p", &[], b""), t);
        assert_eq!(status.status, 200);
    }
});
