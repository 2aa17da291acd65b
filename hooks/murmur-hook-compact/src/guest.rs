//! The component glue: `murmur:hook/lifecycle` over [`crate::compact`].
wit_bindgen::generate!({ path: "../../wit/hook-0.1", world: "murmur:hook/hook", generate_all });

use crate::compact::{compact, Message};
use exports::murmur::hook::lifecycle::Guest;
use murmur::hook::types::{Event, Message as WitMessage, Output};

struct Compact;

impl Guest for Compact {
    fn on_event(event: Event) -> Result<Output, String> {
        match event {
            Event::Compaction(info) => {
                let history = info.messages.into_iter().map(from_wit).collect();
                Ok(Output::ReplaceContext(
                    compact(history).into_iter().map(to_wit).collect(),
                ))
            }
            _ => Ok(Output::None),
        }
    }
}

fn from_wit(m: WitMessage) -> Message {
    Message {
        role: m.role,
        content: m.content,
        tool_call_id: m.tool_call_id,
        is_error: m.is_error,
    }
}

fn to_wit(m: Message) -> WitMessage {
    WitMessage {
        role: m.role,
        content: m.content,
        tool_call_id: m.tool_call_id,
        is_error: m.is_error,
    }
}

export!(Compact);
