//! Scenario-level tests of the simulation core: whole runs checked against the behaviours'
//! promises, determinism, and property tests over random command sequences.

use glam::Vec2;
use proptest::prelude::*;

use crate::scenario::Scenario;
use crate::sim::behaviors::{
    Behavior, BehaviorEntry, Target, arrive, evade, flee, obstacle_avoidance, pursue, seek, separation, wander,
};
use crate::sim::hash::exact_hash;
use crate::sim::world::{Command, EdgeRule, SpawnArea, SpawnSpec, World, WorldConfig};
use crate::sim::{Bounds, Limits};
use crate::simulate::{SimulateOptions, run};

fn scenario(name: &str) -> Scenario {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(format!("{name}.json"));
    match Scenario::from_file(&path) {
        Ok(s) => s,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

fn open_world() -> World {
    let cfg = WorldConfig { bounds: Bounds { min: Vec2::splat(-500.0), max: Vec2::splat(500.0) }, ..WorldConfig::default() };
    World::new(cfg).expect("valid config")
}

fn spawn_one(w: &mut World, at: Vec2, velocity_dir: f32, speed: f32, behaviors: Vec<BehaviorEntry>) -> u32 {
    let spec = SpawnSpec {
        orientation: Some(velocity_dir),
        initial_speed: speed,
        behaviors,
        ..SpawnSpec::new("g", 1, SpawnArea::Points(vec![at]))
    };
    w.spawn(spec).expect("spawn")[0]
}

fn entry(b: Behavior) -> BehaviorEntry {
    BehaviorEntry::new(b)
}

#[test]
fn arrive_stops_inside_target_radius_without_oscillating() {
    let mut w = open_world();
    let target = Vec2::new(50.0, 0.0);
    let tuning = arrive::ArriveTuning::default();
    let id = spawn_one(&mut w, Vec2::ZERO, 0.0, 0.0, vec![entry(Behavior::Arrive(arrive::ArriveParams { target: Target::Point(target), tuning }))]);
    let mut entered_at = None;
    let mut max_overshoot = 0.0f32;
    let mut vx_sign_changes = 0;
    let mut last_vx = 0.0f32;
    for t in 0..400 {
        w.step();
        let a = w.agent(id).expect("agent");
        let d = a.position.distance(target);
        if d <= tuning.target_radius && entered_at.is_none() {
            entered_at = Some(t);
        }
        if let Some(t0) = entered_at {
            assert!(d <= tuning.target_radius, "left the target radius at tick {t} (entered {t0}): d = {d}");
        }
        max_overshoot = max_overshoot.max(a.position.x - target.x);
        if a.velocity.x.abs() > 1e-4 {
            if last_vx != 0.0 && a.velocity.x.signum() != last_vx.signum() {
                vx_sign_changes += 1;
            }
            last_vx = a.velocity.x;
        }
    }
    let a = w.agent(id).expect("agent");
    // Hand estimate: 45 units at max speed 5 = 9 s = 180 ticks; inside slow_radius the speed is
    // ∝ distance, so the distance decays with time constant slow_radius/max_speed = 1 s, from 5
    // to target_radius 1 in ln 5 ≈ 1.61 s ≈ 32 ticks: about 212 ticks in all (±10%).
    assert!(entered_at.is_some_and(|t| (190..235).contains(&t)), "arrival tick {entered_at:?} is not about 212");
    assert!(a.velocity.length() < 1e-3, "still moving at {:?}", a.velocity);
    assert!(max_overshoot < tuning.target_radius, "overshot by {max_overshoot}");
    assert!(vx_sign_changes <= 1, "velocity reversed {vx_sign_changes} times");
}

/// Ticks until the chaser is within 1 unit of a target moving in a straight line.
fn ticks_to_catch(chaser: Behavior) -> Option<u32> {
    let mut w = open_world();
    let target = spawn_one(&mut w, Vec2::new(40.0, 0.0), std::f32::consts::FRAC_PI_2, 3.0, vec![]);
    let b = match chaser {
        Behavior::Pursue(mut p) => {
            p.target = target;
            Behavior::Pursue(p)
        }
        Behavior::Seek(_) => Behavior::Seek(seek::SeekParams { target: Target::Agent(target) }),
        other => other,
    };
    let c = spawn_one(&mut w, Vec2::ZERO, 0.0, 0.0, vec![entry(b)]);
    for t in 0..2000 {
        w.step();
        let (a, b) = (w.agent(c)?, w.agent(target)?);
        if a.position.distance(b.position) < 1.0 {
            return Some(t);
        }
    }
    None
}

#[test]
fn pursue_catches_a_straight_mover_sooner_than_seek() {
    let pursue = ticks_to_catch(Behavior::Pursue(pursue::PursueParams { target: 0, max_prediction: 5.0 }));
    let seek = ticks_to_catch(Behavior::Seek(seek::SeekParams { target: Target::Point(Vec2::ZERO) }));
    let (Some(p), Some(s)) = (pursue, seek) else { panic!("pursue {pursue:?} seek {seek:?}: one never caught") };
    assert!(p < s, "pursue took {p} ticks, seek {s}");
}

#[test]
fn flee_and_evade_increase_the_distance() {
    for kind in ["flee", "evade"] {
        let mut w = open_world();
        // The threat walks straight at the agent.
        let threat = spawn_one(&mut w, Vec2::new(6.0, 0.0), std::f32::consts::PI, 2.0, vec![]);
        let b = if kind == "flee" {
            Behavior::Flee(flee::FleeParams { target: Target::Agent(threat), panic_distance: 10.0 })
        } else {
            Behavior::Evade(evade::EvadeParams { target: threat, panic_distance: 10.0, max_prediction: 5.0 })
        };
        let me = spawn_one(&mut w, Vec2::ZERO, 0.0, 0.0, vec![entry(b)]);
        let d0 = 6.0;
        let mut last = d0;
        for _ in 0..60 {
            w.step();
            let d = w.agent(me).expect("me").position.distance(w.agent(threat).expect("threat").position);
            last = d;
        }
        assert!(last > d0 + 1.0, "{kind}: distance {last} did not grow from {d0}");
    }
}

fn run_hash(name: &str, agents: Option<usize>, ticks: u64, threads: usize, brute: bool) -> u64 {
    let mut sc = scenario(name);
    if let Some(n) = agents {
        sc = sc.scaled_to(n);
    }
    let mut world = sc.build().expect("build");
    world.set_brute_force(brute);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
    for _ in 0..ticks {
        pool.install(|| world.step());
    }
    exact_hash(&world)
}

#[test]
fn runs_are_bit_identical_across_runs_and_thread_counts() {
    for (name, n) in [("flock", None), ("swarm-10k", Some(3000)), ("pursuit", None), ("crossing", None)] {
        let a = run_hash(name, n, 150, 1, false);
        let b = run_hash(name, n, 150, 1, false);
        let c = run_hash(name, n, 150, 2, false);
        assert_eq!(a, b, "{name}: two runs differ");
        assert_eq!(a, c, "{name}: 1 vs 2 threads differ");
    }
}

/// Runs `name` for `ticks`, despawning agent 7 at tick 40, spawning 25 more at tick 80 and
/// (maze-moveto) sending agents 1–250, listed in reverse, on a new MoveTo at tick 100; when
/// `shuffle` is set, the agents' storage is put in a random order every 9 ticks. Returns the
/// exact hash and every event.
fn run_with_storage(name: &str, agents: Option<usize>, ticks: u64, shuffle: bool) -> (u64, Vec<crate::sim::Event>) {
    let mut sc = scenario(name);
    if let Some(n) = agents {
        sc = sc.scaled_to(n);
    }
    let mut world = sc.build().expect("build");
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("pool");
    let mut events = world.drain_events();
    for t in 0..ticks {
        if shuffle && t % 9 == 0 {
            world.shuffle_storage_for_test(t);
        }
        if t == 40 {
            world.despawn(7).expect("agent 7 exists");
        }
        if t == 80 {
            let area = SpawnArea::Disc { center: Vec2::ZERO, radius: 20.0 };
            let spec = SpawnSpec { behaviors: vec![entry(Behavior::Separation(separation::SeparationParams { neighbor_radius: 3.0 }))], ..SpawnSpec::new("late", 25, area) };
            world.spawn(spec).expect("spawn");
        }
        if t == 100 && name == "maze-moveto" {
            let ids: Vec<u32> = (1..=250).rev().filter(|&id| id != 7).collect();
            world.move_to(&ids, Vec2::new(138.0, 50.0), 1.5).expect("move_to");
        }
        pool.install(|| world.step());
        events.extend(world.drain_events());
    }
    (exact_hash(&world), events)
}

#[test]
fn the_order_agents_are_stored_in_changes_no_state_and_no_event() {
    // maze-moveto: MoveTo goal resolution, slot claims and DestinationReached events (all in
    // id order); swarm-10k and flock: neighbour sums over every cell.
    for (name, n, ticks) in [("maze-moveto", None, 4000), ("swarm-10k", Some(3000), 150), ("flock", None, 150)] {
        let (h0, e0) = run_with_storage(name, n, ticks, false);
        let (h1, e1) = run_with_storage(name, n, ticks, true);
        assert_eq!(h0, h1, "{name}: states differ with shuffled storage");
        assert_eq!(e0, e1, "{name}: events differ with shuffled storage");
        if name == "maze-moveto" {
            let reached = e0.iter().filter(|e| matches!(e, crate::sim::Event::DestinationReached { .. })).count();
            assert!(reached >= 400, "maze-moveto: only {reached} arrivals, the test would not look at events");
        }
    }
}

#[test]
fn brute_force_baseline_gives_the_same_state_as_the_grid() {
    let grid = run_hash("flock", None, 100, 2, false);
    let brute = run_hash("flock", None, 100, 2, true);
    assert_eq!(grid, brute);
}

#[test]
fn obstacle_course_3000_ticks_zero_penetrations_with_and_without_safety_net() {
    for solid in [true, false] {
        let mut sc = scenario("obstacle-course");
        // Without the safety net: neither obstacles nor agents are solid (an agent contact
        // push, unchecked, could push an agent into an obstacle).
        sc.solid_obstacles = solid;
        sc.solid_agents = solid;
        let r = run("obstacle-course", &sc, &SimulateOptions { ticks: 3000, threads: 2, ..SimulateOptions::default() }).expect("run");
        assert_eq!(r.obstacle_penetrations, 0, "solid={solid}: {}", r.table());
        assert_eq!(r.non_finite, 0);
        assert_eq!(r.out_of_bounds, 0);
        assert!(r.arrived as f64 >= 0.95 * r.agents as f64, "solid={solid}: only {} of {} arrived", r.arrived, r.agents);
        if solid {
            assert_eq!(r.wall_crossings, 0, "{}", r.table());
        }
    }
}

#[test]
fn every_shipped_scenario_runs_clean() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut seen = 0;
    for e in std::fs::read_dir(&dir).expect("scenarios dir").flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "json") {
            let sc = Scenario::from_file(&p).unwrap_or_else(|err| panic!("{}: {err}", p.display()));
            let r = run("x", &sc.scaled_to(sc.groups.iter().map(|g| g.agent_count()).sum::<usize>().min(2000)),
                &SimulateOptions { ticks: 100, threads: 2, audit_every: 10, ..SimulateOptions::default() })
                .unwrap_or_else(|err| panic!("{}: {err}", p.display()));
            assert_eq!(r.non_finite, 0, "{}", p.display());
            assert_eq!(r.out_of_bounds, 0, "{}", p.display());
            seen += 1;
        }
    }
    assert!(seen >= 5, "only {seen} scenarios found");
}

#[test]
fn the_series_gives_each_second_the_deepest_overlap_of_its_audits() {
    // Two packed blocks meeting head on (they touch after about 8 s), 12 s at 20 Hz: one row
    // per second.
    let sc = scenario("counterflow").scaled_to(200);
    let opts = |audit_every| SimulateOptions { ticks: 240, threads: 1, audit_every, series: true, ..SimulateOptions::default() };
    let every = run("counterflow", &sc, &opts(10)).expect("run");
    assert_eq!(every.series.iter().map(|r| r.second).collect::<Vec<_>>(), (1..=12).collect::<Vec<u64>>());
    let pens: Vec<f32> = every.series.iter().map(|r| r.max_penetration.expect("two audits a second")).collect();
    // The run's figure is the deepest of the seconds'.
    assert!(every.max_penetration > 0.0, "the crowd touched");
    assert_eq!(pens.iter().copied().fold(0.0, f32::max), every.max_penetration, "{pens:?}");
    // Audited every 2 s: odd seconds have no figure, even ones the audit at their end.
    let sparse = run("counterflow", &sc, &opts(40)).expect("run");
    let sparse_pens: Vec<Option<f32>> = sparse.series.iter().map(|r| r.max_penetration).collect();
    for (k, (p, full)) in sparse_pens.iter().zip(&pens).enumerate() {
        // Row k is second k + 1.
        if k % 2 == 0 {
            assert!(p.is_none(), "second {}: {sparse_pens:?}", k + 1);
        } else {
            assert!(p.is_some_and(|p| p <= *full), "second {}: {sparse_pens:?} vs {pens:?}", k + 1);
        }
    }
    assert_eq!(sparse.series[0].csv().rsplit(',').next(), Some(""), "an unaudited second's column is empty");
    // Not audited at all: no figure.
    assert!(run("counterflow", &sc, &opts(0)).expect("run").series.iter().all(|r| r.max_penetration.is_none()));
}

#[test]
fn coincident_agents_and_obstacles_dropped_on_agents_stay_finite() {
    let mut w = open_world();
    let sep = entry(Behavior::Separation(separation::SeparationParams { neighbor_radius: 2.0 }));
    let avoid = entry(Behavior::ObstacleAvoidance(obstacle_avoidance::ObstacleAvoidanceParams::default()));
    let spec = SpawnSpec { behaviors: vec![sep, avoid], ..SpawnSpec::new("g", 50, SpawnArea::Points(vec![Vec2::new(3.0, 3.0); 50])) };
    w.spawn(spec).expect("spawn");
    w.add_obstacle(Vec2::new(3.0, 3.0), 2.0).expect("obstacle");
    for _ in 0..200 {
        let s = w.step();
        assert_eq!(s.non_finite, 0);
    }
    let a = w.audit();
    assert_eq!(a.non_finite, 0);
    assert_eq!(a.obstacle_penetrations, 0);
    // Separation spread them out: far fewer overlapping pairs than the 1225 at the start.
    assert!(a.agent_overlaps < 200, "{a:?}");
}

/// ARCHITECTURE's contact invariant: with `solid_agents` on, two overlapping agents at rest
/// (no behaviour to move them) are pushed apart by half the overlap each and end touching, the
/// same whichever is stored (and spawned) first; with it off they stay where they are.
#[test]
fn an_overlapping_pair_ends_touching_in_either_order_and_only_when_solid() {
    let r = Limits::default().radius;
    let (a, b) = (Vec2::new(10.0, 5.0), Vec2::new(10.0 + 0.4 * r, 5.0));
    let mut ends = Vec::new();
    for first in [a, b] {
        let second = if first == a { b } else { a };
        let mut w = open_world();
        let i = spawn_one(&mut w, first, 0.0, 0.0, vec![]);
        let j = spawn_one(&mut w, second, 0.0, 0.0, vec![]);
        w.step();
        let (pi, pj) = (w.agent(i).expect("agent").position, w.agent(j).expect("agent").position);
        let gap = pi.distance(pj);
        assert!((gap - 2.0 * r).abs() <= 5e-3 * r, "first at {first:?}: {gap} apart, radii sum {}", 2.0 * r);
        // Half the overlap each: the midpoint stays.
        assert!((pi + pj - (a + b)).length() <= 1e-4, "first at {first:?}: moved off the midpoint: {pi:?} {pj:?}");
        let (left, right) = if pi.x < pj.x { (pi, pj) } else { (pj, pi) };
        ends.push((left, right));
    }
    assert_eq!(ends[0], ends[1], "the storage order changed where the pair ended");
    let mut w = World::new(WorldConfig { solid_agents: false, ..open_world().config().clone() }).expect("valid config");
    let i = spawn_one(&mut w, a, 0.0, 0.0, vec![]);
    let j = spawn_one(&mut w, b, 0.0, 0.0, vec![]);
    w.step();
    assert_eq!((w.agent(i).expect("agent").position, w.agent(j).expect("agent").position), (a, b), "not solid: no push");
}

// ---- property tests: no sequence of valid commands produces a non-finite state ----

fn finite_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        -1.0e3f32..1.0e3,
        Just(0.0f32),
        Just(f32::MIN_POSITIVE),
        Just(1.0e-40f32), // subnormal
        Just(-1.0e-40f32),
        Just(1.0e6f32),
        Just(-1.0e6f32),
    ]
}

fn any_f32() -> impl Strategy<Value = f32> {
    prop_oneof![finite_f32(), Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY), Just(1.0e38f32), Just(-1.0e38f32)]
}

fn vec2() -> impl Strategy<Value = Vec2> {
    (any_f32(), any_f32()).prop_map(|(x, y)| Vec2::new(x, y))
}

fn behavior() -> impl Strategy<Value = Behavior> {
    prop_oneof![
        vec2().prop_map(|t| Behavior::Seek(seek::SeekParams { target: Target::Point(t) })),
        (vec2(), any_f32()).prop_map(|(t, p)| Behavior::Flee(flee::FleeParams { target: Target::Point(t), panic_distance: p })),
        (vec2(), any_f32(), any_f32(), any_f32()).prop_map(|(t, a, b, c)| Behavior::Arrive(arrive::ArriveParams {
            target: Target::Point(t),
            tuning: arrive::ArriveTuning { target_radius: a, slow_radius: b, time_to_target: c }
        })),
        (any_f32(), any_f32(), any_f32()).prop_map(|(a, b, c)| Behavior::Wander(wander::WanderParams {
            wander_offset: a, wander_radius: b, wander_rate: c, ..wander::WanderParams::default()
        })),
        any_f32().prop_map(|r| Behavior::Separation(separation::SeparationParams { neighbor_radius: r })),
        (any_f32(), any_f32()).prop_map(|(a, b)| Behavior::ObstacleAvoidance(obstacle_avoidance::ObstacleAvoidanceParams {
            min_box_length: Some(a), braking_weight: b, lateral_base: 1.0
        })),
        (1u32..40, any_f32()).prop_map(|(t, m)| Behavior::Pursue(pursue::PursueParams { target: t, max_prediction: m })),
    ]
}

#[derive(Debug, Clone)]
enum Op {
    Cmd(Command),
    Step(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1usize..20, vec2(), any_f32(), any_f32(), any_f32()).prop_map(|(n, c, r, speed, ms)| Op::Cmd(Command::Spawn(SpawnSpec {
            limits: Limits { max_speed: ms, ..Limits::default() },
            initial_speed: speed,
            ..SpawnSpec::new("g", n, SpawnArea::Disc { center: c, radius: r })
        }))),
        (1u32..60).prop_map(|id| Op::Cmd(Command::Despawn(id))),
        (1u32..60, behavior(), any_f32()).prop_map(|(id, b, w)| Op::Cmd(Command::AddBehavior {
            agent: id, entry: BehaviorEntry { behavior: b, weight: w, priority: 0 }
        })),
        (1u32..60, proptest::collection::vec(behavior(), 0..4)).prop_map(|(id, bs)| Op::Cmd(Command::SetBehaviors {
            agent: id, entries: bs.into_iter().map(BehaviorEntry::new).collect()
        })),
        (vec2(), any_f32()).prop_map(|(c, r)| Op::Cmd(Command::AddObstacle { center: c, radius: r })),
        (vec2(), vec2()).prop_map(|(a, b)| Op::Cmd(Command::AddWall { a, b })),
        (1u8..10).prop_map(Op::Step),
    ]
}

/// Stack for the command-sequence property: the debug build of proptest's nested union of
/// command strategies needs more than the 2 MiB of a test thread.
const PROPERTY_STACK: usize = 64 << 20;

#[test]
fn no_command_sequence_produces_a_non_finite_or_out_of_bounds_state() {
    let run = || {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig { cases: 64, ..ProptestConfig::default() });
        let edges = prop_oneof![Just(EdgeRule::Clamp), Just(EdgeRule::Wrap), Just(EdgeRule::Bounce)];
        runner.run(&(proptest::collection::vec(op(), 1..40), edges), |(ops, edge)| {
            let cfg = WorldConfig { bounds: Bounds { min: Vec2::splat(-100.0), max: Vec2::splat(100.0) }, edge, ..WorldConfig::default() };
            let mut w = World::new(cfg).expect("config");
            for op in ops {
                match op {
                    Op::Cmd(c) => {
                        let before = exact_hash(&w);
                        let n = w.agents().len();
                        if w.apply(c).is_err() {
                            // A refused command changes nothing.
                            prop_assert_eq!(before, exact_hash(&w));
                            prop_assert_eq!(n, w.agents().len());
                        }
                    }
                    Op::Step(k) => {
                        for _ in 0..k {
                            let s = w.step();
                            prop_assert_eq!(s.non_finite, 0);
                        }
                    }
                }
                for a in w.agents() {
                    prop_assert!(a.position.is_finite() && a.velocity.is_finite() && a.orientation.is_finite() && a.angular_velocity.is_finite(), "{:?}", a);
                    prop_assert!(w.config().bounds.contains(a.position), "{:?} out of bounds", a.position);
                    prop_assert!(a.velocity.length() <= a.limits.max_speed * 1.0001 + 1e-6);
                }
            }
            Ok(())
        })
    };
    let outcome = std::thread::Builder::new().stack_size(PROPERTY_STACK).spawn(run).expect("spawn").join();
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("{e}"),
        Err(p) => std::panic::resume_unwind(p),
    }
}
