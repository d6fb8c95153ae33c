//! The behaviour catalogue (`docs/behaviors.md`), one behaviour per file, and the
//! per-agent behaviour set that blends them.
//!
//! Every behaviour is a pure function of (agent, its parameters, a read-only [`WorldView`])
//! returning a [`Steering`]; the few that keep state between ticks (wander, random target) read
//! the agent's memory and write the next memory into a [`Scratch`] that the apply phase stores.

use glam::Vec2;

use super::agent::{Agent, AgentId, AgentMemory};
use super::error::{SimError, check_finite, check_vec};
use super::rng::Rng;
use super::steering::Steering;
use super::view::{Kinematic, WorldView};

pub use kind::BehaviorKind;

pub mod agent_avoidance;
pub mod ahead_avoidance;
pub mod align;
pub mod alignment;
pub mod arrive;
pub mod cohesion;
pub mod context_avoidance;
pub mod evade;
pub mod face;
pub mod flee;
mod kind;
pub mod leader_following;
pub mod look_where_you_are_going;
pub mod move_to;
pub mod obstacle_avoidance;
pub mod path_following;
pub mod pursue;
pub mod random_target;
pub mod reciprocal_avoidance;
pub mod seek;
pub mod separation;
pub mod velocity_match;
pub mod wall_avoidance;
pub mod wander;

#[cfg(test)]
pub(crate) mod testkit;

/// What a behaviour aims at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// A fixed point.
    Point(Vec2),
    /// Another agent (its current position, velocity and orientation).
    Agent(AgentId),
}

impl Target {
    /// Resolves the target against the view; `None` when the target agent no longer exists.
    pub fn resolve(&self, view: &WorldView) -> Option<Kinematic> {
        match *self {
            Target::Point(p) => Some(Kinematic { position: p, velocity: Vec2::ZERO, orientation: 0.0 }),
            Target::Agent(id) => view.agent(id).map(|a| Kinematic {
                position: a.position,
                velocity: a.velocity,
                orientation: a.orientation,
            }),
        }
    }

    fn validate(&self, field: &str) -> Result<(), SimError> {
        match self {
            Target::Point(p) => check_vec(field, *p).map(|_| ()),
            Target::Agent(_) => Ok(()),
        }
    }
}

/// Per-tick scratch of one agent: its random stream, the memory it will have next tick, and
/// the events it raised (flags collected in the apply phase).
pub struct Scratch {
    /// Random numbers for this agent and tick.
    pub rng: Rng,
    /// Memory to store in the apply phase (starts as a copy of the current memory).
    pub memory: AgentMemory,
    /// Event flags ([`move_to::EVENT_DESTINATION_REACHED`], [`path_following::EVENT_PATH_COMPLETED`]).
    pub events: u8,
}

/// One behaviour with its parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Behavior {
    Seek(seek::SeekParams),
    Flee(flee::FleeParams),
    Arrive(arrive::ArriveParams),
    Pursue(pursue::PursueParams),
    Evade(evade::EvadeParams),
    Align(align::AlignParams),
    Face(face::FaceParams),
    LookWhereYouAreGoing(look_where_you_are_going::LookParams),
    VelocityMatch(velocity_match::VelocityMatchParams),
    Wander(wander::WanderParams),
    RandomTarget(random_target::RandomTargetParams),
    ObstacleAvoidance(obstacle_avoidance::ObstacleAvoidanceParams),
    AheadAvoidance(ahead_avoidance::AheadAvoidanceParams),
    WallAvoidance(wall_avoidance::WallAvoidanceParams),
    AgentAvoidance(agent_avoidance::AgentAvoidanceParams),
    Separation(separation::SeparationParams),
    Cohesion(cohesion::CohesionParams),
    Alignment(alignment::AlignmentParams),
    PathFollowing(path_following::PathFollowingParams),
    LeaderFollowing(leader_following::LeaderFollowingParams),
    ReciprocalAvoidance(reciprocal_avoidance::ReciprocalAvoidanceParams),
}

impl Behavior {
    /// The behaviour's kind (what `RemoveBehavior` names; its name is the wire's).
    pub fn kind(&self) -> BehaviorKind {
        match self {
            Behavior::Seek(_) => BehaviorKind::Seek,
            Behavior::Flee(_) => BehaviorKind::Flee,
            Behavior::Arrive(_) => BehaviorKind::Arrive,
            Behavior::Pursue(_) => BehaviorKind::Pursue,
            Behavior::Evade(_) => BehaviorKind::Evade,
            Behavior::Align(_) => BehaviorKind::Align,
            Behavior::Face(_) => BehaviorKind::Face,
            Behavior::LookWhereYouAreGoing(_) => BehaviorKind::LookWhereYouAreGoing,
            Behavior::VelocityMatch(_) => BehaviorKind::VelocityMatch,
            Behavior::Wander(_) => BehaviorKind::Wander,
            Behavior::RandomTarget(_) => BehaviorKind::RandomTarget,
            Behavior::ObstacleAvoidance(_) => BehaviorKind::ObstacleAvoidance,
            Behavior::AheadAvoidance(_) => BehaviorKind::AheadAvoidance,
            Behavior::WallAvoidance(_) => BehaviorKind::WallAvoidance,
            Behavior::AgentAvoidance(_) => BehaviorKind::AgentAvoidance,
            Behavior::Separation(_) => BehaviorKind::Separation,
            Behavior::Cohesion(_) => BehaviorKind::Cohesion,
            Behavior::Alignment(_) => BehaviorKind::Alignment,
            Behavior::PathFollowing(_) => BehaviorKind::PathFollowing,
            Behavior::LeaderFollowing(_) => BehaviorKind::LeaderFollowing,
            Behavior::ReciprocalAvoidance(_) => BehaviorKind::ReciprocalAvoidance,
        }
    }

    /// True for behaviours that steer the orientation (then the integrator does not snap the
    /// orientation to the velocity).
    pub fn steers_orientation(&self) -> bool {
        matches!(self, Behavior::Align(_) | Behavior::Face(_) | Behavior::LookWhereYouAreGoing(_))
    }

    /// Largest distance at which this behaviour looks at other agents (sizes the agent grid).
    pub fn neighbor_reach(&self) -> f32 {
        match self {
            Behavior::Separation(p) => p.neighbor_radius,
            Behavior::Cohesion(p) => p.neighbor_radius,
            Behavior::Alignment(p) => p.neighbor_radius,
            Behavior::AgentAvoidance(p) => p.look_ahead + p.avoid_radius,
            Behavior::LeaderFollowing(p) => p.separation_radius,
            // Sizes grid cells only (queries of any radius are exact); its look starts at six
            // radii and widens only where neighbours are sparse (`reciprocal_avoidance::nearest`).
            Behavior::ReciprocalAvoidance(p) => p.neighbor_dist.min(4.0),
            Behavior::Seek(_)
            | Behavior::Flee(_)
            | Behavior::Arrive(_)
            | Behavior::Pursue(_)
            | Behavior::Evade(_)
            | Behavior::Align(_)
            | Behavior::Face(_)
            | Behavior::LookWhereYouAreGoing(_)
            | Behavior::VelocityMatch(_)
            | Behavior::Wander(_)
            | Behavior::RandomTarget(_)
            | Behavior::ObstacleAvoidance(_)
            | Behavior::AheadAvoidance(_)
            | Behavior::WallAvoidance(_)
            | Behavior::PathFollowing(_) => 0.0,
        }
    }

    /// Validates every parameter; the error names the field (`slow_radius`, `target.x`, …).
    pub fn validate(&self) -> Result<(), SimError> {
        match self {
            Behavior::Seek(p) => p.target.validate("target"),
            Behavior::Flee(p) => p.validate(),
            Behavior::Arrive(p) => p.validate(),
            Behavior::Pursue(p) => p.validate(),
            Behavior::Evade(p) => p.validate(),
            Behavior::Align(p) => p.validate(),
            Behavior::Face(p) => p.validate(),
            Behavior::LookWhereYouAreGoing(p) => p.tuning.validate(),
            Behavior::VelocityMatch(p) => p.validate(),
            Behavior::Wander(p) => p.validate(),
            Behavior::RandomTarget(p) => p.validate(),
            Behavior::ObstacleAvoidance(p) => p.validate(),
            Behavior::AheadAvoidance(p) => p.validate(),
            Behavior::WallAvoidance(p) => p.validate(),
            Behavior::AgentAvoidance(p) => p.validate(),
            Behavior::Separation(p) => p.validate(),
            Behavior::Cohesion(p) => p.validate(),
            Behavior::Alignment(p) => p.validate(),
            Behavior::PathFollowing(p) => p.validate(),
            Behavior::LeaderFollowing(p) => p.validate(),
            Behavior::ReciprocalAvoidance(p) => p.validate(),
        }
    }

    /// Agents this behaviour refers to by id.
    pub fn target_agent(&self) -> Option<AgentId> {
        let t = match self {
            Behavior::Seek(p) => p.target,
            Behavior::Flee(p) => p.target,
            Behavior::Arrive(p) => p.target,
            Behavior::Face(p) => p.target,
            Behavior::Pursue(p) => return Some(p.target),
            Behavior::Evade(p) => return Some(p.target),
            Behavior::VelocityMatch(p) => return Some(p.target),
            Behavior::LeaderFollowing(p) => return Some(p.leader),
            Behavior::Align(p) => match p.target {
                align::AlignTarget::Agent(id) => return Some(id),
                align::AlignTarget::Orientation(_) => return None,
            },
            Behavior::LookWhereYouAreGoing(_)
            | Behavior::Wander(_)
            | Behavior::RandomTarget(_)
            | Behavior::ObstacleAvoidance(_)
            | Behavior::AheadAvoidance(_)
            | Behavior::WallAvoidance(_)
            | Behavior::AgentAvoidance(_)
            | Behavior::Separation(_)
            | Behavior::Cohesion(_)
            | Behavior::Alignment(_)
            | Behavior::PathFollowing(_)
            | Behavior::ReciprocalAvoidance(_) => return None,
        };
        match t {
            Target::Agent(id) => Some(id),
            Target::Point(_) => None,
        }
    }

    /// The steering of this behaviour for `agent`.
    pub fn steer(&self, agent: &Agent, view: &WorldView, scratch: &mut Scratch) -> Steering {
        match self {
            Behavior::Seek(p) => seek::steer(agent, p, view),
            Behavior::Flee(p) => flee::steer(agent, p, view),
            Behavior::Arrive(p) => arrive::steer(agent, p, view),
            Behavior::Pursue(p) => pursue::steer(agent, p, view),
            Behavior::Evade(p) => evade::steer(agent, p, view),
            Behavior::Align(p) => align::steer(agent, p, view),
            Behavior::Face(p) => face::steer(agent, p, view),
            Behavior::LookWhereYouAreGoing(p) => look_where_you_are_going::steer(agent, p, view),
            Behavior::VelocityMatch(p) => velocity_match::steer(agent, p, view),
            Behavior::Wander(p) => wander::steer(agent, p, view, scratch),
            Behavior::RandomTarget(p) => random_target::steer(agent, p, view, scratch),
            Behavior::ObstacleAvoidance(p) => obstacle_avoidance::steer(agent, p, view),
            Behavior::AheadAvoidance(p) => ahead_avoidance::steer(agent, p, view),
            Behavior::WallAvoidance(p) => wall_avoidance::steer(agent, p, view),
            Behavior::AgentAvoidance(p) => agent_avoidance::steer(agent, p, view),
            Behavior::Separation(p) => separation::steer(agent, p, view, scratch),
            Behavior::Cohesion(p) => cohesion::steer(agent, p, view),
            Behavior::Alignment(p) => alignment::steer(agent, p, view),
            Behavior::PathFollowing(p) => path_following::steer(agent, p, view, scratch),
            Behavior::LeaderFollowing(p) => leader_following::steer(agent, p, view),
            // A filter on the set's blend, not a force (see `BehaviorSet::steer`).
            Behavior::ReciprocalAvoidance(_) => Steering::ZERO,
        }
    }
}

/// A behaviour in a set, with its blend weight.
#[derive(Debug, Clone, PartialEq)]
pub struct BehaviorEntry {
    /// The behaviour.
    pub behavior: Behavior,
    /// Blend weight (000 BlendedSteering); finite, may be negative.
    pub weight: f32,
    /// Priority group: lower runs first; the first group whose blend is not negligible wins.
    pub priority: u8,
}

impl BehaviorEntry {
    /// An entry of weight 1 in priority group 0.
    pub fn new(behavior: Behavior) -> Self {
        BehaviorEntry { behavior, weight: 1.0, priority: 0 }
    }

    /// Validates weight and parameters.
    pub fn validate(&self) -> Result<(), SimError> {
        check_finite("weight", self.weight)?;
        self.behavior.validate().map_err(|e| e.within("params"))
    }
}

/// Most entries one agent's behaviour set may hold.
pub const MAX_ENTRIES: usize = 32;

/// Output of a priority group whose blend is below this is "nothing to say" (next group runs).
pub const PRIORITY_EPSILON: f32 = 1e-3;

/// An agent's behaviours: entries grouped by priority (003 MovementMgr `Add/Remove/Reset`).
///
/// **Invariant:** `entries` is sorted by priority (stable: insertion order within a group).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BehaviorSet {
    entries: Vec<BehaviorEntry>,
    /// The parameters of the first reciprocal-avoidance entry, if any (kept with `entries`).
    reciprocal: Option<reciprocal_avoidance::ReciprocalAvoidanceParams>,
    /// The largest neighbour reach of the entries (kept with `entries`: the grid reads it for
    /// every agent every tick).
    reach: f32,
    /// Whether some entry steers the orientation (kept with `entries`: the integrator reads
    /// it for every agent every tick).
    orients: bool,
}

impl BehaviorSet {
    /// A set of validated entries (the error names `[i].field`).
    pub fn new(entries: Vec<BehaviorEntry>) -> Result<Self, SimError> {
        let mut set = BehaviorSet::default();
        for (i, e) in entries.into_iter().enumerate() {
            set.add(e).map_err(|err| err.within(&format!("[{i}]")))?;
        }
        Ok(set)
    }

    /// The entries, in priority order.
    pub fn entries(&self) -> &[BehaviorEntry] {
        &self.entries
    }

    /// Adds an entry after the others of its priority.
    pub fn add(&mut self, entry: BehaviorEntry) -> Result<(), SimError> {
        entry.validate()?;
        if self.entries.len() >= MAX_ENTRIES {
            return Err(SimError::LimitExceeded { what: "behaviors".into(), max: MAX_ENTRIES });
        }
        let at = self.entries.partition_point(|e| e.priority <= entry.priority);
        self.entries.insert(at, entry);
        self.update_derived();
        Ok(())
    }

    /// Removes every entry of `kind`; returns how many were removed.
    pub fn remove(&mut self, kind: BehaviorKind) -> usize {
        let before = self.entries.len();
        self.entries.retain(|e| e.behavior.kind() != kind);
        self.update_derived();
        before - self.entries.len()
    }

    /// Removes every entry (003 `Reset`).
    pub fn reset(&mut self) {
        self.entries.clear();
        self.update_derived();
    }

    /// Recomputes what the set keeps of its entries.
    fn update_derived(&mut self) {
        self.reciprocal = self.entries.iter().find_map(|e| if let Behavior::ReciprocalAvoidance(p) = &e.behavior { Some(*p) } else { None });
        self.reach = self.entries.iter().map(|e| e.behavior.neighbor_reach()).fold(0.0, f32::max);
        self.orients = self.entries.iter().any(|e| e.behavior.steers_orientation());
    }

    /// The reciprocal avoidance the set filters its blend through, if any.
    pub fn reciprocal(&self) -> Option<&reciprocal_avoidance::ReciprocalAvoidanceParams> {
        self.reciprocal.as_ref()
    }

    /// True when some entry steers the orientation.
    pub fn steers_orientation(&self) -> bool {
        self.orients
    }

    /// Largest neighbour reach of the set.
    pub fn neighbor_reach(&self) -> f32 {
        self.reach
    }

    /// Blends the entries: per priority group Σ wᵢ·sᵢ clamped to the agent's limits; the first
    /// group whose result exceeds [`PRIORITY_EPSILON`] wins (the last group's result otherwise).
    /// A set with reciprocal avoidance then filters that blend through it.
    pub fn steer(&self, agent: &Agent, view: &WorldView, scratch: &mut Scratch) -> Steering {
        let out = self.blend(agent, view, scratch);
        match &self.reciprocal {
            Some(p) => reciprocal_avoidance::filter(agent, p, view, out, scratch),
            None => out,
        }
    }

    /// The blend alone (see [`BehaviorSet::steer`]).
    pub fn blend(&self, agent: &Agent, view: &WorldView, scratch: &mut Scratch) -> Steering {
        let lim = &agent.limits;
        let mut out = Steering::ZERO;
        let mut i = 0;
        while i < self.entries.len() {
            let prio = self.entries[i].priority;
            let mut sum = Steering::ZERO;
            while let Some(e) = self.entries.get(i).filter(|e| e.priority == prio) {
                sum += e.behavior.steer(agent, view, scratch).sanitized() * e.weight;
                i += 1;
            }
            out = sum.clamped(lim.max_accel, lim.max_angular_accel);
            if !out.is_negligible(PRIORITY_EPSILON) {
                break;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;

    #[test]
    fn weighted_blend_sums_then_clamps() {
        // Seek +x from rest: desired (5,0), steering (5,0); Seek +y: (0,5). Weights 1 and 0.5:
        // (5, 2.5), length 5.59 < max_accel 10, so unclamped.
        let set = BehaviorSet::new(vec![
            BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::new(10.0, 0.0)) })),
            BehaviorEntry { weight: 0.5, ..BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::new(0.0, 10.0)) })) },
        ])
        .unwrap();
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        let s = steer_set(&w, 1, &set);
        assert_close(s.linear, Vec2::new(5.0, 2.5));
        // Weight 4 on the first: (20, 2.5) → clamped to length 10.
        let set = BehaviorSet::new(vec![
            BehaviorEntry { weight: 4.0, ..BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::new(10.0, 0.0)) })) },
            BehaviorEntry { weight: 0.5, ..BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::new(0.0, 10.0)) })) },
        ])
        .unwrap();
        let s = steer_set(&w, 1, &set);
        assert!((s.linear.length() - 10.0).abs() < 1e-4);
        assert_close(s.linear, Vec2::new(20.0, 2.5).normalize() * 10.0);
    }

    #[test]
    fn first_non_negligible_priority_group_wins() {
        // Group 0: flee from a far point (beyond panic distance → zero). Group 1: seek +x.
        let flee = Behavior::Flee(flee::FleeParams { target: Target::Point(Vec2::new(100.0, 0.0)), panic_distance: 10.0 });
        let seek = Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::new(10.0, 0.0)) });
        let set = BehaviorSet::new(vec![
            BehaviorEntry { priority: 1, ..BehaviorEntry::new(seek.clone()) },
            BehaviorEntry { priority: 0, ..BehaviorEntry::new(flee) },
        ])
        .unwrap();
        assert_eq!(set.entries()[0].priority, 0, "entries are kept in priority order");
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        assert_close(steer_set(&w, 1, &set).linear, Vec2::new(5.0, 0.0));
        // A close flee point makes group 0 speak, and it overrides the seek entirely.
        let flee = Behavior::Flee(flee::FleeParams { target: Target::Point(Vec2::new(0.0, 3.0)), panic_distance: 10.0 });
        let set = BehaviorSet::new(vec![
            BehaviorEntry { priority: 1, ..BehaviorEntry::new(seek) },
            BehaviorEntry::new(flee),
        ])
        .unwrap();
        assert_close(steer_set(&w, 1, &set).linear, Vec2::new(0.0, -5.0));
    }

    #[test]
    fn add_remove_reset_and_validation() {
        let mut set = BehaviorSet::default();
        set.add(BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::ONE) }))).unwrap();
        set.add(BehaviorEntry::new(Behavior::Separation(separation::SeparationParams { neighbor_radius: 3.0 }))).unwrap();
        assert_eq!(set.remove(BehaviorKind::Seek), 1);
        assert_eq!(set.entries().len(), 1);
        set.reset();
        assert!(set.entries().is_empty());
        let bad = BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::new(f32::NAN, 0.0)) }));
        let err = BehaviorSet::new(vec![bad]).unwrap_err().to_string();
        assert!(err.contains("[0].params.target.x"), "{err}");
        let bad = BehaviorEntry { weight: f32::INFINITY, ..BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::ONE) })) };
        assert!(set.add(bad).unwrap_err().to_string().contains("weight"));
        for _ in 0..MAX_ENTRIES {
            set.add(BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::ONE) }))).unwrap();
        }
        assert!(matches!(
            set.add(BehaviorEntry::new(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::ONE) }))),
            Err(SimError::LimitExceeded { .. })
        ));
    }
}
