//! The conversations an agent session holds per A2A `contextId`: each completed task's text
//! and final answer, given to the model before the next task on the same context, so a
//! caller's follow-up task continues the conversation (A2A: a context groups a
//! conversation's tasks). Kept in memory for the session only, keyed by the context *and*
//! the door credential that sent the task (a stranger naming another caller's `contextId`
//! starts a conversation of its own), and bounded: the last [`MAX_EXCHANGES`] exchanges of a
//! context within [`MAX_BYTES`], the [`MAX_CONTEXTS`] contexts used last.

use std::collections::{HashMap, VecDeque};

/// The most exchanges kept per context (older ones are forgotten first).
pub const MAX_EXCHANGES: usize = 8;
/// The most bytes of text kept per context.
pub const MAX_BYTES: usize = 64 << 10;
/// The most contexts kept (the one used longest ago is forgotten first).
pub const MAX_CONTEXTS: usize = 64;

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

/// The credential that sent a task (None on a door without credentials) and its context.
type Key = (Option<String>, String);

/// The session's conversations.
#[derive(Debug, Default)]
pub struct Contexts {
    held: HashMap<Key, VecDeque<Exchange>>,
    /// Keys, the one used longest ago first.
    used: VecDeque<Key>,
}

impl Contexts {
    /// The earlier exchanges of `context` as `owner` sent them, oldest first.
    pub fn earlier(&self, owner: Option<&str>, context: &str) -> Vec<Exchange> {
        let key = (owner.map(str::to_string), context.to_string());
        self.held
            .get(&key)
            .map(|x| x.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Keep a completed task's exchange; an exchange larger than [`MAX_BYTES`] alone is not
    /// kept (the conversation restarts after it).
    pub fn record(&mut self, owner: Option<&str>, context: &str, exchange: Exchange) {
        if context.is_empty() {
            return;
        }
        let key = (owner.map(str::to_string), context.to_string());
        self.used.retain(|k| k != &key);
        self.used.push_back(key.clone());
        let kept = self.held.entry(key).or_default();
        if exchange.bytes() > MAX_BYTES {
            kept.clear();
        } else {
            kept.push_back(exchange);
        }
        while kept.len() > MAX_EXCHANGES || kept.iter().map(Exchange::bytes).sum::<usize>() > MAX_BYTES {
            kept.pop_front();
        }
        while self.used.len() > MAX_CONTEXTS {
            if let Some(old) = self.used.pop_front() {
                self.held.remove(&old);
            }
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

    #[test]
    fn a_context_is_its_senders_and_holds_its_last_exchanges_within_the_bounds() {
        let mut c = Contexts::default();
        c.record(Some("alice"), "ctx", x("my name is Ada", "noted"));
        assert_eq!(c.earlier(Some("alice"), "ctx"), [x("my name is Ada", "noted")]);
        // Another credential, or none, naming the same context sees nothing of it.
        assert!(c.earlier(Some("mallory"), "ctx").is_empty());
        assert!(c.earlier(None, "ctx").is_empty());
        assert!(c.earlier(Some("alice"), "other").is_empty());
        for i in 0..10 {
            c.record(Some("alice"), "ctx", x(&format!("q{i}"), "a"));
        }
        let kept = c.earlier(Some("alice"), "ctx");
        assert_eq!(kept.len(), MAX_EXCHANGES);
        assert_eq!(kept[0].asked, "q2");
        // Past the byte bound the oldest go; one exchange past it alone restarts the context.
        c.record(Some("alice"), "ctx", x(&"a".repeat(MAX_BYTES - 10), "b"));
        assert_eq!(c.earlier(Some("alice"), "ctx").len(), 1);
        c.record(Some("alice"), "ctx", x(&"a".repeat(MAX_BYTES + 1), ""));
        assert!(c.earlier(Some("alice"), "ctx").is_empty());
        // The contexts used longest ago are forgotten past MAX_CONTEXTS.
        for i in 0..MAX_CONTEXTS {
            c.record(None, &format!("c{i}"), x("q", "a"));
        }
        assert_eq!(c.held.len(), MAX_CONTEXTS);
        assert!(c.earlier(Some("alice"), "ctx").is_empty());
        assert_eq!(c.earlier(None, "c0").len(), 1);
        c.record(None, "", x("q", "a"));
        assert!(c.earlier(None, "").is_empty());
    }
}
