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
//! disconnected player by `auth.pending_events_per_player`. The sessions of one player are
//! bounded by `auth.max_sessions_per_player`, and those of anonymous dev-mode players from one
//! IP address by `auth.max_sessions_per_ip`: a join at such a cap evicts the oldest resumable
//! session under it, so that one client cycling connections never fills the server's table.
//!
//! **Resume rules:** a session is taken over only after its connection dropped, within the
//! grace period, and while the player token it was opened with is valid (`exp`, with
//! [`crate::auth::LEEWAY_SECS`]); a token presented with the resume must be the session's
//! player's. A refused resume leaves the session as it was (an expired one is removed).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steer_proto as proto;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::frames::Shared;
use crate::auth::{Identity, now_secs, random_hex};
use crate::config::AuthSettings;

/// A connection's id.
pub type SessionId = u64;

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
    /// When it stops being resumable (set at the drop; also what orders the resumable sessions
    /// by age).
    until: Option<Instant>,
    /// The peer address of an anonymous dev-mode player's connection (what
    /// `auth.max_sessions_per_ip` counts); none for everyone else.
    ip: Option<IpAddr>,
    /// Handed over by another server with a world that waits for it to resume: its place in
    /// the world's count of sessions it still waits for (the resume hands it on; a session
    /// dropped unresumed drops it).
    awaited: Option<Awaited>,
}

/// A resumed session that a world arrived by a handoff waits for: the world ticks once every
/// such session dropped its `Awaited` (or its wait ran out). The connection drops it after its
/// restored subscriptions are in place, so that it gets every frame from the world's first tick.
#[derive(Debug)]
pub struct Awaited(Arc<std::sync::atomic::AtomicUsize>);

impl Awaited {
    /// One more session `count` waits for.
    pub fn counted_in(count: &Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Awaited(count.clone())
    }
}

impl Drop for Awaited {
    fn drop(&mut self) {
        // Saturating: a count the world stopped watching may already be 0.
        let _ = self.0.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }
}

/// A session as a handoff carries it to the server that takes the world (`http/handoff.rs`):
/// the resume token the client holds, who it is, and its subscriptions to the world.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MovedSession {
    /// The key of the resume token the client holds (its SHA-256, as sessions are kept: the
    /// token itself never leaves the server that issued it).
    pub token: String,
    pub player: String,
    pub role: proto::Role,
    pub team: Option<String>,
    pub worlds: Option<Vec<String>>,
    pub expires: Option<u64>,
    /// Its subscriptions to the world: (world, area, every_n_ticks).
    pub subs: Vec<(String, proto::Area, u32)>,
    /// It had a connection when the world left: the world waits for it to resume.
    pub live: bool,
}

impl Session {
    /// Resumable: its connection dropped (it may have expired all the same).
    fn dropped(&self) -> bool {
        self.conn.is_none()
    }
}

/// A connection that joined: who, the subscriptions to restore (a resume), its resume token, and
/// the events kept for the player while it was away.
#[derive(Debug)]
pub struct Joined {
    /// Who it is.
    pub identity: Identity,
    /// The resumed session's subscriptions (none for a fresh join).
    pub subs: Vec<(String, proto::Area, u32)>,
    /// Its new resume token.
    pub token: String,
    /// Events about the player's agents kept while it had no connection.
    pub pending: Vec<Direct>,
    /// A world that arrived by a handoff waits for this session: drop it once the restored
    /// subscriptions are in place.
    pub awaited: Option<Awaited>,
}

/// Why a connection could not join.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// Resume token unknown or expired.
    #[error("resume token unknown or expired")]
    BadResume,
    /// The session of the resume token still has its connection.
    #[error("the session of this resume token is still connected; resume once its connection has closed")]
    SessionInUse,
    /// The player token the session was opened with has expired.
    #[error("the player token of this session has expired; connect with a fresh token")]
    SessionExpired,
    /// The token presented with the resume is another player's.
    #[error("the resume token belongs to another player")]
    OtherPlayer,
    /// Too many connections of the player.
    #[error("player `{0}` has {1} connections already (auth.max_connections_per_player)")]
    TooManyConnections(String, usize),
    /// Every session of the player is live, and there are as many as allowed.
    #[error("player `{0}` has {1} live sessions already (auth.max_sessions_per_player)")]
    TooManyPlayerSessions(String, usize),
    /// Too many sessions on the server.
    #[error("the server keeps {0} sessions already (auth.max_sessions); try again later")]
    TooManySessions(usize),
}

impl JoinError {
    /// A per-player or per-address quota (answered `quota_exceeded`).
    pub fn is_quota(&self) -> bool {
        matches!(self, JoinError::TooManyConnections(..) | JoinError::TooManyPlayerSessions(..))
    }

    /// A refused resume token (answered `unauthorized`, field `resume`).
    pub fn is_resume(&self) -> bool {
        matches!(self, JoinError::BadResume | JoinError::SessionInUse | JoinError::SessionExpired | JoinError::OtherPlayer)
    }
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
    /// By [`token_key`] of their resume token (the token itself is only its client's).
    sessions: HashMap<String, Session>,
}

/// The key a session is kept under: the SHA-256 of its resume token, hex. Durable worlds'
/// snapshots store this key, never the token.
pub fn token_key(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
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

    /// Registers a connection of `identity` from `peer`: a new session, its resume token, and
    /// the events kept for the player while it was away. At `auth.max_sessions_per_player` (or,
    /// for an anonymous player, `auth.max_sessions_per_ip` sessions of anonymous players from
    /// `peer`) the oldest resumable session under that cap is evicted; with every one of them
    /// live the join is refused (the admin's never is).
    pub fn join(&self, identity: &Identity, id: SessionId, conn: ConnHandle, peer: Option<IpAddr>) -> Result<Joined, JoinError> {
        let mut g = self.lock();
        Self::prune(&mut g, Instant::now(), self.grace, now_secs());
        self.admit(&mut g, identity, peer, None)?;
        Ok(Self::register(&mut g, identity.clone(), Vec::new(), id, conn, peer))
    }

    /// Takes over the session of resume token `token` for a new connection from `peer`, with its
    /// subscriptions; answers as [`Players::join`]. `presented`: who the token sent with the
    /// resume (if any) authenticated as, checked before the session is touched.
    ///
    /// Refused, leaving the session as it was: while the session still has its connection
    /// ([`JoinError::SessionInUse`]: a resume takes over a *dropped* session only, so a stolen
    /// resume token cannot take a live session away from its owner); when `presented` is
    /// another player ([`JoinError::OtherPlayer`]); when a quota refuses the connection.
    /// Refused and removed: after the grace period ([`JoinError::BadResume`]), or once the
    /// player token the session was opened with has expired ([`JoinError::SessionExpired`],
    /// with [`crate::auth::LEEWAY_SECS`] of leeway), so chained resumes never outlive it.
    ///
    /// The new session goes on under `presented` when given (a fresh token of the same player
    /// brings its own expiry), else under the session's identity (and its expiry).
    pub fn resume(&self, token: &str, presented: Option<&Identity>, id: SessionId, conn: ConnHandle, peer: Option<IpAddr>) -> Result<Joined, JoinError> {
        let mut g = self.lock();
        let now = Instant::now();
        let secs = now_secs();
        let key = token_key(token);
        let token = key.as_str();
        let s = g.sessions.get(token).ok_or(JoinError::BadResume)?;
        if !s.dropped() {
            return Err(JoinError::SessionInUse);
        }
        if presented.is_some_and(|p| p.player != s.identity.player) {
            return Err(JoinError::OtherPlayer);
        }
        if s.until.is_some_and(|e| e <= now) {
            g.sessions.remove(token);
            return Err(JoinError::BadResume);
        }
        if s.identity.expired_at(secs) {
            g.sessions.remove(token);
            return Err(JoinError::SessionExpired);
        }
        let identity = presented.cloned().unwrap_or_else(|| s.identity.clone());
        Self::prune(&mut g, now, self.grace, secs);
        self.admit(&mut g, &identity, peer, Some(token))?;
        let (subs, awaited) = g.sessions.remove(token).map(|s| (s.subs, s.awaited)).unwrap_or_default();
        let mut joined = Self::register(&mut g, identity, subs, id, conn, peer);
        joined.awaited = awaited;
        Ok(joined)
    }

    /// Checks the caps for one more session of `identity` from `peer` (`replacing`: a session
    /// it takes the place of, not counted) and evicts the resumable sessions that make room
    /// under the per-player and per-address caps. Nothing changes when it refuses.
    fn admit(&self, g: &mut Inner, identity: &Identity, peer: Option<IpAddr>, replacing: Option<&str>) -> Result<(), JoinError> {
        let st = &self.settings;
        let admin = identity.role == proto::Role::Admin;
        let have = g.players.get(&identity.player).map_or(0, |p| p.conns.len());
        if !admin && have >= st.max_connections_per_player {
            return Err(JoinError::TooManyConnections(identity.player.clone(), have));
        }
        let mut victims = Vec::new();
        if !Self::make_room(g, |s| s.identity.player == identity.player, st.max_sessions_per_player, replacing, !admin, &mut victims) {
            return Err(JoinError::TooManyPlayerSessions(identity.player.clone(), st.max_sessions_per_player));
        }
        let ip = peer.filter(|_| identity.is_anonymous());
        if let Some(ip) = ip {
            // Live anonymous connections are bounded by `limits.max_connections` (a dev-mode
            // swarm on loopback is all one address): this cap evicts resumable ones only.
            Self::make_room(g, |s| s.ip == Some(ip), st.max_sessions_per_ip, replacing, false, &mut victims);
        }
        let replaced = replacing.is_some_and(|t| g.sessions.contains_key(t));
        if g.sessions.len() - victims.len() - usize::from(replaced) >= st.max_sessions {
            return Err(JoinError::TooManySessions(st.max_sessions));
        }
        if !g.players.contains_key(&identity.player) && g.players.len() - Self::freed_players(g, &victims) >= st.max_sessions {
            return Err(JoinError::TooManySessions(st.max_sessions));
        }
        for t in &victims {
            Self::evict(g, t);
        }
        Ok(())
    }

    /// Adds to `victims` the oldest resumable sessions matching `of` (not already there, nor
    /// `replacing`) that must go for one more to fit under `cap`. False, adding none, if the
    /// live ones leave no room and `refuse`; without `refuse` every resumable one goes then.
    fn make_room(g: &Inner, of: impl Fn(&Session) -> bool, cap: usize, replacing: Option<&str>, refuse: bool, victims: &mut Vec<String>) -> bool {
        let mut live = 0usize;
        let mut dropped: Vec<(Option<Instant>, &String)> = Vec::new();
        for (t, s) in &g.sessions {
            if Some(t.as_str()) == replacing || victims.contains(t) || !of(s) {
                continue;
            }
            if s.dropped() {
                dropped.push((s.until, t));
            } else {
                live += 1;
            }
        }
        let need = (live + dropped.len() + 1).saturating_sub(cap);
        if need > dropped.len() && refuse {
            return false;
        }
        dropped.sort_unstable();
        victims.extend(dropped.into_iter().take(need).map(|(_, t)| t.clone()));
        true
    }

    /// Players whose entry evicting `victims` removes (see [`Players::evict`]).
    fn freed_players(g: &Inner, victims: &[String]) -> usize {
        let anon: HashSet<&str> = victims.iter().filter_map(|t| g.sessions.get(t)).filter(|s| s.identity.is_anonymous()).map(|s| s.identity.player.as_str()).collect();
        anon.into_iter()
            .filter(|p| g.players.get(*p).is_some_and(|pl| pl.conns.is_empty()))
            .filter(|p| !g.sessions.iter().any(|(t, s)| s.identity.player == *p && !victims.contains(t)))
            .count()
    }

    /// Removes a session; an anonymous player left with no session and no connection goes too
    /// (it cannot come back: a new anonymous connection is a new player).
    fn evict(g: &mut Inner, token: &str) {
        let Some(s) = g.sessions.remove(token) else { return };
        if s.identity.is_anonymous()
            && g.players.get(&s.identity.player).is_some_and(|p| p.conns.is_empty())
            && !g.sessions.values().any(|o| o.identity.player == s.identity.player)
        {
            g.players.remove(&s.identity.player);
        }
    }

    /// Adds the session of a connection that was admitted.
    fn register(g: &mut Inner, identity: Identity, subs: Vec<(String, proto::Area, u32)>, id: SessionId, conn: ConnHandle, peer: Option<IpAddr>) -> Joined {
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
        let ip = peer.filter(|_| identity.is_anonymous());
        g.sessions.insert(token_key(&token), Session { identity: identity.clone(), subs: Vec::new(), conn: Some(id), until: None, ip, awaited: None });
        Joined { identity, subs, token, pending, awaited: None }
    }

    /// A connection ended: its session becomes resumable for the grace period with `subs`.
    pub fn leave(&self, player: &str, id: SessionId, token: &str, subs: Vec<(String, proto::Area, u32)>) {
        let mut g = self.lock();
        let now = Instant::now();
        if let Some(s) = g.sessions.get_mut(&token_key(token)).filter(|s| s.conn == Some(id)) {
            s.conn = None;
            s.subs = subs;
            s.until = Some(now + self.grace);
        }
        if let Some(p) = g.players.get_mut(player) {
            p.conns.remove(&id);
            if p.conns.is_empty() {
                p.gone_since = Some(now);
            }
        }
    }

    /// The sessions a durable world's snapshot keeps (`crate::persist::RunnerState`): those of
    /// `owners` (the players owning its agents) and the dropped ones subscribed to `world`, each
    /// with its subscriptions to `world` (a connected session's are its connection's, not known
    /// here: its client subscribes again when it resumes) and the grace it has left (the whole
    /// grace for a connected one: its connection ends with the process).
    pub fn stored_sessions(&self, world: &str, owners: &HashSet<&str>) -> Vec<crate::persist::StoredSession> {
        let g = self.lock();
        let now = Instant::now();
        let mut out: Vec<crate::persist::StoredSession> = g
            .sessions
            .iter()
            .filter(|(_, s)| owners.contains(s.identity.player.as_str()) || s.subs.iter().any(|x| x.0 == world))
            .filter(|(_, s)| s.until.is_none_or(|u| u > now))
            .map(|(key, s)| crate::persist::StoredSession {
                token_sha256: key.clone(),
                player: s.identity.player.clone(),
                role: s.identity.role,
                team: s.identity.team.clone(),
                worlds: s.identity.worlds.clone(),
                expires: s.identity.expires,
                subs: s.subs.iter().filter(|x| x.0 == world).map(|x| (x.1.clone(), x.2)).collect(),
                grace_ms: s.until.map_or(self.grace, |u| u.duration_since(now)).as_millis().min(u128::from(u64::MAX)) as u64,
            })
            .collect();
        out.sort_unstable_by(|a, b| a.token_sha256.cmp(&b.token_sha256));
        out
    }

    /// Makes sessions a snapshot kept resumable here (a world recovered after a restart, or
    /// moved from another server): each resumable with its old token for the grace it had
    /// left, counted from now (at most this server's grace). A session already known (another
    /// world of the same server kept it too) gains `world`'s subscriptions. Within
    /// `auth.max_sessions`: the rest are dropped (and counted in the answer).
    pub fn restore_sessions(&self, world: &str, sessions: &[crate::persist::StoredSession]) -> usize {
        let mut g = self.lock();
        let now = Instant::now();
        let mut refused = 0;
        for st in sessions {
            let subs: Vec<(String, proto::Area, u32)> = st.subs.iter().map(|(a, n)| (world.to_string(), a.clone(), *n)).collect();
            if let Some(s) = g.sessions.get_mut(&st.token_sha256) {
                if !s.subs.iter().any(|y| y.0 == world) {
                    s.subs.extend(subs);
                }
                continue;
            }
            if g.sessions.len() >= self.settings.max_sessions || st.token_sha256.len() != 64 {
                refused += 1;
                continue;
            }
            let identity = Identity { player: st.player.clone(), role: st.role, team: st.team.clone(), worlds: st.worlds.clone(), expires: st.expires };
            let until = now + Duration::from_millis(st.grace_ms).min(self.grace);
            g.players.entry(identity.player.clone()).or_insert_with(|| Player {
                role: identity.role,
                team: identity.team.clone(),
                conns: HashMap::new(),
                gone_since: Some(now),
                pending: VecDeque::new(),
                dropped: 0,
            });
            g.sessions.insert(st.token_sha256.clone(), Session { identity, subs, conn: None, until: Some(until), ip: None, awaited: None });
        }
        refused
    }

    /// Drops sessions past their grace period or, dropped, past their player token's expiry
    /// (`secs`: now, seconds since the Unix epoch), and players gone for long, with nothing
    /// pending.
    fn prune(g: &mut Inner, now: Instant, grace: Duration, secs: u64) {
        g.sessions.retain(|_, s| s.until.is_none_or(|e| e > now) && !(s.dropped() && s.identity.expired_at(secs)));
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

    /// The team of a known player.
    pub fn team(&self, player: &str) -> Option<String> {
        self.lock().players.get(player).and_then(|p| p.team.clone())
    }

    /// A live session's subscriptions changed (kept so that a handoff knows who uses a world).
    pub fn set_subs(&self, token: &str, id: SessionId, subs: &[(String, proto::Area, u32)]) {
        let mut g = self.lock();
        if let Some(s) = g.sessions.get_mut(&token_key(token)).filter(|s| s.conn == Some(id)) {
            s.subs.clear();
            s.subs.extend_from_slice(subs);
        }
    }

    /// The sessions that use world `world` — subscribed to it, or of a player in `owners` — and
    /// may use it, as a handoff carries them; and the connections of the live ones (to tell
    /// them where the world went).
    pub fn sessions_of_world(&self, world: &str, owners: &[String]) -> (Vec<MovedSession>, Vec<ConnHandle>) {
        let g = self.lock();
        let mut out = Vec::new();
        let mut conns = Vec::new();
        for (token, s) in &g.sessions {
            let subs: Vec<(String, proto::Area, u32)> = s.subs.iter().filter(|(w, _, _)| w == world).cloned().collect();
            if (subs.is_empty() && !owners.contains(&s.identity.player)) || s.identity.check_world(world).is_err() {
                continue;
            }
            let id = &s.identity;
            out.push(MovedSession {
                token: token.clone(),
                player: id.player.clone(),
                role: id.role,
                team: id.team.clone(),
                worlds: id.worlds.clone(),
                expires: id.expires,
                subs,
                live: s.conn.is_some(),
            });
            if let Some(c) = s.conn.and_then(|c| g.players.get(&id.player).and_then(|p| p.conns.get(&c))) {
                conns.push(c.clone());
            }
        }
        (out, conns)
    }

    /// Forgets sessions (handed over to another server with their world), by key.
    pub fn forget_sessions(&self, tokens: &[String]) {
        let mut g = self.lock();
        for t in tokens {
            g.sessions.remove(t);
        }
    }

    /// Takes over sessions handed over with a world: each resumable here for the grace period
    /// from now, with its subscriptions; the live ones count in `awaited` until they resume.
    /// Answers how many were taken: a token already known here is skipped, and so is every
    /// session past `auth.max_sessions`.
    pub fn adopt(&self, sessions: Vec<MovedSession>, awaited: &Arc<std::sync::atomic::AtomicUsize>) -> usize {
        let mut g = self.lock();
        let now = Instant::now();
        Self::prune(&mut g, now, self.grace, now_secs());
        let mut taken = 0;
        for m in sessions {
            if g.sessions.len() >= self.settings.max_sessions || g.sessions.contains_key(&m.token) {
                continue;
            }
            let identity = Identity { player: m.player, role: m.role, team: m.team, worlds: m.worlds, expires: m.expires };
            let live = m.live.then(|| Awaited::counted_in(awaited));
            g.sessions.insert(m.token, Session { identity, subs: m.subs, conn: None, until: Some(now + self.grace), ip: None, awaited: live });
            taken += 1;
        }
        taken
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

    fn player(name: &str, expires: u64) -> Identity {
        Identity { player: name.into(), role: proto::Role::Player, team: None, worlds: None, expires: Some(expires) }
    }

    fn alice() -> Identity {
        player("alice", now_secs() + 3600)
    }

    fn anon(n: u32) -> Identity {
        Identity { player: format!("anon-t-{n}"), role: proto::Role::Player, team: None, worlds: None, expires: None }
    }

    fn ev(a: u32) -> Direct {
        Arc::new(Shared::new(proto::ServerMsg::Event(proto::Event { world: 1, tick: 1, event: proto::EventKind::DestinationReached(proto::AgentEvent { agent: a }) })))
    }

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    /// Joins `who` as connection `id` and drops it at once; answers the resume token.
    fn join_and_leave(p: &Players, who: &Identity, id: SessionId, peer: Option<IpAddr>) -> String {
        let (c, _rx) = conn();
        let j = p.join(who, id, c, peer).unwrap();
        p.leave(&who.player, id, &j.token, vec![]);
        // Distinct drop times: the eviction order is by age.
        std::thread::sleep(Duration::from_millis(2));
        j.token
    }

    #[test]
    fn sessions_resume_once_within_grace_and_events_wait_for_the_player() {
        let p = Players::new(AuthSettings { max_connections_per_player: 2, pending_events_per_player: 2, ..AuthSettings::default() }, 30);
        let (c, mut rx) = conn();
        let j = p.join(&alice(), 1, c, None).unwrap();
        assert!(j.pending.is_empty() && j.subs.is_empty() && p.connected("alice"));
        p.deliver("alice", &ev(1));
        assert!(rx.try_recv().is_ok());
        p.leave("alice", 1, &j.token, vec![("demo".into(), proto::Area::WholeWorld(proto::WholeWorld {}), 1)]);
        assert!(!p.connected("alice"));
        for a in 0..3 {
            p.deliver("alice", &ev(a));
        }
        let (c, _rx) = conn();
        let r = p.resume(&j.token, None, 2, c, None).unwrap();
        assert_eq!((r.identity.player.as_str(), r.subs.len()), ("alice", 1));
        assert_eq!(r.pending.len(), 2, "bounded by pending_events_per_player");
        assert_ne!(r.token, j.token);
        let (c, _rx) = conn();
        assert_eq!(p.resume(&j.token, None, 3, c, None).unwrap_err(), JoinError::BadResume, "a resume token works once");
        let (c3, _r3) = conn();
        p.join(&alice(), 3, c3, None).unwrap();
        let (c4, _r4) = conn();
        assert!(matches!(p.join(&alice(), 4, c4, None), Err(JoinError::TooManyConnections(..))));
        assert!(p.kick("alice") && !p.connected("alice"));
        assert_eq!(p.sessions(), 0, "a kick voids the player's sessions");
    }

    #[test]
    fn expired_sessions_do_not_resume_and_the_count_is_bounded() {
        let p = Players::new(AuthSettings { max_sessions: 2, ..AuthSettings::default() }, 0);
        let tok = join_and_leave(&p, &alice(), 1, None);
        std::thread::sleep(Duration::from_millis(5));
        let (c, _rx) = conn();
        assert_eq!(p.resume(&tok, None, 9, c, None).unwrap_err(), JoinError::BadResume);
        let (c, _r1) = conn();
        p.join(&alice(), 2, c, None).unwrap();
        let (c, _r2) = conn();
        p.join(&player("bob", now_secs() + 60), 3, c, None).unwrap();
        let (c, _r3) = conn();
        assert!(matches!(p.join(&player("carol", now_secs() + 60), 4, c, None), Err(JoinError::TooManySessions(2))));
    }

    #[test]
    fn a_live_session_is_not_resumed_and_stays_as_it_was() {
        let p = Players::new(AuthSettings::default(), 30);
        let (c, _rx) = conn();
        let j = p.join(&alice(), 1, c, None).unwrap();
        let (c, _rx2) = conn();
        assert_eq!(p.resume(&j.token, None, 2, c, None).unwrap_err(), JoinError::SessionInUse);
        let (c, _rx2) = conn();
        assert_eq!(p.resume(&j.token, Some(&alice()), 2, c, None).unwrap_err(), JoinError::SessionInUse, "its own player's token does not help");
        assert_eq!(p.info("alice").map(|i| i.connections), Some(1), "the refused resume registered no connection");
        // Once its connection dropped, the same token resumes, with what it watched.
        p.leave("alice", 1, &j.token, vec![("demo".into(), proto::Area::WholeWorld(proto::WholeWorld {}), 2)]);
        let (c, _rx3) = conn();
        let r = p.resume(&j.token, None, 3, c, None).unwrap();
        assert_eq!((r.identity.player.as_str(), r.subs.len()), ("alice", 1));
        assert!(p.connected("alice"));
    }

    #[test]
    fn another_players_token_leaves_the_victims_session_valid() {
        let p = Players::new(AuthSettings::default(), 30);
        let tok = join_and_leave(&p, &alice(), 1, None);
        let (c, _rx) = conn();
        assert_eq!(p.resume(&tok, Some(&player("mallory", now_secs() + 60)), 2, c, None).unwrap_err(), JoinError::OtherPlayer);
        assert!(p.info("mallory").is_none(), "mallory was not registered");
        assert_eq!(p.sessions(), 1);
        let (c, _rx) = conn();
        let r = p.resume(&tok, Some(&alice()), 3, c, None).unwrap();
        assert_eq!(r.identity.player, "alice");
    }

    #[test]
    fn a_resume_after_the_token_expiry_is_refused_and_chains_keep_the_expiry() {
        let p = Players::new(AuthSettings::default(), 30);
        let now = now_secs();
        // Expired, but within the leeway: resumes, and the new session keeps the same expiry.
        let soon = player("alice", now - crate::auth::LEEWAY_SECS + 2);
        let tok = join_and_leave(&p, &soon, 1, None);
        let (c, _rx) = conn();
        let r = p.resume(&tok, None, 2, c, None).unwrap();
        assert_eq!(r.identity.expires, soon.expires, "a resume does not extend the token's expiry");
        p.leave("alice", 2, &r.token, vec![]);
        let (c, _rx) = conn();
        let r2 = p.resume(&r.token, None, 3, c, None).unwrap();
        assert_eq!(r2.identity.expires, soon.expires);
        p.leave("alice", 3, &r2.token, vec![]);
        // A fresh token of the same player brings its own expiry.
        let fresh = player("alice", now + 600);
        let (c, _rx) = conn();
        let r3 = p.resume(&r2.token, Some(&fresh), 4, c, None).unwrap();
        assert_eq!(r3.identity.expires, Some(now + 600));
        // Expired beyond the leeway: refused, and the session is gone.
        let old = player("bob", now - crate::auth::LEEWAY_SECS - 2);
        let tok = join_and_leave(&p, &old, 5, None);
        let (c, _rx) = conn();
        assert_eq!(p.resume(&tok, None, 6, c, None).unwrap_err(), JoinError::SessionExpired);
        let (c, _rx) = conn();
        assert_eq!(p.resume(&tok, None, 6, c, None).unwrap_err(), JoinError::BadResume);
        // And pruned with the next join.
        let tok = join_and_leave(&p, &old, 7, None);
        let before = p.sessions();
        let (c, _rx) = conn();
        p.join(&player("carol", now + 60), 8, c, None).unwrap();
        assert_eq!(p.sessions(), before, "bob's expired session pruned, carol's added");
        let (c, _rx) = conn();
        assert_eq!(p.resume(&tok, None, 9, c, None).unwrap_err(), JoinError::BadResume);
    }

    #[test]
    fn a_player_at_its_session_cap_evicts_its_oldest_dropped_session() {
        let p = Players::new(AuthSettings { max_sessions_per_player: 3, ..AuthSettings::default() }, 30);
        let toks: Vec<String> = (1..=3).map(|id| join_and_leave(&p, &alice(), id, None)).collect();
        assert_eq!(p.sessions(), 3);
        let (c, _rx) = conn();
        p.join(&alice(), 4, c, None).unwrap();
        assert_eq!(p.sessions(), 3);
        let (c, _rx) = conn();
        assert_eq!(p.resume(&toks[0], None, 5, c, None).unwrap_err(), JoinError::BadResume, "the oldest dropped session was evicted");
        let (c, _rx2) = conn();
        p.resume(&toks[1], None, 6, c, None).unwrap();
        let (c, _rx3) = conn();
        p.resume(&toks[2], None, 7, c, None).unwrap();
        // Three live sessions: a fourth is refused and nothing changes.
        let (c, _rx4) = conn();
        assert_eq!(p.join(&alice(), 8, c, None).unwrap_err(), JoinError::TooManyPlayerSessions("alice".into(), 3));
        assert_eq!((p.sessions(), p.info("alice").map(|i| i.connections)), (3, Some(3)));
        // The admin is exempt from the refusal, but its dropped sessions are evicted all the same.
        let admin = Identity::admin();
        for id in 10..13 {
            join_and_leave(&p, &admin, id, None);
        }
        let mut live = Vec::new();
        for id in 20..25 {
            let (c, rx) = conn();
            live.push((p.join(&admin, id, c, None).unwrap(), rx));
        }
        assert_eq!(p.sessions(), 3 + 5, "alice's 3, and the admin's 5 live ones (its dropped ones evicted)");
    }

    #[test]
    fn cycling_connections_leave_room_for_others() {
        let p = Players::new(AuthSettings { max_sessions: 10, max_sessions_per_player: 4, ..AuthSettings::default() }, 30);
        for id in 0..50 {
            join_and_leave(&p, &alice(), id, None);
            assert!(p.sessions() <= 4, "{} sessions after {id} cycles", p.sessions());
        }
        let (c, _rx) = conn();
        p.join(&player("bob", now_secs() + 60), 100, c, None).unwrap();
    }

    #[test]
    fn anonymous_sessions_are_capped_per_address() {
        let p = Players::new(AuthSettings { max_sessions_per_ip: 2, ..AuthSettings::default() }, 30);
        let t1 = join_and_leave(&p, &anon(1), 1, ip(1));
        let t2 = join_and_leave(&p, &anon(2), 2, ip(1));
        let (c, _rx) = conn();
        p.join(&anon(3), 3, c, ip(1)).unwrap();
        assert_eq!(p.sessions(), 2);
        let (c, _rx1) = conn();
        assert_eq!(p.resume(&t1, None, 4, c, ip(1)).unwrap_err(), JoinError::BadResume, "the oldest dropped session of the address was evicted");
        assert!(p.info("anon-t-1").is_none(), "an evicted anonymous player is forgotten");
        assert!(p.info("anon-t-2").is_some());
        // Another address, and a player with a token from the same one, are not counted.
        let (c, _rx2) = conn();
        p.join(&anon(4), 5, c, ip(2)).unwrap();
        let (c, _rx3) = conn();
        p.join(&alice(), 6, c, ip(1)).unwrap();
        // Two live anonymous sessions from 10.0.0.1 (anon 2 resumed, anon 3): a third joins too
        // (live connections are bounded by the connection cap), evicting no live one.
        let (c, _rx4) = conn();
        p.resume(&t2, None, 7, c, ip(1)).unwrap();
        let before = p.sessions();
        let (c, _rx5) = conn();
        p.join(&anon(5), 8, c, ip(1)).unwrap();
        assert_eq!(p.sessions(), before + 1);
        assert!(p.info("anon-t-2").is_some() && p.info("anon-t-3").is_some(), "live sessions are never evicted");
    }

    #[test]
    fn stored_sessions_resume_with_their_tokens_on_another_registry_within_the_grace_left() {
        let p = Players::new(AuthSettings::default(), 30);
        // A dropped session subscribed to `w`, a live one of an owner, and one of elsewhere.
        let (c, _rx) = conn();
        let j = p.join(&alice(), 1, c, None).unwrap();
        let area = proto::Area::WholeWorld(proto::WholeWorld {});
        p.leave("alice", 1, &j.token, vec![("w".into(), area.clone(), 2), ("x".into(), area.clone(), 1)]);
        let (c, _rx2) = conn();
        let bob = p.join(&player("bob", now_secs() + 600), 2, c, None).unwrap();
        let (c, _rx3) = conn();
        let carol = p.join(&player("carol", now_secs() + 600), 3, c, None).unwrap();
        let owners: HashSet<&str> = ["bob"].into_iter().collect();
        let stored = p.stored_sessions("w", &owners);
        assert_eq!(stored.len(), 2, "{stored:?}");
        assert!(stored.iter().all(|s| s.token_sha256.len() == 64 && s.token_sha256 != j.token && s.token_sha256 != bob.token), "tokens are stored hashed");
        let a = stored.iter().find(|s| s.player == "alice").unwrap();
        assert_eq!(a.subs, vec![(area.clone(), 2)], "only the world's own subscriptions");
        assert!(a.grace_ms <= 30_000 && a.grace_ms > 25_000, "{a:?}");
        let b = stored.iter().find(|s| s.player == "bob").unwrap();
        assert_eq!(b.grace_ms, 30_000, "a live session gets the whole grace");
        // Another registry (the restarted server) takes them: both resume with their tokens.
        let q = Players::new(AuthSettings::default(), 30);
        assert_eq!(q.restore_sessions("w", &stored), 0);
        let (c, _rx4) = conn();
        let back = q.resume(&j.token, None, 10, c, None).unwrap();
        assert_eq!(back.identity.player, "alice");
        assert_eq!(back.subs, vec![("w".to_string(), area, 2)]);
        let (c, _rx5) = conn();
        assert_eq!(q.resume(&bob.token, None, 11, c, None).unwrap().identity.player, "bob");
        let (c, _rx6) = conn();
        assert_eq!(q.resume(&carol.token, None, 12, c, None).unwrap_err(), JoinError::BadResume, "not the world's");
        // Grace over: a session restored with none left is refused.
        let mut late = stored.clone();
        for s in &mut late {
            s.grace_ms = 0;
        }
        let r = Players::new(AuthSettings::default(), 30);
        r.restore_sessions("w", &late);
        let (c, _rx7) = conn();
        assert_eq!(r.resume(&j.token, None, 13, c, None).unwrap_err(), JoinError::BadResume);
    }
}
