//! Whether a session's contained calls could start: every shell or native call that reached
//! the spawn is counted here. The first whose containment could not be installed
//! (E-RUN-014) is reported once on stderr, code and hint; the session's end reads the tally,
//! and a session whose every contained call failed so ends `containment_failed`.

use crate::diag::{code, Diagnostic};

/// The session's contained starts.
#[derive(Debug, Default)]
pub struct Starts {
    attempted: u64,
    failed: u64,
    first: Option<Diagnostic>,
}

impl Starts {
    /// A call's child started.
    pub fn started(&mut self) {
        self.attempted += 1;
    }

    /// A call's spawn failed with `d`: the first containment failure of the session is
    /// reported on stderr; later ones only count.
    pub fn failed(&mut self, d: &Diagnostic) {
        if self.record(d) {
            eprintln!("{d}");
        }
    }

    /// Count `d`; whether it is the session's first containment failure.
    fn record(&mut self, d: &Diagnostic) -> bool {
        self.attempted += 1;
        if d.code != code::RUN_CONTAINMENT {
            return false;
        }
        self.failed += 1;
        if self.first.is_some() {
            return false;
        }
        self.first = Some(d.clone());
        true
    }

    /// When contained calls were attempted and not one could start its containment: how
    /// many there were, and the first failure.
    pub fn all_failed(&self) -> Option<(u64, &Diagnostic)> {
        match &self.first {
            Some(d) if self.failed == self.attempted => Some((self.attempted, d)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install_failure(step: &str) -> Diagnostic {
        Diagnostic::new(
            code::RUN_CONTAINMENT,
            "",
            format!("containment could not be installed, the command was not run: {step}"),
        )
    }

    #[test]
    fn only_the_first_failure_is_reported_and_one_start_clears_the_session() {
        let mut s = Starts::default();
        assert_eq!(s.all_failed(), None, "nothing attempted");
        assert!(s.record(&install_failure("a")));
        assert!(!s.record(&install_failure("b")));
        let (n, first) = s.all_failed().unwrap();
        assert_eq!((n, first.message.ends_with(": a")), (2, true));
        s.started();
        assert_eq!(s.all_failed(), None);
    }

    #[test]
    fn a_failure_of_another_code_is_not_a_containment_failure() {
        let mut s = Starts::default();
        assert!(!s.record(&Diagnostic::new(code::IO_READ, "", "cannot read")));
        assert_eq!(s.all_failed(), None);
        assert!(s.record(&install_failure("a")));
        assert_eq!(s.all_failed(), None, "one of two failed otherwise");
    }
}
