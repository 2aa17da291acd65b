//! The A2A wire layer, pure: JSON-RPC request parsing (`rpc`), the protocol-neutral task
//! model and its renderings for A2A 1.0 and 0.3 (`shapes`), and the agent card (`card`).
//! No I/O, no threads, no clock: the door (issue 14) feeds it bytes, headers and `now_ms`.

pub mod card;
pub mod media;
pub mod params;
pub mod parts;
pub mod push;
pub mod rpc;
pub mod shapes;
#[cfg(test)]
mod test_support;

/// The generations the door speaks, as `A2A-Version` names them (`mur version` lists them).
pub const GENERATIONS: &[&str] = &["0.3", "1.0"];

/// The protocol generation a request was made in; the method name decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Generation {
    /// A2A 0.3: `message/send`, `tasks/get`, … with `kind` fields and lowercase states.
    V03,
    /// A2A 1.0: `SendMessage`, `GetTask`, … in ProtoJSON, `TASK_STATE_*`, no `kind`.
    V10,
}
