//! The apply phase: the one integrator, contact settling between agents, walls, obstacles
//! and the world's edges.

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

/// Passes over the pairs in contact after the parallel push (see [`ApplyCtx::relax`]).
pub(super) const CONTACT_RELAX_PASSES: usize = 4;

/// Rounds of finding and relaxing contacts after the parallel push (see [`World::step`]).
pub(super) const CONTACT_ROUNDS: usize = 4;

/// Most rounds: past [`CONTACT_ROUNDS`], rounds go on only while some pair overlaps by more
/// than [`CONTACT_TOLERANCE`] of its radii sum (a jam's crush).
pub(super) const CONTACT_ROUNDS_MAX: usize = 32;

/// Slack (in largest agent radii) within which two agents count as contact candidates.
pub(super) const CONTACT_MARGIN: f32 = 0.5;

/// Fewest agents per rayon task in the first round's neighbour lookups of contact settling.
const SETTLE_MIN_LEN: usize = 64;

/// Overlap (fraction of the radii sum) that rounds past [`CONTACT_ROUNDS`] work off.
pub(super) const CONTACT_TOLERANCE: f32 = 0.01;

/// Whether some pair overlaps by more than [`CONTACT_TOLERANCE`] of its radii sum.
pub(super) fn deep_contact(bodies: &mut Bodies, agents: &[Agent], pairs: &[ContactPair]) -> bool {
    pairs.iter().any(|&(_, _, ia, ib)| match (bodies.get(agents, ia), bodies.get(agents, ib)) {
        (Some(a), Some(b)) => {
            let rs = a.radius + b.radius;
            a.position.distance(b.position) < rs * (1.0 - CONTACT_TOLERANCE)
        }
        _ => false,
    })
}

/// What contact settling reads of an agent, packed so that the rounds over a jam's pairs stay
/// in cache: its position (kept equal to the agent's), radius and id, and where it was when
/// its neighbours were last looked up (NaN: never).
#[derive(Debug, Clone, Copy)]
pub(super) struct Body {
    pub(super) position: Vec2,
    pub(super) radius: f32,
    pub(super) id: AgentId,
    pub(super) looked: Vec2,
}

/// The [`Body`] of each agent that settling meets, by storage index, loaded from the agent the
/// first time it is asked for: a step reads the few agents near a contact, not every agent
/// (an agent's body is only ever written back to the agent, so one loaded late is the same
/// as one loaded at the start). Kept by the world from step to step, so that its buffers are
/// not allocated (and their pages faulted in) every step.
#[derive(Debug, Default)]
pub(super) struct Bodies {
    /// Per storage index: 1 + the body's index in `list`, or 0 when not loaded.
    slot: Vec<u32>,
    list: Vec<Body>,
    /// Storage index of each body of `list`.
    loaded: Vec<u32>,
}

impl Bodies {
    /// Empties it for a step over `agents` agents, keeping its buffers.
    pub(super) fn reset(&mut self, agents: usize) {
        for &i in &self.loaded {
            if let Some(s) = self.slot.get_mut(i as usize) {
                *s = 0;
            }
        }
        self.loaded.clear();
        self.list.clear();
        self.slot.resize(agents, 0);
    }

    /// The body of agent `i` (a storage index of `agents`).
    #[inline]
    pub(super) fn get(&mut self, agents: &[Agent], i: u32) -> Option<Body> {
        self.get_mut(agents, i).map(|b| *b)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, agents: &[Agent], i: u32) -> Option<&mut Body> {
        let s = self.slot.get_mut(i as usize)?;
        if *s == 0 {
            let a = agents.get(i as usize)?;
            self.list.push(Body { position: a.position, radius: a.limits.radius, id: a.id, looked: Vec2::NAN });
            self.loaded.push(i);
            *s = self.list.len() as u32;
        }
        self.list.get_mut(*s as usize - 1)
    }
}

/// What the apply phase's parallel pass leaves for contact settling.
pub(super) struct Pushed<'a> {
    /// Where each agent stands after it (by storage index).
    pub(super) at: &'a [Vec2],
    /// The agents the push or the wall and obstacle net moved (storage indexes).
    pub(super) moved: Vec<u32>,
    /// The pairs the push found.
    pub(super) found: Vec<ContactPair>,
}

/// A pair of agents in contact: (lower id, higher id, storage index of each).
pub(super) type ContactPair = (AgentId, AgentId, u32, u32);

/// The sort key of a pair: its ids (a pair's storage indexes follow from them).
pub(super) fn pair_key(p: &ContactPair) -> u64 {
    (u64::from(p.0) << 32) | u64::from(p.1)
}

/// Adds the pairs in `fresh` (emptied) that `cand` (sorted by ids, each once) lacks, keeping it
/// sorted: the new ones are sorted alone and merged in.
pub(super) fn absorb(cand: &mut Vec<ContactPair>, fresh: &mut Vec<ContactPair>) {
    if fresh.is_empty() {
        return;
    }
    fresh.sort_unstable_by_key(pair_key);
    fresh.dedup();
    if cand.is_empty() {
        std::mem::swap(cand, fresh);
        return;
    }
    let old = std::mem::take(cand);
    cand.reserve(old.len() + fresh.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(o), Some(f)) = (old.get(i), fresh.get(j)) {
        let (ko, kf) = (pair_key(o), pair_key(f));
        if kf < ko {
            cand.push(*f);
            j += 1;
        } else {
            cand.push(*o);
            i += 1;
            j += usize::from(kf == ko);
        }
    }
    cand.extend_from_slice(old.get(i..).unwrap_or(&[]));
    cand.extend_from_slice(fresh.get(j..).unwrap_or(&[]));
    fresh.clear();
}

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

    /// Adds to `cand` every agent that stands within the radii sum plus `margin` of agent `i`
    /// (a storage index), as a pair, each where its body stands.
    pub(super) fn candidates_of(&self, bodies: &mut Bodies, agents: &[Agent], i: u32, margin: f32, cand: &mut Vec<ContactPair>) {
        let order = self.grid.order();
        let Some(a) = bodies.get(agents, i) else { return };
        let r = a.radius;
        // Everyone moved at most `reach − max radius` from the grid's positions, plus the push
        // (at most its radius).
        self.grid.for_each_in_box_ranked(a.position, 2.0 * r + 2.0 * self.reach + margin, |rank, n| {
            let Some(&j) = order.get(rank) else { return };
            let Some(b) = bodies.get(agents, j) else { return };
            if n.id == a.id {
                return;
            }
            let rs = r + b.radius + margin;
            if a.position.distance_squared(b.position) < rs * rs {
                cand.push(if a.id < b.id { (a.id, b.id, i, j) } else { (b.id, a.id, j, i) });
            }
        });
    }

    /// [`Contacts::candidates_of`] before any body has moved from its agent: `at` holds where
    /// each agent stands (by storage index), and ids and radii are the grid's, so that no agent
    /// is read (and the lookups may run in parallel); the same pairs.
    pub(super) fn candidates_at_rest(&self, at: &[Vec2], i: u32, margin: f32, cand: &mut Vec<ContactPair>) {
        let order = self.grid.order();
        let (Some(&p), Some(a)) = (at.get(i as usize), self.grid.all().get(self.grid.rank(i as usize))) else { return };
        let (id, r) = (a.id, a.radius);
        self.grid.for_each_in_box_ranked(p, 2.0 * r + 2.0 * self.reach + margin, |rank, n| {
            if n.id == id {
                return;
            }
            let Some(&j) = order.get(rank) else { return };
            let Some(&q) = at.get(j as usize) else { return };
            let rs = r + n.radius + margin;
            if p.distance_squared(q) < rs * rs {
                cand.push(if id < n.id { (id, n.id, i, j) } else { (n.id, id, j, i) });
            }
        });
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
                    pairs.push((id, n.id, me as u32, other));
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
    /// Relaxes the candidate pairs in contact [`CONTACT_RELAX_PASSES`] times, Gauss–Seidel: each
    /// overlapping pair is moved apart, each half the overlap, in the pairs' (sorted) order, so
    /// that a cluster whose pushes cancelled in the parallel pass comes apart too. A move that
    /// would cross a wall is not made; moved agents are kept out of obstacles and in bounds after.
    ///
    /// Returns the storage indexes of the agents it moved (sorted, each once).
    pub(super) fn relax(&self, agents: &mut [Agent], bodies: &mut Bodies, pairs: &[ContactPair]) -> Vec<u32> {
        // Which of each pair's agents a pass moved (bit 0: the first, bit 1: the second).
        let mut pair_moved = vec![0u8; pairs.len()];
        for _ in 0..CONTACT_RELAX_PASSES {
            let mut moved = false;
            for (&(id_a, id_b, ia, ib), pm) in pairs.iter().zip(pair_moved.iter_mut()) {
                let (Some(a), Some(b)) = (bodies.get(agents, ia), bodies.get(agents, ib)) else { continue };
                let d = a.position - b.position;
                let rs = a.radius + b.radius;
                let d2 = d.length_squared();
                if d2 >= rs * rs {
                    continue;
                }
                let dist = d2.sqrt();
                let away = if dist > 1e-6 { d / dist } else { pair_dir(id_a, id_b) };
                let corr = away * ((rs - dist) * 0.5);
                let (pa, pb) = (a.position, b.position);
                if self.count_crossings(pa, pa + corr) == 0 {
                    if let Some(a) = bodies.get_mut(agents, ia) {
                        a.position = pa + corr;
                        moved = true;
                        *pm |= 1;
                    }
                }
                if self.count_crossings(pb, pb - corr) == 0 {
                    if let Some(b) = bodies.get_mut(agents, ib) {
                        b.position = pb - corr;
                        moved = true;
                        *pm |= 2;
                    }
                }
            }
            if !moved {
                break;
            }
        }
        let mut touched: Vec<u32> = Vec::new();
        for (&(_, _, ia, ib), &pm) in pairs.iter().zip(&pair_moved) {
            if pm & 1 != 0 {
                touched.push(ia);
            }
            if pm & 2 != 0 {
                touched.push(ib);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for &i in &touched {
            let Some(position) = bodies.get(agents, i).map(|b| b.position) else { continue };
            let Some(a) = agents.get_mut(i as usize) else { continue };
            a.position = position;
            if self.solid {
                self.resolve_obstacles(a);
            }
            self.apply_edge(a);
            let position = a.position;
            if let Some(b) = bodies.get_mut(agents, i) {
                b.position = position;
            }
        }
        touched
    }

    /// Settles the contacts left after the parallel push ([`Pushed`]).
    ///
    /// Each round looks up the neighbours of the agents moved last round that it has not looked
    /// up yet (or that moved more than half of [`CONTACT_MARGIN`] since), keeping every pair
    /// within its radii sum plus the margin as a candidate, then relaxes the candidates
    /// ([`ApplyCtx::relax`]). A pair missing from the candidates cannot touch: each of its
    /// agents either never moved, or was looked up and moved less than half the margin since.
    /// [`CONTACT_ROUNDS`] rounds, then more while a crush leaves some pair deeper than
    /// [`CONTACT_TOLERANCE`] of its radii sum, at most `rounds_max` in all. Each agent's
    /// neighbours are looked up about once per step, however many rounds a crush takes. The
    /// first round's lookups (the agents the push and the net moved) run in parallel.
    /// `bodies`: the world's buffer (emptied here).
    pub(super) fn settle(&self, c: &Contacts, agents: &mut [Agent], bodies: &mut Bodies, left: Pushed, rounds_max: usize) {
        let Pushed { at, mut moved, found } = left;
        if moved.is_empty() && found.is_empty() {
            return;
        }
        let margin = CONTACT_MARGIN * c.max_radius;
        let mut cand: Vec<ContactPair> = Vec::new();
        bodies.reset(agents.len());
        // The first round's lookups: no body has moved from its agent yet, so they are read
        // from `at` and the grid, in parallel (the pairs come out in any order; `absorb` sorts
        // them). Only the agents of the pairs found are then loaded as bodies.
        let mut fresh: Vec<ContactPair> = moved
                .par_iter()
                .with_min_len(SETTLE_MIN_LEN)
                .fold(Vec::new, |mut v, &i| {
                    c.candidates_at_rest(at, i, margin, &mut v);
                    v
                })
                .reduce(Vec::new, |mut a, mut b| {
                    a.append(&mut b);
                    a
                });
        fresh.extend(found);
        for &i in &moved {
            if let Some(b) = bodies.get_mut(agents, i) {
                b.looked = b.position;
            }
        }
        for round in 0..rounds_max {
            if round > 0 {
                for &i in &moved {
                    let Some(b) = bodies.get_mut(agents, i) else { continue };
                    // NaN (never looked up) compares false.
                    if b.looked.distance_squared(b.position) <= 0.25 * margin * margin {
                        continue;
                    }
                    b.looked = b.position;
                    c.candidates_of(bodies, agents, i, margin, &mut fresh);
                }
            }
            absorb(&mut cand, &mut fresh);
            if cand.is_empty() || (round >= CONTACT_ROUNDS && !deep_contact(bodies, agents, &cand)) {
                break;
            }
            moved = self.relax(agents, bodies, &cand);
            if moved.is_empty() {
                break;
            }
        }
    }

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
    use super::{Agent, CONTACT_ROUNDS, CONTACT_TOLERANCE, World, wrap_axis};
    use glam::Vec2;

    proptest::proptest! {
        #[test]
        fn wrap_axis_equals_rem_euclid(q in -1.0e6f32..1.0e6, size in 0.001f32..1.0e5) {
            proptest::prop_assert_eq!(wrap_axis(q, size).to_bits(), q.rem_euclid(size).to_bits());
        }
    }

    #[test]
    pub(super) fn absorb_merges_new_pairs_sorted_by_ids_each_once() {
        let mut cand = vec![(1, 5, 0, 4), (2, 3, 1, 2), (7, 9, 6, 8)];
        // Unsorted, with a duplicate of an old pair and one of a new pair.
        let mut fresh = vec![(7, 8, 6, 7), (2, 3, 1, 2), (1, 2, 0, 1), (7, 8, 6, 7), (9, 10, 8, 9)];
        super::absorb(&mut cand, &mut fresh);
        assert_eq!(cand, vec![(1, 2, 0, 1), (1, 5, 0, 4), (2, 3, 1, 2), (7, 8, 6, 7), (7, 9, 6, 8), (9, 10, 8, 9)]);
        assert!(fresh.is_empty());
        // Into an empty set: sorted and deduplicated.
        let mut empty = Vec::new();
        let mut fresh = vec![(3, 4, 2, 3), (1, 2, 0, 1), (3, 4, 2, 3)];
        super::absorb(&mut empty, &mut fresh);
        assert_eq!(empty, vec![(1, 2, 0, 1), (3, 4, 2, 3)]);
    }

    #[test]
    pub(super) fn overlapping_pair_is_pushed_apart_half_each() {
        // Radii 0.5 at rest at (0,0) and (0.6,0): overlap 0.4, each moves 0.2 along the line of
        // centres, so they end just touching at (−0.2,0) and (0.8,0); one contact each.
        use crate::sim::behaviors::testkit::{agent_at, world_with};
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(0.6, 0.0), Vec2::ZERO)]);
        let stats = w.step();
        assert_eq!(stats.contacts, 2);
        let (a, b) = (w.agent(1).unwrap().position, w.agent(2).unwrap().position);
        assert!((a - Vec2::new(-0.2, 0.0)).length() < 1e-5, "{a}");
        assert!((b - Vec2::new(0.8, 0.0)).length() < 1e-5, "{b}");
        // Not solid: they stay where they are.
        let mut w = world_with(vec![agent_at(1, Vec2::ZERO, Vec2::ZERO), agent_at(2, Vec2::new(0.6, 0.0), Vec2::ZERO)]);
        w.config.solid_agents = false;
        assert_eq!(w.step().contacts, 0);
        assert_eq!(w.agent(2).unwrap().position, Vec2::new(0.6, 0.0));
    }

    #[test]
    pub(super) fn a_cluster_whose_pushes_cancel_is_relaxed() {
        // Three in a row 0.8 apart (radii 0.5): overlaps 0.2 and 0.2. The parallel push moves
        // the ends out by 0.1 and the middle not at all (its two halves cancel), leaving 0.1 of
        // overlap on each side; the pairwise relaxation then takes both under 0.01.
        use crate::sim::behaviors::testkit::{agent_at, world_with};
        let mut w = world_with(vec![
            agent_at(1, Vec2::ZERO, Vec2::ZERO),
            agent_at(2, Vec2::new(0.8, 0.0), Vec2::ZERO),
            agent_at(3, Vec2::new(1.6, 0.0), Vec2::ZERO),
        ]);
        w.step();
        let p = |id| w.agent(id).unwrap().position;
        let (ab, bc) = (1.0 - p(1).distance(p(2)), 1.0 - p(2).distance(p(3)));
        assert!(ab < 0.01 && bc < 0.01, "overlaps {ab} {bc}");
        assert!(p(1).x < 0.0 && p(3).x > 1.6, "{} {}", p(1), p(3));
    }

    #[test]
    pub(super) fn a_crushed_crowd_is_relaxed_to_the_tolerance() {
        // An 11 × 11 square lattice of radius-0.5 agents at rest, 0.7 apart: every neighbour
        // pair overlaps by 0.3 (30 % of the radii sum), and the crowd must grow from 7 to 10
        // units across to fit. The four rounds of the plain rule leave inner pairs overlapping
        // by several times the tolerance (checked below by running only those); the rounds
        // past them end with no pair deeper than 1 % of the radii sum.
        use crate::sim::behaviors::testkit::{agent_at, world_with};
        let crowd = || {
            let mut v = Vec::new();
            for i in 0..121u32 {
                v.push(agent_at(i + 1, Vec2::new((i % 11) as f32 * 0.7, (i / 11) as f32 * 0.7), Vec2::ZERO));
            }
            world_with(v)
        };
        let deepest = |w: &World| {
            let a: Vec<&Agent> = w.agents().iter().collect();
            let mut m = 0.0f32;
            for (i, x) in a.iter().enumerate() {
                for y in &a[i + 1..] {
                    m = m.max(1.0 - x.position.distance(y.position));
                }
            }
            m
        };
        let mut w = crowd();
        w.step();
        let tol = CONTACT_TOLERANCE * 1.0;
        assert!(deepest(&w) <= tol + 1e-4, "deepest overlap {} > {tol}", deepest(&w));
        // The same crowd, relaxed by the plain rounds alone, is still crushed: the extra rounds
        // are what meets the tolerance.
        let mut w = crowd();
        w.contact_rounds_max = CONTACT_ROUNDS;
        w.step();
        assert!(deepest(&w) > 2.0 * tol, "plain rounds already reach {}", deepest(&w));
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
