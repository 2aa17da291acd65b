//! The component glue: `murmur:hook/lifecycle` over [`crate::gate`].
wit_bindgen::generate!({ path: "../../wit/hook-0.1", world: "murmur:hook/hook", generate_all });

use exports::murmur::hook::lifecycle::Guest;
use murmur::hook::types::{Event, Output};

struct Gatekeeper;

impl Guest for Gatekeeper {
    fn on_event(event: Event) -> Result<Output, String> {
        match event {
            Event::TaskEnd(info) => Ok(match crate::gate::decide(&info.result_text) {
                None => Output::None,
                Some(feedback) => Output::ReopenTask(feedback.to_string()),
            }),
            _ => Ok(Output::None),
        }
    }
}

export!(Gatekeeper);
