//! The daemon's records, owned by the event loop thread: sessions, reservations (granted,
//! unredeemed approvals) and spent approval ids, and the census of each account that owns
//! them (its running sessions and unredeemed approvals: what the machine ceiling counts). Expiry is evaluated when a figure is read,
//! never swept on a timer: a read first drops what has expired by `now_ms`. Expiries sit in
//! min-heaps, so a read costs what has expired since the last one rather than a walk over
//! every record (the spent ids alone are a minute of approvals).

use crate::manifest::Envelope;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;

/// A session's state as `GET /status` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Running,
    Complete,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Complete => "complete",
            Status::Failed => "failed",
        }
    }
}

/// What a running session may delegate: the grants the daemon lowered from its registry
/// manifest. Dropped when the session ends, so ended records stay small.
#[derive(Debug, Clone)]
pub struct Grants {
    pub envelope: Envelope,
    pub spawn_allow: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Session {
    pub status: Status,
    pub depth_remaining: u32,
    pub parent: Option<String>,
    pub grants: Option<Arc<Grants>>,
    /// Running children registered under this session.
    pub running_children: usize,
    /// Its runtime took `POST /hold` (a session that never does lapses: [`HOLD_GRACE_MS`]).
    pub held: bool,
    /// The census it counts in: the account that registered its formation's root.
    pub owner: Owner,
}

/// An account's census key: a uid, with the daemon's own and root's under the daemon's,
/// and [`UNIDENTIFIED`] for connections whose owner could not be read.
pub type Owner = u32;

/// The census of clients the kernel could not name (never a real uid: it is `(uid_t)-1`).
pub const UNIDENTIFIED: Owner = u32::MAX;

/// How long a registered session may go without its hold before it lapses (`failed`): a
/// runtime holds at once, so only a registration nobody keeps alive is ended by it.
pub const HOLD_GRACE_MS: u64 = 10_000;

/// How many ended sessions are remembered (for `GET /status`) before the oldest is
/// forgotten: the map never grows with the number of sessions a roost has seen.
pub const MAX_ENDED: usize = 4096;

#[derive(Debug, Clone)]
pub struct Reservation {
    pub parent: String,
    pub exp: u64,
    pub owner: Owner,
}

/// Ids by expiry, earliest first. An id may outlive its record (redeemed, released or
/// re-recorded); a popped id is acted on only if its record still carries that expiry.
type Expiries = BinaryHeap<Reverse<(u64, String)>>;

/// All the daemon holds.
#[derive(Debug, Default)]
pub struct State {
    pub sessions: HashMap<String, Session>,
    reservations: HashMap<String, Reservation>,
    reservation_expiries: Expiries,
    /// The reservation ids each parent holds.
    held: HashMap<String, Vec<String>>,
    /// Spent approval ids and their expiry; an id is kept until its approval has expired.
    spent: HashMap<String, u64>,
    spent_expiries: Expiries,
    /// Running sessions plus unredeemed approvals, by owner (no zero entries).
    census: HashMap<Owner, usize>,
    /// Sessions by the time their hold is due.
    hold_due: Expiries,
    /// Ended sessions, oldest first, up to [`MAX_ENDED`].
    ended: VecDeque<String>,
}

/// Pop every id that has expired by `now_ms`, handing each to `drop(id, exp)`.
fn pop_expired(heap: &mut Expiries, now_ms: u64, mut drop: impl FnMut(String, u64)) {
    while heap.peek().is_some_and(|Reverse((exp, _))| *exp <= now_ms) {
        if let Some(Reverse((exp, id))) = heap.pop() {
            drop(id, exp);
        }
    }
}

impl State {
    /// Drop reservations that have expired by `now_ms`.
    fn expire(&mut self, now_ms: u64) {
        let (reservations, held, census) = (&mut self.reservations, &mut self.held, &mut self.census);
        pop_expired(&mut self.reservation_expiries, now_ms, |jti, exp| {
            if reservations.get(&jti).is_some_and(|r| r.exp == exp) {
                if let Some(r) = reservations.remove(&jti) {
                    unhold(held, &r.parent, &jti);
                    uncount(census, r.owner);
                }
            }
        });
    }

    /// Capsules `owner` holds live on this host: its running sessions plus its unexpired,
    /// unredeemed approvals.
    pub fn live_capsules(&mut self, owner: Owner, now_ms: u64) -> usize {
        self.expire(now_ms);
        self.census.get(&owner).copied().unwrap_or(0)
    }

    /// Children `sid` holds: its running children plus its unexpired reservations.
    pub fn live_children(&mut self, sid: &str, now_ms: u64) -> usize {
        self.expire(now_ms);
        let running = self.sessions.get(sid).map_or(0, |s| s.running_children);
        running + self.held.get(sid).map_or(0, Vec::len)
    }

    /// The running session `sid`, if it is running.
    pub fn running(&self, sid: &str) -> Option<&Session> {
        self.sessions.get(sid).filter(|s| s.status == Status::Running)
    }

    /// Reserve a slot under `parent` (whose census is `owner`'s) for approval `jti`.
    pub fn reserve(&mut self, jti: String, parent: &str, owner: Owner, exp: u64) {
        if let Some(old) = self.reservations.remove(&jti) {
            unhold(&mut self.held, &old.parent, &jti);
            uncount(&mut self.census, old.owner);
        }
        *self.census.entry(owner).or_default() += 1;
        self.held.entry(parent.to_string()).or_default().push(jti.clone());
        self.reservation_expiries.push(Reverse((exp, jti.clone())));
        self.reservations.insert(
            jti,
            Reservation {
                parent: parent.to_string(),
                exp,
                owner,
            },
        );
    }

    /// Mark approval `jti` spent. False if it already was.
    pub fn spend(&mut self, jti: &str, exp: u64, now_ms: u64) -> bool {
        let spent = &mut self.spent;
        pop_expired(&mut self.spent_expiries, now_ms, |id, e| {
            if spent.get(&id) == Some(&e) {
                spent.remove(&id);
            }
        });
        if self.spent.contains_key(jti) {
            return false;
        }
        self.spent.insert(jti.to_string(), exp);
        self.spent_expiries.push(Reverse((exp, jti.to_string())));
        true
    }

    /// Register a running session; a redeemed reservation becomes a running child (of the
    /// same owner, so its census is unchanged).
    pub fn register(&mut self, sid: &str, session: Session, redeemed: Option<&str>) {
        if let Some(jti) = redeemed {
            if let Some(r) = self.reservations.remove(jti) {
                unhold(&mut self.held, &r.parent, jti);
                uncount(&mut self.census, r.owner);
            }
        }
        if let Some(parent) = session.parent.as_deref().and_then(|p| self.sessions.get_mut(p)) {
            parent.running_children += 1;
        }
        *self.census.entry(session.owner).or_default() += 1;
        self.sessions.insert(sid.to_string(), session);
    }

    /// Note that `sid` must take its hold by `due_ms` or lapse.
    pub fn hold_due(&mut self, sid: &str, due_ms: u64) {
        self.hold_due.push(Reverse((due_ms, sid.to_string())));
    }

    /// `sid`'s runtime took its hold.
    pub fn held(&mut self, sid: &str) {
        if let Some(s) = self.sessions.get_mut(sid) {
            s.held = true;
        }
    }

    /// End, as `failed`, every running session whose hold was due by `now_ms` and never
    /// came.
    pub fn lapse(&mut self, now_ms: u64) {
        let mut due = Vec::new();
        pop_expired(&mut self.hold_due, now_ms, |sid, _| due.push(sid));
        for sid in due {
            if self.running(&sid).is_some_and(|s| !s.held) {
                self.end(&sid, Status::Failed);
            }
        }
    }

    /// End a running session with `status`: free its parent's slot, release every
    /// reservation it holds, and drop its grants.
    pub fn end(&mut self, sid: &str, status: Status) {
        let Some(session) = self.sessions.get_mut(sid).filter(|s| s.status == Status::Running) else {
            return;
        };
        session.status = status;
        session.grants = None;
        let (parent, owner) = (session.parent.clone(), session.owner);
        uncount(&mut self.census, owner);
        if let Some(p) = parent.and_then(|p| self.sessions.get_mut(&p)) {
            p.running_children = p.running_children.saturating_sub(1);
        }
        for jti in self.held.remove(sid).unwrap_or_default() {
            if let Some(r) = self.reservations.remove(&jti) {
                uncount(&mut self.census, r.owner);
            }
        }
        self.ended.push_back(sid.to_string());
        while self.ended.len() > MAX_ENDED {
            if let Some(old) = self.ended.pop_front() {
                if self
                    .sessions
                    .get(&old)
                    .is_some_and(|s| s.status != Status::Running)
                {
                    self.sessions.remove(&old);
                }
            }
        }
    }
}

/// One fewer live capsule in `owner`'s census (an owner at zero leaves the map).
fn uncount(census: &mut HashMap<Owner, usize>, owner: Owner) {
    if let Some(n) = census.get_mut(&owner) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            census.remove(&owner);
        }
    }
}

/// Forget that `parent` holds reservation `jti`.
fn unhold(held: &mut HashMap<String, Vec<String>>, parent: &str, jti: &str) {
    if let Some(ids) = held.get_mut(parent) {
        ids.retain(|id| id != jti);
        if ids.is_empty() {
            held.remove(parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(parent: Option<&str>) -> Session {
        Session {
            status: Status::Running,
            depth_remaining: 1,
            parent: parent.map(String::from),
            grants: None,
            running_children: 0,
            held: false,
            owner: 0,
        }
    }

    #[test]
    fn a_session_never_held_lapses_and_ended_ones_are_forgotten_past_the_history() {
        let mut s = State::default();
        s.register("a", session(None), None);
        s.hold_due("a", 100);
        s.register("b", session(None), None);
        s.hold_due("b", 100);
        s.held("b");
        s.lapse(99);
        assert_eq!(s.live_capsules(0, 99), 2);
        s.lapse(100);
        assert_eq!(s.sessions["a"].status, Status::Failed);
        assert_eq!(
            (s.sessions["b"].status, s.live_capsules(0, 100)),
            (Status::Running, 1)
        );
        for i in 0..(MAX_ENDED * 3) {
            let sid = format!("s{i}");
            s.register(&sid, session(None), None);
            s.end(&sid, Status::Complete);
        }
        assert_eq!(
            s.sessions.len(),
            MAX_ENDED + 1,
            "the ended history plus the running b"
        );
        assert_eq!(s.ended.len(), MAX_ENDED);
        assert!(s.running("b").is_some());
    }

    #[test]
    fn reservations_count_until_redeemed_released_or_expired() {
        let mut s = State::default();
        s.register("p", session(None), None);
        s.reserve("j1".into(), "p", 0, 60_000);
        s.reserve("j2".into(), "p", 0, 60_000);
        assert_eq!((s.live_capsules(0, 0), s.live_children("p", 0)), (3, 2));
        // Redeemed: the reservation becomes a running child, counts unchanged.
        s.register("c", session(Some("p")), Some("j1"));
        assert_eq!((s.live_capsules(0, 1), s.live_children("p", 1)), (3, 2));
        // Expired unredeemed reservation: released when read.
        assert_eq!((s.live_capsules(0, 60_000), s.live_children("p", 60_000)), (2, 1));
        // Child deregisters: its slot is released.
        s.end("c", Status::Complete);
        assert_eq!((s.live_capsules(0, 60_001), s.live_children("p", 60_001)), (1, 0));
        // Parent deregisters: its reservations go too.
        s.reserve("j3".into(), "p", 0, 200_000);
        assert_eq!(s.live_capsules(0, 100_000), 2);
        s.end("p", Status::Failed);
        assert_eq!(s.live_capsules(0, 100_000), 0);
        assert_eq!(s.sessions["p"].status, Status::Failed);
    }

    #[test]
    fn each_account_counts_in_its_own_census_and_a_child_in_its_parents() {
        let mut s = State::default();
        s.register("p", session(None), None);
        s.register(
            "x",
            Session {
                owner: 4242,
                ..session(None)
            },
            None,
        );
        s.register(
            "y",
            Session {
                owner: 4242,
                ..session(None)
            },
            None,
        );
        s.reserve("j".into(), "x", 4242, 60_000);
        assert_eq!((s.live_capsules(0, 1), s.live_capsules(4242, 1)), (1, 3));
        // Redeemed by a child of x: still x's owner's, unchanged.
        s.register(
            "c",
            Session {
                owner: 4242,
                ..session(Some("x"))
            },
            Some("j"),
        );
        assert_eq!((s.live_capsules(0, 2), s.live_capsules(4242, 2)), (1, 3));
        for sid in ["c", "x", "y"] {
            s.end(sid, Status::Failed);
        }
        assert_eq!((s.live_capsules(0, 3), s.live_capsules(4242, 3)), (1, 0));
        assert_eq!(s.census.len(), 1, "an account at zero leaves the census");
    }

    #[test]
    fn expired_records_leave_the_maps() {
        let mut s = State::default();
        s.register("p", session(None), None);
        for i in 0..100u64 {
            s.reserve(format!("j{i}"), "p", 0, 1000 + i);
            assert!(s.spend(&format!("x{i}"), 1000 + i, 0));
        }
        // Expiries 1000..=1050 have passed at 1050: 51 of each gone, 49 left.
        assert_eq!(s.live_children("p", 1050), 49);
        assert!(s.spend("y", 5000, 1050));
        assert_eq!(s.spent.len(), 50);
        assert_eq!(s.live_capsules(0, 2000), 1);
        assert!(s.held.is_empty() && s.reservations.is_empty());
        // A parent that ends takes its reservations with it.
        s.reserve("k".into(), "p", 0, 9000);
        s.end("p", Status::Complete);
        assert_eq!((s.live_capsules(0, 2001), s.held.len()), (0, 0));
    }

    #[test]
    fn spent_ids_are_remembered_until_their_expiry() {
        let mut s = State::default();
        assert!(s.spend("j", 100, 0));
        assert!(!s.spend("j", 100, 99));
        assert!(
            s.spend("j", 200, 100),
            "forgotten once expired; the expiry check refuses it first"
        );
    }
}
