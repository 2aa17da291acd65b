//! The frozen hook world `murmur:hook@0.1.0` (`wit/hook-0.1/`): its bindings, and the
//! conversions between its shapes and the current world's, so hooks built against it keep
//! loading. An event loses what 0.1.0 has no field for (a task's `traceparent`, an
//! inference's model, how the session ended).

use super::hook_world as current;

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit/hook-0.1",
        world: "murmur:hook/hook",
        exports: { default: async },
    });
}

use bindings::murmur::hook::types as old;
pub use bindings::{Hook, HookPre};

fn message(m: &current::Message) -> old::Message {
    old::Message {
        role: m.role.clone(),
        content: m.content.clone(),
        tool_call_id: m.tool_call_id.clone(),
        is_error: m.is_error,
    }
}

fn message_back(m: old::Message) -> current::Message {
    current::Message {
        role: m.role,
        content: m.content,
        tool_call_id: m.tool_call_id,
        is_error: m.is_error,
    }
}

fn call(c: &current::CallInfo) -> old::CallInfo {
    old::CallInfo {
        turn: c.turn,
        name: c.name.clone(),
        input: c.input.clone(),
        outcome: c.outcome.clone(),
        exit_code: c.exit_code,
        duration_ms: c.duration_ms,
    }
}

/// `e` in 0.1.0's shapes.
pub fn event(e: &current::Event) -> old::Event {
    use current::Event as E;
    match e {
        E::Stage(allow) => old::Event::Stage(allow.clone()),
        E::SessionStart => old::Event::SessionStart,
        E::TaskStart(t) => old::Event::TaskStart(old::TaskInfo {
            task_id: t.task_id.clone(),
            context_id: t.context_id.clone(),
            source: t.source.clone(),
            input_bytes: t.input_bytes,
        }),
        E::Inference(i) => old::Event::Inference(old::InferenceInfo {
            turn: i.turn,
            decision: i.decision.clone(),
            usage: old::Usage {
                input_tokens: i.usage.input_tokens,
                output_tokens: i.usage.output_tokens,
            },
        }),
        E::ToolCall(c) => old::Event::ToolCall(call(c)),
        E::Shell(c) => old::Event::Shell(call(c)),
        E::Compaction(c) => old::Event::Compaction(old::CompactionInfo {
            messages: c.messages.iter().map(message).collect(),
            session_tokens: c.session_tokens,
            threshold: c.threshold,
            model: c.model.clone(),
            system_prompt: c.system_prompt.clone(),
        }),
        E::TaskEnd(t) => old::Event::TaskEnd(old::TaskEndInfo {
            task_id: t.task_id.clone(),
            exit_status: t.exit_status.clone(),
            turns: t.turns,
            result_text: t.result_text.clone(),
        }),
        E::SessionEnd(_) => old::Event::SessionEnd,
    }
}

/// A 0.1.0 hook's output in the current world's shapes (nothing is lost: the outputs did
/// not change).
pub fn output(o: old::Output) -> current::Output {
    match o {
        old::Output::None => current::Output::None,
        old::Output::ReplaceContext(list) => {
            current::Output::ReplaceContext(list.into_iter().map(message_back).collect())
        }
        old::Output::WriteManifests(list) => current::Output::WriteManifests(
            list.into_iter()
                .map(|t| current::ToolManifest {
                    binary: t.binary,
                    manifest: t.manifest,
                })
                .collect(),
        ),
        old::Output::ReopenTask(feedback) => current::Output::ReopenTask(feedback),
    }
}
