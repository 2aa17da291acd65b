//! A running task that waits for its caller (`input-required`): the session thread asks
//! ([`Tasks::await_input`]): the task's status names what it waits for, its streams get that
//! status as their last event and end, a blocking send that waits on it is answered; then the
//! session thread sleeps on a condition variable (no turn, no model call, no child) until the
//! caller's follow-up message on the same task arrives ([`Tasks::give_input`], door thread),
//! the wait runs out, the task is canceled or the session is stopped. Only a caller that may
//! see the task may answer it (on an authenticated door, the credential that sent it).
//!
//! Lock order: the table's, then the waits'; the session thread never holds both while it
//! sleeps.

use super::*;

/// What a task waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A person's yes or no to a call: a data part `{"approve": bool}` or the word approve
    /// or deny.
    Approval,
    /// An answer to the model's question: the message's text (or its data, as JSON).
    Question,
}

/// The caller's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub text: String,
    pub data: Vec<Value>,
    /// The credential that answered (None on an open door).
    pub by: Option<String>,
    /// The answering message's `messageId`.
    pub message_id: String,
}

impl Reply {
    /// An approval's decision; None when the reply is neither yes nor no.
    pub fn decision(&self) -> Option<bool> {
        decision(&self.text, &self.data)
    }

    /// The answer as the model reads it: the text, else the data parts as JSON.
    pub fn answer(&self) -> String {
        match self.data.as_slice() {
            _ if !self.text.is_empty() => self.text.clone(),
            [] => String::new(),
            [one] => one.to_string(),
            many => Value::Array(many.to_vec()).to_string(),
        }
    }
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Awaited {
    Answered(Reply),
    TimedOut,
    /// The task was canceled (or is gone) while it waited.
    Canceled,
    /// The session was told to stop.
    Stopped,
}

/// An approval's decision from a reply: the first data part holding `approve` decides (it
/// must be a boolean); else the text, trimmed, one of the words approve or deny (any case).
pub fn decision(text: &str, data: &[Value]) -> Option<bool> {
    if let Some(v) = data.iter().find_map(|d| d.get("approve")) {
        return v.as_bool();
    }
    let word = text.trim().trim_end_matches(['.', '!']).to_ascii_lowercase();
    match word.as_str() {
        "approve" | "approved" => Some(true),
        "deny" | "denied" => Some(false),
        _ => None,
    }
}

/// The waits, by task id (a session runs one task at a time, so at most one).
#[derive(Default)]
pub struct Inputs {
    slots: Mutex<HashMap<String, Slot>>,
    cv: Condvar,
}

struct Slot {
    kind: Kind,
    reply: Option<Reply>,
}

/// How often a waiting session thread looks at its task's cancel flag and the stop signal.
const POLL: Duration = Duration::from_millis(100);

impl Inputs {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Tasks {
    /// The running task `id` waits up to `wait` for its caller's input of `kind`; `prompt`
    /// is its status message (and a history entry).
    pub fn await_input(
        &self,
        id: &str,
        (kind, prompt): (Kind, &str),
        wait: Duration,
        (cancel, stop): (&AtomicBool, &AtomicI32),
    ) -> Awaited {
        if !self.ask_input(id, kind, prompt) {
            return Awaited::Canceled;
        }
        let until = Instant::now() + wait;
        let mut slots = self.input.lock();
        loop {
            // A cancel wins over an answer that arrived beside it: nothing runs for a
            // canceled task.
            let canceled = cancel.load(Ordering::SeqCst);
            if let Some(reply) = slots
                .get_mut(id)
                .filter(|_| !canceled)
                .and_then(|s| s.reply.take())
            {
                slots.remove(id);
                return Awaited::Answered(reply);
            }
            let ended = if canceled {
                Some(Awaited::Canceled)
            } else if stop.load(Ordering::SeqCst) != 0 {
                Some(Awaited::Stopped)
            } else if Instant::now() >= until {
                Some(Awaited::TimedOut)
            } else {
                None
            };
            if let Some(end) = ended {
                slots.remove(id);
                drop(slots);
                self.resume(id);
                return end;
            }
            let left = until.saturating_duration_since(Instant::now()).min(POLL);
            slots = self
                .input
                .cv
                .wait_timeout(slots, left)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// Move `id` to input-required with `prompt`: its streams get the status and end, its
    /// blocking sends are answered; the wait is registered. False when the task is gone or
    /// already ended (canceled).
    fn ask_input(&self, id: &str, kind: Kind, prompt: &str) -> bool {
        let mut inner = self.lock();
        let Some(e) = inner.entries.get_mut(id).filter(|e| !e.task.state.is_terminal()) else {
            return false;
        };
        let before = e.bytes;
        let msg = agent_msg(prompt);
        let t = &mut e.task;
        t.state = State::InputRequired;
        t.updated_ms = crate::clock::now_ms();
        t.history.push(msg.clone());
        t.status_message = Some(msg);
        e.bytes = text_bytes(t);
        broadcast(&e.subs, |g| shapes::render_status_update(t, g));
        super::super::push::status(&e.hooks, t);
        for s in e.subs.drain(..) {
            // A stream that waits for a Message answer gets the waiting task, so its
            // caller sees what to answer.
            if s.message {
                s.stream
                    .send(frame(&s.id, shapes::render_send_result(t, s.gen, None)));
            }
            s.stream.end();
        }
        for w in e.waiters.drain(..) {
            let v = rpc::result_response(&w.id, shapes::render_send_result(t, w.gen, w.history));
            w.ticket.complete(answer(&v));
        }
        let after = e.bytes;
        inner.bytes = inner.bytes.saturating_sub(before) + after;
        self.input
            .lock()
            .insert(id.to_string(), Slot { kind, reply: None });
        true
    }

    /// A wait that ended without an answer: the task (unless it ended) is working again.
    fn resume(&self, id: &str) {
        let mut inner = self.lock();
        if let Some(e) = inner
            .entries
            .get_mut(id)
            .filter(|e| e.task.state == State::InputRequired)
        {
            let t = &mut e.task;
            t.state = State::Working;
            t.status_message = None;
            t.updated_ms = crate::clock::now_ms();
            broadcast(&e.subs, |g| shapes::render_status_update(t, g));
            super::super::push::status(&e.hooks, t);
        }
    }

    /// A follow-up message `req` on task `id` from `viewer` (`by`: its credential): the
    /// answer of the task's wait. The task is working again, `watch` attached to it, and
    /// returned; or an A2A error: not found (also for a caller who may not see it), not
    /// waiting, another context, or an approval's answer that is neither yes nor no.
    pub fn give_input(
        &self,
        id: &str,
        (viewer, by): (Viewer<'_>, Option<String>),
        req: &SendRequest,
        watch: Watch,
        now_ms: u64,
    ) -> Result<Task, (i64, String)> {
        let mut inner = self.lock();
        let Some(e) = inner.entries.get_mut(id).filter(|e| e.visible(viewer)) else {
            return Err((TASK_NOT_FOUND, "Task not found".into()));
        };
        let reply = Reply {
            text: req.text.clone(),
            data: req.data.clone(),
            by,
            message_id: req.message_id.clone(),
        };
        let said = reply.answer();
        answerable(&e.task, req, &said)?;
        let mut slots = self.input.lock();
        let Some(slot) = slots.get_mut(id).filter(|s| s.reply.is_none()) else {
            return Err(not_waiting());
        };
        if slot.kind == Kind::Approval && reply.decision().is_none() {
            return Err((
                rpc::INVALID_PARAMS,
                format!("Invalid params: task {id} waits for an approval: answer with a data part {{\"approve\": true}} or {{\"approve\": false}}, or the text approve or deny"),
            ));
        }
        slot.reply = Some(reply);
        drop(slots);
        self.input.cv.notify_all();
        let before = e.bytes;
        let t = &mut e.task;
        t.history.push(Msg {
            message_id: req.message_id.clone(),
            role: Role::User,
            text: said,
        });
        t.state = State::Working;
        t.status_message = None;
        t.updated_ms = now_ms;
        e.bytes = text_bytes(t);
        let t = &e.task;
        broadcast(&e.subs, |g| shapes::render_status_update(t, g));
        super::super::push::status(&e.hooks, t);
        attach(e, watch);
        // A config on the answering message joins the task's webhooks from here on.
        if let (Some(c), Some(p)) = (&req.push, self.pusher.get()) {
            super::push_configs::add_hook(e, p, c);
        }
        let (task, after) = (e.task.clone(), e.bytes);
        inner.bytes = inner.bytes.saturating_sub(before) + after;
        Ok(task)
    }
}

/// The refusal of a message on a task that takes no further messages.
fn not_waiting() -> (i64, String) {
    (
        UNSUPPORTED_OPERATION,
        "Unsupported operation: a task takes no further messages; send a new message without taskId"
            .to_string(),
    )
}

/// Whether `req` (whose answer reads `said`) may answer `task`: the task waits for input,
/// the message carries no file (none would land: refused, never dropped unseen), names the
/// task's context if any, and was not sent on the task already. An
/// answer is given once: a retried or replayed message (its id and its answer already in
/// the history) never answers the wait that follows the one it was sent for. (A new answer
/// under a reused id is taken: the A2A TCK reuses ids.)
fn answerable(task: &Task, req: &SendRequest, said: &str) -> Result<(), (i64, String)> {
    let id = &task.id;
    if task.state != State::InputRequired {
        return Err(not_waiting());
    }
    if req.parts.iter().any(|p| p.kind == crate::a2a::parts::Kind::File) {
        return Err((
            rpc::CONTENT_TYPE_NOT_SUPPORTED,
            format!("Content type not supported: an answer to task {id} is text or data; send files in a new task"),
        ));
    }
    if req.context_id.as_ref().is_some_and(|c| *c != task.context_id) {
        return Err((
            rpc::INVALID_PARAMS,
            format!("Invalid params: task {id} belongs to context {}", task.context_id),
        ));
    }
    if task
        .history
        .iter()
        .any(|m| m.message_id == req.message_id && m.text == said)
    {
        return Err((
            rpc::INVALID_PARAMS,
            format!(
                "Invalid params: this message was already sent on task {id}; each answer is a new message"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_approval_is_a_boolean_approve_or_the_word() {
        assert_eq!(decision("", &[json!({"approve": true})]), Some(true));
        assert_eq!(decision("approve", &[json!({"approve": false})]), Some(false));
        assert_eq!(decision("", &[json!({"approve": "yes"})]), None);
        assert_eq!(decision(" Approve.\n", &[]), Some(true));
        assert_eq!(decision("DENY", &[]), Some(false));
        assert_eq!(decision("approve it", &[]), None);
        assert_eq!(decision("", &[json!({"other": 1})]), None);
    }
}
