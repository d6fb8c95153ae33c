//! The world thread: owns one [`World`], steps it at a fixed tick, applies commands from a
//! bounded queue, and publishes each tick's frames to subscribers.
//!
//! **Invariant:** only this thread touches its `World`; everyone else talks to it through
//! [`WorldHandle`] (a closed set of requests over a bounded channel).
//!
//! **Invariant:** the tick loop never bursts: when it is late by more than
//! `max_catchup_ticks` it drops the missed time and counts it as an overrun.
//!
//! **Invariant:** the thread never stops answering. Every turn of its loop first serves up to
//! `max_requests_per_turn` queued requests without waiting, however late the tick is, and only
//! then ticks; so a request waits at most for the tick in progress and the requests queued ahead
//! of it. A world whose tick takes longer than its period runs slower (its effective tick rate
//! drops and it reports itself `overloaded`) but keeps serving reads, commands, PATCH, DELETE and
//! shutdown. A `Step` of many ticks runs in chunks of about one period of work, one published
//! frame per chunk, serving the queue between chunks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steer_proto as proto;
use tokio::sync::{broadcast, oneshot};

use super::fields::FieldBuilder;
use super::frames::{CellFrame, FrameEvent, Shared, TickFrame};
use crate::convert;
use crate::metrics::Metrics;
use crate::scenario::Scenario;
use crate::sim::nav::PipelineStats;
use crate::sim::nav::flowfield::FlowField;
use crate::sim::world::{Command, Outcome};
use crate::sim::{AgentId, SimError, World};

/// A connection's id.
pub type SessionId = u64;

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
        }
    }
}

/// An agent as REST shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct AgentView {
    pub id: u32,
    pub group: String,
    pub position: [f32; 2],
    pub velocity: [f32; 2],
    pub orientation: f32,
    pub radius: f32,
    pub behaviors: Vec<String>,
}

/// Obstacle as REST shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct ObstacleView {
    pub id: u32,
    pub center: [f32; 2],
    pub radius: f32,
}

/// Wall as REST shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct WallView {
    pub id: u32,
    pub a: [f32; 2],
    pub b: [f32; 2],
}

/// Full state (`GET /worlds/{w}/snapshot`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Snapshot {
    pub world: String,
    pub tick: u64,
    pub agents: Vec<AgentView>,
    pub obstacles: Vec<ObstacleView>,
    pub walls: Vec<WallView>,
    /// The agents quantized exactly as the wire protocol does.
    pub quantized: Vec<proto::QAgent>,
}

/// World summary.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct WorldInfoView {
    pub name: String,
    pub id: u32,
    pub tick: u64,
    pub tick_rate: f32,
    pub paused: bool,
    pub agents: usize,
    pub obstacles: usize,
    pub walls: usize,
    pub alive: bool,
    pub overruns: u64,
    /// Ticks per second actually run over the last second (below `tick_rate` when overloaded;
    /// 0 while paused).
    pub effective_tick_rate: f64,
    /// The world cannot keep its tick rate (it dropped ticks in the last second). It keeps
    /// answering; it ticks slower.
    pub overloaded: bool,
    pub aoi_cell_size: f32,
    /// AOI grid columns and rows (cell index = row · cols + col).
    pub aoi_cols: u32,
    pub aoi_rows: u32,
    /// World bounds: min x, min y, max x, max y.
    pub bounds: [f32; 4],
    pub scenario: Option<String>,
    pub autosave: bool,
    /// The world's recording (issue 19).
    pub recording: crate::record::RecordingView,
    /// Set when the world is a read-only replay of a recording (issue 19).
    pub replay: Option<Box<ReplayView>>,
}

/// A replay world's timeline and checks (`GET /worlds/{w}`, and the answer of the
/// `/worlds/{w}/replay/...` controls).
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct ReplayView {
    /// The recording played (its name in the data dir's `recordings/`).
    pub recording: String,
    /// The recording's tick shown now (0 at its start; the wire's ticks keep increasing across
    /// seeks, like across a load).
    pub tick: u64,
    /// Its last tick.
    pub end_tick: u64,
    /// Playing (false: paused, or stopped at the end).
    pub playing: bool,
    /// Playback speed, a multiple of the recorded tick rate.
    pub speed: f64,
    /// Fastest speed allowed (`limits.replay_max_speed`).
    pub max_speed: f64,
    /// `state_hash` of the state now, hex (what `steerd replay --until TICK --snapshot` writes).
    pub state_hash: String,
    /// Keyframes kept, their interval in ticks (a seek simulates fewer) and their estimated
    /// bytes.
    pub keyframes: usize,
    pub keyframe_interval: u64,
    pub keyframe_bytes: u64,
    /// Ticks simulated when the world opened (one pass over the whole recording).
    pub open_ticks: u64,
    /// Seeks served, and the ticks they simulated in all.
    pub seeks: u64,
    pub seek_ticks: u64,
    /// The last seek.
    pub last_seek: Option<crate::record::player::SeekReport>,
    /// The recorded checkpoints compared so far (all of them when the world opened) and any
    /// divergence.
    pub verification: crate::record::player::Verification,
}

/// What a replay world plays: its player, and the world at the player's start.
pub struct ReplaySpawn {
    /// The player (keyframes and records).
    pub player: Box<crate::record::player::Player>,
    /// The world at tick 0.
    pub world: World,
    /// The recording's name.
    pub recording: String,
    /// Fastest playback speed.
    pub max_speed: f64,
}

/// A replay world's state on its thread.
struct ReplayState {
    player: Box<crate::record::player::Player>,
    recording: String,
    speed: f64,
    max_speed: f64,
}

/// A replay control (`/worlds/{w}/replay/...`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayOp {
    /// Just the state.
    Get,
    /// Go to a tick (clamped to the end).
    Seek(u64),
    /// Play from here.
    Play,
    /// Pause.
    Pause,
    /// Playback speed (a multiple of the recorded tick rate).
    Speed(f64),
}

/// The flow field an agent's MoveTo follows (`GET /worlds/{w}/flowfield?agent=`), sampled for
/// display.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct FlowFieldView {
    pub agent: u32,
    /// `ready` (the field below), `pending` (requested, not in use yet: the agent heads
    /// straight for its goal), `straight` (no field needed: the agent sees its goal), or
    /// `no_order` (the agent has no MoveTo order).
    #[schema(value_type = String, example = "ready")]
    pub status: &'static str,
    /// The order's target and the goal navigation resolved it to (null without an order).
    pub target: Option<[f32; 2]>,
    pub goal: Option<[f32; 2]>,
    /// Lower-left corner of the sample lattice and the side of one sample block.
    pub origin: [f32; 2],
    pub spacing: f32,
    /// Blocks per row, rows.
    pub cols: u32,
    pub rows: u32,
    /// Direction per block in radians (row-major from the lower-left; null = none), empty
    /// unless `ready`.
    pub angles: Vec<Option<f32>>,
}

/// A 2-D vector as `{x, y}`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct Xy {
    pub x: f32,
    pub y: f32,
}

impl From<glam::Vec2> for Xy {
    fn from(v: glam::Vec2) -> Self {
        Xy { x: v.x, y: v.y }
    }
}

/// One half-plane of permitted velocities: those on the left of the line through `point`
/// along the unit `direction` (velocity space, world units per second).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct HalfPlaneView {
    pub point: Xy,
    pub direction: Xy,
    /// From an obstacle or wall (true) or from a neighbour agent (false).
    #[serde(rename = "static")]
    pub is_static: bool,
}

/// What reciprocal avoidance sees and chooses for one agent now
/// (`GET /worlds/{w}/agents/{id}/avoidance`): the half-planes of the velocity obstacles of its
/// nearest neighbours and of nearby obstacles and walls, the velocity it would like and the one
/// it gets. Computed on the world thread from the current state, with the agent grid rebuilt
/// first so that the neighbours are where they are now.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct AvoidanceView {
    pub agent: u32,
    /// True when the agent avoids this way: it has an active MoveTo order and MoveTo uses
    /// reciprocal avoidance, or its behaviours include `reciprocal_avoidance`. False: the
    /// half-planes below are those the default parameters would give.
    pub active: bool,
    /// Where `preferred` comes from: `behaviors` (the blend of the agent's behaviours, exactly
    /// as the next tick computes it), `move_to` (MoveTo's steering of the next tick with the
    /// avoidance switched off — exact unless the agent touches an obstacle or another agent's
    /// centre) or `velocity` (the current velocity: used when MoveTo does not avoid
    /// reciprocally).
    #[schema(value_type = String, example = "behaviors")]
    pub preferred_source: &'static str,
    pub position: Xy,
    pub velocity: Xy,
    pub radius: f32,
    pub max_speed: f32,
    /// The velocity asked for and the one avoidance chooses (world units per second).
    pub preferred: Xy,
    pub chosen: Xy,
    /// Obstacles and walls first, then one per neighbour (at most 16 + 32).
    pub half_planes: Vec<HalfPlaneView>,
    /// The parameters used.
    pub time_horizon: f32,
    pub obstacle_time_horizon: f32,
    pub neighbor_dist: f32,
    pub max_neighbors: u32,
}

type Reply<T> = oneshot::Sender<Result<T, CmdError>>;

/// The closed set of requests a world thread serves.
pub enum Request {
    /// A sim command on behalf of an actor (ownership is checked here).
    Apply { cmd: Command, actor: Actor, reply: Reply<Outcome> },
    /// Several sim commands, checked for ownership all first, applied in order (stops at the
    /// first error). Answers the last outcome.
    ApplyMany { cmds: Vec<Command>, actor: Actor, reply: Reply<Outcome> },
    /// Agents, up to a limit.
    Agents { limit: usize, reply: Reply<Vec<AgentView>> },
    /// One agent.
    Agent { id: AgentId, reply: Reply<AgentView> },
    /// The flow field of an agent's MoveTo, at most `max_side` blocks per side.
    FlowField { agent: AgentId, max_side: u32, reply: Reply<FlowFieldView> },
    /// What reciprocal avoidance sees and chooses for one agent now.
    Avoidance { agent: AgentId, reply: Reply<AvoidanceView> },
    /// Obstacles.
    Obstacles { reply: Reply<Vec<ObstacleView>> },
    /// Walls.
    Walls { reply: Reply<Vec<WallView>> },
    /// Full state.
    Snapshot { reply: Reply<Snapshot> },
    /// Summary.
    Info { reply: Reply<WorldInfoView> },
    /// Change tick rate / pause.
    Patch { tick_rate: Option<f32>, paused: Option<bool>, autosave: Option<bool>, reply: Reply<WorldInfoView> },
    /// Step N ticks now (also while paused).
    Step { ticks: u32, reply: Reply<u64> },
    /// Back to the scenario it was loaded from.
    Reset { reply: Reply<u64> },
    /// Replace the world by a scenario.
    Load { scenario: Box<Scenario>, name: String, reply: Reply<u64> },
    /// The current state as a scenario.
    Save { reply: Reply<Box<Scenario>> },
    /// Random non-overlapping obstacles (001); answers the new ids.
    RandomObstacles { spec: crate::scenario::RandomObstacles, reply: Reply<Vec<u32>> },
    /// Start or stop recording (issue 19); answers the summary.
    Recording { on: bool, digests: Option<bool>, reply: Reply<WorldInfoView> },
    /// The players of this world: those that own agents or commanded here.
    Players { reply: Reply<Vec<WorldPlayer>> },
    /// Kick a player: its agents follow the orphan policy now. Answers how many it owned.
    Kick { player: String, reply: Reply<usize> },
    /// Give an agent to a player (`None`: to nobody).
    SetOwner { agent: AgentId, player: Option<String>, team: Option<String>, reply: Reply<()> },
    /// A replay control; answers the replay's state (a world that is not a replay refuses).
    Replay { op: ReplayOp, reply: Reply<ReplayView> },
    /// Stop the thread.
    Shutdown,
    /// Panic the thread (fault injection: `POST /debug/panic`, served only with
    /// `fault_injection` on), to check that the panic is contained and reported.
    Panic,
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

/// What a new world starts from.
pub struct WorldSpawn {
    /// Name.
    pub name: String,
    /// Numeric id (wire).
    pub id: u32,
    /// Scenario.
    pub scenario: Scenario,
    /// Name of the scenario it came from.
    pub scenario_name: Option<String>,
    /// Queue capacity.
    pub queue: usize,
    /// Frame buffer (broadcast capacity).
    pub frame_buffer: usize,
    /// Catch-up bound.
    pub max_catchup_ticks: u32,
    /// Most AOI cells.
    pub max_aoi_cells: u32,
    /// Agent cap.
    pub max_agents: usize,
    /// Spawn cap.
    pub max_spawn: usize,
    /// What spawns may put into the world (`admission.rs`).
    pub crowding: super::admission::Crowding,
    /// Start paused.
    pub paused: bool,
    /// Builds the world's flow fields off its thread.
    pub fields: Arc<FieldBuilder>,
    /// Steps worlds of at least `parallel_step_min_agents` agents (shared by every world).
    pub sim_pool: Arc<rayon::ThreadPool>,
    /// Smaller worlds step on a thread of their own.
    pub parallel_step_min_agents: usize,
    /// Frames carry checksums on ticks that are multiples of this.
    pub checksum_every_ticks: u32,
    /// Largest send rate (`every_n_ticks`) kept.
    pub max_every_n_ticks: u32,
    /// Shared `cells` messages per tick.
    pub max_shared_messages: usize,
    /// Requests served per turn of the loop before the next tick (≥ 1).
    pub max_requests_per_turn: usize,
    /// Where the world records, if the server records.
    pub recorder: Option<Arc<crate::record::RecordHub>>,
    /// The player rules of this world.
    pub policy: crate::config::WorldPolicy,
    /// Players and sessions of the server (connected? events to their connections).
    pub players: Arc<super::players::Players>,
    /// Play a recording instead of running `scenario` (a read-only replay world).
    pub replay: Option<ReplaySpawn>,
}

/// The one-thread pool a world's runner runs on (named after it), if the OS gives a thread.
fn solo_pool(world: &str) -> Option<rayon::ThreadPool> {
    let name = format!("tick-{world}");
    match rayon::ThreadPoolBuilder::new().num_threads(1).thread_name(move |_| name.clone()).build() {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(world, "no thread for single-threaded steps ({e}); using the shared pool");
            None
        }
    }
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
}

/// A handle to a running world.
#[derive(Clone)]
pub struct WorldHandle {
    /// Name.
    pub name: String,
    /// Wire id.
    pub id: u32,
    tx: SyncSender<Request>,
    frames: broadcast::Sender<Arc<TickFrame>>,
    /// AOI grid and bounds as announced to clients.
    pub info: Arc<Mutex<proto::WorldInfo>>,
    /// Live counters.
    pub stats: Arc<WorldStats>,
    /// Why the thread died, if it did.
    pub death: Arc<Mutex<Option<String>>>,
    /// The scenario the world was last loaded from (to restart a dead world).
    pub origin: Arc<Mutex<(Scenario, Option<String>)>>,
    /// The newest frame, so a new subscriber gets keyframes at once (also while paused).
    pub latest: Arc<Mutex<Option<Arc<TickFrame>>>>,
    /// Subscriptions per send rate (`every_n_ticks`, index = rate): the world keeps the cells
    /// of each rate in use.
    pub rates: Arc<RateUsers>,
}

/// How many subscriptions use each send rate; index 0 and 1 are unused (every tick is always
/// kept).
#[derive(Debug)]
pub struct RateUsers(Vec<AtomicU32>);

impl RateUsers {
    fn new(max: u32) -> Self {
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
    fn in_use(&self) -> impl Iterator<Item = u32> + '_ {
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

impl WorldHandle {
    /// Starts the world thread.
    pub fn start(spawn: WorldSpawn, metrics: Arc<Metrics>) -> Result<Self, CmdError> {
        let mut scenario = spawn.scenario;
        let (world, replay) = match spawn.replay {
            Some(r) => (r.world, Some(ReplayState { player: r.player, recording: r.recording, speed: 1.0, max_speed: r.max_speed })),
            None => {
                let w = build_world(&scenario, spawn.max_agents, spawn.max_spawn)?;
                super::admission::check_scenario(&scenario, &w, &spawn.crowding).map_err(CmdError::Sim)?;
                (w, None)
            }
        };
        if let Some(r) = &replay {
            let d = r.player.verification().divergences;
            if d > 0 {
                metrics.replay_divergences.inc_by(d);
            }
        }
        // A replay world records nothing (it changes only as its recording says).
        let recorder = if replay.is_some() { None } else { spawn.recorder };
        if scenario.name.is_empty() {
            scenario.name = spawn.name.clone();
        }
        let info = world_info(spawn.id, &spawn.name, &world, spawn.max_aoi_cells);
        let (tx, rx) = std::sync::mpsc::sync_channel(spawn.queue.max(1));
        let (frames, _) = broadcast::channel(spawn.frame_buffer.max(1));
        let stats = Arc::new(WorldStats::default());
        stats.alive.store(true, Ordering::SeqCst);
        stats.tick_rate_milli.store((world.config().tick_rate * 1000.0) as u32, Ordering::Relaxed);
        stats.effective_tick_rate_milli.store((world.config().tick_rate * 1000.0) as u32, Ordering::Relaxed);
        stats.agents.store(world.agents().len() as u64, Ordering::Relaxed);
        let handle = WorldHandle {
            name: spawn.name.clone(),
            id: spawn.id,
            tx,
            frames: frames.clone(),
            info: Arc::new(Mutex::new(info.clone())),
            stats: stats.clone(),
            death: Arc::new(Mutex::new(None)),
            origin: Arc::new(Mutex::new((scenario.clone(), spawn.scenario_name.clone()))),
            latest: Arc::new(Mutex::new(None)),
            rates: Arc::new(RateUsers::new(spawn.max_every_n_ticks)),
        };
        // Unbounded, but it holds at most the jobs in the builder's bounded queue.
        let (field_tx, field_rx) = std::sync::mpsc::channel();
        let runner = Runner {
            name: spawn.name.clone(),
            id: spawn.id,
            world,
            scenario,
            scenario_name: spawn.scenario_name,
            owners: HashMap::new(),
            teams: HashMap::new(),
            buckets: HashMap::new(),
            gone: HashMap::new(),
            next_orphan_check: Instant::now(),
            policy: spawn.policy,
            players: spawn.players,
            encoders: Vec::new(),
            keys: Vec::new(),
            rate_sets: Vec::new(),
            rate_users: handle.rates.clone(),
            max_shared: spawn.max_shared_messages,
            info,
            frames,
            paused: spawn.paused,
            autosave: false,
            max_catchup: spawn.max_catchup_ticks.max(1),
            max_agents: spawn.max_agents,
            max_spawn: spawn.max_spawn,
            crowding: spawn.crowding,
            max_aoi_cells: spawn.max_aoi_cells,
            stats: stats.clone(),
            metrics,
            shared_info: handle.info.clone(),
            origin: handle.origin.clone(),
            latest: handle.latest.clone(),
            tick_offset: 0,
            reset_pending: false,
            fields: spawn.fields,
            field_tx,
            field_rx,
            pipeline: PipelineStats::default(),
            sim_pool: spawn.sim_pool,
            on_solo: false,
            parallel_min: spawn.parallel_step_min_agents,
            checksum_every: u64::from(spawn.checksum_every_ticks.max(1)),
            max_requests_per_turn: spawn.max_requests_per_turn.max(1),
            owned: HashMap::new(),
            stepping: None,
            window: RateWindow::new(Instant::now()),
            rec: crate::record::Hook::new(recorder, spawn.max_agents, spawn.max_spawn),
            replay,
        };
        let mut runner = runner;
        if runner.replay.is_none() {
            runner.rec.started(&runner.name, &runner.scenario);
        }
        let death = handle.death.clone();
        let name = spawn.name;
        std::thread::Builder::new()
            .name(format!("world-{name}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    let mut r = runner;
                    // The runner runs on a one-thread rayon pool of its own, so that a small
                    // world's step runs its parallel loops inline: no hand-off to another
                    // thread, and no wake-up of a sleeping one, on any tick.
                    match solo_pool(&r.name) {
                        Some(pool) => {
                            r.on_solo = true;
                            pool.install(move || {
                                r.reset_encoders();
                                r.run(rx);
                            });
                        }
                        None => {
                            r.reset_encoders();
                            r.run(rx);
                        }
                    }
                }));
                stats.alive.store(false, Ordering::SeqCst);
                if let Err(p) = result {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "panic".into());
                    tracing::error!(world = %name, "world thread panicked: {msg}");
                    if let Ok(mut d) = death.lock() {
                        *d = Some(msg);
                    }
                }
            })
            .map_err(|e| CmdError::Invalid(format!("cannot start world thread: {e}")))?;
        Ok(handle)
    }

    /// Asks the world thread to panic (fault injection; see [`Request::Panic`]).
    pub fn inject_panic(&self) -> Result<(), CmdError> {
        self.send(Request::Panic)
    }

    /// True while the world thread runs.
    pub fn alive(&self) -> bool {
        self.stats.alive.load(Ordering::SeqCst)
    }

    /// A receiver of tick frames.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<TickFrame>> {
        self.frames.subscribe()
    }

    /// The newest published frame.
    pub fn latest(&self) -> Option<Arc<TickFrame>> {
        self.latest.lock().ok().and_then(|l| l.clone())
    }

    /// Number of frame receivers.
    pub fn subscribers(&self) -> usize {
        self.frames.receiver_count()
    }

    /// The AOI grid as announced.
    pub fn world_info(&self) -> proto::WorldInfo {
        self.info.lock().map(|i| i.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    fn send(&self, req: Request) -> Result<(), CmdError> {
        match self.tx.try_send(req) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err(CmdError::Busy(self.name.clone())),
            Err(TrySendError::Disconnected(_)) => Err(CmdError::Dead(self.name.clone())),
        }
    }

    /// Sends a request built around a reply channel and awaits the answer.
    pub async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, CmdError> {
        let (tx, rx) = oneshot::channel();
        self.send(make(tx))?;
        rx.await.map_err(|_| CmdError::Dead(self.name.clone()))?
    }

    /// Applies several sim commands for one actor (see [`Request::ApplyMany`]).
    pub async fn apply_many(&self, cmds: Vec<Command>, actor: Actor) -> Result<Outcome, CmdError> {
        self.ask(|reply| Request::ApplyMany { cmds, actor, reply }).await
    }

    /// Applies a sim command.
    pub async fn apply(&self, cmd: Command, actor: Actor) -> Result<Outcome, CmdError> {
        self.ask(|reply| Request::Apply { cmd, actor, reply }).await
    }

    /// Asks the thread to stop. The flag is seen at the next turn of its loop even when the
    /// queue is full; the message only wakes a thread waiting for requests.
    pub fn shutdown(&self) {
        self.stats.stop.store(true, Ordering::SeqCst);
        let _ = self.tx.try_send(Request::Shutdown);
    }

    /// True if the world cannot keep its tick rate (see [`WorldStats::overloaded`]).
    pub fn overloaded(&self) -> bool {
        self.stats.overloaded.load(Ordering::Relaxed)
    }

    /// Ticks per second the world actually ran over the last window (about 1 s).
    pub fn effective_tick_rate(&self) -> f64 {
        f64::from(self.stats.effective_tick_rate_milli.load(Ordering::Relaxed)) / 1000.0
    }
}

/// The tick schedule's catch-up rule. A tick was due at `next`; it is now `now`. If the world
/// is more than `max_catchup` whole periods late, the excess is dropped (counted, not run):
/// returns the deadline to treat as this tick's (moved forward by the dropped periods) and how
/// many ticks were dropped. At most `max_catchup` late ticks then run back to back, so there is
/// never a burst (tokio's `interval` would burst by default).
pub fn catch_up(next: Instant, now: Instant, period: Duration, max_catchup: u32) -> (Instant, u64) {
    let late = now.saturating_duration_since(next);
    let behind = (late.as_secs_f64() / period.as_secs_f64()) as u64;
    if behind > u64::from(max_catchup) {
        let dropped = behind - u64::from(max_catchup);
        (next + period.mul_f64(dropped as f64), dropped)
    } else {
        (next, 0)
    }
}

/// Builds a world from a scenario with the server's caps applied.
pub fn build_world(scenario: &Scenario, max_agents: usize, max_spawn: usize) -> Result<World, CmdError> {
    let total: usize = scenario.groups.iter().map(|g| g.agent_count()).sum();
    if total > max_agents {
        return Err(CmdError::Sim(SimError::LimitExceeded { what: "agents".into(), max: max_agents }));
    }
    let mut world = scenario.build().map_err(|e| CmdError::Invalid(e.to_string()))?;
    world.set_caps(max_agents, max_spawn);
    Ok(world)
}

/// AOI grid of a world: cells of 50 units, grown until there are at most `max_cells`.
pub fn world_info(id: u32, name: &str, world: &World, max_cells: u32) -> proto::WorldInfo {
    let b = world.config().bounds;
    let rect = proto::Rect { min_x: b.min.x, min_y: b.min.y, max_x: b.max.x, max_y: b.max.y };
    let mut cell = 50.0f32;
    loop {
        let info = proto::WorldInfo::new(id, name, rect, cell);
        if u64::from(info.cols) * u64::from(info.rows) <= u64::from(max_cells.max(1)) {
            return info;
        }
        cell *= 1.5;
    }
}

/// Longest a tick waits for a builder finishing a field it needs (then it builds the field).
const FIELD_WAIT: Duration = Duration::from_secs(2);

/// Longest the loop sleeps waiting for a request (so a stop flag is seen even at 0.1 Hz).
const MAX_IDLE_WAIT: Duration = Duration::from_millis(100);

/// Length of the window over which the effective tick rate and `overloaded` are measured.
const RATE_WINDOW: Duration = Duration::from_secs(1);

/// Ticks run and ticks dropped since `start` (the effective tick rate and overload window).
struct RateWindow {
    start: Instant,
    ticks: u64,
    dropped: u64,
}

impl RateWindow {
    fn new(start: Instant) -> Self {
        RateWindow { start, ticks: 0, dropped: 0 }
    }
}

/// What the loop does after serving a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

struct Runner {
    name: String,
    id: u32,
    world: World,
    scenario: Scenario,
    scenario_name: Option<String>,
    /// The owner of each owned agent (agents of the scenario and of the admin have none).
    owners: HashMap<AgentId, Arc<str>>,
    /// The team of every player known here (owners, and players who commanded here).
    teams: HashMap<Arc<str>, Option<Arc<str>>>,
    /// Spawn-rate token bucket per player: (tokens, last refill).
    buckets: HashMap<Arc<str>, (f64, Instant)>,
    /// Owners without a connection: since when, and whether the orphan policy was applied.
    gone: HashMap<Arc<str>, (Instant, bool)>,
    next_orphan_check: Instant,
    policy: crate::config::WorldPolicy,
    players: Arc<super::players::Players>,
    encoders: Vec<proto::CellEncoder>,
    keys: Vec<Arc<Shared<proto::ServerMsg>>>,
    /// Encoders and keys of each send rate in use other than 1.
    rate_sets: Vec<RateSet>,
    rate_users: Arc<RateUsers>,
    max_shared: usize,
    info: proto::WorldInfo,
    shared_info: Arc<Mutex<proto::WorldInfo>>,
    frames: broadcast::Sender<Arc<TickFrame>>,
    paused: bool,
    autosave: bool,
    max_catchup: u32,
    max_agents: usize,
    max_spawn: usize,
    crowding: super::admission::Crowding,
    max_aoi_cells: u32,
    stats: Arc<WorldStats>,
    metrics: Arc<Metrics>,
    origin: Arc<Mutex<(Scenario, Option<String>)>>,
    latest: Arc<Mutex<Option<Arc<TickFrame>>>>,
    /// Added to the world's tick on the wire, so that ticks never go back when a world is
    /// replaced (load/reset) and clients' chains stay well ordered.
    tick_offset: u64,
    /// The next publish marks its frame as a reset.
    reset_pending: bool,
    fields: Arc<FieldBuilder>,
    field_tx: std::sync::mpsc::Sender<FlowField>,
    field_rx: std::sync::mpsc::Receiver<FlowField>,
    /// Pipeline counters at the last tick (the metrics count the differences).
    pipeline: PipelineStats,
    /// Steps large worlds.
    sim_pool: Arc<rayon::ThreadPool>,
    /// The runner runs on a one-thread pool of its own, which steps this world while it is
    /// small: a tick never hands work to, or waits at a parallel join for, a thread the OS has
    /// given to someone else (false if that pool could not start: then the shared pool steps it).
    on_solo: bool,
    /// Agent count from which the shared pool steps this world.
    parallel_min: usize,
    /// Frames carry checksums on ticks that are multiples of this (≥ 1).
    checksum_every: u64,
    /// Requests served per turn of the loop (≥ 1).
    max_requests_per_turn: usize,
    /// Agents each player owns (the counts of `owners`).
    owned: HashMap<Arc<str>, usize>,
    /// A `Step` in progress: ticks left and whom to answer when they are done.
    stepping: Option<(u32, Reply<u64>)>,
    /// Effective tick rate and overload measurement.
    window: RateWindow,
    /// Recording: sees every change to `world` (commands, tick rate, pauses, steps, loads).
    rec: crate::record::Hook,
    /// Set for a read-only replay world: its recording, keyframes and playback speed.
    replay: Option<ReplayState>,
}

/// The cells of one send rate: diffed every `span` ticks.
struct RateSet {
    span: u32,
    encoders: Vec<proto::CellEncoder>,
    keys: Vec<Arc<Shared<proto::ServerMsg>>>,
}

impl RateSet {
    /// A rate whose cells start at the current state (their keyframes are what its subscribers
    /// start from).
    fn new(span: u32, world: u32, per_cell: &[Vec<proto::QAgent>], tick: u64, q: &proto::Quantization) -> Self {
        let mut encoders: Vec<proto::CellEncoder> = (0..per_cell.len()).map(|c| proto::CellEncoder::new(proto::FrameScope { world, cell: c as u32 })).collect();
        for (enc, cell) in encoders.iter_mut().zip(per_cell) {
            if let Err(e) = enc.update(cell.clone(), tick, q, false) {
                tracing::error!("cannot encode a cell of rate {span}: {e}");
            }
        }
        let keys = encoders.iter().map(|e| Arc::new(Shared::new(proto::ServerMsg::Keyframe(e.keyframe(false))))).collect();
        RateSet { span, encoders, keys }
    }

    /// This tick's cells of the rate: diffed when the tick is one of its ticks.
    fn cells(&mut self, per_cell: &[Vec<proto::QAgent>], tick: u64, q: &proto::Quantization) -> super::frames::RateCells {
        let due = tick % u64::from(self.span) == 0;
        let mut cells = Vec::with_capacity(self.keys.len());
        for (c, key) in self.keys.iter_mut().enumerate() {
            let mut delta = None;
            if let (true, Some(enc), Some(next)) = (due, self.encoders.get_mut(c), per_cell.get(c)) {
                match enc.update(next.clone(), tick, q, false) {
                    Ok(Some(d)) => {
                        *key = Arc::new(Shared::new(proto::ServerMsg::Keyframe(enc.keyframe(false))));
                        delta = Some(Arc::new(Shared::new(proto::ServerMsg::Delta(d))));
                    }
                    Ok(None) => {}
                    Err(e) => tracing::error!("cell {c} of rate {}: cannot encode delta: {e}", self.span),
                }
            }
            cells.push(CellFrame { delta, key: key.clone() });
        }
        super::frames::RateCells { span: self.span, due, cells }
    }
}

impl Runner {
    /// The tick as clients see it (monotonic across loads).
    fn wire_tick(&self) -> u64 {
        self.tick_offset + self.world.tick()
    }

    /// The quantization of every world: fixed (the protocol default, announced in `Welcome`).
    /// Its dead-reckoning predictor only has to be the same on both sides, so it must not follow
    /// the world's tick rate, which can change at run time and differ between worlds.
    fn quant(&self) -> proto::Quantization {
        proto::Quantization::default()
    }

    fn period(&self) -> Duration {
        let speed = self.replay.as_ref().map_or(1.0, |r| r.speed);
        Duration::from_secs_f64(1.0 / (f64::from(self.world.config().tick_rate) * speed))
    }

    fn run(&mut self, rx: Receiver<Request>) {
        let _span = tracing::info_span!("world", name = %self.name).entered();
        tracing::info!(agents = self.world.agents().len(), "world started");
        let mut next = Instant::now() + self.period();
        if self.replay.is_some() {
            // A replay world may start paused: its subscribers get tick 0's keyframes at once.
            self.publish();
        }
        loop {
            if self.stats.stop.load(Ordering::SeqCst) {
                break;
            }
            // Serve what is queued, a bounded number, without waiting: also (above all) when
            // the tick is late, so that an overloaded world keeps answering.
            if self.serve_queued(&rx) == Flow::Stop {
                break;
            }
            self.check_orphans();
            if self.stepping.is_some() {
                self.step_chunk();
                next = Instant::now() + self.period();
                continue;
            }
            let now = Instant::now();
            if self.paused {
                self.measure(now, 0, 0);
                if self.wait_for_request(&rx, now + self.period()) == Flow::Stop {
                    break;
                }
                next = Instant::now() + self.period();
                continue;
            }
            if now < next {
                // On time: wait for requests until the tick is due.
                if self.wait_for_request(&rx, next) == Flow::Stop {
                    break;
                }
                continue;
            }
            let period = self.period();
            let (due, dropped) = catch_up(next, now, period, self.max_catchup);
            if dropped > 0 {
                self.stats.overruns.fetch_add(dropped, Ordering::Relaxed);
                self.metrics.overruns.inc_by(dropped);
                // Said at once; cleared by a window without drops.
                self.stats.overloaded.store(true, Ordering::Relaxed);
            }
            self.tick();
            self.measure(Instant::now(), 1, dropped);
            next = due + period;
        }
        if let Some((_, reply)) = self.stepping.take() {
            let _ = reply.send(Err(CmdError::Dead(self.name.clone())));
        }
        self.rec.stop(&self.world, "world stopped");
        tracing::info!("world stopped");
    }

    /// Serves up to `max_requests_per_turn` queued requests without waiting.
    fn serve_queued(&mut self, rx: &Receiver<Request>) -> Flow {
        for _ in 0..self.max_requests_per_turn {
            match rx.try_recv() {
                Ok(Request::Shutdown) => return Flow::Stop,
                Ok(req) => self.handle(req),
                Err(std::sync::mpsc::TryRecvError::Empty) => return Flow::Go,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return Flow::Stop,
            }
            if self.stats.stop.load(Ordering::SeqCst) {
                return Flow::Stop;
            }
        }
        Flow::Go
    }

    /// Waits until `until` (at most [`MAX_IDLE_WAIT`]) for one request and serves it.
    fn wait_for_request(&mut self, rx: &Receiver<Request>, until: Instant) -> Flow {
        let wait = until.saturating_duration_since(Instant::now()).min(MAX_IDLE_WAIT);
        match rx.recv_timeout(wait) {
            Ok(Request::Shutdown) => Flow::Stop,
            Ok(req) => {
                self.handle(req);
                Flow::Go
            }
            Err(RecvTimeoutError::Timeout) => Flow::Go,
            Err(RecvTimeoutError::Disconnected) => Flow::Stop,
        }
    }

    /// Counts ticks run and dropped; at the end of each window publishes the effective tick
    /// rate and whether the world is overloaded (it dropped ticks during the window).
    fn measure(&mut self, now: Instant, ticks: u64, dropped: u64) {
        self.window.ticks += ticks;
        self.window.dropped += dropped;
        let elapsed = now.saturating_duration_since(self.window.start);
        if elapsed < RATE_WINDOW {
            return;
        }
        let rate = self.window.ticks as f64 / elapsed.as_secs_f64();
        self.stats.effective_tick_rate_milli.store((rate * 1000.0).min(f64::from(u32::MAX)) as u32, Ordering::Relaxed);
        self.stats.overloaded.store(self.window.dropped > 0, Ordering::Relaxed);
        self.window = RateWindow::new(now);
    }

    /// Runs a chunk of the `Step` in progress: ticks until about one period of work is done
    /// (at least one tick), then publishes one frame. Answers when the last tick has run.
    fn step_chunk(&mut self) {
        let Some((left, reply)) = self.stepping.take() else { return };
        let budget = self.period();
        let start = Instant::now();
        let mut left = left;
        let mut ran = 0;
        while left > 0 {
            self.advance();
            left -= 1;
            ran += 1;
            if start.elapsed() >= budget {
                break;
            }
        }
        self.publish();
        self.stats.tick.store(self.wire_tick(), Ordering::Relaxed);
        self.stats.agents.store(self.world.agents().len() as u64, Ordering::Relaxed);
        self.measure(Instant::now(), ran, 0);
        if left == 0 {
            let _ = reply.send(Ok(self.wire_tick()));
        } else {
            self.stepping = Some((left, reply));
        }
    }

    /// One scheduled tick: step, then publish its frame.
    fn tick(&mut self) {
        self.advance();
        self.publish();
        self.stats.tick.store(self.wire_tick(), Ordering::Relaxed);
        self.stats.agents.store(self.world.agents().len() as u64, Ordering::Relaxed);
    }

    /// How this world's sim steps: inline on its own one-thread pool while small, else on the
    /// shared pool.
    fn stepper(&self) -> impl FnMut(&mut World) + use<> {
        let (pool, solo, min) = (self.sim_pool.clone(), self.on_solo, self.parallel_min);
        move |w: &mut World| {
            if solo && w.agents().len() < min {
                let _ = w.step();
            } else {
                let _ = pool.install(|| w.step());
            }
        }
    }

    /// A replay world's tick: the recording's next step; at the end it pauses.
    fn advance_replay(&mut self) {
        let start = Instant::now();
        let mut run = self.stepper();
        let Some(r) = self.replay.as_mut() else { return };
        let before = r.player.verification().divergences;
        match r.player.step_with(&mut self.world, &mut run) {
            Ok(true) => {}
            Ok(false) => self.paused = true,
            Err(e) => {
                tracing::error!("replay stopped: {e}");
                self.paused = true;
            }
        }
        if self.world.tick() >= r.player.end() {
            self.paused = true;
        }
        let diverged = r.player.verification().divergences - before;
        if diverged > 0 {
            self.metrics.replay_divergences.inc_by(diverged);
        }
        self.stats.tick_rate_milli.store((self.world.config().tick_rate * 1000.0) as u32, Ordering::Relaxed);
        self.metrics.tick_seconds.observe(start.elapsed().as_secs_f64());
    }

    /// Answers a replay control.
    fn replay_op(&mut self, op: ReplayOp) -> Result<ReplayView, CmdError> {
        let mut run = self.stepper();
        let Some(r) = self.replay.as_mut() else {
            return Err(CmdError::Conflict(format!(
                "world `{}` is not a replay world (create one with POST /worlds {{\"name\": ..., \"replay\": \"<recording>\"}})",
                self.name
            )));
        };
        match op {
            ReplayOp::Get => {}
            ReplayOp::Pause => self.paused = true,
            // At the end there is nothing left to play: it stays paused there.
            ReplayOp::Play => self.paused = self.world.tick() >= r.player.end(),
            ReplayOp::Speed(s) => {
                if !(s.is_finite() && s > 0.0 && s <= r.max_speed) {
                    return Err(CmdError::Sim(SimError::invalid("speed", format!("must be above 0 and at most {} (limits.replay_max_speed)", r.max_speed))));
                }
                r.speed = s;
            }
            ReplayOp::Seek(t) => {
                let before = r.player.verification().divergences;
                let old_wire = self.tick_offset + self.world.tick();
                let rep = r.player.seek_with(&mut self.world, t, &mut run).map_err(|e| CmdError::Invalid(e.to_string()))?;
                let diverged = r.player.verification().divergences - before;
                self.metrics.replay_divergences.inc_by(diverged);
                self.metrics.replay_seeks.inc();
                self.metrics.replay_seek_ticks.inc_by(rep.ticks_simulated);
                if self.world.tick() >= r.player.end() {
                    self.paused = true;
                }
                // The seek's events are history; the subscribers resync from keyframes.
                drop(self.world.drain_events());
                // Wire ticks never go back (as across a load): clients' chains stay ordered.
                if self.tick_offset + self.world.tick() <= old_wire {
                    self.tick_offset = old_wire + 1 - self.world.tick();
                }
                self.reset_encoders();
                self.reset_pending = true;
                self.publish();
            }
        }
        self.replay_view().ok_or_else(|| CmdError::Conflict("not a replay world".into()))
    }

    fn replay_view(&self) -> Option<ReplayView> {
        let r = self.replay.as_ref()?;
        let p = &r.player;
        Some(ReplayView {
            recording: r.recording.clone(),
            tick: self.world.tick(),
            end_tick: p.end(),
            playing: !self.paused,
            speed: r.speed,
            max_speed: r.max_speed,
            state_hash: format!("{:016x}", crate::sim::hash::state_hash(&self.world)),
            keyframes: p.keyframes().len(),
            keyframe_interval: p.keyframes().interval(),
            keyframe_bytes: p.keyframes().bytes() as u64,
            open_ticks: p.open_ticks,
            seeks: p.seeks,
            seek_ticks: p.seek_ticks,
            last_seek: p.last_seek,
            verification: p.verification().clone(),
        })
    }

    /// Refuses what would change a replay world (it changes only as its recording says).
    fn read_only(&self, what: &str) -> Result<(), CmdError> {
        match &self.replay {
            Some(r) => Err(CmdError::ReadOnly(format!(
                "world `{}` is a read-only replay of recording `{}`: {what} would change it (use /worlds/{}/replay/seek, play, pause, speed)",
                self.name, r.recording, self.name
            ))),
            None => Ok(()),
        }
    }

    /// Steps the world once (without publishing).
    fn advance(&mut self) {
        if self.replay.is_some() {
            self.advance_replay();
            return;
        }
        let start = Instant::now();
        self.collect_fields();
        let world = &mut self.world;
        if self.on_solo && world.agents().len() < self.parallel_min {
            // On this world's own one-thread pool: the step's parallel loops run inline.
            world.step();
        } else {
            self.sim_pool.install(|| world.step());
        }
        self.rec.after_step(&self.world);
        for job in self.world.take_field_jobs() {
            if !self.fields.submit(job, self.field_tx.clone()) {
                self.metrics.field_builds_refused.inc();
            }
        }
        let elapsed = start.elapsed();
        if let Some(p) = self.world.nav().map(|n| n.pipeline_stats()) {
            let last = std::mem::replace(&mut self.pipeline, p);
            self.metrics.fields_requested.inc_by(p.requested.saturating_sub(last.requested));
            self.metrics.fields_delivered.inc_by(p.delivered.saturating_sub(last.delivered));
            self.metrics.fields_built_on_tick.inc_by(p.built_on_tick.saturating_sub(last.built_on_tick));
        }
        self.metrics.tick_seconds.observe(elapsed.as_secs_f64());
    }

    /// Hands the world the flow fields built since the last tick. For a field due now that a
    /// builder is still building, waits for it (at most [`FIELD_WAIT`]) rather than build it a
    /// second time; one not started yet is taken back, and the tick builds it.
    fn collect_fields(&mut self) {
        let deadline = Instant::now() + FIELD_WAIT;
        loop {
            while let Ok(f) = self.field_rx.try_recv() {
                self.world.deliver_field(f);
            }
            let mut awaited = self.world.awaited_fields();
            awaited.retain(|t| !t.cancel_unstarted());
            let now = Instant::now();
            if awaited.is_empty() || now >= deadline {
                return;
            }
            match self.field_rx.recv_timeout(deadline - now) {
                Ok(f) => self.world.deliver_field(f),
                Err(_) => return,
            }
        }
    }

    /// Resets the AOI encoders (after load/reset): every cell starts empty at the current tick,
    /// and the next publish sends the whole state as entered agents.
    fn reset_encoders(&mut self) {
        self.info = world_info(self.id, &self.name, &self.world, self.max_aoi_cells);
        if let Ok(mut i) = self.shared_info.lock() {
            *i = self.info.clone();
        }
        let n = self.info.cell_count() as usize;
        self.encoders = (0..n).map(|c| proto::CellEncoder::new(proto::FrameScope { world: self.id, cell: c as u32 })).collect();
        // Fill the encoders with the current state now (their keyframes are what subscribers
        // resync from); the deltas of this first diff chain on nothing and are not sent.
        let q = self.quant();
        let tick = self.wire_tick();
        for (c, cell) in self.quantize_cells(&q).into_iter().enumerate() {
            if let Some(enc) = self.encoders.get_mut(c) {
                let _ = enc.update(cell, tick, &q, true);
            }
        }
        self.keys = self.encoders.iter().map(|e| Arc::new(Shared::new(proto::ServerMsg::Keyframe(e.keyframe(true))))).collect();
        // Rates start again from the new state at the next publish.
        self.rate_sets.clear();
        self.stats.tick_rate_milli.store((self.world.config().tick_rate * 1000.0) as u32, Ordering::Relaxed);
        self.stats.agents.store(self.world.agents().len() as u64, Ordering::Relaxed);
        self.stats.tick.store(self.wire_tick(), Ordering::Relaxed);
    }

    /// The quantized agents of every AOI cell, each sorted by id.
    fn quantize_cells(&self, q: &proto::Quantization) -> Vec<Vec<proto::QAgent>> {
        let mut per_cell: Vec<Vec<proto::QAgent>> = vec![Vec::new(); self.info.cell_count() as usize];
        for a in self.world.agents() {
            let c = self.info.cell_of(a.position.x, a.position.y) as usize;
            if let Some(v) = per_cell.get_mut(c) {
                v.push(q.quantize(&convert::sample(a)));
            }
        }
        per_cell
    }

    /// Quantizes the state per AOI cell, diffs each cell once, and broadcasts the frame.
    fn publish(&mut self) {
        let q = self.quant();
        let n = self.encoders.len();
        let per_cell = self.quantize_cells(&q);
        let tick = self.wire_tick();
        let with_sum = tick % self.checksum_every == 0;
        // Other send rates: drop those nobody uses, start new ones from this state.
        let in_use: Vec<u32> = self.rate_users.in_use().collect();
        self.rate_sets.retain(|r| in_use.contains(&r.span));
        let mut rates = Vec::with_capacity(in_use.len());
        for span in in_use {
            match self.rate_sets.iter_mut().find(|r| r.span == span) {
                Some(set) => rates.push(set.cells(&per_cell, tick, &q)),
                None => {
                    let mut set = RateSet::new(span, self.id, &per_cell, tick, &q);
                    rates.push(set.cells(&[], tick, &q));
                    self.rate_sets.push(set);
                }
            }
        }
        let mut cells = Vec::with_capacity(n);
        for (c, next) in per_cell.into_iter().enumerate() {
            let (Some(enc), Some(key)) = (self.encoders.get_mut(c), self.keys.get_mut(c)) else { continue };
            let delta = match enc.update(next, tick, &q, with_sum) {
                Ok(Some(d)) => {
                    *key = Arc::new(Shared::new(proto::ServerMsg::Keyframe(enc.keyframe(with_sum))));
                    Some(Arc::new(Shared::new(proto::ServerMsg::Delta(d))))
                }
                Ok(None) => None,
                Err(e) => {
                    tracing::error!("cell {c}: cannot encode delta: {e}");
                    None
                }
            };
            cells.push(CellFrame { delta, key: key.clone() });
        }
        let groups = self.world.groups().to_vec();
        // One wire event per run of same-group, same-owner spawns / despawns (their `agents`
        // lists), not one per agent: a 10k-agent spawn is one message to each subscriber.
        let mut kinds: Vec<(Option<Arc<str>>, proto::EventKind)> = Vec::new();
        for e in self.world.drain_events() {
            let id = match &e {
                crate::sim::world::Event::Spawned { id, .. }
                | crate::sim::world::Event::Despawned { id }
                | crate::sim::world::Event::DestinationReached { id, .. }
                | crate::sim::world::Event::PathCompleted { id } => *id,
            };
            let owner = self.owners.get(&id).cloned();
            if let crate::sim::world::Event::Despawned { id } = &e {
                self.disown(*id);
            }
            match (kinds.last_mut(), convert::event(&e, &groups)) {
                (Some((o, proto::EventKind::Spawned(last))), proto::EventKind::Spawned(s)) if last.group == s.group && *o == owner => last.agents.extend(s.agents),
                (Some((o, proto::EventKind::Despawned(last))), proto::EventKind::Despawned(d)) if *o == owner => last.agents.extend(d.agents),
                (_, k) => kinds.push((owner, k)),
            }
        }
        let events: Vec<FrameEvent> = kinds
            .into_iter()
            .map(|(owner, event)| {
                let msg = Arc::new(Shared::new(proto::ServerMsg::Event(proto::Event { world: self.id, tick, event })));
                // Events about a player's agents go to each of its connections, subscribed or
                // not (their send tasks skip them in the broadcast).
                if let Some(p) = &owner {
                    self.players.deliver(p, &msg);
                }
                let vision = owner.as_ref().map(|p| crate::auth::vision_key(p, self.teams.get(p).cloned().flatten().as_deref()));
                FrameEvent { owner, vision, msg }
            })
            .collect();
        let vision = self.vision();
        let frame = Arc::new(TickFrame {
            world: self.id,
            tick,
            cells,
            rates,
            checksum_every: self.checksum_every,
            shared: Default::default(),
            max_shared: self.max_shared,
            events,
            reset: std::mem::take(&mut self.reset_pending),
            vision,
        });
        if let Ok(mut l) = self.latest.lock() {
            *l = Some(frame.clone());
        }
        // No receivers is fine: nobody is watching.
        let _ = self.frames.send(frame);
    }

    /// Applies commands on behalf of an actor: ownership and quotas are checked for all of
    /// them first (nothing changes on a refusal), then they run in order (stopping at the first
    /// error). Agents a player spawns belong to it.
    fn apply_for(&mut self, cmds: Vec<Command>, actor: &Actor) -> Result<Outcome, CmdError> {
        let kind = cmds.first().map_or("none", command_kind);
        let agents: Vec<AgentId> = cmds.iter().flat_map(command_agents).collect();
        let asked = spawn_count(&cmds);
        if let Some(p) = &actor.player {
            // Known here from now on (GET /worlds/{w}/players, team vision).
            if !self.teams.contains_key(p) && self.teams.len() < MAX_KNOWN_PLAYERS {
                self.teams.insert(p.clone(), actor.team.clone());
            }
        }
        // A spawn larger than `max_spawn` is invalid whoever asks: the sim refuses it naming
        // the field (`invalid_field`), before any quota is weighed.
        let oversize = cmds.iter().any(|c| spawn_count(std::slice::from_ref(c)) > self.max_spawn);
        let quota = if oversize { Ok(()) } else { self.check_spawn_quota(actor, asked) };
        let r = self.check_owner(actor, &agents, &cmds).and(quota).and_then(|()| self.admit(&cmds)).and_then(|()| {
            let mut last = Outcome::Done;
            for c in cmds {
                last = self.apply(c)?;
                self.record_owner(&last, actor);
            }
            Ok(last)
        });
        if r.is_ok() && asked > 0 {
            self.charge_spawn(actor, asked);
        }
        self.metrics.command(kind, r.is_ok());
        r
    }

    /// Checks the spawns among `cmds` against the crowding bounds (`admission.rs`), all of
    /// them before any is applied.
    fn admit(&self, cmds: &[Command]) -> Result<(), CmdError> {
        use super::admission as adm;
        if cmds.iter().any(|c| matches!(c, Command::Spawn(_))) {
            let bounds = self.world.config().bounds;
            let mut covered = adm::cover(&self.world);
            for c in cmds {
                if let Command::Spawn(spec) = c {
                    covered = adm::check_spawn(spec, bounds, covered, &self.crowding)?;
                }
            }
        }
        if cmds.iter().any(|c| matches!(c, Command::AddObstacle { .. } | Command::MoveObstacle { .. } | Command::AddWall { .. })) {
            let shape = adm::static_shape(self.world.config());
            let mut used = adm::static_cells(&self.world, &shape);
            for c in cmds {
                match c {
                    Command::AddObstacle { center, radius } => {
                        let (lo, hi) = adm::obstacle_box(*center, *radius);
                        used = adm::check_static(used + adm::box_cells(&shape, lo, hi), "radius", &self.crowding)?;
                    }
                    Command::MoveObstacle { id, center, radius } => {
                        if let Some(o) = self.world.obstacles().iter().find(|o| o.id == *id) {
                            let (lo, hi) = adm::obstacle_box(o.center, o.radius);
                            let old = adm::box_cells(&shape, lo, hi);
                            let (lo, hi) = adm::obstacle_box(*center, radius.unwrap_or(o.radius));
                            used = adm::check_static(used.saturating_sub(old) + adm::box_cells(&shape, lo, hi), "radius", &self.crowding)?;
                        }
                    }
                    Command::AddWall { a, b } => {
                        used = adm::check_static(used + adm::box_cells(&shape, a.min(*b), a.max(*b)), "b", &self.crowding)?;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Makes a player the owner of the agents it spawned (the admin's belong to nobody).
    fn record_owner(&mut self, outcome: &Outcome, actor: &Actor) {
        if let (Outcome::Spawned(ids), Some(p)) = (outcome, &actor.player) {
            self.teams.insert(p.clone(), actor.team.clone());
            for id in ids {
                self.own(*id, p.clone());
            }
        }
    }

    fn own(&mut self, id: AgentId, p: Arc<str>) {
        if let Some(old) = self.owners.insert(id, p.clone()) {
            self.release(&old);
        }
        *self.owned.entry(p).or_insert(0) += 1;
    }

    /// Forgets the owner of a removed agent.
    fn disown(&mut self, id: AgentId) {
        if let Some(s) = self.owners.remove(&id) {
            self.release(&s);
        }
    }

    fn release(&mut self, s: &Arc<str>) {
        if let Some(n) = self.owned.get_mut(s) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.owned.remove(s);
            }
        }
    }

    /// The spawn-rate bucket of a player, refilled to now: (tokens, burst).
    fn bucket(&self, p: &Arc<str>, now: Instant) -> (f64, f64) {
        let burst = self.policy.max_agents_per_player as f64;
        let (tokens, last) = self.buckets.get(p).copied().unwrap_or((burst, now));
        ((tokens + now.duration_since(last).as_secs_f64() * self.policy.spawn_rate_per_sec).min(burst), burst)
    }

    fn charge_spawn(&mut self, actor: &Actor, asked: usize) {
        let Some(p) = actor.player.clone().filter(|_| !actor.is_admin()) else { return };
        let now = Instant::now();
        let (tokens, _) = self.bucket(&p, now);
        if self.buckets.len() < MAX_KNOWN_PLAYERS || self.buckets.contains_key(&p) {
            self.buckets.insert(p, ((tokens - asked as f64).max(0.0), now));
        }
    }

    /// A player's spawns must fit its quotas in this world: agents owned
    /// (`max_agents_per_player`), spawn rate (`spawn_rate_per_sec`), and the world's own cap.
    /// The admin is exempt.
    fn check_spawn_quota(&self, actor: &Actor, asked: usize) -> Result<(), CmdError> {
        if actor.is_admin() || asked == 0 {
            return Ok(());
        }
        let Some(p) = &actor.player else { return Ok(()) };
        let max = self.policy.max_agents_per_player;
        let have = self.owned.get(p).copied().unwrap_or(0);
        if have.saturating_add(asked) > max {
            return Err(CmdError::Quota(format!("player `{p}` may own at most {max} agents in world `{}` (owns {have}, asked {asked})", self.name)));
        }
        let (tokens, _) = self.bucket(p, Instant::now());
        if asked as f64 > tokens {
            return Err(CmdError::Quota(format!(
                "player `{p}` spawns too fast in world `{}`: at most {} agents per second (now {} available)",
                self.name,
                self.policy.spawn_rate_per_sec,
                tokens.floor()
            )));
        }
        let total = self.world.agents().len();
        if total.saturating_add(asked) > self.max_agents {
            return Err(CmdError::Quota(format!("world `{}` is full: {total} of at most {} agents", self.name, self.max_agents)));
        }
        Ok(())
    }

    fn check_owner(&self, actor: &Actor, agents: &[AgentId], cmds: &[Command]) -> Result<(), CmdError> {
        if actor.is_admin() {
            return Ok(());
        }
        if actor.role == proto::Role::Spectator {
            return Err(CmdError::NotAllowed("spectators command nothing".into()));
        }
        if cmds.iter().any(|c| !matches!(command_kind(c), "spawn" | "despawn" | "set_behaviors" | "add_behavior" | "remove_behavior" | "reset_behaviors" | "move_to")) {
            return Err(CmdError::NotAllowed("only the admin changes obstacles and walls".into()));
        }
        for id in agents {
            if self.world.agent(*id).is_none() {
                return Err(CmdError::Sim(SimError::UnknownAgent(*id)));
            }
            if actor.player.is_none() || self.owners.get(id) != actor.player.as_ref() {
                return Err(CmdError::Forbidden(*id));
            }
        }
        Ok(())
    }

    /// Once a second: owners without a connection for the grace period get the orphan policy
    /// (once); known players who own nothing and are gone are forgotten.
    fn check_orphans(&mut self) {
        let now = Instant::now();
        if now < self.next_orphan_check {
            return;
        }
        self.next_orphan_check = now + ORPHAN_CHECK;
        if self.teams.is_empty() {
            return;
        }
        let grace = Duration::from_secs(u64::from(self.policy.session_grace_secs));
        let mut expired = Vec::new();
        let known: Vec<Arc<str>> = self.teams.keys().cloned().collect();
        for p in known {
            if self.players.connected(&p) {
                self.gone.remove(&p);
                continue;
            }
            if !self.owned.contains_key(&p) {
                // Owns nothing here and is away: forget it (bounds `teams`, `gone`, `buckets`).
                self.teams.remove(&p);
                self.gone.remove(&p);
                self.buckets.remove(&p);
                continue;
            }
            let g = self.gone.entry(p.clone()).or_insert((now, false));
            if !g.1 && now.duration_since(g.0) >= grace {
                g.1 = true;
                expired.push(p);
            }
        }
        for p in expired {
            self.apply_orphan_policy(&p);
        }
    }

    /// The world's orphan policy on a player's agents.
    fn apply_orphan_policy(&mut self, p: &Arc<str>) {
        let mut ids: Vec<AgentId> = self.owners.iter().filter(|(_, o)| *o == p).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        if ids.is_empty() {
            return;
        }
        tracing::info!(player = %p, agents = ids.len(), policy = ?self.policy.orphan_policy, "orphaned agents");
        for id in ids {
            let r = match self.policy.orphan_policy {
                crate::config::OrphanPolicy::Keep => Ok(Outcome::Done),
                crate::config::OrphanPolicy::Despawn => self.apply(Command::Despawn(id)),
                crate::config::OrphanPolicy::Freeze => {
                    let at = self.world.agent(id).map(|a| a.position);
                    self.apply(Command::ResetBehaviors { agent: id }).and_then(|_| match at {
                        Some(target) => self.apply(Command::MoveTo { agents: vec![id], target, stopping_distance: 0.0 }),
                        None => Ok(Outcome::Done),
                    })
                }
            };
            if let Err(e) = r {
                tracing::warn!(player = %p, agent = id, "orphan policy: {e}");
            }
        }
    }

    /// Under `owned` visibility: per vision key (a team, or a player without one), the AOI
    /// cells that intersect a disc of `vision_radius` around one of its agents.
    fn vision(&self) -> Option<Arc<HashMap<String, Vec<bool>>>> {
        if self.policy.visibility != crate::config::Visibility::Owned {
            return None;
        }
        let mut out: HashMap<String, Vec<bool>> = HashMap::new();
        let n = self.info.cell_count() as usize;
        let r = self.policy.vision_radius;
        let (cs, b) = (self.info.aoi_cell_size, self.info.bounds);
        for (id, owner) in &self.owners {
            let Some(a) = self.world.agent(*id) else { continue };
            let team = self.teams.get(owner).cloned().flatten();
            let key = crate::auth::vision_key(owner, team.as_deref());
            let cells = out.entry(key).or_insert_with(|| vec![false; n]);
            let (x, y) = (a.position.x, a.position.y);
            let lo = self.info.cell_of(x - r, y - r);
            let hi = self.info.cell_of(x + r, y + r);
            let cols = self.info.cols.max(1);
            for row in lo / cols..=hi / cols {
                for col in lo % cols..=hi % cols {
                    // Nearest point of the cell to the agent.
                    let (x0, y0) = (b.min_x + col as f32 * cs, b.min_y + row as f32 * cs);
                    let dx = x - x.clamp(x0, x0 + cs);
                    let dy = y - y.clamp(y0, y0 + cs);
                    if dx * dx + dy * dy <= r * r {
                        if let Some(c) = cells.get_mut((row * cols + col) as usize) {
                            *c = true;
                        }
                    }
                }
            }
        }
        Some(Arc::new(out))
    }

    fn agent_view(&self, a: &crate::sim::Agent) -> AgentView {
        AgentView {
            id: a.id,
            group: self.world.groups().get(usize::from(a.group)).cloned().unwrap_or_default(),
            position: a.position.to_array(),
            velocity: a.velocity.to_array(),
            orientation: a.orientation,
            radius: a.limits.radius,
            behaviors: a.behaviors.entries().iter().map(|e| e.behavior.kind().to_string()).collect(),
        }
    }

    fn flow_field_view(&self, id: AgentId, max_side: u32) -> Result<FlowFieldView, CmdError> {
        let a = self.world.agent(id).ok_or(CmdError::Sim(SimError::UnknownAgent(id)))?;
        let mut v = FlowFieldView {
            agent: id,
            status: "no_order",
            target: None,
            goal: None,
            origin: [0.0; 2],
            spacing: 0.0,
            cols: 0,
            rows: 0,
            angles: Vec::new(),
        };
        let (Some(o), Some(nav)) = (a.order.as_deref(), self.world.nav()) else { return Ok(v) };
        v.target = Some(o.target.to_array());
        v.goal = Some(o.goal.to_array());
        let cell = o.goal_cell;
        v.status = if nav.cache.get(cell as usize).is_some() {
            "ready"
        } else if nav.is_pending(cell) {
            "pending"
        } else {
            "straight"
        };
        if let Some(f) = nav.cache.get(cell as usize) {
            let s = f.sample_grid(&nav.grid, max_side);
            v.origin = s.origin.to_array();
            v.spacing = s.spacing;
            (v.cols, v.rows, v.angles) = (s.cols, s.rows, s.angles);
        }
        Ok(v)
    }

    fn avoidance_view(&mut self, id: AgentId) -> Result<AvoidanceView, CmdError> {
        use crate::sim::behaviors::reciprocal_avoidance::{self as ra, ReciprocalAvoidanceParams};
        use crate::sim::behaviors::{Scratch, move_to};
        use crate::sim::rng::Rng;
        if self.world.agent(id).is_none() {
            return Err(CmdError::Sim(SimError::UnknownAgent(id)));
        }
        // The grid holds the positions of the last tick's start; the next tick rebuilds it
        // first anyway, so rebuilding now changes nothing it computes (as `World::audit`).
        self.world.rebuild_indexes();
        let view = self.world.view();
        let a = view.agent(id).ok_or(CmdError::Sim(SimError::UnknownAgent(id)))?;
        let config = self.world.config();
        let mut scratch = Scratch { rng: Rng::for_agent(config.seed, a.id, self.world.tick()), memory: a.memory, events: 0 };
        let (params, active, preferred, source) = match a.active_order() {
            Some(order) => match config.move_to.reciprocal {
                Some(rp) => {
                    // Zero when the agent stops this tick.
                    let preferred = move_to::preferred_velocity(a, order, &config.move_to, &view, &mut scratch).unwrap_or(glam::Vec2::ZERO);
                    (rp, true, preferred, "move_to")
                }
                None => (ReciprocalAvoidanceParams::default(), false, a.velocity, "velocity"),
            },
            None => {
                let wanted = a.behaviors.blend(a, &view, &mut scratch);
                let preferred = ra::preferred_velocity(a, wanted, view.dt);
                match a.behaviors.reciprocal() {
                    Some(rp) => (*rp, true, preferred, "behaviors"),
                    None => (ReciprocalAvoidanceParams::default(), false, preferred, "behaviors"),
                }
            }
        };
        let e = ra::explain(a, &params, &view, preferred);
        Ok(AvoidanceView {
            agent: id,
            active,
            preferred_source: source,
            position: a.position.into(),
            velocity: a.velocity.into(),
            radius: a.limits.radius,
            max_speed: a.limits.max_speed,
            preferred: e.preferred.into(),
            chosen: e.chosen.into(),
            half_planes: e
                .half_planes
                .iter()
                .enumerate()
                .map(|(i, h)| HalfPlaneView { point: h.point.into(), direction: h.direction.into(), is_static: i < e.n_static })
                .collect(),
            time_horizon: params.time_horizon,
            obstacle_time_horizon: params.obstacle_time_horizon,
            neighbor_dist: params.neighbor_dist,
            max_neighbors: params.max_neighbors,
        })
    }

    fn info_view(&self) -> WorldInfoView {
        WorldInfoView {
            name: self.name.clone(),
            id: self.id,
            tick: self.wire_tick(),
            tick_rate: self.world.config().tick_rate,
            paused: self.paused,
            agents: self.world.agents().len(),
            obstacles: self.world.obstacles().len(),
            walls: self.world.walls().len(),
            alive: true,
            overruns: self.stats.overruns.load(Ordering::Relaxed),
            effective_tick_rate: f64::from(self.stats.effective_tick_rate_milli.load(Ordering::Relaxed)) / 1000.0,
            overloaded: self.stats.overloaded.load(Ordering::Relaxed),
            aoi_cell_size: self.info.aoi_cell_size,
            aoi_cols: self.info.cols,
            aoi_rows: self.info.rows,
            bounds: [self.info.bounds.min_x, self.info.bounds.min_y, self.info.bounds.max_x, self.info.bounds.max_y],
            scenario: self.scenario_name.clone(),
            autosave: self.autosave,
            recording: self.rec.view(),
            replay: self.replay_view().map(Box::new),
        }
    }

    /// Replaces the world by one built from `scenario`; with `admit`, its groups must pass the
    /// crowding bounds (load and reset; a recording's re-base is the world as it is).
    fn replace_world(&mut self, scenario: Scenario, name: Option<String>, admit: bool) -> Result<u64, CmdError> {
        let world = build_world(&scenario, self.max_agents, self.max_spawn)?;
        if admit {
            super::admission::check_scenario(&scenario, &world, &self.crowding).map_err(CmdError::Sim)?;
        }
        self.tick_offset = self.wire_tick() + 1;
        self.world = world;
        // Fields still being built were for the old world: a new channel leaves them unheard.
        (self.field_tx, self.field_rx) = std::sync::mpsc::channel();
        self.pipeline = PipelineStats::default();
        if let Ok(mut o) = self.origin.lock() {
            *o = (scenario.clone(), name.clone());
        }
        self.rec.started(&self.name, &scenario);
        self.scenario = scenario;
        self.scenario_name = name;
        self.owners.clear();
        self.owned.clear();
        self.reset_encoders();
        // Subscribers resync from this frame's keyframes.
        self.reset_pending = true;
        self.publish();
        Ok(self.wire_tick())
    }

    fn handle(&mut self, req: Request) {
        // A replay world refuses every change but play/pause, with the reason.
        let refused = match &req {
            Request::Apply { cmd, .. } => Some(command_kind(cmd)),
            Request::ApplyMany { cmds, .. } => Some(cmds.first().map_or("a command", command_kind)),
            Request::Patch { tick_rate: Some(_), .. } => Some("a tick-rate change"),
            Request::Patch { autosave: Some(true), .. } => Some("autosave"),
            Request::Step { .. } => Some("a step"),
            Request::Reset { .. } => Some("a reset"),
            Request::Load { .. } => Some("a load"),
            Request::RandomObstacles { .. } => Some("random obstacles"),
            Request::Recording { on: true, .. } => Some("recording"),
            Request::Kick { .. } => Some("a kick"),
            Request::SetOwner { .. } => Some("an owner change"),
            _ => None,
        };
        if let Some(what) = refused
            && let Err(e) = self.read_only(what)
        {
            self.metrics.command("replay_refused", false);
            return refuse(req, e);
        }
        match req {
            Request::Apply { cmd, actor, reply } => {
                let r = self.apply_for(vec![cmd], &actor);
                let _ = reply.send(r);
            }
            Request::ApplyMany { cmds, actor, reply } => {
                let r = self.apply_for(cmds, &actor);
                let _ = reply.send(r);
            }
            Request::Players { reply } => {
                let mut v: Vec<WorldPlayer> = self
                    .teams
                    .keys()
                    .map(|p| WorldPlayer {
                        player: p.to_string(),
                        agents: self.owned.get(p).copied().unwrap_or(0),
                        orphaned: self.gone.get(p).is_some_and(|g| g.1),
                    })
                    .collect();
                v.sort_by(|a, b| a.player.cmp(&b.player));
                let _ = reply.send(Ok(v));
            }
            Request::Kick { player, reply } => {
                let key: Arc<str> = Arc::from(player.as_str());
                let n = self.owned.get(&key).copied().unwrap_or(0);
                self.gone.insert(key.clone(), (Instant::now(), true));
                self.apply_orphan_policy(&key);
                let _ = reply.send(Ok(n));
            }
            Request::SetOwner { agent, player, team, reply } => {
                let r = if self.world.agent(agent).is_none() {
                    Err(CmdError::Sim(SimError::UnknownAgent(agent)))
                } else {
                    self.disown(agent);
                    if let Some(p) = player {
                        let key: Arc<str> = Arc::from(p.as_str());
                        self.teams.insert(key.clone(), team.as_deref().map(Arc::from));
                        self.own(agent, key);
                    }
                    Ok(())
                };
                let _ = reply.send(r);
            }
            Request::Agents { limit, reply } => {
                let v = self.world.agents().iter().take(limit).map(|a| self.agent_view(a)).collect();
                let _ = reply.send(Ok(v));
            }
            Request::Agent { id, reply } => {
                let r = self.world.agent(id).map(|a| self.agent_view(a)).ok_or(CmdError::Sim(SimError::UnknownAgent(id)));
                let _ = reply.send(r);
            }
            Request::FlowField { agent, max_side, reply } => {
                let _ = reply.send(self.flow_field_view(agent, max_side));
            }
            Request::Avoidance { agent, reply } => {
                let _ = reply.send(self.avoidance_view(agent));
            }
            Request::Obstacles { reply } => {
                let v = self.world.obstacles().iter().map(|o| ObstacleView { id: o.id, center: o.center.to_array(), radius: o.radius }).collect();
                let _ = reply.send(Ok(v));
            }
            Request::Walls { reply } => {
                let v = self.world.walls().iter().map(|w| WallView { id: w.id, a: w.a.to_array(), b: w.b.to_array() }).collect();
                let _ = reply.send(Ok(v));
            }
            Request::Snapshot { reply } => {
                let q = self.quant();
                let snap = Snapshot {
                    world: self.name.clone(),
                    tick: self.wire_tick(),
                    agents: self.world.agents().iter().map(|a| self.agent_view(a)).collect(),
                    obstacles: self.world.obstacles().iter().map(|o| ObstacleView { id: o.id, center: o.center.to_array(), radius: o.radius }).collect(),
                    walls: self.world.walls().iter().map(|w| WallView { id: w.id, a: w.a.to_array(), b: w.b.to_array() }).collect(),
                    quantized: self.world.agents().iter().map(|a| q.quantize(&convert::sample(a))).collect(),
                };
                let _ = reply.send(Ok(snap));
            }
            Request::Info { reply } => {
                let _ = reply.send(Ok(self.info_view()));
            }
            Request::Patch { tick_rate, paused, autosave, reply } => {
                let r = (|| {
                    if let Some(rate) = tick_rate {
                        self.world.set_tick_rate(rate).map_err(CmdError::Sim)?;
                        self.rec.tick_rate(&self.world, rate);
                        self.stats.tick_rate_milli.store((rate * 1000.0) as u32, Ordering::Relaxed);
                    }
                    if let Some(p) = paused {
                        self.paused = p;
                        self.rec.paused(&self.world, p);
                    }
                    if let Some(a) = autosave {
                        self.autosave = a;
                    }
                    Ok(self.info_view())
                })();
                let _ = reply.send(r);
            }
            Request::Step { ticks, reply } => {
                // Run in chunks by the loop, between which it serves requests.
                if self.stepping.is_some() {
                    let _ = reply.send(Err(CmdError::Busy(self.name.clone())));
                } else if ticks == 0 {
                    let _ = reply.send(Ok(self.wire_tick()));
                } else {
                    self.stepping = Some((ticks, reply));
                }
            }
            Request::Reset { reply } => {
                let sc = self.scenario.clone();
                let name = self.scenario_name.clone();
                let _ = reply.send(self.replace_world(sc, name, true));
            }
            Request::Load { scenario, name, reply } => {
                let _ = reply.send(self.replace_world(*scenario, Some(name), true));
            }
            Request::Save { reply } => {
                let _ = reply.send(Ok(Box::new(crate::scenario::snapshot_scenario(&self.world, &self.scenario))));
            }
            Request::RandomObstacles { spec, reply } => {
                let r = (|| {
                    let existing: Vec<(glam::Vec2, f32)> = self.world.obstacles().iter().map(|o| (o.center, o.radius)).collect();
                    let placed = crate::scenario::place_random_obstacles(self.world.config().bounds, &spec, &existing, self.world.config().seed)?;
                    let room = self.world.config().max_obstacles.saturating_sub(self.world.obstacles().len());
                    if placed.len() > room {
                        return Err(SimError::LimitExceeded { what: "obstacles".into(), max: self.world.config().max_obstacles });
                    }
                    let shape = super::admission::static_shape(self.world.config());
                    let adding: u64 = placed.iter().map(|&(c, r)| {
                        let (lo, hi) = super::admission::obstacle_box(c, r);
                        super::admission::box_cells(&shape, lo, hi)
                    }).sum();
                    super::admission::check_static(super::admission::static_cells(&self.world, &shape) + adding, "max_radius", &self.crowding)?;
                    placed
                        .into_iter()
                        .map(|(center, radius)| match self.apply(Command::AddObstacle { center, radius })? {
                            Outcome::Added(id) => Ok(id),
                            other => Err(SimError::invalid("obstacles", format!("unexpected outcome {other:?}"))),
                        })
                        .collect::<Result<Vec<u32>, SimError>>()
                })()
                .map_err(CmdError::from);
                self.metrics.command("random_obstacles", r.is_ok());
                let _ = reply.send(r);
            }
            Request::Replay { op, reply } => {
                let _ = reply.send(self.replay_op(op));
            }
            Request::Recording { on, digests, reply } => {
                let r = self.set_recording(on, digests).map(|()| self.info_view());
                let _ = reply.send(r);
            }
            Request::Shutdown => {}
            Request::Panic => panic!("fault injection: a world thread panic was asked for"),
        }
    }

    /// Applies a sim command: the one place commands reach the `World`, so the recording sees
    /// every one (REST, WebSocket, admin edits, random obstacles).
    fn apply(&mut self, cmd: Command) -> Result<Outcome, SimError> {
        self.rec.command(&self.world, &cmd);
        self.world.apply(cmd)
    }

    /// Starts or stops recording. A world changed since its load cannot be rebuilt from its
    /// scenario, and a snapshot (`snapshot_scenario`) keeps positions, not velocities, orders or
    /// per-agent behaviour changes: so the world is first re-based on that snapshot (as a save
    /// then load would do; subscribers get a reset), and the recording starts from it. The
    /// world's scenario for `reset` stays the one it was loaded from.
    fn set_recording(&mut self, on: bool, digests: Option<bool>) -> Result<(), CmdError> {
        if !on {
            self.rec.stop(&self.world, "stopped by request");
            return Ok(());
        }
        if self.rec.active() {
            return Ok(());
        }
        if self.rec.pristine() {
            let sc = self.scenario.clone();
            return self.rec.start(&self.name, &sc, digests, false).map_err(CmdError::Invalid);
        }
        let snap = crate::scenario::snapshot_scenario(&self.world, &self.scenario);
        let (base, base_name) = (self.scenario.clone(), self.scenario_name.clone());
        self.replace_world(snap.clone(), base_name.clone(), false)?;
        self.scenario = base.clone();
        if let Ok(mut o) = self.origin.lock() {
            *o = (base, base_name);
        }
        self.rec.start(&self.name, &snap, digests, true).map_err(CmdError::Invalid)
    }
}

/// Answers a refused request with `e` (nothing was changed).
fn refuse(req: Request, e: CmdError) {
    match req {
        Request::Apply { reply, .. } | Request::ApplyMany { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Patch { reply, .. } | Request::Recording { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Step { reply, .. } | Request::Reset { reply } | Request::Load { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::RandomObstacles { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Kick { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::SetOwner { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Agents { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Agent { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::FlowField { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Avoidance { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Obstacles { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Walls { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Snapshot { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Info { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Save { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Players { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Replay { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Shutdown | Request::Panic => {}
    }
}

/// Most players a world remembers (owners, and players who commanded in it).
const MAX_KNOWN_PLAYERS: usize = 100_000;

/// How often a world looks for owners whose grace period is over.
const ORPHAN_CHECK: Duration = Duration::from_millis(250);

/// Agents the spawns among `cmds` create.
fn spawn_count(cmds: &[Command]) -> usize {
    cmds.iter()
        .map(|c| match c {
            Command::Spawn(spec) => match &spec.area {
                crate::sim::world::SpawnArea::Points(p) => p.len(),
                _ => spec.count,
            },
            _ => 0,
        })
        .fold(0usize, usize::saturating_add)
}

/// The agents a command acts on (ownership is checked for these).
fn command_agents(c: &Command) -> Vec<AgentId> {
    match c {
        Command::Despawn(id) => vec![*id],
        Command::SetBehaviors { agent, .. }
        | Command::AddBehavior { agent, .. }
        | Command::RemoveBehavior { agent, .. }
        | Command::ResetBehaviors { agent } => vec![*agent],
        Command::MoveTo { agents, .. } => agents.clone(),
        Command::Spawn(_) | Command::AddObstacle { .. } | Command::MoveObstacle { .. } | Command::RemoveObstacle(_) | Command::AddWall { .. } | Command::RemoveWall(_) => Vec::new(),
    }
}

fn command_kind(c: &Command) -> &'static str {
    match c {
        Command::Spawn(_) => "spawn",
        Command::Despawn(_) => "despawn",
        Command::SetBehaviors { .. } => "set_behaviors",
        Command::AddBehavior { .. } => "add_behavior",
        Command::RemoveBehavior { .. } => "remove_behavior",
        Command::ResetBehaviors { .. } => "reset_behaviors",
        Command::AddObstacle { .. } => "add_obstacle",
        Command::MoveObstacle { .. } => "move_obstacle",
        Command::RemoveObstacle(_) => "remove_obstacle",
        Command::AddWall { .. } => "add_wall",
        Command::RemoveWall(_) => "remove_wall",
        Command::MoveTo { .. } => "move_to",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_up_runs_at_most_the_bound_and_drops_the_rest() {
        let p = Duration::from_millis(50);
        let t0 = Instant::now();
        // On time, or less than a period late: nothing dropped.
        assert_eq!(catch_up(t0, t0, p, 3), (t0, 0));
        assert_eq!(catch_up(t0, t0 + Duration::from_millis(49), p, 3), (t0, 0));
        // 3 periods late with bound 3: run them all (no drop).
        assert_eq!(catch_up(t0, t0 + Duration::from_millis(150), p, 3), (t0, 0));
        // A 2 s stall at 20 Hz = 40 periods late: keep 3, drop 37.
        let (due, dropped) = catch_up(t0, t0 + Duration::from_secs(2), p, 3);
        assert_eq!(dropped, 37);
        assert_eq!(due, t0 + p * 37);
        // After the dropped time, the remaining lateness is within the bound: at most 3 more
        // ticks run back to back before the schedule is on time again.
        let late_after = (t0 + Duration::from_secs(2)).duration_since(due);
        assert!(late_after < p * 4, "{late_after:?}");
    }

    #[test]
    fn world_info_grows_cells_to_fit_the_cap() {
        let sc = crate::scenario::Scenario::from_json(r#"{"bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 10000, "y": 10000}}}"#).unwrap();
        let w = sc.build().unwrap();
        let info = world_info(1, "w", &w, 1000);
        assert!(info.cell_count() <= 1000, "{}", info.cell_count());
        assert!(info.aoi_cell_size > 50.0);
        let small = world_info(1, "w", &w, 1_000_000);
        assert_eq!(small.aoi_cell_size, 50.0);
        assert_eq!(small.cols, 200);
    }
}
