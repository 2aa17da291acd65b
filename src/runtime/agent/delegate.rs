//! `delegate-task`, offered only when `capabilities.spawn.allow` names a capsule: the model
//! supplies a capsule (an enum of exactly that list), a version and the task; the runtime
//! does the rest ([`Launcher`]). The call returns when the child holds its task. A roost
//! refusal is the roost's own sentence, an error result with no JSON around it; the
//! session goes on either way.

use crate::agent::wire::ToolSpec;
use crate::runtime::delegation::launcher::{Ask, Launcher, Outcome};
use crate::spawner::Trust;
use serde_json::{json, Value};

/// The tool's name.
pub const NAME: &str = "delegate-task";

/// The tool, and the task it is called from.
pub struct Delegate {
    pub launcher: Launcher,
    context_id: String,
    trust: Trust,
}

impl Delegate {
    pub fn new(launcher: Launcher) -> Delegate {
        Delegate {
            launcher,
            context_id: String::new(),
            trust: Trust::Untrusted,
        }
    }

    /// The task now running: a delegation made from it runs under its context and trust.
    pub fn set_task(&mut self, context_id: &str, trust: &str) {
        self.context_id = context_id.to_string();
        self.trust = if trust == "trusted" {
            Trust::Trusted
        } else {
            Trust::Untrusted
        };
    }

    pub fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: NAME.into(),
            description: "Hand a task to another capsule, started under mur-roost's approval; returns once the child holds its task, and its outcome arrives later as a task of its own".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "capsule": {"type": "string", "enum": self.launcher.parent.spawn_allow},
                    "version": {"type": "string"},
                    "task": {"type": "string"},
                },
                "required": ["capsule", "version", "task"],
            }),
        }
    }

    /// Run the call if `name` is this tool: the model's text and whether it is an error.
    pub fn call(&self, name: &str, input: &Value) -> Option<(String, bool)> {
        if name != NAME {
            return None;
        }
        let text = |k: &str| input.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let (Some(capsule), Some(version), Some(task)) = (text("capsule"), text("version"), text("task"))
        else {
            return Some((
                "error: delegate-task takes {\"capsule\": string, \"version\": string, \"task\": string}, each non-empty".into(),
                true,
            ));
        };
        let ask = Ask {
            capsule,
            version,
            task,
            context_id: &self.context_id,
            trust: self.trust,
        };
        Some(match self.launcher.delegate(&ask) {
            Outcome::Started(v) => (v.to_string(), false),
            Outcome::Refused(sentence) => (sentence, true),
            Outcome::Failed(v) => (v.to_string(), true),
        })
    }
}
