//! The door's task table: every task the capsule was given (over A2A or from its `task.md`),
//! the queue of accepted tasks, who waits on each (a blocking send, streams), and the
//! lifecycle's acceptance rule. The door thread submits, reads and cancels; the session
//! thread takes the next task and reports its end (and, in `tasks_input.rs`, has it wait
//! for its caller's input, which the door thread delivers). One mutex, held only to update the
//! table and hand rendered bytes to the HTTP loop's channel: nothing here blocks on I/O.
//!
//! Bounded: at most [`MAX_QUEUE`] waiting tasks, [`MAX_STREAMS`] open streams, and finished
//! tasks kept for `tasks/get` up to [`MAX_FINISHED`] or [`MAX_TABLE_BYTES`] of text (oldest
//! dropped first).

pub use super::wire::{answer, frame};
use super::wire::{framed, id_of};
use crate::a2a::params::{ListRequest, SendRequest};
use crate::a2a::parts::{Kind, Part};
use crate::a2a::rpc::{self, TASK_NOT_CANCELABLE, TASK_NOT_FOUND, UNSUPPORTED_OPERATION};
use crate::a2a::shapes::{self, Artifact, Msg, OutPart, Role, State, Task, RESPONSE_ARTIFACT};
use crate::a2a::Generation;
use crate::http::{Stream, Ticket};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Finished tasks kept for `tasks/get` (oldest dropped beyond it).
pub const MAX_FINISHED: usize = 1000;
/// Refused sends kept for `tasks/get`, apart from the finished tasks (oldest dropped).
pub const MAX_REFUSED: usize = 256;
/// Text held by the table (messages, answers), bytes; finished tasks are dropped to stay
/// under it and a send that would pass it is rejected as busy.
pub const MAX_TABLE_BYTES: usize = 64 << 20;
/// The most waiting tasks, whatever `lifecycle.queue_depth` says.
pub const MAX_QUEUE: usize = 1024;
/// The most open streams (`message/stream`, `tasks/resubscribe` and their 1.0 names).
pub const MAX_STREAMS: usize = 1024;
/// The most task text one ListTasks page carries, bytes (the rest is on later pages).
pub const MAX_PAGE_BYTES: usize = 4 << 20;
/// The longest answer taken from `out/result.txt` into the `response` artifact, bytes.
pub const MAX_RESULT_BYTES: u64 = 1 << 20;

/// The status message of a send refused while a task runs or waits.
pub const BUSY: &str = "task rejected: capsule is busy";
/// ... of a task that was still waiting when the session ended.
pub const ENDED: &str = "task rejected: the session ended before this task started";
/// ... of a send after the capsule has taken its last task.
pub const CLOSING: &str = "task rejected: the capsule is closing";

/// `lifecycle.task_acceptance`, with the queue's depth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Acceptance {
    None,
    Single,
    Queue(usize),
}

/// Where a task came from: `x-murmur-task-origin`, `x-murmur-task-trust`, `traceparent`
/// (recorded, never enforced), and on an authenticated door the credential that sent it
/// (enforced: only that credential sees the task).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Origin {
    pub origin: String,
    pub trust: String,
    pub traceparent: Option<String>,
    /// The door credential that sent the task; None on an unauthenticated door, and for a
    /// completion (admitted by its delegation id), which no credential sees.
    pub owner: Option<String>,
}

impl Origin {
    /// The operator's own `task.md`.
    pub fn file() -> Origin {
        Origin {
            origin: "user".into(),
            trust: "trusted".into(),
            traceparent: None,
            owner: None,
        }
    }
}

/// Who asks the table about a task: `None` on an unauthenticated door (every task is
/// visible), else the caller's credential (only the tasks it sent).
pub type Viewer<'a> = Option<&'a str>;

/// A task the session is to run.
#[derive(Debug, Clone)]
pub struct Taken {
    pub id: String,
    pub context_id: String,
    pub message_id: Option<String>,
    pub text: String,
    /// `file` or `a2a`.
    pub source: &'static str,
    pub origin: Origin,
    /// Set when the task is canceled: the loop stops at its next safe point.
    pub cancel: Arc<AtomicBool>,
    /// The message's file and data parts, to land in the task's input directory.
    pub files: Vec<Part>,
}

/// What [`Tasks::next`] found.
#[derive(Debug)]
pub enum Next {
    Task(Box<Taken>),
    /// The wait ran out with nothing to do.
    Idle,
    /// The session was told to stop.
    Stopped,
}

/// How a task ended, as the session reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Completed, Failed or Canceled.
    pub state: State,
    /// The `response` artifact's text (`out/result.txt`).
    pub answer: Option<String>,
    /// The status message (why it failed).
    pub message: Option<String>,
    /// Files the task wrote to its output directories, each an artifact after `response`.
    pub files: Vec<OutPart>,
    /// The run chose a Message for its answer (a component's `out/message.txt`): a send
    /// that waits gets one whatever `a2a.answer` says.
    pub as_message: bool,
}

/// Who hears of a task's progress.
pub enum Watch {
    None,
    /// A blocking send: answered when the task settles.
    Wait {
        ticket: Ticket,
        id: Value,
        gen: Generation,
        history: Option<u32>,
        /// A completed task is answered with a Message (`a2a.answer: message`).
        message: bool,
    },
    /// A stream: every event, then the end; with `message`, a completed task's one
    /// Message and the end (A2A: a Message stream holds exactly one Message).
    Stream {
        stream: Stream,
        id: Value,
        gen: Generation,
        message: bool,
    },
}

struct Sub {
    stream: Stream,
    id: Value,
    gen: Generation,
    /// Hears nothing until the task settles: a Message if it completed, else the task.
    message: bool,
}

struct Waiter {
    ticket: Ticket,
    id: Value,
    gen: Generation,
    history: Option<u32>,
    message: bool,
}

/// What a waiting task holds until the session takes it.
struct Run {
    text: String,
    message_id: Option<String>,
    source: &'static str,
    origin: Origin,
    files: Vec<Part>,
}

struct Entry {
    task: Task,
    seq: u64,
    subs: Vec<Sub>,
    waiters: Vec<Waiter>,
    cancel: Arc<AtomicBool>,
    /// Until the session takes it: the text, the files and where they came from.
    run: Option<Run>,
    bytes: usize,
    /// The session's own task (`task.md`): it holds the slot, but no client sees it.
    file: bool,
    /// Its place among the finished (see `Inner::done`).
    done: Option<u64>,
    /// The credential that sent it (see [`Origin::owner`]).
    owner: Option<String>,
    /// Sent through an authenticated door (see [`Entry::visible`]).
    guarded: bool,
    /// The webhooks its updates are pushed to (at most [`super::push::MAX_HOOKS`]).
    hooks: Vec<super::push::Hook>,
}

impl Entry {
    /// Whether `viewer` may see this entry: never the session's own task; on an
    /// authenticated door only the credential that sent it.
    fn visible(&self, viewer: Viewer<'_>) -> bool {
        !self.file && (!self.guarded || viewer.is_some_and(|v| self.owner.as_deref() == Some(v)))
    }
}

struct Inner {
    acceptance: Acceptance,
    entries: HashMap<String, Entry>,
    /// Ids in creation order.
    order: BTreeMap<u64, String>,
    /// Sends refused at once (rejected as busy or closing), by seq: kept apart, at most
    /// [`MAX_REFUSED`], so a flood of them neither flushes real answers out of the table nor
    /// costs a scan.
    refused: BTreeMap<u64, String>,
    pending: VecDeque<String>,
    running: Option<String>,
    accepted: u64,
    /// The session has taken its last task: every send is rejected with this.
    closed: Option<&'static str>,
    seq: u64,
    bytes: usize,
    /// Finished tasks (not refused sends) in the order they finished, by a finish count: the
    /// first is the one to drop.
    done: BTreeMap<u64, String>,
    done_seq: u64,
}

impl Inner {
    /// `id` just reached a terminal state (not a refusal): it joins the finished, last.
    fn finished(&mut self, id: &str) {
        self.done_seq += 1;
        let n = self.done_seq;
        if let Some(e) = self.entries.get_mut(id) {
            e.done = Some(n);
        }
        self.done.insert(n, id.to_string());
    }
}

/// The next waiting task by lane: the first of the foreground (a person, a peer, an
/// event), else the first of the background (`completion`): FIFO within each lane.
fn take_by_lane(inner: &mut Inner) -> Option<String> {
    let foreground = inner.pending.iter().position(|id| {
        inner
            .entries
            .get(id)
            .and_then(|e| e.run.as_ref())
            .is_none_or(|r| r.origin.origin != "completion")
    });
    inner.pending.remove(foreground.unwrap_or(0))
}

/// What a cancel of a running task also does, given its id.
pub type OnCancel = Box<dyn Fn(&str) + Send>;

/// What runs after the table's counts changed (a task taken, canceled, finished): the
/// session's status file is rewritten.
pub type OnChange = Box<dyn Fn() + Send>;

/// The table; shared (`Arc`) by the door and the session.
pub struct Tasks {
    inner: Mutex<Inner>,
    wake: Condvar,
    generation: AtomicU64,
    on_cancel: Mutex<Option<OnCancel>>,
    on_change: Mutex<Option<OnChange>>,
    /// Delegations started and not yet reported (their completions are tasks to come).
    held: AtomicU64,
    /// The delegation ids this session issued, each of whose completions is taken once.
    pub completions: super::completions::Issued,
    /// Whether any delegation was started in this session.
    delegated: AtomicBool,
    /// The door is authenticated: each task is its sender's alone.
    guarded: AtomicBool,
    /// The running task's wait for its caller's input, if it waits (see [`input`]).
    input: input::Inputs,
    /// The door's push deliveries, when the manifest allows a webhook.
    pusher: std::sync::OnceLock<super::push::Pusher>,
}

/// Send one event to every subscriber still listening, its JSON rendered once per
/// protocol generation and each frame built only when its stream has room for it.
fn broadcast(subs: &[Sub], render: impl Fn(Generation) -> Value) {
    let mut cache: [Option<Vec<u8>>; 2] = [None, None];
    for s in subs.iter().filter(|s| !s.stream.is_closed() && !s.message) {
        let slot = usize::from(s.gen == Generation::V10);
        let result = cache[slot]
            .get_or_insert_with(|| serde_json::to_vec(&render(s.gen)).unwrap_or_else(|_| b"null".to_vec()));
        let id = serde_json::to_vec(&s.id).unwrap_or_else(|_| b"null".to_vec());
        let (len, build) = framed(&id, result);
        s.stream.send_with(len, build);
    }
}

impl Tasks {
    pub fn new(acceptance: Acceptance) -> Arc<Tasks> {
        let acceptance = match acceptance {
            Acceptance::Queue(d) => Acceptance::Queue(d.clamp(1, MAX_QUEUE)),
            a => a,
        };
        Arc::new(Tasks {
            inner: Mutex::new(Inner {
                acceptance,
                entries: HashMap::new(),
                order: BTreeMap::new(),
                refused: BTreeMap::new(),
                pending: VecDeque::new(),
                running: None,
                accepted: 0,
                closed: None,
                seq: 0,
                bytes: 0,
                done: BTreeMap::new(),
                done_seq: 0,
            }),
            wake: Condvar::new(),
            held: AtomicU64::new(0),
            completions: super::completions::Issued::default(),
            delegated: AtomicBool::new(false),
            guarded: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            on_cancel: Mutex::new(None),
            on_change: Mutex::new(None),
            input: input::Inputs::default(),
            pusher: std::sync::OnceLock::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many tasks reached a terminal state in this process (the resource plane's
    /// generation).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    pub fn acceptance(&self) -> Acceptance {
        self.lock().acceptance
    }

    /// `(open, total)`: the tasks waiting or running, and every task accepted in this
    /// process (for the session's status file, which `mur ps` reads).
    pub fn counts(&self) -> (u64, u64) {
        let inner = self.lock();
        let open = inner.pending.len() as u64 + u64::from(inner.running.is_some());
        (open, inner.accepted)
    }

    /// What runs when a running task is canceled (kill its contained children), besides
    /// setting its cancel flag.
    pub fn on_cancel(&self, f: OnCancel) {
        *self.on_cancel.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }

    /// What runs after the counts changed (outside the table's lock).
    pub fn on_change(&self, f: OnChange) {
        *self.on_change.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
    }

    fn changed(&self) {
        if let Some(f) = self.on_change.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            f();
        }
    }

    fn insert(&self, inner: &mut Inner, task: Task, run: Option<Run>, who: (Option<String>, bool)) {
        inner.seq += 1;
        // A waiting task holds its text twice: in its history and to run.
        let bytes = text_bytes(&task) + run.as_ref().map_or(0, |r| r.text.len() + part_bytes(&r.files));
        inner.bytes += bytes;
        let id = task.id.clone();
        if task.state == State::Rejected {
            inner.refused.insert(inner.seq, id.clone());
        } else {
            inner.order.insert(inner.seq, id.clone());
        }
        inner.entries.insert(
            id,
            Entry {
                task,
                seq: inner.seq,
                subs: Vec::new(),
                waiters: Vec::new(),
                cancel: Arc::new(AtomicBool::new(false)),
                run,
                bytes,
                file: false,
                done: None,
                owner: who.0,
                guarded: who.1,
                hooks: Vec::new(),
            },
        );
    }

    /// Register the session's own task (`task.md`) as running, before the door serves: in
    /// `single` it is the capsule's one task.
    pub fn start_file(&self, text: &str, now_ms: u64) -> Taken {
        let mut inner = self.lock();
        let (id, context_id) = (id_of("tsk"), id_of("ctx"));
        let task = Task {
            id: id.clone(),
            context_id: context_id.clone(),
            state: State::Working,
            status_message: None,
            artifacts: Vec::new(),
            history: vec![Msg {
                message_id: id_of("msg"),
                role: Role::User,
                text: text.to_string(),
            }],
            created_ms: now_ms,
            updated_ms: now_ms,
        };
        self.insert(&mut inner, task, None, (None, false));
        inner.accepted += 1;
        inner.running = Some(id.clone());
        let cancel = match inner.entries.get_mut(&id) {
            Some(e) => {
                e.file = true;
                e.cancel.clone()
            }
            None => Arc::default(),
        };
        Taken {
            id,
            context_id,
            message_id: None,
            text: text.to_string(),
            source: "file",
            origin: Origin::file(),
            cancel,
            files: Vec::new(),
        }
    }

    /// Why a new task cannot be accepted now, if it cannot.
    fn refusal(&self, inner: &Inner) -> Option<&'static str> {
        if let Some(why) = inner.closed {
            return Some(why);
        }
        let busy = inner.running.is_some() || !inner.pending.is_empty();
        match inner.acceptance {
            Acceptance::None => Some(CLOSING),
            Acceptance::Single if inner.accepted > 0 && !busy => Some(CLOSING),
            Acceptance::Single if inner.accepted > 0 => Some(BUSY),
            Acceptance::Queue(depth) if inner.pending.len() >= depth => Some(BUSY),
            _ => None,
        }
    }

    /// A new task from `req`: accepted (submitted, queued) or rejected (kept, terminal).
    /// `watch` is attached before anyone else can see the task, so it misses no event; a
    /// stream gets the task as its first event at once. The task as it stands is returned.
    pub fn submit(&self, req: &SendRequest, origin: Origin, watch: Watch, now_ms: u64) -> Task {
        let mut inner = self.lock();
        let who = (origin.owner.clone(), self.guarded.load(Ordering::Relaxed));
        // Room is made only for a send that will be taken: a refused one evicts nothing.
        let files: Vec<Part> = req
            .parts
            .iter()
            .filter(|p| p.kind != Kind::Text)
            .cloned()
            .collect();
        let need = 2 * req.text.len() + part_bytes(&files);
        let refusal = self.refusal(&inner).or_else(|| {
            self.evict(&mut inner, need);
            (inner.bytes + need > MAX_TABLE_BYTES).then_some(BUSY)
        });
        let id = id_of("tsk");
        let context_id = req.context_id.clone().unwrap_or_else(|| id_of("ctx"));
        let mut task = Task {
            id: id.clone(),
            context_id,
            state: State::Submitted,
            status_message: None,
            artifacts: Vec::new(),
            history: vec![Msg {
                message_id: req.message_id.clone(),
                role: Role::User,
                text: req.text.clone(),
            }],
            created_ms: now_ms,
            updated_ms: now_ms,
        };
        if let Some(why) = refusal {
            task.state = State::Rejected;
            task.history.clear();
            task.status_message = Some(agent_msg(why));
            self.insert(&mut inner, task.clone(), None, who);
            self.generation.fetch_add(1, Ordering::SeqCst);
            self.evict(&mut inner, 0);
            if let Watch::Stream { stream, id, gen, .. } = watch {
                stream.send(frame(&id, shapes::render_send_result(&task, gen, None)));
                stream.send(frame(&id, shapes::render_status_update(&task, gen)));
                stream.end();
            }
            return task;
        }
        let run = Some(Run {
            text: req.text.clone(),
            message_id: Some(req.message_id.clone()),
            source: "a2a",
            origin,
            files,
        });
        self.insert(&mut inner, task.clone(), run, who);
        inner.accepted += 1;
        inner.pending.push_back(id.clone());
        if let Some(e) = inner.entries.get_mut(&id) {
            attach(e, watch);
            if let (Some(c), Some(p)) = (&req.push, self.pusher.get()) {
                push_configs::add_hook(e, p, c);
                super::push::task(&e.hooks, &e.task);
            }
        }
        drop(inner);
        self.wake.notify_all();
        self.changed();
        task
    }

    /// The task `id`, as `viewer` may see it.
    pub fn get(&self, id: &str, viewer: Viewer<'_>) -> Option<Task> {
        self.lock()
            .entries
            .get(id)
            .filter(|e| e.visible(viewer))
            .map(|e| e.task.clone())
    }

    /// The task `id` as its sender sees it, whoever that was: for the answer of the request
    /// that just created it (a blocking send), never for a lookup a client names.
    pub fn sent(&self, id: &str) -> Option<Task> {
        self.lock()
            .entries
            .get(id)
            .filter(|e| !e.file)
            .map(|e| e.task.clone())
    }

    /// From now on every task sent is the sending credential's alone (an authenticated
    /// door); set before the door serves.
    pub fn guard(&self) {
        self.guarded.store(true, Ordering::Relaxed);
    }

    /// Cancel `id`: a waiting task is dropped from the queue, a running one has its flag set
    /// (the loop stops at its next safe point) and its children killed. Either is
    /// `canceled` at once. A finished task is not cancelable.
    pub fn cancel(&self, id: &str, viewer: Viewer<'_>, now_ms: u64) -> Result<Task, (i64, String)> {
        let mut inner = self.lock();
        let running = inner.running.as_deref() == Some(id);
        let Some(e) = inner.entries.get_mut(id).filter(|e| e.visible(viewer)) else {
            return Err((TASK_NOT_FOUND, "Task not found".into()));
        };
        if e.task.state.is_terminal() {
            return Err((
                TASK_NOT_CANCELABLE,
                format!(
                    "Task cannot be canceled: it is {}",
                    e.task.state.wire(Generation::V03)
                ),
            ));
        }
        e.cancel.store(true, Ordering::SeqCst);
        e.run = None;
        let before = e.bytes;
        settle(
            e,
            State::Canceled,
            (None, Vec::new(), false),
            Some(agent_msg("canceled by request")),
            now_ms,
        );
        let (task, after) = (e.task.clone(), e.bytes);
        inner.bytes = inner.bytes.saturating_sub(before) + after;
        inner.pending.retain(|p| p != id);
        inner.finished(id);
        self.generation.fetch_add(1, Ordering::SeqCst);
        drop(inner);
        if running {
            if let Some(f) = self.on_cancel.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                f(id);
            }
        }
        self.changed();
        Ok(task)
    }

    /// The session's next task: the first waiting one, now or within `wait` (`None`:
    /// forever), unless `stop` is set (a signal) first.
    pub fn next(&self, wait: Option<Duration>, stop: &AtomicI32, now_ms: impl Fn() -> u64) -> Next {
        let until = wait.map(|w| Instant::now() + w);
        let mut inner = self.lock();
        loop {
            if stop.load(Ordering::SeqCst) != 0 {
                return Next::Stopped;
            }
            while let Some(id) = take_by_lane(&mut inner) {
                let Some(e) = inner.entries.get_mut(&id) else {
                    continue;
                };
                let Some(run) = e.run.take() else {
                    continue;
                };
                e.task.state = State::Working;
                e.task.updated_ms = now_ms();
                let task = &e.task;
                broadcast(&e.subs, |g| shapes::render_status_update(task, g));
                super::push::status(&e.hooks, task);
                let taken = Taken {
                    id: id.clone(),
                    context_id: e.task.context_id.clone(),
                    message_id: run.message_id,
                    text: run.text,
                    source: run.source,
                    origin: run.origin,
                    cancel: e.cancel.clone(),
                    files: run.files,
                };
                inner.running = Some(id);
                return Next::Task(Box::new(taken));
            }
            // While a delegation is out its completion is a task to come: no idle end.
            let left = match until {
                _ if self.held.load(Ordering::SeqCst) > 0 => Duration::from_secs(3600),
                None => Duration::from_secs(3600),
                Some(u) => match u.checked_duration_since(Instant::now()) {
                    Some(d) if !d.is_zero() => d,
                    _ => return Next::Idle,
                },
            };
            inner = self
                .wake
                .wait_timeout(inner, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// A delegation started: until [`Tasks::release`], waiting for tasks never ends idle.
    pub fn hold(&self) {
        self.delegated.store(true, Ordering::SeqCst);
        self.held.fetch_add(1, Ordering::SeqCst);
    }

    /// Whether this session has delegated: under `queue` + `exit` it then ends as soon as
    /// no delegation is out and nothing waits, rather than after an idle wait.
    pub fn delegated(&self) -> bool {
        self.delegated.load(Ordering::SeqCst)
    }

    /// A delegation was reported (its completion, if any, is already submitted).
    pub fn release(&self) {
        let _ = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
        self.wake();
    }

    /// Wake a session waiting in [`Tasks::next`] (a signal arrived).
    pub fn wake(&self) {
        // Under the lock: a session between its stop check and its wait cannot miss it.
        let _held = self.lock();
        self.wake.notify_all();
    }

    /// The running task `id` ended. A task already canceled stays canceled.
    pub fn finish(&self, id: &str, outcome: Outcome, now_ms: u64) {
        let mut inner = self.lock();
        if inner.running.as_deref() == Some(id) {
            inner.running = None;
        }
        let Some(e) = inner.entries.get_mut(id) else {
            return;
        };
        if e.task.state.is_terminal() {
            return;
        }
        let before = e.bytes;
        settle(
            e,
            outcome.state,
            (outcome.answer, outcome.files, outcome.as_message),
            outcome.message.map(|m| agent_msg(&m)),
            now_ms,
        );
        let after = e.bytes;
        inner.bytes = inner.bytes.saturating_sub(before) + after;
        inner.finished(id);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.evict(&mut inner, 0);
        drop(inner);
        self.changed();
    }

    /// The session takes no more tasks: waiting ones are rejected, and so is every later send.
    pub fn close(&self, now_ms: u64) {
        let mut inner = self.lock();
        if inner.closed.is_none() {
            inner.closed = Some(CLOSING);
        }
        let pending: Vec<String> = inner.pending.drain(..).collect();
        for id in pending {
            if let Some(e) = inner.entries.get_mut(&id) {
                e.run = None;
                let before = e.bytes;
                settle(
                    e,
                    State::Rejected,
                    (None, Vec::new(), false),
                    Some(agent_msg(ENDED)),
                    now_ms,
                );
                let after = e.bytes;
                inner.bytes = inner.bytes.saturating_sub(before) + after;
                inner.finished(&id);
                self.generation.fetch_add(1, Ordering::SeqCst);
            }
        }
        drop(inner);
        self.wake.notify_all();
    }
}

#[path = "tasks_list.rs"]
mod list;

#[path = "tasks_streams.rs"]
mod streams;

#[path = "tasks_settle.rs"]
mod settle;
use settle::{agent_msg, attach, part_bytes, settle, text_bytes};

#[path = "tasks_input.rs"]
pub mod input;

#[path = "tasks_push.rs"]
mod push_configs;

#[cfg(test)]
#[path = "tasks_tests.rs"]
mod tests;
