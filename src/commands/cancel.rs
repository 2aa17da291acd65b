//! `mur cancel SESSION TASK`: cancel one task of a live session through its door's own A2A
//! `tasks/cancel` (JSON-RPC on loopback, with the session's own token as `mur token` reads it
//! when the door is authenticated); the session goes on. The answer is the task's state; a
//! refusal of the door (an unknown task, one already finished) is E-RUN-062 with the door's
//! A2A error code and words.

use super::sessions;
use crate::diag::{code, Diagnostic};
use crate::http::client::{self, Options};
use crate::places::DOOR_TOKENS_FILE;
use crate::trace_view::clean;
use serde_json::{json, Value};
use std::time::Duration;

/// Run `mur cancel`: the line to print (`TASK: STATE`).
pub fn cancel(session: &str, task: &str) -> Result<String, Diagnostic> {
    let live = sessions::open(session)?;
    let url = door_url(&live.status).ok_or_else(|| {
        Diagnostic::new(
            code::IO_READ,
            crate::places::SESSION_FILE,
            match &live.problem {
                Some(why) => why.clone(),
                None => format!("session {session} names no door of its own on loopback"),
            },
        )
    })?;
    let bearer = bearer(&live, session)?;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": task}});
    let mut headers = Vec::new();
    if let Some(b) = &bearer {
        headers.push(("authorization", b.as_str()));
    }
    let opts = Options {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(10),
        ..Options::default()
    };
    let resp = client::post_json(&url, &headers, &body.to_string(), &opts).map_err(|e| {
        Diagnostic::new(
            code::IO_READ,
            "SESSION",
            format!("cannot reach the door of session {session} at {url}: {e}"),
        )
    })?;
    answer(&resp.body, resp.status, task)
}

/// `http://127.0.0.1:PORT/` of the status's `http://localhost:PORT` (nothing else is taken).
fn door_url(status: &Value) -> Option<String> {
    let port: u16 = status
        .get("url")?
        .as_str()?
        .strip_prefix("http://localhost:")?
        .parse()
        .ok()?;
    Some(format!("http://127.0.0.1:{port}/"))
}

/// `Bearer TOKEN` of the session's first declared credential, when its door takes tokens.
fn bearer(live: &sessions::Live, session: &str) -> Result<Option<String>, Diagnostic> {
    let present = rustix::fs::statat(
        live.dir.as_fd(),
        DOOR_TOKENS_FILE,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .is_ok();
    if !present {
        return Ok(None);
    }
    match super::token::token(session, None) {
        Ok(t) => Ok(Some(format!("Bearer {}", t.trim_end()))),
        Err(super::token::Refused::Failed(d)) => Err(d),
        Err(super::token::Refused::Usage(e)) => Err(Diagnostic::new(code::IO_READ, "SESSION", e.to_string())),
    }
}

/// The door's JSON-RPC answer: the task's state, or the refusal as E-RUN-062.
fn answer(body: &[u8], status: u16, task: &str) -> Result<String, Diagnostic> {
    let shown = clean(task, 100);
    let v: Value = serde_json::from_slice(body).map_err(|_| {
        Diagnostic::new(
            code::IO_READ,
            "SESSION",
            format!("the door answered HTTP {status} without a JSON-RPC body"),
        )
    })?;
    if let Some(e) = v.get("error") {
        let num = e.get("code").and_then(Value::as_i64).unwrap_or(0);
        let msg = e.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(Diagnostic::new(
            code::RUN_CANCEL_REFUSED,
            "TASK",
            format!(
                "task {shown} was not canceled: {} (A2A error {num})",
                clean(msg, 300)
            ),
        ));
    }
    let state = v["result"]["status"]["state"].as_str().ok_or_else(|| {
        Diagnostic::new(
            code::IO_READ,
            "SESSION",
            format!("the door answered HTTP {status} with no task state"),
        )
    })?;
    Ok(format!("{shown}: {}\n", clean(state, 40)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_doors_answer_is_a_state_or_a_coded_refusal() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"result":{"id":"t","status":{"state":"canceled"}}}"#;
        assert_eq!(answer(ok, 200, "t").unwrap(), "t: canceled\n");
        let gone = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found"}}"#;
        let d = answer(gone, 200, "t").unwrap_err();
        assert_eq!(d.code, code::RUN_CANCEL_REFUSED);
        assert!(
            d.message.contains("Task not found (A2A error -32001)"),
            "{}",
            d.message
        );
        assert!(answer(b"<html>", 500, "t").is_err());
        assert_eq!(
            door_url(&json!({"url": "http://localhost:4000"})).unwrap(),
            "http://127.0.0.1:4000/"
        );
        assert_eq!(door_url(&json!({"url": "http://example.com:4000"})), None);
    }
}
