//! The parent's watch over each started child: one thread per child waits for it to end,
//! ends it at the delegation deadline (SIGTERM, 5 s, SIGKILL), and makes sure the
//! delegation is reported exactly once. A child that reported itself is only traced; one
//! that died without a `completion.json` is recorded `crashed`, one the deadline stopped
//! `terminated`, both by the launcher and posted to this session's own door; one ended
//! because this session is ending is recorded `terminated` and posted to nobody. Whatever
//! the child's session left in its pids cgroup is killed.

use super::completion::{self, Completion};
use crate::containment::cgroup::Cgroup;
use crate::containment::spawn::Proc;
use crate::fsx::Dir;
use crate::runtime::door::tasks::Tasks;
use crate::runtime::trace::Trace;
use crate::spawner::Spawner;
use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a child has between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);
/// How long a child may stay unreaped after SIGKILL (stuck in uninterruptible sleep, say)
/// before the watcher reports it anyway and lets the session end.
const KILL_WAIT: Duration = Duration::from_secs(10);
/// How often a watcher looks at its child.
const TICK: Duration = Duration::from_millis(5);
/// The stderr lines of a child kept for a failure's detail.
pub const STDERR_LINES: usize = 20;

/// The last lines a child wrote to stderr.
pub type StderrTail = Arc<Mutex<VecDeque<String>>>;

/// Every watched child of this session, and what their reports go to.
pub struct Watch {
    live: Mutex<Vec<(Arc<AtomicBool>, JoinHandle<()>)>>,
    tasks: Arc<Tasks>,
    trace: Mutex<Option<Trace>>,
}

/// One started child and everything its report needs.
pub struct Watched {
    pub child: Proc,
    pub completion: Completion,
    /// The child's records directory (where its `completion.json` is).
    pub records: PathBuf,
    /// This session's own door, as the child's spawner handle names it.
    pub own_door: Spawner,
    pub started: Instant,
    pub deadline: Duration,
    pub stderr: StderrTail,
}

impl Watch {
    pub fn new(tasks: Arc<Tasks>, trace: Option<Trace>) -> Arc<Watch> {
        Arc::new(Watch {
            live: Mutex::new(Vec::new()),
            tasks,
            trace: Mutex::new(trace),
        })
    }

    /// Write one `delegation` event.
    pub fn trace(&self, fields: Value) {
        if let Some(t) = self.trace.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            let _ = t.event("delegation", fields);
        }
    }

    /// `delegation_id` was minted here: its one completion will be admitted by the door.
    pub fn expect(&self, delegation_id: &str) {
        self.tasks.completions.expect(delegation_id);
    }

    /// Watch `w` on a thread of its own. The session holds a task to come until the
    /// child's outcome is reported.
    pub fn start(self: &Arc<Self>, w: Watched) {
        self.tasks.hold();
        let stop = Arc::new(AtomicBool::new(false));
        let (me, flag) = (self.clone(), stop.clone());
        let handle = std::thread::spawn(move || me.watch(w, &flag));
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|(_, h)| !h.is_finished());
        live.push((stop, handle));
    }

    /// This session is ending: every child still running is ended (recorded `terminated`,
    /// posted to nobody) and every watcher has finished when this returns.
    pub fn shutdown(&self) {
        let live = std::mem::take(&mut *self.live.lock().unwrap_or_else(|p| p.into_inner()));
        for (stop, _) in &live {
            stop.store(true, Ordering::SeqCst);
        }
        for (_, h) in live {
            let _ = h.join();
        }
    }

    fn watch(&self, mut w: Watched, stop: &AtomicBool) {
        // However this ends (a panic included), the session stops waiting for it.
        struct Release<'a>(&'a Tasks);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.release();
            }
        }
        let _release = Release(&self.tasks);
        let pid = Pid::from_raw(w.child.id() as i32);
        let mut ended_by: Option<&'static str> = None;
        let mut term_sent: Option<Instant> = None;
        let status = loop {
            match w.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) => {}
                Err(_) => break None,
            }
            if ended_by.is_none() {
                if stop.load(Ordering::SeqCst) {
                    ended_by = Some("session_end");
                } else if w.started.elapsed() >= w.deadline {
                    ended_by = Some("deadline");
                }
            }
            if ended_by.is_some() {
                match term_sent {
                    None => {
                        // The child is not reaped yet, so its pid is still its own.
                        if let Some(p) = pid {
                            let _ = kill_process(p, Signal::TERM);
                        }
                        term_sent = Some(Instant::now());
                    }
                    // A child SIGKILL cannot end (in uninterruptible sleep): reported
                    // unreaped rather than holding the session forever.
                    Some(t) if t.elapsed() >= GRACE + KILL_WAIT => break None,
                    Some(t) if t.elapsed() >= GRACE => {
                        // Still unreaped: the group id is still the child's own.
                        if let Some(p) = pid {
                            let _ = kill_process_group(p, Signal::KILL);
                        }
                        let _ = w.child.kill();
                    }
                    Some(_) => {}
                }
            }
            std::thread::sleep(TICK);
        };
        // Whatever the child's session left behind in its pids cgroup (its shell and native
        // tools; a child that ended normally removed the cgroup itself).
        if let Some(cg) = Cgroup::adopt(&w.completion.session_id) {
            drop(cg);
        }
        let c = &mut w.completion;
        c.duration_ms = w.started.elapsed().as_millis() as u64;
        let exit = status.map_or_else(|| "unknown".to_string(), |s| s.to_string());
        let tail = || {
            let lines = w.stderr.lock().unwrap_or_else(|p| p.into_inner());
            lines.iter().cloned().collect::<Vec<_>>().join(" | ")
        };
        let records = Dir::open(&w.records).ok();
        // A child that settled its own report has reported, even if the deadline or this
        // session's end caught it on its way out: a delegation is never reported twice.
        match records.as_ref().and_then(completion::settled_by_child) {
            Some(status) => {
                c.status = status;
                c.reported_by = "child";
            }
            None => {
                c.reported_by = "launcher";
                match ended_by {
                    Some(why) => {
                        c.status = "terminated";
                        c.detail = Some(match why {
                            "deadline" => format!(
                                "the child ran past lifecycle.delegation_deadline_secs ({} s) and was ended ({exit}); stderr: {}",
                                w.deadline.as_secs(),
                                tail()
                            ),
                            _ => format!("the delegating session ended first ({exit}); stderr: {}", tail()),
                        });
                    }
                    None => {
                        c.status = "crashed";
                        c.detail = Some(format!("{exit}; stderr: {}", tail()));
                    }
                }
                // Posted to this session's own door, except when this session is ending;
                // recorded where the child's records are, when they can be opened.
                let post = (ended_by != Some("session_end")).then_some(&w.own_door);
                c.report(records.as_ref(), post, 1);
            }
        }
        // Reported: the warden need not report it should this process die now.
        if let Some(w) = crate::containment::warden::running() {
            let _ = w.forget(&c.delegation_id);
        }
        self.trace(json!({
            "delegation_id": c.delegation_id,
            "capsule": c.capsule_name,
            "version": c.capsule_version,
            "child_session_id": c.session_id,
            "status": c.status,
            "reported_by": c.reported_by,
            "duration_ms": c.duration_ms,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::door::tasks::{Acceptance, Next};
    use crate::spawner::Trust;
    use std::sync::atomic::AtomicI32;

    #[test]
    fn a_child_that_reported_itself_is_not_reported_again_when_the_deadline_catches_it() {
        let records = std::env::temp_dir().join(format!("murmur-watch-own-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&records);
        std::fs::create_dir_all(&records).unwrap();
        let mut c = Completion {
            delegation_id: format!("dlg_{}", "0".repeat(32)),
            capsule_name: "worker".into(),
            capsule_version: "0.1.0".into(),
            session_id: format!("ses_{}", "1".repeat(32)),
            status: "ok",
            result_path: None,
            workdir: "/nowhere".into(),
            duration_ms: 1,
            detail: None,
            reported_by: "child",
        };
        let own = c.record(true, None);
        std::fs::write(records.join(completion::FILE), &own).unwrap();
        c.reported_by = "launcher";
        let tasks = crate::runtime::door::tasks::Tasks::new(Acceptance::Queue(4));
        let watch = Watch::new(tasks.clone(), None);
        // Still running at a deadline of zero: ended by the deadline, its report already made.
        let args = ["30".to_string()];
        let sleep = std::path::Path::new("/bin/sleep");
        let child =
            crate::containment::spawn::spawn(crate::containment::spawn::Spawn::own_helper(sleep, &args))
                .unwrap();
        watch.start(Watched {
            child,
            completion: c,
            records: records.clone(),
            own_door: Spawner {
                // Nothing listens there: a second report would be attempted and recorded.
                url: "http://127.0.0.1:1".into(),
                session_id: format!("ses_{}", "2".repeat(32)),
                context_id: "ctx".into(),
                trust: Trust::Trusted,
                delegation_id: format!("dlg_{}", "0".repeat(32)),
            },
            started: Instant::now(),
            deadline: Duration::ZERO,
            stderr: StderrTail::default(),
        });
        watch.shutdown();
        let after = std::fs::read_to_string(records.join(completion::FILE)).unwrap();
        assert_eq!(after, own, "the child's own record was replaced");
        // And the session no longer waits for it.
        let stop = AtomicI32::new(0);
        assert!(matches!(
            tasks.next(Some(Duration::ZERO), &stop, || 0),
            Next::Idle
        ));
        let _ = std::fs::remove_dir_all(&records);
    }
}
