//! What a spawn may put into a world, so that no request makes the world's ticks cost
//! agents² (issue 15: a world must answer within a tick however it is driven).
//!
//! The sim's contact pass (`solid_agents`) looks, for every agent, at every agent within its
//! radius plus the reach of the largest radius and top speed any agent of the world was ever
//! spawned with, and relaxes the overlapping pairs up to 32 rounds a tick. Its work per tick is
//! therefore agents × neighbours-in-reach × rounds, and a spawn can make that agents²:
//! - a pile: schemathesis spawned agents into a rectangle lying almost wholly outside a 200×200
//!   world; the sim clamps them onto its edge, nearly all onto one corner. 6,400 agents on one
//!   spot made a tick take minutes, and the world answered nothing meanwhile (test 12's
//!   unanswered `POST /worlds/0/agents` and `/load`);
//! - one huge or fast agent: its radius or speed widens *every* agent's query, for good
//!   (one agent with `max_speed` 1e6 took a world of 12,000 wanderers from 20 to < 1 tick/s);
//! - a crowd larger than its world: agents whose discs cover the world many times over
//!   can never stop overlapping (4,000 agents of radius 1,000 in a 200×200 world: 30 s a tick).
//!
//! So every spawn (REST, WebSocket, scenario groups on load, reset and create) is checked here
//! first, each bound a setting (`limits.max_agent_radius`, `max_agent_speed`,
//! `max_spawn_overlaps`, `max_agent_cover`), and refused with `invalid_field` naming the field.
//! Replays are not checked: they re-run what was admitted when it was recorded.

use glam::Vec2;

use crate::config::LimitSettings;
use crate::scenario::Scenario;
use crate::sim::error::SimError;
use crate::sim::spatial::GridShape;
use crate::sim::view::Bounds;
use crate::sim::world::{SpawnArea, SpawnSpec, World, WorldConfig};

/// The bounds (the `limits.max_agent_*`, `max_spawn_overlaps`, `max_static_cells` and
/// `max_spawn` settings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Crowding {
    /// Largest agent radius.
    pub max_agent_radius: f32,
    /// Largest agent top speed, units/s.
    pub max_agent_speed: f32,
    /// Most pairs of agents one spawn may start overlapping.
    pub max_spawn_overlaps: u64,
    /// Most area the world's agents may cover, as a multiple of the world's area.
    pub max_agent_cover: f32,
    /// Most entries of the world's obstacle and wall index (see [`static_shape`]).
    pub max_static_cells: u64,
    /// Most agents one spawn request may create (`limits.max_spawn`): a scenario group of
    /// given points is checked in runs of this many, as the spawns that placed them were.
    pub max_spawn: usize,
}

impl From<&LimitSettings> for Crowding {
    fn from(l: &LimitSettings) -> Self {
        Crowding {
            max_agent_radius: l.max_agent_radius,
            max_agent_speed: l.max_agent_speed,
            max_spawn_overlaps: l.max_spawn_overlaps,
            max_agent_cover: l.max_agent_cover,
            max_static_cells: l.max_static_cells,
            max_spawn: l.max_spawn,
        }
    }
}

impl Default for Crowding {
    fn default() -> Self {
        Crowding::from(&LimitSettings::default())
    }
}

/// The area the world's agents cover: the sum of π·radius².
pub fn cover(world: &World) -> f64 {
    world.agents_unordered().iter().map(|a| disc(a.limits.radius)).sum()
}

fn disc(r: f32) -> f64 {
    std::f64::consts::PI * f64::from(r) * f64::from(r)
}

/// Checks one spawn into a world of `bounds` whose agents cover `cover_now` (see [`cover`]);
/// returns the cover after it. Non-finite values pass through: the sim names them.
pub fn check_spawn(spec: &SpawnSpec, bounds: Bounds, cover_now: f64, c: &Crowding) -> Result<f64, SimError> {
    let r = spec.limits.radius;
    if r > c.max_agent_radius {
        return Err(SimError::invalid("limits.radius", format!("must be at most {} (limits.max_agent_radius)", c.max_agent_radius)));
    }
    if spec.limits.max_speed > c.max_agent_speed {
        return Err(SimError::invalid("limits.max_speed", format!("must be at most {} (limits.max_agent_speed)", c.max_agent_speed)));
    }
    let (count, lo, hi) = match &spec.area {
        SpawnArea::Rect { min, max } => (spec.count, *min, *max),
        SpawnArea::Disc { center, radius } | SpawnArea::Ring { center, radius } => {
            (spec.count, *center - Vec2::splat(*radius), *center + Vec2::splat(*radius))
        }
        SpawnArea::Points(ps) => {
            let lo = ps.iter().fold(Vec2::splat(f32::INFINITY), |a, p| a.min(*p));
            let hi = ps.iter().fold(Vec2::splat(f32::NEG_INFINITY), |a, p| a.max(*p));
            (ps.len(), lo, hi)
        }
    };
    if count == 0 || !(lo.is_finite() && hi.is_finite() && r.is_finite() && r > 0.0) || hi.x < lo.x || hi.y < lo.y {
        // Nothing placed, or a value the sim refuses naming its field.
        return Ok(cover_now);
    }
    // Agents placed outside the bounds are clamped onto the edge: on top of each other.
    if lo.x < bounds.min.x || lo.y < bounds.min.y || hi.x > bounds.max.x || hi.y > bounds.max.y {
        return Err(SimError::invalid(
            "area",
            format!(
                "must lie inside the world's bounds ({}..{} × {}..{}): agents placed outside are clamped onto its edge, on top of each other",
                bounds.min.x, bounds.max.x, bounds.min.y, bounds.max.y
            ),
        ));
    }
    // Overlapping pairs at the start, from the density over the area the discs can occupy
    // (the area grown by a radius): 2π·r²·n² / footprint, at most n(n−1)/2 (all on one spot).
    let n = count as f64;
    let rr = f64::from(r);
    let (w, h) = (f64::from(hi.x - lo.x), f64::from(hi.y - lo.y));
    let footprint = match &spec.area {
        SpawnArea::Disc { radius, .. } => std::f64::consts::PI * (f64::from(*radius) + rr).powi(2),
        // Evenly spaced along the circle: a band one diameter wide.
        SpawnArea::Ring { radius, .. } => {
            ((2.0 * std::f64::consts::PI * f64::from(*radius) + 2.0 * rr) * 2.0 * rr).min(std::f64::consts::PI * (f64::from(*radius) + rr).powi(2))
        }
        _ => (w + 2.0 * rr) * (h + 2.0 * rr),
    };
    let pairs = (2.0 * std::f64::consts::PI * rr * rr * n * n / footprint).min(n * (n - 1.0) / 2.0);
    if pairs > c.max_spawn_overlaps as f64 {
        return Err(SimError::invalid(
            "count",
            format!(
                "{count} agents of radius {r} in this area would start with about {pairs:.0} overlapping pairs (limits.max_spawn_overlaps {}): spread them over a larger area or spawn fewer",
                c.max_spawn_overlaps
            ),
        ));
    }
    let after = cover_now + n * disc(r);
    let size = bounds.size();
    let world_area = f64::from(size.x) * f64::from(size.y);
    if after > f64::from(c.max_agent_cover) * world_area {
        return Err(SimError::invalid(
            "count",
            format!(
                "the world's agents would cover {:.2}× its area (limits.max_agent_cover {}): they could never stop overlapping; spawn fewer or smaller agents",
                after / world_area,
                c.max_agent_cover
            ),
        ));
    }
    Ok(after)
}

/// Cells of the sim's obstacle and wall index (`sim::spatial::StaticIndex::build`: a grid of
/// `static_cell_size` over the bounds, coarsened to at most this many cells): the sim's own
/// constant, so the check cannot drift from the index.
pub use crate::sim::spatial::STATIC_INDEX_CELLS;

/// The shape of a world's obstacle and wall index. Every obstacle and wall is bucketed into each
/// cell its bounding box touches, and the index is rebuilt on the tick after any change: an
/// obstacle as large as the world fills every cell. 400 obstacles of radius 1e6 in a world of
/// ±1e6 (a 1,048,576-cell index) made each rebuild 4e8 entries: 12 s a tick and 6 GB.
pub fn static_shape(config: &WorldConfig) -> GridShape {
    GridShape::new(config.bounds, config.static_cell_size, STATIC_INDEX_CELLS)
}

/// Index cells a bounding box covers.
pub fn box_cells(shape: &GridShape, lo: Vec2, hi: Vec2) -> u64 {
    let (x0, y0) = shape.coords(lo);
    let (x1, y1) = shape.coords(hi);
    (u64::from(x1.saturating_sub(x0)) + 1) * (u64::from(y1.saturating_sub(y0)) + 1)
}

/// The box of an obstacle.
pub fn obstacle_box(center: Vec2, radius: f32) -> (Vec2, Vec2) {
    (center - Vec2::splat(radius), center + Vec2::splat(radius))
}

/// The index entries of the world's obstacles and walls now.
pub fn static_cells(world: &World, shape: &GridShape) -> u64 {
    let o: u64 = world.obstacles().iter().map(|o| {
        let (lo, hi) = obstacle_box(o.center, o.radius);
        box_cells(shape, lo, hi)
    }).sum();
    let w: u64 = world.walls().iter().map(|w| box_cells(shape, w.a.min(w.b), w.a.max(w.b))).sum();
    o + w
}

/// Checks that `used` index entries stay within the bound; the refusal names `field`.
pub fn check_static(used: u64, field: &str, c: &Crowding) -> Result<u64, SimError> {
    if used > c.max_static_cells {
        return Err(SimError::invalid(
            field,
            format!(
                "the world's obstacles and walls would fill {used} cells of its obstacle index (limits.max_static_cells {}): each is counted in every cell its bounding box covers; make it smaller or remove some",
                c.max_static_cells
            ),
        ));
    }
    Ok(used)
}

/// Checks the groups of a scenario built into `world` (each as a spawn, in order), and its
/// obstacles and walls against the index bound.
pub fn check_scenario(scenario: &Scenario, world: &World, c: &Crowding) -> Result<(), SimError> {
    check_static(static_cells(world, &static_shape(world.config())), "obstacles", c)?;
    let bounds = world.config().bounds;
    let mut covered = 0.0;
    for (i, g) in scenario.groups.iter().enumerate() {
        let at = format!("groups[{i}]");
        let spec = g.to_spawn(world).map_err(|e| e.within(&at))?;
        match &spec.area {
            // Given positions, as a saved world writes them (one group holds what many spawns
            // of at most `max_spawn` agents placed): checked in runs of that many, in the
            // order written (spawn order), so a world the server built and saved loads again.
            // A pile within any run is still refused; the cover bound is on the whole.
            SpawnArea::Points(ps) if ps.len() > c.max_spawn.max(1) => {
                for run in ps.chunks(c.max_spawn.max(1)) {
                    let part = SpawnSpec { count: run.len(), area: SpawnArea::Points(run.to_vec()), ..spec.clone() };
                    covered = check_spawn(&part, bounds, covered, c).map_err(|e| e.within(&at))?;
                }
            }
            _ => covered = check_spawn(&spec, bounds, covered, c).map_err(|e| e.within(&at))?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> Bounds {
        Bounds { min: Vec2::ZERO, max: Vec2::splat(200.0) }
    }

    fn rect(count: usize, lo: (f32, f32), hi: (f32, f32)) -> SpawnSpec {
        SpawnSpec::new("g", count, SpawnArea::Rect { min: Vec2::new(lo.0, lo.1), max: Vec2::new(hi.0, hi.1) })
    }

    fn field(r: Result<f64, SimError>) -> String {
        match r {
            Err(SimError::InvalidField { field, .. }) => field,
            other => panic!("expected invalid_field, got {other:?}"),
        }
    }

    #[test]
    fn an_area_outside_the_bounds_is_refused_naming_area() {
        // Test 12's spawn: x in -1.5..0, y in -1e6..126333 of a 200×200 world.
        let s = rect(4486, (-1.5, -1e6), (0.0, 126_333.45));
        assert_eq!(field(check_spawn(&s, bounds(), 0.0, &Crowding::default())), "area");
        assert_eq!(field(check_spawn(&rect(1, (0.0, 0.0), (200.5, 10.0)), bounds(), 0.0, &Crowding::default())), "area");
        // Touching the edge is inside.
        assert!(check_spawn(&rect(1, (0.0, 0.0), (200.0, 200.0)), bounds(), 0.0, &Crowding::default()).is_ok());
    }

    #[test]
    fn a_pile_is_refused_by_its_overlapping_pairs() {
        let c = Crowding::default();
        // n on one point: n(n−1)/2 pairs. 447 → 99,681 pairs (allowed), 448 → 100,128 (not).
        assert!(check_spawn(&rect(447, (50.0, 50.0), (50.0, 50.0)), bounds(), 0.0, &c).is_ok());
        assert_eq!(field(check_spawn(&rect(448, (50.0, 50.0), (50.0, 50.0)), bounds(), 0.0, &c)), "count");
        // 10,000 of radius 0.5 over 280×280 (the kill -9 test's spawn): 2π·0.25·1e8 / 281² ≈ 1,989.
        let big = Bounds { min: Vec2::ZERO, max: Vec2::splat(300.0) };
        assert!(check_spawn(&rect(10_000, (10.0, 10.0), (290.0, 290.0)), big, 0.0, &c).is_ok());
        let tight = Crowding { max_spawn_overlaps: 1_900, ..c };
        assert_eq!(field(check_spawn(&rect(10_000, (10.0, 10.0), (290.0, 290.0)), big, 0.0, &tight)), "count");
    }

    /// The kill -9 test's world (8 spawns of 10,000 over 280×280, then saved as one group of
    /// points) loads again; a pile written as points is still refused.
    #[test]
    fn a_saved_crowd_of_many_spawns_loads_but_a_pile_of_points_does_not() {
        let c = Crowding::default();
        let world = World::new(WorldConfig { bounds: Bounds { min: Vec2::ZERO, max: Vec2::splat(300.0) }, ..WorldConfig::default() }).unwrap();
        let mut rng = crate::sim::rng::Rng::new(7);
        let points: Vec<steer_proto::Point> =
            (0..80_000).map(|_| steer_proto::Point { x: rng.range(10.0, 290.0), y: rng.range(10.0, 290.0) }).collect();
        let scenario = |pts: Vec<steer_proto::Point>| {
            let mut s = Scenario::from_json(r#"{"bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 300, "y": 300}},
                "groups": [{"name": "crowd", "area": {"type": "points", "points": []}, "limits": {"radius": 0.5}}]}"#).unwrap();
            s.groups[0].area = steer_proto::SpawnArea::Points(steer_proto::Points { points: pts });
            s
        };
        // As one spawn these would start ~128,000 overlapping pairs (over the default 100,000).
        let whole = SpawnSpec::new("crowd", 80_000, SpawnArea::Points(points.iter().map(|p| Vec2::new(p.x, p.y)).collect()));
        assert_eq!(field(check_spawn(&whole, world.config().bounds, 0.0, &c)), "count");
        assert!(check_scenario(&scenario(points), &world, &c).is_ok());
        let pile = vec![steer_proto::Point { x: 50.0, y: 50.0 }; 20_000];
        match check_scenario(&scenario(pile), &world, &c) {
            Err(SimError::InvalidField { field, .. }) => assert_eq!(field, "groups[0].count"),
            other => panic!("a pile of points was admitted: {other:?}"),
        }
    }

    #[test]
    fn radius_speed_and_cover_are_bounded() {
        let c = Crowding::default();
        let mut s = rect(1, (10.0, 10.0), (20.0, 20.0));
        s.limits.radius = 10.5;
        assert_eq!(field(check_spawn(&s, bounds(), 0.0, &c)), "limits.radius");
        s.limits.radius = 0.5;
        s.limits.max_speed = 1e6;
        assert_eq!(field(check_spawn(&s, bounds(), 0.0, &c)), "limits.max_speed");
        s.limits.max_speed = 100.0;
        let after = check_spawn(&s, bounds(), 0.0, &c).unwrap();
        assert!((after - std::f64::consts::PI * 0.25).abs() < 1e-9, "{after}");
        // 40,000 area: cover 39,999.5 plus one disc of 0.785 is over 1×.
        assert_eq!(field(check_spawn(&s, bounds(), 39_999.5, &c)), "count");
        assert!(check_spawn(&s, bounds(), 39_999.0, &c).is_ok());
    }

    #[test]
    fn obstacle_index_entries_are_counted_per_covered_cell_and_bounded() {
        // ±1e6 at cell 8 is coarsened: 2e6 / (8 · 1.5^k) per side until ≤ 1,048,576 cells.
        let cfg = WorldConfig { bounds: Bounds { min: Vec2::splat(-1e6), max: Vec2::splat(1e6) }, ..WorldConfig::default() };
        let shape = static_shape(&cfg);
        assert!(shape.len() <= STATIC_INDEX_CELLS && shape.len() > STATIC_INDEX_CELLS / 4, "{}", shape.len());
        let (lo, hi) = obstacle_box(Vec2::ZERO, 1e6);
        assert_eq!(box_cells(&shape, lo, hi), shape.len() as u64, "a world-sized obstacle fills every cell");
        let (lo, hi) = obstacle_box(Vec2::new(0.5, 0.5), 0.1);
        assert_eq!(box_cells(&shape, lo, hi), 1);
        // 200 × 200 at cell 8: 25 × 25 cells; an obstacle of radius 10 at (100, 100) spans
        // x 90..110 → cells 11..13 on each axis: 9 cells.
        let small = static_shape(&WorldConfig::default());
        assert_eq!(small.len(), 625);
        let (lo, hi) = obstacle_box(Vec2::splat(100.0), 10.0);
        assert_eq!(box_cells(&small, lo, hi), 9);
        let c = Crowding::default();
        assert_eq!(check_static(1 << 20, "radius", &c).unwrap(), 1 << 20);
        match check_static((1 << 20) + 1, "radius", &c) {
            Err(SimError::InvalidField { field, .. }) => assert_eq!(field, "radius"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn non_finite_values_are_left_to_the_sim() {
        let s = rect(3, (f32::NAN, 0.0), (10.0, 10.0));
        assert_eq!(check_spawn(&s, bounds(), 1.0, &Crowding::default()).unwrap(), 1.0);
    }

    #[test]
    fn every_shipped_scenario_is_admitted() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut n = 0;
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "json") {
                let sc = Scenario::from_file(&p).unwrap();
                let w = sc.build().unwrap();
                check_scenario(&sc, &w, &Crowding::default()).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 10, "{n} scenarios");
    }
}
