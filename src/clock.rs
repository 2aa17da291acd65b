//! The one wall-clock read of both binaries: milliseconds since the Unix epoch. Handlers
//! and state take the time as a value; only the edges (an event loop's turn, a session's
//! step, a trace line) call this.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 for a clock set before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
