//! Push notifications: a task's updates POSTed to the webhooks its caller configured, only
//! to destinations `a2a.push.allow` covers (checked when the config is made; a loopback
//! address is reached only through a rule that names loopback itself, so a listed host name
//! that resolves to 127.0.0.1 is not a way in). The task table hands each update to
//! [`Hook`]s as rendered bytes; [`WORKERS`] threads of the door deliver them through the
//! project's HTTP client (each webhook's updates in order), so neither the task's thread nor
//! the door's event loop ever waits on a webhook. Bounded everywhere: [`MAX_QUEUED_PER_TASK`]
//! updates wait per task, [`MAX_QUEUED`] and [`MAX_QUEUED_BYTES`] in all (the oldest is
//! dropped, and traced, beyond them), [`ATTEMPTS`] tries with doubling backoff, [`TIMEOUT`]
//! per request, no redirect followed (a 3xx is a failure), at most [`MAX_RESPONSE`] bytes of
//! answer read. Each delivery is traced (`push_sent`, `push_retry`, `push_failed`) by task,
//! config id and URL without its query: never a token or credential.
//!
//! Payloads, per the generation the config was made in: 1.0 a `StreamResponse` (`task`,
//! `statusUpdate`, `artifactUpdate`), 0.3 the Task as it stands, on each status change.

use crate::a2a::push::Config;
use crate::a2a::shapes::{self, Artifact, Task};
use crate::a2a::Generation;
use crate::http::client::{self, ClientError, Options, Url};
use crate::http::tls::TlsConfig;
use crate::manifest::netrule::{self, NetRule};
use crate::runtime::trace::Trace;
use serde_json::{json, Value};
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

/// The most webhooks one task has.
pub const MAX_HOOKS: usize = 8;
/// The most updates waiting per task (the oldest dropped beyond it).
pub const MAX_QUEUED_PER_TASK: usize = 32;
/// The most updates waiting in all.
pub const MAX_QUEUED: usize = 1024;
/// The most bytes of updates waiting in all (a task's with its file artifacts is large).
pub const MAX_QUEUED_BYTES: usize = 64 << 20;
/// Deliveries under way at once (one slow webhook does not hold up the others).
pub const WORKERS: usize = 2;
/// Tries per update.
pub const ATTEMPTS: u32 = 3;
/// The wait before the second try, doubled before each later one.
pub const BACKOFF: Duration = Duration::from_millis(200);
/// One request's bound: to connect, and then for the whole answer.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a webhook's answer read, bytes.
pub const MAX_RESPONSE: usize = 16 << 10;
/// How long a closing session waits for its updates to go out.
pub const DRAIN: Duration = Duration::from_secs(3);

/// One update to deliver.
struct Job {
    task_id: String,
    hook_id: String,
    url: Url,
    /// The URL for the trace: no query.
    shown: String,
    loopback: bool,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    attempts: u32,
    due: Instant,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// The bytes of the waiting jobs' bodies.
    bytes: usize,
    /// The webhooks (task, config id) a delivery is under way to: their next update waits.
    inflight: Vec<(String, String)>,
    /// The session is closing: nothing more is taken.
    stopped: bool,
}

struct Shared {
    rules: Vec<NetRule>,
    state: Mutex<State>,
    cv: Condvar,
    trace: Option<Mutex<Trace>>,
    tls: OnceLock<Result<TlsConfig, String>>,
}

/// The door's push deliveries; clones share one queue and worker.
#[derive(Clone)]
pub struct Pusher(Arc<Shared>);

/// One webhook of a task, as the table holds it.
#[derive(Clone)]
pub struct Hook {
    pub id: String,
    pub config: Config,
    pusher: Pusher,
}

impl Pusher {
    /// A pusher for `rules` (non-empty), its worker started.
    pub fn start(rules: Vec<NetRule>, trace: Option<Trace>) -> Result<Pusher, String> {
        let p = Pusher(Arc::new(Shared {
            rules,
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            trace: trace.map(Mutex::new),
            tls: OnceLock::new(),
        }));
        for _ in 0..WORKERS {
            let worker = p.clone();
            std::thread::Builder::new()
                .name("door-push".into())
                .spawn(move || worker.run())
                .map_err(|e| format!("cannot start the push thread: {e}"))?;
        }
        Ok(p)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `config` names a destination the manifest allows; the reason if not.
    pub fn admit(&self, config: &Config) -> Result<(), String> {
        let url = Url::parse_web(&config.url).map_err(|_| {
            "url must be an absolute http:// or https:// URL without userinfo or fragment".to_string()
        })?;
        let dest = netrule::endpoint(&config.url).ok_or("url names no destination")?;
        if !netrule::any_covers(&self.0.rules, &dest) {
            let scheme = if url.tls { "https" } else { "http" };
            return Err(format!(
                "push destination {scheme}://{} is not in a2a.push.allow",
                url.authority()
            ));
        }
        Ok(())
    }

    /// `config` as a task's hook named `id`.
    pub fn hook(&self, id: String, config: Config) -> Hook {
        Hook {
            id,
            config,
            pusher: self.clone(),
        }
    }

    fn trace(&self, event: &str, fields: Value) {
        if let Some(t) = &self.0.trace {
            let _ = t.lock().unwrap_or_else(|p| p.into_inner()).event(event, fields);
        }
    }

    fn enqueue(&self, job: Job) {
        let full = "queue full: the oldest update was dropped";
        let mut dropped = Vec::new();
        {
            let mut st = self.lock();
            if st.stopped {
                dropped.push((job, "the session is closing"));
            } else {
                let same = st.jobs.iter().filter(|j| j.task_id == job.task_id).count();
                if same >= MAX_QUEUED_PER_TASK {
                    if let Some(i) = st.jobs.iter().position(|j| j.task_id == job.task_id) {
                        dropped.extend(st.jobs.remove(i).map(|j| (j, full)));
                    }
                }
                st.bytes = st.jobs.iter().map(|j| j.body.len()).sum();
                while !st.jobs.is_empty()
                    && (st.jobs.len() >= MAX_QUEUED || st.bytes + job.body.len() > MAX_QUEUED_BYTES)
                {
                    if let Some(j) = st.jobs.pop_front() {
                        st.bytes -= j.body.len();
                        dropped.push((j, full));
                    }
                }
                st.bytes += job.body.len();
                st.jobs.push_back(job);
            }
        }
        self.0.cv.notify_all();
        for (j, why) in dropped {
            self.failed(&j, why);
        }
    }

    fn failed(&self, j: &Job, why: &str) {
        self.trace(
            "push_failed",
            json!({"task_id": j.task_id, "config_id": j.hook_id, "url": j.shown,
                   "attempts": j.attempts, "error": why}),
        );
    }

    /// The first job due now whose webhook has no earlier job waiting (a task's updates
    /// reach each webhook in order); else how long until one may be.
    fn ready(st: &mut State, now: Instant) -> Result<Job, Duration> {
        let mut seen: HashSet<(String, String)> = st.inflight.iter().cloned().collect();
        let mut next = Duration::from_secs(1);
        let mut pick = None;
        for (i, j) in st.jobs.iter().enumerate() {
            if !seen.insert((j.task_id.clone(), j.hook_id.clone())) {
                continue;
            }
            if j.due <= now {
                pick = Some(i);
                break;
            }
            next = next.min(j.due - now);
        }
        match pick.and_then(|i| st.jobs.remove(i)) {
            Some(j) => {
                st.bytes = st.bytes.saturating_sub(j.body.len());
                st.inflight.push((j.task_id.clone(), j.hook_id.clone()));
                Ok(j)
            }
            None => Err(next),
        }
    }

    /// A worker: deliver, retry, trace; until the session closes and nothing waits.
    fn run(&self) {
        loop {
            let mut job = {
                let mut st = self.lock();
                loop {
                    match Self::ready(&mut st, Instant::now()) {
                        Ok(j) => break j,
                        Err(_) if st.stopped && st.jobs.is_empty() => return,
                        Err(wait) => {
                            st = self
                                .0
                                .cv
                                .wait_timeout(st, wait)
                                .map(|(g, _)| g)
                                .unwrap_or_else(|p| p.into_inner().0);
                        }
                    }
                }
            };
            job.attempts += 1;
            let job_key = (job.task_id.clone(), job.hook_id.clone());
            let outcome = self.deliver(&job);
            let mut again = None;
            match outcome {
                Ok(status) => self.trace(
                    "push_sent",
                    json!({"task_id": job.task_id, "config_id": job.hook_id, "url": job.shown,
                           "attempts": job.attempts, "status": status}),
                ),
                Err((why, retry)) if retry && job.attempts < ATTEMPTS => {
                    self.trace(
                        "push_retry",
                        json!({"task_id": job.task_id, "config_id": job.hook_id, "url": job.shown,
                               "attempts": job.attempts, "error": why}),
                    );
                    job.due = Instant::now() + BACKOFF * 2u32.pow(job.attempts - 1);
                    again = Some(job);
                }
                Err((why, _)) => self.failed(&job, &why),
            }
            let mut st = self.lock();
            st.inflight.retain(|k| *k != job_key);
            if let Some(j) = again {
                if st.stopped {
                    drop(st);
                    self.failed(&j, "the session ended before a retry");
                } else {
                    // Still first of its webhook's updates.
                    st.bytes += j.body.len();
                    st.jobs.push_front(j);
                }
            }
            self.0.cv.notify_all();
        }
    }

    /// One POST: the status of a 2xx, else why and whether another try may help.
    fn deliver(&self, j: &Job) -> Result<u16, (String, bool)> {
        let tls = if j.url.tls {
            match self.0.tls.get_or_init(ca_config) {
                Ok(c) => Some(c.clone()),
                Err(e) => return Err((e.clone(), false)),
            }
        } else {
            None
        };
        let opts = Options {
            connect_timeout: TIMEOUT,
            read_timeout: TIMEOUT,
            max_response: MAX_RESPONSE,
            tls,
            refuse_loopback: !j.loopback,
        };
        let headers: Vec<(&str, &str)> = j.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        match client::request_to("POST", &j.url, &headers, &j.body, &opts) {
            Ok(r) if (200..300).contains(&r.status) => Ok(r.status),
            Ok(r) => Err((
                format!("the webhook answered {}", r.status),
                r.status >= 500 || r.status == 408 || r.status == 429,
            )),
            Err(ClientError::TooLarge) => Err(("the webhook's answer is too large".into(), false)),
            Err(e) => Err((e.to_string(), true)),
        }
    }

    /// The session is closing: wait up to `grace` for the waiting updates to go out, then
    /// drop (and trace) whatever is left. The workers end once nothing waits.
    pub fn drain(&self, grace: Duration) {
        let until = Instant::now() + grace;
        let mut st = self.lock();
        while !st.jobs.is_empty() || !st.inflight.is_empty() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self
                .0
                .cv
                .wait_timeout(st, left.min(Duration::from_millis(100)))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        st.stopped = true;
        let left: Vec<Job> = st.jobs.drain(..).collect();
        st.bytes = 0;
        drop(st);
        self.0.cv.notify_all();
        for j in &left {
            self.failed(j, "the session ended before it was delivered");
        }
    }
}

/// The roots an `https://` webhook is checked against: `MURMUR_CA_FILE`, else the system's
/// bundle (as `mur push`/`pull` read them).
fn ca_config() -> Result<TlsConfig, String> {
    use crate::http::tls::{operator_config, CaError, MAX_CA_FILE};
    let read = |p: &std::path::Path| crate::registry::store::read_small(p, MAX_CA_FILE);
    operator_config(read).map_err(|e| match e {
        CaError::Bundle(m) => m,
        CaError::Named(m) => format!("MURMUR_CA_FILE {m}"),
        CaError::Missing => {
            "no CA bundle found to check the webhook's certificate (set MURMUR_CA_FILE)".into()
        }
    })
}

/// Whether a rule's host names loopback itself.
fn loopback_name(host: &str) -> bool {
    host == "localhost"
        || host == "[::1]"
        || host.parse::<std::net::Ipv4Addr>().is_ok_and(|a| a.is_loopback())
}

impl Hook {
    fn send(&self, task_id: &str, payload: &Value) {
        let Ok(url) = Url::parse_web(&self.config.url) else {
            return;
        };
        let rules = &self.pusher.0.rules;
        let loopback = netrule::endpoint(&self.config.url)
            .is_some_and(|d| rules.iter().any(|r| r.covers(&d) && loopback_name(&r.host)));
        let scheme = if url.tls { "https" } else { "http" };
        let path = url.path.split('?').next().unwrap_or("/");
        let shown = format!("{scheme}://{}{path}", url.authority());
        let mut headers = vec![("content-type".to_string(), "application/json".to_string())];
        if let Some(a) = &self.config.auth {
            if let Some(c) = &a.credentials {
                headers.push(("authorization".into(), format!("{} {c}", a.scheme)));
            }
        }
        if let Some(t) = &self.config.token {
            headers.push(("x-a2a-notification-token".into(), t.clone()));
        }
        self.pusher.enqueue(Job {
            task_id: task_id.to_string(),
            hook_id: self.id.clone(),
            url,
            shown,
            loopback,
            headers,
            body: serde_json::to_vec(payload).unwrap_or_default(),
            attempts: 0,
            due: Instant::now(),
        });
    }
}

/// The task as it was taken: 1.0 `{"task"}`, 0.3 the Task.
pub fn task(hooks: &[Hook], t: &Task) {
    for h in hooks {
        h.send(&t.id, &shapes::render_send_result(t, h.config.generation, None));
    }
}

/// A status change: 1.0 `{"statusUpdate"}`, 0.3 the Task as it stands.
pub fn status(hooks: &[Hook], t: &Task) {
    for h in hooks {
        let payload = match h.config.generation {
            Generation::V10 => shapes::render_status_update(t, Generation::V10),
            Generation::V03 => shapes::render_task(t, Generation::V03, None),
        };
        h.send(&t.id, &payload);
    }
}

/// An artifact: 1.0 `{"artifactUpdate"}`; 0.3 hears of it with the status that follows.
pub fn artifact(hooks: &[Hook], t: &Task, a: &Artifact) {
    for h in hooks.iter().filter(|h| h.config.generation == Generation::V10) {
        h.send(&t.id, &shapes::render_artifact_update(t, a, Generation::V10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(url: &str) -> Config {
        Config {
            id: None,
            url: url.into(),
            token: None,
            auth: None,
            generation: Generation::V10,
        }
    }

    #[test]
    fn only_an_allowed_destination_is_admitted() {
        let rules = ["http://127.0.0.1:9000", "https://hooks.example.com"]
            .iter()
            .map(|r| NetRule::parse(r).unwrap())
            .collect();
        let p = Pusher::start(rules, None).unwrap();
        assert_eq!(p.admit(&cfg("http://127.0.0.1:9000/hook?x=1")), Ok(()));
        assert_eq!(p.admit(&cfg("https://hooks.example.com/a")), Ok(()));
        for bad in [
            "http://127.0.0.1:9001/hook",
            "http://hooks.example.com/a",
            "https://u@hooks.example.com/a",
            "ftp://hooks.example.com/",
            "http://localhost:9000/hook",
        ] {
            assert!(p.admit(&cfg(bad)).is_err(), "{bad}");
        }
        assert!(
            loopback_name("127.0.0.1") && loopback_name("localhost") && !loopback_name("hooks.example.com")
        );
        p.drain(Duration::ZERO);
    }

    fn idle() -> Pusher {
        Pusher(Arc::new(Shared {
            rules: Vec::new(),
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
            trace: None,
            tls: OnceLock::new(),
        }))
    }

    fn job(task: &str, n: usize, len: usize) -> Job {
        Job {
            task_id: task.into(),
            hook_id: "h".into(),
            url: Url::parse("http://127.0.0.1:9/").unwrap(),
            shown: String::new(),
            loopback: true,
            headers: Vec::new(),
            body: vec![b'x'; len.max(1)],
            attempts: n as u32,
            due: Instant::now(),
        }
    }

    #[test]
    fn the_queue_drops_a_tasks_oldest_update_and_stays_under_its_byte_bound() {
        let p = idle();
        for n in 0..MAX_QUEUED_PER_TASK + 8 {
            p.enqueue(job("a", n, 1));
        }
        p.enqueue(job("b", 0, 1));
        {
            let st = p.lock();
            let a: Vec<u32> = st
                .jobs
                .iter()
                .filter(|j| j.task_id == "a")
                .map(|j| j.attempts)
                .collect();
            assert_eq!(a.len(), MAX_QUEUED_PER_TASK);
            assert_eq!(a[0], 8, "the oldest were dropped");
            assert_eq!(st.bytes, MAX_QUEUED_PER_TASK + 1);
        }
        p.enqueue(job("c", 0, MAX_QUEUED_BYTES - 4));
        let st = p.lock();
        assert!(st.bytes <= MAX_QUEUED_BYTES, "{}", st.bytes);
        assert_eq!(st.jobs.back().map(|j| j.task_id.as_str()), Some("c"));
        assert_eq!(st.bytes, st.jobs.iter().map(|j| j.body.len()).sum::<usize>());
    }

    #[test]
    fn a_webhooks_next_update_waits_for_the_one_under_way() {
        let p = idle();
        p.enqueue(job("a", 0, 1));
        p.enqueue(job("a", 1, 1));
        p.enqueue(job("b", 0, 1));
        let mut st = p.lock();
        let first = Pusher::ready(&mut st, Instant::now()).ok().unwrap();
        assert_eq!((first.task_id.as_str(), first.attempts), ("a", 0));
        let second = Pusher::ready(&mut st, Instant::now()).ok().unwrap();
        assert_eq!(second.task_id, "b", "a's second update waits for its first");
        assert!(Pusher::ready(&mut st, Instant::now()).is_err());
    }
}
