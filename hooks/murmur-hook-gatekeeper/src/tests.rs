//! The gatekeeper's decision.

use crate::gate::{contains_word, decide, FEEDBACK};

#[test]
fn a_result_with_the_word_is_accepted() {
    for text in [
        "APPROVED",
        "All checks pass. APPROVED",
        "APPROVED: the patch is correct",
        "Status: **APPROVED**.",
        "line one\nAPPROVED\n",
        "é APPROVED é",
    ] {
        assert_eq!(decide(text), None, "{text:?}");
    }
}

#[test]
fn a_result_without_the_word_is_reopened() {
    for text in [
        "",
        "approved",
        "Approved",
        "UNAPPROVED",
        "APPROVED_BY nobody",
        "APPROVEDX",
        "PRE-APPROVEDness",
    ] {
        assert_eq!(decide(text), Some(FEEDBACK), "{text:?}");
    }
}

#[test]
fn a_later_whole_word_counts_after_an_embedded_one() {
    assert!(contains_word("UNAPPROVED, then APPROVED", "APPROVED"));
    assert!(!contains_word("UNAPPROVED and XAPPROVED", "APPROVED"));
}

#[test]
fn the_feedback_names_the_word() {
    assert!(FEEDBACK.contains("APPROVED"));
}
