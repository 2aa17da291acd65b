//! The task table's streams: how many are open (closed ones forgotten on the way), whether
//! another may open, and attaching one to a task that is still moving.

use super::*;

impl Tasks {
    /// Open streams right now (closed ones are forgotten on the way).
    pub(super) fn live_streams(inner: &mut Inner) -> usize {
        let mut n = 0;
        for id in inner.pending.iter().chain(inner.running.iter()) {
            if let Some(e) = inner.entries.get(id) {
                n += e.subs.iter().filter(|s| !s.stream.is_closed()).count();
            }
        }
        let ids: Vec<String> = inner
            .pending
            .iter()
            .chain(inner.running.iter())
            .cloned()
            .collect();
        for id in ids {
            if let Some(e) = inner.entries.get_mut(&id) {
                e.subs.retain(|s| !s.stream.is_closed());
            }
        }
        n
    }

    /// Whether another stream may open.
    pub fn stream_room(&self) -> bool {
        Self::live_streams(&mut self.lock()) < MAX_STREAMS
    }

    /// Attach a stream to a task that is still moving: the task first, then its events.
    pub fn subscribe(
        &self,
        task_id: &str,
        viewer: Viewer<'_>,
        stream: Stream,
        id: Value,
        gen: Generation,
    ) -> Result<(), (i64, String)> {
        let mut inner = self.lock();
        let Some(e) = inner.entries.get_mut(task_id).filter(|e| e.visible(viewer)) else {
            return Err((TASK_NOT_FOUND, "Task not found".into()));
        };
        if e.task.state.is_terminal() {
            return Err((
                UNSUPPORTED_OPERATION,
                format!(
                    "Task {task_id} is {}: there is nothing left to stream",
                    e.task.state.wire(Generation::V03)
                ),
            ));
        }
        stream.send(frame(&id, shapes::render_send_result(&e.task, gen, None)));
        e.subs.push(Sub {
            stream,
            id,
            gen,
            message: false,
        });
        Ok(())
    }
}
