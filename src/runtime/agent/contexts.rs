//! The conversations an agent session holds per A2A `contextId`: each completed task's text
//! and final answer, given to the model before the next task on the same context, so a
//! caller's follow-up task continues the conversation (A2A: a context groups a
//! conversation's tasks). Kept in memory for the session only, keyed by the context, the
//! door credential that sent the task (a stranger naming another caller's `contextId`
//! starts a conversation of its own) and the task's trust class (an untrusted task's text
//! never reaches a trusted task's model unmarked), and bounded: the last [`MAX_EXCHANGES`]
//! exchanges of a context within [`MAX_BYTES`], the [`MAX_CONTEXTS`] contexts used last, at
//! most [`MAX_PER_SENDER`] of them one sender's (a sender's new context forgets its own
//! oldest, never another sender's).

use std::collections::{HashMap, VecDeque};

/// The most exchanges kept per context (older ones are forgotten first).
pub const MAX_EXCHANGES: usize = 8;
/// The most bytes of text kept per context.
pub const MAX_BYTES: usize = 64 << 10;
/// The most contexts kept (the one used longest ago is forgotten first).
pub const MAX_CONTEXTS: usize = 64;
/// The most contexts kept for one sender (credential, or none).
pub const MAX_PER_SENDER: usize = 16;

/// One earlier task of a context: what it was asked, what it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    pub asked: String,
    pub answered: String,
}

impl Exchange {
    fn bytes(&self) -> usize {
        self.asked.len() + self.answered.len()
    }
}

/// Whose conversation: the credential that sent the task (None on a door without
/// credentials), the task's trust class, its context.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub owner: Option<String>,
    pub trust: String,
    pub context: String,
}

/// The session's conversations.
#[derive(Debug, Default)]
pub struct Contexts {
    held: HashMap<Key, VecDeque<Exchange>>,
    /// Keys, the one used longest ago first.
    used: VecDeque<Key>,
}

impl Contexts {
    /// The earlier exchanges of the conversation `key`, oldest first.
    pub fn earlier(&self, key: &Key) -> Vec<Exchange> {
        self.held
            .get(key)
            .map(|x| x.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Keep a completed task's exchange; an exchange larger than [`MAX_BYTES`] alone is not
    /// kept (the conversation restarts after it).
    pub fn record(&mut self, key: Key, exchange: Exchange) {
        if key.context.is_empty() {
            return;
        }
        self.used.retain(|k| k != &key);
        self.used.push_back(key.clone());
        let kept = self.held.entry(key.clone()).or_default();
        if exchange.bytes() > MAX_BYTES {
            kept.clear();
        } else {
            kept.push_back(exchange);
        }
        while kept.len() > MAX_EXCHANGES || kept.iter().map(Exchange::bytes).sum::<usize>() > MAX_BYTES {
            kept.pop_front();
        }
        let theirs = |k: &Key| k.owner == key.owner;
        if self.used.iter().filter(|k| theirs(k)).count() > MAX_PER_SENDER {
            if let Some(i) = self.used.iter().position(theirs) {
                self.forget(i);
            }
        }
        while self.used.len() > MAX_CONTEXTS {
            self.forget(0);
        }
    }

    /// Forget the `i`th context in the order of use.
    fn forget(&mut self, i: usize) {
        if let Some(old) = self.used.remove(i) {
            self.held.remove(&old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(a: &str, b: &str) -> Exchange {
        Exchange {
            asked: a.into(),
            answered: b.into(),
        }
    }

    fn key(owner: Option<&str>, trust: &str, context: &str) -> Key {
        Key {
            owner: owner.map(str::to_string),
            trust: trust.into(),
            context: context.into(),
        }
    }

    #[test]
    fn a_context_is_its_senders_and_holds_its_last_exchanges_within_the_bounds() {
        let mut c = Contexts::default();
        let alice = key(Some("alice"), "trusted", "ctx");
        c.record(alice.clone(), x("my name is Ada", "noted"));
        assert_eq!(c.earlier(&alice), [x("my name is Ada", "noted")]);
        // Another credential, or none, or another trust class naming the same context sees
        // nothing of it.
        assert!(c.earlier(&key(Some("mallory"), "trusted", "ctx")).is_empty());
        assert!(c.earlier(&key(None, "trusted", "ctx")).is_empty());
        assert!(c.earlier(&key(Some("alice"), "untrusted", "ctx")).is_empty());
        assert!(c.earlier(&key(Some("alice"), "trusted", "other")).is_empty());
        for i in 0..10 {
            c.record(alice.clone(), x(&format!("q{i}"), "a"));
        }
        let kept = c.earlier(&alice);
        assert_eq!(kept.len(), MAX_EXCHANGES);
        assert_eq!(kept[0].asked, "q2");
        // Past the byte bound the oldest go; one exchange past it alone restarts the context.
        c.record(alice.clone(), x(&"a".repeat(MAX_BYTES - 1), "b"));
        assert_eq!(c.earlier(&alice).len(), 1);
        c.record(alice.clone(), x(&"a".repeat(MAX_BYTES + 1), ""));
        assert!(c.earlier(&alice).is_empty());
        c.record(key(None, "trusted", ""), x("q", "a"));
        assert!(c.earlier(&key(None, "trusted", "")).is_empty());
    }

    #[test]
    fn a_sender_that_opens_many_contexts_forgets_its_own_never_anothers() {
        let mut c = Contexts::default();
        let alice = key(Some("alice"), "trusted", "ctx");
        c.record(alice.clone(), x("q", "a"));
        for i in 0..3 * MAX_CONTEXTS {
            c.record(key(Some("mallory"), "trusted", &format!("m{i}")), x("q", "a"));
        }
        assert_eq!(
            c.earlier(&alice).len(),
            1,
            "alice's conversation survives mallory's flood"
        );
        assert_eq!(c.held.len(), 1 + MAX_PER_SENDER);
        let last = format!("m{}", 3 * MAX_CONTEXTS - 1);
        assert_eq!(c.earlier(&key(Some("mallory"), "trusted", &last)).len(), 1);
        assert!(c.earlier(&key(Some("mallory"), "trusted", "m0")).is_empty());
        // Past MAX_CONTEXTS in all (many senders), the context used longest ago goes.
        for i in 0..MAX_CONTEXTS {
            c.record(key(Some(&format!("s{i}")), "trusted", "c"), x("q", "a"));
        }
        assert_eq!(c.held.len(), MAX_CONTEXTS);
        assert!(c.earlier(&alice).is_empty());
    }
}
