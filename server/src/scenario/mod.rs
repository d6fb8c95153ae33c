//! JSON scenarios: world settings, obstacles, walls and agent groups with their behaviours.
//!
//! This module is the only place where scenario JSON meets the simulation: it deserializes
//! (with the failing field's path in every error), then builds a [`World`] through the sim's
//! validating API (whose errors are prefixed with the path of the group or object).
//!
//! - `spec`: the file's types. Points, limits and behaviours are `steer_proto`'s wire types.
//! - `placement`: 001's random obstacles. `scale`: `--agents`. `snapshot`: a world as a scenario.
//! - `legacy`: the behaviour form of scenarios before protocol 5, for errors and old recordings.

mod legacy;
mod placement;
mod scale;
mod snapshot;
mod spec;

pub use placement::{PLACEMENT_TRIES, place_random_obstacles};
pub use snapshot::snapshot_scenario;
pub use spec::{
    BindingSpec, BoundsSpec, EdgeSpec, GroupSpec, MoveToAvoidanceSpec, ObstacleSpec, OrderSpec, RandomObstacles, ScalingSpec,
    Scenario, WallSpec,
};

use glam::Vec2;
use serde_json::Value;
use thiserror::Error;

use crate::convert::{self, vec2};
use crate::sim::behaviors::move_to::MoveToParams;
use crate::sim::error::SimError;
use crate::sim::view::Bounds;
use crate::sim::world::{EdgeRule, SpawnArea, SpawnSpec, TargetBinding, World, WorldConfig};

/// Largest scenario file accepted, bytes.
pub const MAX_SCENARIO_BYTES: usize = 16 << 20;

/// Why a scenario could not be loaded.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The JSON is malformed or a field has the wrong type; `path` is the field's path.
    #[error("scenario field `{path}`: {message}")]
    Parse { path: String, message: String },
    /// A behaviour (before protocol 5) or spawn area (before 6) is written in an older scenario form.
    #[error(
        "scenario field `{path}`: this is an older scenario form (behaviours before protocol 5, areas before 6); both are now written \
         as in `set_behaviors` and `spawn` messages (PROTOCOL.md §4): targets tagged `{{\"type\":\"point\",\"x\":..,\"y\":..}}` or \
         `{{\"type\":\"agent\",\"agent\":id}}`, `target_agent` for pursue/evade/velocity_match, align tuning inside \
         `\"align\": {{..}}`, areas tagged `{{\"type\":\"rect\",\"min_x\":..}}`, `circle`, `ring` or `points`; here: {rewritten}"
    )]
    OldForm { path: String, rewritten: String },
    /// A value is out of range; the message names the field's path.
    #[error("scenario {0}")]
    Invalid(#[from] SimError),
    /// The file is too large.
    #[error("scenario is larger than {MAX_SCENARIO_BYTES} bytes")]
    TooLarge,
    /// The file could not be read.
    #[error("cannot read scenario {path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// Why [`Scenario::build_capped`] made no world.
#[derive(Debug, Error)]
pub enum CappedBuildError {
    /// The scenario has more agents than the server allows in a world.
    #[error(transparent)]
    TooMany(SimError),
    /// The scenario itself is invalid.
    #[error(transparent)]
    Scenario(ScenarioError),
}

/// Checks a world, scenario or recording name: 1–64 of `A-Z a-z 0-9 _ -`, not starting with
/// `-`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Scenario {
    /// Parses JSON; a bad field's path is in the error. A field no type has (in behaviours and
    /// limits too, whose wire types let JSON clients send more) is an error naming it; a
    /// behaviour or spawn area in an older scenario form is an error showing it rewritten.
    pub fn from_json(text: &str) -> Result<Self, ScenarioError> {
        if text.len() > MAX_SCENARIO_BYTES {
            return Err(ScenarioError::TooLarge);
        }
        let parsed = Self::parse(text);
        let Ok(raw) = serde_json::from_str::<Value>(text) else { return parsed };
        let scenario = match parsed {
            Ok(s) => s,
            Err(e) => {
                let mut rewritten = raw;
                let Some(path) = legacy::migrate(&mut rewritten) else { return Err(e) };
                if serde_json::from_value::<Scenario>(rewritten.clone()).is_err() {
                    return Err(e);
                }
                let b = pointer(&rewritten, &path).cloned().unwrap_or(Value::Null);
                return Err(ScenarioError::OldForm { path, rewritten: b.to_string() });
            }
        };
        scenario.refuse_unknown_wire_fields(&raw)?;
        Ok(scenario)
    }

    /// Parses a scenario stored by an older steerd (a recording's start): behaviours and areas in
    /// older forms are rewritten, not refused.
    pub fn from_stored_json(text: &str) -> Result<Self, ScenarioError> {
        match Self::from_json(text) {
            Err(ScenarioError::OldForm { .. }) => {
                let mut raw: Value = serde_json::from_str(text).map_err(|e| ScenarioError::Parse { path: String::new(), message: e.to_string() })?;
                legacy::migrate(&mut raw);
                Self::parse(&raw.to_string())
            }
            other => other,
        }
    }

    fn parse(text: &str) -> Result<Self, ScenarioError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            ScenarioError::Parse { path, message: e.into_inner().to_string() }
        })
    }

    /// Scenario types deny unknown fields themselves; the wire types inside them (behaviours,
    /// limits, reciprocal parameters) ignore them, as JSON clients may send more. A scenario
    /// is written by hand, so a misspelt parameter is refused here: every key of the file must
    /// come back when the parsed value is written out (wire types write every field).
    fn refuse_unknown_wire_fields(&self, raw: &Value) -> Result<(), ScenarioError> {
        let Ok(canonical) = serde_json::to_value(self) else { return Ok(()) };
        let mut wire_parts: Vec<(String, &Value, &Value)> = Vec::new();
        if let (Some(Value::Object(r)), Some(Value::Object(c))) = (raw.get("move_to_avoidance"), canonical.get("move_to_avoidance")) {
            if let (Some(r), Some(c)) = (r.get("reciprocal"), c.get("reciprocal")) {
                wire_parts.push(("move_to_avoidance.reciprocal".into(), r, c));
            }
        }
        let empty = Vec::new();
        let raw_groups = raw.get("groups").and_then(Value::as_array).unwrap_or(&empty);
        let canon_groups = canonical.get("groups").and_then(Value::as_array).unwrap_or(&empty);
        for (i, (r, c)) in raw_groups.iter().zip(canon_groups).enumerate() {
            for key in ["area", "behaviors", "limits"] {
                if let (Some(r), Some(c)) = (r.get(key), c.get(key)) {
                    wire_parts.push((format!("groups[{i}].{key}"), r, c));
                }
            }
        }
        for (path, r, c) in wire_parts {
            if let Some((path, key)) = unknown_key(&path, r, c) {
                return Err(ScenarioError::Parse { path, message: format!("unknown field `{key}`") });
            }
        }
        Ok(())
    }

    /// Reads and parses a file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ScenarioError> {
        let io = |source| ScenarioError::Io { path: path.display().to_string(), source };
        let meta = std::fs::metadata(path).map_err(io)?;
        if meta.len() > MAX_SCENARIO_BYTES as u64 {
            return Err(ScenarioError::TooLarge);
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        Scenario::from_json(&text)
    }

    /// The world settings.
    pub fn world_config(&self) -> WorldConfig {
        let d = WorldConfig::default();
        WorldConfig {
            bounds: Bounds { min: vec2(self.bounds.min), max: vec2(self.bounds.max) },
            edge: match self.edge {
                EdgeSpec::Clamp => EdgeRule::Clamp,
                EdgeSpec::Wrap => EdgeRule::Wrap,
                EdgeSpec::Bounce => EdgeRule::Bounce,
            },
            tick_rate: self.tick_rate,
            seed: self.seed,
            agent_cell_size: self.agent_cell_size,
            solid_obstacles: self.solid_obstacles,
            solid_agents: self.solid_agents,
            nav_cell_size: self.nav_cell_size.unwrap_or(d.nav_cell_size),
            nav_clearance: self.nav_clearance.unwrap_or(d.nav_clearance),
            flow_cache_capacity: self.flow_cache_capacity.unwrap_or(d.flow_cache_capacity),
            flow_builds_per_tick: self.flow_builds_per_tick.unwrap_or(d.flow_builds_per_tick),
            flow_build_ticks: self.flow_build_ticks.unwrap_or(d.flow_build_ticks),
            flow_build_cells_per_tick: self.flow_build_cells_per_tick.unwrap_or(d.flow_build_cells_per_tick),
            move_to: MoveToParams {
                straight_line_max_agents: self.straight_line_max_agents.unwrap_or(d.move_to.straight_line_max_agents),
                replan_every_ticks: self.replan_every_ticks.unwrap_or(d.move_to.replan_every_ticks),
                reciprocal: match &self.move_to_avoidance {
                    None => d.move_to.reciprocal,
                    Some(MoveToAvoidanceSpec::Reciprocal(r)) => Some(convert::reciprocal(r)),
                    Some(MoveToAvoidanceSpec::Context) => None,
                },
                ..d.move_to
            },
            ..d
        }
    }

    /// Issues the orders due before tick `tick` (those with `at_tick == tick`).
    pub fn apply_orders(&self, world: &mut World, tick: u64) -> Result<(), ScenarioError> {
        for (i, o) in self.orders.iter().enumerate().filter(|(_, o)| o.at_tick == tick) {
            let at = format!("orders[{i}]");
            let g = world.group_id(&o.group).ok_or_else(|| SimError::UnknownGroup(o.group.clone()))?;
            let ids: Vec<u32> = world.agents().iter().filter(|a| a.group == g).map(|a| a.id).collect();
            match (o.target, o.antipode_of) {
                (Some(t), None) => world.move_to(&ids, vec2(t), o.stopping_distance).map_err(|e| e.within(&at))?,
                (None, Some(c)) => {
                    let c = vec2(c);
                    let goals: Vec<(u32, Vec2)> =
                        world.agents().iter().filter(|a| a.group == g).map(|a| (a.id, c * 2.0 - a.position)).collect();
                    for (id, goal) in goals {
                        world.move_to(&[id], goal, o.stopping_distance).map_err(|e| e.within(&at))?;
                    }
                }
                _ => return Err(SimError::invalid(format!("{at}.target"), "give exactly one of `target` and `antipode_of`").into()),
            }
        }
        Ok(())
    }

    /// Builds the world with a server's caps applied: at most `max_agents` agents in all (else
    /// [`CappedBuildError::TooMany`]), and the world refuses later spawns beyond its caps.
    pub fn build_capped(&self, max_agents: usize, max_spawn: usize) -> Result<World, CappedBuildError> {
        let total: usize = self.groups.iter().map(|g| g.agent_count()).sum();
        if total > max_agents {
            return Err(CappedBuildError::TooMany(SimError::LimitExceeded { what: "agents".into(), max: max_agents }));
        }
        let mut world = self.build().map_err(CappedBuildError::Scenario)?;
        world.set_caps(max_agents, max_spawn);
        Ok(world)
    }

    /// Builds the world: config, obstacles, walls, then the groups in order.
    pub fn build(&self) -> Result<World, ScenarioError> {
        let mut world = World::new(self.world_config())?;
        for (i, o) in self.obstacles.iter().enumerate() {
            world.add_obstacle(vec2(o.center), o.radius).map_err(|e| e.within(&format!("obstacles[{i}]")))?;
        }
        if let Some(r) = &self.random_obstacles {
            let existing: Vec<(Vec2, f32)> = world.obstacles().iter().map(|o| (o.center, o.radius)).collect();
            let placed = place_random_obstacles(world.config().bounds, r, &existing, self.seed)
                .map_err(|e| e.within("random_obstacles"))?;
            for (c, rad) in placed {
                world.add_obstacle(c, rad).map_err(|e| e.within("random_obstacles"))?;
            }
        }
        for (i, w) in self.walls.iter().enumerate() {
            world.add_wall(vec2(w.a), vec2(w.b)).map_err(|e| e.within(&format!("walls[{i}]")))?;
        }
        for (i, g) in self.groups.iter().enumerate() {
            let spec = g.to_spawn(&world).map_err(|e| e.within(&format!("groups[{i}]")))?;
            world.spawn(spec).map_err(|e| e.within(&format!("groups[{i}]")))?;
        }
        self.apply_orders(&mut world, 0)?;
        Ok(world)
    }
}

/// The first key of `raw` (at `path`) that `canonical` lacks, with its path.
fn unknown_key(path: &str, raw: &Value, canonical: &Value) -> Option<(String, String)> {
    match (raw, canonical) {
        (Value::Object(r), Value::Object(c)) => r.iter().find_map(|(k, rv)| match c.get(k) {
            None => Some((path.to_string(), k.clone())),
            Some(cv) => unknown_key(&format!("{path}.{k}"), rv, cv),
        }),
        (Value::Array(r), Value::Array(c)) => {
            r.iter().zip(c).enumerate().find_map(|(i, (rv, cv))| unknown_key(&format!("{path}[{i}]"), rv, cv))
        }
        _ => None,
    }
}

/// The value at a path written as `groups[0].behaviors[1].behavior`.
fn pointer<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let pointer: String = path.split('.').flat_map(|part| {
        let mut out = Vec::new();
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            out.push(rest[..i].to_string());
            rest = &rest[i..];
            while let Some(end) = rest.find(']') {
                out.push(rest[1..end].to_string());
                rest = &rest[end + 1..];
            }
        } else {
            out.push(rest.to_string());
        }
        out
    }).fold(String::new(), |acc, p| acc + "/" + &p);
    v.pointer(&pointer)
}

impl GroupSpec {
    /// Number of agents this group spawns.
    pub fn agent_count(&self) -> usize {
        match &self.area {
            steer_proto::SpawnArea::Points(p) => p.points.len(),
            _ => self.count,
        }
    }

    /// The sim spawn spec (resolves a group binding against `world`).
    pub fn to_spawn(&self, world: &World) -> Result<SpawnSpec, SimError> {
        let area = match (&self.area, self.lattice) {
            (_, false) => convert::spawn_area(&self.area),
            (steer_proto::SpawnArea::Rect(r), true) => {
                SpawnArea::Points(lattice(Vec2::new(r.min_x, r.min_y), Vec2::new(r.max_x, r.max_y), self.count))
            }
            (_, true) => return Err(SimError::invalid("lattice", "needs a `rect` area")),
        };
        let binding = match &self.binding {
            BindingSpec::AsGiven => TargetBinding::AsGiven,
            BindingSpec::Antipode { center } => TargetBinding::Antipode { center: vec2(*center) },
            BindingSpec::GroupMember { group } => TargetBinding::GroupMember {
                group: world.group_id(group).ok_or_else(|| SimError::invalid("binding.group_member.group", format!("no group `{group}` spawned before this one")))?,
            },
        };
        Ok(SpawnSpec {
            group: self.name.clone(),
            count: self.count,
            area,
            limits: convert::limits(&self.limits),
            behaviors: convert::entries(&self.behaviors).map_err(|e| e.within("behaviors"))?,
            binding,
            initial_speed: self.initial_speed,
            orientation: self.orientation,
        })
    }
}

/// `n` points on a lattice filling the rectangle `min`–`max`: columns and rows in the
/// rectangle's proportions, each point at the centre of its lattice cell, row after row from
/// the lower-left corner.
fn lattice(min: Vec2, max: Vec2, n: usize) -> Vec<Vec2> {
    if n == 0 {
        return Vec::new();
    }
    let size = (max - min).max(Vec2::splat(1e-3));
    let cols = ((n as f32 * size.x / size.y).sqrt().round() as usize).clamp(1, n);
    let rows = n.div_ceil(cols);
    let cell = Vec2::new(size.x / cols as f32, size.y / rows as f32);
    (0..n).map(|i| min + cell * Vec2::new((i % cols) as f32 + 0.5, (i / cols) as f32 + 0.5)).collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn lattice_fills_the_rect_in_its_proportions_row_by_row() {
        // 6 points in 3 × 2: 3 columns (√(6·3/2) = 3), 2 rows, cell 1 × 1, centres at .5.
        let p = lattice(Vec2::ZERO, Vec2::new(3.0, 2.0), 6);
        let want = [(0.5, 0.5), (1.5, 0.5), (2.5, 0.5), (0.5, 1.5), (1.5, 1.5), (2.5, 1.5)];
        assert_eq!(p, want.iter().map(|&(x, y)| Vec2::new(x, y)).collect::<Vec<_>>());
        // 5 points in the same rect: 3 columns (√7.5 ≈ 2.7), the second row short.
        assert_eq!(lattice(Vec2::ZERO, Vec2::new(3.0, 2.0), 5).len(), 5);
        assert!(lattice(Vec2::ZERO, Vec2::ONE, 0).is_empty());
    }

    #[test]
    fn lattice_needs_a_rect_area() {
        let mut s = Scenario::from_json(MINI).expect("mini");
        s.groups[0].lattice = true;
        s.groups[0].area = steer_proto::SpawnArea::Circle(steer_proto::Circle { x: 50.0, y: 50.0, radius: 10.0 });
        let err = s.build().err().expect("refused").to_string();
        assert!(err.contains("lattice"), "{err}");
    }

    pub(crate) const MINI: &str = r#"{
        "bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 100, "y": 100}},
        "groups": [{"name": "a", "count": 10, "area": {"type": "rect", "min_x": 10, "min_y": 10, "max_x": 90, "max_y": 90},
                    "behaviors": [{"behavior": {"type": "wander"}}, {"behavior": {"type": "separation", "neighbor_radius": 2}, "weight": 2}]}]
    }"#;

    #[test]
    fn an_old_form_area_is_refused_with_its_rewrite_and_a_stored_one_is_rewritten() {
        let old = MINI.replace(
            r#"{"type": "rect", "min_x": 10, "min_y": 10, "max_x": 90, "max_y": 90}"#,
            r#"{"rect": {"min": {"x": 10, "y": 10}, "max": {"x": 90, "y": 90}}}"#,
        );
        assert_ne!(old, MINI);
        let e = Scenario::from_json(&old).unwrap_err();
        let ScenarioError::OldForm { path, rewritten } = &e else { panic!("{e:?}") };
        assert_eq!(path, "groups[0].area");
        assert_eq!(
            serde_json::from_str::<Value>(rewritten).unwrap(),
            serde_json::json!({"type": "rect", "min_x": 10, "min_y": 10, "max_x": 90, "max_y": 90})
        );
        // A recording's scenario is rewritten and builds the same world as today's form.
        let stored = Scenario::from_stored_json(&old).unwrap();
        assert_eq!(stored, Scenario::from_json(MINI).unwrap());
        // A misspelt area field is refused naming it (the wire type alone would ignore it).
        let typo = MINI.replace(r#""max_y": 90}"#, r#""max_y": 90, "maxy": 9}"#);
        let e = Scenario::from_json(&typo).unwrap_err().to_string();
        assert!(e.contains("groups[0].area") && e.contains("maxy"), "{e}");
    }

    #[test]
    fn parses_and_builds_with_defaults() {
        let s = Scenario::from_json(MINI).unwrap();
        let w = s.build().unwrap();
        assert_eq!(w.agents().len(), 10);
        assert_eq!(w.config().tick_rate, 20.0);
        assert_eq!(w.agents()[0].behaviors.entries().len(), 2);
        assert_eq!(w.agents()[0].behaviors.entries()[1].weight, 2.0);
    }

    #[test]
    fn parse_errors_name_the_field_path() {
        let bad = MINI.replace(r#""neighbor_radius": 2"#, r#""neighbor_radius": "two""#);
        let e = Scenario::from_json(&bad).unwrap_err().to_string();
        assert!(e.contains("groups[0].behaviors[1].behavior"), "{e}");
        let bad = MINI.replace(r#""count": 10"#, r#""count": 10, "colour": 3"#);
        let e = Scenario::from_json(&bad).unwrap_err().to_string();
        assert!(e.contains("groups[0]") && e.contains("colour"), "{e}");
    }

    #[test]
    fn unknown_fields_in_wire_parts_are_refused_with_their_path() {
        let with = |b: &str| MINI.replace(r#"{"type": "wander"}"#, b);
        let s = Scenario::from_json(&with(r#"{"type": "align", "target": {"type": "orientation", "radians": 0.5}, "align": {"slow_radius": 0.7}}"#)).unwrap();
        let steer_proto::Behavior::Align(a) = &s.groups[0].behaviors[0].behavior else { panic!("{s:?}") };
        assert!((a.align.slow_radius - 0.7).abs() < 1e-6 && (a.align.target_radius - 0.1).abs() < 1e-6);
        for (b, path) in [
            (r#"{"type": "wander", "colour": 1}"#, "groups[0].behaviors[0].behavior"),
            (r#"{"type": "align", "target": {"type": "orientation", "radians": 0.5}, "align": {"colour": 1}}"#, "groups[0].behaviors[0].behavior.align"),
            (r#"{"type": "seek", "target": {"type": "point", "x": 1, "y": 2, "colour": 1}}"#, "groups[0].behaviors[0].behavior.target"),
        ] {
            match Scenario::from_json(&with(b)) {
                Err(ScenarioError::Parse { path: p, message }) => assert!(p == path && message.contains("colour"), "{b}: {p}: {message}"),
                other => panic!("{b}: {other:?}"),
            }
        }
        let limits = MINI.replace(r#""count": 10,"#, r#""count": 10, "limits": {"max_sped": 3},"#);
        let e = Scenario::from_json(&limits).unwrap_err().to_string();
        assert!(e.contains("groups[0].limits") && e.contains("max_sped"), "{e}");
        let avoid = MINI.replace(r#""groups""#, r#""move_to_avoidance": {"reciprocal": {"time_horizn": 2}}, "groups""#);
        let e = Scenario::from_json(&avoid).unwrap_err().to_string();
        assert!(e.contains("move_to_avoidance.reciprocal") && e.contains("time_horizn"), "{e}");
    }

    #[test]
    fn the_old_behaviour_form_is_refused_with_the_new_one_in_the_error() {
        let old = MINI.replace(r#"{"type": "wander"}"#, r#"{"type": "pursue", "target": 3}"#);
        let e = Scenario::from_json(&old).unwrap_err();
        let ScenarioError::OldForm { path, rewritten } = &e else { panic!("{e:?}") };
        assert_eq!(path, "groups[0].behaviors[0].behavior");
        assert_eq!(serde_json::from_str::<Value>(rewritten).unwrap(), serde_json::json!({"type": "pursue", "target_agent": 3}));
        assert!(e.to_string().contains("PROTOCOL.md"), "{e}");
        // A stored scenario (a recording's) is rewritten instead.
        let s = Scenario::from_stored_json(&old).unwrap();
        let steer_proto::Behavior::Pursue(p) = &s.groups[0].behaviors[0].behavior else { panic!("{s:?}") };
        assert_eq!(p.target_agent, 3);
        // An error that is not about the old form stays itself.
        let bad = old.replace(r#""count": 10"#, r#""count": "ten""#);
        assert!(matches!(Scenario::from_json(&bad), Err(ScenarioError::Parse { .. })));
    }

    #[test]
    fn validation_errors_name_the_field_path() {
        let bad = MINI.replace(r#""neighbor_radius": 2"#, r#""neighbor_radius": -2"#);
        let e = Scenario::from_json(&bad).unwrap().build().err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("groups[0].behaviors[1].params.neighbor_radius"), "{e}");
        let bad = MINI.replace(r#""count": 10,"#, r#""count": 10, "limits": {"max_speed": 1e39},"#);
        // 1e39 overflows f32 to inf in serde_json → rejected by validation as non-finite.
        let e = match Scenario::from_json(&bad) {
            Ok(s) => s.build().err().map(|e| e.to_string()).unwrap_or_default(),
            Err(e) => e.to_string(),
        };
        assert!(e.contains("max_speed"), "{e}");
    }
}
