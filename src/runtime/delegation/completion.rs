//! The completion path: what a delegated child (or, when it cannot, its parent's launcher)
//! records in the child's `completion.json` and posts to the delegating parent's door. It
//! carries the delegation's identity, the outcome and where the result is, never the
//! child's output. The record is written before the post (`delivered: false`) and
//! rewritten after it, each time through a temp file and a rename in the records directory.

use super::send::{self, Failure};
use crate::fsx::Dir;
use crate::spawner::Spawner;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;
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

/// The hidden subcommand the session's warden runs for a delegation whose launcher died:
/// `mur __orphaned RECORDS STARTED_UNIX_MS COMPLETION_JSON`.
pub const ORPHANED: &str = "__orphaned";

/// The identity of a delegation, as its launcher handed it to the warden.
#[derive(Deserialize)]
struct Identity {
    delegation_id: String,
    capsule_name: String,
    capsule_version: String,
    session_id: String,
    workdir: String,
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

    /// The warden's last words for this delegation: the arguments of `mur`
    /// [`ORPHANED`], with `records` the child's records directory and `started_ms` when it
    /// began (Unix milliseconds).
    pub fn orphan_args(&self, records: &Path, started_ms: u64) -> Vec<String> {
        vec![
            ORPHANED.to_string(),
            records.display().to_string(),
            started_ms.to_string(),
            serde_json::to_string(self).unwrap_or_default(),
        ]
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

/// Whether `records` holds a report that stands: one the launcher made, or one the child
/// settled (delivered, or with the reason it was not). A child's record still reading
/// `delivered: false` with no error is a child that died between its two writes: no
/// report. The status of a settled record of the child, or `None`.
pub fn settled_by_child(records: &Dir) -> Option<&'static str> {
    let v = read_record(records)?;
    let settled = v.get("delivered") == Some(&Value::Bool(true)) || v.get("delivery_error").is_some();
    if v.get("reported_by").and_then(Value::as_str) != Some("child") || !settled {
        return None;
    }
    match v.get("status").and_then(Value::as_str)? {
        "ok" => Some("ok"),
        "error" => Some("error"),
        _ => None,
    }
}

/// Whether the delegation of `records` has been reported by either reporter.
fn reported(records: &Dir) -> bool {
    let by_launcher = read_record(records)
        .is_some_and(|v| v.get("reported_by").and_then(Value::as_str) == Some("launcher"));
    by_launcher || settled_by_child(records).is_some()
}

fn read_record(records: &Dir) -> Option<Value> {
    let bytes = records.read(FILE, 64 * 1024).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `mur __orphaned RECORDS STARTED_UNIX_MS COMPLETION_JSON`, run by the warden of a
/// session that died while its child worked (the warden killed the child): the launcher's
/// record, `terminated` and posted to nobody (the parent's door went with it), unless the
/// delegation was reported already.
pub fn orphaned(args: &[String]) -> i32 {
    let [records, started, carried] = args else {
        return 2;
    };
    let (Ok(id), Ok(started)) = (serde_json::from_str::<Identity>(carried), started.parse::<u64>()) else {
        return 2;
    };
    let Ok(dir) = Dir::open(Path::new(records)) else {
        return 1;
    };
    if reported(&dir) {
        return 0;
    }
    let now = crate::clock::now_ms();
    let c = Completion {
        delegation_id: id.delegation_id,
        capsule_name: id.capsule_name,
        capsule_version: id.capsule_version,
        session_id: id.session_id,
        status: "terminated",
        result_path: None,
        workdir: id.workdir,
        duration_ms: now.saturating_sub(started),
        detail: Some(
            "the delegating session's runtime died (killed or crashed); its warden ended the child".into(),
        ),
        reported_by: "launcher",
    };
    c.report(Some(&dir), None, 0);
    0
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
