//! Hooks: components of the hook world (`wit/hook/hook.wit`, `murmur:hook@0.2.0`, or the
//! frozen `0.1.0` in `wit/hook-0.1/`), linked once and instantiated afresh for every
//! lifecycle call on their own store, with their own grants, limiter and deadline, like
//! tools and drivers. Events are built in the current world's shapes; a 0.1.0 hook is given
//! each converted ([`super::hook_v1`]).

use super::hook_v1;
use super::host::Host;
use super::invoke::guest_call;
use super::Outcome;
use crate::diag::Diagnostic;
use wasmtime::component::Component;
use wasmtime::Engine;

pub use super::hook_world::{
    CallInfo, CompactionInfo, Event, InferenceInfo, Message, Output, SessionEndInfo, TaskEndInfo, TaskInfo,
    ToolManifest, Usage,
};
use super::hook_world::{Hook, HookPre};

/// The world version a hook was built against.
enum Linked {
    Current(HookPre<Host>),
    V1(hook_v1::HookPre<Host>),
}

/// A hook component linked against the host interfaces, ready to instantiate.
pub struct PreparedHook {
    engine: Engine,
    linked: Linked,
}

impl PreparedHook {
    /// Link `component`; an import the host does not offer, or no
    /// `murmur:hook/lifecycle` export of a version the runtime knows (0.2.0, 0.1.0), is an
    /// error naming the hook.
    pub fn new(engine: &Engine, component: &Component, name: &str) -> Result<PreparedHook, String> {
        let instance_pre = super::link(
            engine,
            component,
            &format!("hook {name} does not fit the hook world"),
        )?;
        let linked = match HookPre::new(instance_pre.clone()) {
            Ok(pre) => Linked::Current(pre),
            Err(current) => hook_v1::HookPre::new(instance_pre)
                .map(Linked::V1)
                .map_err(|old| {
                    format!(
                        "hook {name} does not export murmur:hook/lifecycle@0.2.0 ({current:#}) nor @0.1.0 ({old:#})"
                    )
                })?,
        };
        Ok(PreparedHook {
            engine: engine.clone(),
            linked,
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
        match &self.linked {
            Linked::Current(pre) => {
                let call = async {
                    let hook: Hook = pre.instantiate_async(&mut store).await?;
                    hook.murmur_hook_lifecycle()
                        .call_on_event(&mut store, event)
                        .await
                };
                guest_call(&self.engine, deadline_secs, call)
            }
            Linked::V1(pre) => {
                let old = hook_v1::event(event);
                let call = async {
                    let hook: hook_v1::Hook = pre.instantiate_async(&mut store).await?;
                    hook.murmur_hook_lifecycle().call_on_event(&mut store, &old).await
                };
                let answer = guest_call(&self.engine, deadline_secs, call)?;
                Ok(answer.map(|r| r.map(hook_v1::output)))
            }
        }
    }
}
