//! A message that names its `taskId`: the answer of a task waiting for input
//! ([`super::tasks::input`]), in both generations and each way of sending (blocking,
//! `returnImmediately`, streaming). A task the caller may not see is `Task not found`, one
//! not waiting is UnsupportedOperation, as for any other message on a task.

use super::*;

impl A2a {
    pub(super) fn follow_up(
        &self,
        ex: &Exchange<'_>,
        (call, caller): (&Call, &Caller),
        (task_id, s): (&str, &SendRequest),
        stream: bool,
    ) -> Reply {
        let (id, gen) = (&call.id, call.generation);
        let fail =
            |(code, m): (i64, String)| refuse(RpcError::new(id, code, m).answering(gen).on_stream(stream));
        if stream && !self.tasks.stream_room() {
            return too_many_streams(gen, id);
        }
        let who = (caller.viewer(), caller.owner());
        if stream {
            let watch = self.stream_watch(ex, (id, gen));
            return match self.tasks.give_input(task_id, who, s, watch, now_ms()) {
                Ok(_) => Reply::Stream(sse_head()),
                Err(e) => fail(e),
            };
        }
        if s.return_immediately {
            return match self.tasks.give_input(task_id, who, s, Watch::None, now_ms()) {
                Ok(t) => ok(id, shapes::render_send_result(&t, gen, s.history_length)),
                Err(e) => fail(e),
            };
        }
        let history = s.history_length;
        let watch = self.held_watch(ex, (id, gen), history, Arc::new(task_id.to_string().into()));
        match self.tasks.give_input(task_id, who, s, watch, now_ms()) {
            Ok(_) => Reply::Later,
            Err(e) => fail(e),
        }
    }
}
