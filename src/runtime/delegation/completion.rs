//! The completion path: what a delegated child (or, when it cannot, its parent's launcher)
//! records in the child's `completion.json` and posts to the delegating parent's door. It
//! carries the delegation's identity, the outcome and where the result is, never the
//! child's output. The record is written before the post (`delivered: false`) and
//! rewritten after it, each time through a temp file and a rename in the records directory.

use super::send::{self, Failure};
use crate::fsx::Dir;
use crate::spawner::Spawner;
use serde::Serialize;
use std::time::Duration;

/// The record's name in the child's records directory.
pub const FILE: &str = "completion.json";
/// How long one post may take.
const POST_TIMEOUT: Duration = Duration::from_secs(10);

/// One outcome of one delegation.
#[derive(Debug, Clone, Serialize)]
pub struct Completion {
    pub delegation_id: String,
    pub capsule_name: String,
    pub capsule_version: String,
    /// The child's session.
    pub session_id: String,
    /// `ok`, `error`, `crashed` or `terminated`.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_path: Option<String>,
    /// The child's directory, absolute.
    pub workdir: String,
    pub duration_ms: u64,
    /// The exit status and the last stderr lines, on `crashed` or `terminated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// `child` or `launcher`.
    pub reported_by: &'static str,
}

#[derive(Serialize)]
struct Record<'a> {
    #[serde(flatten)]
    completion: &'a Completion,
    delivered: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    delivery_error: Option<&'a str>,
}

impl Completion {
    /// `completion.json`: pretty JSON and a newline.
    pub fn record(&self, delivered: bool, delivery_error: Option<&str>) -> String {
        let r = Record {
            completion: self,
            delivered,
            delivery_error,
        };
        let mut s = serde_json::to_string_pretty(&r).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }

    /// The message the parent's door receives, one field per line.
    pub fn message_text(&self) -> String {
        let mut s = format!(
            "Delegated capsule finished.\ndelegation_id: {}\ncapsule: {}@{}\nsession_id: {}\nstatus: {}\nduration_ms: {}\nworkdir: {}\n",
            self.delegation_id,
            self.capsule_name,
            self.capsule_version,
            self.session_id,
            self.status,
            self.duration_ms,
            self.workdir
        );
        if let Some(p) = &self.result_path {
            s.push_str(&format!("result_path: {p}\n"));
        }
        if let Some(d) = &self.detail {
            s.push_str(&format!(
                "detail: {}\n",
                crate::agent::sanitize::one_line(d, 2000)
            ));
        }
        s
    }

    /// Post this completion to the parent named by `spawner`.
    pub fn post(&self, spawner: &Spawner) -> Result<(), Failure> {
        let hex = self.delegation_id.trim_start_matches("dlg_");
        send::send(
            &spawner.url,
            &self.delegation_id,
            &format!("msg_{hex}"),
            Some(&spawner.context_id),
            &self.message_text(),
            &spawner.completion_headers(),
            POST_TIMEOUT,
        )
        .map(|_| ())
    }

    /// Record, post (with `retries` more attempts after a failure), record again; whether
    /// the parent took it. A failure is one line on stderr; it never fails the session.
    /// Without `records` (the launcher could not open the child's) it is only posted.
    pub fn report(&self, records: Option<&Dir>, spawner: Option<&Spawner>, retries: u32) -> bool {
        let write = |delivered: bool, why: Option<&str>| {
            if let Some(Err(e)) = records.map(|r| r.replace(FILE, self.record(delivered, why).as_bytes())) {
                eprintln!("warning: cannot write {FILE}: {e}");
            }
        };
        write(false, None);
        let Some(spawner) = spawner else {
            return false;
        };
        let mut outcome = self.post(spawner);
        for _ in 0..retries {
            if outcome.is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
            outcome = self.post(spawner);
        }
        let (delivered, why) = match &outcome {
            Ok(()) => (true, None),
            Err(e) => (false, Some(e.to_string())),
        };
        if let Some(w) = &why {
            eprintln!(
                "warning: the completion of {} was not delivered to its parent: {w}",
                self.delegation_id
            );
        }
        write(delivered, why.as_deref());
        delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Completion {
        Completion {
            delegation_id: "dlg_0123".into(),
            capsule_name: "worker".into(),
            capsule_version: "0.1.0".into(),
            session_id: "ses_4567".into(),
            status: "ok",
            result_path: Some("out/result.txt".into()),
            workdir: "/w/.murmur/children/worker-00".into(),
            duration_ms: 12,
            detail: None,
            reported_by: "child",
        }
    }

    #[test]
    fn the_record_keeps_the_documented_order_and_omits_what_is_absent() {
        let r = sample().record(false, None);
        let keys: Vec<&str> = r
            .lines()
            .filter_map(|l| l.trim().strip_prefix('"').and_then(|l| l.split('"').next()))
            .collect();
        assert_eq!(
            keys,
            [
                "delegation_id",
                "capsule_name",
                "capsule_version",
                "session_id",
                "status",
                "result_path",
                "workdir",
                "duration_ms",
                "reported_by",
                "delivered"
            ]
        );
        assert!(r.ends_with("}\n"));
        assert!(sample()
            .record(false, Some("refused: x"))
            .contains("\"delivery_error\": \"refused: x\""));
    }

    #[test]
    fn the_message_names_the_outcome_never_the_output() {
        let mut c = sample();
        c.status = "crashed";
        c.detail = Some("exit signal 9\nlast line".into());
        assert_eq!(
            c.message_text(),
            "Delegated capsule finished.\ndelegation_id: dlg_0123\ncapsule: worker@0.1.0\nsession_id: ses_4567\nstatus: crashed\nduration_ms: 12\nworkdir: /w/.murmur/children/worker-00\nresult_path: out/result.txt\ndetail: exit signal 9 last line\n"
        );
    }
}
