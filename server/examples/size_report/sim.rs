//! The trace, recorded from the real simulation.

use crate::Trace;
use std::path::Path;
use steer_proto::Rect;
use steerd::sim::{Command, SpawnArea, SpawnSpec};

/// The scenario the report records by default (10,000 wanderers).
pub const DEFAULT_SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/swarm-10k.json");

/// Builds the scenario at `path`, adds `resting` agents with no behaviours spread over its
/// bounds, runs `warmup` ticks, then records the agents' state (sorted by id) after each of the
/// next `ticks` ticks.
pub fn record(path: &Path, resting: usize, warmup: usize, ticks: usize) -> Result<Trace, String> {
    let scenario = steerd::scenario::Scenario::from_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut world = scenario.build().map_err(|e| format!("{}: {e}", path.display()))?;
    if resting > 0 {
        let b = &scenario.bounds;
        let area = SpawnArea::Rect { min: glam::Vec2::new(b.min.x, b.min.y), max: glam::Vec2::new(b.max.x, b.max.y) };
        world
            .apply(Command::Spawn(SpawnSpec::new("resting", resting, area)))
            .map_err(|e| format!("spawning the resting agents: {e}"))?;
    }
    for _ in 0..warmup {
        world.step();
    }
    let first_tick = world.tick();
    let mut states = Vec::with_capacity(ticks);
    for _ in 0..ticks {
        world.step();
        let mut state: Vec<_> = world.agents().iter().map(steerd::convert::sample).collect();
        state.sort_unstable_by_key(|a| a.id);
        states.push(state);
    }
    let b = &scenario.bounds;
    Ok(Trace {
        source: format!(
            "simulation: {} ({}), ticks {}..={} after {warmup} warm-up ticks",
            scenario.name,
            path.display(),
            first_tick + 1,
            first_tick + ticks as u64
        ),
        bounds: Rect { min_x: b.min.x, min_y: b.min.y, max_x: b.max.x, max_y: b.max.y },
        hz: scenario.tick_rate,
        first_tick: first_tick + 1,
        states,
    })
}
