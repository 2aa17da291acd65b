//! The delegation ids a session issued, and whether each one's completion was taken: a
//! completion is admitted once for an id this session minted, and refused otherwise (an id it
//! never issued, or a second report of one already in). Ids are registered before the
//! child is started, so a child that finishes at once is never refused.

use std::collections::HashMap;
use std::sync::Mutex;

/// Why a completion was refused.
pub const NOT_ISSUED: &str = "this session started no delegation with that id";
pub const ALREADY_TAKEN: &str = "its completion was already taken";

/// Issued delegation ids: `false` until their completion is taken.
#[derive(Debug, Default)]
pub struct Issued {
    ids: Mutex<HashMap<String, bool>>,
}

impl Issued {
    /// `id` was minted by this session: its completion is expected.
    pub fn expect(&self, id: &str) {
        self.lock().entry(id.to_string()).or_insert(false);
    }

    /// Whether `id` was issued and its completion not yet taken: what admits a completion
    /// without a bearer token through an authenticated door.
    pub fn pending(&self, id: &str) -> bool {
        self.lock().get(id) == Some(&false)
    }

    /// Take the completion of `id`, once.
    pub fn take(&self, id: &str) -> Result<(), &'static str> {
        match self.lock().get_mut(id) {
            None => Err(NOT_ISSUED),
            Some(true) => Err(ALREADY_TAKEN),
            Some(taken) => {
                *taken = true;
                Ok(())
            }
        }
    }

    /// The completion of `id` was taken but not admitted (the table rejected it as busy): a
    /// retry may take it again.
    pub fn give_back(&self, id: &str) {
        if let Some(taken) = self.lock().get_mut(id) {
            *taken = false;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, bool>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_is_taken_once_and_only_for_an_issued_id() {
        let i = Issued::default();
        assert_eq!(i.take("dlg_a"), Err(NOT_ISSUED));
        assert!(!i.pending("dlg_a"));
        i.expect("dlg_a");
        assert!(i.pending("dlg_a"));
        assert_eq!(i.take("dlg_a"), Ok(()));
        assert!(!i.pending("dlg_a"));
        assert_eq!(i.take("dlg_a"), Err(ALREADY_TAKEN));
        i.expect("dlg_a");
        assert_eq!(
            i.take("dlg_a"),
            Err(ALREADY_TAKEN),
            "expecting again reopens nothing"
        );
        assert_eq!(i.take(""), Err(NOT_ISSUED));
        i.give_back("dlg_a");
        assert_eq!(i.take("dlg_a"), Ok(()), "a rejected completion's retry is taken");
        i.give_back("dlg_b");
        assert_eq!(i.take("dlg_b"), Err(NOT_ISSUED), "giving back issues nothing");
    }
}
