//! ListTasks over the task table: a 1.0 page, newest first, filtered, bounded in count and
//! in bytes, with an opaque token for the next page (the id of its first task).

use super::*;

impl Tasks {
    /// A 1.0 ListTasks page, newest first, of the tasks `viewer` may see.
    pub fn list(&self, req: &ListRequest, viewer: Viewer<'_>) -> Result<Value, String> {
        let inner = self.lock();
        // A page token is the id of the next page's first task (random, so it tells nothing
        // of how many tasks others sent); one whose task is gone or not the caller's is refused.
        let start = match &req.page_token {
            None => u64::MAX,
            Some(t) => inner
                .entries
                .get(t)
                .filter(|e| e.visible(viewer))
                .map(|e| e.seq)
                .ok_or_else(|| "pageToken is not one this door issued".to_string())?,
        };
        let matches = |t: &Task| {
            req.context_id.as_ref().is_none_or(|c| &t.context_id == c)
                && req.status.is_none_or(|s| t.state == s)
                && req.status_after_ms.is_none_or(|a| t.updated_ms as i64 >= a)
        };
        let mut total = 0usize;
        let mut page: Vec<&Task> = Vec::new();
        let mut next = String::new();
        let mut page_bytes = 0usize;
        // Newest first, the refused sends among the others.
        let mut all: Vec<(&u64, &String)> = inner.order.iter().chain(inner.refused.iter()).collect();
        all.sort_unstable_by(|a, b| b.0.cmp(a.0));
        for (_, id) in all {
            let Some(e) = inner.entries.get(id).filter(|e| e.visible(viewer)) else {
                continue;
            };
            if !matches(&e.task) {
                continue;
            }
            total += 1;
            if e.seq > start {
                continue;
            }
            // A page holds at most MAX_PAGE_BYTES of text (and at least one task).
            let room = page.is_empty() || page_bytes + e.bytes <= MAX_PAGE_BYTES;
            if next.is_empty() && page.len() < req.page_size as usize && room {
                page_bytes += e.bytes;
                page.push(&e.task);
            } else if next.is_empty() {
                next = e.task.id.clone();
            }
        }
        Ok(shapes::render_list(
            &page,
            req.history_length,
            req.include_artifacts,
            &next,
            req.page_size,
            total,
        ))
    }
}
