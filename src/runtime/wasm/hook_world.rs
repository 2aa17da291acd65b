//! The current hook world's bindings (`wit/hook/hook.wit`, `murmur:hook@0.2.0`): the shapes
//! events and outputs are built in, shared by the hook caller ([`super::hook`]) and the
//! conversions to the frozen 0.1.0 world ([`super::hook_v1`]).

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit/hook",
        world: "murmur:hook/hook",
        exports: { default: async },
    });
}

pub use bindings::murmur::hook::types::{
    CallInfo, CompactionInfo, Event, InferenceInfo, Message, Output, SessionEndInfo, TaskEndInfo, TaskInfo,
    ToolManifest, Usage,
};
pub use bindings::{Hook, HookPre};
