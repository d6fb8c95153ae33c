//! Synthetic trace (`--synthetic`): Millington wander kinematics for many agents.
//!
//! The report's default trace comes from the real simulation (`sim.rs`);
//! this generator remains for a trace with a resting cohort and no
//! obstacles, separation or world wrap-around. Each agent keeps
//! a wander orientation that is jittered by `rate · (r1 - r2)` per tick; the
//! wander target sits on a circle of `radius` whose centre is `offset` ahead
//! of the agent; the agent accelerates at `max_accel` towards it, then
//! `v += a·dt`, `|v| <= max_speed`, `p += v·dt`, orientation = heading of v.
//! A fraction of agents rests (zero velocity, fixed pose) the whole time.

use crate::Trace;
use steer_proto::{AgentSample, Rect};

/// The synthetic trace with default parameters over a 1000 × 1000 world.
pub fn synthetic(agents: u32, ticks: usize, seed: u64) -> Trace {
    let p = WanderParams::default();
    let h = p.half_extent;
    Trace {
        source: format!(
            "synthetic wander generator (--synthetic): {:.0} % resting, no obstacles or separation, seed {seed:#x}",
            p.resting_fraction * 100.0
        ),
        bounds: Rect { min_x: -h, min_y: -h, max_x: h, max_y: h },
        hz: 1.0 / p.dt,
        first_tick: 0,
        states: generate(agents, ticks, p, seed),
    }
}

/// Wander parameters (defaults from the brief).
#[derive(Debug, Clone, Copy)]
pub struct WanderParams {
    pub max_speed: f32,
    pub max_accel: f32,
    pub offset: f32,
    pub radius: f32,
    pub rate: f32,
    pub dt: f32,
    pub resting_fraction: f32,
    /// Agents start uniformly in `[-half_extent, half_extent]²`.
    pub half_extent: f32,
}

impl Default for WanderParams {
    fn default() -> Self {
        WanderParams {
            max_speed: 5.0,
            max_accel: 10.0,
            offset: 1.5,
            radius: 1.0,
            rate: 0.5,
            dt: 0.05,
            resting_fraction: 0.2,
            half_extent: 500.0,
        }
    }
}

/// SplitMix64: small, seeded, reproducible.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }
}

struct Walker {
    sample: AgentSample,
    wander: f32,
    resting: bool,
}

/// `ticks` snapshots of `agents` agents (ids 0..agents, sorted), one per tick.
pub fn generate(agents: u32, ticks: usize, p: WanderParams, seed: u64) -> Vec<Vec<AgentSample>> {
    let mut rng = Rng::new(seed);
    let tau = std::f32::consts::TAU;
    let mut walkers: Vec<Walker> = (0..agents)
        .map(|id| {
            let resting = rng.unit() < p.resting_fraction;
            let dir = rng.range(0.0, tau);
            let speed = if resting { 0.0 } else { rng.range(0.0, p.max_speed) };
            Walker {
                sample: AgentSample {
                    id,
                    group: (id % 4) as u16,
                    pos: [rng.range(-p.half_extent, p.half_extent), rng.range(-p.half_extent, p.half_extent)],
                    vel: [speed * dir.cos(), speed * dir.sin()],
                    orientation: dir,
                },
                wander: rng.range(-std::f32::consts::PI, std::f32::consts::PI),
                resting,
            }
        })
        .collect();
    let mut out = Vec::with_capacity(ticks);
    for _ in 0..ticks {
        for w in walkers.iter_mut().filter(|w| !w.resting) {
            let s = &mut w.sample;
            w.wander += (rng.unit() - rng.unit()) * p.rate;
            let target_orient = w.wander + s.orientation;
            let (oc, os) = (s.orientation.cos(), s.orientation.sin());
            let target = [
                s.pos[0] + p.offset * oc + p.radius * target_orient.cos(),
                s.pos[1] + p.offset * os + p.radius * target_orient.sin(),
            ];
            let d = [target[0] - s.pos[0], target[1] - s.pos[1]];
            let len = (d[0] * d[0] + d[1] * d[1]).sqrt().max(1e-6);
            let acc = [d[0] / len * p.max_accel, d[1] / len * p.max_accel];
            s.vel = [s.vel[0] + acc[0] * p.dt, s.vel[1] + acc[1] * p.dt];
            let speed = (s.vel[0] * s.vel[0] + s.vel[1] * s.vel[1]).sqrt();
            if speed > p.max_speed {
                s.vel = [s.vel[0] / speed * p.max_speed, s.vel[1] / speed * p.max_speed];
            }
            s.pos = [s.pos[0] + s.vel[0] * p.dt, s.pos[1] + s.vel[1] * p.dt];
            if speed > 1e-6 {
                s.orientation = s.vel[1].atan2(s.vel[0]);
            }
        }
        out.push(walkers.iter().map(|w| w.sample).collect());
    }
    out
}
