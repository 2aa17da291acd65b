//! The daemon's records, owned by the event loop thread: sessions, reservations (granted,
//! unredeemed approvals) and spent approval ids. Expiry is evaluated when a figure is read,
//! never swept on a timer: a read first drops what has expired by `now_ms`.

use crate::manifest::Envelope;
use std::collections::HashMap;

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
    pub grants: Option<Grants>,
    /// Running children registered under this session.
    pub running_children: usize,
}

#[derive(Debug, Clone)]
pub struct Reservation {
    pub parent: String,
    pub exp: u64,
}

/// All the daemon holds.
#[derive(Debug, Default)]
pub struct State {
    pub sessions: HashMap<String, Session>,
    reservations: HashMap<String, Reservation>,
    /// Spent approval ids and their expiry; an id is kept until its approval has expired.
    spent: HashMap<String, u64>,
    running: usize,
}

impl State {
    /// Drop reservations that have expired by `now_ms`.
    fn expire(&mut self, now_ms: u64) {
        self.reservations.retain(|_, r| now_ms < r.exp);
    }

    /// Capsules live on this host: running sessions plus unexpired, unredeemed approvals.
    pub fn live_capsules(&mut self, now_ms: u64) -> usize {
        self.expire(now_ms);
        self.running + self.reservations.len()
    }

    /// Children `sid` holds: its running children plus its unexpired reservations.
    pub fn live_children(&mut self, sid: &str, now_ms: u64) -> usize {
        self.expire(now_ms);
        let running = self.sessions.get(sid).map_or(0, |s| s.running_children);
        running + self.reservations.values().filter(|r| r.parent == sid).count()
    }

    /// The running session `sid`, if it is running.
    pub fn running(&self, sid: &str) -> Option<&Session> {
        self.sessions.get(sid).filter(|s| s.status == Status::Running)
    }

    /// Reserve a slot under `parent` for approval `jti`.
    pub fn reserve(&mut self, jti: String, parent: &str, exp: u64) {
        self.reservations.insert(
            jti,
            Reservation {
                parent: parent.to_string(),
                exp,
            },
        );
    }

    /// Mark approval `jti` spent. False if it already was.
    pub fn spend(&mut self, jti: &str, exp: u64, now_ms: u64) -> bool {
        self.spent.retain(|_, e| now_ms < *e);
        if self.spent.contains_key(jti) {
            return false;
        }
        self.spent.insert(jti.to_string(), exp);
        true
    }

    /// Register a running session; a redeemed reservation becomes a running child.
    pub fn register(&mut self, sid: &str, session: Session, redeemed: Option<&str>) {
        if let Some(jti) = redeemed {
            self.reservations.remove(jti);
        }
        if let Some(parent) = session.parent.as_deref().and_then(|p| self.sessions.get_mut(p)) {
            parent.running_children += 1;
        }
        self.running += 1;
        self.sessions.insert(sid.to_string(), session);
    }

    /// End a running session with `status`: free its parent's slot, release every
    /// reservation it holds, and drop its grants.
    pub fn end(&mut self, sid: &str, status: Status) {
        let Some(session) = self.sessions.get_mut(sid).filter(|s| s.status == Status::Running) else {
            return;
        };
        session.status = status;
        session.grants = None;
        let parent = session.parent.clone();
        self.running -= 1;
        if let Some(p) = parent.and_then(|p| self.sessions.get_mut(&p)) {
            p.running_children = p.running_children.saturating_sub(1);
        }
        self.reservations.retain(|_, r| r.parent != sid);
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
        }
    }

    #[test]
    fn reservations_count_until_redeemed_released_or_expired() {
        let mut s = State::default();
        s.register("p", session(None), None);
        s.reserve("j1".into(), "p", 60_000);
        s.reserve("j2".into(), "p", 60_000);
        assert_eq!((s.live_capsules(0), s.live_children("p", 0)), (3, 2));
        // Redeemed: the reservation becomes a running child, counts unchanged.
        s.register("c", session(Some("p")), Some("j1"));
        assert_eq!((s.live_capsules(1), s.live_children("p", 1)), (3, 2));
        // Expired unredeemed reservation: released when read.
        assert_eq!((s.live_capsules(60_000), s.live_children("p", 60_000)), (2, 1));
        // Child deregisters: its slot is released.
        s.end("c", Status::Complete);
        assert_eq!((s.live_capsules(60_001), s.live_children("p", 60_001)), (1, 0));
        // Parent deregisters: its reservations go too.
        s.reserve("j3".into(), "p", 200_000);
        assert_eq!(s.live_capsules(100_000), 2);
        s.end("p", Status::Failed);
        assert_eq!(s.live_capsules(100_000), 0);
        assert_eq!(s.sessions["p"].status, Status::Failed);
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
