//! The gatekeeper's decision, pure so it runs natively in unit tests.

/// The word a result must contain to be accepted.
pub const WORD: &str = "APPROVED";

/// The feedback the task is reopened with.
pub const FEEDBACK: &str =
    "The result does not contain the word APPROVED; revise it and include APPROVED once it is correct.";

/// `None` to accept `result_text`; `Some(feedback)` to reopen the task.
pub fn decide(result_text: &str) -> Option<&'static str> {
    if contains_word(result_text, WORD) {
        None
    } else {
        Some(FEEDBACK)
    }
}

/// Whether `word` occurs in `text` as a whole word: case-sensitive, and with no letter,
/// digit or `_` right before or after it (so `UNAPPROVED` and `APPROVED_BY` do not count,
/// `APPROVED.` and `**APPROVED**` do).
pub fn contains_word(text: &str, word: &str) -> bool {
    let is_word_char = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_word_char) && !after.is_some_and(is_word_char)
    })
}
