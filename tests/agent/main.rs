//! Agent capsules through the real `mur run` against the mock provider: the loop, children,
//! compaction, the A2A door, failures, hooks, kept-alive model connections, reopening, security, spend ceilings, `mur new --agent`, the workdir, a session's
//! egress, delegation through `mur-roost`, and the mock provider itself. One test binary;
//! each module is a former `tests/<name>.rs`.

#[path = "../common/mod.rs"]
mod common;

mod agent;
mod agent_children;
mod agent_cleanup;
mod agent_compaction;
mod agent_door;
mod agent_door_lifecycle;
mod agent_eval;
mod agent_eval_run;
mod agent_failures;
mod agent_history;
mod agent_hook_sandbox;
mod agent_hooks;
mod agent_keepalive;
mod agent_lock;
mod agent_new;
mod agent_otel;
mod agent_person;
mod agent_reopen;
mod agent_security;
mod agent_spend;
mod agent_unprivileged;
mod agent_workdir_swap;
mod delegation;
mod egress_session;
mod provider_mock;
