//! Hooks: components of the `murmur:hook/hook@0.1.0` world (`wit/hook/hook.wit`), linked
//! once and instantiated afresh for every lifecycle call on their own store, with their own
//! grants, limiter and deadline, like tools and drivers.

use super::host::Host;
use super::invoke::guest_call;
use super::Outcome;
use crate::diag::Diagnostic;
use wasmtime::component::Component;
use wasmtime::Engine;

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit/hook",
        world: "murmur:hook/hook",
        exports: { default: async },
    });
}

pub use bindings::murmur::hook::types::{
    CallInfo, CompactionInfo, Event, InferenceInfo, Message, Output, TaskEndInfo, TaskInfo, ToolManifest,
    Usage,
};
use bindings::{Hook, HookPre};

/// A hook component linked against the host interfaces, ready to instantiate.
pub struct PreparedHook {
    engine: Engine,
    pre: HookPre<Host>,
}

impl PreparedHook {
    /// Link `component`; an import the host does not offer, or a missing
    /// `murmur:hook/lifecycle@0.1.0` export, is an error naming the hook.
    pub fn new(engine: &Engine, component: &Component, name: &str) -> Result<PreparedHook, String> {
        let instance_pre = super::link(
            engine,
            component,
            &format!("hook {name} does not fit the hook world"),
        )?;
        let pre = HookPre::new(instance_pre)
            .map_err(|e| format!("hook {name} does not export murmur:hook/lifecycle@0.1.0: {e:#}"))?;
        Ok(PreparedHook {
            engine: engine.clone(),
            pre,
        })
    }

    /// One lifecycle call on a fresh store holding `host`: the hook's answer (`Ok`/`Err` as
    /// it returned it), or the trap that ended it.
    pub fn call(
        &self,
        host: Host,
        deadline_secs: u64,
        event: &Event,
    ) -> Result<Result<Result<Output, String>, Outcome>, Diagnostic> {
        let mut store = super::store(&self.engine, host, deadline_secs);
        let call = async {
            let hook: Hook = self.pre.instantiate_async(&mut store).await?;
            hook.murmur_hook_lifecycle()
                .call_on_event(&mut store, event)
                .await
        };
        guest_call(&self.engine, deadline_secs, call)
    }
}
