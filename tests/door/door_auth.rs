//! The authenticated door (`capabilities.network.authentication`) through the real `mur
//! run`: tokens only from the records' 0600 file and `mur token`, each credential within
//! its scopes in both protocol generations, 401 and 403 the same bytes whatever the cause,
//! a task seen only by the credential that sent it, the operator plane behind the gate,
//! the public and extended cards, tokens in no record; the open door's launch warning; the
//! manifest block's refusals.

use crate::common;

use common::capsule::{capsule, manifest_arg, mur as mur_run, MUR};
use common::door::{lifecycle, send_params, start, state_of, task_of, wait_for, Door, SLOW};
use common::{body_of, status_of, TempDir};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

const AUTH: &str = "capabilities:
  network:
    authentication:
      scheme: bearer
      credentials:
        - name: ops
          scopes: ['*']
        - name: reader
          scopes: [GetTask, ListTasks, resources.files]
        - name: sender
          scopes: [SendMessage, GetTask]
exports:
  files:
    root: out/
    mode: read-only
    max_bytes: 1Mi
";

fn auth_door(t: &TempDir) -> Door {
    let life = lifecycle(&["task_acceptance: queue", "after_task: sleep", "queue_depth: 8"]);
    let dir = capsule(t, SLOW, &format!("{life}{AUTH}"));
    start(t, &dir, &[], &[])
}

/// `mur token --session <id> [name]` with the door's records root: (exit code, stdout, stderr).
fn mur_token(t: &TempDir, d: &Door, name: Option<&str>) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(MUR);
    cmd.args(["token", "--session", &d.session_id])
        .env("MURMUR_RECORDS_DIR", t.path().join("records"));
    if let Some(n) = name {
        cmd.arg(n);
    }
    let out = cmd.output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// `POST /` of `method` with `params` and `auth` (an `authorization` value); the raw answer.
fn post(d: &Door, method: &str, params: Value, auth: Option<&str>) -> String {
    let (_, body) = d.envelope(method, &params);
    let mut headers = vec![("A2A-Version", "1.0")];
    if let Some(a) = auth {
        headers.push(("authorization", a));
    }
    d.post(&body, &headers)
}

/// A JSON-RPC answer that came with 200; its value.
fn rpc(answer: &str) -> Value {
    assert_eq!(status_of(answer), 200, "{answer}");
    serde_json::from_str(body_of(answer)).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

/// `GET path` with `auth`; the raw answer.
fn get(d: &Door, path: &str, auth: Option<&str>) -> String {
    let a = auth.map_or(String::new(), |a| format!("authorization: {a}\r\n"));
    d.raw(format!("GET {path} HTTP/1.1\r\nhost: {}\r\n{a}\r\n", d.host()).as_bytes())
}

/// Status, the `www-authenticate` line and the body: what must be identical between two
/// refusals of one kind.
fn refusal(answer: &str) -> (u16, bool, String) {
    (
        status_of(answer),
        answer.contains("\r\nwww-authenticate: Bearer realm=\"murmur-door\"\r\n"),
        body_of(answer).to_string(),
    )
}

fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else if p.is_file() {
            // Not the session's control socket, which holds no bytes.
            out.push(p);
        }
    }
    out
}

#[test]
fn tokens_come_only_from_the_records_file_and_mur_token() {
    let t = TempDir::new("auth-tokens");
    let mut d = auth_door(&t);
    assert_eq!(d.announced["auth"], "bearer", "{}", d.announced);
    assert!(
        d.announced.get("token").is_none(),
        "only a delegated child's line: {}",
        d.announced
    );

    let file = d.records.join("door-tokens.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let v: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(v["session_id"], d.session_id.as_str());
    let tokens = v["tokens"].as_object().unwrap();
    assert_eq!(tokens.keys().collect::<Vec<_>>(), ["ops", "reader", "sender"]);
    for tok in tokens.values() {
        assert!(tok.as_str().unwrap().starts_with("mdt1."), "{tok}");
    }

    let (code, out, err) = mur_token(&t, &d, Some("reader"));
    assert_eq!(
        (code, out.trim()),
        (Some(0), tokens["reader"].as_str().unwrap()),
        "{err}"
    );
    // Without a name: the first declared credential's, as the 401 body's command says.
    assert_eq!(v["default"], "ops");
    let (code, out, err) = mur_token(&t, &d, None);
    assert_eq!(
        (code, out.trim()),
        (Some(0), tokens["ops"].as_str().unwrap()),
        "{err}"
    );
    let unauthenticated: Value =
        serde_json::from_str(body_of(&post(&d, "ListTasks", json!({}), None))).unwrap();
    let said = unauthenticated["message"].as_str().unwrap();
    assert!(said.contains("`mur token --session <id>`"), "{said}");
    // A name the session does not declare is a usage error: exit 2, no I/O code.
    let (code, out, err) = mur_token(&t, &d, Some("nobody"));
    assert_eq!((code, out.as_str()), (Some(2), ""), "{err}");
    assert!(
        err.starts_with("mur: session ") && err.contains("declares no credential 'nobody'"),
        "{err}"
    );
    assert!(!err.contains("error["), "{err}");

    // A token is in no record, no environment and no argument of the session.
    let reader = tokens["reader"].as_str().unwrap().to_string();
    let answer = post(&d, "ListTasks", json!({}), Some(&bearer(&reader)));
    assert_eq!(status_of(&answer), 200, "{answer}");
    for f in files_under(&d.records) {
        if f != file {
            let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
            assert!(!text.contains("mdt1."), "{} holds a token", f.display());
        }
    }
    let pid = d.running.child.id();
    for what in ["environ", "cmdline"] {
        let bytes = std::fs::read(format!("/proc/{pid}/{what}")).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("mdt1."), "{what}");
    }

    // The session ended: its tokens' key is gone, and the file with it.
    assert_eq!(d.term().code(), Some(0));
    assert!(!file.exists(), "door-tokens.json outlived the session");
    let (code, _, err) = mur_token(&t, &d, Some("ops"));
    assert_eq!(code, Some(1));
    assert!(err.contains("door-tokens.json"), "{err}");
}

#[test]
fn each_credential_calls_its_scopes_only_and_sees_its_own_tasks() {
    let t = TempDir::new("auth-scopes");
    let mut d = auth_door(&t);
    let other_t = TempDir::new("auth-scopes-other");
    let mut other = auth_door(&other_t);
    let tokens: Value =
        serde_json::from_slice(&std::fs::read(d.records.join("door-tokens.json")).unwrap()).unwrap();
    let tok = |n: &str| bearer(tokens["tokens"][n].as_str().unwrap());
    let (ops, reader, sender) = (tok("ops"), tok("reader"), tok("sender"));
    let foreign: Value =
        serde_json::from_slice(&std::fs::read(other.records.join("door-tokens.json")).unwrap()).unwrap();
    let foreign = bearer(foreign["tokens"]["ops"].as_str().unwrap());

    // 401, the same bytes for every cause, before the body is even read.
    let send = |auth: Option<&str>| {
        post(
            &d,
            "SendMessage",
            send_params("SendMessage", "hello", json!({"returnImmediately": true})),
            auth,
        )
    };
    let first = refusal(&send(None));
    assert_eq!((first.0, first.1), (401, true), "{}", first.2);
    let mut tampered = ops.clone().into_bytes();
    let at = tampered.len() - 3;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    let basic = "Basic b3BzOm9wcw==".to_string();
    let bare = ops.trim_start_matches("Bearer ").to_string();
    for bad in [&foreign, &tampered, &basic, &bare, &"Bearer".to_string()] {
        assert_eq!(refusal(&send(Some(bad))), first, "{bad}");
    }
    let junk = d.post(b"not json", &[]);
    assert_eq!(refusal(&junk), first);

    // In scope: the sender sends (in either generation) and reads its own task back.
    let sent = rpc(&post(
        &d,
        "SendMessage",
        send_params("SendMessage", "from sender", json!({"returnImmediately": true})),
        Some(&sender),
    ));
    let task_id = task_of(&sent["result"])["id"].as_str().unwrap().to_string();
    let (_, body) = d.envelope(
        "message/send",
        &send_params("message/send", "v03", json!({"blocking": false})),
    );
    let v03 = rpc(&d.post(&body, &[("authorization", &sender)]));
    assert_eq!(v03["result"]["kind"], "task", "{v03}");
    let own = wait_for(Duration::from_secs(8), "the sender's task to complete", || {
        let v = rpc(&post(&d, "GetTask", json!({"id": task_id}), Some(&sender)));
        (state_of(&v["result"]) == "TASK_STATE_COMPLETED").then_some(v)
    });
    assert_eq!(own["result"]["id"], task_id.as_str());

    // Out of scope: 403, one body whatever the method or generation.
    let forbidden = refusal(&post(&d, "ListTasks", json!({}), Some(&sender)));
    assert_eq!((forbidden.0, forbidden.1), (403, false), "{}", forbidden.2);
    assert_ne!(forbidden.2, first.2);
    for (method, auth) in [
        ("CancelTask", &sender),
        ("SubscribeToTask", &sender),
        ("SendMessage", &reader),
        ("SendStreamingMessage", &reader),
        ("GetExtendedAgentCard", &sender),
    ] {
        let answer = post(&d, method, json!({"id": task_id}), Some(auth));
        assert_eq!(refusal(&answer), forbidden, "{method}");
    }
    let (_, body) = d.envelope("tasks/cancel", &json!({"id": task_id}));
    assert_eq!(
        refusal(&d.post(&body, &[("authorization", &reader)])),
        forbidden,
        "tasks/cancel"
    );

    // Another credential, even `*`, does not see the sender's task: not found, not 403.
    for auth in [&reader, &ops] {
        let v = rpc(&post(&d, "GetTask", json!({"id": task_id}), Some(auth)));
        assert_eq!(v["error"]["code"], -32001, "{v}");
        let v = rpc(&post(&d, "CancelTask", json!({"id": task_id}), Some(&ops)));
        assert_eq!(v["error"]["code"], -32001, "{v}");
    }
    let listed = rpc(&post(&d, "ListTasks", json!({}), Some(&reader)));
    assert_eq!(listed["result"]["totalSize"], 0, "{listed}");
    // A task still running cannot be watched or canceled by another credential either.
    let long = rpc(&post(
        &d,
        "SendMessage",
        send_params("SendMessage", "sleep 5", json!({"returnImmediately": true})),
        Some(&sender),
    ));
    let long = task_of(&long["result"])["id"].as_str().unwrap().to_string();
    for method in ["SubscribeToTask", "CancelTask", "GetTask"] {
        let v = rpc(&post(&d, method, json!({"id": long}), Some(&ops)));
        assert_eq!(v["error"]["code"], -32001, "{method}: {v}");
    }
    let v = rpc(&post(&d, "GetTask", json!({"id": long}), Some(&sender)));
    assert_ne!(state_of(&v["result"]), "TASK_STATE_CANCELED", "{v}");
    // A blocking send still unsettled when the door stops waiting answers with the task as
    // it stands, to the credential that sent it.
    let blocking = rpc(&post(
        &d,
        "SendMessage",
        send_params("SendMessage", "sleep 6", Value::Null),
        Some(&sender),
    ));
    let task = task_of(&blocking["result"]);
    assert!(blocking.get("error").is_none(), "{blocking}");
    assert!(
        ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"].contains(&state_of(task)),
        "{blocking}"
    );
    let mine = rpc(&post(
        &d,
        "SendMessage",
        send_params("SendMessage", "from ops", json!({"returnImmediately": true})),
        Some(&ops),
    ));
    let mine = task_of(&mine["result"])["id"].clone();
    let listed = rpc(&post(&d, "ListTasks", json!({}), Some(&ops)));
    let ids: Vec<&Value> = listed["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, [&mine], "{listed}");
    // A page token is a task id, and only its owner's: no count of others' tasks in it.
    let second = send_params("SendMessage", "again", json!({"returnImmediately": true}));
    assert_eq!(status_of(&post(&d, "SendMessage", second, Some(&ops))), 200);
    let page = rpc(&post(&d, "ListTasks", json!({"pageSize": 1}), Some(&ops)));
    let next = page["result"]["nextPageToken"].as_str().unwrap().to_string();
    assert_eq!(next, mine.as_str().unwrap(), "{page}");
    let theirs = rpc(&post(&d, "ListTasks", json!({"pageToken": next}), Some(&reader)));
    assert_eq!(theirs["error"]["code"], -32602, "{theirs}");

    // The operator plane: resources.files only; the peer plane keeps its own credential.
    let listing = get(&d, "/resources/files", Some(&reader));
    assert_eq!(status_of(&listing), 200, "{listing}");
    assert_eq!(refusal(&get(&d, "/resources/files", Some(&sender))), forbidden);
    assert_eq!(refusal(&get(&d, "/resources/files/result.txt", None)), first);
    let peer = get(&d, "/resources/peer/mh1.x.y", None);
    assert_eq!(
        status_of(&peer),
        404,
        "no peer plane declared, and no token asked: {peer}"
    );
    let refused: Vec<Value> = d
        .events("resource_list")
        .into_iter()
        .filter(|e| e["outcome"] != "ok")
        .collect();
    assert_eq!(
        refused
            .iter()
            .map(|e| e["outcome"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["forbidden"]
    );

    assert_eq!(d.term().code(), Some(0));
    assert_eq!(other.term().code(), Some(0));
}

#[test]
fn the_public_card_names_the_scheme_and_the_extended_card_the_grants() {
    let t = TempDir::new("auth-card");
    let mut d = auth_door(&t);
    let card = |version: Option<&str>| {
        let v = version.map_or(String::new(), |v| format!("a2a-version: {v}\r\n"));
        let a = d.raw(
            format!(
                "GET /.well-known/agent-card.json HTTP/1.1\r\nhost: {}\r\n{v}\r\n",
                d.host()
            )
            .as_bytes(),
        );
        assert_eq!(status_of(&a), 200, "{a}");
        serde_json::from_str::<Value>(body_of(&a)).unwrap()
    };
    let v10 = card(Some("1.0"));
    assert_eq!(
        v10["securitySchemes"],
        json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer",
            "bearerFormat": "murmur door token (mdt1)",
            "description": "A murmur door token (mdt1), printed for each declared credential by `mur token --session <id>`."}}})
    );
    assert_eq!(
        v10["securityRequirements"],
        json!([{"schemes": {"bearer": {"list": []}}}])
    );
    assert_eq!(v10["capabilities"]["extendedAgentCard"], true);
    assert!(v10["capabilities"].get("extensions").is_none(), "{v10}");
    let merged = card(None);
    assert_eq!(merged["security"], json!([{"bearer": []}]));
    assert_eq!(merged["securitySchemes"]["bearer"]["type"], "http");
    assert_eq!(merged["supportsAuthenticatedExtendedCard"], true);
    for k in ["tools", "shell", "network"] {
        assert!(merged["capabilities"].get(k).is_none(), "{k}: {merged}");
    }

    let tokens: Value =
        serde_json::from_slice(&std::fs::read(d.records.join("door-tokens.json")).unwrap()).unwrap();
    let ops = bearer(tokens["tokens"]["ops"].as_str().unwrap());
    let ext = rpc(&post(&d, "GetExtendedAgentCard", json!({}), Some(&ops)));
    let ext = &ext["result"];
    assert_eq!(
        ext["capabilities"]["extensions"][0]["uri"], "urn:murmur:capsule:v1",
        "{ext}"
    );
    assert_eq!(ext["securitySchemes"], v10["securitySchemes"]);
    let (_, body) = d.envelope("agent/getAuthenticatedExtendedCard", &json!({}));
    let old = rpc(&d.post(&body, &[("authorization", &ops)]));
    assert_eq!(old["result"]["capabilities"]["tools"], json!([]), "{old}");
    assert_eq!(old["result"]["url"], merged["url"]);
    assert_eq!(d.term().code(), Some(0));
}

/// The launch line of a person's `mur run` names the command that prints a token, and that
/// command, run as printed, prints one the door takes.
#[test]
fn the_launch_line_gives_the_token_command_that_works() {
    let t = TempDir::new("auth-launch-line");
    let life = lifecycle(&["task_acceptance: queue", "after_task: sleep"]);
    let dir = capsule(&t, SLOW, &format!("{life}{AUTH}"));
    let mut cmd = Command::new(MUR);
    cmd.args(["run", "--manifest", &manifest_arg(&dir)])
        .env("MURMUR_CACHE_DIR", t.path().join("cache"))
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut run = common::Running::spawn(cmd);
    let url = run.line();
    let port: u16 = url
        .strip_prefix("murmur: url localhost:")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{url}"));
    let session = run.line();
    let sid = session
        .strip_prefix("session: ")
        .unwrap_or_else(|| panic!("{session}"));
    let auth = run.line();
    assert_eq!(
        auth,
        format!("auth: bearer (mur token --session {sid} prints ops's token; add NAME for reader, sender)")
    );
    let printed = auth
        .strip_prefix("auth: bearer (")
        .and_then(|a| a.split_once(" prints "))
        .map(|(c, _)| c.split_whitespace().collect::<Vec<_>>())
        .unwrap();
    assert_eq!(printed[0], "mur");
    let out = Command::new(MUR)
        .args(&printed[1..])
        .env("MURMUR_RECORDS_DIR", t.path().join("records"))
        .output()
        .unwrap();
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}"#;
    let answer = common::exchange(
        std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        format!(
            "POST / HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nA2A-Version: 1.0\r\ncontent-type: application/json\r\nauthorization: Bearer {token}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    assert_eq!(status_of(&answer), 200, "{answer}");
    assert_eq!(run.terminate().code(), Some(0));
}

#[test]
fn an_open_door_warns_once_at_launch_what_any_local_user_can_do() {
    let t = TempDir::new("auth-open-warning");
    let extra = "capabilities:\n  shell:\n    allow: [ls]\nexports:\n  files:\n    root: out/\n    mode: read-only\n    max_bytes: 1Mi\n";
    let dir = capsule(&t, SLOW, extra);
    let out = mur_run(&t, &["--manifest", &manifest_arg(&dir), "--task", "hi"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning[W-SEC-025]"))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    let w = warnings[0];
    assert!(
        w.starts_with("warning[W-SEC-025]: the door at http://localhost:"),
        "{w}"
    );
    assert!(
        w.ends_with(" takes no credentials: any local user of this host can send it tasks that run with all it is granted (shell: ls); read every task's text and answer, and cancel them; read every file under exports.files root 'out/'"),
        "{w}"
    );

    let t = TempDir::new("auth-closed-no-warning");
    let dir = capsule(&t, SLOW, AUTH);
    let out = mur_run(&t, &["--manifest", &manifest_arg(&dir), "--task", "hi"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("W-SEC-025"), "{stderr}");
}

#[test]
fn a_malformed_authentication_block_is_refused_naming_its_key() {
    let cases = [
        (
            "scheme: basic\n      credentials: [{name: a, scopes: ['*']}]",
            "capabilities.network.authentication.scheme",
        ),
        (
            "scheme: bearer\n      credentials: []",
            "capabilities.network.authentication.credentials",
        ),
        (
            "scheme: bearer\n      credentials: [{name: a, scopes: ['*']}, {name: a, scopes: [GetTask]}]",
            "capabilities.network.authentication.credentials[1].name",
        ),
        (
            "scheme: bearer\n      credentials: [{name: a, scopes: [DeleteEverything]}]",
            "capabilities.network.authentication.credentials[0].scopes[0]",
        ),
        (
            "scheme: bearer\n      credentials: [{name: spawner, scopes: ['*']}]",
            "capabilities.network.authentication.credentials[0].name",
        ),
        (
            "scheme: bearer\n      credentials: [{name: 'Bad Name', scopes: ['*']}]",
            "capabilities.network.authentication.credentials[0].name",
        ),
        (
            "scheme: bearer\n      credentials: [{name: a, scopes: []}]",
            "capabilities.network.authentication.credentials[0].scopes",
        ),
    ];
    for (block, key) in cases {
        let t = TempDir::new("auth-bad-block");
        let dir = capsule(
            &t,
            SLOW,
            &format!("capabilities:\n  network:\n    authentication:\n      {block}\n"),
        );
        let out = mur_run(&t, &["--manifest", &manifest_arg(&dir), "--task", "hi"], &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{block}: {stderr}");
        assert!(
            stderr.starts_with("error[E-MAN-003]: murmur.yaml: invalid ")
                && stderr
                    .lines()
                    .next()
                    .unwrap()
                    .contains(&format!(" config for '{key}': ")),
            "{block}: {stderr}"
        );
    }
}
