//! A task's push-notification configs: set (a new id, or the same id replaced), get, list
//! and delete, by a caller who may see the task (else `Task not found`, as for any other
//! lookup). Whether the destination is allowed is the door's check, made before.

use super::*;
use crate::a2a::push::{self as wire, Op};
use crate::a2a::rpc::INVALID_PARAMS;

impl Tasks {
    /// From now on tasks may have webhooks, delivered by `p`; set before the door serves.
    pub fn push_with(&self, p: super::super::push::Pusher) {
        let _ = self.pusher.set(p);
    }

    /// The push-notification config method `op` from `viewer`, answered in `gen`.
    pub fn push_config(&self, op: &Op, viewer: Viewer<'_>, gen: Generation) -> Result<Value, (i64, String)> {
        let pusher = self.pusher.get().ok_or((
            rpc::PUSH_NOT_SUPPORTED,
            "Push notifications are not supported".to_string(),
        ))?;
        let mut inner = self.lock();
        let task_id = op.task_id();
        let Some(e) = inner.entries.get_mut(task_id).filter(|e| e.visible(viewer)) else {
            return Err((TASK_NOT_FOUND, "Task not found".into()));
        };
        let shown = |h: &super::super::push::Hook| wire::render(task_id, &h.id, &h.config, gen);
        match op {
            Op::Set { config, .. } => match add_hook(e, pusher, config) {
                Some(hook) => Ok(shown(hook)),
                None => Err((
                    INVALID_PARAMS,
                    format!(
                        "Invalid params: a task has at most {} push notification configs",
                        super::super::push::MAX_HOOKS
                    ),
                )),
            },
            Op::Get { id, .. } => {
                let found = match id {
                    Some(id) => e.hooks.iter().find(|h| &h.id == id),
                    None => e.hooks.first(),
                };
                found
                    .map(shown)
                    .ok_or((TASK_NOT_FOUND, "Push notification config not found".into()))
            }
            Op::List { .. } => Ok(wire::render_list(e.hooks.iter().map(shown).collect(), gen)),
            Op::Delete { id, .. } => {
                e.hooks.retain(|h| Some(&h.id) != id.as_ref());
                Ok(Value::Null)
            }
        }
    }
}

/// `config` as one of `e`'s webhooks (replacing one of the same id; absent, an id is minted);
/// None when `e` has [`super::super::push::MAX_HOOKS`] others already.
pub(super) fn add_hook<'e>(
    e: &'e mut Entry,
    pusher: &super::super::push::Pusher,
    config: &wire::Config,
) -> Option<&'e super::super::push::Hook> {
    let id = config.id.clone().unwrap_or_else(|| id_of("psh"));
    e.hooks.retain(|h| h.id != id);
    if e.hooks.len() >= super::super::push::MAX_HOOKS {
        return None;
    }
    e.hooks.push(pusher.hook(id, config.clone()));
    e.hooks.last()
}
