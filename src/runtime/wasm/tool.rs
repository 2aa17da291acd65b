//! Tools and drivers: components exporting `murmur:tool/run@0.1.0`, linked once
//! (`PreparedTool`) and instantiated afresh for every call, each call on its own store with
//! its own grants, limiter and deadline.

use super::host::Host;
use super::invoke::guest_call;
use super::{Outcome, TrapKind};
use crate::diag::Diagnostic;
use wasmtime::component::Component;
use wasmtime::Engine;

mod bindings {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "murmur:capsule/tool",
        exports: { default: async },
    });
}

use bindings::exports::murmur::tool::run::{Status, ToolInput};
use bindings::{Tool, ToolPre};

/// How a tool call came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolReply {
    pub status: ToolStatus,
    pub summary: Option<String>,
    pub data: Option<String>,
    pub data_path: Option<String>,
    pub truncated: bool,
    pub metadata: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolStatus {
    Passed,
    Failed,
    Error,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Passed => "passed",
            ToolStatus::Failed => "failed",
            ToolStatus::Error => "error",
        }
    }
}

impl ToolReply {
    /// A metadata value by key (the first).
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A tool component linked against the host interfaces, ready to instantiate.
pub struct PreparedTool {
    engine: Engine,
    pre: ToolPre<Host>,
}

impl PreparedTool {
    /// Link `component`; an import the host does not offer, or a missing
    /// `murmur:tool/run@0.1.0` export, is an error naming the artifact.
    pub fn new(engine: &Engine, component: &Component, name: &str) -> Result<PreparedTool, String> {
        let instance_pre = super::link(engine, component, &format!("{name} does not fit the tool world"))?;
        let pre = ToolPre::new(instance_pre)
            .map_err(|e| format!("{name} does not export murmur:tool/run@0.1.0: {e:#}"))?;
        Ok(PreparedTool {
            engine: engine.clone(),
            pre,
        })
    }

    /// One call of `run` with `data`, on a fresh store holding `host`; a trap (deadline,
    /// resource limit, panic) is the `Err` outcome.
    pub fn call(
        &self,
        host: Host,
        deadline_secs: u64,
        data: String,
    ) -> Result<Result<ToolReply, Outcome>, Diagnostic> {
        let mut store = super::store(&self.engine, host, deadline_secs);
        let input = ToolInput {
            data: Some(data),
            log_path: None,
        };
        let call = async {
            let tool: Tool = self.pre.instantiate_async(&mut store).await?;
            tool.murmur_tool_run().call_run(&mut store, &input).await
        };
        Ok(guest_call(&self.engine, deadline_secs, call)?.map(|r| ToolReply {
            status: match r.status {
                Status::Passed => ToolStatus::Passed,
                Status::Failed => ToolStatus::Failed,
                Status::Error => ToolStatus::Error,
            },
            summary: r.summary,
            data: r.data,
            data_path: r.data_path,
            truncated: r.truncated,
            metadata: r.metadata,
        }))
    }
}

/// A trap outcome as one line: `<kind>: <message>`.
pub fn trap_line(o: &Outcome) -> String {
    match o {
        Outcome::Returned => "returned".into(),
        Outcome::Trapped { kind, message } => {
            let k: TrapKind = *kind;
            format!("guest trapped ({}): {message}", k.as_str())
        }
    }
}
