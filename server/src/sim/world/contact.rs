//! The apply phase: the one integrator, the push that takes each solid agent out of the agents
//! its step would overlap, walls, obstacles and the world's edges. Settling the contacts left
//! after it is `settle.rs`'s.

use super::*;

/// What the apply phase needs besides the agent.
pub(super) struct ApplyCtx<'a> {
    pub(super) dt: f32,
    pub(super) bounds: Bounds,
    pub(super) edge: EdgeRule,
    pub(super) solid: bool,
    pub(super) obstacles: &'a [Obstacle],
    pub(super) walls: &'a [Wall],
    pub(super) statics: &'a StaticIndex,
    /// Set when agents are solid (`WorldConfig::solid_agents`).
    pub(super) contacts: Option<Contacts<'a>>,
}

/// A pair of agents in contact: (lower id, higher id, storage index of each, radii sum).
pub(super) type ContactPair = (AgentId, AgentId, u32, u32, f32);

/// What the agent contact rule reads: the grid of the tick (positions and velocities at its
/// start, by rank) and every agent's compute-phase result (by rank), from which anyone can tell
/// where any agent's step takes it.
pub(super) struct Contacts<'a> {
    pub(super) grid: &'a AgentGrid,
    pub(super) results: &'a [StepResult],
    /// Largest radius plus the furthest two agents can move towards each other in a step.
    pub(super) reach: f32,
    /// Largest radius.
    pub(super) max_radius: f32,
    /// Largest top speed.
    pub(super) max_speed: f32,
}

impl Contacts<'_> {
    /// Where the integrator takes a neighbour this step (before the safety net).
    pub(super) fn next_position(&self, rank: usize, n: &Neighbor, dt: f32) -> Vec2 {
        match self.results.get(rank) {
            Some(StepResult(s, _, flags)) if flags & EVENT_DESTINATION_REACHED == 0 => {
                n.position + clamp_len(n.velocity + s.sanitized().linear * dt, self.grid.crowd(rank).max_speed) * dt
            }
            _ => n.position,
        }
    }

    /// The push that takes agent `a` (where it stands after the step) out of every neighbour it would overlap after the step: half of each overlap, along the
    /// line of centres (a direction fixed by the ids when the centres coincide), at most `r`.
    /// Each of a pair computes the same overlap from the same predictions, so a lone pair ends
    /// just touching, whatever order the agents are applied in.
    /// Each pair found in contact is added to `pairs` (by the agent with the lower id, `me`
    /// being its storage index).
    pub(super) fn push(&self, a: &Agent, me: usize, dt: f32, pairs: &mut Vec<ContactPair>) -> Vec2 {
        let (id, r, to) = (a.id, a.limits.radius, a.position);
        let mut push = Vec2::ZERO;
        // No step takes a neighbour further than the top speed's step: one further than that
        // plus the radii sum from `to` cannot touch it, and its result (a cache line) and
        // crowd record are not read. So the neighbours that can touch lie within the largest
        // radii sum plus that step of `to`: that square is walked (in ascending rank, as any
        // square is, so the pushes add up in the same order whatever square holds them).
        // (With 0.1 % to spare for rounding, so that every neighbour left out is one the test
        // below would have dismissed.)
        let step = self.max_speed * dt;
        self.grid.for_each_in_box_ranked(to, (r + self.max_radius + step) * 1.001, |rank, n| {
            let rs = r + n.radius;
            let lim = (rs + step) * 1.001;
            if n.id == id || (to - n.position).length_squared() >= lim * lim {
                return;
            }
            let q = self.next_position(rank, n, dt);
            let d = to - q;
            let d2 = d.length_squared();
            if d2 >= rs * rs {
                return;
            }
            let dist = d2.sqrt();
            let away = if dist > 1e-6 { d / dist } else { pair_dir(id, n.id) };
            push += away * ((rs - dist) * 0.5);
            if id < n.id {
                if let Some(&other) = self.grid.order().get(rank) {
                    pairs.push((id, n.id, me as u32, other, rs));
                }
            }
        });
        clamp_len(push, r)
    }
}

/// Speed under which an agent without orientation steering keeps its orientation.
pub const FACE_VELOCITY_EPSILON: f32 = 1e-3;

/// The one integrator (000's usage example): v += linear·dt, clamp to max_speed, p += v·dt;
/// ω += angular·dt, clamp to max_rotation, θ += ω·dt — or, when no behaviour steers the
/// orientation, θ faces the velocity once speed > [`FACE_VELOCITY_EPSILON`].
pub fn integrate(a: &mut Agent, s: Steering, dt: f32) {
    let lim = a.limits;
    a.velocity = clamp_len(a.velocity + s.linear * dt, lim.max_speed);
    a.position += a.velocity * dt;
    if a.behaviors.steers_orientation() {
        a.angular_velocity = (a.angular_velocity + s.angular * dt).clamp(-lim.max_rotation, lim.max_rotation);
        a.orientation = wrap_angle(a.orientation + a.angular_velocity * dt);
    } else {
        a.angular_velocity = 0.0;
        if a.velocity.length() > FACE_VELOCITY_EPSILON {
            a.orientation = orientation_of(a.velocity, a.orientation);
        }
    }
}

/// `q.rem_euclid(size)`, skipping the (library) `fmod` call in the common case `0 ≤ q < size`,
/// where `rem_euclid` returns `q` itself: the same bits either way.
#[inline]
pub(super) fn wrap_axis(q: f32, size: f32) -> f32 {
    if q >= 0.0 && q < size { q } else { q.rem_euclid(size) }
}

impl ApplyCtx<'_> {
    /// Also returns whether the contact push or the wall and obstacle net moved the agent.
    /// `flags` are the agent's compute-phase flags ([`NO_CONTACT`]: no agent can touch it this
    /// step, so the contact test is skipped).
    pub(super) fn apply(&self, a: &mut Agent, s: Steering, flags: u8, me: usize, pairs: &mut Vec<ContactPair>) -> (StepStats, bool) {
        let mut stats = StepStats::default();
        let before = (a.position, a.velocity, a.orientation, a.angular_velocity);
        integrate(a, s.sanitized(), self.dt);
        if let Some(c) = self.contacts.as_ref().filter(|_| flags & NO_CONTACT == 0) {
            let push = c.push(a, me, self.dt, pairs);
            // A position correction only: the velocities stay the avoidance's, which already
            // aim apart (taking velocity away here would stall a jam that avoidance resolves).
            if push != Vec2::ZERO && push.is_finite() {
                a.position += push;
                stats.contacts += 1;
            }
        }
        // Pushed or netted: the agent may now touch agents no prediction told it of.
        let mut netted = stats.contacts > 0;
        if self.solid {
            let n = self.resolve_walls(a, before.0) + self.resolve_obstacles(a);
            stats.contacts += n;
            netted |= n > 0;
        }
        netted &= self.contacts.is_some();
        self.apply_edge(a);
        let finite = a.position.is_finite() && a.velocity.is_finite() && a.orientation.is_finite() && a.angular_velocity.is_finite();
        if !finite {
            (a.position, a.velocity, a.orientation, a.angular_velocity) = (before.0, Vec2::ZERO, before.2, 0.0);
            stats.non_finite += 1;
        }
        stats.wall_crossings += self.count_crossings(before.0, a.position);
        (stats, netted)
    }

    pub(super) fn count_crossings(&self, from: Vec2, to: Vec2) -> u32 {
        if from == to || self.walls.is_empty() {
            return 0;
        }
        let mid = (from + to) * 0.5;
        let half = (to - from).abs().max_element() * 0.5;
        let mut n = 0;
        self.statics.for_each_wall(mid, half, |i| {
            if let Some(w) = self.walls.get(i as usize) {
                if segment_intersection(from, to, w.a, w.b).is_some() {
                    n += 1;
                }
            }
        });
        n
    }

    /// Stops a step that would cross a wall at the wall (sliding along it), then keeps the
    /// agent's centre at least its radius away from walls on the side it came from.
    pub(super) fn resolve_walls(&self, a: &mut Agent, from: Vec2) -> u32 {
        if self.walls.is_empty() {
            return 0;
        }
        let mut contacts = 0;
        let r = a.limits.radius;
        let to = a.position;
        let mid = (from + to) * 0.5;
        let reach = (to - from).abs().max_element() * 0.5 + r;
        let mut first: Option<(f32, Vec2)> = None;
        self.statics.for_each_wall(mid, reach, |i| {
            let Some(w) = self.walls.get(i as usize) else { return };
            if let Some(t) = segment_intersection(from, to, w.a, w.b) {
                if first.is_none_or(|f| t < f.0) {
                    let n = if (from - w.a).dot(w.normal) >= 0.0 { w.normal } else { -w.normal };
                    first = Some((t, n));
                }
            }
        });
        if let Some((t, n)) = first {
            // Back to just before the wall, on the side we came from.
            a.position = from + (to - from) * t + n * 1e-3;
            a.velocity -= n * a.velocity.dot(n).min(0.0);
            contacts += 1;
        }
        // Push out to the radius from every nearby wall (on the side of `from`).
        let p = a.position;
        let mut push = Vec2::ZERO;
        self.statics.for_each_wall(p, r, |i| {
            let Some(w) = self.walls.get(i as usize) else { return };
            let c = closest_on_segment(p, w.a, w.b);
            let d = p.distance(c);
            if d < r {
                let side = if (from - w.a).dot(w.normal) >= 0.0 { w.normal } else { -w.normal };
                let away = if d > 1e-6 { (p - c) / d } else { side };
                // Only push towards the side the agent came from (never through the wall).
                let away = if away.dot(side) < 0.0 { side } else { away };
                push += away * (r - d);
            }
        });
        if push != Vec2::ZERO {
            let candidate = a.position + push;
            // Accept the push only if it does not itself cross a wall.
            if self.count_crossings(a.position, candidate) == 0 {
                a.position = candidate;
                let n = dir(push);
                a.velocity -= n * a.velocity.dot(n).min(0.0);
                contacts += 1;
            }
        }
        contacts
    }

    /// Pushes the agent out of any obstacle it overlaps (contact at radius sum), removing the
    /// velocity into the obstacle.
    pub(super) fn resolve_obstacles(&self, a: &mut Agent) -> u32 {
        if self.obstacles.is_empty() {
            return 0;
        }
        let mut contacts = 0;
        let r = a.limits.radius;
        for _ in 0..2 {
            let p = a.position;
            if self.statics.clear_of_obstacles(p, r) {
                break;
            }
            let mut hit: Option<(Vec2, f32)> = None;
            self.statics.for_each_obstacle(p, r, |i| {
                let Some(o) = self.obstacles.get(i as usize) else { return };
                let reach = o.radius + r;
                if o.center.distance_squared(p) < reach * reach {
                    // Deepest overlap first.
                    let depth = reach - o.center.distance(p);
                    if hit.is_none_or(|h| depth > h.1) {
                        hit = Some((o.center, depth));
                    }
                }
            });
            let Some((c, depth)) = hit else { break };
            let mut n = dir(p - c);
            if n == Vec2::ZERO {
                n = if a.velocity != Vec2::ZERO { -dir(a.velocity) } else { Vec2::X };
            }
            let candidate = p + n * depth;
            if self.count_crossings(p, candidate) > 0 {
                break;
            }
            a.position = candidate;
            a.velocity -= n * a.velocity.dot(n).min(0.0);
            contacts += 1;
        }
        contacts
    }

    pub(super) fn apply_edge(&self, a: &mut Agent) {
        let (min, max) = (self.bounds.min, self.bounds.max);
        match self.edge {
            EdgeRule::Clamp => {
                let p = a.position.clamp(min, max);
                if p.x != a.position.x {
                    a.velocity.x = 0.0;
                }
                if p.y != a.position.y {
                    a.velocity.y = 0.0;
                }
                a.position = p;
            }
            EdgeRule::Wrap => {
                let size = max - min;
                let q = a.position - min;
                let w = Vec2::new(wrap_axis(q.x, size.x), wrap_axis(q.y, size.y));
                a.position = (min + w).clamp(min, max);
            }
            EdgeRule::Bounce => {
                for axis in 0..2 {
                    let (lo, hi) = (min[axis], max[axis]);
                    let mut p = a.position[axis];
                    if p < lo {
                        p = (2.0 * lo - p).min(hi);
                        a.velocity[axis] = a.velocity[axis].abs();
                    } else if p > hi {
                        p = (2.0 * hi - p).max(lo);
                        a.velocity[axis] = -a.velocity[axis].abs();
                    }
                    a.position[axis] = p;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::wrap_axis;

    proptest::proptest! {
        #[test]
        fn wrap_axis_equals_rem_euclid(q in -1.0e6f32..1.0e6, size in 0.001f32..1.0e5) {
            proptest::prop_assert_eq!(wrap_axis(q, size).to_bits(), q.rem_euclid(size).to_bits());
        }
    }

    #[test]
    pub(super) fn wrap_axis_keeps_in_range_values_and_wraps_the_rest() {
        assert_eq!(wrap_axis(0.0, 10.0), 0.0);
        assert_eq!(wrap_axis(9.5, 10.0), 9.5);
        assert_eq!(wrap_axis(10.0, 10.0), 0.0);
        assert_eq!(wrap_axis(-0.5, 10.0), 9.5);
        assert_eq!(wrap_axis(25.0, 10.0), 5.0);
    }
}
