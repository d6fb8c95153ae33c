//! `steerd simulate`: runs a scenario headless as fast as it can and reports timing, the final
//! state hash and safety counters.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use crate::scenario::{Scenario, ScenarioError};
use crate::sim::behaviors::{Behavior, Target};
use crate::sim::hash::state_hash;
use crate::sim::world::{Audit, World};

/// Options of one run.
#[derive(Debug, Clone)]
pub struct SimulateOptions {
    /// Ticks to run.
    pub ticks: u64,
    /// Scale the scenario to this many agents (same density).
    pub agents: Option<usize>,
    /// Worker threads for the tick.
    pub threads: usize,
    /// Override the scenario's seed.
    pub seed: Option<u64>,
    /// Audit the state every this many ticks (0 = never; penetrations and overlaps are then 0
    /// because unmeasured, and the report says `audited: false`).
    pub audit_every: u64,
    /// Keep one [`SeriesRow`] per simulated second in the report.
    pub series: bool,
}

impl Default for SimulateOptions {
    fn default() -> Self {
        SimulateOptions { ticks: 1000, agents: None, threads: 1, seed: None, audit_every: 1, series: false }
    }
}

/// Percentiles of tick durations, milliseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct TickMs {
    pub p50: f64,
    pub p99: f64,
    pub mean: f64,
    pub max: f64,
}

/// The report (`--json` prints it as one object).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub scenario: String,
    pub agents: usize,
    pub ticks: u64,
    pub threads: usize,
    pub seed: u64,
    pub tick_ms: TickMs,
    /// Mean tick time per agent, nanoseconds.
    pub ns_per_agent_tick: f64,
    /// FNV-1a 64 of the final quantized state, hex.
    pub state_hash: String,
    /// Event counts by kind.
    pub events: BTreeMap<String, u64>,
    /// Agents within their arrive target radius at the end, or whose MoveTo order reached its
    /// stop point and who stand within the order's tolerance of it at the end.
    pub arrived: usize,
    /// Agents whose MoveTo order gave up short of its stop point (never counted as arrived).
    pub gave_up: usize,
    /// How far from their stop points those agents gave up, largest first (at most 20).
    pub gave_up_short_by: Vec<f32>,
    /// Arrivals per simulated minute: `arrived` over the time until the last agent arrived
    /// (the whole run if some never did); null with no MoveTo orders or no arrival.
    pub throughput_per_min: Option<f64>,
    /// Agents that have an arrive/MoveTo target.
    pub with_target: usize,
    /// Agent-ticks with the agent's centre inside an obstacle.
    pub obstacle_penetrations: u64,
    /// Smallest gap between an agent's edge and an obstacle's edge seen (null with no obstacles).
    pub min_obstacle_clearance: Option<f32>,
    /// Agent steps that crossed a wall segment.
    pub wall_crossings: u64,
    /// Times the integrator's safety net had to push an agent out of an obstacle or wall.
    pub contacts: u64,
    /// Agent-pair-ticks closer than half the sum of radii.
    pub agent_overlaps: u64,
    /// Largest radii sum minus centre distance over all agent pairs and audited ticks, world
    /// units (0 when no two agents ever touched).
    pub max_penetration: f32,
    /// Agent pairs overlapping by more than 1 % of their radii sum, summed over audited ticks.
    pub overlap_pair_ticks: u64,
    /// Agents with a MoveTo order or arrive target that have not arrived and whose position
    /// moved less than one radius over the last 10 s of the run (0 for runs under 10 s).
    pub stuck_agents: usize,
    /// Largest distance of an agent from its MoveTo target (or arrive target) at the end.
    pub max_goal_distance: Option<f32>,
    /// Non-finite numbers seen (must be 0).
    pub non_finite: u64,
    /// Agents outside the bounds at an audit (must be 0).
    pub out_of_bounds: u64,
    /// Whether the safety counters were measured.
    pub audited: bool,
    /// MoveTo navigation figures (null when no MoveTo was issued).
    pub nav: Option<NavReport>,
    /// Largest orientation change in one tick of an agent whose MoveTo order was already done
    /// (radians; the jitter of arrived agents; null when none arrived).
    pub arrived_max_turn: Option<f32>,
    /// Tick at which every MoveTo agent had arrived (none gave up; null if some never did).
    pub all_arrived_tick: Option<u64>,
    /// One row per simulated second (with `--series`; empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<SeriesRow>,
}

/// How the crowd flowed in one simulated second (the state at its end).
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct SeriesRow {
    /// Simulated seconds since the start.
    pub second: u64,
    /// Agents arrived, as the report counts them.
    pub arrived: usize,
    /// Agents whose MoveTo gave up.
    pub gave_up: usize,
    /// Agents on their way whose MoveTo has made no progress for 10 s or more.
    pub stuck: usize,
    /// Agents still on their way.
    pub on_the_way: usize,
    /// Mean speed of the agents on their way, units/s (0 with none).
    pub mean_speed: f32,
    /// Largest overlap of two agents (radii sum minus centre distance, world units) over the
    /// ticks of this second that were audited (`--audit-every`); null when none was.
    pub max_penetration: Option<f32>,
}

impl SeriesRow {
    /// The CSV header of [`SeriesRow::csv`].
    pub const CSV_HEADER: &'static str = "second,arrived,gave_up,stuck,on_the_way,mean_speed,max_penetration";

    /// The row as a CSV line (`max_penetration` empty when no tick of the second was audited).
    pub fn csv(&self) -> String {
        let pen = self.max_penetration.map_or(String::new(), |p| format!("{p:.4}"));
        format!("{},{},{},{},{},{:.4},{pen}", self.second, self.arrived, self.gave_up, self.stuck, self.on_the_way, self.mean_speed)
    }

    /// The row for the state of `world`; `max_penetration` is the largest of the second's audits.
    pub fn of(world: &World, max_penetration: Option<f32>) -> SeriesRow {
        let rate = world.config().tick_rate;
        let (mut on_the_way, mut stuck, mut speed) = (0, 0, 0.0f64);
        for a in world.agents_unordered() {
            if let Some(o) = a.active_order() {
                on_the_way += 1;
                stuck += usize::from(o.stuck(rate));
                speed += f64::from(a.speed());
            }
        }
        let (arrived, _) = arrived(world);
        SeriesRow {
            second: (world.tick() as f64 / f64::from(rate)).round() as u64,
            arrived,
            gave_up: gave_up(world).len(),
            stuck,
            on_the_way,
            mean_speed: if on_the_way > 0 { (speed / on_the_way as f64) as f32 } else { 0.0 },
            max_penetration,
        }
    }
}

/// Flow-field and navigation-grid figures of a run.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct NavReport {
    /// Navigation grid columns × rows.
    pub grid_cells: usize,
    /// Flow fields built (cache misses).
    pub fields_built: u64,
    /// Agent-lookups served from the cache.
    pub cache_hits: u64,
    /// hits / (hits + builds).
    pub cache_hit_rate: f64,
    /// Fields evicted by the LRU bound.
    pub evictions: u64,
    /// Bytes held by the grid, the cached fields and the formations at the end.
    pub bytes: usize,
}

/// Errors of a run.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The scenario failed to load.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The thread pool could not be built.
    #[error("cannot start {0} worker threads: {1}")]
    Threads(usize, String),
}

/// Counts agents within their arrive target radius, or whose MoveTo order reached its stop point
/// and who stand within its tolerance of it (and how many have such a target).
pub fn arrived(world: &World) -> (usize, usize) {
    let mut with = 0;
    let mut done = 0;
    for (_, d) in world.agents_unordered().iter().filter_map(goal) {
        with += 1;
        done += usize::from(d);
    }
    (done, with)
}

/// The goal of an agent: its MoveTo target, else its arrive target point, with whether it has
/// arrived (as [`arrived`] counts).
fn goal(a: &crate::sim::Agent) -> Option<(glam::Vec2, bool)> {
    if let Some(o) = &a.order {
        return Some((o.target, o.done && !o.gave_up && a.position.distance(o.stop_point) <= o.tolerance));
    }
    a.behaviors.entries().iter().find_map(|e| match &e.behavior {
        Behavior::Arrive(p) => match p.target {
            Target::Point(t) => Some((t, a.position.distance(t) <= p.tuning.target_radius)),
            Target::Agent(_) => None,
        },
        _ => None,
    })
}

/// How far from their stop points the agents whose MoveTo gave up stopped, largest first.
pub fn gave_up(world: &World) -> Vec<f32> {
    let mut v: Vec<f32> = world.agents_unordered().iter().filter_map(|a| a.order.as_ref().filter(|o| o.gave_up).map(|o| o.short_by)).collect();
    v.sort_by(|a, b| b.total_cmp(a));
    v
}

/// Agents with a goal, not arrived, that moved less than their radius since `earlier` (empty:
/// the run was shorter than the window, and none count).
pub fn stuck_agents(world: &World, earlier: &BTreeMap<u32, glam::Vec2>) -> usize {
    world
        .agents()
        .iter()
        .filter(|a| {
            let Some((_, done)) = goal(a) else { return false };
            !done && earlier.get(&a.id).is_some_and(|p| p.distance(a.position) < a.limits.radius)
        })
        .count()
}

/// Largest distance from an agent to its goal (None when no agent has one).
pub fn max_goal_distance(world: &World) -> Option<f32> {
    world.agents().iter().filter_map(|a| goal(a).map(|(g, _)| a.position.distance(g))).reduce(f32::max)
}

/// Runs `scenario` and returns the report. `name` labels it.
pub fn run(name: &str, scenario: &Scenario, opts: &SimulateOptions) -> Result<Report, SimulateError> {
    let mut sc = match opts.agents {
        Some(n) => scenario.scaled_to(n),
        None => scenario.clone(),
    };
    if let Some(s) = opts.seed {
        sc.seed = s;
    }
    let threads = opts.threads.max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| SimulateError::Threads(threads, e.to_string()))?;
    let mut world = sc.build()?;
    let mut r = Report::empty(name, &world, opts, threads, sc.seed);
    let mut watch = Watch::new(opts, sc.tick_rate);
    watch.count_events(&mut world);
    // The whole run inside the pool: the calling thread is its worker, so no tick's timing
    // includes handing the step to another thread and waking back (a futex round trip).
    pool.install(|| -> Result<(), SimulateError> {
        for t in 0..opts.ticks {
            if t > 0 {
                let now = world.tick();
                sc.apply_orders(&mut world, now)?;
            }
            watch.before_step(&world, t, opts.ticks);
            let start = Instant::now();
            let stats = world.step();
            watch.times.push(start.elapsed().as_secs_f64() * 1e3);
            r.wall_crossings += u64::from(stats.wall_crossings);
            r.contacts += u64::from(stats.contacts);
            r.non_finite += u64::from(stats.non_finite);
            if opts.audit_every > 0 && (t + 1) % opts.audit_every == 0 {
                let audit = world.audit();
                r.add_audit(&audit);
                watch.second_penetration = Some(watch.second_penetration.map_or(audit.max_penetration, |m: f32| m.max(audit.max_penetration)));
            }
            watch.after_step(&mut world, &mut r);
        }
        Ok(())
    })?;
    watch.finish(&world, &mut r);
    Ok(r)
}

impl Report {
    /// A report with nothing measured yet.
    fn empty(name: &str, world: &World, opts: &SimulateOptions, threads: usize, seed: u64) -> Report {
        Report {
            scenario: name.to_string(),
            agents: world.agents().len(),
            ticks: opts.ticks,
            threads,
            seed,
            tick_ms: TickMs { p50: 0.0, p99: 0.0, mean: 0.0, max: 0.0 },
            ns_per_agent_tick: 0.0,
            state_hash: String::new(),
            events: BTreeMap::new(),
            arrived: 0,
            gave_up: 0,
            gave_up_short_by: Vec::new(),
            throughput_per_min: None,
            with_target: 0,
            obstacle_penetrations: 0,
            min_obstacle_clearance: None,
            wall_crossings: 0,
            contacts: 0,
            agent_overlaps: 0,
            max_penetration: 0.0,
            overlap_pair_ticks: 0,
            stuck_agents: 0,
            max_goal_distance: None,
            non_finite: 0,
            out_of_bounds: 0,
            audited: opts.audit_every > 0,
            nav: None,
            arrived_max_turn: None,
            all_arrived_tick: None,
            series: Vec::new(),
        }
    }

    /// Adds one audit's counts.
    fn add_audit(&mut self, a: &Audit) {
        self.obstacle_penetrations += u64::from(a.obstacle_penetrations);
        self.agent_overlaps += u64::from(a.agent_overlaps);
        self.overlap_pair_ticks += u64::from(a.overlap_pairs);
        self.max_penetration = self.max_penetration.max(a.max_penetration);
        self.non_finite += u64::from(a.non_finite);
        self.out_of_bounds += u64::from(a.out_of_bounds);
        if a.min_obstacle_clearance.is_finite() {
            self.min_obstacle_clearance = Some(self.min_obstacle_clearance.map_or(a.min_obstacle_clearance, |m| m.min(a.min_obstacle_clearance)));
        }
    }
}

/// What a run watches from tick to tick (besides the step's own counts).
struct Watch {
    /// Each step's duration, ms.
    times: Vec<f64>,
    /// Events by kind.
    events: BTreeMap<String, u64>,
    /// Orientation before the step of each agent whose order is done (NaN for the others).
    last_orient: Vec<f32>,
    /// Ticks in 10 simulated seconds: `stuck_agents` compares positions this long before the end.
    window: u64,
    /// Positions (by id) `window` ticks before the end.
    earlier: BTreeMap<u32, glam::Vec2>,
    /// Ticks per simulated second (a series row each).
    per_second: u64,
    tick_rate: f32,
    series: bool,
    /// Largest `max_penetration` of the audits since the last series row (None: none).
    second_penetration: Option<f32>,
    arrived_max_turn: Option<f32>,
    all_arrived_tick: Option<u64>,
}

impl Watch {
    fn new(opts: &SimulateOptions, tick_rate: f32) -> Watch {
        Watch {
            times: Vec::with_capacity(opts.ticks as usize),
            events: BTreeMap::new(),
            last_orient: Vec::new(),
            window: (10.0 * f64::from(tick_rate)).round() as u64,
            earlier: BTreeMap::new(),
            per_second: f64::from(tick_rate).round().max(1.0) as u64,
            tick_rate,
            series: opts.series,
            second_penetration: None,
            arrived_max_turn: None,
            all_arrived_tick: None,
        }
    }

    fn count_events(&mut self, world: &mut World) {
        for e in world.drain_events() {
            *self.events.entry(e.kind().to_string()).or_default() += 1;
        }
    }

    /// Before step `t` of `ticks`.
    fn before_step(&mut self, world: &World, t: u64, ticks: u64) {
        if ticks >= self.window && t == ticks - self.window {
            self.earlier = world.agents().iter().map(|a| (a.id, a.position)).collect();
        }
        self.last_orient.clear();
        self.last_orient
            .extend(world.agents().iter().map(|a| if a.order.as_ref().is_some_and(|o| o.done) { a.orientation } else { f32::NAN }));
    }

    fn after_step(&mut self, world: &mut World, r: &mut Report) {
        if self.last_orient.len() == world.agents().len() {
            for (a, &before) in world.agents().iter().zip(&self.last_orient) {
                if before.is_finite() {
                    let turn = crate::sim::math::wrap_angle(a.orientation - before).abs();
                    self.arrived_max_turn = Some(self.arrived_max_turn.map_or(turn, |m: f32| m.max(turn)));
                }
            }
        }
        let agents = world.agents_unordered();
        let ordered = agents.iter().filter(|a| a.order.is_some()).count();
        if self.all_arrived_tick.is_none() && ordered > 0 && agents.iter().all(|a| a.order.as_ref().is_none_or(|o| o.done && !o.gave_up)) {
            self.all_arrived_tick = Some(world.tick());
        }
        if self.series && world.tick() % self.per_second == 0 {
            r.series.push(SeriesRow::of(world, self.second_penetration.take()));
        }
        self.count_events(world);
    }

    /// Fills the report's end-of-run figures.
    fn finish(mut self, world: &World, r: &mut Report) {
        r.tick_ms = percentiles(&mut self.times);
        r.agents = world.agents().len();
        r.ns_per_agent_tick = if r.agents > 0 { r.tick_ms.mean * 1e6 / r.agents as f64 } else { 0.0 };
        r.state_hash = format!("{:016x}", state_hash(world));
        r.events = self.events;
        (r.arrived, r.with_target) = arrived(world);
        let short = gave_up(world);
        r.gave_up = short.len();
        r.gave_up_short_by = short.into_iter().take(20).collect();
        let ordered = world.agents_unordered().iter().any(|a| a.order.is_some());
        let minutes = self.all_arrived_tick.unwrap_or(world.tick()) as f64 / f64::from(self.tick_rate) / 60.0;
        r.throughput_per_min = (ordered && r.arrived > 0 && minutes > 0.0).then(|| r.arrived as f64 / minutes);
        r.stuck_agents = stuck_agents(world, &self.earlier);
        r.max_goal_distance = max_goal_distance(world);
        r.arrived_max_turn = self.arrived_max_turn;
        r.all_arrived_tick = self.all_arrived_tick;
        r.nav = world.nav().map(|n| {
            let st = n.cache.stats();
            let (c, rws) = n.grid.dims();
            NavReport {
                grid_cells: c as usize * rws as usize,
                fields_built: st.builds,
                cache_hits: st.hits,
                cache_hit_rate: st.hit_rate(),
                evictions: st.evictions,
                bytes: n.bytes(),
            }
        });
    }
}

/// p50, p99, mean and max of `v` (sorted in place).
pub fn percentiles(v: &mut [f64]) -> TickMs {
    if v.is_empty() {
        return TickMs { p50: 0.0, p99: 0.0, mean: 0.0, max: 0.0 };
    }
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    TickMs { p50: at(0.5), p99: at(0.99), mean: v.iter().sum::<f64>() / v.len() as f64, max: v[v.len() - 1] }
}

impl Report {
    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let mut row = |k: &str, v: String| s.push_str(&format!("{k:<24} {v}\n"));
        row("scenario", self.scenario.clone());
        row("agents", self.agents.to_string());
        row("ticks", self.ticks.to_string());
        row("threads", self.threads.to_string());
        row("seed", self.seed.to_string());
        row("tick ms p50/p99/mean", format!("{:.3} / {:.3} / {:.3}", self.tick_ms.p50, self.tick_ms.p99, self.tick_ms.mean));
        row("ns per agent-tick", format!("{:.1}", self.ns_per_agent_tick));
        row("state_hash", self.state_hash.clone());
        row("events", format!("{:?}", self.events));
        row("arrived", format!("{} of {}", self.arrived, self.with_target));
        row("gave_up", format!("{} (short by {})", self.gave_up, self.gave_up_short_by.iter().map(|d| format!("{d:.2}")).collect::<Vec<_>>().join(", ")));
        row("throughput", self.throughput_per_min.map_or("-".into(), |t| format!("{t:.1} arrivals per simulated minute")));
        row("obstacle_penetrations", self.obstacle_penetrations.to_string());
        row("min_obstacle_clearance", self.min_obstacle_clearance.map_or("-".into(), |c| format!("{c:.3}")));
        row("wall_crossings", self.wall_crossings.to_string());
        row("contacts (safety net)", self.contacts.to_string());
        row("agent_overlaps", self.agent_overlaps.to_string());
        row("max_penetration", format!("{:.4}", self.max_penetration));
        row("overlap_pair_ticks", self.overlap_pair_ticks.to_string());
        row("stuck_agents", self.stuck_agents.to_string());
        row("max_goal_distance", self.max_goal_distance.map_or("-".into(), |d| format!("{d:.3}")));
        row("non_finite", self.non_finite.to_string());
        row("out_of_bounds", self.out_of_bounds.to_string());
        row("audited", self.audited.to_string());
        row("all arrived at tick", self.all_arrived_tick.map_or("-".into(), |t| t.to_string()));
        row("arrived max turn/tick", self.arrived_max_turn.map_or("-".into(), |t| format!("{t:.6} rad")));
        if let Some(n) = &self.nav {
            row("nav grid cells", n.grid_cells.to_string());
            row("flow fields built", n.fields_built.to_string());
            row("flow cache hit rate", format!("{:.5} ({} hits)", n.cache_hit_rate, n.cache_hits));
            row("nav memory", format!("{} bytes", n.bytes));
        }
        s
    }
}
