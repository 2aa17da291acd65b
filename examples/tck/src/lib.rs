//! The TCK capsule: answers each task as the A2A TCK's scripted agent does, routed by the
//! caller's `messageId` (`MURMUR_MESSAGE_ID`; for a task without one, the first word of
//! `task.md`) with its `tck-` prefix dropped:
//!
//! - `complete-task`: the answer `Hello from TCK`;
//! - `artifact-text`, `stream-artifact-text`, `stream-001`, `stream-003`,
//!   `stream-ordering-001`: the TCK's fixed text for each;
//! - `artifact-file`, `stream-artifact-file`: `out/files/output.txt` holding `tck` (a
//!   `text/plain` file artifact) and an empty answer;
//! - `artifact-file-url`: `out/links/output.txt` holding `https://example.com/output.txt`
//!   (a file artifact by reference: the door fetches nothing) and an empty answer;
//! - `artifact-data`: `out/data/data.json` holding `{"key": "value", "count": 42}` (a data
//!   artifact) and an empty answer;
//! - `message-response`: `Direct message response` in `out/message.txt` (a send that waits
//!   gets a Message, not the Task);
//! - `slow` or `test-resubscribe-message-id`: sleeps 4 s first (a task to cancel or watch);
//! - `reject-task`: traps, so the task fails;
//! - `input-required`, and the 0.3 TCK's tasks it continues or cancels (`text-message-id`,
//!   `cancel-test`, `mapping-test`, `test-history-`, `test-state-message-id`): leaves the
//!   question `out/ask.txt`, so the task waits in `input-required`; the caller's answer runs
//!   it again, routed by the answer's messageId (`tck-complete-task-…` completes it);
//! - anything else: `Unhandled messageId prefix: <id>`.
wit_bindgen::generate!({ path: "../../wit", world: "murmur:capsule/capsule", generate_all });

use exports::murmur::capsule::run::Guest;
struct Tck;

/// The routing keys whose task asks its caller for input.
const ASKS: [&str; 6] = [
    "input-required",
    "text-message-id",
    "cancel-test",
    "mapping-test",
    "test-history-",
    "test-state-message-id",
];

/// What the scripted agent answers for `key` (the routing key without `tck-`): the answer
/// text and the one output file, if any (path beneath `out/`, bytes).
fn answer(key: &str, id: &str) -> (String, Option<(&'static str, &'static str)>) {
    let text = |t: &str| (t.to_string(), None);
    let is = |p: &str| key.starts_with(p);
    if is("artifact-file-url") {
        (String::new(), Some(("links/output.txt", "https://example.com/output.txt\n")))
    } else if is("stream-artifact-file") || is("artifact-file") {
        (String::new(), Some(("files/output.txt", "tck")))
    } else if is("artifact-data") {
        (String::new(), Some(("data/data.json", "{\"key\": \"value\", \"count\": 42}\n")))
    } else if is("stream-artifact-text") {
        text("Streamed text content")
    } else if is("artifact-text") {
        text("Generated text content")
    } else if is("stream-ordering-001") {
        text("Ordered output")
    } else if is("stream-001") {
        text("Stream hello from TCK")
    } else if is("stream-003") {
        text("Stream task lifecycle")
    } else if is("message-response") {
        text("Direct message response")
    } else if is("complete-task") || is("slow") || is("test-resubscribe-message-id") {
        text("Hello from TCK")
    } else {
        text(&format!("Unhandled messageId prefix: {id}"))
    }
}

impl Guest for Tck {
    fn run() {
        let task = std::fs::read_to_string("task.md").unwrap_or_default();
        let id = std::env::var("MURMUR_MESSAGE_ID")
            .unwrap_or_else(|_| task.split_whitespace().next().unwrap_or("").to_string());
        let key = id.strip_prefix("tck-").unwrap_or(&id);
        if key.starts_with("slow") || key.starts_with("test-resubscribe-message-id") {
            std::thread::sleep(std::time::Duration::from_secs(4));
        }
        if key.starts_with("reject-task") {
            panic!("rejected");
        }
        if ASKS.iter().any(|p| key.starts_with(p)) {
            std::fs::create_dir_all("out").expect("out/ is creatable in the workdir");
            std::fs::write("out/ask.txt", "The TCK capsule needs more input: answer on this task.")
                .expect("out/ask.txt is writable");
            return;
        }
        let (text, file) = answer(key, &id);
        if let Some((path, body)) = file {
            let path = format!("out/{path}");
            let dir = path.rsplit_once('/').map_or("out", |(d, _)| d);
            std::fs::create_dir_all(dir).expect("an output directory is creatable in the workdir");
            std::fs::write(&path, body).expect("an output file is writable");
        }
        let answer_file = if key.starts_with("message-response") {
            "out/message.txt"
        } else {
            "out/result.txt"
        };
        std::fs::write(answer_file, &text).expect("the answer file is writable");
    }
}

export!(Tck);
