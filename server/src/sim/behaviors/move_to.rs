//! MoveTo (004): follow the flow field to the goal, blended with context avoidance and
//! separation, slow down near the stop point and stop within the tolerance of it.
//!
//! Per tick (004 `FixedUpdate` / `ComputeSteering`):
//! 1. Arrived? Within `tolerance` of the stop point (its formation slot, or the goal for a lone
//!    agent) and at most `arrive_speed`: report `DestinationReached` (the apply phase zeroes the
//!    velocity and marks the order done). An agent that got no nearer its stop point for
//!    `give_up_after` seconds gives up where it stands (the order is done and marked
//!    `gave_up`, never counted as arrived), so every agent emits the event once — but only
//!    when its whole knot is stalled too: once a second it looks through the agents on their
//!    way that it touches, those they touch and so on (up to 256, `knot_progresses`), and
//!    while any of them got nearer its own stop point within `give_up_after` it keeps trying;
//!    nor does an agent give up while it walks towards its stop point at half its top speed or
//!    more (`heads_home`: a crowd carried it back, and it walks that ground again before it
//!    is nearer than ever).
//!    A knot that dissolves from its rim carries and squeezes the agents inside it for longer
//!    than any one of them gets nearer home (the central knot of RVO2's Circle at 10,000
//!    agents takes two to three times `give_up_after` to unwind): they wait their turn, they
//!    are not stuck. An agent alone, walled off or pressed against what holds its stop point,
//!    and every member of a knot in which nobody progresses, still gives up.
//! 2. Wanted direction: straight at the stop point when it is near (inside `claim_radius`) and
//!    the straight line is clear of obstacles and walls (line-of-sight shortcut); otherwise the
//!    flow field sampled at the agent (bilinear); an agent standing in a blocked cell steers to
//!    the reachable neighbour cell with the least path cost that it can reach without crossing a
//!    wall.
//! 3. 004's blend: `normalize(wanted + avoid·avoid_strength + separation·separation_weight)`,
//!    avoid = context avoidance ([`super::context_avoidance`]), separation = 004's
//!    ([`super::separation::separation_dir`]). With `reciprocal` set (the default) there is no
//!    blend: the direction is `wanted`, and after step 5 direction × speed is the preferred
//!    velocity, which reciprocal avoidance
//!    ([`super::reciprocal_avoidance`]) replaces by the nearest velocity that touches no agent,
//!    moving or resting, nor obstacle nor wall within its horizons. 004's context avoidance
//!    only sees resting agents, so crowds with crossing orders walked through each other.
//! 4. 004's direction threshold: keep last tick's direction unless the new one differs by more
//!    than `direction_threshold` degrees.
//! 5. Arrive: speed = max_speed, or max_speed·d/`slow_radius` within `slow_radius` of the stop
//!    point; steering = clamp((dir·speed − v)/`time_to_target`, max_accel).
//!
//! Crowds (beyond 004, reciprocal mode): the preferred velocity turns right by up to
//! `passing_angle` when agents ahead come against it, so two crowds pass each other on one
//! side and form lanes; of two agents on their way, the one stuck longer takes the smaller
//! share of avoiding (see [`super::reciprocal_avoidance`]), so a knot unwinds from its most
//! stuck member; and an agent whose order is done holds its place ([`hold`]): it steps aside
//! for agents on their way and comes back, instead of standing as a wall before the agents
//! whose stop points lie behind it.
//!
//! Beyond 004: inside `slow_radius` the avoidance and separation weights fade linearly with the
//! distance to the stop point, and the avoidance sweep is no longer than that distance, so an
//! agent can settle into its slot between neighbours that stopped before it (004 stops a lone
//! agent and never has to). 004 gives no values for `avoidStrength`, `separationWeight` or
//! `directionThreshold`; the defaults below are ours.

use glam::Vec2;

use super::Scratch;
use super::context_avoidance::{ContextAvoidanceParams, avoid_dir};
use super::reciprocal_avoidance::{self, Passing, ReciprocalAvoidanceParams};
use super::separation::separation_dir;
use crate::sim::agent::{Agent, AgentId, MoveOrder, PortalTurn};
use crate::sim::error::{SimError, check_non_negative, check_positive};
use crate::sim::math::{clamp_len, dir, segment_intersection, sweep_circle};
use crate::sim::steering::Steering;
use crate::sim::view::WorldView;

/// Seconds without progress after which an agent keeps right whatever comes against it (see
/// [`reciprocal_avoidance::velocity_passing`]).
const STALLED_SECS: f32 = 2.0;

/// Seconds between two looks of a stalled agent at its knot before it gives up (see
/// [`knot_progresses`]).
const KNOT_CHECK_SECS: f32 = 1.0;

/// Most agents of its knot (itself included) a stalled agent looks at for one that progressed
/// before it gives up: beyond that the knot counts as stalled (see [`knot_progresses`]).
const KNOT_SEARCH_MAX: usize = 256;

/// Event flag: the agent's MoveTo order ends this tick (it reached its stop point, or gave up:
/// see [`EVENT_GAVE_UP`]).
pub const EVENT_DESTINATION_REACHED: u8 = 1;

/// Event flag, with [`EVENT_DESTINATION_REACHED`]: the order ends short of its stop point
/// because the agent made no progress for `give_up_after` seconds.
pub const EVENT_GAVE_UP: u8 = 4;

/// Largest [`MoveToParams::replan_every_ticks`].
pub const MAX_REPLAN_EVERY_TICKS: u32 = 20;

/// Whether agent `id` plans its avoidance on `tick`, planning once every `every` ticks: on the
/// ticks where `(tick + id) % every == 0`, so each agent plans exactly once in any `every`
/// consecutive ticks and, ids being consecutive in a crowd, each tick plans about `1/every` of
/// it. A function of the id and the tick alone: the same on any thread count.
pub fn plans_avoidance(id: AgentId, tick: u64, every: u32) -> bool {
    every <= 1 || (tick + u64::from(id)) % u64::from(every) == 0
}

/// Steering between avoidance plans of an agent whose last plan vouched that no agent can
/// come near it before the next: it keeps its velocity (the integrator leaves it as it is),
/// and the contact test is skipped.
fn coast(scratch: &mut Scratch) -> Steering {
    scratch.events |= reciprocal_avoidance::NO_CONTACT;
    Steering::ZERO
}

/// Tuning of MoveTo (a world setting).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoveToParams {
    /// Weight of the context-avoidance direction (004 `avoidStrength`; default 1).
    pub avoid_strength: f32,
    /// Weight of the separation direction (004 `separationWeight`; default 0.8).
    pub separation_weight: f32,
    /// Separation neighbour radius (004 `neighborRadius`); `None` = 2.2 × the agent's radius.
    pub separation_radius: Option<f32>,
    /// A new direction is taken only if it turns more than this, degrees (004 `directionThreshold`; default 4).
    pub direction_threshold: f32,
    /// Slow-down radius round the stop point (default 3).
    pub slow_radius: f32,
    /// Time over which the velocity error is corrected, seconds (default 0.25).
    pub time_to_target: f32,
    /// Within tolerance of the stop point and at most this fast counts as arrived (default 0.5).
    pub arrive_speed: f32,
    /// Context avoidance (004's; used when `reciprocal` is off).
    pub context: ContextAvoidanceParams,
    /// Reciprocal avoidance of moving and resting agents, obstacles and walls (default on, with
    /// its defaults); `None` = 004's blend of context avoidance and separation.
    pub reciprocal: Option<ReciprocalAvoidanceParams>,
    /// A goal whose agents — at most this many — all see it along free navigation cells gets
    /// no flow field: they head straight for it (the field would point straight anyway).
    /// Larger groups, and goals any agent does not see, get a field. 0 = always a field
    /// (default 32).
    pub straight_line_max_agents: u32,
    /// Reciprocal mode: the most the preferred velocity turns right, degrees, when agents ahead
    /// come against it, so that crowds pass each other on a consistent side (default 30; 0 = off).
    pub passing_angle: f32,
    /// An agent that gets no nearer its stop point for this long, seconds, gives up: its order
    /// ends where it stands and it is reported as having stopped short, not as arrived. A last
    /// resort for a stop point no agent can reach (walled in, or inside a crowd that holds
    /// it): in a dense crowd an agent at the back may wait minutes while the front gets
    /// through, and an agent in a knot gives up only once no agent of the knot got nearer its
    /// stop point for this long either (default 300).
    pub give_up_after: f32,
    /// Passages narrower than this many radii of the largest agent are taken one direction at a
    /// time, the other waiting clear of them (see [`crate::sim::nav::portals`]; default 5, so a
    /// door four radii wide is one, and a passage wide enough for two lanes each way is not;
    /// 0 = never).
    pub portal_radii: f32,
    /// Seconds a direction keeps a narrow passage while the other waits (default 15).
    pub portal_turn: f32,
    /// Reciprocal mode: an agent on its way whose last avoidance plan kept its preferred
    /// velocity and found no agent, obstacle or wall able to come near it within this many
    /// ticks plans again (neighbour search and
    /// linear program) only on its next planning tick, one in this many, staggered by agent id
    /// so that each tick plans about the same share of the crowd ([`plans_avoidance`]); in
    /// between it keeps the velocity it chose, while arrival is checked every tick. Agents
    /// with others near (a crowd, a knot), holders and waiting agents plan every tick.
    /// 1 = every tick (default 5: RVO2's 4 Hz at 20 Hz).
    pub replan_every_ticks: u32,
}

impl Default for MoveToParams {
    fn default() -> Self {
        MoveToParams {
            avoid_strength: 1.0,
            separation_weight: 0.8,
            separation_radius: None,
            direction_threshold: 4.0,
            slow_radius: 3.0,
            time_to_target: 0.25,
            arrive_speed: 0.5,
            context: ContextAvoidanceParams::default(),
            reciprocal: Some(ReciprocalAvoidanceParams::default()),
            straight_line_max_agents: 32,
            passing_angle: 30.0,
            give_up_after: 300.0,
            portal_radii: 5.0,
            portal_turn: 15.0,
            replan_every_ticks: 5,
        }
    }
}

impl MoveToParams {
    /// Validates every field; the error names it.
    pub fn validate(&self) -> Result<(), SimError> {
        check_non_negative("avoid_strength", self.avoid_strength)?;
        check_non_negative("separation_weight", self.separation_weight)?;
        if let Some(r) = self.separation_radius {
            check_non_negative("separation_radius", r)?;
            if r > 1000.0 {
                return Err(SimError::invalid("separation_radius", "must be at most 1000"));
            }
        }
        check_non_negative("direction_threshold", self.direction_threshold)?;
        check_positive("slow_radius", self.slow_radius)?;
        check_positive("time_to_target", self.time_to_target)?;
        check_non_negative("arrive_speed", self.arrive_speed)?;
        check_non_negative("passing_angle", self.passing_angle)?;
        check_positive("give_up_after", self.give_up_after)?;
        if self.give_up_after > 86_400.0 {
            return Err(SimError::invalid("give_up_after", "must be at most 86400"));
        }
        check_non_negative("portal_radii", self.portal_radii)?;
        if self.portal_radii > 100.0 {
            return Err(SimError::invalid("portal_radii", "must be at most 100"));
        }
        check_positive("portal_turn", self.portal_turn)?;
        if self.portal_turn > 3600.0 {
            return Err(SimError::invalid("portal_turn", "must be at most 3600"));
        }
        if !(1..=MAX_REPLAN_EVERY_TICKS).contains(&self.replan_every_ticks) {
            return Err(SimError::invalid("replan_every_ticks", format!("must be between 1 and {MAX_REPLAN_EVERY_TICKS}")));
        }
        if self.passing_angle > 90.0 {
            return Err(SimError::invalid("passing_angle", "must be at most 90"));
        }
        if self.straight_line_max_agents > 100_000 {
            return Err(SimError::invalid("straight_line_max_agents", "must be at most 100000"));
        }
        if let Some(r) = &self.reciprocal {
            r.validate().map_err(|e| e.within("reciprocal"))?;
        }
        self.context.validate().map_err(|e| e.within("context"))
    }

    /// Separation radius for an agent of radius `r`.
    pub fn separation_radius_for(&self, r: f32) -> f32 {
        self.separation_radius.unwrap_or(2.2 * r)
    }
}

/// True when a circle of radius `r` moving from `a` to `b` meets no obstacle and crosses no wall.
pub fn clear_line(view: &WorldView, a: Vec2, b: Vec2, r: f32) -> bool {
    let len = a.distance(b);
    let d = dir(b - a);
    let mid = (a + b) * 0.5;
    let reach = len * 0.5 + r;
    let mut clear = true;
    view.for_each_obstacle_near(mid, reach, |o| {
        clear &= sweep_circle(a, d, len, r, o.center, o.radius).is_none();
    });
    if clear {
        view.for_each_wall_near(mid, reach, |w| {
            clear &= segment_intersection(a, b, w.a, w.b).is_none();
        });
    }
    clear
}

/// Direction out of a blocked cell: to the reachable neighbour cell (within two cells) with the
/// least path cost plus distance, reachable without crossing a wall; zero if none.
fn escape_dir(agent: &Agent, order: &MoveOrder, view: &WorldView) -> Vec2 {
    let Some(nav) = view.nav else { return Vec2::ZERO };
    let Some(field) = nav.cache.get(order.goal_cell as usize) else { return Vec2::ZERO };
    let g = &nav.grid;
    let p = agent.position;
    let (cx, cy) = g.coords(p);
    let mut best: Option<(f32, Vec2)> = None;
    for dy in -2..=2 {
        for dx in -2..=2 {
            let Some(j) = g.offset(cx, cy, dx, dy) else { continue };
            let cost = field.cost(j);
            if !cost.is_finite() || g.is_blocked(j) {
                continue;
            }
            let c = g.center(j);
            let score = cost + c.distance(p);
            if best.is_some_and(|b| score >= b.0) {
                continue;
            }
            let mut crosses = false;
            view.for_each_wall_near((p + c) * 0.5, p.distance(c) * 0.5, |w| {
                crosses |= segment_intersection(p, c, w.a, w.b).is_some();
            });
            if !crosses {
                best = Some((score, dir(c - p)));
            }
        }
    }
    best.map_or(Vec2::ZERO, |b| b.1)
}

/// The wanted direction (step 2).
pub fn wanted_dir(agent: &Agent, order: &MoveOrder, view: &WorldView) -> Vec2 {
    let p = agent.position;
    let to_stop = order.stop_point - p;
    if to_stop.length() <= order.claim_radius && clear_line(view, p, order.stop_point, agent.limits.radius * 0.9) {
        return dir(to_stop);
    }
    let sampled = view
        .nav
        .and_then(|nav| nav.cache.get(order.goal_cell as usize).map(|f| f.sample(&nav.grid, p)))
        .unwrap_or(Vec2::ZERO);
    if sampled != Vec2::ZERO {
        return sampled;
    }
    let out = escape_dir(agent, order, view);
    if out != Vec2::ZERO { out } else { dir(to_stop) }
}

/// MoveTo's steering for `agent` under `order`; sets [`EVENT_DESTINATION_REACHED`] in
/// `scratch.events` and the direction memories in `scratch.memory`.
pub fn steer(agent: &Agent, order: &MoveOrder, p: &MoveToParams, view: &WorldView, scratch: &mut Scratch) -> Steering {
    let lim = &agent.limits;
    let d = agent.position.distance(order.stop_point);
    match arrives(agent, order, p, view) {
        Stop::No => {}
        Stop::Reached => {
            scratch.events |= EVENT_DESTINATION_REACHED;
            return Steering::ZERO;
        }
        Stop::GaveUp => {
            scratch.events |= EVENT_DESTINATION_REACHED | EVENT_GAVE_UP;
            return Steering::ZERO;
        }
    }
    // Near its stop point an agent plans every tick: its arrive speed changes from tick to tick.
    if p.reciprocal.is_some() && agent.memory.avoid_clear && d >= p.slow_radius && !plans_avoidance(agent.id, view.tick, p.replan_every_ticks) {
        return coast(scratch);
    }
    if let (Some((portal, clear)), Some(rp)) = (PortalTurn::waits_at(order.portal), &p.reciprocal) {
        scratch.memory.avoid_clear = false;
        return wait(agent, rp, view, portal, clear);
    }
    let wanted = wanted_dir(agent, order, view);
    if let Some(rp) = &p.reciprocal {
        let preferred = reciprocal_preferred(agent, order, p, wanted, d, scratch);
        let stalled = order.stall as f32 * view.dt >= STALLED_SECS;
        // Coming through a narrow passage, the passage's turns decide who passes, not a side.
        let pass = if order.portal.is_some() { 0.0 } else { p.passing_angle.to_radians() };
        let (v, clear) = reciprocal_avoidance::velocity_passing(agent, rp, view, preferred, Passing { angle: pass, stalled, plan_steps: p.replan_every_ticks });
        scratch.memory.avoid_clear = clear;
        if clear {
            scratch.events |= reciprocal_avoidance::NO_CONTACT;
        }
        return Steering::linear((v - agent.velocity) / view.dt);
    }
    // Fade avoidance and separation inside the slow radius so the agent can settle.
    let fade = (d / p.slow_radius).min(1.0);
    let avoid = avoid_dir(agent, &p.context, view, wanted, agent.memory.last_avoid_dir, d.max(lim.radius));
    scratch.memory.last_avoid_dir = avoid;
    let sep = separation_dir(agent, p.separation_radius_for(lim.radius), view);
    let mut new = dir(wanted + avoid * (p.avoid_strength * fade) + sep * (p.separation_weight * fade));
    if new == Vec2::ZERO {
        new = wanted;
    }
    let chosen = keep_direction(agent.memory.last_move_dir, new, p.direction_threshold);
    scratch.memory.last_move_dir = chosen;
    let target_speed = arrive_speed(d, order, p, lim.max_speed);
    Steering::linear(clamp_len((chosen * target_speed - agent.velocity) / p.time_to_target, lim.max_accel))
}

/// Steering of an agent holding its place after its order ([`Agent::held_order`]): back to the
/// stop point at up to half its top speed when pushed or stepped off it, and with reciprocal
/// avoidance (the larger share against agents on their way, see
/// [`reciprocal_avoidance::HOLDER_SHARE`]) out of the way of agents coming through. At rest on
/// its stop point with no agent on its way near, it stays put without solving anything.
pub fn hold(agent: &Agent, order: &MoveOrder, p: &MoveToParams, view: &WorldView, scratch: &mut Scratch) -> Steering {
    let Some(rp) = &p.reciprocal else { return Steering::linear(-agent.velocity / view.dt) };
    scratch.memory.avoid_clear = false;
    let d = agent.position.distance(order.stop_point);
    let home = d <= order.tolerance;
    let (aside, near) = step_aside(agent, view, None);
    if home && agent.velocity == Vec2::ZERO && !near {
        return Steering::ZERO;
    }
    let preferred = if aside != Vec2::ZERO {
        aside * (0.5 * agent.limits.max_speed)
    } else if home {
        Vec2::ZERO
    } else {
        dir(order.stop_point - agent.position) * (0.5 * arrive_speed(d, order, p, agent.limits.max_speed))
    };
    let stalled = order.stall as f32 * view.dt >= STALLED_SECS;
    let (v, _) = reciprocal_avoidance::velocity_passing(agent, rp, view, preferred, Passing { angle: p.passing_angle.to_radians(), stalled, plan_steps: 1 });
    Steering::linear((v - agent.velocity) / view.dt)
}

/// Steering of an agent waiting for its turn at a narrow passage ([`MoveOrder::portal`]):
/// out of the disc of radius `clear` round the passage's centre `portal` at half its top speed,
/// and off the line of agents on their way, else standing; avoiding as a holder does.
fn wait(agent: &Agent, rp: &ReciprocalAvoidanceParams, view: &WorldView, portal: Vec2, clear: f32) -> Steering {
    let pos = agent.position;
    let (aside, _) = step_aside(agent, view, Some(portal));
    let out = if pos.distance(portal) < clear { dir(pos - portal) } else { Vec2::ZERO };
    let preferred = dir(aside + out) * (0.5 * agent.limits.max_speed);
    let (v, _) = reciprocal_avoidance::velocity_passing(agent, rp, view, preferred, Passing::NONE);
    Steering::linear((v - agent.velocity) / view.dt)
}

/// The unit direction that takes an agent making way sideways off the line of the agents on
/// their way that it stands in front of (zero when none), and whether any agent on its way is
/// near. With `portal` (a waiting agent's passage), only agents nearer the passage than it
/// count: it makes way for agents coming out, not for those queueing behind it.
fn step_aside(agent: &Agent, view: &WorldView, portal: Option<Vec2>) -> (Vec2, bool) {
    let (pos, r) = (agent.position, agent.limits.radius);
    let mut aside = Vec2::ZERO;
    let mut near = false;
    view.for_each_agent_near_ranked(pos, r + view.extent.0 + r, |rank, n| {
        let crowd = view.grid.crowd(rank);
        if crowd.yielding.any() || !crowd.reciprocal || n.id == agent.id {
            return;
        }
        if portal.is_some_and(|c| n.position.distance_squared(c) >= pos.distance_squared(c)) {
            return;
        }
        near = true;
        let heading = if n.velocity.length_squared() > 0.01 * crowd.max_speed * crowd.max_speed {
            dir(n.velocity)
        } else {
            view.agent(n.id).and_then(|m| m.active_order()).map_or(Vec2::ZERO, |o| dir(o.stop_point - n.position))
        };
        let rel = pos - n.position;
        let lateral = heading.perp_dot(rel);
        if heading.dot(rel) > 0.0 && lateral.abs() < r + n.radius {
            let side = if lateral != 0.0 { lateral.signum() } else if agent.id < n.id { 1.0 } else { -1.0 };
            aside += crate::sim::math::perp(heading) * side;
        }
    });
    (dir(aside), near)
}

/// The preferred velocity of reciprocal mode: the flow (or straight line) at arrive speed, as
/// in RVO2 — not one accelerated step towards it, which in a jam would keep agents slow.
/// Reciprocal avoidance then picks the nearest safe velocity and the agent takes it this step.
fn reciprocal_preferred(agent: &Agent, order: &MoveOrder, p: &MoveToParams, wanted: Vec2, d: f32, scratch: &mut Scratch) -> Vec2 {
    let chosen = keep_direction(agent.memory.last_move_dir, wanted, p.direction_threshold);
    scratch.memory.last_move_dir = chosen;
    chosen * arrive_speed(d, order, p, agent.limits.max_speed)
}

/// Whether an order ends this tick (step 1).
enum Stop {
    /// It goes on.
    No,
    /// The agent is within the tolerance of its stop point and slow enough.
    Reached,
    /// The agent made no progress for `give_up_after` seconds.
    GaveUp,
}

/// Step 1: whether the agent stops this tick (at its stop point, or giving up).
fn arrives(agent: &Agent, order: &MoveOrder, p: &MoveToParams, view: &WorldView) -> Stop {
    let can_stop = order.slot.is_some() || order.formation == 0;
    if can_stop && agent.position.distance(order.stop_point) <= order.tolerance && agent.speed() <= p.arrive_speed {
        Stop::Reached
    } else if order.stall as f32 * view.dt >= p.give_up_after && checks_knot(agent.id, view) && !heads_home(agent, order) && !knot_progresses(agent, p, view) {
        Stop::GaveUp
    } else {
        Stop::No
    }
}

/// Whether agent `id` looks at its knot on this tick ([`knot_progresses`]): once every
/// [`KNOT_CHECK_SECS`], on the ticks where `(tick + id)` is a multiple of that many ticks, so a
/// crowd of stalled agents spreads its searches over the ticks. A function of the id and the
/// tick alone: the same on any thread count.
fn checks_knot(id: AgentId, view: &WorldView) -> bool {
    let every = (KNOT_CHECK_SECS / view.dt).round().max(1.0) as u64;
    (view.tick + u64::from(id)) % every == 0
}

/// Whether `agent` moves towards its stop point at half its top speed or more: it walks back
/// the ground a crowd carried it away from its best distance, which takes a while before it is
/// nearer than ever (the stall count waits for a new best distance), and is not stuck.
fn heads_home(agent: &Agent, order: &MoveOrder) -> bool {
    agent.velocity.dot(dir(order.stop_point - agent.position)) >= 0.5 * agent.limits.max_speed
}

/// Whether some agent of `agent`'s knot has made progress within `give_up_after`. The knot: the
/// agents on their way (active orders: agents holding their place and agents steered by
/// behaviours are not of it) whose gap to `agent` is less than half their radii sum, the agents
/// on their way that near those, and so on, never across a wall, as far as [`KNOT_SEARCH_MAX`]
/// agents. The search runs in the grid's fixed order from the immutable view: the same answer
/// on any thread count.
fn knot_progresses(agent: &Agent, p: &MoveToParams, view: &WorldView) -> bool {
    let mut seen = std::collections::BTreeSet::from([agent.id]);
    let mut queue = vec![(agent.position, agent.limits.radius)];
    let mut next = 0;
    let mut found = false;
    while let Some(&(pos, r)) = queue.get(next) {
        next += 1;
        view.for_each_agent_near(pos, 1.5 * (r + view.extent.0), |n| {
            if found || seen.len() >= KNOT_SEARCH_MAX || seen.contains(&n.id) || n.position.distance(pos) >= 1.5 * (r + n.radius) {
                return;
            }
            let Some(o) = view.agent(n.id).and_then(|m| m.active_order()) else { return };
            if !view.walls.is_empty() {
                let mut screened = false;
                view.for_each_wall_near((pos + n.position) * 0.5, pos.distance(n.position) * 0.5, |w| {
                    screened |= segment_intersection(pos, n.position, w.a, w.b).is_some();
                });
                if screened {
                    return;
                }
            }
            seen.insert(n.id);
            if (o.stall as f32 * view.dt) < p.give_up_after {
                found = true;
            } else {
                queue.push((n.position, n.radius));
            }
        });
        if found {
            return true;
        }
    }
    false
}

/// The velocity MoveTo asks reciprocal avoidance for this tick (for tools: the viewer's
/// avoidance overlay); `None` when the agent stops this tick.
pub fn preferred_velocity(agent: &Agent, order: &MoveOrder, p: &MoveToParams, view: &WorldView, scratch: &mut Scratch) -> Option<Vec2> {
    if !matches!(arrives(agent, order, p, view), Stop::No) {
        return None;
    }
    let d = agent.position.distance(order.stop_point);
    Some(reciprocal_preferred(agent, order, p, wanted_dir(agent, order, view), d, scratch))
}

/// 004's direction threshold (step 4): `last` unless `new` turns more than `threshold` degrees.
fn keep_direction(last: Vec2, new: Vec2, threshold: f32) -> Vec2 {
    if last == Vec2::ZERO || last.angle_to(new).abs().to_degrees() > threshold { new } else { last }
}

/// Step 5's speed at distance `d` from the stop point.
fn arrive_speed(d: f32, order: &MoveOrder, p: &MoveToParams, max_speed: f32) -> f32 {
    if d <= order.tolerance {
        0.0
    } else if d < p.slow_radius {
        max_speed * d / p.slow_radius
    } else {
        max_speed
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;

    /// 004's MoveTo: context avoidance and separation instead of reciprocal avoidance.
    fn context() -> MoveToParams {
        MoveToParams { reciprocal: None, ..MoveToParams::default() }
    }

    /// Reciprocal mode planning its avoidance every tick.
    fn planning() -> MoveToParams {
        MoveToParams { replan_every_ticks: 1, ..MoveToParams::default() }
    }

    fn order(stop: Vec2) -> MoveOrder {
        MoveOrder {
            target: stop,
            goal: stop,
            goal_cell: 0,
            formation: 0,
            slot: None,
            stop_point: stop,
            claim_radius: 10.0,
            tolerance: 0.5,
            stopping_distance: 0.5,
            unreachable: false,
            done: false,
            gave_up: false,
            reported: false,
            short_by: 0.0,
            best: f32::INFINITY,
            stall: 0,
            sight: None,
            portal: None,
        }
    }

    #[test]
    fn open_ground_goes_straight_at_full_speed_then_slows() {
        // No nav, no obstacles: stop point (20, 0) inside claim radius 10? No: 20 > 10, and no
        // field → escape finds nothing → straight at the stop point. Avoid: best sample is 0°
        // = (1,0); smoothed from last 0: (0,0) + 0.2·(1,0) = (0.2, 0). Blend (1.2, 0) → (1, 0).
        // Speed 5 (far): desired (5,0); from rest (5,0)/0.25 = (20,0) → clamp 10.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let mut s = scratch_for(a);
        let out = steer(a, &order(Vec2::new(20.0, 0.0)), &context(), &view, &mut s);
        assert_close(out.linear, Vec2::new(10.0, 0.0));
        assert_close(s.memory.last_avoid_dir, Vec2::new(0.2, 0.0));
        assert_close(s.memory.last_move_dir, Vec2::X);
        assert_eq!(s.events, 0);
        // At (18.5, 0) moving (4, 0): d 1.5 < slow 3 → speed 5·1.5/3 = 2.5; (2.5 − 4)/0.25 = −6.
        let w = world_with(vec![agent_at(1, Vec2::new(18.5, 0.0), Vec2::new(4.0, 0.0))]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let out = steer(a, &order(Vec2::new(20.0, 0.0)), &context(), &view, &mut scratch_for(a));
        assert_close(out.linear, Vec2::new(-6.0, 0.0));
    }

    #[test]
    fn stops_within_tolerance_when_slow_and_reports_once() {
        let w = world_with(vec![agent_at(1, Vec2::new(19.7, 0.0), Vec2::new(0.3, 0.0))]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let mut s = scratch_for(a);
        let out = steer(a, &order(Vec2::new(20.0, 0.0)), &context(), &view, &mut s);
        assert_eq!(out, Steering::ZERO);
        assert_eq!(s.events, EVENT_DESTINATION_REACHED);
        // Too fast inside the tolerance: keeps braking, no event. d 0.3 ≤ 0.5 → speed 0;
        // (0 − 2)/0.25 = −8.
        let w = world_with(vec![agent_at(1, Vec2::new(19.7, 0.0), Vec2::new(2.0, 0.0))]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let mut s = scratch_for(a);
        let out = steer(a, &order(Vec2::new(20.0, 0.0)), &context(), &view, &mut s);
        assert_close(out.linear, Vec2::new(-8.0, 0.0));
        assert_eq!(s.events, 0);
    }

    #[test]
    fn direction_threshold_keeps_small_turns_out() {
        // Last direction 2° off the new one (< 4°): the last is kept; 10° off: the new one wins.
        let mut a = agent_at(1, Vec2::ZERO, Vec2::ZERO);
        a.memory.last_move_dir = crate::sim::math::heading(2f32.to_radians());
        a.memory.last_avoid_dir = Vec2::X;
        let w = world_with(vec![a]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let mut s = scratch_for(a);
        steer(a, &order(Vec2::new(20.0, 0.0)), &context(), &view, &mut s);
        assert_close(s.memory.last_move_dir, crate::sim::math::heading(2f32.to_radians()));
        let mut b = agent_at(1, Vec2::ZERO, Vec2::ZERO);
        b.memory.last_move_dir = crate::sim::math::heading(10f32.to_radians());
        b.memory.last_avoid_dir = Vec2::X;
        let w = world_with(vec![b]);
        let view = w.view();
        let b = view.agent(1).unwrap();
        let mut s = scratch_for(b);
        steer(b, &order(Vec2::new(20.0, 0.0)), &context(), &view, &mut s);
        assert_close(s.memory.last_move_dir, Vec2::X);
    }

    #[test]
    fn reciprocal_mode_goes_straight_when_alone_and_yields_to_a_resting_agent() {
        // Alone, from rest, 20 away (beyond the slow radius): the preferred velocity is the
        // wanted direction at full speed, (5,0); nothing constrains it, and the steering takes
        // the agent there in one step: (5,0)/0.05 = (100,0).
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO)]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let mut s = scratch_for(a);
        let out = steer(a, &order(Vec2::new(20.0, 0.0)), &planning(), &view, &mut s);
        assert_close(out.linear, Vec2::new(100.0, 0.0));
        assert_close(s.memory.last_move_dir, Vec2::X);
        // Moving (3,0) with a resting agent at (4,0) (radius sum 1, τ 2): the preferred (5,0)
        // is projected onto the right leg of the cone, at asin(1/4) below the x axis:
        // 5·cos θ along (cos θ, −sin θ) = (5·15/16, −5·√15/16); steering = (that − (3,0))/0.05.
        let w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::new(3.0, 0.0)), agent_at(2, Vec2::new(4.0, 0.0), Vec2::ZERO)]);
        let view = w.view();
        let a = view.agent(1).unwrap();
        let mut s = scratch_for(a);
        let rp = ReciprocalAvoidanceParams { time_horizon: 2.0, ..ReciprocalAvoidanceParams::default() };
        let params = MoveToParams { reciprocal: Some(rp), ..planning() };
        let out = steer(a, &order(Vec2::new(20.0, 0.0)), &params, &view, &mut s);
        let v = Vec2::new(5.0 * 15.0 / 16.0, -5.0 * 15f32.sqrt() / 16.0);
        assert!((out.linear - (v - Vec2::new(3.0, 0.0)) / 0.05).length() < 0.05, "{}", out.linear);
    }

    #[test]
    fn staggered_plans_cover_every_agent_once_per_period_and_spread_evenly() {
        for every in 1..=MAX_REPLAN_EVERY_TICKS {
            // Any `every` consecutive ticks: each agent plans exactly once.
            for id in 0..200u32 {
                for start in [0u64, 1, 7, 1_000_003] {
                    let plans = (start..start + u64::from(every)).filter(|&t| plans_avoidance(id, t, every)).count();
                    assert_eq!(plans, 1, "id {id}, every {every}, from tick {start}");
                }
            }
            // A crowd of consecutive ids: each tick plans ⌊n/every⌋ or ⌈n/every⌉ of them.
            let n = 1000u32;
            for tick in 0..2 * u64::from(every) {
                let count = (1..=n).filter(|&id| plans_avoidance(id, tick, every)).count() as u32;
                assert!(count == n / every || count == n.div_ceil(every), "tick {tick}, every {every}: {count}");
            }
        }
    }

    #[test]
    fn only_an_agent_its_last_plan_vouched_for_coasts_between_plans() {
        let p = MoveToParams { replan_every_ticks: 3, ..MoveToParams::default() };
        // Agent 2 at tick 0, planning every 3 ticks: (0 + 2) % 3 ≠ 0, not a planning tick.
        // Its last plan vouched for it: it coasts — no steering (the integrator keeps its
        // velocity), not even towards its stop point — and skips the contact test.
        let mut a = agent_at(2, Vec2::ZERO, Vec2::new(0.0, 1.0));
        a.memory.avoid_clear = true;
        let w = world_with(vec![a]);
        let view = w.view();
        let a = view.agent(2).unwrap();
        let mut s = scratch_for(a);
        assert_eq!(steer(a, &order(Vec2::new(20.0, 0.0)), &p, &view, &mut s), Steering::ZERO);
        assert_eq!(s.events, reciprocal_avoidance::NO_CONTACT);
        // Without that, it plans on any tick: from (0, 1) to the preferred (5, 0) in one step.
        let w = world_with(vec![agent_at(2, Vec2::ZERO, Vec2::new(0.0, 1.0))]);
        let view = w.view();
        let b = view.agent(2).unwrap();
        let mut s = scratch_for(b);
        let out = steer(b, &order(Vec2::new(20.0, 0.0)), &p, &view, &mut s);
        assert_close(out.linear, Vec2::new(100.0, -20.0));
        // Alone, the plan vouches for the ticks until the next: nothing within reach.
        assert!(s.memory.avoid_clear);
        assert_eq!(s.events, reciprocal_avoidance::NO_CONTACT);
        // A neighbour 2.4 away (gap 1.4; both at top speed 5 close 0.5 a tick) could touch it
        // within 3 ticks: the plan does not vouch, and the agent plans again next tick.
        let w = world_with(vec![agent_at(2, Vec2::ZERO, Vec2::new(0.0, 1.0)), agent_at(9, Vec2::new(0.0, -2.4), Vec2::ZERO)]);
        let view = w.view();
        let c = view.agent(2).unwrap();
        let mut s = scratch_for(c);
        steer(c, &order(Vec2::new(20.0, 0.0)), &p, &view, &mut s);
        assert!(!s.memory.avoid_clear);
        assert_eq!(s.events, 0);
        // Inside the slow radius it plans every tick, vouched for or not: 1.5 from its stop
        // point at (1.5, 0), speed 5·1.5/3 = 2.5, from (0, 1): ((2.5, 0) − (0, 1))/0.05.
        let mut d = agent_at(2, Vec2::ZERO, Vec2::new(0.0, 1.0));
        d.memory.avoid_clear = true;
        let w = world_with(vec![d]);
        let view = w.view();
        let d = view.agent(2).unwrap();
        let mut s = scratch_for(d);
        let out = steer(d, &order(Vec2::new(1.5, 0.0)), &p, &view, &mut s);
        assert_close(out.linear, Vec2::new(50.0, -20.0));
        // Arrival is checked on every tick, planning tick or not.
        let mut e = agent_at(2, Vec2::new(19.7, 0.0), Vec2::new(0.3, 0.0));
        e.memory.avoid_clear = true;
        let w = world_with(vec![e]);
        let view = w.view();
        let e = view.agent(2).unwrap();
        let mut s = scratch_for(e);
        assert_eq!(steer(e, &order(Vec2::new(20.0, 0.0)), &p, &view, &mut s), Steering::ZERO);
        assert_eq!(s.events, EVENT_DESTINATION_REACHED);
    }

    #[test]
    fn a_plan_vouches_for_clearance_only_over_the_ticks_until_the_next() {
        // Agents 3 (at the origin) and 4 (5.6 away, both at rest, radius 0.5, top speed 5,
        // dt 0.05): one step closes at most 2·0.25 = 0.5 of the 4.6 gap, so a plan every tick
        // vouches for the step; over 10 steps the two could close 5 > 4.6, so a plan every 10
        // ticks does not.
        let w = world_with(vec![agent_at(3, Vec2::ZERO, Vec2::ZERO), agent_at(4, Vec2::new(5.6, 0.0), Vec2::ZERO)]);
        let view = w.view();
        let a = view.agent(3).unwrap();
        let rp = ReciprocalAvoidanceParams::default();
        let (_, clear) = reciprocal_avoidance::velocity_passing(a, &rp, &view, Vec2::X, Passing::NONE);
        assert!(clear);
        let (_, clear) = reciprocal_avoidance::velocity_passing(a, &rp, &view, Vec2::X, Passing { plan_steps: 10, ..Passing::NONE });
        assert!(!clear);
    }

    #[test]
    fn a_stalled_agent_gives_up_only_once_its_whole_knot_is_stalled() {
        // give_up_after 3 s = 60 ticks; agent 20 has made no progress for 100 ticks and looks at
        // its knot on tick 0 ((0 + 20) % 20 = 0). Radius 0.5: agents whose gap is under 0.5 are
        // of one knot.
        let p = MoveToParams { give_up_after: 3.0, ..planning() };
        let on_way = |id: u32, x: f32, stall: u32| {
            let mut a = agent_at(id, Vec2::new(x, 0.0), Vec2::ZERO);
            a.order = Some(Box::new(MoveOrder { stall, ..order(Vec2::new(x, 50.0)) }));
            a
        };
        let gives_up = |agents: Vec<Agent>, wall: Option<f32>| {
            let mut w = world_with(agents);
            if let Some(x) = wall {
                w.add_wall(Vec2::new(x, -5.0), Vec2::new(x, 5.0)).expect("wall");
                w.rebuild_indexes();
            }
            let view = w.view();
            let a = view.agent(20).expect("agent 20");
            let mut s = scratch_for(a);
            steer(a, a.active_order().expect("order"), &p, &view, &mut s);
            s.events & EVENT_GAVE_UP != 0
        };
        // Alone: it gives up.
        assert!(gives_up(vec![on_way(20, 0.0, 100)], None));
        // Touching (gap 0.2) an agent on its way that progressed 1 s ago: it waits its turn.
        assert!(!gives_up(vec![on_way(20, 0.0, 100), on_way(2, 1.2, 20)], None));
        // The progress is two agents away, through a stalled one: still its knot.
        assert!(!gives_up(vec![on_way(20, 0.0, 100), on_way(2, 1.2, 100), on_way(3, 2.4, 20)], None));
        // Every member stalled for 3 s or more: the knot is stuck, it gives up.
        assert!(gives_up(vec![on_way(20, 0.0, 100), on_way(2, 1.2, 100), on_way(3, 2.4, 60)], None));
        // Progress beyond the knot (gap 1.0), behind a wall, or of an agent holding its place
        // after its order does not count.
        assert!(gives_up(vec![on_way(20, 0.0, 100), on_way(2, 2.0, 0)], None));
        assert!(gives_up(vec![on_way(20, 0.0, 100), on_way(2, 1.2, 0)], Some(0.6)));
        let mut holder = on_way(2, 1.2, 0);
        holder.order.as_mut().expect("order").done = true;
        assert!(gives_up(vec![on_way(20, 0.0, 100), holder], None));
        // Walking towards its stop point at half its top speed or more (carried back by a
        // crowd, it walks that ground again): it goes on; slower, it gives up.
        let walking = |vy: f32| {
            let mut a = on_way(20, 0.0, 100);
            a.velocity = Vec2::new(1.0, vy);
            a
        };
        assert!(!gives_up(vec![walking(2.5)], None));
        assert!(gives_up(vec![walking(2.4)], None));
        // Between its looks (one a second) it does not give up: agent 21 on tick 0 goes on.
        let mut w = world_with(vec![on_way(21, 0.0, 100)]);
        w.rebuild_indexes();
        let view = w.view();
        let a = view.agent(21).expect("agent 21");
        let mut s = scratch_for(a);
        steer(a, a.active_order().expect("order"), &p, &view, &mut s);
        assert_eq!(s.events & EVENT_GAVE_UP, 0);
    }

    #[test]
    fn replan_period_is_validated() {
        for bad in [0, MAX_REPLAN_EVERY_TICKS + 1] {
            let p = MoveToParams { replan_every_ticks: bad, ..MoveToParams::default() };
            assert!(p.validate().unwrap_err().to_string().contains("replan_every_ticks"));
        }
        assert!(MoveToParams { replan_every_ticks: MAX_REPLAN_EVERY_TICKS, ..MoveToParams::default() }.validate().is_ok());
    }
}
