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

/// Whether `name` is a session id (`ses_` and 32 lowercase hex).
pub fn is_session_id(name: &str) -> bool {
    name.len() == 36
        && name.starts_with("ses_")
        && name[4..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}
