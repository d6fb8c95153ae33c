//! What REST and the debug endpoints show of a world (serde + OpenAPI types), and how the
//! runner builds them.

use super::*;

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
    /// The agent's MoveTo order, if it has one: shown to the admin and spectators, and to a
    /// player for its own agents (under `owned` visibility another player's orders stay hidden).
    pub order: Option<OrderView>,
}

/// A MoveTo order as REST shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct OrderView {
    /// The point asked for.
    pub target: [f32; 2],
    /// `moving`, `arrived`, `gave_up` (stopped short after no progress for the give-up time) or
    /// `unreachable` (no path: stopped at the nearest reachable point).
    pub state: String,
    /// Distance from the stop point (its formation slot or the goal); for `unreachable`, from
    /// the target asked for.
    pub distance: f32,
    /// Seconds since the agent last got nearer its stop point.
    pub stalled_secs: f32,
    /// On its way and no progress for 10 s (it goes on trying until it gives up).
    pub stuck: bool,
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
    /// A durable world's persistence (docs/persistence.md); absent when the world is not durable.
    pub persistence: Option<Box<crate::persist::PersistenceView>>,
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

impl Runner {
    /// `a` as REST shows it; `with_order`: the caller may see its MoveTo order.
    pub(super) fn agent_view(&self, a: &crate::sim::Agent, with_order: bool) -> AgentView {
        let rate = self.world.config().tick_rate;
        let order = a.order.as_ref().filter(|_| with_order).map(|o| {
            let state = match (o.done, o.gave_up, o.unreachable) {
                (false, _, _) => "moving",
                (true, true, _) => "gave_up",
                (true, false, true) => "unreachable",
                (true, false, false) => "arrived",
            };
            let distance = if o.done && o.unreachable && !o.gave_up { a.position.distance(o.target) } else { a.position.distance(o.stop_point) };
            OrderView { target: o.target.to_array(), state: state.to_string(), distance, stalled_secs: o.stall as f32 / rate, stuck: o.stuck(rate) }
        });
        AgentView {
            order,
            id: a.id,
            group: self.world.groups().get(usize::from(a.group)).cloned().unwrap_or_default(),
            position: a.position.to_array(),
            velocity: a.velocity.to_array(),
            orientation: a.orientation,
            radius: a.limits.radius,
            behaviors: a.behaviors.entries().iter().map(|e| e.behavior.kind().name().to_string()).collect(),
        }
    }

    pub(super) fn flow_field_view(&self, id: AgentId, max_side: u32) -> Result<FlowFieldView, CmdError> {
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

    pub(super) fn avoidance_view(&mut self, id: AgentId) -> Result<AvoidanceView, CmdError> {
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

    pub(super) fn info_view(&self) -> WorldInfoView {
        WorldInfoView {
            name: self.name.clone(),
            id: self.id,
            tick: self.wire_tick(),
            tick_rate: self.world.config().tick_rate,
            paused: self.schedule.paused,
            agents: self.world.agents().len(),
            obstacles: self.world.obstacles().len(),
            walls: self.world.walls().len(),
            alive: true,
            overruns: self.stats.overruns.load(Ordering::Relaxed),
            effective_tick_rate: f64::from(self.stats.effective_tick_rate_milli.load(Ordering::Relaxed)) / 1000.0,
            overloaded: self.stats.overloaded.load(Ordering::Relaxed),
            aoi_cell_size: self.publisher.info.aoi_cell_size,
            aoi_cols: self.publisher.info.cols,
            aoi_rows: self.publisher.info.rows,
            bounds: [self.publisher.info.bounds.min_x, self.publisher.info.bounds.min_y, self.publisher.info.bounds.max_x, self.publisher.info.bounds.max_y],
            scenario: self.scenario_name.clone(),
            autosave: self.autosave,
            recording: self.recorder.rec.view(),
            replay: self.replay_view().map(Box::new),
            persistence: self.recorder.dur.as_ref().map(|d| Box::new(d.view())),
        }
    }
}
