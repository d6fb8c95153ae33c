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

//!
//! Files: `runner.rs` (the loop: serving the queue, the order of a tick, replay controls),
//! `requests.rs` (each request answered), `commands.rs` (a command's checks, then the one
//! recorded `apply`), `sight.rs` (what a caller sees, per-team vision), `views.rs` (what REST
//! and the debug endpoints show). The `Runner` is declared here; it holds the world and its
//! parts, each a struct with its own state in its own file: `ownership.rs` (`Ownership`: who
//! may command which agent, spawn quotas, orphans), `publish.rs` (`Publisher`: a tick's frames
//! for subscribers), `recorder.rs` (`Recorder`: the recording and a durable world's log),
//! `replay.rs` (`ReplayState`: a replay world's recording), `pipeline.rs` (`FieldPipeline`: the
//! world's flow-field jobs at the builder threads), `stepper.rs` (`Stepper`: which pool steps
//! the sim), `schedule.rs` (`Schedule`: when the loop ticks), `caps.rs` (`Caps`: most agents,
//! the largest spawn, the crowding bounds; `build_world`). The parts import only `types.rs`
//! (the requests' vocabulary) and the view types of `views.rs`, never the runner:
//! dependencies point down.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steer_proto as proto;
use tokio::sync::{broadcast, oneshot};

use super::fields::FieldBuilder;
use super::frames::{FrameEvent, Recent, TickFrame};
use crate::convert;
use crate::metrics::Metrics;
use crate::scenario::Scenario;
use crate::authz::Sight;
use crate::sim::world::{Command, Outcome};
use crate::sim::{AgentId, SimError, World};

pub use super::players::SessionId;

mod caps;
mod commands;
mod ownership;
mod pipeline;
mod publish;
mod recorder;
mod replay;
mod requests;
mod runner;
mod schedule;
mod sight;
mod stepper;
mod types;
mod views;

pub use types::{Actor, Arrival, CmdError, RateGuard, RateUsers, StallGate, WorldPlayer, WorldStats, world_info};
use schedule::catch_up;
use types::{Reply, Vision};
pub use views::{AgentView, OrderView, AvoidanceView, FlowFieldView, HalfPlaneView, ObstacleView, ReplayOp, ReplaySpawn, ReplayView, Snapshot, WallView, WorldInfoView, Xy};
use requests::{command_agents, command_kind, command_targets};
use caps::spawn_count;
pub use caps::build_world;

/// The closed set of requests a world thread serves.
pub enum Request {
    /// A sim command on behalf of an actor (ownership is checked here).
    Apply { cmd: Command, actor: Actor, reply: Reply<Outcome> },
    /// Several sim commands, checked for ownership all first, applied in order (stops at the
    /// first error). Answers the last outcome.
    ApplyMany { cmds: Vec<Command>, actor: Actor, reply: Reply<Outcome> },
    /// Agents the caller sees, up to a limit (`stuck`: only those on their way that made no
    /// progress for 10 s, among the agents whose orders the caller may see).
    Agents { limit: usize, stuck: bool, sight: Sight, reply: Reply<Vec<AgentView>> },
    /// One agent (one the caller does not see is unknown).
    Agent { id: AgentId, sight: Sight, reply: Reply<AgentView> },
    /// The flow field of an agent's MoveTo, at most `max_side` blocks per side (a player that
    /// does not see all asks for its own agents only).
    FlowField { agent: AgentId, max_side: u32, sight: Sight, reply: Reply<FlowFieldView> },
    /// What reciprocal avoidance sees and chooses for one agent now.
    Avoidance { agent: AgentId, reply: Reply<AvoidanceView> },
    /// Obstacles.
    Obstacles { reply: Reply<Vec<ObstacleView>> },
    /// Walls.
    Walls { reply: Reply<Vec<WallView>> },
    /// Full state, as far as the caller sees.
    Snapshot { sight: Sight, reply: Reply<Snapshot> },
    /// Summary (its agent count is what the caller sees).
    Info { sight: Sight, reply: Reply<WorldInfoView> },
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
    /// A handoff begins (`http/handoff.rs`): the world stops ticking and refuses every change
    /// until `Thaw` (the handoff failed) or its stop (it succeeded); a durable world's log is
    /// flushed and a snapshot queued at this tick first.
    Freeze { reply: Reply<Frozen> },
    /// The handoff failed: the world ticks and takes changes again.
    Thaw { reply: Reply<()> },
    /// Stop the thread.
    Shutdown,
    /// Panic the thread (fault injection: `POST /debug/panic`, served only with
    /// `fault_injection` on), to check that the panic is contained and reported.
    Panic,
    /// Block the thread this long, or until [`WorldHandle::release_stall`] (fault injection:
    /// `POST /debug/stall` and `POST /debug/stall/release`, served only with `fault_injection`
    /// on): no tick and no request is served meanwhile, so the queue fills. Answered when the
    /// block begins: the request has left the queue by then.
    Stall { time: std::time::Duration, reply: Reply<()> },
}

impl Request {
    /// The change this request makes to the world, named for a refusal (a replay world makes
    /// none but play/pause); `None` for reads, play/pause and the runner's own requests.
    pub fn change(&self) -> Option<&'static str> {
        match self {
            Request::Apply { cmd, .. } => Some(requests::command_kind(cmd)),
            Request::ApplyMany { cmds, .. } => Some(cmds.first().map_or("a command", requests::command_kind)),
            Request::Patch { tick_rate: Some(_), .. } => Some("a tick-rate change"),
            Request::Patch { autosave: Some(true), .. } => Some("autosave"),
            Request::Patch { .. } => None,
            Request::Step { .. } => Some("a step"),
            Request::Reset { .. } => Some("a reset"),
            Request::Load { .. } => Some("a load"),
            Request::RandomObstacles { .. } => Some("random obstacles"),
            Request::Recording { on: true, .. } => Some("recording"),
            Request::Recording { on: false, .. } => None,
            Request::Kick { .. } => Some("a kick"),
            Request::SetOwner { .. } => Some("an owner change"),
            Request::Agents { .. }
            | Request::Agent { .. }
            | Request::FlowField { .. }
            | Request::Avoidance { .. }
            | Request::Obstacles { .. }
            | Request::Walls { .. }
            | Request::Snapshot { .. }
            | Request::Info { .. }
            | Request::Save { .. }
            | Request::Players { .. }
            | Request::Replay { .. }
            | Request::Shutdown
            | Request::Panic
            | Request::Stall { .. }
            | Request::Freeze { .. }
            | Request::Thaw { .. } => None,
        }
    }
}

/// A world frozen for a handoff: where it stands.
#[derive(Debug, Clone, PartialEq)]
pub struct Frozen {
    /// The sim tick, and the wire tick's offset from it (the wire tick is their sum).
    pub tick: u64,
    pub tick_offset: u64,
    /// `state_hash` at `tick`.
    pub state_hash: u64,
    /// The players owning agents here.
    pub owners: Vec<String>,
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
    /// Newest frames kept for subscriptions that change hands.
    pub frame_history: usize,
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
    /// Durable: a fresh log, or the state recovered from the stored one.
    pub durable: Option<DurableSpawn>,
    /// Arrived by a handoff: the tick numbering to continue and the resumes to wait for.
    pub arrival: Option<Arrival>,
}

/// How a durable world starts.
pub enum DurableSpawn {
    /// From its scenario, with a new log (anything stored under its name is deleted).
    Fresh(Arc<crate::persist::Writer>),
    /// From its recovered state; the log goes on.
    Recovered(Arc<crate::persist::Writer>, Box<crate::persist::Recovered>),
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
    /// The newest frames: a new subscriber gets keyframes of the newest at once (also while
    /// paused); a subscription that changes hands sends the ones it has not sent.
    pub recent: Arc<Mutex<Recent>>,
    /// Subscriptions per send rate (`every_n_ticks`, index = rate): the world keeps the cells
    /// of each rate in use.
    pub rates: Arc<RateUsers>,
    /// The world's group names as last announced (`subscribed.groups`).
    pub groups: Arc<Mutex<Vec<String>>>,
    /// A durable world's persistence status, and its fsync policy.
    pub durable: Option<(Arc<crate::persist::DurableStatus>, crate::config::FsyncPolicy)>,
}

impl WorldHandle {
    /// Starts the world thread.
    pub fn start(spawn: WorldSpawn, metrics: Arc<Metrics>) -> Result<Self, CmdError> {
        let mut scenario = spawn.scenario;
        let mut scenario_name = spawn.scenario_name;
        let mut paused = spawn.paused;
        let mut durable = spawn.durable;
        let mut recovered = None;
        if let Some(DurableSpawn::Recovered(writer, r)) = durable.take_if(|d| matches!(d, DurableSpawn::Recovered(..))) {
            let (r, d) = resume_log(&writer, &spawn.name, &spawn.players, *r);
            scenario = r.scenario;
            scenario_name = r.scenario_name.or(scenario_name);
            paused = r.paused;
            recovered = Some((r.world, r.owners, d));
        }
        let (rec_world, recovered) = match recovered {
            Some((w, o, d)) => (Some(w), Some((o, d))),
            None => (None, None),
        };
        let caps = caps::Caps::new(spawn.max_agents, spawn.max_spawn, spawn.crowding);
        let (world, replay) = match (spawn.replay, rec_world) {
            (Some(r), _) => (r.world, Some(replay::ReplayState::new(r.player, r.recording, r.max_speed))),
            (None, Some(w)) => (w, None),
            (None, None) => (caps.build(&scenario, true)?, None),
        };
        if let Some(r) = &replay {
            r.count_divergences(&metrics);
        }
        // A replay world records nothing (it changes only as its recording says).
        let recorder = if replay.is_some() { None } else { spawn.recorder };
        if scenario.name.is_empty() {
            scenario.name = spawn.name.clone();
        }
        let (dur, owners) = match (recovered, durable) {
            (Some((owners, d)), _) => (Some(d), owners),
            (None, Some(DurableSpawn::Fresh(writer))) if replay.is_none() => {
                (Some(crate::persist::Durable::fresh(&writer, &spawn.name, &crate::persist::start_record(&scenario, caps.max_agents(), caps.max_spawn()))), Vec::new())
            }
            _ => (None, Vec::new()),
        };
        let info = world_info(spawn.id, &spawn.name, &world, spawn.max_aoi_cells);
        let (tx, rx) = std::sync::mpsc::sync_channel(spawn.queue.max(1));
        let (frames, _) = broadcast::channel(spawn.frame_buffer.max(1));
        let handle = WorldHandle {
            name: spawn.name.clone(),
            id: spawn.id,
            tx,
            frames,
            info: Arc::new(Mutex::new(info)),
            stats: Arc::new(WorldStats::starting(&world)),
            death: Arc::new(Mutex::new(None)),
            origin: Arc::new(Mutex::new((scenario.clone(), scenario_name.clone()))),
            recent: Arc::new(Mutex::new(Recent::new(spawn.frame_history))),
            rates: Arc::new(RateUsers::new(spawn.max_every_n_ticks)),
            groups: Arc::new(Mutex::new(world.groups().to_vec())),
            durable: dur.as_ref().map(|d| (d.status().clone(), d.policy())),
        };
        let publisher = publisher(&handle, spawn.max_shared_messages, spawn.checksum_every_ticks, spawn.max_aoi_cells);
        let mut runner = Runner {
            name: spawn.name.clone(),
            id: spawn.id,
            world,
            scenario,
            scenario_name,
            ownership: ownership::Ownership::new(spawn.policy),
            publisher,
            recorder: recorder::Recorder::new(caps.hook(recorder), dur),
            replay,
            fields: pipeline::FieldPipeline::new(spawn.fields),
            players: spawn.players,
            autosave: false,
            caps,
            stats: handle.stats.clone(),
            metrics,
            origin: handle.origin.clone(),
            tick_offset: spawn.arrival.as_ref().map_or(0, |a| a.tick_offset),
            stepper: stepper::Stepper::new(spawn.sim_pool, spawn.parallel_step_min_agents),
            // Last: it takes the arrival the fields above read.
            schedule: schedule::Schedule::new(paused, spawn.max_catchup_ticks, spawn.max_requests_per_turn, spawn.arrival),
        };
        for (agent, player, team) in owners {
            let p: Arc<str> = Arc::from(player.as_str());
            runner.ownership.set_team(p.clone(), team.as_deref().map(Arc::from));
            runner.own(agent, p);
        }
        if runner.replay.is_none() {
            runner.recorder.rec.started(&runner.name, &runner.scenario);
        }
        runner.spawn_thread(rx, handle.death.clone())?;
        Ok(handle)
    }

    /// Asks the world thread to panic (fault injection; see [`Request::Panic`]).
    pub fn inject_panic(&self) -> Result<(), CmdError> {
        self.send(Request::Panic)
    }

    /// Asks the world thread to block for `time` (fault injection; see [`Request::Stall`]);
    /// answers once it blocks, so that the queue holds nothing of this request.
    pub async fn inject_stall(&self, time: std::time::Duration) -> Result<(), CmdError> {
        self.ask(|reply| Request::Stall { time, reply }).await
    }

    /// Ends the world thread's stall now (or the next one at once): bypasses the queue, which
    /// a stalled world does not serve.
    pub fn release_stall(&self) {
        self.stats.stall.release();
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
        self.recent.lock().ok().and_then(|r| r.newest())
    }

    /// The published frames after sequence number `seq` that the world still keeps
    /// (`limits.frame_history`), oldest first.
    pub fn frames_after(&self, seq: u64) -> Vec<Arc<TickFrame>> {
        self.recent.lock().map(|r| r.after(seq)).unwrap_or_default()
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

/// The publisher of `handle`'s world: it announces what the handle shows, and keeps the
/// cells of the send rates the handle's subscriptions use (`max_shared`: shared `cells`
/// messages per tick; checksums every `checksum_every` ticks; at most `max_aoi_cells`).
fn publisher(handle: &WorldHandle, max_shared: usize, checksum_every: u32, max_aoi_cells: u32) -> publish::Publisher {
    let info = handle.world_info();
    let announced_groups = handle.groups.lock().map(|g| g.clone()).unwrap_or_else(|p| p.into_inner().clone());
    publish::Publisher {
        id: handle.id,
        encoders: Vec::new(),
        keys: Vec::new(),
        rate_sets: Vec::new(),
        rate_users: handle.rates.clone(),
        max_shared,
        announced_rate: info.tick_rate_hz,
        announced_groups,
        shared_groups: handle.groups.clone(),
        info,
        shared_info: handle.info.clone(),
        max_aoi_cells,
        frames: handle.frames.clone(),
        recent: handle.recent.clone(),
        published: 0,
        reset_pending: false,
        checksum_every: u64::from(checksum_every.max(1)),
    }
}

/// A recovered durable world's log goes on, and its players' sessions are restored (they
/// resume with their old tokens within the grace left, counted from now).
fn resume_log(writer: &Arc<crate::persist::Writer>, name: &str, players: &super::players::Players, mut r: crate::persist::Recovered) -> (crate::persist::Recovered, crate::persist::Durable) {
    let report = std::mem::take(&mut r.report);
    let d = crate::persist::Durable::resumed(writer, name, r.log_place(), &r.world, report);
    let refused = players.restore_sessions(name, &r.sessions);
    if refused > 0 {
        tracing::warn!(world = %name, refused, "recovery: sessions not restored (auth.max_sessions)");
    }
    (r, d)
}

/// Longest the loop sleeps waiting for a request (so a stop flag is seen even at 0.1 Hz).
const MAX_IDLE_WAIT: Duration = Duration::from_millis(100);

/// What the loop does after serving a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Go,
    Stop,
}

/// The world thread's state: the world and its scenario, and the parts the loop sequences.
struct Runner {
    name: String,
    id: u32,
    world: World,
    scenario: Scenario,
    scenario_name: Option<String>,
    /// Who owns which agent, teams, quotas, orphans (`ownership.rs`).
    ownership: ownership::Ownership,
    /// A tick's frames for subscribers (`publish.rs`).
    publisher: publish::Publisher,
    /// The recording and a durable world's log (`recorder.rs`).
    recorder: recorder::Recorder,
    /// Set for a read-only replay world: its recording, keyframes and playback speed
    /// (`replay.rs`).
    replay: Option<replay::ReplayState>,
    /// Flow fields: the jobs at the builder threads and the fields coming back (`pipeline.rs`).
    fields: pipeline::FieldPipeline,
    players: Arc<super::players::Players>,
    /// When the loop ticks: paused, frozen, held, stepping; catch-up and turn bounds; the
    /// effective-rate window (`schedule.rs`).
    schedule: schedule::Schedule,
    autosave: bool,
    /// Most agents, the largest spawn, the crowding bounds (`caps.rs`).
    caps: caps::Caps,
    stats: Arc<WorldStats>,
    metrics: Arc<Metrics>,
    origin: Arc<Mutex<(Scenario, Option<String>)>>,
    /// Added to the world's tick on the wire, so that ticks never go back when a world is
    /// replaced (load/reset) and clients' chains stay well ordered.
    tick_offset: u64,
    /// How the sim steps: on the world's own thread or the shared pool (`stepper.rs`).
    stepper: stepper::Stepper,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_ends_when_released_not_before_and_a_release_is_used_once() {
        let gate = Arc::new(StallGate::default());
        // Released by another thread while blocked: ends then, long before its bound.
        let (tx, rx) = std::sync::mpsc::channel();
        let g = gate.clone();
        let t = std::thread::spawn(move || {
            let t0 = Instant::now();
            g.block(Duration::from_secs(60));
            tx.send(t0.elapsed()).unwrap();
        });
        // Not released: still blocked (a stall that ended by itself would have answered).
        assert!(rx.recv_timeout(Duration::from_millis(50)).is_err(), "the stall ended without a release");
        gate.release();
        assert!(rx.recv_timeout(Duration::from_secs(30)).unwrap() < Duration::from_secs(60));
        t.join().unwrap();
        // A release before the stall ends it at once; it is consumed: the next one waits its bound.
        gate.release();
        gate.block(Duration::from_secs(60));
        let t0 = Instant::now();
        gate.block(Duration::from_millis(20));
        assert!(t0.elapsed() >= Duration::from_millis(20), "a release was used twice");
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
