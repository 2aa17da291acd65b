//! The spend ledger's format, pure: per-day token totals (UTC dates) and the running total of
//! each live session tree, parsed strictly from a small JSON file, changed in memory, pruned
//! and rendered back. A ledger that does not parse is never guessed at: the caller refuses
//! the model call and names the file (see `crate::spend::store`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The format's version; any other is refused.
pub const VERSION: u64 = 1;
/// How many UTC days of totals are kept (today and the six before it).
pub const DAYS_KEPT: i64 = 7;
/// The most sessions the ledger holds; past it the least recently charged are dropped
/// (each session removes its own entry when it ends, so this only bounds what crashed
/// sessions leave behind within their two days).
pub const MAX_SESSIONS: usize = 4096;
/// The largest ledger read (a ledger of [`MAX_SESSIONS`] entries is far smaller).
pub const MAX_BYTES: u64 = 1 << 20;

/// One session's tokens: its own calls and its delegated children's, and the UTC day it was
/// last charged (an entry untouched since before yesterday is dropped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpend {
    pub tokens: u64,
    pub day: String,
}

/// The ledger: tokens per UTC day (`YYYY-MM-DD`) and per session (`ses_` + 32 hex).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ledger {
    pub version: u64,
    pub days: BTreeMap<String, u64>,
    pub sessions: BTreeMap<String, SessionSpend>,
}

/// Whether `s` is a `YYYY-MM-DD` date (digits and dashes in place; month 1-12, day 1-31).
pub fn is_day(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) || !digits(5..7) || !digits(8..10) {
        return false;
    }
    let month = (b[5] - b'0') * 10 + (b[6] - b'0');
    let day = (b[8] - b'0') * 10 + (b[9] - b'0');
    (1..=12).contains(&month) && (1..=31).contains(&day)
}

/// Whether `s` is a session id: `ses_` and 32 lowercase hex digits.
pub fn is_session(s: &str) -> bool {
    s.strip_prefix("ses_").is_some_and(|h| {
        h.len() == 32
            && h.bytes()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
    })
}

/// The UTC day of Unix milliseconds `ms`, `YYYY-MM-DD`.
pub fn day_of(ms: u64) -> String {
    let days = (ms / 86_400_000) as i64;
    let (y, m, d) = crate::a2a::shapes::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The UTC day `back` days before the day of `ms`.
fn day_before(ms: u64, back: i64) -> String {
    let days = (ms / 86_400_000) as i64 - back;
    let (y, m, d) = crate::a2a::shapes::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

impl Ledger {
    /// An empty ledger of this version (no file yet).
    pub fn fresh() -> Ledger {
        Ledger {
            version: VERSION,
            ..Ledger::default()
        }
    }

    /// Parse a ledger file's bytes: JSON of exactly this shape and version, every date a
    /// date and every session a session id, nothing larger than [`MAX_BYTES`].
    pub fn parse(bytes: &[u8]) -> Result<Ledger, String> {
        if bytes.len() as u64 > MAX_BYTES {
            return Err(format!("it is larger than {MAX_BYTES} bytes"));
        }
        let l: Ledger =
            serde_json::from_slice(bytes).map_err(|e| format!("it is not a spend ledger: {e}"))?;
        if l.version != VERSION {
            return Err(format!(
                "version {} (this mur reads version {VERSION})",
                l.version
            ));
        }
        if let Some(d) = l.days.keys().find(|d| !is_day(d)) {
            return Err(format!(
                "'{}' is not a YYYY-MM-DD day",
                d.chars().take(40).collect::<String>()
            ));
        }
        for (id, s) in &l.sessions {
            if !is_session(id) {
                return Err(format!(
                    "'{}' is not a session id",
                    id.chars().take(40).collect::<String>()
                ));
            }
            if !is_day(&s.day) {
                return Err(format!(
                    "session {id}: '{}' is not a YYYY-MM-DD day",
                    s.day.chars().take(40).collect::<String>()
                ));
            }
        }
        Ok(l)
    }

    /// The file's text: compact JSON and a newline.
    pub fn render(&self) -> String {
        let mut s = serde_json::to_string(self).unwrap_or_else(|_| "{}".into());
        s.push('\n');
        s
    }

    /// Tokens charged on `day`.
    pub fn on_day(&self, day: &str) -> u64 {
        self.days.get(day).copied().unwrap_or(0)
    }

    /// Tokens charged to session `id` (0 for a session never charged).
    pub fn of_session(&self, id: &str) -> u64 {
        self.sessions.get(id).map_or(0, |s| s.tokens)
    }

    /// Charge `tokens` made at `now_ms` to the day and to each session of `tree` (the
    /// session that called and each session it was delegated from), saturating.
    pub fn charge(&mut self, tokens: u64, tree: &[&str], now_ms: u64) {
        let day = day_of(now_ms);
        let d = self.days.entry(day.clone()).or_insert(0);
        *d = d.saturating_add(tokens);
        for id in tree {
            let s = self.sessions.entry((*id).to_string()).or_insert(SessionSpend {
                tokens: 0,
                day: day.clone(),
            });
            s.tokens = s.tokens.saturating_add(tokens);
            s.day.clone_from(&day);
        }
    }

    /// Drop days older than [`DAYS_KEPT`], sessions last charged before yesterday, and the
    /// least recently charged sessions past [`MAX_SESSIONS`].
    pub fn prune(&mut self, now_ms: u64) {
        let oldest_day = day_before(now_ms, DAYS_KEPT - 1);
        self.days.retain(|d, _| *d >= oldest_day);
        let yesterday = day_before(now_ms, 1);
        self.sessions.retain(|_, s| s.day >= yesterday);
        if self.sessions.len() > MAX_SESSIONS {
            let mut by_day: Vec<(String, String)> = self
                .sessions
                .iter()
                .map(|(id, s)| (s.day.clone(), id.clone()))
                .collect();
            by_day.sort();
            let extra = self.sessions.len() - MAX_SESSIONS;
            for (_, id) in by_day.into_iter().take(extra) {
                self.sessions.remove(&id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SES: &str = "ses_0123456789abcdef0123456789abcdef";
    /// 2026-12-07T02:00:00Z.
    const NOW: u64 = 1_796_608_800_000;

    #[test]
    fn days_are_utc_dates() {
        assert_eq!(day_of(0), "1970-01-01");
        assert_eq!(day_of(NOW), "2026-12-07");
        assert!(is_day("2026-12-07"));
        for bad in [
            "2026-13-01",
            "2026-12-00",
            "2026-1-07",
            "2026/12/07",
            "２０２６-12-07",
            "",
        ] {
            assert!(!is_day(bad), "{bad}");
        }
    }

    #[test]
    fn a_charge_counts_for_the_day_and_every_session_of_the_tree() {
        let mut l = Ledger::fresh();
        let parent = "ses_ffffffffffffffffffffffffffffffff";
        l.charge(150, &[SES, parent], NOW);
        l.charge(50, &[parent], NOW);
        assert_eq!(l.on_day("2026-12-07"), 200);
        assert_eq!((l.of_session(SES), l.of_session(parent)), (150, 200));
        let again = Ledger::parse(l.render().as_bytes()).unwrap();
        assert_eq!(again, l);
    }

    #[test]
    fn pruning_keeps_a_week_of_days_and_two_days_of_sessions() {
        let mut l = Ledger::fresh();
        l.charge(1, &[SES], NOW - 10 * 86_400_000);
        l.charge(2, &["ses_ffffffffffffffffffffffffffffffff"], NOW - 86_400_000);
        l.charge(3, &[], NOW);
        l.prune(NOW);
        assert_eq!(l.days.len(), 2);
        assert_eq!(l.sessions.len(), 1);
        assert_eq!(l.of_session(SES), 0);
    }

    #[test]
    fn malformed_ledgers_are_refused_without_a_panic() {
        let cases: &[&[u8]] = &[
            b"",
            b"\0\0\0\0",
            b"{",
            b"[]",
            b"null",
            b"{\"version\":1}",
            b"{\"version\":2,\"days\":{},\"sessions\":{}}",
            b"{\"version\":1,\"days\":{\"yesterday\":5},\"sessions\":{}}",
            b"{\"version\":1,\"days\":{\"2026-12-07\":-5},\"sessions\":{}}",
            b"{\"version\":1,\"days\":{\"2026-12-07\":1e99},\"sessions\":{}}",
            b"{\"version\":1,\"days\":{\"2026-12-07\":18446744073709551616},\"sessions\":{}}",
            b"{\"version\":1,\"days\":{},\"sessions\":{\"../x\":{\"tokens\":1,\"day\":\"2026-12-07\"}}}",
            b"{\"version\":1,\"days\":{},\"sessions\":{},\"extra\":true}",
            b"{\"version\":1,\"days\":{\"2026-12-07\":1},\"sessions\":{}}{",
        ];
        for c in cases {
            assert!(Ledger::parse(c).is_err(), "{}", String::from_utf8_lossy(c));
        }
        let big = vec![b' '; MAX_BYTES as usize + 1];
        assert!(Ledger::parse(&big).unwrap_err().contains("larger"));
        let ok = b"{\"version\":1,\"days\":{\"2026-12-07\":5},\"sessions\":{}}";
        assert_eq!(Ledger::parse(ok).unwrap().on_day("2026-12-07"), 5);
    }
}
