//! The world thread's vocabulary, shared by the handle, the runner and its parts: who issues a
//! request, why one fails, a player as a world knows it, send-rate holds, the AOI grid, a
//! world's live counters and how a handed-off world goes on.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use steer_proto as proto;
use tokio::sync::oneshot;

use crate::convert;
use crate::sim::{AgentId, SimError, World};

/// Where a request's answer goes.
pub(super) type Reply<T> = oneshot::Sender<Result<T, CmdError>>;

/// Per vision key (a team, or a player without one), the AOI cells it sees this tick.
pub(super) type Vision = HashMap<String, Vec<bool>>;

/// Who issues a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The player (`None` for the admin).
    pub player: Option<Arc<str>>,
    /// What it may do.
    pub role: proto::Role,
    /// Its team (shares vision under `owned` visibility).
    pub team: Option<Arc<str>>,
}

impl Actor {
    /// The admin (the admin token, or REST with no admin token configured): commands every
    /// agent, owns none, has no quotas.
    pub fn admin() -> Self {
        Actor { player: None, role: proto::Role::Admin, team: None }
    }

    /// The actor of an authenticated identity.
    pub fn of(id: &crate::auth::Identity) -> Self {
        if id.role == proto::Role::Admin {
            return Actor::admin();
        }
        Actor { player: Some(Arc::from(id.player.as_str())), role: id.role, team: id.team.as_deref().map(Arc::from) }
    }

    /// True for the admin.
    pub fn is_admin(&self) -> bool {
        self.role == proto::Role::Admin
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CmdError {
    /// The sim refused it (names the field).
    #[error(transparent)]
    Sim(#[from] SimError),
    /// The agent is not this actor's to command.
    #[error("agent {0} is not yours to command")]
    Forbidden(AgentId),
    /// The actor's role may not do this.
    #[error("{0}")]
    NotAllowed(String),
    /// A per-player or per-world quota would be exceeded (nothing changed).
    #[error("{0}")]
    Quota(String),
    /// The world's queue is full.
    #[error("world `{0}` is busy, try again")]
    Busy(String),
    /// The world thread is gone.
    #[error("world `{0}` is not running")]
    Dead(String),
    /// Something else, with a reason.
    #[error("{0}")]
    Invalid(String),
    /// The world is a read-only replay: it takes no command that would change it.
    #[error("{0}")]
    ReadOnly(String),
    /// The request does not fit the world's state (e.g. replay controls on a live world).
    #[error("{0}")]
    Conflict(String),
    /// The world is being handed off to another server: it takes no change meanwhile.
    #[error("world `{0}` is being handed off to another server; try again in a moment")]
    Moving(String),
}

impl CmdError {
    /// The wire error body.
    pub fn body(&self) -> proto::ErrorBody {
        match self {
            CmdError::Sim(e) => convert::error_body(e),
            CmdError::Forbidden(_) => proto::ErrorBody { code: proto::ErrorCode::Forbidden, message: self.to_string(), field: Some("agents".into()) },
            CmdError::NotAllowed(m) => proto::ErrorBody { code: proto::ErrorCode::Forbidden, message: m.clone(), field: None },
            CmdError::Quota(m) => proto::ErrorBody { code: proto::ErrorCode::QuotaExceeded, message: m.clone(), field: Some("count".into()) },
            CmdError::Busy(_) => proto::ErrorBody { code: proto::ErrorCode::Busy, message: self.to_string(), field: None },
            CmdError::Dead(_) => proto::ErrorBody { code: proto::ErrorCode::Internal, message: self.to_string(), field: None },
            CmdError::Invalid(m) => proto::ErrorBody { code: proto::ErrorCode::BadRequest, message: m.clone(), field: None },
            CmdError::ReadOnly(m) => proto::ErrorBody { code: proto::ErrorCode::Forbidden, message: m.clone(), field: None },
            CmdError::Conflict(m) => proto::ErrorBody { code: proto::ErrorCode::BadRequest, message: m.clone(), field: None },
            CmdError::Moving(_) => proto::ErrorBody { code: proto::ErrorCode::Busy, message: self.to_string(), field: None },
        }
    }
}

/// A player as a world knows it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldPlayer {
    /// Player id.
    pub player: String,
    /// Agents it owns here.
    pub agents: usize,
    /// The orphan policy was applied to its agents (grace period over, or kicked).
    pub orphaned: bool,
}

/// How many subscriptions use each send rate; index 0 and 1 are unused (every tick is always
/// kept).
#[derive(Debug)]
pub struct RateUsers(Vec<AtomicU32>);

impl RateUsers {
    pub(super) fn new(max: u32) -> Self {
        RateUsers((0..=max.max(1)).map(|_| AtomicU32::new(0)).collect())
    }

    /// The largest rate allowed.
    pub fn max(&self) -> u32 {
        (self.0.len() - 1) as u32
    }

    /// Registers one subscription of rate `n`, until the guard drops.
    pub fn hold(self: &Arc<Self>, n: u32) -> RateGuard {
        if let Some(c) = self.0.get(n as usize).filter(|_| n > 1) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        RateGuard { users: self.clone(), n }
    }

    /// Rates (> 1) with at least one subscription.
    pub(super) fn in_use(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().skip(2).filter(|(_, c)| c.load(Ordering::Relaxed) > 0).map(|(n, _)| n as u32)
    }
}

/// One subscription's hold on a send rate.
#[derive(Debug)]
pub struct RateGuard {
    users: Arc<RateUsers>,
    n: u32,
}

impl Drop for RateGuard {
    fn drop(&mut self) {
        if let Some(c) = self.users.0.get(self.n as usize).filter(|_| self.n > 1) {
            c.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// AOI grid of a world: cells of 50 units, grown until there are at most `max_cells`.
pub fn world_info(id: u32, name: &str, world: &World, max_cells: u32) -> proto::WorldInfo {
    let b = world.config().bounds;
    let rect = proto::Rect { min_x: b.min.x, min_y: b.min.y, max_x: b.max.x, max_y: b.max.y };
    let mut cell = 50.0f32;
    loop {
        let info = proto::WorldInfo::new(id, name, rect, cell, world.config().tick_rate);
        if u64::from(info.cols) * u64::from(info.rows) <= u64::from(max_cells.max(1)) {
            return info;
        }
        cell *= 1.5;
    }
}

/// A world that arrives by a handoff: how it goes on.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// The wire tick's offset on the old server (ticks go on from there).
    pub tick_offset: u64,
    /// No tick before every awaited session resumed (the count reaches 0) or `until` passed.
    pub awaited: Arc<std::sync::atomic::AtomicUsize>,
    pub until: Instant,
}

/// Live counters of a world, readable without asking its thread.
#[derive(Debug, Default)]
pub struct WorldStats {
    pub tick: AtomicU64,
    pub agents: AtomicU64,
    pub overruns: AtomicU64,
    pub alive: AtomicBool,
    /// Tick rate ×1000.
    pub tick_rate_milli: AtomicU32,
    /// Ticks per second actually run over the last measuring window (about 1 s), ×1000.
    pub effective_tick_rate_milli: AtomicU32,
    /// The world cannot keep its tick rate: it dropped ticks (overran) during the last
    /// measuring window. It keeps answering; it ticks slower.
    pub overloaded: AtomicBool,
    /// Asks the thread to stop (seen at the next turn of its loop, even if its queue is full).
    pub stop: AtomicBool,
    /// With `stop`: the world is deleted, so is its stored state.
    pub forget: AtomicBool,
    /// Ends a fault-injection stall early (see [`super::Request::Stall`]).
    pub stall: StallGate,
}

/// Ends a [`super::Request::Stall`] before its time (fault injection: `POST /debug/stall/release`),
/// so that a test decides when the world's thread runs again instead of racing a timer.
#[derive(Debug, Default)]
pub struct StallGate {
    released: Mutex<bool>,
    wake: std::sync::Condvar,
}

impl StallGate {
    /// Blocks until [`StallGate::release`] is called or `time` passes; a release that came
    /// before the stall began ends it at once. Consumes the release.
    pub fn block(&self, time: Duration) {
        let deadline = Instant::now() + time;
        let mut released = self.released.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while !*released {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            released = self.wake.wait_timeout(released, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
        *released = false;
    }

    /// Ends the current (or the next) stall.
    pub fn release(&self) {
        *self.released.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        self.wake.notify_all();
    }
}

impl WorldStats {
    /// The counters of a world thread about to start with `world`.
    pub(super) fn starting(world: &World) -> Self {
        let stats = WorldStats::default();
        stats.alive.store(true, Ordering::SeqCst);
        let milli = (world.config().tick_rate * 1000.0) as u32;
        stats.tick_rate_milli.store(milli, Ordering::Relaxed);
        stats.effective_tick_rate_milli.store(milli, Ordering::Relaxed);
        stats.agents.store(world.agents().len() as u64, Ordering::Relaxed);
        stats
    }
}
