//! Spawning: validation, placement, and per-agent target bindings.

use super::*;

impl World {
    /// Spawns a group; returns the new ids. Validates everything first: on error nothing changes.
    pub fn spawn(&mut self, spec: SpawnSpec) -> Result<Vec<AgentId>, SimError> {
        let limits = spec.limits.validated().map_err(|e| e.within("limits"))?;
        let set = BehaviorSet::new(spec.behaviors.clone()).map_err(|e| e.within("behaviors"))?;
        check_finite("initial_speed", spec.initial_speed)?;
        if let Some(o) = spec.orientation {
            check_finite("orientation", o)?;
        }
        let count = match &spec.area {
            SpawnArea::Points(p) => p.len(),
            _ => spec.count,
        };
        if count > self.config.max_spawn {
            return Err(SimError::LimitExceeded { what: "count".into(), max: self.config.max_spawn });
        }
        if self.agents.len() + count > self.config.max_agents {
            return Err(SimError::LimitExceeded { what: "agents".into(), max: self.config.max_agents });
        }
        match &spec.area {
            SpawnArea::Rect { min, max } => {
                check_vec("area.min", *min)?;
                check_vec("area.max", *max)?;
                if max.x < min.x || max.y < min.y {
                    return Err(SimError::invalid("area.max", "must not be less than area.min"));
                }
            }
            SpawnArea::Disc { center, radius } | SpawnArea::Ring { center, radius } => {
                check_vec("area.center", *center)?;
                crate::sim::error::check_non_negative("area.radius", *radius)?;
            }
            SpawnArea::Points(ps) => {
                for (i, p) in ps.iter().enumerate() {
                    check_vec(&format!("area.points[{i}]"), *p)?;
                }
            }
        }
        let members: Vec<AgentId> = match spec.binding {
            TargetBinding::GroupMember { group } => {
                let m: Vec<AgentId> = self.agents.by_id().iter().filter(|a| a.group == group).map(|a| a.id).collect();
                if m.is_empty() {
                    return Err(SimError::invalid("binding.group", "the group has no agents"));
                }
                m
            }
            _ => Vec::new(),
        };
        if let TargetBinding::AsGiven = spec.binding {
            self.check_agent_targets(&set)?;
        }
        if self.next_agent_id.checked_add(count as u32).is_none() {
            return Err(SimError::LimitExceeded { what: "agent ids".into(), max: u32::MAX as usize });
        }
        let group = self.ensure_group(&spec.group)?;
        self.extent = (self.extent.0.max(limits.radius), self.extent.1.max(limits.max_speed));
        let shared = Arc::new(set);
        let mut ids = Vec::with_capacity(count);
        for i in 0..count {
            let pos = self.spawn_position(&spec.area, i, count, limits.radius);
            let orientation = match (spec.orientation, &spec.area) {
                (Some(o), _) => o,
                (None, SpawnArea::Ring { center, .. }) => orientation_of(*center - pos, 0.0),
                (None, _) => self.rng.range(-std::f32::consts::PI, std::f32::consts::PI),
            };
            let behaviors = match spec.binding {
                TargetBinding::AsGiven => shared.clone(),
                TargetBinding::Antipode { center } => Arc::new(rebind(&shared, Some(center * 2.0 - pos), None)),
                TargetBinding::GroupMember { .. } => {
                    let m = members[i % members.len()];
                    Arc::new(rebind(&shared, None, Some(m)))
                }
            };
            let id = self.next_agent_id;
            self.next_agent_id += 1;
            // Ids come from `next_agent_id`, which only grows: never taken.
            let inserted = self.agents.insert(Agent {
                id,
                group,
                position: pos,
                velocity: clamp_len(crate::sim::math::heading(orientation) * spec.initial_speed, limits.max_speed),
                orientation: wrap_angle(orientation),
                angular_velocity: 0.0,
                limits,
                behaviors,
                memory: AgentMemory { path_step: 1, ..AgentMemory::default() },
                order: None,
            });
            debug_assert!(inserted, "agent id {id} taken");
            ids.push(id);
            self.push_event(Event::Spawned { id, group });
        }
        Ok(ids)
    }

    /// A spawn point: random in the area, retried (up to 32 times) to keep clear of obstacles.
    fn spawn_position(&mut self, area: &SpawnArea, i: usize, n: usize, radius: f32) -> Vec2 {
        let mut p = Vec2::ZERO;
        for _ in 0..32 {
            p = match area {
                SpawnArea::Rect { min, max } => Vec2::new(self.rng.range(min.x, max.x), self.rng.range(min.y, max.y)),
                SpawnArea::Disc { center, radius } => {
                    let r = radius * self.rng.next_f32().sqrt();
                    let a = self.rng.range(0.0, std::f32::consts::TAU);
                    *center + Vec2::new(a.cos(), a.sin()) * r
                }
                SpawnArea::Ring { center, radius } => {
                    let a = std::f32::consts::TAU * i as f32 / n.max(1) as f32;
                    return self.clamp_to_bounds(*center + Vec2::new(a.cos(), a.sin()) * *radius);
                }
                SpawnArea::Points(ps) => return self.clamp_to_bounds(ps.get(i).copied().unwrap_or(Vec2::ZERO)),
            };
            p = self.clamp_to_bounds(p);
            let clear = self.obstacles.iter().all(|o| o.center.distance(p) >= o.radius + radius)
                && self.walls.iter().all(|w| closest_on_segment(p, w.a, w.b).distance(p) >= radius);
            if clear {
                break;
            }
        }
        p
    }

    fn clamp_to_bounds(&self, p: Vec2) -> Vec2 {
        p.clamp(self.config.bounds.min, self.config.bounds.max)
    }
}

/// Copy of `set` with point targets replaced by `point` and agent targets by `agent`.
fn rebind(set: &BehaviorSet, point: Option<Vec2>, agent: Option<AgentId>) -> BehaviorSet {
    let mut out = BehaviorSet::default();
    for e in set.entries() {
        let mut e = e.clone();
        let t = |t: &mut Target| match t {
            Target::Point(p) => {
                if let Some(q) = point {
                    *p = q;
                }
            }
            Target::Agent(id) => {
                if let Some(m) = agent {
                    *id = m;
                }
            }
        };
        match &mut e.behavior {
            Behavior::Seek(p) => t(&mut p.target),
            Behavior::Flee(p) => t(&mut p.target),
            Behavior::Arrive(p) => t(&mut p.target),
            Behavior::Face(p) => t(&mut p.target),
            Behavior::Pursue(p) => p.target = agent.unwrap_or(p.target),
            Behavior::Evade(p) => p.target = agent.unwrap_or(p.target),
            Behavior::VelocityMatch(p) => p.target = agent.unwrap_or(p.target),
            Behavior::LeaderFollowing(p) => p.leader = agent.unwrap_or(p.leader),
            Behavior::Align(p) => {
                if let (crate::sim::behaviors::align::AlignTarget::Agent(id), Some(m)) = (&mut p.target, agent) {
                    *id = m;
                }
            }
            // No target to bind. Listed one by one: a new behaviour with a target must be
            // added above, and the compiler names this match until it is listed somewhere.
            Behavior::LookWhereYouAreGoing(_)
            | Behavior::Wander(_)
            | Behavior::RandomTarget(_)
            | Behavior::ObstacleAvoidance(_)
            | Behavior::AheadAvoidance(_)
            | Behavior::WallAvoidance(_)
            | Behavior::AgentAvoidance(_)
            | Behavior::Separation(_)
            | Behavior::Cohesion(_)
            | Behavior::Alignment(_)
            | Behavior::PathFollowing(_)
            | Behavior::ReciprocalAvoidance(_) => {}
        }
        // Entries were validated when `set` was built; rebinding keeps them valid.
        let _ = out.add(e);
    }
    out
}
