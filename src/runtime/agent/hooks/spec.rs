//! A hook's behavioural contract, read from the hook artifact's own `murmur.yaml`
//! (`binding`, `execution_mode`, `commit_policy`) and checked against the spec's table at
//! launch: `async` only with `none`, `on-stage` only `blocking`. A policy its binding cannot
//! honour (`write-manifests` off `on-stage`, `replace-context` off `on-compaction`,
//! `reopen-task` off `on-task-end`) passes and has no effect, with a bootstrap note.

use crate::diag::{code, Diagnostic};

/// When a hook fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    Stage,
    SessionStart,
    TaskStart,
    Inference,
    ToolCall,
    Shell,
    Compaction,
    TaskEnd,
    SessionEnd,
}

impl Binding {
    pub const ALL: [(&'static str, Binding); 9] = [
        ("on-stage", Binding::Stage),
        ("on-session-start", Binding::SessionStart),
        ("on-task-start", Binding::TaskStart),
        ("on-inference", Binding::Inference),
        ("on-tool-call", Binding::ToolCall),
        ("on-shell", Binding::Shell),
        ("on-compaction", Binding::Compaction),
        ("on-task-end", Binding::TaskEnd),
        ("on-session-end", Binding::SessionEnd),
    ];

    pub fn as_str(self) -> &'static str {
        Binding::ALL
            .iter()
            .find(|(_, b)| *b == self)
            .map(|(s, _)| *s)
            .unwrap_or("")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Blocking,
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    None,
    ReplaceContext,
    WriteManifests,
    ReopenTask,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::ReplaceContext => "replace-context",
            Policy::WriteManifests => "write-manifests",
            Policy::ReopenTask => "reopen-task",
        }
    }
}

/// A validated contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// None: every session event (`on-session-start` through `on-session-end`), never
    /// `on-stage`.
    pub binding: Option<Binding>,
    pub mode: Mode,
    pub policy: Policy,
}

impl Spec {
    /// Whether the hook fires at `b`.
    pub fn fires_at(&self, b: Binding) -> bool {
        match self.binding {
            Some(own) => own == b,
            None => b != Binding::Stage,
        }
    }

    /// Whether this hook is a compactor: bound to `on-compaction` with `replace-context`
    /// (its failure is the session's; an observer's is not).
    pub fn compacts(&self) -> bool {
        self.binding == Some(Binding::Compaction) && self.policy == Policy::ReplaceContext
    }

    /// Whether the policy takes effect at the hook's binding.
    pub fn policy_effective(&self) -> bool {
        match self.policy {
            Policy::None => true,
            Policy::WriteManifests => self.binding == Some(Binding::Stage),
            Policy::ReplaceContext => self.binding == Some(Binding::Compaction),
            Policy::ReopenTask => self.binding == Some(Binding::TaskEnd),
        }
    }
}

fn bad(hook: &str, key: &str, why: String) -> Diagnostic {
    Diagnostic::new(
        code::MAN_INVALID,
        format!("artifacts[{hook}].{key}"),
        format!("hook {hook}: invalid hook config for '{key}': {why}"),
    )
}

/// Read and check the contract in `own` (the hook's manifest).
pub fn parse(hook: &str, own: &serde_yaml::Value) -> Result<Spec, Diagnostic> {
    let text = |key: &str| -> Result<Option<String>, Diagnostic> {
        match own.get(key) {
            None | Some(serde_yaml::Value::Null) => Ok(None),
            Some(serde_yaml::Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(_) => Err(bad(hook, key, "expected a string".into())),
        }
    };
    let binding = match text("binding")? {
        None => None,
        Some(b) => Some(
            Binding::ALL
                .iter()
                .find(|(s, _)| *s == b)
                .map(|(_, v)| *v)
                .ok_or_else(|| bad(hook, "binding", format!("unknown binding '{b}'")))?,
        ),
    };
    let mode = match text("execution_mode")?.as_deref() {
        None | Some("blocking") => Mode::Blocking,
        Some("async") => Mode::Async,
        Some(o) => {
            return Err(bad(
                hook,
                "execution_mode",
                format!("unknown value '{o}' (blocking or async)"),
            ))
        }
    };
    let policy = match text("commit_policy")?.as_deref() {
        None | Some("none") => Policy::None,
        Some("replace-context") => Policy::ReplaceContext,
        Some("write-manifests") => Policy::WriteManifests,
        Some("reopen-task") => Policy::ReopenTask,
        Some(o) => {
            return Err(bad(
                hook,
                "commit_policy",
                format!("unknown value '{o}' (none, replace-context, write-manifests or reopen-task)"),
            ))
        }
    };
    if mode == Mode::Async && policy != Policy::None {
        return Err(bad(
            hook,
            "execution_mode",
            format!(
                "async is only valid with commit_policy: none, not {}",
                policy.as_str()
            ),
        ));
    }
    if mode == Mode::Async && binding == Some(Binding::Stage) {
        return Err(bad(
            hook,
            "execution_mode",
            "on-stage must be blocking: staging completes before launch".into(),
        ));
    }
    if mode == Mode::Async && binding == Some(Binding::Compaction) {
        return Err(bad(
            hook,
            "execution_mode",
            "on-compaction must be blocking: the history is replaced before the next turn".into(),
        ));
    }
    Ok(Spec {
        binding,
        mode,
        policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> Result<Spec, Diagnostic> {
        parse("h", &serde_yaml::from_str(yaml).unwrap())
    }

    #[test]
    fn the_table_of_the_spec() {
        assert!(
            spec("binding: on-compaction\nexecution_mode: blocking\ncommit_policy: replace-context").is_ok()
        );
        assert!(spec("binding: on-task-end\ncommit_policy: reopen-task").is_ok());
        assert!(spec("execution_mode: async").is_ok());
        for bad in [
            "execution_mode: async\ncommit_policy: replace-context",
            "execution_mode: async\ncommit_policy: write-manifests",
            "binding: on-task-end\nexecution_mode: async\ncommit_policy: reopen-task",
            "binding: on-stage\nexecution_mode: async",
            "binding: on-compaction\nexecution_mode: async",
            "binding: on-lunch",
            "execution_mode: sometimes",
            "commit_policy: everything",
            "binding: [on-stage]",
        ] {
            let e = spec(bad).unwrap_err();
            assert_eq!(e.code, "E-MAN-003", "{bad}");
            assert!(e.message.starts_with("hook h: invalid hook config for '"), "{e}");
        }
        let w = spec("binding: on-task-start\ncommit_policy: write-manifests").unwrap();
        assert!(
            !w.policy_effective(),
            "write-manifests is honoured only on on-stage"
        );
    }

    #[test]
    fn an_omitted_binding_is_every_session_event_but_stage() {
        let s = spec("commit_policy: none").unwrap();
        assert!(!s.fires_at(Binding::Stage));
        for (_, b) in Binding::ALL.iter().skip(1) {
            assert!(s.fires_at(*b));
        }
    }
}
