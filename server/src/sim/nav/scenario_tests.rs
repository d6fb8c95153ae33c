//! Long-running MoveTo, path-following and leader-following scenario tests (run them with
//! `cargo test --release`; each stays well under 20 s there).

use std::collections::BTreeMap;

use glam::Vec2;

use crate::scenario::Scenario;
use crate::sim::hash::exact_hash;
use crate::sim::math::wrap_angle;
use crate::sim::world::{Event, SpawnArea, SpawnSpec, World, WorldConfig};
use crate::sim::{Bounds, Command, SimError};

/// Tick budget of the maze: 500 agents through the maze must all have arrived on their
/// formation slots by then (135 s of simulated time at 20 Hz). MoveTo avoids moving agents
/// reciprocally, so the crowd files through the maze's three gaps instead of walking through
/// itself: about 2,350 ticks.
pub const MAZE_TICK_BUDGET: u64 = 2700;

fn maze(solid: bool) -> World {
    let mut s = Scenario::from_json(include_str!("../../../../scenarios/maze-moveto.json")).expect("maze parses");
    s.solid_obstacles = solid;
    s.solid_agents = solid;
    s.build().expect("maze builds")
}

struct Run {
    reached: BTreeMap<u32, u32>,
    unreachable: u32,
    /// Largest `short_by` of an unreachable order's event.
    max_short_by: f32,
    wall_crossings: u64,
    contacts: u64,
    penetrations: u64,
    min_clearance: f32,
    max_arrived_turn: f32,
    max_arrived_speed: f32,
    all_done_at: Option<u64>,
}

fn run(w: &mut World, budget: u64) -> Run {
    let mut r = Run {
        reached: BTreeMap::new(),
        unreachable: 0,
        max_short_by: 0.0,
        wall_crossings: 0,
        contacts: 0,
        penetrations: 0,
        min_clearance: f32::INFINITY,
        max_arrived_turn: 0.0,
        max_arrived_speed: 0.0,
        all_done_at: None,
    };
    let mut settle = 0;
    for _ in 0..budget {
        let before: Vec<Option<f32>> =
            w.agents().iter().map(|a| a.order.as_ref().filter(|o| o.done).map(|_| a.orientation)).collect();
        let st = w.step();
        r.wall_crossings += u64::from(st.wall_crossings);
        r.contacts += u64::from(st.contacts);
        for (a, b) in w.agents().iter().zip(&before) {
            if let Some(o) = b {
                r.max_arrived_turn = r.max_arrived_turn.max(wrap_angle(a.orientation - o).abs());
                r.max_arrived_speed = r.max_arrived_speed.max(a.velocity.length());
            }
        }
        for e in w.drain_events() {
            if let Event::DestinationReached { id, unreachable, short_by, .. } = e {
                *r.reached.entry(id).or_default() += 1;
                r.unreachable += u32::from(unreachable);
                r.max_short_by = r.max_short_by.max(short_by);
            }
        }
        if w.tick() % 5 == 0 {
            let audit = w.audit();
            r.penetrations += u64::from(audit.obstacle_penetrations);
            r.min_clearance = r.min_clearance.min(audit.min_obstacle_clearance);
        }
        if r.all_done_at.is_none() && w.agents().iter().all(|a| a.order.as_ref().is_some_and(|o| o.done)) {
            r.all_done_at = Some(w.tick());
        }
        // Run 40 more ticks after everyone arrived to measure resting jitter.
        if r.all_done_at.is_some() {
            settle += 1;
            if settle > 40 {
                break;
            }
        }
    }
    r
}

#[test]
fn maze_moveto_all_arrive_once_without_penetrations_or_crossings() {
    let mut w = maze(true);
    assert_eq!(w.agents().len(), 500);
    let r = run(&mut w, MAZE_TICK_BUDGET);
    let done_at = r.all_done_at.unwrap_or(u64::MAX);
    assert!(done_at <= MAZE_TICK_BUDGET, "not all arrived within {MAZE_TICK_BUDGET} ticks");
    assert_eq!(r.reached.len(), 500, "every agent emits DestinationReached");
    assert!(r.reached.values().all(|&n| n == 1), "exactly once each");
    assert_eq!(r.unreachable, 0);
    assert_eq!(r.wall_crossings, 0);
    // The net pushes an agent's body, not only its centre, out of an obstacle: to touching,
    // clearance 0, less f32 rounding at coordinates ~100 (so no centre is ever inside either).
    assert!(r.min_clearance >= -1e-4, "a body {} inside an obstacle", -r.min_clearance);
    assert_eq!(r.penetrations, 0);
    // An arrived agent holds its slot: it steps aside for agents still on their way and comes
    // back, at most at its top speed. Once everyone has arrived nobody is on the way, and every
    // agent comes to rest on its slot (within the order's tolerance) and stays there.
    let max_speed = w.agents().iter().map(|a| a.limits.max_speed).fold(0.0, f32::max);
    assert!(r.max_arrived_speed <= max_speed * 1.0001, "an arrived agent ran at {}", r.max_arrived_speed);
    let mut rest_at = None;
    for t in 0..400 {
        if w.agents().iter().all(|a| a.velocity == Vec2::ZERO) {
            rest_at = Some(t);
            break;
        }
        w.step();
    }
    assert!(rest_at.is_some(), "the arrived formation does not come to rest");
    for a in w.agents() {
        let o = a.order.as_ref().expect("order");
        assert!(o.done && !o.gave_up, "agent {} not arrived", a.id);
        assert!(a.position.distance(o.stop_point) <= o.tolerance, "agent {} off its slot by {}", a.id, a.position.distance(o.stop_point));
    }
    let before: Vec<(Vec2, f32)> = w.agents().iter().map(|a| (a.position, a.orientation)).collect();
    for _ in 0..40 {
        w.step();
    }
    let after: Vec<(Vec2, f32)> = w.agents().iter().map(|a| (a.position, a.orientation)).collect();
    assert_eq!(before, after, "a formation at rest moves");
    // The goal region: every agent on its slot, so the pack is the formation's disc (500 slots
    // 1.15 apart: radius ~13.5) plus the slot tolerance.
    let goal = Vec2::new(138.0, 50.0);
    let far = w.agents().iter().map(|a| a.position.distance(goal)).fold(0.0, f32::max);
    assert!(far < 16.0, "farthest agent {far} from the goal");
    let nav = w.nav().expect("nav built");
    assert_eq!(nav.cache.stats().builds, 1, "one shared field for the whole group");
    eprintln!(
        "maze (solid): all arrived at tick {done_at}, at rest {rest_at:?} ticks later; contacts {}; farthest {far:.2}; cache {:?}; nav bytes {}; min clearance {}; arrived speed {} turn {}",
        r.contacts,
        nav.cache.stats(),
        nav.bytes(),
        r.min_clearance,
        r.max_arrived_speed,
        r.max_arrived_turn
    );
}

#[test]
fn maze_moveto_steering_alone_without_the_safety_net() {
    let mut w = maze(false);
    let r = run(&mut w, MAZE_TICK_BUDGET);
    eprintln!(
        "maze (not solid): all arrived at {:?}; wall crossings {}; penetration agent-audits {}; reached {}; min clearance {}; arrived speed {} turn {}",
        r.all_done_at,
        r.wall_crossings,
        r.penetrations,
        r.reached.len(),
        r.min_clearance,
        r.max_arrived_speed,
        r.max_arrived_turn
    );
    assert_eq!(r.contacts, 0, "no safety net when obstacles are not solid");
    assert_eq!(r.wall_crossings, 0);
    assert!(r.all_done_at.is_some());
}

fn open_world(agents: usize, at: Vec2) -> (World, Vec<u32>) {
    let cfg = WorldConfig { bounds: Bounds { min: Vec2::ZERO, max: Vec2::splat(100.0) }, ..WorldConfig::default() };
    let mut w = World::new(cfg).expect("config");
    let ids = w
        .spawn(SpawnSpec::new("g", agents, SpawnArea::Disc { center: at, radius: (agents as f32).sqrt() * 0.8 }))
        .expect("spawn");
    (w, ids)
}

#[test]
fn single_agent_stops_within_stopping_distance_and_reports_once() {
    let (mut w, ids) = open_world(1, Vec2::new(10.0, 10.0));
    w.apply(Command::MoveTo { agents: ids.clone(), target: Vec2::new(60.0, 40.0), stopping_distance: 1.5 }).expect("order");
    let r = run(&mut w, 600);
    assert_eq!(r.reached.get(&ids[0]), Some(&1));
    let a = &w.agents()[0];
    assert!(a.position.distance(Vec2::new(60.0, 40.0)) <= 1.5);
    assert_eq!(a.velocity, Vec2::ZERO);
}

#[test]
fn reissuing_moveto_mid_way_redirects_the_whole_group() {
    let (mut w, ids) = open_world(60, Vec2::new(15.0, 15.0));
    w.apply(Command::MoveTo { agents: ids.clone(), target: Vec2::new(85.0, 20.0), stopping_distance: 1.0 }).expect("order");
    for _ in 0..80 {
        w.step();
    }
    assert!(w.drain_events().iter().all(|e| !matches!(e, Event::DestinationReached { .. })));
    let new_target = Vec2::new(20.0, 85.0);
    w.apply(Command::MoveTo { agents: ids.clone(), target: new_target, stopping_distance: 1.0 }).expect("order");
    let r = run(&mut w, 1200);
    assert!(r.all_done_at.is_some());
    assert_eq!(r.reached.len(), 60);
    assert!(r.reached.values().all(|&n| n == 1));
    for a in w.agents() {
        assert!(a.position.distance(new_target) < 8.0, "agent {} at {:?}", a.id, a.position);
    }
    // Two goals were used, one formation is left.
    assert_eq!(w.nav().map(|n| n.formations()), Some(1));
}

#[test]
fn moving_an_obstacle_onto_the_path_reroutes_the_agents() {
    // A wall x = 50 with two gaps: a near one (y 40..50) and a far one (y 85..95). Agents start
    // at (20, 30), below the near gap so that they do not see the goal and need a field, going
    // to (80, 45) through the near gap; an obstacle is then moved into it.
    let (mut w, ids) = open_world(20, Vec2::new(20.0, 30.0));
    w.add_wall(Vec2::new(50.0, 0.0), Vec2::new(50.0, 40.0)).expect("wall");
    w.add_wall(Vec2::new(50.0, 50.0), Vec2::new(50.0, 85.0)).expect("wall");
    w.add_wall(Vec2::new(50.0, 95.0), Vec2::new(50.0, 100.0)).expect("wall");
    let plug = w.add_obstacle(Vec2::new(5.0, 5.0), 6.0).expect("obstacle");
    w.apply(Command::MoveTo { agents: ids.clone(), target: Vec2::new(80.0, 45.0), stopping_distance: 1.0 }).expect("order");
    for _ in 0..20 {
        w.step();
    }
    let builds = w.nav().map_or(0, |n| n.cache.stats().builds);
    assert!(builds >= 1, "the first route needs a field");
    w.move_obstacle(plug, Vec2::new(50.0, 45.0)).expect("move");
    let r = run(&mut w, 2000);
    let nav = w.nav().expect("nav");
    assert!(nav.cache.stats().invalidations >= 1 && nav.cache.stats().builds > builds, "field rebuilt");
    assert!(r.all_done_at.is_some(), "all arrive through the far gap");
    assert_eq!(r.reached.len(), 20);
    assert_eq!(r.wall_crossings, 0);
    assert_eq!(r.penetrations, 0);
    for a in w.agents() {
        assert!(a.position.distance(Vec2::new(80.0, 45.0)) < 8.0);
    }
}

#[test]
fn unreachable_target_sends_agents_to_the_nearest_reachable_cell() {
    // The target (80, 80) is inside a closed box of walls 70..90.
    let (mut w, ids) = open_world(5, Vec2::new(20.0, 20.0));
    for (a, b) in [((70.0, 70.0), (90.0, 70.0)), ((90.0, 70.0), (90.0, 90.0)), ((90.0, 90.0), (70.0, 90.0)), ((70.0, 90.0), (70.0, 70.0))] {
        w.add_wall(Vec2::new(a.0, a.1), Vec2::new(b.0, b.1)).expect("wall");
    }
    w.apply(Command::MoveTo { agents: ids.clone(), target: Vec2::new(80.0, 80.0), stopping_distance: 1.0 }).expect("order");
    let r = run(&mut w, 1200);
    assert_eq!(r.reached.len(), 5);
    assert_eq!(r.unreachable, 5, "the event says so");
    // …with how far from the target each stopped: beyond the box's half-width, within the
    // 16 units checked below.
    assert!(r.max_short_by > 10.0 && r.max_short_by < 16.0, "short by {}", r.max_short_by);
    assert_eq!(r.wall_crossings, 0);
    for a in w.agents() {
        // Outside the box, near its wall.
        let inside = a.position.x > 70.0 && a.position.x < 90.0 && a.position.y > 70.0 && a.position.y < 90.0;
        assert!(!inside && a.position.distance(Vec2::new(80.0, 80.0)) < 16.0, "{:?}", a.position);
    }
}

#[test]
fn moveto_validation_leaves_the_world_unchanged() {
    let (mut w, ids) = open_world(3, Vec2::new(20.0, 20.0));
    let bad = [
        Command::MoveTo { agents: ids.clone(), target: Vec2::new(f32::NAN, 1.0), stopping_distance: 1.0 },
        Command::MoveTo { agents: ids.clone(), target: Vec2::new(150.0, 1.0), stopping_distance: 1.0 },
        Command::MoveTo { agents: ids.clone(), target: Vec2::new(50.0, 50.0), stopping_distance: -1.0 },
        Command::MoveTo { agents: vec![ids[0], 999], target: Vec2::new(50.0, 50.0), stopping_distance: 1.0 },
    ];
    for c in bad {
        let e = w.apply(c).unwrap_err();
        assert!(matches!(e, SimError::InvalidField { .. } | SimError::UnknownAgent(999)), "{e}");
    }
    assert!(w.agents().iter().all(|a| a.order.is_none()));
    assert!(w.nav().is_none());
}

#[test]
fn maze_is_bit_identical_on_one_and_two_threads() {
    let hash = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
        let mut w = maze(true);
        pool.install(|| {
            for _ in 0..150 {
                w.step();
            }
        });
        exact_hash(&w)
    };
    assert_eq!(hash(1), hash(2));
}

#[test]
fn patrol_walks_back_and_forth_and_leader_is_followed() {
    let s = Scenario::from_json(include_str!("../../../../scenarios/patrol.json")).expect("patrol");
    let mut w = s.build().expect("builds");
    let mut completed = 0;
    let mut max_x = 0.0f32;
    for _ in 0..1200 {
        w.step();
        completed += w.drain_events().iter().filter(|e| matches!(e, Event::PathCompleted { .. })).count();
        max_x = max_x.max(w.agents().iter().map(|a| a.position.x).fold(0.0, f32::max));
    }
    assert_eq!(completed, 0, "ping-pong never completes");
    assert!(max_x > 130.0, "guards reach the far end");
    // After reaching the far end they walk back: some guard heads for an earlier waypoint.
    assert!(w.agents().iter().any(|a| a.memory.path_step < 0));

    let s = Scenario::from_json(include_str!("../../../../scenarios/leader.json")).expect("leader");
    let mut w = s.build().expect("builds");
    for _ in 0..1200 {
        w.step();
    }
    let leader = w.agents()[0].clone();
    let mean = w.agents().iter().skip(1).map(|a| a.position.distance(leader.position)).sum::<f32>() / 50.0;
    assert!(mean < 12.0, "followers stay near the leader: mean distance {mean}");
    // Nobody stands in the leader's way: within 1 unit of the point ahead of it.
    let ahead = leader.position + crate::sim::math::dir(leader.velocity) * 3.0;
    assert!(w.agents().iter().skip(1).all(|a| a.position.distance(ahead) > 1.0));
}

#[test]
fn once_path_emits_path_completed_exactly_once() {
    use crate::sim::agent::PathMode;
    use crate::sim::behaviors::path_following::PathFollowingParams;
    use crate::sim::behaviors::{Behavior, BehaviorEntry};
    let (mut w, ids) = open_world(3, Vec2::new(10.0, 10.0));
    let path = PathFollowingParams { waypoints: vec![Vec2::new(30.0, 10.0), Vec2::new(30.0, 40.0)], path_radius: 1.5, mode: PathMode::Once };
    for &id in &ids {
        w.apply(Command::SetBehaviors { agent: id, entries: vec![BehaviorEntry::new(Behavior::PathFollowing(path.clone()))] }).expect("set");
    }
    let mut n = BTreeMap::new();
    for _ in 0..600 {
        w.step();
        for e in w.drain_events() {
            if let Event::PathCompleted { id } = e {
                *n.entry(id).or_insert(0) += 1;
            }
        }
    }
    assert_eq!(n.len(), 3);
    assert!(n.values().all(|&k| k == 1));
}

/// A world with a wall x = 50 from y 0 to 80 and agents at (20, 20): the goal (80, 20) is
/// hidden behind the wall, the goal (20, 60) is in plain sight.
fn walled(latency: u32) -> (World, Vec<u32>) {
    let cfg = WorldConfig {
        bounds: Bounds { min: Vec2::ZERO, max: Vec2::splat(100.0) },
        flow_build_ticks: latency,
        ..WorldConfig::default()
    };
    let mut w = World::new(cfg).expect("config");
    w.add_wall(Vec2::new(50.0, 0.0), Vec2::new(50.0, 80.0)).expect("wall");
    let ids = w.spawn(SpawnSpec::new("g", 4, SpawnArea::Disc { center: Vec2::new(20.0, 20.0), radius: 2.0 })).expect("spawn");
    (w, ids)
}

#[test]
fn a_requested_field_is_used_exactly_flow_build_ticks_later() {
    let (mut w, ids) = walled(3);
    w.apply(Command::MoveTo { agents: ids, target: Vec2::new(80.0, 20.0), stopping_distance: 1.0 }).expect("order");
    // Tick 0's pre-pass requests the field (one job); ticks 0, 1, 2 run without it.
    w.step();
    let jobs = w.take_field_jobs();
    assert_eq!(jobs.len(), 1);
    for t in 1..=3u64 {
        let nav = w.nav().expect("nav");
        assert_eq!(nav.cache.len(), 0, "no field before tick 3 (at tick {t})");
        assert_eq!(nav.pending(), 1);
        w.step();
        assert!(w.take_field_jobs().is_empty(), "one request per goal");
    }
    // Tick 3's pre-pass built it (nobody delivered it): cached, nothing pending.
    let nav = w.nav().expect("nav");
    assert_eq!(nav.cache.len(), 1);
    assert_eq!(nav.pending(), 0);
    let p = nav.pipeline_stats();
    assert_eq!((p.requested, p.delivered, p.built_on_tick), (1, 0, 1));
    // The tick built it: the world no longer wants the job's field (a host's builder skips it).
    assert!(!w.field_requested(jobs[0].id()));
}

#[test]
fn a_delivered_field_is_used_and_states_match_the_tick_built_one() {
    let target = Vec2::new(80.0, 20.0);
    let (mut a, ids) = walled(2);
    let (mut b, _) = walled(2);
    for w in [&mut a, &mut b] {
        w.apply(Command::MoveTo { agents: ids.clone(), target, stopping_distance: 1.0 }).expect("order");
    }
    for _ in 0..40 {
        // `a` hands back every job, built as a builder thread would; `b` builds on the tick.
        let jobs = a.take_field_jobs();
        for j in jobs {
            assert!(a.field_requested(j.id()));
            a.deliver_field(j.build());
            assert!(!a.field_requested(j.id()), "handed back: no longer wanted");
        }
        a.step();
        b.step();
        let _ = b.take_field_jobs();
        assert_eq!(exact_hash(&a), exact_hash(&b));
    }
    let (pa, pb) = (a.nav().expect("nav").pipeline_stats(), b.nav().expect("nav").pipeline_stats());
    assert_eq!((pa.delivered, pa.built_on_tick), (1, 0));
    assert_eq!((pb.delivered, pb.built_on_tick), (0, 1));
}

#[test]
fn a_field_for_an_old_grid_is_not_accepted() {
    let (mut w, ids) = walled(2);
    w.apply(Command::MoveTo { agents: ids, target: Vec2::new(80.0, 20.0), stopping_distance: 1.0 }).expect("order");
    w.step();
    let jobs = w.take_field_jobs();
    assert_eq!(jobs.len(), 1);
    // The grid changes before the field comes back: the request is dropped and made anew.
    w.add_obstacle(Vec2::new(30.0, 60.0), 3.0).expect("obstacle");
    w.step();
    let again = w.take_field_jobs();
    assert_eq!(again.len(), 1);
    assert_ne!(again[0].id(), jobs[0].id(), "a new request");
    assert!(!w.field_requested(jobs[0].id()), "the old request is dropped");
    assert!(w.field_requested(again[0].id()));
    w.deliver_field(jobs[0].build());
    let nav = w.nav().expect("nav");
    assert_eq!(nav.pending(), 1);
    assert_eq!(nav.awaited(u64::MAX), vec![again[0].id()], "the stale field did not count as delivered");
}

#[test]
fn goals_in_plain_sight_need_no_field_and_hidden_ones_do() {
    let (mut w, ids) = walled(0);
    w.apply(Command::MoveTo { agents: ids.clone(), target: Vec2::new(20.0, 60.0), stopping_distance: 1.0 }).expect("order");
    for _ in 0..5 {
        w.step();
    }
    let p = w.nav().expect("nav").pipeline_stats();
    assert_eq!(p.requested, 0, "every agent sees (20, 60)");
    w.apply(Command::MoveTo { agents: ids, target: Vec2::new(80.0, 20.0), stopping_distance: 1.0 }).expect("order");
    w.step();
    let nav = w.nav().expect("nav");
    assert_eq!(nav.pipeline_stats().requested, 1, "(80, 20) is behind the wall");
    assert_eq!(nav.cache.len(), 1, "latency 0: built within the tick");
}

/// The pre-pass reuses the last tick's sorted active orders while they are still exactly the
/// active orders (`NavState::reuse_active`); a fork starts without them and reads every order
/// anew. Orders are issued, redirected into another goal's cell (so that its group outgrows
/// `straight_line_max_agents` and needs a field only if grouped whole), given to agents that
/// had none, completed, and dropped with their agents, on separate ticks: the world and a fork
/// taken before every tick must step bit-identically and request the same fields.
#[test]
fn reused_active_orders_step_as_orders_read_anew() {
    let mut cfg = WorldConfig { bounds: Bounds { min: Vec2::ZERO, max: Vec2::splat(100.0) }, flow_build_ticks: 0, ..WorldConfig::default() };
    cfg.move_to.straight_line_max_agents = 8;
    let mut w = World::new(cfg).expect("config");
    w.add_wall(Vec2::new(50.0, 0.0), Vec2::new(50.0, 80.0)).expect("wall");
    let ids = w.spawn(SpawnSpec::new("g", 40, SpawnArea::Disc { center: Vec2::new(25.0, 40.0), radius: 8.0 })).expect("spawn");
    let order = |w: &mut World, agents: &[u32], target: Vec2| {
        w.apply(Command::MoveTo { agents: agents.to_vec(), target, stopping_distance: 1.0 }).expect("order");
    };
    let (open, hidden) = (Vec2::new(30.0, 15.0), Vec2::new(80.0, 60.0));
    let mut requested = Vec::new();
    for tick in 0..300u64 {
        match tick {
            // Six agents to a goal in plain sight (no field: 6 <= 8), one order per agent for
            // eight more (x 30: in sight, x 75: behind the wall).
            5 => {
                order(&mut w, &ids[..6], open);
                for (k, &id) in ids.iter().enumerate().take(14).skip(6) {
                    order(&mut w, &[id], Vec2::new(if k % 2 == 0 { 30.0 } else { 75.0 }, 30.0 + 3.0 * k as f32));
                }
            }
            // Four of the single agents join the first goal's cell: ten agents, over the limit.
            30 => {
                for &id in &ids[8..12] {
                    order(&mut w, &[id], open);
                }
            }
            // Agents that had no order get one, to a goal behind the wall.
            50 => order(&mut w, &ids[20..26], hidden),
            // Agents with active orders leave.
            70 => {
                for &id in &[ids[2], ids[13]] {
                    w.despawn(id).expect("despawn");
                }
            }
            _ => {}
        }
        let mut anew = w.fork();
        w.step();
        anew.step();
        assert_eq!(exact_hash(&w), exact_hash(&anew), "tick {tick}");
        let requests = |w: &World| w.nav().map_or(0, |n| n.pipeline_stats().requested);
        assert_eq!(requests(&w), requests(&anew), "tick {tick}");
        requested.push(requests(&w));
    }
    // Each change was seen: the grown group's field on tick 30, the hidden goal's on tick 50.
    assert!(requested[30] > requested[29], "fields requested: {requested:?}");
    assert!(requested[50] > requested[49], "fields requested: {requested:?}");
    let done = w.agents().iter().filter(|a| a.order.as_ref().is_some_and(|o| o.done)).count();
    assert!(done > 0, "some orders completed");
}

#[test]
fn an_arrived_agent_steps_aside_for_one_on_its_way_and_comes_back() {
    // A arrives at (50, 50) first; B then walks from (30, 50) to (70, 50) straight through A's
    // place. A steps aside, B gets through to its goal, and A comes back to rest on its stop
    // point.
    let cfg = WorldConfig { bounds: Bounds { min: Vec2::ZERO, max: Vec2::splat(100.0) }, ..WorldConfig::default() };
    let mut w = World::new(cfg).expect("config");
    let a = w.spawn(SpawnSpec::new("a", 1, SpawnArea::Points(vec![Vec2::new(49.0, 50.0)]))).expect("spawn")[0];
    let b = w.spawn(SpawnSpec::new("b", 1, SpawnArea::Points(vec![Vec2::new(30.0, 50.0)]))).expect("spawn")[0];
    w.apply(Command::MoveTo { agents: vec![a], target: Vec2::new(50.0, 50.0), stopping_distance: 0.2 }).expect("order a");
    for _ in 0..100 {
        w.step();
    }
    assert!(w.agent(a).and_then(|x| x.order.as_ref()).is_some_and(|o| o.done), "a arrived first");
    w.apply(Command::MoveTo { agents: vec![b], target: Vec2::new(70.0, 50.0), stopping_distance: 0.2 }).expect("order b");
    let mut aside = 0.0f32;
    for _ in 0..600 {
        w.step();
        aside = aside.max(w.agent(a).map_or(0.0, |x| x.position.distance(Vec2::new(50.0, 50.0))));
    }
    let (oa, ob) = (w.agent(a).expect("a"), w.agent(b).expect("b"));
    let order_b = ob.order.as_ref().expect("b's order");
    assert!(order_b.done && !order_b.gave_up, "b got through");
    assert!(ob.position.distance(Vec2::new(70.0, 50.0)) <= 0.2);
    assert!(aside > 0.5, "a never stepped aside (at most {aside} off its place)");
    let order_a = oa.order.as_ref().expect("a's order");
    assert!(oa.position.distance(order_a.stop_point) <= order_a.tolerance, "a is not back: {:?}", oa.position);
    assert_eq!(oa.velocity, Vec2::ZERO, "a is not at rest");
}

#[test]
fn an_agent_that_cannot_reach_its_stop_point_gives_up_and_is_not_arrived() {
    // The stop point is inside a big resting agent that is steered by a behaviour (so it holds
    // no place and yields to nobody): the mover gets no nearer than touching it, and after
    // `give_up_after` seconds its order ends, marked gave_up, with how far it was.
    let mut cfg = WorldConfig { bounds: Bounds { min: Vec2::ZERO, max: Vec2::splat(100.0) }, ..WorldConfig::default() };
    cfg.move_to.give_up_after = 3.0;
    let mut w = World::new(cfg).expect("config");
    let mut big = SpawnSpec::new("rock", 1, SpawnArea::Points(vec![Vec2::new(50.0, 50.0)]));
    big.limits.radius = 3.0;
    big.limits.max_speed = 0.0;
    big.behaviors = vec![crate::sim::behaviors::BehaviorEntry::new(crate::sim::behaviors::Behavior::Wander(Default::default()))];
    w.spawn(big).expect("spawn rock");
    let m = w.spawn(SpawnSpec::new("m", 1, SpawnArea::Points(vec![Vec2::new(30.0, 50.0)]))).expect("spawn")[0];
    w.apply(Command::MoveTo { agents: vec![m], target: Vec2::new(50.0, 50.0), stopping_distance: 0.5 }).expect("order");
    let mut events = 0;
    for _ in 0..600 {
        w.step();
        for e in w.drain_events() {
            if let Event::DestinationReached { gave_up: true, short_by, .. } = e {
                events += 1;
                assert!((short_by - 3.5).abs() < 0.2, "the event says how far: {short_by}");
            }
        }
    }
    let a = w.agent(m).expect("m");
    let o = a.order.as_ref().expect("order");
    assert!(o.done && o.gave_up, "the order gave up");
    assert_eq!(events, 1, "one event, marked gave_up");
    // Touching the rock: 3 + 0.5 from its centre, less what contact allows.
    assert!((o.short_by - 3.5).abs() < 0.2, "short by {}", o.short_by);
    assert_eq!(crate::simulate::arrived(&w).0, 0, "a gave-up agent is not arrived");
}

#[test]
fn two_crowds_take_turns_at_a_door_and_all_get_through() {
    // A wall at x = 60 with a door 4 radii wide (radius 1, door y 58–62); 60 agents each side in
    // dense blocks, each group ordered to a point 25 beyond the door on the other side. Head on,
    // neither crowd could pass: the door is given to one direction at a time, the other waits
    // clear of its mouth, and every agent arrives (none gives up).
    let cfg = WorldConfig {
        bounds: Bounds { min: Vec2::ZERO, max: Vec2::splat(120.0) },
        nav_cell_size: 0.5,
        nav_clearance: 0.5,
        ..WorldConfig::default()
    };
    let mut w = World::new(cfg).expect("config");
    w.add_wall(Vec2::new(60.0, 0.0), Vec2::new(60.0, 58.0)).expect("wall");
    w.add_wall(Vec2::new(60.0, 62.0), Vec2::new(60.0, 120.0)).expect("wall");
    let block = |x0: f32| -> Vec<Vec2> { (0..60).map(|i| Vec2::new(x0 + (i % 6) as f32 * 2.4, 48.0 + (i / 6) as f32 * 2.4)).collect() };
    let mut ids = Vec::new();
    for (name, x0, target) in [("west", 40.0, Vec2::new(85.0, 60.0)), ("east", 68.0, Vec2::new(35.0, 60.0))] {
        let mut spec = SpawnSpec::new(name, 60, SpawnArea::Points(block(x0)));
        spec.limits.radius = 1.0;
        spec.limits.max_speed = 2.0;
        let group = w.spawn(spec).expect("spawn");
        w.apply(Command::MoveTo { agents: group.clone(), target, stopping_distance: 1.0 }).expect("order");
        ids.extend(group);
    }
    let (mut waited, mut crossings) = (0usize, 0u64);
    for _ in 0..12_000 {
        let before: Vec<f32> = ids.iter().map(|&id| w.agent(id).map_or(0.0, |a| a.position.x)).collect();
        w.step();
        waited = waited.max(w.agents().iter().filter(|a| a.order.as_ref().is_some_and(|o| o.portal.is_some_and(|t| t.wait))).count());
        for (&id, &x0) in ids.iter().zip(&before) {
            let Some(a) = w.agent(id) else { continue };
            // Crossing x = 60 anywhere but through the door.
            if (x0 - 60.0).signum() != (a.position.x - 60.0).signum() && !(57.0..=63.0).contains(&a.position.y) {
                crossings += 1;
            }
        }
        if crate::simulate::arrived(&w).0 == ids.len() {
            break;
        }
    }
    assert_eq!(w.nav().map(|n| n.portals().len()), Some(1), "the door is one portal");
    assert!(waited > 0, "nobody ever waited for the door");
    assert_eq!(crossings, 0, "agents crossed the wall");
    let gave_up = w.agents().iter().filter(|a| a.order.as_ref().is_some_and(|o| o.gave_up)).count();
    assert_eq!(gave_up, 0, "agents gave up");
    assert_eq!(crate::simulate::arrived(&w).0, ids.len(), "not every agent arrived by tick {}", w.tick());
}
