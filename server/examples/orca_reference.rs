//! The cost of a simulated second on the circle: steerd beside an ORCA reference, in one
//! process, interleaved (BENCHMARKS.md, "Against ORCA").
//!
//! `cargo run --release -p steerd --example orca_reference -- [ROUNDS]` (default 3)
//!
//! The reference is RVO2's Circle example rebuilt on the `dodgy_2d` crate (a port of RVO2's
//! agent, ORCA lines and linear program): the same layout as `scenarios/circle.json` (N agents
//! on a circle of radius 0.8·N, each walking to its antipode; radius 1.5, top speed 2) with the
//! example's settings — a 0.25 s step, neighbour distance 15, at most 10 neighbours, time
//! horizons 10 s, preferred velocity towards the goal capped at unit length. Its neighbours come
//! from a uniform grid of 15-unit cells (RVO2 uses a k-d tree); its agents are stepped in
//! parallel on the same thread pool size as steerd's run. steerd runs `circle.json` through
//! `steerd simulate`'s code at its own 20 Hz.
//!
//! Both run the same simulated window from the start — 100 s at 1,000 agents, 15 s at 10,000,
//! the walk across the open ring before the central jam (as `scripts/crowd-figures.sh`) — and
//! the figure is wall-clock milliseconds per simulated second, median over the rounds.

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use dodgy_2d::{Agent, AvoidanceOptions, Vec2};
use rayon::prelude::*;
use steerd::scenario::Scenario;
use steerd::simulate::{run as simulate, SimulateOptions};

/// RVO2 Circle example's settings.
const STEP: f32 = 0.25;
const NEIGHBOR_DIST: f32 = 15.0;
const MAX_NEIGHBORS: usize = 10;
const TIME_HORIZON: f32 = 10.0;
const RADIUS: f32 = 1.5;
const MAX_SPEED: f32 = 2.0;

/// The reference world: agents, their goals, and the grid their neighbours are found in.
struct Reference {
    agents: Vec<Agent>,
    goals: Vec<Vec2>,
    /// Agent indices sorted by cell, and the first index of each cell (one extra at the end).
    sorted: Vec<u32>,
    starts: Vec<u32>,
    origin: Vec2,
    cols: usize,
    rows: usize,
}

impl Reference {
    fn circle(n: usize) -> Reference {
        let r = 0.8 * n as f32;
        let (mut agents, mut goals) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for i in 0..n {
            let a = std::f32::consts::TAU * i as f32 / n as f32;
            let p = Vec2::new(a.cos(), a.sin()) * r;
            agents.push(Agent { position: p, velocity: Vec2::ZERO, radius: RADIUS, avoidance_responsibility: 1.0 });
            goals.push(-p);
        }
        Reference { agents, goals, sorted: Vec::new(), starts: Vec::new(), origin: Vec2::ZERO, cols: 0, rows: 0 }
    }

    fn cell(&self, p: Vec2) -> (usize, usize) {
        let c = ((p - self.origin) / NEIGHBOR_DIST).floor();
        ((c.x.max(0.0) as usize).min(self.cols - 1), (c.y.max(0.0) as usize).min(self.rows - 1))
    }

    fn build_grid(&mut self) {
        let (mut lo, mut hi) = (Vec2::splat(f32::MAX), Vec2::splat(f32::MIN));
        for a in &self.agents {
            lo = lo.min(a.position);
            hi = hi.max(a.position);
        }
        self.origin = lo;
        self.cols = (((hi.x - lo.x) / NEIGHBOR_DIST) as usize + 1).max(1);
        self.rows = (((hi.y - lo.y) / NEIGHBOR_DIST) as usize + 1).max(1);
        let cells: Vec<usize> = self.agents.iter().map(|a| {
            let (x, y) = self.cell(a.position);
            y * self.cols + x
        }).collect();
        self.starts = vec![0; self.cols * self.rows + 1];
        for &c in &cells {
            self.starts[c + 1] += 1;
        }
        for i in 1..self.starts.len() {
            self.starts[i] += self.starts[i - 1];
        }
        let mut fill = self.starts.clone();
        self.sorted = vec![0; self.agents.len()];
        for (i, &c) in cells.iter().enumerate() {
            self.sorted[fill[c] as usize] = i as u32;
            fill[c] += 1;
        }
    }

    /// The at most [`MAX_NEIGHBORS`] nearest agents within [`NEIGHBOR_DIST`] of agent `i`.
    fn neighbours(&self, i: usize, out: &mut Vec<(f32, u32)>) {
        out.clear();
        let p = self.agents[i].position;
        let (cx, cy) = self.cell(p);
        for y in cy.saturating_sub(1)..=(cy + 1).min(self.rows - 1) {
            for x in cx.saturating_sub(1)..=(cx + 1).min(self.cols - 1) {
                let c = y * self.cols + x;
                for &j in &self.sorted[self.starts[c] as usize..self.starts[c + 1] as usize] {
                    let d2 = self.agents[j as usize].position.distance_squared(p);
                    if j as usize != i && d2 < NEIGHBOR_DIST * NEIGHBOR_DIST {
                        out.push((d2, j));
                    }
                }
            }
        }
        if out.len() > MAX_NEIGHBORS {
            out.select_nth_unstable_by(MAX_NEIGHBORS - 1, |a, b| a.0.total_cmp(&b.0));
            out.truncate(MAX_NEIGHBORS);
        }
    }

    fn step(&mut self) {
        self.build_grid();
        let options = AvoidanceOptions { obstacle_margin: RADIUS, time_horizon: TIME_HORIZON, obstacle_time_horizon: TIME_HORIZON };
        let this = &*self;
        let velocities: Vec<Vec2> = (0..this.agents.len())
            .into_par_iter()
            .map_init(Vec::new, |near, i| {
                this.neighbours(i, near);
                let neighbours: Vec<Cow<'_, Agent>> = near.iter().map(|&(_, j)| Cow::Borrowed(&this.agents[j as usize])).collect();
                let a = &this.agents[i];
                let mut preferred = this.goals[i] - a.position;
                if preferred.length_squared() > 1.0 {
                    preferred = preferred.normalize();
                }
                a.compute_avoiding_velocity(&neighbours, &[], preferred, MAX_SPEED, STEP, &options)
            })
            .collect();
        for (a, v) in self.agents.iter_mut().zip(velocities) {
            a.velocity = v;
            a.position += v * STEP;
        }
    }
}

/// Milliseconds per simulated second of the reference over `seconds` simulated seconds.
fn reference_ms(n: usize, threads: usize, seconds: f32) -> anyhow::Result<f64> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
    let mut world = Reference::circle(n);
    let steps = (seconds / STEP).round() as usize;
    let start = Instant::now();
    pool.install(|| {
        for _ in 0..steps {
            world.step();
        }
    });
    anyhow::ensure!(world.agents.iter().all(|a| a.position.is_finite()), "the reference produced a non-finite position");
    Ok(start.elapsed().as_secs_f64() * 1e3 / f64::from(seconds))
}

/// Milliseconds per simulated second of steerd's circle over `seconds`, and its state hash.
fn steerd_ms(sc: &Scenario, n: usize, threads: usize, seconds: f32) -> anyhow::Result<(f64, String)> {
    let rate = f64::from(sc.tick_rate);
    let ticks = (f64::from(seconds) * rate).round() as u64;
    let opts = SimulateOptions { ticks, agents: Some(n), threads, seed: None, audit_every: 0, series: false };
    let r = simulate("circle", sc, &opts)?;
    Ok((r.ns_per_agent_tick * r.agents as f64 * rate / 1e6, r.state_hash))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let rounds: usize = match std::env::args().nth(1) {
        Some(s) => s.parse().context("ROUNDS must be a positive whole number")?,
        None => 3,
    };
    anyhow::ensure!(rounds > 0, "ROUNDS must be at least 1");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/circle.json");
    let sc = Scenario::from_file(&path).with_context(|| path.display().to_string())?;
    let cases = [(1000usize, 100.0f32), (10_000, 15.0)];
    let mut ours: Vec<Vec<f64>> = vec![Vec::new(); 4];
    let mut theirs: Vec<Vec<f64>> = vec![Vec::new(); 4];
    let mut hashes: Vec<Vec<String>> = vec![Vec::new(); 2];
    for round in 0..rounds {
        for (ci, &(n, seconds)) in cases.iter().enumerate() {
            for threads in [1usize, 2] {
                let k = ci * 2 + threads - 1;
                // Alternate which goes first, so neither always runs on a warmer machine.
                let (s, r) = if round % 2 == 0 {
                    let s = steerd_ms(&sc, n, threads, seconds)?;
                    (s, reference_ms(n, threads, seconds)?)
                } else {
                    let r = reference_ms(n, threads, seconds)?;
                    (steerd_ms(&sc, n, threads, seconds)?, r)
                };
                ours[k].push(s.0);
                hashes[ci].push(s.1);
                theirs[k].push(r);
                eprintln!("round {}: {n} agents, {threads} threads: steerd {:.1} ms, reference {r:.1} ms per simulated s", round + 1, s.0);
            }
        }
    }
    println!("| agents | threads | simulated s | steerd ms per simulated s | ORCA reference ms per simulated s | steerd / reference | steerd 2 vs 1 thread | reference 2 vs 1 thread | steerd same hash (1, 2 threads) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (ci, &(n, seconds)) in cases.iter().enumerate() {
        let (o1, r1) = (median(&mut ours[ci * 2]), median(&mut theirs[ci * 2]));
        let (o2, r2) = (median(&mut ours[ci * 2 + 1]), median(&mut theirs[ci * 2 + 1]));
        hashes[ci].dedup();
        let same = if hashes[ci].len() == 1 { "yes" } else { "NO" };
        println!("| {n} | 1 | {seconds} | {o1:.1} | {r1:.1} | {:.2}× | | | {same} |", o1 / r1);
        println!("| {n} | 2 | {seconds} | {o2:.1} | {r2:.1} | {:.2}× | {:.2}× | {:.2}× | {same} |", o2 / r2, o1 / o2, r1 / r2);
    }
    Ok(())
}
