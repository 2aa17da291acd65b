//! The component glue: `murmur:tool/run` over the shared call flow.
wit_bindgen::generate!({ path: "../../wit", world: "murmur:capsule/tool", generate_all });

use driver_common::{Outcome, Status};
use exports::murmur::tool::run::{Guest, Status as WitStatus, ToolInput, ToolResult};

struct Driver;

impl Guest for Driver {
    fn run(input: ToolInput) -> ToolResult {
        result(driver_common::run(&crate::map::Anthropic, input.data.as_deref()))
    }
}

fn result(o: Outcome) -> ToolResult {
    ToolResult {
        status: match o.status {
            Status::Passed => WitStatus::Passed,
            Status::Failed => WitStatus::Failed,
            Status::Error => WitStatus::Error,
        },
        summary: o.summary,
        data: o.data,
        data_path: None,
        truncated: false,
        metadata: o.metadata,
    }
}

export!(Driver);
