//! How a task-table entry ends and leaves: settling a task (its streams told, its waiters
//! answered), attaching a watcher, and evicting what the table's bounds no longer hold (the
//! bytes an entry is counted for).

use super::*;

impl Tasks {
    /// Drop the oldest refused sends beyond [`MAX_REFUSED`], the first finished tasks beyond
    /// [`MAX_FINISHED`] (in the order they finished, so a task that just finished is the
    /// last to go), and then until `room` more bytes fit under the byte cap.
    pub(super) fn evict(&self, inner: &mut Inner, room: usize) {
        while inner.refused.len() > MAX_REFUSED {
            let Some((_, id)) = inner.refused.pop_first() else {
                break;
            };
            Self::forget(inner, &id);
        }
        while inner.done.len() > MAX_FINISHED || inner.bytes + room > MAX_TABLE_BYTES {
            if let Some((_, id)) = inner.done.pop_first() {
                if let Some(seq) = inner.entries.get(&id).map(|e| e.seq) {
                    inner.order.remove(&seq);
                }
                Self::forget(inner, &id);
            } else if let Some((_, id)) = inner.refused.pop_first() {
                Self::forget(inner, &id);
            } else {
                break;
            }
        }
    }

    fn forget(inner: &mut Inner, id: &str) {
        if let Some(e) = inner.entries.remove(id) {
            inner.bytes = inner.bytes.saturating_sub(e.bytes);
        }
    }
}

/// The bytes a task holds: its messages' text and its artifacts (a file's bytes and name).
pub(super) fn text_bytes(t: &Task) -> usize {
    let m = t.status_message.as_ref().map_or(0, |m| m.text.len());
    m + t.history.iter().map(|h| h.text.len()).sum::<usize>()
        + t.artifacts
            .iter()
            .map(|a| a.text.len() + a.part.as_ref().map_or(0, OutPart::weight))
            .sum::<usize>()
}

/// The bytes the parts hold (their content and names).
pub(super) fn part_bytes(parts: &[Part]) -> usize {
    parts
        .iter()
        .map(|p| p.bytes.len() + p.name.as_ref().map_or(0, String::len))
        .sum()
}

pub(super) fn agent_msg(text: &str) -> Msg {
    Msg {
        message_id: id_of("msg"),
        role: Role::Agent,
        text: text.to_string(),
    }
}

pub(super) fn attach(e: &mut Entry, watch: Watch) {
    match watch {
        Watch::None => {}
        Watch::Wait {
            ticket,
            id,
            gen,
            history,
            message,
        } => e.waiters.push(Waiter {
            ticket,
            id,
            gen,
            history,
            message,
        }),
        Watch::Stream {
            stream,
            id,
            gen,
            message,
        } => {
            if !message {
                stream.send(frame(&id, shapes::render_send_result(&e.task, gen, None)));
            }
            e.subs.push(Sub {
                stream,
                id,
                gen,
                message,
            });
        }
    }
}

/// Move `e` to a terminal `state` with its answer (the `response` text unless it is empty
/// and files came back, then one artifact per output file), tell its streams (the artifacts, then the final status, then the end;
/// a Message stream of a completed task its one Message) and answer its waiters (with a
/// Message when `a2a.answer: message` or the run chose one; a stream that already carries
/// the task's events keeps them).
pub(super) fn settle(
    e: &mut Entry,
    state: State,
    (text, files, run_chose_message): (Option<String>, Vec<OutPart>, bool),
    message: Option<Msg>,
    now_ms: u64,
) {
    let t = &mut e.task;
    t.state = state;
    t.updated_ms = now_ms;
    t.status_message = message;
    // An empty answer beside file artifacts is no artifact: the files are the answer.
    let text = text.filter(|a| !a.is_empty() || files.is_empty());
    if let Some(text) = text {
        t.artifacts.push(Artifact {
            artifact_id: format!("{}-response", t.id),
            name: RESPONSE_ARTIFACT.into(),
            text,
            part: None,
        });
    }
    for (i, f) in files.into_iter().enumerate() {
        t.artifacts.push(Artifact {
            artifact_id: format!("{}-file-{}", t.id, i + 1),
            name: f.name.clone(),
            text: String::new(),
            part: Some(f),
        });
    }
    e.bytes = text_bytes(t);
    for a in &t.artifacts {
        broadcast(&e.subs, |g| shapes::render_artifact_update(t, a, g));
        super::super::push::artifact(&e.hooks, t, a);
    }
    broadcast(&e.subs, |g| shapes::render_status_update(t, g));
    super::super::push::status(&e.hooks, t);
    let as_message = state == State::Completed;
    for s in e.subs.drain(..) {
        if s.message && as_message {
            s.stream
                .send(frame(&s.id, shapes::render_answer_message(t, s.gen)));
        } else if s.message {
            s.stream
                .send(frame(&s.id, shapes::render_send_result(t, s.gen, None)));
        }
        s.stream.end();
    }
    for w in e.waiters.drain(..) {
        let result = if (w.message || run_chose_message) && as_message {
            shapes::render_answer_message(t, w.gen)
        } else {
            shapes::render_send_result(t, w.gen, w.history)
        };
        w.ticket.complete(answer(&rpc::result_response(&w.id, result)));
    }
}
