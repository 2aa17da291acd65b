//! The session's spend meter: before each model call, whether a ceiling refuses it; after
//! it, the tokens the provider reported charged to the user's ledger. The rule: a call is
//! refused when, read from the ledger just before it would be sent, the tokens already spent
//! reach a ceiling (`used >= limit`), for the session's own `inference.max_session_tokens`,
//! for each session it was delegated from (their ceilings, handed down in
//! `MURMUR_SPEND_CHAIN`), or for the user's day (`spend.machine_tokens_per_day`). A call
//! that starts below a ceiling may cross it by what that one call costs; the next is
//! refused. Every call of a delegated child is charged to the child and to every session
//! above it, under the ledger's lock, so concurrent children share their root's ceiling and
//! none can get more than what is left of it. A ledger that cannot be read or written
//! refuses the call: spending is never unmetered.

use crate::spend::{self, ledger, store::Store, MachineCeiling};

/// A ceiling a call would have crossed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceiling {
    /// `session` or `machine`.
    pub which: &'static str,
    /// The session whose ceiling it is (this one, or one it was delegated from); None for
    /// the machine's.
    pub session: Option<String>,
    pub limit: u64,
    pub used: u64,
}

impl Ceiling {
    /// The setting that holds this ceiling.
    pub fn key(&self) -> &'static str {
        match self.which {
            "machine" => "spend.machine_tokens_per_day",
            _ => "inference.max_session_tokens",
        }
    }

    /// Why the call was refused, in one sentence (`own`: this session's id).
    pub fn reason(&self, own: &str) -> String {
        let spent = match (&self.session, self.which) {
            (_, "machine") => format!(
                "this user's sessions spent {} tokens today (UTC) and spend.machine_tokens_per_day is {}",
                self.used, self.limit
            ),
            (Some(s), _) if s != own => format!(
                "session {s}, which this one was delegated from, spent {} tokens with its children and its inference.max_session_tokens is {}",
                self.used, self.limit
            ),
            _ => format!(
                "the session spent {} tokens and inference.max_session_tokens is {}",
                self.used, self.limit
            ),
        };
        format!("{spent}: the next model call was refused before it was sent")
    }
}

/// Why a call may not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Ceiling(Ceiling),
    /// The ledger could not be read.
    Ledger(String),
}

/// One session's meter.
#[derive(Debug)]
pub struct Meter {
    store: Option<Store>,
    session_id: String,
    /// `inference.max_session_tokens`.
    own: u64,
    /// The sessions this one was delegated from and their ceilings, root first.
    above: Vec<(String, u64)>,
    machine: u64,
    /// What this session's own calls were charged (a floor for its ledger entry).
    spent: u64,
}

impl Meter {
    /// The meter of session `session_id` with ceiling `own`, below the sessions `chain`
    /// names (the value of `MURMUR_SPEND_CHAIN`, if any), charging `store`.
    pub fn new(
        session_id: &str,
        own: u64,
        chain: Option<&str>,
        machine: &MachineCeiling,
        store: Option<Store>,
    ) -> Result<Meter, String> {
        let above = spend::parse_chain(chain.unwrap_or_default())
            .map_err(|why| format!("{} is malformed: {why}", spend::CHAIN_VAR))?;
        Ok(Meter {
            store,
            session_id: session_id.to_string(),
            own,
            above,
            machine: machine.tokens_per_day,
            spent: 0,
        })
    }

    fn store(&self) -> Result<&Store, String> {
        self.store.as_ref().ok_or_else(|| {
            "no place for the spend ledger: neither MURMUR_SPEND_DIR nor HOME is set".to_string()
        })
    }

    /// Whether a model call may be sent at `now_ms`.
    pub fn check(&self, now_ms: u64) -> Result<(), Refusal> {
        let l = self.store().and_then(Store::read).map_err(Refusal::Ledger)?;
        let own = (
            self.session_id.as_str(),
            self.own,
            l.of_session(&self.session_id).max(self.spent),
        );
        let above = self
            .above
            .iter()
            .rev()
            .map(|(id, limit)| (id.as_str(), *limit, l.of_session(id)));
        for (id, limit, used) in std::iter::once(own).chain(above) {
            if used >= limit {
                return Err(Refusal::Ceiling(Ceiling {
                    which: "session",
                    session: Some(id.to_string()),
                    limit,
                    used,
                }));
            }
        }
        let today = l.on_day(&ledger::day_of(now_ms));
        if today >= self.machine {
            return Err(Refusal::Ceiling(Ceiling {
                which: "machine",
                session: None,
                limit: self.machine,
                used: today,
            }));
        }
        Ok(())
    }

    /// Charge `tokens` of a call made at `now_ms` to the day, this session and each above.
    pub fn charge(&mut self, tokens: u64, now_ms: u64) -> Result<(), String> {
        self.spent = self.spent.saturating_add(tokens);
        let mut tree: Vec<&str> = self.above.iter().map(|(id, _)| id.as_str()).collect();
        tree.push(&self.session_id);
        self.store()?
            .update(now_ms, |l| l.charge(tokens, &tree, now_ms))
            .map(drop)
    }

    /// [`spend::CHAIN_VAR`] for a child of this session: the chain above it, then itself.
    pub fn child_chain(&self) -> String {
        let mut chain = self.above.clone();
        chain.push((self.session_id.clone(), self.own));
        spend::render_chain(&chain)
    }

    /// The session ends: its entry leaves the ledger (the day's total keeps its tokens, and
    /// so does each session above it). Best effort: an entry left behind expires in two days.
    pub fn forget(&self, now_ms: u64) -> Result<(), String> {
        let id = &self.session_id;
        let Some(store) = &self.store else { return Ok(()) };
        if self.spent == 0 {
            return Ok(());
        }
        store
            .update(now_ms, |l| {
                l.sessions.remove(id);
            })
            .map(drop)
    }

    /// The session this meter is for.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }
}
