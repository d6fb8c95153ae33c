//! A world's saved form: [`World::save`] writes every bit of state that decides its future
//! steps, and [`World::load`] builds a world that continues bit-identically (the same states
//! and events at every later step, given the same commands, on any number of threads).
//!
//! The bytes: `STEERWLD`, the format version (a varint), then the sections in this order —
//! settings, counters (tick, random stream, next ids, events dropped, agent extent), groups,
//! obstacles, walls, the distinct behaviour sets, the agents in storage order (each naming its
//! set), the pending events, and the navigation state (`nav/save.rs`). Values use the command
//! codec (`sim::codec`: varints, exact float bits, length-prefixed strings and lists).
//!
//! What is not saved is computed again to the same values, as [`World::fork`] does: the agent
//! grid and the static index (rebuilt from the agents, obstacles and walls; the tick rebuilds
//! the grid first anyway), the compute and contact buffers, and the navigation caches.
//!
//! **Invariant:** loading never panics, and a loaded world steps without panicking: every
//! length is bounded, every float is finite (a MoveTo's best distance may be +∞: "none yet"),
//! every setting, limit and behaviour is validated as a command's would be, ids are unique and
//! below their counters, and every index (group, behaviour set, nav cell, flow-field goal cell)
//! is in range. The error names what is wrong and the byte offset.

use super::*;
use crate::sim::agent::{MoveOrder, PortalTurn};
use crate::sim::behaviors::context_avoidance::ContextAvoidanceParams;
use crate::sim::bytes::{Dec, DecodeError, Enc};
use crate::sim::codec;

/// First 8 bytes of a saved world.
pub const SAVE_MAGIC: &[u8; 8] = b"STEERWLD";
/// Version of the saved form (bump on any change to what is written). Version 1 (without the
/// contact budget, which then takes its default) is still read.
pub const SAVE_VERSION: u64 = 2;

impl World {
    /// The world's saved form (see the module docs); [`World::load`] reads it.
    pub fn save(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.buf.extend_from_slice(SAVE_MAGIC);
        e.u64(SAVE_VERSION);
        save_config(&mut e, &self.config);
        e.u64(self.tick);
        e.fixed64(self.rng.state());
        e.u64(u64::from(self.next_agent_id));
        e.u64(u64::from(self.next_static_id));
        e.u64(self.max_pending_events as u64);
        e.u64(self.events_dropped);
        e.f32(self.extent.0);
        e.f32(self.extent.1);
        e.u64(self.contact.rounds_max as u64);
        e.u64(self.contact.deep_pairs_per_pair as u64);
        e.u64(self.contact.deep_pairs_min as u64);
        e.u64(self.groups.len() as u64);
        for g in &self.groups {
            e.str(g);
        }
        e.u64(self.obstacles.len() as u64);
        for &Obstacle { id, center, radius } in &self.obstacles {
            e.u64(u64::from(id));
            e.vec2(center);
            e.f32(radius);
        }
        e.u64(self.walls.len() as u64);
        for &Wall { id, a, b, normal } in &self.walls {
            e.u64(u64::from(id));
            e.vec2(a);
            e.vec2(b);
            e.vec2(normal);
        }
        // Behaviour sets: agents spawned together share one (copy on write), so each distinct
        // set is written once and agents name it by index; the sharing is restored on load.
        let agents = self.agents.storage();
        let mut set_of: Vec<u32> = Vec::with_capacity(agents.len());
        let mut sets: Vec<&Arc<BehaviorSet>> = Vec::new();
        let mut index: std::collections::HashMap<usize, u32> = std::collections::HashMap::new();
        for a in agents {
            let k = *index.entry(Arc::as_ptr(&a.behaviors) as usize).or_insert_with(|| {
                sets.push(&a.behaviors);
                (sets.len() - 1) as u32
            });
            set_of.push(k);
        }
        e.u64(sets.len() as u64);
        for s in &sets {
            e.u64(s.entries().len() as u64);
            for en in s.entries() {
                codec::entry(&mut e, en);
            }
        }
        e.u64(agents.len() as u64);
        for (a, &k) in agents.iter().zip(&set_of) {
            save_agent(&mut e, a, k);
        }
        e.u64(self.events.len() as u64);
        for ev in &self.events {
            save_event(&mut e, ev);
        }
        match &self.nav {
            None => e.u8(0),
            Some(nav) => {
                e.u8(1);
                nav.save(&mut e);
            }
        }
        e.buf
    }

    /// A world from its saved form ([`World::save`]). Bad bytes give an error naming what is
    /// wrong and the byte offset; nothing panics.
    pub fn load(bytes: &[u8]) -> Result<World, SimError> {
        let mut d = Dec::new(bytes);
        let w = load_world(&mut d).map_err(|e| SimError::invalid("world", e.to_string()))?;
        if !d.done() {
            return Err(SimError::invalid("world", format!("{} bytes after the end of the saved world", bytes.len() - d.pos())));
        }
        Ok(w)
    }
}

fn load_world(d: &mut Dec) -> Result<World, DecodeError> {
    let magic = d.bytes(8)?;
    if magic != SAVE_MAGIC {
        return Err(d.err("not a saved steerd world (bad magic)"));
    }
    let version = d.u64()?;
    if !(1..=SAVE_VERSION).contains(&version) {
        return Err(d.err(format!("saved world version {version} is not supported (this build reads 1 to {SAVE_VERSION})")));
    }
    let config = load_config(d)?;
    let mut w = World::new(config).map_err(|e| d.err(e.to_string()))?;
    load_counters(d, &mut w, version)?;
    load_groups(d, &mut w)?;
    load_statics(d, &mut w)?;
    load_agents(d, &mut w)?;
    load_events(d, &mut w)?;
    load_nav(d, &mut w)?;
    w.rebuild_grid();
    Ok(w)
}

/// The tick, RNG, id counters, event bound, agent extent and contact budget (rounds; deep pairs from version 2).
fn load_counters(d: &mut Dec, w: &mut World, version: u64) -> Result<(), DecodeError> {
    w.tick = d.u64()?;
    w.rng = Rng::from_state(d.fixed64()?);
    w.next_agent_id = d.u32()?;
    w.next_static_id = d.u32()?;
    w.max_pending_events = usize::try_from(d.u64()?).ok().filter(|&n| n <= MAX_PENDING_EVENTS).ok_or_else(|| d.err("max_pending_events is too large"))?;
    w.events_dropped = d.u64()?;
    let (r, s) = (d.f32()?, d.f32()?);
    if !(r.is_finite() && s.is_finite() && r >= 0.0 && s >= 0.0) {
        return Err(d.err("agent extent must be finite and non-negative"));
    }
    w.extent = (r, s);
    w.contact.rounds_max = usize::try_from(d.u64()?).ok().filter(|&n| n <= CONTACT_ROUNDS_MAX).ok_or_else(|| d.err(format!("contact rounds above {CONTACT_ROUNDS_MAX}")))?;
    if version >= 2 {
        let mut count = |what: &str| usize::try_from(d.u64()?).ok().filter(|&n| n <= MAX_CONTACT_BUDGET).ok_or_else(|| d.err(format!("{what} above {MAX_CONTACT_BUDGET}")));
        w.contact.deep_pairs_per_pair = count("contact deep_pairs_per_pair")?;
        w.contact.deep_pairs_min = count("contact deep_pairs_min")?;
    }
    Ok(())
}

/// The group names (unique, 1 to 64 bytes).
fn load_groups(d: &mut Dec, w: &mut World) -> Result<(), DecodeError> {
    let n = d.list_len()?;
    if n > usize::from(u16::MAX) {
        return Err(d.err("too many groups"));
    }
    for _ in 0..n {
        let g = d.string()?;
        if g.is_empty() || g.len() > 64 || w.groups.contains(&g) {
            return Err(d.err(format!("group name `{g}` is empty, longer than 64 bytes or repeated")));
        }
        w.groups.push(g);
    }
    Ok(())
}

/// Obstacles and walls (ids unique and below the next id), then their index.
fn load_statics(d: &mut Dec, w: &mut World) -> Result<(), DecodeError> {
    let mut ids = std::collections::BTreeSet::new();
    let mut static_id = |d: &Dec, id: u32, next: u32| {
        if id == 0 || id >= next || !ids.insert(id) {
            Err(d.err(format!("obstacle or wall id {id} is repeated or not below the next id {next}")))
        } else {
            Ok(id)
        }
    };
    let n = d.list_len()?;
    if n > w.config.max_obstacles {
        return Err(d.err(format!("{n} obstacles, more than max_obstacles")));
    }
    for _ in 0..n {
        let id = d.u32()?;
        let id = static_id(d, id, w.next_static_id)?;
        let center = checked_vec(d, "obstacle center")?;
        let radius = d.f32()?;
        check_positive("radius", radius).map_err(|e| d.err(format!("obstacle {id}: {e}")))?;
        w.obstacles.push(Obstacle { id, center, radius });
    }
    let n = d.list_len()?;
    if n > w.config.max_walls {
        return Err(d.err(format!("{n} walls, more than max_walls")));
    }
    for _ in 0..n {
        let id = d.u32()?;
        let id = static_id(d, id, w.next_static_id)?;
        let (a, b) = (checked_vec(d, "wall end a")?, checked_vec(d, "wall end b")?);
        let normal = checked_vec(d, "wall normal")?;
        if a.distance_squared(b) < 1e-8 {
            return Err(d.err(format!("wall {id} has two equal end points")));
        }
        w.walls.push(Wall { id, a, b, normal });
    }
    w.statics = StaticIndex::build(w.config.bounds, w.config.static_cell_size, &w.obstacles, &w.walls);
    Ok(())
}

/// The shared behaviour sets, then the agents (ids unique; behaviour targets exist).
fn load_agents(d: &mut Dec, w: &mut World) -> Result<(), DecodeError> {
    let n = d.list_len()?;
    let mut sets: Vec<Arc<BehaviorSet>> = Vec::with_capacity(n.min(1024));
    for i in 0..n {
        let entries = d.list(codec::decode_entry)?;
        let set = BehaviorSet::new(entries).map_err(|e| d.err(format!("behaviour set {i}: {}", e.within("behaviors"))))?;
        sets.push(Arc::new(set));
    }
    let n = d.list_len()?;
    if n > w.config.max_agents {
        return Err(d.err(format!("{n} agents, more than max_agents ({})", w.config.max_agents)));
    }
    let mut agents = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        agents.push(load_agent(d, &sets, w.groups.len(), w.next_agent_id)?);
    }
    w.agents = Roster::from_storage(agents).ok_or_else(|| d.err("two agents share an id"))?;
    // Behaviour targets name agents that exist (as the commands check).
    for a in w.agents.storage() {
        for en in a.behaviors.entries() {
            if let Some(t) = en.behavior.target_agent().filter(|&t| w.agents.get(t).is_none()) {
                return Err(d.err(format!("agent {}: a behaviour targets agent {t}, which does not exist", a.id)));
            }
        }
    }
    Ok(())
}

/// Events not drained yet (at most `max_pending_events`).
fn load_events(d: &mut Dec, w: &mut World) -> Result<(), DecodeError> {
    let n = d.list_len()?;
    if n > w.max_pending_events {
        return Err(d.err("more pending events than max_pending_events"));
    }
    for _ in 0..n {
        let ev = load_event(d, w.groups.len())?;
        w.events.push(ev);
    }
    Ok(())
}

/// The navigation state, if the world has one (it must when agents have MoveTo orders), and
/// every order's goal cell on its grid.
fn load_nav(d: &mut Dec, w: &mut World) -> Result<(), DecodeError> {
    let orders = w.agents.storage().iter().filter(|a| a.order.is_some()).count();
    w.nav = if d.bool()? {
        let c = &w.config;
        let max_fields = c.flow_cache_capacity + orders;
        Some(NavState::load(d, c.nav_shape(), max_fields)?)
    } else {
        None
    };
    match &w.nav {
        Some(nav) => {
            let cells = nav.grid.len();
            if let Some(a) = w.agents.storage().iter().find(|a| a.order.as_ref().is_some_and(|o| o.goal_cell as usize >= cells)) {
                return Err(d.err(format!("agent {}: its MoveTo goal cell is off the nav grid", a.id)));
            }
        }
        None if orders > 0 => return Err(d.err("agents have MoveTo orders but the world has no navigation state")),
        None => {}
    }
    Ok(())
}

/// Most pending events a world may be set to keep.
const MAX_PENDING_EVENTS: usize = 1 << 24;
/// Most a saved contact budget count may be.
const MAX_CONTACT_BUDGET: usize = u32::MAX as usize;

fn checked_vec(d: &mut Dec, what: &str) -> Result<Vec2, DecodeError> {
    let v = d.vec2()?;
    check_vec(what, v).map_err(|e| d.err(e.to_string()))
}

fn checked_f32(d: &mut Dec, what: &str) -> Result<f32, DecodeError> {
    let v = d.f32()?;
    check_finite(what, v).map_err(|e| d.err(e.to_string()))
}

fn save_config(e: &mut Enc, c: &WorldConfig) {
    let WorldConfig {
        bounds,
        edge,
        tick_rate,
        seed,
        agent_cell_size,
        static_cell_size,
        solid_obstacles,
        solid_agents,
        brute_force_neighbors,
        max_agents,
        max_obstacles,
        max_walls,
        max_spawn,
        nav_cell_size,
        nav_clearance,
        flow_cache_capacity,
        flow_builds_per_tick,
        flow_build_ticks,
        flow_build_cells_per_tick,
        move_to,
    } = c;
    e.vec2(bounds.min);
    e.vec2(bounds.max);
    e.u8(match edge {
        EdgeRule::Clamp => 0,
        EdgeRule::Wrap => 1,
        EdgeRule::Bounce => 2,
    });
    e.f32(*tick_rate);
    e.fixed64(*seed);
    e.opt_f32(*agent_cell_size);
    e.f32(*static_cell_size);
    e.u8(u8::from(*solid_obstacles) | (u8::from(*solid_agents) << 1) | (u8::from(*brute_force_neighbors) << 2));
    for v in [*max_agents, *max_obstacles, *max_walls, *max_spawn] {
        e.u64(v as u64);
    }
    e.f32(*nav_cell_size);
    e.f32(*nav_clearance);
    e.u64(*flow_cache_capacity as u64);
    e.u64(*flow_builds_per_tick as u64);
    e.u64(u64::from(*flow_build_ticks));
    e.u64(u64::from(*flow_build_cells_per_tick));
    let MoveToParams {
        avoid_strength,
        separation_weight,
        separation_radius,
        direction_threshold,
        slow_radius,
        time_to_target,
        arrive_speed,
        context,
        reciprocal,
        straight_line_max_agents,
        passing_angle,
        give_up_after,
        portal_radii,
        portal_turn,
        replan_every_ticks,
    } = move_to;
    for v in [*avoid_strength, *separation_weight] {
        e.f32(v);
    }
    e.opt_f32(*separation_radius);
    for v in [*direction_threshold, *slow_radius, *time_to_target, *arrive_speed] {
        e.f32(v);
    }
    let ContextAvoidanceParams { samples, cast_radius, cast_distance, smoothing } = *context;
    e.u64(u64::from(samples));
    e.opt_f32(cast_radius);
    e.f32(cast_distance);
    e.f32(smoothing);
    match reciprocal {
        None => e.u8(0),
        Some(r) => {
            e.u8(1);
            codec::behavior(e, &Behavior::ReciprocalAvoidance(*r));
        }
    }
    e.u64(u64::from(*straight_line_max_agents));
    for v in [*passing_angle, *give_up_after, *portal_radii, *portal_turn] {
        e.f32(v);
    }
    e.u64(u64::from(*replan_every_ticks));
}

fn load_config(d: &mut Dec) -> Result<WorldConfig, DecodeError> {
    let bounds = Bounds { min: d.vec2()?, max: d.vec2()? };
    let edge = match d.u8()? {
        0 => EdgeRule::Clamp,
        1 => EdgeRule::Wrap,
        2 => EdgeRule::Bounce,
        t => return Err(d.err(format!("edge rule {t}"))),
    };
    let tick_rate = d.f32()?;
    let seed = d.fixed64()?;
    let agent_cell_size = d.opt_f32()?;
    let static_cell_size = d.f32()?;
    let flags = d.u8()?;
    if flags > 7 {
        return Err(d.err(format!("settings flags {flags}")));
    }
    let mut size = || usize::try_from(d.u64()?).map_err(|_| d.err("count does not fit"));
    let (max_agents, max_obstacles, max_walls, max_spawn) = (size()?, size()?, size()?, size()?);
    let nav_cell_size = d.f32()?;
    let nav_clearance = d.f32()?;
    let flow_cache_capacity = usize::try_from(d.u64()?).map_err(|_| d.err("flow_cache_capacity"))?;
    let flow_builds_per_tick = usize::try_from(d.u64()?).map_err(|_| d.err("flow_builds_per_tick"))?;
    let flow_build_ticks = d.u32()?;
    let flow_build_cells_per_tick = d.u32()?;
    let avoid_strength = d.f32()?;
    let separation_weight = d.f32()?;
    let separation_radius = d.opt_f32()?;
    let (direction_threshold, slow_radius, time_to_target, arrive_speed) = (d.f32()?, d.f32()?, d.f32()?, d.f32()?);
    let context = ContextAvoidanceParams { samples: d.u32()?, cast_radius: d.opt_f32()?, cast_distance: d.f32()?, smoothing: d.f32()? };
    let reciprocal = if d.bool()? {
        match codec::decode_behavior(d)? {
            Behavior::ReciprocalAvoidance(r) => Some(r),
            _ => return Err(d.err("move_to.reciprocal is not reciprocal-avoidance parameters")),
        }
    } else {
        None
    };
    let straight_line_max_agents = d.u32()?;
    let (passing_angle, give_up_after, portal_radii, portal_turn) = (d.f32()?, d.f32()?, d.f32()?, d.f32()?);
    let replan_every_ticks = d.u32()?;
    let move_to = MoveToParams {
        avoid_strength,
        separation_weight,
        separation_radius,
        direction_threshold,
        slow_radius,
        time_to_target,
        arrive_speed,
        context,
        reciprocal,
        straight_line_max_agents,
        passing_angle,
        give_up_after,
        portal_radii,
        portal_turn,
        replan_every_ticks,
    };
    let c = WorldConfig {
        bounds,
        edge,
        tick_rate,
        seed,
        agent_cell_size,
        static_cell_size,
        solid_obstacles: flags & 1 != 0,
        solid_agents: flags & 2 != 0,
        brute_force_neighbors: flags & 4 != 0,
        max_agents,
        max_obstacles,
        max_walls,
        max_spawn,
        nav_cell_size,
        nav_clearance,
        flow_cache_capacity,
        flow_builds_per_tick,
        flow_build_ticks,
        flow_build_cells_per_tick,
        move_to,
    };
    c.validate().map_err(|e| d.err(format!("settings: {e}")))?;
    Ok(c)
}

fn save_agent(e: &mut Enc, a: &Agent, set: u32) {
    let Agent { id, group, position, velocity, orientation, angular_velocity, limits, behaviors: _, memory, order } = a;
    e.u64(u64::from(*id));
    e.u64(u64::from(*group));
    e.vec2(*position);
    e.vec2(*velocity);
    e.f32(*orientation);
    e.f32(*angular_velocity);
    codec::limits(e, limits);
    e.u64(u64::from(set));
    let AgentMemory { wander_angle, random_target, random_target_until, last_avoid_dir, last_move_dir, path_index, path_step, path_done, avoid_clear } = *memory;
    e.f32(wander_angle);
    e.opt_vec2(random_target);
    e.f32(random_target_until);
    e.vec2(last_avoid_dir);
    e.vec2(last_move_dir);
    e.u64(u64::from(path_index));
    e.u8(path_step as u8);
    e.u8(u8::from(path_done) | (u8::from(avoid_clear) << 1));
    match order.as_deref() {
        None => e.u8(0),
        Some(o) => {
            e.u8(1);
            save_order(e, o);
        }
    }
}

fn load_agent(d: &mut Dec, sets: &[Arc<BehaviorSet>], groups: usize, next_id: u32) -> Result<Agent, DecodeError> {
    let id = d.u32()?;
    if id == 0 || id >= next_id {
        return Err(d.err(format!("agent id {id} is not below the next id {next_id}")));
    }
    let at = |d: &Dec, what: String| d.err(format!("agent {id}: {what}"));
    let group = u16::try_from(d.u64()?).ok().filter(|&g| usize::from(g) < groups).ok_or_else(|| at(d, "group out of range".into()))?;
    let position = checked_vec(d, "position")?;
    let velocity = checked_vec(d, "velocity")?;
    let orientation = checked_f32(d, "orientation")?;
    let angular_velocity = checked_f32(d, "angular_velocity")?;
    let limits = codec::decode_limits(d)?.validated().map_err(|e| at(d, e.to_string()))?;
    let set = usize::try_from(d.u64()?).ok().and_then(|k| sets.get(k)).ok_or_else(|| at(d, "behaviour set out of range".into()))?;
    let wander_angle = checked_f32(d, "wander_angle")?;
    let random_target = match d.opt_vec2()? {
        Some(p) => Some(check_vec("random_target", p).map_err(|e| at(d, e.to_string()))?),
        None => None,
    };
    let random_target_until = d.f32()?;
    if !random_target_until.is_finite() {
        return Err(at(d, "random_target_until is not finite".into()));
    }
    let last_avoid_dir = checked_vec(d, "last_avoid_dir")?;
    let last_move_dir = checked_vec(d, "last_move_dir")?;
    let path_index = d.u32()?;
    let path_step = d.u8()? as i8;
    let flags = d.u8()?;
    if flags > 3 {
        return Err(at(d, format!("memory flags {flags}")));
    }
    let memory = AgentMemory {
        wander_angle,
        random_target,
        random_target_until,
        last_avoid_dir,
        last_move_dir,
        path_index,
        path_step,
        path_done: flags & 1 != 0,
        avoid_clear: flags & 2 != 0,
    };
    let order = if d.bool()? { Some(Box::new(load_order(d).map_err(|e| at(d, e.to_string()))?)) } else { None };
    Ok(Agent { id, group, position, velocity, orientation, angular_velocity, limits, behaviors: set.clone(), memory, order })
}

fn save_order(e: &mut Enc, o: &MoveOrder) {
    let MoveOrder {
        target,
        goal,
        goal_cell,
        formation,
        slot,
        stop_point,
        claim_radius,
        tolerance,
        stopping_distance,
        unreachable,
        done,
        reported,
        gave_up,
        short_by,
        best,
        stall,
        sight,
        portal,
    } = *o;
    e.vec2(target);
    e.vec2(goal);
    e.u64(u64::from(goal_cell));
    e.u64(u64::from(formation));
    match slot {
        None => e.u8(0),
        Some(s) => {
            e.u8(1);
            e.u64(u64::from(s));
        }
    }
    e.vec2(stop_point);
    for v in [claim_radius, tolerance, stopping_distance] {
        e.f32(v);
    }
    e.u8(u8::from(unreachable) | (u8::from(done) << 1) | (u8::from(reported) << 2) | (u8::from(gave_up) << 3));
    e.f32(short_by);
    e.f32(best);
    e.u64(u64::from(stall));
    match sight {
        None => e.u8(0),
        Some((v, c)) => {
            e.u8(1);
            e.u64(v);
            e.u64(u64::from(c));
        }
    }
    match portal {
        None => e.u8(0),
        Some(PortalTurn { center, clear, wait }) => {
            e.u8(1);
            e.vec2(center);
            e.f32(clear);
            e.u8(u8::from(wait));
        }
    }
}

fn load_order(d: &mut Dec) -> Result<MoveOrder, DecodeError> {
    let target = checked_vec(d, "order.target")?;
    let goal = checked_vec(d, "order.goal")?;
    let goal_cell = d.u32()?;
    let formation = d.u32()?;
    let slot = if d.bool()? { Some(d.u32()?) } else { None };
    let stop_point = checked_vec(d, "order.stop_point")?;
    let claim_radius = checked_f32(d, "order.claim_radius")?;
    let tolerance = checked_f32(d, "order.tolerance")?;
    let stopping_distance = checked_f32(d, "order.stopping_distance")?;
    let flags = d.u8()?;
    if flags > 15 {
        return Err(d.err(format!("order flags {flags}")));
    }
    let short_by = checked_f32(d, "order.short_by")?;
    // "No best distance yet" is +∞.
    let best = d.f32()?;
    if best.is_nan() || best < 0.0 {
        return Err(d.err("order.best must be a non-negative number or +∞"));
    }
    let stall = d.u32()?;
    let sight = if d.bool()? { Some((d.u64()?, d.u32()?)) } else { None };
    let portal = if d.bool()? { Some(PortalTurn { center: checked_vec(d, "order.portal.center")?, clear: checked_f32(d, "order.portal.clear")?, wait: d.bool()? }) } else { None };
    Ok(MoveOrder {
        target,
        goal,
        goal_cell,
        formation,
        slot,
        stop_point,
        claim_radius,
        tolerance,
        stopping_distance,
        unreachable: flags & 1 != 0,
        done: flags & 2 != 0,
        reported: flags & 4 != 0,
        gave_up: flags & 8 != 0,
        short_by,
        best,
        stall,
        sight,
        portal,
    })
}

fn save_event(e: &mut Enc, ev: &Event) {
    match ev {
        Event::Spawned { id, group } => {
            e.u8(0);
            e.u64(u64::from(*id));
            e.u64(u64::from(*group));
        }
        Event::Despawned { id } => {
            e.u8(1);
            e.u64(u64::from(*id));
        }
        Event::DestinationReached { id, position, unreachable, gave_up, short_by } => {
            e.u8(2);
            e.u64(u64::from(*id));
            e.vec2(*position);
            e.u8(u8::from(*unreachable) | (u8::from(*gave_up) << 1));
            e.f32(*short_by);
        }
        Event::PathCompleted { id } => {
            e.u8(3);
            e.u64(u64::from(*id));
        }
    }
}

fn load_event(d: &mut Dec, groups: usize) -> Result<Event, DecodeError> {
    Ok(match d.u8()? {
        0 => {
            let id = d.u32()?;
            let group = u16::try_from(d.u64()?).ok().filter(|&g| usize::from(g) < groups).ok_or_else(|| d.err("event group out of range"))?;
            Event::Spawned { id, group }
        }
        1 => Event::Despawned { id: d.u32()? },
        2 => {
            let id = d.u32()?;
            let position = checked_vec(d, "event position")?;
            let flags = d.u8()?;
            if flags > 3 {
                return Err(d.err(format!("event flags {flags}")));
            }
            Event::DestinationReached { id, position, unreachable: flags & 1 != 0, gave_up: flags & 2 != 0, short_by: checked_f32(d, "event short_by")? }
        }
        3 => Event::PathCompleted { id: d.u32()? },
        t => return Err(d.err(format!("unknown event tag {t}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use crate::sim::hash::{exact_hash, state_hash};
    use proptest::prelude::*;

    fn scenarios() -> Vec<(String, Scenario)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(&dir) else { panic!("{}: cannot list", dir.display()) };
        let mut paths: Vec<_> = rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
        paths.sort();
        for p in paths {
            match Scenario::from_file(&p) {
                Ok(s) => out.push((p.display().to_string(), s)),
                Err(e) => panic!("{}: {e}", p.display()),
            }
        }
        assert!(out.len() >= 10, "the shipped scenarios are found");
        out
    }

    fn step(sc: &Scenario, w: &mut World) {
        if let Err(e) = sc.apply_orders(w, w.tick()) {
            panic!("orders: {e}");
        }
        w.step();
    }

    fn reload(w: &World) -> World {
        let bytes = w.save();
        match World::load(&bytes) {
            Ok(l) => {
                assert_eq!(l.save(), bytes, "saving a loaded world gives the same bytes");
                l
            }
            Err(e) => panic!("load: {e}"),
        }
    }

    fn same(name: &str, a: &World, b: &World) {
        assert_eq!(a.tick(), b.tick(), "{name}");
        assert_eq!(state_hash(a), state_hash(b), "{name}: state_hash at tick {}", a.tick());
        assert_eq!(exact_hash(a), exact_hash(b), "{name}: exact_hash at tick {}", a.tick());
    }

    /// Every shipped scenario: run, save, load, and the loaded world goes on bit-identically
    /// (state and events at every tick) — saved right after its orders (fields requested, not
    /// yet built) and again mid-run, on 1 and 2 threads.
    #[test]
    fn every_scenario_continues_bit_identically_after_save_and_load() {
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            pool.install(|| {
                for (name, sc) in scenarios() {
                    let big = sc.groups.iter().map(|g| g.agent_count()).sum::<usize>() > 2000;
                    let (first, mid, end) = if big { (2, 12, 20) } else { (2, 60, 120) };
                    let mut w = sc.build().unwrap_or_else(|e| panic!("{name}: {e}"));
                    while w.tick() < first {
                        step(&sc, &mut w);
                    }
                    let mut l = reload(&w);
                    same(&name, &w, &l);
                    while w.tick() < end {
                        step(&sc, &mut w);
                        step(&sc, &mut l);
                        same(&name, &w, &l);
                        assert_eq!(w.drain_events(), l.drain_events(), "{name}: events at tick {}", w.tick());
                        if w.tick() == mid {
                            l = reload(&l);
                        }
                    }
                }
            });
        }
    }

    /// Commands after a load (obstacles moved and added, walls, orders) act as on the original,
    /// including a save taken while obstacle changes wait to be rasterized.
    #[test]
    fn commands_after_a_load_act_as_on_the_original() {
        let sc = scenarios().into_iter().find(|(n, _)| n.ends_with("maze-moveto.json")).map(|x| x.1).expect("maze-moveto");
        let mut w = sc.build().expect("build");
        for _ in 0..30 {
            step(&sc, &mut w);
        }
        let ids: Vec<u32> = w.agents().iter().map(|a| a.id).take(20).collect();
        let b = w.config().bounds;
        let c = (b.min + b.max) * 0.5;
        // Changed statics not yet applied to the navigation grid when saved.
        w.apply(Command::AddObstacle { center: c + Vec2::new(3.0, 2.0), radius: 1.5 }).expect("obstacle");
        let mut l = reload(&w);
        for (k, world) in [&mut w, &mut l].into_iter().enumerate() {
            world.apply(Command::AddWall { a: c + Vec2::new(-4.0, -6.0), b: c + Vec2::new(-4.0, -1.0) }).expect("wall");
            world.apply(Command::MoveTo { agents: ids.clone(), target: c, stopping_distance: 0.5 }).unwrap_or_else(|e| panic!("{k}: {e}"));
        }
        same("commands", &w, &l);
        for _ in 0..80 {
            w.step();
            l.step();
            same("commands", &w, &l);
            assert_eq!(w.drain_events(), l.drain_events());
        }
    }

    #[test]
    fn bad_bytes_are_errors_naming_what_is_wrong() {
        let sc = scenarios().into_iter().find(|(n, _)| n.ends_with("doorway.json")).map(|x| x.1).expect("doorway");
        let mut w = sc.build().expect("build");
        for _ in 0..5 {
            step(&sc, &mut w);
        }
        let bytes = w.save();
        let e = World::load(&bytes[..bytes.len() - 1]).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("world") && e.contains("unexpected end"), "{e}");
        let mut v = bytes.clone();
        v[0] = b'X';
        assert!(World::load(&v).err().is_some_and(|e| e.to_string().contains("bad magic")));
        let mut v = bytes.clone();
        v.push(0);
        assert!(World::load(&v).err().is_some_and(|e| e.to_string().contains("after the end")));
        // A non-finite float (the first agent's position) is refused, naming the field.
        let mut nan = World::new(WorldConfig::default()).expect("world");
        nan.spawn(SpawnSpec::new("g", 1, SpawnArea::Points(vec![Vec2::new(7.25, 3.5)]))).expect("spawn");
        let ok = nan.save();
        let at = ok.windows(4).position(|x| x == 7.25f32.to_bits().to_le_bytes()).expect("position bytes");
        let mut v = ok.clone();
        v[at..at + 4].copy_from_slice(&f32::NAN.to_bits().to_le_bytes());
        let e = World::load(&v).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("position.x") && e.contains("finite"), "{e}");
        // Every truncation is an error.
        for n in (0..bytes.len()).step_by(bytes.len() / 200 + 1) {
            assert!(World::load(&bytes[..n]).is_err(), "{n} bytes");
        }
    }

    #[test]
    fn the_contact_budget_is_saved_and_a_version_1_save_takes_the_default() {
        let mut w = World::new(WorldConfig::default()).expect("world");
        w.spawn(SpawnSpec::new("g", 3, SpawnArea::Points(vec![Vec2::new(7.25, 3.5)]))).expect("spawn");
        w.contact.rounds_max = 7;
        w.contact.deep_pairs_per_pair = 3;
        w.contact.deep_pairs_min = 99;
        assert_eq!(World::load(&w.save()).expect("load").contact, w.contact);
        // Version 1 wrote the rounds alone: the same bytes without the two budget counts.
        let w = World::new(WorldConfig::default()).expect("world");
        let v2 = w.save();
        // The rounds (64), then 2 and 16,384 as varints.
        let tail = [CONTACT_ROUNDS_MAX as u8, 2, 0x80, 0x80, 0x01];
        let at: Vec<usize> = v2.windows(tail.len()).enumerate().filter(|(_, x)| *x == tail).map(|(i, _)| i).collect();
        assert_eq!(at.len(), 1, "the contact counts appear once");
        assert_eq!(v2[SAVE_MAGIC.len()], 2, "version byte");
        let mut v1 = v2.clone();
        v1[SAVE_MAGIC.len()] = 1;
        v1.drain(at[0] + 1..at[0] + tail.len());
        let l = World::load(&v1).expect("version 1 loads");
        assert_eq!(l.contact, ContactParams::default());
        assert_eq!(l.save(), v2);
    }

    fn small_world_bytes() -> Vec<u8> {
        static BYTES: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        BYTES.get_or_init(small_world).clone()
    }

    fn small_world() -> Vec<u8> {
        let sc = scenarios().into_iter().find(|(n, _)| n.ends_with("doorway.json")).map(|x| x.1).expect("doorway");
        let mut w = sc.build().expect("build");
        for _ in 0..4 {
            step(&sc, &mut w);
        }
        w.save()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Random bytes, and a real save with bytes changed, give an error or a world that
        /// steps — never a panic.
        #[test]
        fn hostile_bytes_never_panic(garbage in proptest::collection::vec(any::<u8>(), 0..512), flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
            let _ = World::load(&garbage);
            let mut prefixed = SAVE_MAGIC.to_vec();
            prefixed.push(1);
            prefixed.extend_from_slice(&garbage);
            let _ = World::load(&prefixed);
            let mut v = small_world_bytes();
            for (i, b) in flips {
                let n = v.len();
                v[i % n] ^= b | 1;
            }
            if let Ok(mut w) = World::load(&v) {
                for _ in 0..3 {
                    w.step();
                }
            }
        }
    }
}
