//! Players and their sessions, across worlds: who is connected (and since when not), the
//! resume tokens, and the delivery of events about a player's agents to every connection of
//! that player.
//!
//! This holds no world state: ownership lives in each world's thread, which asks here only
//! whether an owner is connected, and hands here the events about owned agents. One short
//! mutex guards the maps (never held across an await or a world request).
//!
//! **Invariant:** every map here is bounded: sessions and known players by
//! `auth.max_sessions`, connections per player by `auth.max_connections_per_player` (an
//! admin's only by `auth.max_sessions`: every connection holds a session), events kept for a
//! disconnected player by `auth.pending_events_per_player`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steer_proto as proto;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::frames::Shared;
use super::world::SessionId;
use crate::auth::{Identity, random_hex};
use crate::config::AuthSettings;

/// A message to one connection, encoded by its send task.
pub type Direct = Arc<Shared<proto::ServerMsg>>;

/// A connection as the registry knows it.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    /// Events about the player's agents.
    pub events: mpsc::Sender<Direct>,
    /// Cancelled to kick the connection.
    pub kick: CancellationToken,
    /// Bytes sent to it over the last second (its send task updates it).
    pub bytes_per_sec: Arc<AtomicU64>,
}

#[derive(Debug)]
struct Player {
    role: proto::Role,
    team: Option<String>,
    conns: HashMap<SessionId, ConnHandle>,
    /// Since when it has no connection.
    gone_since: Option<Instant>,
    /// Events about its agents while it had no connection.
    pending: VecDeque<Direct>,
    dropped: u64,
}

#[derive(Debug)]
struct Session {
    identity: Identity,
    /// (world, area, every_n_ticks) subscriptions saved at the drop.
    subs: Vec<(String, proto::Area, u32)>,
    /// The connection using it, if any.
    conn: Option<SessionId>,
    /// When it stops being resumable (set at the drop).
    expires: Option<Instant>,
}

/// A resumed session: who, and what it watched.
#[derive(Debug, Clone)]
pub struct Resumed {
    /// The session's identity.
    pub identity: Identity,
    /// Its subscriptions.
    pub subs: Vec<(String, proto::Area, u32)>,
}

/// Why a connection could not join.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// Resume token unknown or expired.
    #[error("resume token unknown or expired")]
    BadResume,
    /// Too many connections of the player.
    #[error("player `{0}` has {1} connections already (auth.max_connections_per_player)")]
    TooManyConnections(String, usize),
    /// Too many sessions on the server.
    #[error("the server keeps {0} sessions already (auth.max_sessions); try again later")]
    TooManySessions(usize),
}

/// One row of `GET /worlds/{w}/players` (the registry's part).
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerInfo {
    pub role: proto::Role,
    pub team: Option<String>,
    pub connections: usize,
    pub bytes_per_sec: u64,
    pub connected: bool,
}

#[derive(Debug, Default)]
struct Inner {
    players: HashMap<String, Player>,
    sessions: HashMap<String, Session>,
}

/// Every player and session of the server.
#[derive(Debug)]
pub struct Players {
    inner: Mutex<Inner>,
    settings: AuthSettings,
    /// How long a dropped session stays resumable (the longest world grace).
    grace: Duration,
}

impl Players {
    /// An empty registry.
    pub fn new(settings: AuthSettings, grace_secs: u32) -> Self {
        Players { inner: Mutex::new(Inner::default()), settings, grace: Duration::from_secs(u64::from(grace_secs)) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes over a dropped session (its identity and subscriptions).
    pub fn resume(&self, token: &str) -> Result<Resumed, JoinError> {
        let mut g = self.lock();
        let now = Instant::now();
        let s = g.sessions.get(token).ok_or(JoinError::BadResume)?;
        if s.expires.is_some_and(|e| e <= now) {
            g.sessions.remove(token);
            return Err(JoinError::BadResume);
        }
        let s = g.sessions.remove(token).ok_or(JoinError::BadResume)?;
        Ok(Resumed { identity: s.identity, subs: s.subs })
    }

    /// Registers a connection of `identity`; answers its new resume token and the events kept
    /// for the player while it was away.
    pub fn join(&self, identity: &Identity, id: SessionId, conn: ConnHandle) -> Result<(String, Vec<Direct>), JoinError> {
        let mut g = self.lock();
        let now = Instant::now();
        Self::prune(&mut g, now, self.grace);
        let admin = identity.role == proto::Role::Admin;
        if g.sessions.len() >= self.settings.max_sessions || (!g.players.contains_key(&identity.player) && g.players.len() >= self.settings.max_sessions) {
            return Err(JoinError::TooManySessions(self.settings.max_sessions));
        }
        let have = g.players.get(&identity.player).map_or(0, |p| p.conns.len());
        if !admin && have >= self.settings.max_connections_per_player {
            return Err(JoinError::TooManyConnections(identity.player.clone(), have));
        }
        let p = g.players.entry(identity.player.clone()).or_insert_with(|| Player {
            role: identity.role,
            team: identity.team.clone(),
            conns: HashMap::new(),
            gone_since: None,
            pending: VecDeque::new(),
            dropped: 0,
        });
        p.role = identity.role;
        p.team = identity.team.clone();
        p.conns.insert(id, conn);
        p.gone_since = None;
        let pending: Vec<Direct> = p.pending.drain(..).collect();
        let token = random_hex(16);
        g.sessions.insert(token.clone(), Session { identity: identity.clone(), subs: Vec::new(), conn: Some(id), expires: None });
        Ok((token, pending))
    }

    /// A connection ended: its session becomes resumable for the grace period with `subs`.
    pub fn leave(&self, player: &str, id: SessionId, token: &str, subs: Vec<(String, proto::Area, u32)>) {
        let mut g = self.lock();
        let now = Instant::now();
        if let Some(s) = g.sessions.get_mut(token).filter(|s| s.conn == Some(id)) {
            s.conn = None;
            s.subs = subs;
            s.expires = Some(now + self.grace);
        }
        if let Some(p) = g.players.get_mut(player) {
            p.conns.remove(&id);
            if p.conns.is_empty() {
                p.gone_since = Some(now);
            }
        }
    }

    /// Drops expired sessions and players gone for long, with nothing pending.
    fn prune(g: &mut Inner, now: Instant, grace: Duration) {
        g.sessions.retain(|_, s| s.expires.is_none_or(|e| e > now));
        // A player's entry (and the events kept for it) outlives its sessions by a grace
        // period more, so that a player who comes back after its agents were despawned still
        // hears of it.
        g.players.retain(|_, p| !p.conns.is_empty() || p.gone_since.is_none_or(|t| now.duration_since(t) < grace * 2 + Duration::from_secs(60)));
    }

    /// True while the player has a connection.
    pub fn connected(&self, player: &str) -> bool {
        self.lock().players.get(player).is_some_and(|p| !p.conns.is_empty())
    }

    /// Hands an event about a player's agents to each of its connections (or keeps it, bounded,
    /// while it has none). Called by world threads: never blocks.
    pub fn deliver(&self, player: &str, msg: &Direct) {
        let mut g = self.lock();
        let Some(p) = g.players.get_mut(player) else { return };
        if p.conns.is_empty() {
            if p.pending.len() >= self.settings.pending_events_per_player {
                p.pending.pop_front();
                p.dropped += 1;
            }
            p.pending.push_back(msg.clone());
            return;
        }
        for c in p.conns.values() {
            // A connection whose queue is full is behind; its own policies deal with it.
            let _ = c.events.try_send(msg.clone());
        }
    }

    /// Kicks a player: closes its connections and forgets its sessions. True if it was known.
    pub fn kick(&self, player: &str) -> bool {
        let mut g = self.lock();
        g.sessions.retain(|_, s| s.identity.player != player);
        match g.players.remove(player) {
            Some(p) => {
                for c in p.conns.values() {
                    c.kick.cancel();
                }
                true
            }
            None => false,
        }
    }

    /// What the registry knows of a player.
    pub fn info(&self, player: &str) -> Option<PlayerInfo> {
        let g = self.lock();
        g.players.get(player).map(|p| PlayerInfo {
            role: p.role,
            team: p.team.clone(),
            connections: p.conns.len(),
            bytes_per_sec: p.conns.values().map(|c| c.bytes_per_sec.load(Ordering::Relaxed)).sum(),
            connected: !p.conns.is_empty(),
        })
    }

    /// Every connected player id.
    pub fn connected_players(&self) -> Vec<String> {
        self.lock().players.iter().filter(|(_, p)| !p.conns.is_empty()).map(|(k, _)| k.clone()).collect()
    }

    /// The team of a known player.
    pub fn team(&self, player: &str) -> Option<String> {
        self.lock().players.get(player).and_then(|p| p.team.clone())
    }

    /// Number of sessions (live and resumable).
    pub fn sessions(&self) -> usize {
        self.lock().sessions.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> (ConnHandle, mpsc::Receiver<Direct>) {
        let (tx, rx) = mpsc::channel(4);
        (ConnHandle { events: tx, kick: CancellationToken::new(), bytes_per_sec: Arc::default() }, rx)
    }

    fn alice() -> Identity {
        Identity { player: "alice".into(), role: proto::Role::Player, team: None, worlds: None }
    }

    fn ev(a: u32) -> Direct {
        Arc::new(Shared::new(proto::ServerMsg::Event(proto::Event { world: 1, tick: 1, event: proto::EventKind::DestinationReached(proto::AgentEvent { agent: a }) })))
    }

    #[test]
    fn sessions_resume_once_within_grace_and_events_wait_for_the_player() {
        let p = Players::new(AuthSettings { max_connections_per_player: 2, pending_events_per_player: 2, ..AuthSettings::default() }, 30);
        let (c, mut rx) = conn();
        let (tok, pending) = p.join(&alice(), 1, c).unwrap();
        assert!(pending.is_empty() && p.connected("alice"));
        p.deliver("alice", &ev(1));
        assert!(rx.try_recv().is_ok());
        p.leave("alice", 1, &tok, vec![("demo".into(), proto::Area::WholeWorld(proto::WholeWorld {}), 1)]);
        assert!(!p.connected("alice"));
        for a in 0..3 {
            p.deliver("alice", &ev(a));
        }
        let r = p.resume(&tok).unwrap();
        assert_eq!((r.identity.player.as_str(), r.subs.len()), ("alice", 1));
        assert_eq!(p.resume(&tok).unwrap_err(), JoinError::BadResume, "a resume token works once");
        let (c, _rx) = conn();
        let (_, pending) = p.join(&r.identity, 2, c).unwrap();
        assert_eq!(pending.len(), 2, "bounded by pending_events_per_player");
        let (c3, _r3) = conn();
        p.join(&alice(), 3, c3).unwrap();
        let (c4, _r4) = conn();
        assert!(matches!(p.join(&alice(), 4, c4), Err(JoinError::TooManyConnections(..))));
        assert!(p.kick("alice") && !p.connected("alice"));
    }

    #[test]
    fn expired_sessions_do_not_resume_and_the_count_is_bounded() {
        let p = Players::new(AuthSettings { max_sessions: 2, ..AuthSettings::default() }, 0);
        let (c, _rx) = conn();
        let (tok, _) = p.join(&alice(), 1, c).unwrap();
        p.leave("alice", 1, &tok, vec![]);
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(p.resume(&tok).unwrap_err(), JoinError::BadResume);
        let (c, _r1) = conn();
        p.join(&alice(), 2, c).unwrap();
        let (c, _r2) = conn();
        p.join(&alice(), 3, c).unwrap();
        let (c, _r3) = conn();
        assert!(matches!(p.join(&alice(), 4, c), Err(JoinError::TooManySessions(2))));
    }
}
