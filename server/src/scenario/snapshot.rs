//! A running world written back as a scenario (saves and `GET …/scenario`).

use steer_proto::{Limits, Point, Points, SpawnArea};

use super::spec::{BindingSpec, GroupSpec, ObstacleSpec, Scenario, WallSpec};
use crate::convert::point;
use crate::sim::world::World;

/// The world's current state as a scenario: the base scenario's settings and groups (with their
/// behaviours, limits and bindings), each group's agents placed where they are now, obstacles and
/// walls as they are now.
///
/// Behaviour changes made to single agents after load are not captured (a saved group carries
/// the behaviours its scenario gave it).
pub fn snapshot_scenario(world: &World, base: &Scenario) -> Scenario {
    let mut out = base.clone();
    out.random_obstacles = None;
    out.obstacles = world.obstacles().iter().map(|o| ObstacleSpec { center: point(o.center), radius: o.radius }).collect();
    out.walls = world.walls().iter().map(|w| WallSpec { a: point(w.a), b: point(w.b) }).collect();
    let mut groups: Vec<GroupSpec> = Vec::new();
    for (gi, name) in world.groups().iter().enumerate() {
        let points: Vec<Point> = world.agents().iter().filter(|a| usize::from(a.group) == gi).map(|a| point(a.position)).collect();
        if points.is_empty() {
            continue;
        }
        let mut g = base.groups.iter().find(|g| &g.name == name).cloned().unwrap_or_else(|| GroupSpec {
            name: name.clone(),
            count: 0,
            area: SpawnArea::Points(Points { points: Vec::new() }),
            lattice: false,
            limits: Limits::default(),
            binding: BindingSpec::AsGiven,
            initial_speed: 0.0,
            orientation: None,
            behaviors: Vec::new(),
        });
        if let Some(a) = world.agents().iter().find(|a| usize::from(a.group) == gi) {
            let l = a.limits;
            g.limits = Limits {
                max_speed: Some(l.max_speed),
                max_accel: Some(l.max_accel),
                max_rotation: Some(l.max_rotation),
                max_angular_accel: Some(l.max_angular_accel),
                radius: Some(l.radius),
                mass: Some(l.mass),
            };
        }
        g.count = points.len();
        g.area = SpawnArea::Points(Points { points });
        g.lattice = false;
        // Agent-id bindings refer to ids of the old world; keep them only if the group they
        // name is kept too (ids are reassigned in order on load).
        groups.push(g);
    }
    out.groups = groups;
    out
}
