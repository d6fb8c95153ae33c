//! `--agents N`: the same scenario with N agents in a proportionally larger area.

use steer_proto::{Behavior, Circle, Point, Rect, SpawnArea, Target};

use super::{BindingSpec, BoundsSpec, GroupSpec, ScalingSpec, Scenario};

impl Scenario {
    /// The same scenario with `n` agents in all, in an area scaled to keep the density: every
    /// coordinate is multiplied by s = √(n / agents) (`spacing`: s = n / agents), group counts
    /// and random obstacle counts by n / agents.
    pub fn scaled_to(&self, n: usize) -> Scenario {
        let total: usize = self.groups.iter().map(GroupSpec::agent_count).sum();
        if total == 0 || n == total {
            return self.clone();
        }
        let k = n as f64 / total as f64;
        let s = match self.scaling {
            ScalingSpec::Density => k.sqrt() as f32,
            ScalingSpec::Spacing => k as f32,
        };
        let sp = |p: Point| Point { x: p.x * s, y: p.y * s };
        let mut out = self.clone();
        out.bounds = BoundsSpec { min: sp(self.bounds.min), max: sp(self.bounds.max) };
        for o in &mut out.orders {
            o.target = o.target.map(sp);
            o.antipode_of = o.antipode_of.map(sp);
        }
        for o in &mut out.obstacles {
            o.center = sp(o.center);
        }
        for w in &mut out.walls {
            w.a = sp(w.a);
            w.b = sp(w.b);
        }
        if let Some(r) = &mut out.random_obstacles {
            r.count = ((r.count as f64) * k).round() as usize;
            if let Some(kc) = &mut r.keep_clear {
                kc.min = sp(kc.min);
                kc.max = sp(kc.max);
            }
        }
        let mut assigned = 0usize;
        let last = out.groups.len().saturating_sub(1);
        for (i, g) in out.groups.iter_mut().enumerate() {
            let c = if i == last { n.saturating_sub(assigned) } else { ((g.agent_count() as f64) * k).round() as usize };
            assigned += c;
            let circle = |c: &Circle| Circle { x: c.x * s, y: c.y * s, radius: c.radius * s };
            g.area = match &g.area {
                SpawnArea::Rect(r) => SpawnArea::Rect(Rect { min_x: r.min_x * s, min_y: r.min_y * s, max_x: r.max_x * s, max_y: r.max_y * s }),
                SpawnArea::Circle(c) => SpawnArea::Circle(circle(c)),
                SpawnArea::Ring(c) => SpawnArea::Ring(circle(c)),
                SpawnArea::Points(ps) => {
                    let first = sp(ps.points.first().copied().unwrap_or(Point { x: 0.0, y: 0.0 }));
                    SpawnArea::Circle(Circle { x: first.x, y: first.y, radius: s * 10.0 })
                }
            };
            g.count = c;
            if let BindingSpec::Antipode { center } = &mut g.binding {
                *center = sp(*center);
            }
            for e in &mut g.behaviors {
                scale_points(&mut e.behavior, s);
            }
        }
        out
    }
}

/// Multiplies every point of a behaviour by `s` (agent ids and lengths stay).
fn scale_points(b: &mut Behavior, s: f32) {
    let sp = |p: &mut Point| *p = Point { x: p.x * s, y: p.y * s };
    let target = |t: &mut Target| {
        if let Target::Point(p) = t {
            sp(p);
        }
    };
    match b {
        Behavior::Seek(p) => target(&mut p.target),
        Behavior::Flee(p) => target(&mut p.target),
        Behavior::Arrive(p) => target(&mut p.target),
        Behavior::Face(p) => target(&mut p.target),
        Behavior::RandomTarget(p) => {
            if let Some(c) = &mut p.center {
                sp(c);
            }
        }
        Behavior::PathFollowing(p) => p.waypoints.iter_mut().for_each(sp),
        // No point to scale. Listed one by one: a new behaviour must be placed above or here.
        Behavior::Pursue(_)
        | Behavior::Evade(_)
        | Behavior::Align(_)
        | Behavior::LookWhereYouAreGoing(_)
        | Behavior::VelocityMatch(_)
        | Behavior::Wander(_)
        | Behavior::ObstacleAvoidance(_)
        | Behavior::AheadAvoidance(_)
        | Behavior::WallAvoidance(_)
        | Behavior::AgentAvoidance(_)
        | Behavior::Separation(_)
        | Behavior::Cohesion(_)
        | Behavior::Alignment(_)
        | Behavior::LeaderFollowing(_)
        | Behavior::ReciprocalAvoidance(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_keeps_density_and_scales_behaviour_points() {
        let s = Scenario::from_json(super::super::tests::MINI).unwrap();
        let mut s = s;
        s.groups[0].behaviors.push(
            steer_proto::Behavior::Seek(steer_proto::Seek { target: Target::Point(Point { x: 3.0, y: -2.0 }) }).into(),
        );
        let s = s.scaled_to(40);
        assert_eq!(s.groups[0].count, 40);
        assert!((s.bounds.max.x - 200.0).abs() < 1e-3);
        let Behavior::Seek(seek) = &s.groups[0].behaviors[2].behavior else { panic!("{:?}", s.groups[0].behaviors) };
        assert_eq!(seek.target, Target::Point(Point { x: 6.0, y: -4.0 }));
    }
}
