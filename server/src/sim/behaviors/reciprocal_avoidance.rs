//! Reciprocal avoidance (ORCA, [`crate::sim::orca`]): not a force to blend but a filter on the
//! velocity the other behaviours ask for. The agent's *preferred* velocity — its current
//! velocity plus the blended steering of one step (or MoveTo's flow) — is replaced by the
//! closest velocity that cannot touch any of its `max_neighbors` nearest neighbours within
//! `time_horizon` seconds (assuming they keep their velocities, and that those that avoid too
//! take half the effort), nor any obstacle or wall within `obstacle_time_horizon`, and that is
//! no faster than `max_speed`.
//!
//! As in RVO2, the chosen velocity is applied as it is: avoidance may brake or swerve harder
//! than `max_accel` (the preferred velocity itself respects it). Neighbours are the nearest by
//! (distance, id) — a fixed order, so the result is the same on any thread count. Agents that
//! do not avoid this way (resting, arrived, or steered by other behaviours) are avoided with
//! the whole effort. Two agents on the same spot are separated along a direction fixed by their
//! ids.
//!
//! In a [`super::BehaviorSet`] the entry's weight and priority do not matter: the set blends
//! its other entries and then filters the result (the first reciprocal entry's parameters win).

use arrayvec::ArrayVec;
use glam::Vec2;

use crate::sim::agent::{Agent, PortalTurn};
use crate::sim::error::{SimError, check_positive, check_radius};
use crate::sim::math::{closest_on_segment, pair_dir, segment_intersection};
use crate::sim::orca::{self, HalfPlane, Pair};
use crate::sim::spatial::Yielding;
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Flag in [`super::Scratch::events`]: no agent can touch this one after this step (its
/// neighbour search saw none close enough), so the integrator's contact test may skip it.
pub const NO_CONTACT: u8 = 0x80;

/// Most neighbours one agent may consider.
pub const MAX_NEIGHBORS: u32 = 32;
/// Most obstacles and walls one agent considers (the nearest ones the index yields first).
pub const MAX_STATICS: usize = 16;
/// Share of the avoidance an agent holding its place ([`Agent::held_order`]) takes of a pair
/// with an agent on its way (which takes the rest): the holder steps aside.
pub const HOLDER_SHARE: f32 = 0.8;
const MAX_LINES: usize = MAX_NEIGHBORS as usize + MAX_STATICS;

/// One agent's half-planes: at most [`MAX_STATICS`] static ones, then at most
/// [`MAX_NEIGHBORS`] for agents, so a list never overflows.
type Lines = ArrayVec<HalfPlane, MAX_LINES>;

/// Parameters of reciprocal avoidance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReciprocalAvoidanceParams {
    /// Seconds ahead within which no neighbour may be touched (default 1: RVO2's Circle at
    /// 1,000 agents clears its central jam fastest, and stays within 0.15 of overlap, with 0.5–1).
    pub time_horizon: f32,
    /// Seconds ahead within which no obstacle or wall may be touched (default 1).
    pub obstacle_time_horizon: f32,
    /// Neighbours further than this (centre to centre) are ignored (default 10).
    pub neighbor_dist: f32,
    /// At most this many nearest neighbours are considered (default 10, at most 32).
    pub max_neighbors: u32,
}

impl Default for ReciprocalAvoidanceParams {
    fn default() -> Self {
        ReciprocalAvoidanceParams { time_horizon: 1.0, obstacle_time_horizon: 1.0, neighbor_dist: 10.0, max_neighbors: 10 }
    }
}

impl ReciprocalAvoidanceParams {
    /// Validates every field; the error names it.
    pub fn validate(&self) -> Result<(), SimError> {
        check_positive("time_horizon", self.time_horizon)?;
        if self.time_horizon > 60.0 {
            return Err(SimError::invalid("time_horizon", "must be at most 60"));
        }
        check_positive("obstacle_time_horizon", self.obstacle_time_horizon)?;
        if self.obstacle_time_horizon > 60.0 {
            return Err(SimError::invalid("obstacle_time_horizon", "must be at most 60"));
        }
        check_radius("neighbor_dist", self.neighbor_dist)?;
        if !(1..=MAX_NEIGHBORS).contains(&self.max_neighbors) {
            return Err(SimError::invalid("max_neighbors", format!("must be between 1 and {MAX_NEIGHBORS}")));
        }
        Ok(())
    }
}

/// The `k` nearest neighbours by (squared distance, id), nearest first: `keys[i]` packs the
/// two so that one integer comparison orders them ([`Nearest::key`]), `ranks[i]` is that
/// agent's rank in the grid. Fixed-capacity lists, not initialised (cheap to make per agent).
struct Nearest {
    keys: ArrayVec<u64, { MAX_NEIGHBORS as usize }>,
    ranks: ArrayVec<u32, { MAX_NEIGHBORS as usize }>,
    k: usize,
    /// The radius searched.
    radius: f32,
}

impl Nearest {
    fn new(k: usize) -> Self {
        Nearest { keys: ArrayVec::new(), ranks: ArrayVec::new(), k: k.min(MAX_NEIGHBORS as usize), radius: 0.0 }
    }

    fn len(&self) -> usize {
        self.keys.len()
    }

    fn clear(&mut self) {
        self.keys.clear();
        self.ranks.clear();
    }

    /// (squared distance, id) as one integer with the same order: the bits of a finite
    /// non-negative `f32` sort as the number does, and the id breaks ties.
    fn key(d2: f32, id: u32) -> u64 {
        (u64::from(d2.to_bits()) << 32) | u64::from(id)
    }

    /// The squared distance of a key.
    fn dist2(key: u64) -> f32 {
        f32::from_bits((key >> 32) as u32)
    }

    /// The squared distance beyond which no agent can be among the nearest any more: the k-th
    /// nearest's once k are known.
    fn reach2(&self) -> f32 {
        if self.len() == self.k { self.keys.last().map_or(f32::INFINITY, |&l| Self::dist2(l)) } else { f32::INFINITY }
    }

    /// Offers an agent at squared distance `d2` (finite, non-negative: positions are finite).
    fn offer(&mut self, d2: f32, id: u32, rank: u32) {
        let key = Self::key(d2, id);
        if self.len() == self.k {
            if self.keys.last().is_none_or(|&last| last <= key) {
                return;
            }
            self.keys.pop();
            self.ranks.pop();
        }
        // Never full here (at most k − 1 < capacity entries); appended, then moved down to its
        // place (lists are short, and an agent offered later is usually further).
        if self.keys.try_push(key).is_err() || self.ranks.try_push(rank).is_err() {
            return;
        }
        let mut i = self.keys.len() - 1;
        while i > 0 && self.keys[i - 1] > key {
            self.keys.swap(i, i - 1);
            self.ranks.swap(i, i - 1);
            i -= 1;
        }
    }
}

/// The agent's neighbours for avoidance, into `out` (made with `p.max_neighbors`): the
/// `max_neighbors` nearest within `neighbor_dist`.
/// Looks within six radii first (unless that is over half of `neighbor_dist`: then the whole
/// distance at once), and doubles the radius up to `neighbor_dist` while fewer than
/// `max_neighbors` are found: in a crowd the first look suffices, and a look never scans
/// much more than the disc the nearest neighbours fill. The `k` nearest within any radius that
/// holds `k` agents are the `k` nearest overall, so the result is the same as one full look.
fn nearest(agent: &Agent, p: &ReciprocalAvoidanceParams, view: &WorldView, out: &mut Nearest) {
    let pos = agent.position;
    let full = p.neighbor_dist;
    let short = 6.0 * agent.limits.radius;
    // A first look of more than half the distance saves little and costs a second scan.
    let mut radius = if short * 2.0 >= full { full } else { short };
    loop {
        out.clear();
        out.radius = radius;
        view.for_each_agent_nearest_ranked(pos, radius, |k, n, d2| {
            if n.id != agent.id {
                out.offer(d2, n.id, k as u32);
            }
            out.reach2()
        });
        if out.len() == out.k || radius >= full {
            return;
        }
        radius = (radius * 2.0).min(full);
    }
}

/// Seconds of stall difference at which the pair's shares reach their bounds.
const STALL_SPAN_SECS: f32 = 2.0;

/// Share of the avoidance an agent on its way takes of a pair with another on its way, from
/// their stall counts (ticks without progress) and the step `dt`: a half each when equal, down
/// to 1 − [`HOLDER_SHARE`] for the one stuck [`STALL_SPAN_SECS`] longer, so that in a knot the
/// longest stuck gets through and the rest make room.
fn stalled_share(mine: f32, theirs: f32, dt: f32) -> f32 {
    let t = ((mine - theirs) * dt / STALL_SPAN_SECS).clamp(-1.0, 1.0);
    0.5 - (HOLDER_SHARE - 0.5) * t
}

/// What [`half_planes`] found besides the half-planes.
struct Found {
    /// How many of the half-planes are static (they come first).
    n_static: usize,
    /// No agent can touch this one after this step (see [`NO_CONTACT`]).
    clear: bool,
    /// How strongly agents ahead come against `heading` (0 with no heading): each neighbour
    /// ahead whose velocity points against it adds its closing speed as a fraction of its top
    /// speed, weighted by closeness (1 touching, 0 at `neighbor_dist`).
    oncoming: f32,
    /// Some neighbour stands in the way along `heading`: ahead, within one own radius of
    /// touching, and less than the radii sum off the line.
    blocked: bool,
}

/// The half-planes of `agent` into `lines` (empty), static ones first. `heading`: the unit
/// direction the agent wants to go, for [`Found::oncoming`] (zero: not measured). `steps`: the
/// steps (at least 1) over which [`Found::clear`] must hold, each agent moving at most its top
/// speed in each.
fn half_planes(agent: &Agent, p: &ReciprocalAvoidanceParams, view: &WorldView, heading: Vec2, steps: u32, lines: &mut Lines) -> Found {
    let pos = agent.position;
    let r = agent.limits.radius;
    let max_speed = agent.limits.max_speed;
    // The time over which `clear` must hold.
    let span = view.dt * steps.max(1) as f32;
    // Only surfaces the agent could reach within the horizon can constrain it.
    let reach = r + max_speed * p.obstacle_time_horizon;
    view.for_each_obstacle_near(pos, reach, |o| {
        if lines.len() < MAX_STATICS {
            let away = pos - o.center;
            let len = away.length();
            let closest = if len > 0.0 { o.center + away * (o.radius / len) } else { o.center + Vec2::X * o.radius };
            let gap = len - o.radius - r;
            let _ = lines.try_push(orca::static_half_plane(pos, closest, gap, p.obstacle_time_horizon, view.dt, max_speed));
        }
    });
    view.for_each_wall_near(pos, reach, |w| {
        if lines.len() < MAX_STATICS {
            let closest = closest_on_segment(pos, w.a, w.b);
            let gap = pos.distance(closest) - r;
            if gap < max_speed * p.obstacle_time_horizon {
                let _ = lines.try_push(orca::static_half_plane(pos, closest, gap, p.obstacle_time_horizon, view.dt, max_speed));
            }
        }
    });
    let n_static = lines.len();
    let mut near = Nearest::new(p.max_neighbors as usize);
    nearest(agent, p, view, &mut near);
    let all = view.grid.all();
    // No contact is possible with a neighbour further than both radii plus both top speeds'
    // `steps` steps; agents not found are beyond the search radius, or (k found) beyond the k-th.
    let own = r + max_speed * span;
    let far = own + view.extent.0 + view.extent.1 * span;
    let beyond = match near.keys.last() {
        Some(&last) if near.len() == near.k => Nearest::dist2(last).sqrt(),
        _ => near.radius,
    };
    let mut clear = beyond > far;
    let mut oncoming = 0.0;
    let mut blocked = false;
    // Walls between the agent and a neighbour hide it: it can neither be touched nor come
    // against the agent (the nearest walls within the neighbour distance; none in open worlds).
    let mut screens: ArrayVec<(Vec2, Vec2), MAX_STATICS> = ArrayVec::new();
    if !view.walls.is_empty() {
        view.for_each_wall_near(pos, p.neighbor_dist, |w| {
            let _ = screens.try_push((w.a, w.b));
        });
    }
    let yielding = agent.gives_way();
    let portal = agent.order.as_deref().and_then(|o| PortalTurn::waits_at(o.portal)).map(|(c, _)| c);
    let stall = agent.active_order().map_or(0.0, |o| o.stall as f32);
    for &rank in &near.ranks {
        let Some(o) = all.get(rank as usize) else { continue };
        let oc = view.grid.crowd(rank as usize);
        let lim = own + o.radius + oc.max_speed * span;
        clear &= o.position.distance_squared(pos) > lim * lim;
        if screens.iter().any(|&(a, b)| segment_intersection(pos, o.position, a, b).is_some()) {
            continue;
        }
        let mut rel_pos = o.position - pos;
        let ahead = rel_pos.dot(heading);
        blocked |= ahead > 0.0 && heading.perp_dot(rel_pos).abs() < r + o.radius && rel_pos.length() < 2.0 * r + o.radius;
        let against = -o.velocity.dot(heading);
        if against > 0.0 && ahead > 0.0 && oc.max_speed > 0.0 {
            let gap = (rel_pos.length() - r - o.radius).max(0.0);
            oncoming += against / oc.max_speed * (1.0 - gap / p.neighbor_dist).max(0.0);
        }
        if rel_pos.length_squared() < 1e-12 {
            rel_pos = -pair_dir(agent.id, o.id) * 1e-3;
        }
        if yielding.any() && oc.yielding.any() {
            // Holders make room for each other by contact alone: a holder stepping aside pushes
            // the holders beside it instead of waiting behind them.
            continue;
        }
        let share = match (oc.reciprocal, yielding, oc.yielding) {
            (false, _, _) => 1.0,
            (true, Yielding::Holds, Yielding::No) => HOLDER_SHARE,
            // A waiting agent makes way for agents coming out of the passage, not for those
            // queueing behind it (they would push it into the passage's mouth).
            (true, Yielding::Waits, Yielding::No) => match portal {
                Some(c) if o.position.distance_squared(c) >= pos.distance_squared(c) => 0.5,
                _ => HOLDER_SHARE,
            },
            (true, Yielding::No, Yielding::Holds) => 1.0 - HOLDER_SHARE,
            (true, Yielding::No, Yielding::Waits) => 0.5,
            (true, Yielding::Holds | Yielding::Waits, Yielding::Holds | Yielding::Waits) => 0.5,
            (true, Yielding::No, Yielding::No) => stalled_share(stall, f32::from(oc.stall), view.dt),
        };
        let _ = lines.try_push(orca::agent_half_plane(agent.velocity, Pair { rel_pos, rel_vel: agent.velocity - o.velocity, radius: r + o.radius }, p.time_horizon, view.dt, share));
    }
    Found { n_static, clear, oncoming, blocked }
}

/// The avoiding velocity for `preferred` (see the module docs).
pub fn velocity(agent: &Agent, p: &ReciprocalAvoidanceParams, view: &WorldView, preferred: Vec2) -> Vec2 {
    velocity_and_clearance(agent, p, view, preferred).0
}

/// [`velocity`], and whether no agent can touch this one after the step ([`NO_CONTACT`]).
pub fn velocity_and_clearance(agent: &Agent, p: &ReciprocalAvoidanceParams, view: &WorldView, preferred: Vec2) -> (Vec2, bool) {
    velocity_passing(agent, p, view, preferred, Passing::NONE)
}

/// How [`velocity_passing`] plans: the passing side and how long the plan must hold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Passing {
    /// Radians the preferred velocity turns (to the right) against oncoming agents; 0: no turn.
    pub angle: f32,
    /// The agent made no progress lately: a blocked agent with no static obstacle near turns fully.
    pub stalled: bool,
    /// Steps (at least 1) over which the returned clearance must hold.
    pub plan_steps: u32,
}

impl Passing {
    /// Plain reciprocal avoidance: no passing side, planned for one step.
    pub const NONE: Passing = Passing { angle: 0.0, stalled: false, plan_steps: 1 };
}

/// [`velocity_and_clearance`] with a passing side: when agents ahead come against the
/// preferred velocity, it is first turned right (clockwise) by up to `pass_angle` radians, in
/// proportion to how strongly they come ([`Found::oncoming`], capped at 1). Everyone keeping
/// right, two crowds walking through each other split into lanes instead of pressing head on.
/// `stalled`: the agent has made no progress for a while; with an agent in its way and away
/// from obstacles and walls it then turns the whole `pass_angle` whatever comes against it (two agents stopped face to
/// face see no velocity coming against them, and without the turn would wait for each other
/// for ever). Near a wall or an obstacle it does not: there a stalled agent is usually in a
/// queue at a corner or a gap, and turning would press it into the wall.
/// `plan_steps`: the steps (at least 1) over which the clearance returned must hold, the agent
/// keeping the returned velocity and every other moving at most at its top speed; past one
/// step, an agent is clear only if avoidance had nothing to do (no obstacle or wall near, no
/// agent coming against it, the preferred velocity kept): MoveTo's agents that are clear keep
/// their velocity until their next plan, see `MoveToParams::replan_every_ticks`.
pub fn velocity_passing(agent: &Agent, p: &ReciprocalAvoidanceParams, view: &WorldView, preferred: Vec2, how: Passing) -> (Vec2, bool) {
    let Passing { angle: pass_angle, stalled, plan_steps } = how;
    let mut lines = Lines::new();
    let heading = if pass_angle > 0.0 { crate::sim::math::dir(preferred) } else { Vec2::ZERO };
    let found = half_planes(agent, p, view, heading, plan_steps, &mut lines);
    let turn = if stalled && found.blocked && found.n_static == 0 { 1.0 } else { found.oncoming.min(1.0) };
    // Past one step, clear only when avoidance had nothing to do: no obstacle or wall near,
    // no agent coming against it, and the preferred velocity kept as it is (below).
    let coastable = plan_steps <= 1 || (found.n_static == 0 && turn == 0.0);
    let clear = found.clear && coastable;
    let preferred = if turn > 0.0 { Vec2::from_angle(-pass_angle * turn).rotate(preferred) } else { preferred };
    if lines.is_empty() {
        return (crate::sim::math::clamp_len(preferred, agent.limits.max_speed), clear);
    }
    let v = orca::solve(&lines, found.n_static, preferred, agent.limits.max_speed, &mut Vec::new());
    (v, clear && (plan_steps <= 1 || v == crate::sim::math::clamp_len(preferred, agent.limits.max_speed)))
}

/// The preferred velocity one step of `wanted` steering gives (the integrator's rule).
pub fn preferred_velocity(agent: &Agent, wanted: Steering, dt: f32) -> Vec2 {
    crate::sim::math::clamp_len(agent.velocity + wanted.sanitized().linear * dt, agent.limits.max_speed)
}

/// Filters `wanted` (a blended steering): its linear part becomes the acceleration that takes
/// the agent to the avoiding velocity in one step; the angular part is kept.
/// Sets [`NO_CONTACT`] in `scratch` when no agent can touch this one after the step.
pub fn filter(agent: &Agent, p: &ReciprocalAvoidanceParams, view: &WorldView, wanted: Steering, scratch: &mut super::Scratch) -> Steering {
    let (v, clear) = velocity_and_clearance(agent, p, view, preferred_velocity(agent, wanted, view.dt));
    if clear {
        scratch.events |= NO_CONTACT;
    }
    Steering { linear: (v - agent.velocity) / view.dt, angular: wanted.angular }
}

/// What the avoidance of one agent saw and chose this tick (for the viewer).
#[derive(Debug, Clone, PartialEq)]
pub struct Explain {
    /// The velocity asked for.
    pub preferred: Vec2,
    /// The velocity chosen.
    pub chosen: Vec2,
    /// The half-planes of permitted velocities (statics first).
    pub half_planes: Vec<HalfPlane>,
    /// How many of them come from obstacles and walls.
    pub n_static: usize,
}

/// The avoidance of `agent` for `preferred`, with the half-planes it solved.
pub fn explain(agent: &Agent, p: &ReciprocalAvoidanceParams, view: &WorldView, preferred: Vec2) -> Explain {
    let mut lines = Lines::new();
    let found = half_planes(agent, p, view, Vec2::ZERO, 1, &mut lines);
    Explain { preferred, chosen: velocity(agent, p, view, preferred), half_planes: lines.to_vec(), n_static: found.n_static }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;

    fn close(a: Vec2, b: Vec2) {
        assert!((a - b).length() < 1e-3, "{a} != {b}");
    }

    #[test]
    fn lone_agent_keeps_its_preferred_velocity_within_max_speed() {
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let p = ReciprocalAvoidanceParams::default();
        close(velocity(a, &p, &view, Vec2::new(3.0, 4.0)), Vec2::new(3.0, 4.0));
        // Max speed 5: (6, 8) → (3, 4).
        close(velocity(a, &p, &view, Vec2::new(6.0, 8.0)), Vec2::new(3.0, 4.0));
    }

    #[test]
    fn resting_neighbour_ahead_is_passed_on_the_right_leg() {
        // A at the origin moving (3,0); B (radius 0.5) rests at (4,0) and does not avoid:
        // radius sum 1, τ 2 — the case of `orca`'s test: (3·15/16, −3·√15/16).
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(3.0, 0.0)), agent_at(2, Vec2::new(4.0, 0.0), Vec2::ZERO)]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let p = ReciprocalAvoidanceParams { time_horizon: 2.0, ..ReciprocalAvoidanceParams::default() };
        let v = velocity(a, &p, &view, Vec2::new(3.0, 0.0));
        close(v, Vec2::new(2.8125, -3.0 * 15f32.sqrt() / 16.0));
    }

    #[test]
    fn nearest_keeps_the_k_closest_by_distance_then_id() {
        let mut agents = vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)];
        for (id, x) in [(2, 3.0), (3, 1.0), (4, 2.0), (5, -1.0), (6, 9.0)] {
            agents.push(agent_at(id, Vec2::new(x, 0.0), Vec2::ZERO));
        }
        let w = world_with(agents);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let p = ReciprocalAvoidanceParams { max_neighbors: 3, ..ReciprocalAvoidanceParams::default() };
        let mut near = Nearest::new(3);
        nearest(a, &p, &view, &mut near);
        let ids: Vec<u32> = near.keys.iter().map(|&key| key as u32).collect();
        // Distances 1 (id 3), 1 (id 5), 2 (id 4): ties by id.
        assert_eq!(ids, vec![3, 5, 4]);
        // Beyond neighbor_dist 8: id 6 never counts, even with room.
        let p = ReciprocalAvoidanceParams { max_neighbors: 10, neighbor_dist: 8.0, ..ReciprocalAvoidanceParams::default() };
        let mut near = Nearest::new(10);
        nearest(a, &p, &view, &mut near);
        assert_eq!(near.len(), 4);
    }

    #[test]
    fn nearest_keys_order_as_distance_then_id() {
        // The packed key orders as the (distance, id) pair, including 0, subnormals and ties.
        let pairs = [(0.0f32, 7u32), (0.0, 9), (f32::MIN_POSITIVE / 2.0, 0), (1.0, 2), (1.0, 3), (1.5, 1), (1e30, 0), (f32::MAX, u32::MAX)];
        for w in pairs.windows(2) {
            assert!(Nearest::key(w[0].0, w[0].1) < Nearest::key(w[1].0, w[1].1), "{:?} !< {:?}", w[0], w[1]);
        }
        for (d2, id) in pairs {
            assert_eq!(Nearest::dist2(Nearest::key(d2, id)).to_bits(), d2.to_bits());
        }
    }

    #[test]
    fn obstacle_ahead_caps_the_approach_speed() {
        // Obstacle radius 2 at (5,0); agent radius 0.5 at the origin: gap 2.5, τo 1 → at most
        // 2.5 units/s towards it; preferred (5,0) → (2.5, 0).
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(5.0, 0.0))]);
        w.add_obstacle(Vec2::new(5.0, 0.0), 2.0).unwrap();
        w.rebuild_indexes();
        let view = w.view();
        let a = view.agent(1).unwrap();
        close(velocity(a, &ReciprocalAvoidanceParams::default(), &view, Vec2::new(5.0, 0.0)), Vec2::new(2.5, 0.0));
    }

    #[test]
    fn validation_names_fields() {
        let bad = ReciprocalAvoidanceParams { max_neighbors: 0, ..ReciprocalAvoidanceParams::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("max_neighbors"));
        let bad = ReciprocalAvoidanceParams { time_horizon: f32::NAN, ..ReciprocalAvoidanceParams::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("time_horizon"));
        let bad = ReciprocalAvoidanceParams { neighbor_dist: 1e6, ..ReciprocalAvoidanceParams::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("neighbor_dist"));
    }
}
