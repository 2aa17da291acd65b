//! Files in and out of a task through the real `mur run` (`a2a:` in the manifest): file and
//! data parts land in `in/<task id>/` of the workdir under safe names and are named in
//! `task.md`; parts the capsule does not take are -32005, a part past its bound -32602, and
//! nothing lands; files the task wrote under the output directory come back as file
//! artifacts with their media types in both generations, in GetTask and in the stream
//! (symlinks and files past the bound left out); `answer: message` answers with a Message;
//! the card declares the modes. The capsule is tests/fixtures/files (it copies what it was
//! given to `out/files/`).

use crate::common;

use common::capsule::capsule;
use common::door::{message_id, start, task_of, Door};
use common::TempDir;
use serde_json::{json, Value};
use std::time::Duration;

const FILES: &str = "tests/fixtures/files/capsule.wasm";
const QUEUE: &str = "lifecycle:\n  task_acceptance: queue\n  after_task: sleep\n  queue_depth: 4\n";
const TAKES: &str = "a2a:\n  input:\n    parts: [text, file, data]\n    media_types: [text/csv, text/plain]\n    max_bytes: 64\n  output:\n    dir: out/files\n    max_bytes: 512Ki\n";
const CSV_B64: &str = "YSxiCjEsMgo=";
const DATA_B64: &str = "eyJyb3dzIjoyfQo=";

fn door(t: &TempDir, a2a: &str) -> Door {
    let dir = capsule(t, FILES, &format!("{QUEUE}{a2a}"));
    start(t, &dir, &[], &[])
}

/// A 1.0 send of `parts` (blocking unless `config` says otherwise).
fn send10(parts: Value) -> Value {
    json!({"message": {"messageId": message_id(), "role": "ROLE_USER", "parts": parts}})
}

fn send03(parts: Value) -> Value {
    json!({"message": {"kind": "message", "messageId": message_id(), "role": "user", "parts": parts}})
}

fn artifact<'a>(task: &'a Value, name: &str) -> Option<&'a Value> {
    task["artifacts"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == name))
}

fn names(task: &Value) -> Vec<String> {
    task["artifacts"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn file_and_data_parts_land_in_the_input_dir_and_files_come_back_in_both_generations() {
    let t = TempDir::new("files-in-out");
    let mut d = door(&t, TAKES);

    // 1.0: a hostile name is neutralised, a second report.csv numbered, data saved as JSON.
    let r = d.result(
        "SendMessage",
        send10(json!([
            {"text": "hello"},
            {"raw": CSV_B64, "mediaType": "text/csv", "filename": "../../evil/report.csv"},
            {"data": {"rows": 2}},
            {"raw": "eHg=", "mediaType": "text/plain; charset=utf-8", "filename": "report.csv"},
            {"raw": "b2sK", "mediaType": "text/plain", "filename": ".bashrc"},
        ])),
    );
    let task = task_of(&r);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let id = task["id"].as_str().unwrap();
    let landed = d.workdir.join("in").join(id);
    let on_disk = |n: &str| std::fs::read(landed.join(n)).unwrap_or_else(|e| panic!("in/{id}/{n}: {e}"));
    assert_eq!(on_disk("report.csv"), b"a,b\n1,2\n");
    assert_eq!(on_disk("part-2.json"), b"{\"rows\":2}\n");
    assert_eq!(on_disk("report-2.csv"), b"xx");
    assert_eq!(on_disk("_bashrc"), b"ok\n");
    let mut listed: Vec<String> = std::fs::read_dir(&landed)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    listed.sort();
    assert_eq!(listed, ["_bashrc", "part-2.json", "report-2.csv", "report.csv"]);
    assert!(!d.workdir.join("evil").exists() && !t.path().join("evil").exists());
    let task_md = format!(
        "hello\n\n## Files\n\n\
         - in/{id}/report.csv (file part, text/csv, 8 bytes, sent as \"../../evil/report.csv\")\n\
         - in/{id}/part-2.json (data part, application/json, 11 bytes)\n\
         - in/{id}/report-2.csv (file part, text/plain, 2 bytes, sent as \"report.csv\")\n\
         - in/{id}/_bashrc (file part, text/plain, 3 bytes, sent as \".bashrc\")\n"
    );
    assert_eq!(d.workfile("task.md").as_deref(), Some(task_md.as_str()));

    // What the task wrote under out/files comes back, one file artifact each, by extension.
    assert_eq!(
        names(task),
        [
            "response",
            "_bashrc",
            "part-2.json",
            "report-2.csv",
            "report.csv",
            "task.md"
        ]
    );
    assert_eq!(
        task["artifacts"][0]["parts"],
        json!([{"text": "files: report.csv,part-2.json,report-2.csv,_bashrc\n"}])
    );
    assert_eq!(
        artifact(task, "report.csv").unwrap(),
        &json!({"artifactId": format!("{id}-file-4"), "name": "report.csv",
                "parts": [{"raw": CSV_B64, "mediaType": "text/csv", "filename": "report.csv"}]})
    );
    assert_eq!(
        artifact(task, "part-2.json").unwrap()["parts"][0],
        json!({"raw": DATA_B64, "mediaType": "application/json", "filename": "part-2.json"})
    );
    assert_eq!(
        artifact(task, "_bashrc").unwrap()["parts"][0]["mediaType"],
        "application/octet-stream"
    );
    let md = &artifact(task, "task.md").unwrap()["parts"][0];
    assert_eq!(md["mediaType"], "text/markdown");
    let got = d.task(id);
    assert_eq!(
        got["artifacts"], task["artifacts"],
        "GetTask holds the same artifacts"
    );
    let ev = d.event_of("task_files_in", id);
    assert_eq!(ev["files"][0]["path"], format!("in/{id}/report.csv"));
    assert_eq!(ev["files"][0]["sent_as"], "../../evil/report.csv");

    // 0.3: the same in its own shapes; tasks/get too. The output dir holds this task's only.
    let r = d.result(
        "message/send",
        send03(json!([
            {"kind": "text", "text": "again"},
            {"kind": "file", "file": {"bytes": CSV_B64, "mimeType": "text/csv", "name": "r.csv"}},
        ])),
    );
    assert_eq!(r["kind"], "task");
    assert_eq!(r["status"]["state"], "completed", "{r}");
    let id03 = r["id"].as_str().unwrap();
    assert_eq!(names(&r), ["response", "r.csv", "task.md"]);
    assert_eq!(
        artifact(&r, "r.csv").unwrap()["parts"],
        json!([{"kind": "file", "file": {"bytes": CSV_B64, "mimeType": "text/csv", "name": "r.csv"}}])
    );
    let got = d.result("tasks/get", json!({"id": id03}));
    assert_eq!(got["artifacts"], r["artifacts"]);
    // The input directory holds the running task's parts only: the first task's are gone.
    assert!(!landed.exists(), "in/{id} outlived its task");
    assert_eq!(
        std::fs::read(d.workdir.join("in").join(id03).join("r.csv")).unwrap(),
        b"a,b\n1,2\n"
    );

    // The stream carries each file artifact before the final status.
    let mut s = d.stream(
        "SendStreamingMessage",
        send10(json!([{"raw": CSV_B64, "mediaType": "text/csv", "filename": "s.csv"}])),
    );
    let mut files = Vec::new();
    loop {
        let ev = s.result(Duration::from_secs(10));
        if let Some(a) = ev.get("artifactUpdate") {
            files.push(a["artifact"]["name"].as_str().unwrap().to_string());
            if a["artifact"]["name"] == "s.csv" {
                assert_eq!(
                    a["artifact"]["parts"],
                    json!([{"raw": CSV_B64, "mediaType": "text/csv", "filename": "s.csv"}])
                );
            }
        }
        if ev["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED" {
            break;
        }
    }
    assert_eq!(files, ["response", "s.csv", "task.md"]);
    s.expect_end(Duration::from_secs(5));
    assert_eq!(d.term().code(), Some(0));
}

#[test]
fn parts_the_capsule_does_not_take_or_past_their_bound_are_refused_and_nothing_lands() {
    let t = TempDir::new("files-refused");
    let mut d = door(&t, TAKES);
    let big = "QUFB".repeat(22); // 66 bytes, past max_bytes: 64
    for (method, params, code, says) in [
        (
            "SendMessage",
            send10(json!([{"raw": "eHg=", "mediaType": "application/x-unsupported-tck-type"}])),
            -32005,
            "Content type not supported: part 1 (file): application/x-unsupported-tck-type is not among the media types this capsule takes (text/csv, text/plain)",
        ),
        (
            "SendMessage",
            send10(json!([{"text": "x"}, {"raw": big, "mediaType": "text/csv", "filename": "a.csv"}])),
            -32602,
            "Invalid params: part 2 (file): 66 bytes, more than the 64 bytes a part may hold here (a2a.input.max_bytes)",
        ),
        (
            "message/send",
            send03(json!([{"kind": "file", "file": {"uri": "http://127.0.0.1:1/x", "mimeType": "text/csv"}}])),
            -32005,
            "Content type not supported: a file part by reference (url/uri): the door fetches nothing; send the file's bytes inline",
        ),
        (
            "SendMessage",
            send10(json!([{"text": "x", "mediaType": "application/pdf"}])),
            -32005,
            "Content type not supported: part 1 (text): a text part of application/pdf",
        ),
    ] {
        let v = d.call(method, params);
        assert_eq!(v["error"]["code"], code, "{v}");
        assert_eq!(v["error"]["message"], says, "{v}");
        if method == "SendMessage" && code == -32005 {
            assert_eq!(v["error"]["data"][0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED", "{v}");
        }
    }
    assert!(!d.workdir.join("in").exists(), "nothing landed");
    assert_eq!(d.result("ListTasks", json!({}))["tasks"], json!([]));
    assert_eq!(d.term().code(), Some(0));

    // A capsule that takes text only (no a2a block) refuses file and data parts.
    let t = TempDir::new("files-text-only");
    let mut d = door(&t, "");
    let (code, m) = d.error("SendMessage", send10(json!([{"data": {"a": 1}}])));
    assert_eq!(
        (code, m.as_str()),
        (-32005, "Content type not supported: part 1 (data): this capsule takes text parts only (its card's defaultInputModes: text/plain)")
    );
    let (code, _) = d.error(
        "message/send",
        send03(json!([{"kind": "file", "file": {"bytes": "eHg="}}])),
    );
    assert_eq!(code, -32005);
    assert_eq!(d.term().code(), Some(0));
}

#[test]
fn symlinks_and_files_past_the_bound_do_not_come_back() {
    let t = TempDir::new("files-out-bounds");
    let mut d = door(&t, TAKES);
    let r = d.result("SendMessage", send10(json!([{"text": "symlink"}])));
    let task = task_of(&r);
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert!(d.workdir.join("out/files/link.txt").is_symlink());
    assert_eq!(names(task), ["response", "ok.txt", "task.md"]);
    let r = d.result("SendMessage", send10(json!([{"text": "big"}])));
    let task = task_of(&r);
    assert_eq!(
        std::fs::metadata(d.workdir.join("out/files/big.bin"))
            .unwrap()
            .len(),
        2 << 20
    );
    assert_eq!(names(task), ["response", "task.md"], "big.bin is past max_bytes");
    assert!(
        !d.workdir.join("out/files/ok.txt").exists(),
        "emptied before the task"
    );

    // Up to the bound in all (600 KiB here), a stream read late still gets every file whole.
    for method in ["SendStreamingMessage", "message/stream"] {
        let params = if method == "message/stream" {
            send03(json!([{"kind": "text", "text": "wide"}]))
        } else {
            send10(json!([{"text": "wide"}]))
        };
        let mut s = d.stream(method, params);
        std::thread::sleep(Duration::from_secs(2));
        let mut wide = 0;
        loop {
            let ev = s.result(Duration::from_secs(10));
            let a = ev
                .get("artifactUpdate")
                .map(|u| &u["artifact"])
                .or(ev.get("artifact"));
            if let Some(a) = a {
                let part = &a["parts"][0];
                let b64 = part.get("raw").or(part["file"].get("bytes"));
                if a["name"].as_str().unwrap().starts_with("wide-") {
                    assert_eq!(
                        b64.and_then(Value::as_str).map(str::len),
                        Some(163_840),
                        "{method}"
                    );
                    wide += 1;
                }
            }
            let v10_done = ev["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED";
            let v03_done = ev["kind"] == "status-update" && ev["final"] == true;
            if v10_done || v03_done {
                if v03_done {
                    assert_eq!(ev["status"]["state"], "completed", "{ev}");
                }
                break;
            }
        }
        assert_eq!(wide, 5, "{method}");
        s.expect_end(Duration::from_secs(5));
    }
    assert_eq!(d.term().code(), Some(0));
    let log = std::fs::read_to_string(d.records.join("logs/bootstrap.log")).unwrap();
    assert!(
        log.contains("output file left out: out/files/big.bin: larger than a2a.output.max_bytes (524288)"),
        "{log}"
    );
}

#[test]
fn answer_message_answers_a_waiting_send_and_a_stream_with_one_message() {
    let t = TempDir::new("files-message");
    let mut d = door(&t, &format!("{TAKES}  answer: message\n"));
    let file = json!({"raw": CSV_B64, "mediaType": "text/csv", "filename": "m.csv"});
    let r = d.result("SendMessage", send10(json!([{"text": "hi"}, file])));
    let m = &r["message"];
    assert!(r.get("task").is_none(), "{r}");
    assert_eq!(m["role"], "ROLE_AGENT");
    assert_eq!(m["parts"][0], json!({"text": "files: m.csv\n"}));
    assert_eq!(
        m["parts"][1],
        json!({"raw": CSV_B64, "mediaType": "text/csv", "filename": "m.csv"})
    );
    assert!(m["messageId"].as_str().unwrap().starts_with("msg_"));

    let r = d.result("message/send", send03(json!([{"kind": "text", "text": "hi"}])));
    assert_eq!(
        (r["kind"].as_str(), r["role"].as_str()),
        (Some("message"), Some("agent")),
        "{r}"
    );
    assert_eq!(r["parts"][0], json!({"kind": "text", "text": "files: \n"}));

    // A stream holds exactly the one Message, then ends.
    let mut s = d.stream("SendStreamingMessage", send10(json!([{"text": "hi"}])));
    let ev = s.result(Duration::from_secs(10));
    assert_eq!(ev["message"]["role"], "ROLE_AGENT", "{ev}");
    s.expect_end(Duration::from_secs(5));

    // Asked to return at once, the send still gets the task.
    let r = d.result(
        "SendMessage",
        json!({"message": {"messageId": message_id(), "role": "ROLE_USER", "parts": [{"text": "x"}]},
               "configuration": {"returnImmediately": true}}),
    );
    assert!(r.get("task").is_some(), "{r}");
    assert_eq!(d.term().code(), Some(0));
}

#[test]
fn the_card_declares_the_modes_the_manifest_takes() {
    let t = TempDir::new("files-card");
    let mut d = door(&t, TAKES);
    for headers in [&[][..], &[("A2A-Version", "1.0")][..]] {
        let mut req = format!(
            "GET /.well-known/agent-card.json HTTP/1.1\r\nhost: {}\r\n",
            d.host()
        );
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str("\r\n");
        let answer = d.raw(req.as_bytes());
        let card: Value = serde_json::from_str(common::body_of(&answer)).unwrap();
        assert_eq!(
            card["defaultInputModes"],
            json!(["text/plain", "application/json", "text/csv"]),
            "{headers:?}"
        );
        assert_eq!(card["defaultOutputModes"], json!(["text/plain", "*/*"]));
    }
    assert_eq!(d.term().code(), Some(0));
    let t = TempDir::new("files-card-plain");
    let mut d = door(&t, "");
    let card: Value = serde_json::from_str(common::body_of(&d.get("/.well-known/agent-card.json"))).unwrap();
    assert_eq!(
        (&card["defaultInputModes"], &card["defaultOutputModes"]),
        (&json!(["text/plain"]), &json!(["text/plain"]))
    );
    assert_eq!(d.term().code(), Some(0));
}

/// A guest that planted a symlink at the input directory gets its next message's files
/// nowhere: the task fails naming why, nothing is written or removed through the link, and
/// the trace says so (`task_files_failed`).
#[test]
fn a_symlink_planted_at_the_input_dir_fails_the_task_and_nothing_lands_through_it() {
    let t = TempDir::new("files-planted");
    let mut d = door(&t, TAKES);
    let elsewhere = t.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, d.workdir.join("in")).unwrap();
    let r = d.result(
        "SendMessage",
        send10(json!([{"raw": CSV_B64, "mediaType": "text/csv", "filename": "r.csv"}])),
    );
    let task = task_of(&r);
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED", "{task}");
    let why = task["status"]["message"]["parts"][0]["text"].as_str().unwrap();
    // Emptying the input directory before the task refuses the link (it is no directory),
    // so nothing beneath it is removed or written.
    assert!(
        why.starts_with("cannot empty the input directory: ")
            && why.ends_with("Not a directory (os error 20)"),
        "{why}"
    );
    assert!(
        d.workdir.join("in").is_symlink(),
        "the link is left for the operator to see"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "nothing landed through the link"
    );
    let id = task["id"].as_str().unwrap();
    assert_eq!(d.event_of("task_files_failed", id)["error"], why);
    assert_eq!(d.term().code(), Some(0));
}

#[test]
fn output_data_files_come_back_as_data_parts_and_links_as_files_by_reference() {
    let t = TempDir::new("files-data-links");
    let takes = |out: &str| {
        format!("a2a:\n  input:\n    parts: [text, file, data]\n    media_types: [text/csv]\n  output:\n    dir: out/raw\n    {out}: out/files\n")
    };
    // The fixture copies what it was given to out/files/, here the data directory.
    let mut d = door(&t, &takes("data"));
    let csv = "YSxiCg==";
    let parts = json!([{"text": "hi"}, {"data": {"rows": 2}},
                       {"raw": csv, "mediaType": "text/csv", "filename": "r.csv"}]);
    for (params, gen03) in [
        (send10(parts.clone()), false),
        (
            send03(json!([
            {"kind": "text", "text": "hi"}, {"kind": "data", "data": {"rows": 2}},
            {"kind": "file", "file": {"bytes": csv, "mimeType": "text/csv", "name": "r.csv"}}])),
            true,
        ),
    ] {
        let method = if gen03 { "message/send" } else { "SendMessage" };
        let r = d.result(method, params);
        let task = if gen03 { &r } else { task_of(&r) };
        let data = artifact(task, "part-1.json").unwrap_or_else(|| panic!("{task}"))["parts"][0].clone();
        let want = if gen03 {
            json!({"kind": "data", "data": {"rows": 2}})
        } else {
            json!({"data": {"rows": 2}, "mediaType": "application/json"})
        };
        assert_eq!(data, want, "{task}");
        // Not one JSON object: sent back as the file it is, and the log says so.
        let csv_part = &artifact(task, "r.csv").unwrap()["parts"][0];
        let bytes = csv_part.get("raw").or(csv_part["file"].get("bytes"));
        assert_eq!(bytes, Some(&json!(csv)), "{task}");
    }
    assert_eq!(d.term().code(), Some(0));
    let log = std::fs::read_to_string(d.records.join("logs/bootstrap.log")).unwrap();
    assert!(
        log.contains("output file left out: out/files/r.csv: not one JSON object: sent back as a file"),
        "{log}"
    );

    // Links: a file holding one URL is a file by reference; anything else is left out.
    let t = TempDir::new("files-links");
    let mut d = door(&t, &takes("links"));
    let link = "aHR0cHM6Ly9leGFtcGxlLmNvbS9yLmNzdgo=";
    let bad = "ZmlsZTovLy9ldGMvcGFzc3dkCg==";
    let r = d.result(
        "SendMessage",
        send10(json!([{"text": "hi"},
            {"raw": link, "mediaType": "text/csv", "filename": "r.csv"},
            {"raw": bad, "mediaType": "text/csv", "filename": "bad.csv"}])),
    );
    let task = task_of(&r);
    assert_eq!(
        artifact(task, "r.csv").unwrap()["parts"],
        json!([{"url": "https://example.com/r.csv", "mediaType": "text/csv", "filename": "r.csv"}]),
        "{task}"
    );
    assert_eq!(
        names(task),
        ["response", "r.csv"],
        "bad.csv and task.md are no links"
    );
    assert_eq!(d.term().code(), Some(0));
    let log = std::fs::read_to_string(d.records.join("logs/bootstrap.log")).unwrap();
    assert!(
        log.contains(
            "output file left out: out/files/bad.csv: not one http(s) URL of at most 2048 bytes: left out"
        ),
        "{log}"
    );
}
