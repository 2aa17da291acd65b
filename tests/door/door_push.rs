//! Push notifications through the real `mur run` (`a2a.push.allow`): a webhook on loopback
//! gets a task's updates with the config's bearer credentials and token, in both
//! generations (1.0 StreamResponse bodies, 0.3 the Task); the four config methods of each
//! generation set, get, list and delete; a destination the manifest does not list is
//! refused when configured and never called; a door without the block answers -32003; a
//! dead webhook does not slow the task, and its bounded tries are in the trace, which never
//! holds a credential; an `https://` webhook is called only when `MURMUR_CA_FILE` (or the
//! system's roots) vouch for its certificate; on an authenticated door a task's configs are
//! its sender's alone.

use crate::common;

use common::capsule::capsule;
use common::door::{lifecycle, send_params, start, task_of, Door, SLOW};
use common::webhook::{Hit, Webhook};
use common::TempDir;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn door(t: &TempDir, allow: &[String]) -> Door {
    let mut yaml = lifecycle(&["task_acceptance: queue", "after_task: sleep", "queue_depth: 4"]);
    if !allow.is_empty() {
        yaml.push_str(&format!("a2a:\n  push:\n    allow: [{}]\n", allow.join(", ")));
    }
    let dir = capsule(t, SLOW, &yaml);
    start(t, &dir, &[], &[])
}

fn state10(h: &Hit) -> Option<&str> {
    h.body["statusUpdate"]["status"]["state"].as_str()
}

const SECRET: &str = "sekrit-credential";

#[test]
fn a_webhook_gets_a_tasks_updates_with_its_credentials_in_both_generations() {
    let t = TempDir::new("push-both");
    let hook = Webhook::start();
    let d = door(&t, &[format!("http://127.0.0.1:{}", hook.port)]);
    let card: Value = serde_json::from_str(common::body_of(&d.get("/.well-known/agent-card.json"))).unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], true, "{card}");

    // 1.0: the config in the send; StreamResponse bodies, in order.
    let config = json!({"returnImmediately": true, "taskPushNotificationConfig": {
        "url": hook.url("/h10"), "token": "tok-10",
        "authentication": {"scheme": "Bearer", "credentials": format!("{SECRET}-10")}}});
    let r = d.result("SendMessage", send_params("SendMessage", "hello", config));
    let id10 = task_of(&r)["id"].as_str().unwrap().to_string();
    let hits = hook.wait("/h10", Duration::from_secs(10), |h| {
        state10(h) == Some("TASK_STATE_COMPLETED")
    });
    for h in &hits {
        assert_eq!(
            h.header("authorization"),
            Some(format!("Bearer {SECRET}-10").as_str())
        );
        assert_eq!(h.header("x-a2a-notification-token"), Some("tok-10"));
        assert_eq!(h.header("content-type"), Some("application/json"));
    }
    let kinds: Vec<String> = hits
        .iter()
        .map(|h| {
            let k = h.body.as_object().unwrap().keys().next().unwrap().clone();
            match state10(h) {
                Some(s) => format!("{k}:{s}"),
                None => k,
            }
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "task",
            "statusUpdate:TASK_STATE_WORKING",
            "artifactUpdate",
            "statusUpdate:TASK_STATE_COMPLETED"
        ]
    );
    assert_eq!(hits[0].body["task"]["id"], id10.as_str());
    assert_eq!(
        hits[2].body["artifactUpdate"]["artifact"]["parts"][0]["text"],
        "done: hello\n"
    );

    // 0.3: the config in message/send; each body is the Task as it stands.
    let config = json!({"blocking": false, "pushNotificationConfig": {
        "url": hook.url("/h03"), "token": "tok-03",
        "authentication": {"schemes": ["Bearer"], "credentials": format!("{SECRET}-03")}}});
    let r = d.result("message/send", send_params("message/send", "hi", config));
    let id03 = r["id"].as_str().unwrap().to_string();
    let hits = hook.wait("/h03", Duration::from_secs(10), |h| {
        h.body["status"]["state"] == "completed"
    });
    for h in &hits {
        assert_eq!(
            h.header("authorization"),
            Some(format!("Bearer {SECRET}-03").as_str())
        );
        assert_eq!(h.header("x-a2a-notification-token"), Some("tok-03"));
        assert_eq!(
            (h.body["kind"].as_str(), h.body["id"].as_str()),
            (Some("task"), Some(id03.as_str()))
        );
    }
    let last = &hits.last().unwrap().body;
    assert_eq!(last["artifacts"][0]["parts"][0]["text"], "done: hi\n", "{last}");

    let sent = d.events("push_sent");
    assert!(
        sent.iter()
            .any(|e| e["task_id"] == id10.as_str() && e["status"] == 200),
        "{sent:?}"
    );
    assert!(sent.iter().all(|e| e["attempts"] == 1), "{sent:?}");
    let trace = serde_json::to_string(&d.trace()).unwrap();
    assert!(
        !trace.contains(SECRET) && !trace.contains("tok-10"),
        "a credential in the trace"
    );
}

#[test]
fn config_methods_set_get_list_and_delete_in_both_generations() {
    let t = TempDir::new("push-config");
    let hook = Webhook::start();
    let d = door(&t, &[format!("http://127.0.0.1:{}", hook.port)]);
    let task = d.submit("SendMessage", "sleep 3");
    let id = task["id"].as_str().unwrap();

    let set = d.result(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "id": "one", "url": hook.url("/set10"),
               "authentication": {"scheme": "Bearer", "credentials": SECRET}}),
    );
    let shown = json!({"taskId": id, "id": "one", "url": hook.url("/set10"),
                       "authentication": {"scheme": "Bearer"}});
    assert_eq!(set, shown, "no credential comes back");
    assert_eq!(
        d.result(
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "one"})
        ),
        shown
    );
    let set03 = d.result(
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"id": "two", "url": hook.url("/set03"), "token": "t"}}),
    );
    assert_eq!(
        set03,
        json!({"taskId": id, "pushNotificationConfig": {"id": "two", "url": hook.url("/set03")}})
    );
    assert_eq!(
        d.result(
            "tasks/pushNotificationConfig/get",
            json!({"id": id, "pushNotificationConfigId": "two"})
        ),
        set03
    );
    let list = d.result("ListTaskPushNotificationConfigs", json!({"taskId": id}));
    assert_eq!(list["configs"].as_array().unwrap().len(), 2, "{list}");
    let list03 = d.result("tasks/pushNotificationConfig/list", json!({"id": id}));
    assert_eq!(list03.as_array().unwrap().len(), 2, "{list03}");

    assert_eq!(
        d.result(
            "tasks/pushNotificationConfig/delete",
            json!({"id": id, "pushNotificationConfigId": "two"})
        ),
        Value::Null
    );
    // Deleting again changes nothing.
    assert_eq!(
        d.result(
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": "two"})
        ),
        Value::Null
    );
    let (code, _) = d.error(
        "GetTaskPushNotificationConfig",
        json!({"taskId": id, "id": "two"}),
    );
    assert_eq!(code, -32001);
    let (code, _) = d.error("ListTaskPushNotificationConfigs", json!({"taskId": "tsk_nope"}));
    assert_eq!(code, -32001);

    // The config set on the running task hears its end; the deleted one nothing.
    hook.wait("/set10", Duration::from_secs(10), |h| {
        state10(h) == Some("TASK_STATE_COMPLETED")
    });
    assert!(hook.on("/set03").is_empty());
    assert_eq!(
        d.result(
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": "one"})
        ),
        Value::Null
    );
    let list = d.result("ListTaskPushNotificationConfigs", json!({"taskId": id}));
    assert_eq!(list, json!({"configs": []}));
}

#[test]
fn a_destination_the_manifest_does_not_allow_is_refused_and_never_called() {
    let t = TempDir::new("push-refused");
    let allowed = Webhook::start();
    let other = Webhook::start();
    let d = door(&t, &[format!("http://127.0.0.1:{}", allowed.port)]);
    let bad = [
        other.url("/x"),
        format!("http://localhost:{}/x", allowed.port),
        format!("https://127.0.0.1:{}/x", allowed.port),
        format!("http://user@127.0.0.1:{}/x", allowed.port),
    ];
    for url in &bad {
        let config = json!({"taskPushNotificationConfig": {"url": url}});
        let (code, m) = d.error("SendMessage", send_params("SendMessage", "hello", config));
        assert_eq!(code, -32602, "{url}: {m}");
        let config = json!({"pushNotificationConfig": {"url": url}});
        let (code, _) = d.error("message/send", send_params("message/send", "hello", config));
        assert_eq!(code, -32602, "{url}");
    }
    let (_, m) = d.error(
        "SendMessage",
        send_params(
            "SendMessage",
            "hello",
            json!({"taskPushNotificationConfig": {"url": other.url("/x")}}),
        ),
    );
    assert_eq!(
        m,
        format!(
            "Invalid params: push destination http://127.0.0.1:{} is not in a2a.push.allow",
            other.port
        )
    );
    let task = d.submit("SendMessage", "hello");
    let id = task["id"].as_str().unwrap();
    let (code, _) = d.error(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": other.url("/x")}),
    );
    assert_eq!(code, -32602);
    let (code, _) = d.error(
        "tasks/pushNotificationConfig/set",
        json!({"taskId": id, "pushNotificationConfig": {"url": other.url("/x")}}),
    );
    assert_eq!(code, -32602);
    // A header broken by a line in the token never reaches the table.
    let (code, _) = d.error(
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": allowed.url("/x"), "token": "a\r\nx-evil: 1"}),
    );
    assert_eq!(code, -32602);
    d.wait_state(id, "TASK_STATE_COMPLETED", Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    assert!(other.hits().is_empty(), "{:?}", other.hits());
    assert!(allowed.hits().is_empty(), "{:?}", allowed.hits());
    let list = d.result("ListTaskPushNotificationConfigs", json!({"taskId": id}));
    assert_eq!(list, json!({"configs": []}));
}

#[test]
fn a_door_without_push_destinations_answers_push_not_supported() {
    let t = TempDir::new("push-none");
    let hook = Webhook::start();
    let d = door(&t, &[]);
    let card: Value = serde_json::from_str(common::body_of(&d.get("/.well-known/agent-card.json"))).unwrap();
    assert_eq!(card["capabilities"]["pushNotifications"], false);
    for (m, p) in [
        ("CreateTaskPushNotificationConfig", json!({})),
        ("ListTaskPushNotificationConfigs", json!({"taskId": "t"})),
        ("tasks/pushNotificationConfig/set", json!({})),
        ("tasks/pushNotificationConfig/delete", json!({"id": "t"})),
    ] {
        assert_eq!(d.error(m, p).0, -32003, "{m}");
    }
    let config = json!({"taskPushNotificationConfig": {"url": hook.url("/x")}});
    assert_eq!(
        d.error("SendMessage", send_params("SendMessage", "hi", config)).0,
        -32003
    );
    assert!(hook.hits().is_empty());
}

#[test]
fn a_dead_webhook_does_not_slow_the_task_and_its_tries_are_bounded_and_traced() {
    let t = TempDir::new("push-dead");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let d = door(&t, &[format!("http://127.0.0.1:{port}")]);
    let started = Instant::now();
    let config = json!({"taskPushNotificationConfig": {"url": format!("http://127.0.0.1:{port}/dead"),
        "authentication": {"scheme": "Bearer", "credentials": SECRET}}});
    let r = d.result("SendMessage", send_params("SendMessage", "hello", config));
    let task = task_of(&r);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let id = task["id"].as_str().unwrap();
    let failed = common::door::wait_for(Duration::from_secs(15), "4 push_failed", || {
        let f = d.events("push_failed");
        (f.len() >= 4).then_some(f)
    });
    for f in &failed {
        assert_eq!(f["task_id"], id);
        assert_eq!(f["attempts"], 3, "{f}");
        assert_eq!(f["url"], format!("http://127.0.0.1:{port}/dead"));
    }
    let retries = d.events("push_retry");
    assert_eq!(retries.len(), 8, "two retries for each of 4 updates: {retries:?}");
    let trace = serde_json::to_string(&d.trace()).unwrap();
    assert!(!trace.contains(SECRET));
}

#[test]
fn on_an_authenticated_door_a_tasks_configs_are_its_senders_and_need_their_scopes() {
    let t = TempDir::new("push-auth");
    let hook = Webhook::start();
    let mut yaml = lifecycle(&["task_acceptance: queue", "after_task: sleep", "queue_depth: 4"]);
    yaml.push_str(&format!(
        "capabilities:\n  network:\n    authentication:\n      scheme: bearer\n      credentials:\n\
         \x20       - name: ops\n          scopes: ['*']\n\
         \x20       - name: other\n          scopes: ['*']\n\
         \x20       - name: sender\n          scopes: [SendMessage, GetTask]\n\
         a2a:\n  push:\n    allow: [http://127.0.0.1:{}]\n",
        hook.port
    ));
    let dir = capsule(&t, SLOW, &yaml);
    let d = start(&t, &dir, &[], &[]);
    let tokens: Value =
        serde_json::from_slice(&std::fs::read(d.records.join("door-tokens.json")).unwrap()).unwrap();
    let tok = |n: &str| format!("Bearer {}", tokens["tokens"][n].as_str().unwrap());
    let (ops, other, sender) = (tok("ops"), tok("other"), tok("sender"));
    let r = d.call_with(
        "SendMessage",
        send_params("SendMessage", "sleep 2", json!({"returnImmediately": true})),
        &[("authorization", &ops)],
    );
    let id = task_of(&r["result"])["id"].as_str().unwrap().to_string();
    let create = json!({"taskId": id, "id": "c", "url": hook.url("/ops")});
    // Another credential does not see the task, so neither its configs.
    let e = d.call_with(
        "CreateTaskPushNotificationConfig",
        create.clone(),
        &[("authorization", &other)],
    );
    assert_eq!(e["error"]["code"], -32001, "{e}");
    let e = d.call_with(
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
        &[("authorization", &other)],
    );
    assert_eq!(e["error"]["code"], -32001, "{e}");
    // A credential without the method's scope is refused before anything is read.
    let (_, body) = d.envelope("CreateTaskPushNotificationConfig", &create);
    let answer = d.post(&body, &[("authorization", &sender), ("A2A-Version", "1.0")]);
    assert_eq!(common::status_of(&answer), 403, "{answer}");
    let r = d.call_with(
        "CreateTaskPushNotificationConfig",
        create,
        &[("authorization", &ops)],
    );
    assert_eq!(r["result"]["id"], "c", "{r}");
    hook.wait("/ops", Duration::from_secs(10), |h| {
        state10(h) == Some("TASK_STATE_COMPLETED")
    });
}

#[test]
fn a_session_that_ends_with_its_task_delivers_the_last_update_before_its_trace_ends() {
    let t = TempDir::new("push-single");
    let hook = Webhook::start();
    let yaml = format!(
        "{}a2a:\n  push:\n    allow: [http://127.0.0.1:{}]\n",
        lifecycle(&["task_acceptance: single"]),
        hook.port
    );
    let dir = capsule(&t, SLOW, &yaml);
    let mut d = start(&t, &dir, &[], &[]);
    let config = json!({"taskPushNotificationConfig": {"url": hook.url("/last")}});
    let r = d.result("SendMessage", send_params("SendMessage", "hello", config));
    assert_eq!(task_of(&r)["status"]["state"], "TASK_STATE_COMPLETED");
    let status = d.wait_exit(Duration::from_secs(20));
    assert!(status.success(), "{status}");
    let hits = hook.on("/last");
    assert_eq!(
        hits.last().and_then(state10),
        Some("TASK_STATE_COMPLETED"),
        "{hits:#?}"
    );
    let kinds: Vec<String> = d
        .trace()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap().to_string())
        .filter(|k| k.starts_with("push_") || k == "session_end")
        .collect();
    assert_eq!(kinds.last().map(String::as_str), Some("session_end"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| *k == "push_sent").count(), 4, "{kinds:?}");
}

/// A TLS webhook on loopback (Python's `ssl` over `http.server`, its certificate signed by a
/// CA of its own made by `openssl`): each POST's path, `authorization` and body appended to
/// `log`, one JSON line each; the process, its port and its CA certificate.
fn tls_webhook(dir: &std::path::Path) -> (common::Running, u16, std::path::PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let ca = common::oci::make_certificate(dir);
    let script = r#"
import http.server, json, socket, ssl, sys
d = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        with open(d + "/log", "a") as f:
            f.write(json.dumps({"path": self.path, "authorization": self.headers.get("authorization"),
                                "body": json.loads(body)}) + "\n")
        self.send_response(200); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(d + "/server.pem", d + "/server.key")
s.socket = c.wrap_socket(s.socket, server_side=True)
open(d + "/port", "w").write(str(s.server_address[1]))
s.serve_forever()
"#;
    let mut cmd = std::process::Command::new("python3");
    cmd.args(["-c", script])
        .arg(dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped());
    let running = common::Running::spawn(cmd);
    let port = common::door::wait_for(Duration::from_secs(10), "the TLS webhook's port", || {
        std::fs::read_to_string(dir.join("port")).ok()?.parse().ok()
    });
    (running, port, ca)
}

/// An `https://` webhook is checked against `MURMUR_CA_FILE`: one whose certificate it
/// names gets the task's updates with the config's credentials; one with another
/// certificate gets nothing (the tries fail, traced without the credential).
#[test]
fn an_https_webhook_gets_updates_only_when_its_certificate_is_trusted() {
    let t = TempDir::new("push-https");
    let (_trusted, good, ca) = tls_webhook(&t.path().join("trusted"));
    let (_stranger, bad, _) = tls_webhook(&t.path().join("stranger"));
    let mut yaml = lifecycle(&["task_acceptance: queue", "after_task: sleep", "queue_depth: 4"]);
    yaml.push_str(&format!(
        "a2a:\n  push:\n    allow: [https://127.0.0.1:{good}, https://127.0.0.1:{bad}]\n"
    ));
    let dir = capsule(&t, SLOW, &yaml);
    let d = start(&t, &dir, &[], &[("MURMUR_CA_FILE", ca.to_str().unwrap())]);
    for (port, path) in [(good, "/good"), (bad, "/bad")] {
        let config = json!({"taskPushNotificationConfig": {"url": format!("https://127.0.0.1:{port}{path}"),
            "authentication": {"scheme": "Bearer", "credentials": SECRET}}});
        let r = d.result("SendMessage", send_params("SendMessage", "hello", config));
        assert_eq!(task_of(&r)["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    }
    let log = t.path().join("trusted/log");
    let hits: Vec<Value> = common::door::wait_for(Duration::from_secs(15), "the completed update", || {
        let text = std::fs::read_to_string(&log).ok()?;
        let hits: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        hits.iter()
            .any(|h| h["body"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED")
            .then_some(hits)
    });
    for h in &hits {
        assert_eq!(
            (h["path"].as_str(), h["authorization"].as_str()),
            (Some("/good"), Some(format!("Bearer {SECRET}").as_str()))
        );
    }
    let failed = common::door::wait_for(Duration::from_secs(30), "push_failed for /bad", || {
        let f: Vec<Value> = d
            .events("push_failed")
            .into_iter()
            .filter(|f| f["url"].as_str().is_some_and(|u| u.ends_with("/bad")))
            .collect();
        (!f.is_empty()).then_some(f)
    });
    assert_eq!(failed[0]["attempts"], 3, "{}", failed[0]);
    assert!(
        !t.path().join("stranger/log").exists(),
        "the untrusted webhook got a request"
    );
    let trace = serde_json::to_string(&d.trace()).unwrap();
    assert!(!trace.contains(SECRET));
}
