//! Runtime ids: a prefix and 32 lowercase hex from getrandom.

use crate::diag::{code, Diagnostic};

/// `ses_` + 32 lowercase hex.
pub fn session_id() -> Result<String, Diagnostic> {
    crate::token::random_hex16()
        .map(|hex| format!("ses_{hex}"))
        .map_err(|e| {
            Diagnostic::new(
                code::IO_READ,
                "",
                format!("no randomness for the session id: {e}"),
            )
        })
}
