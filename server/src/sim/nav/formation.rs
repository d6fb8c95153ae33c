//! Stop formations of MoveTo groups: the hexagonal slots laid out round a goal, the claims of
//! agents arriving near it, and the slot trades of members blocked on their way (see the
//! module doc of [`super`], **Formations**).

use super::*;

/// Slot spacing as a multiple of the largest agent radius of the order.
pub const SLOT_SPACING: f32 = 2.3;

/// A group's stop formation.
#[derive(Debug, Clone)]
pub struct Formation {
    /// Centre (the order's goal).
    pub goal: Vec2,
    /// Slots, nearest to the goal first.
    pub slots: Vec<Vec2>,
    /// Distance of each slot from the goal.
    pub(super) dist: Vec<f32>,
    /// Which slots are taken.
    pub taken: Vec<bool>,
    /// Distance between neighbouring slots.
    pub spacing: f32,
    /// Agents whose order refers to this formation.
    pub members: u32,
}

impl Formation {
    /// Distance of the outermost slot from the goal.
    pub fn radius(&self) -> f32 {
        self.dist.last().copied().unwrap_or(0.0)
    }

    /// The slot agent at `p` claims: among free slots within one spacing of the innermost free
    /// slot's distance, the nearest to `p` (ties: lowest index).
    pub fn pick(&self, p: Vec2) -> Option<usize> {
        let first = self.taken.iter().position(|t| !t)?;
        let limit = self.dist[first] + self.spacing;
        let mut best: Option<(f32, usize)> = None;
        for i in first..self.slots.len() {
            if self.dist[i] > limit {
                break;
            }
            if !self.taken[i] {
                let d = self.slots[i].distance_squared(p);
                if best.is_none_or(|b| d < b.0) {
                    best = Some((d, i));
                }
            }
        }
        best.map(|b| b.1)
    }
}

/// Hexagonal lattice points round `goal` with spacing `s`, nearest first (ties by angle), that
/// pass `keep`, at most `n`. `taken`: about how many lattice points near the goal `keep` turns
/// down for being taken already (slots of other formations there), for which more rings are
/// laid out.
pub fn hex_slots(goal: Vec2, s: f32, n: usize, taken: usize, mut keep: impl FnMut(Vec2) -> bool) -> Vec<Vec2> {
    if n == 0 {
        return Vec::new();
    }
    // Rings enough for n slots with room for rejected ones (a disc of 2n lattice cells, plus
    // the taken ones).
    let k = ((2.0 * (n + taken) as f32 / 3.0).sqrt() * 1.5).ceil() as i32 + 2;
    let row = s * 0.866_025_4;
    let mut pts: Vec<(f32, f32, Vec2)> = Vec::new();
    for j in -k..=k {
        for i in -k..=k {
            let off = Vec2::new((i as f32 + 0.5 * (j.rem_euclid(2)) as f32) * s, j as f32 * row);
            let d = off.length();
            if d <= k as f32 * s {
                pts.push((d, crate::sim::math::atan2(off.y, off.x), goal + off));
            }
        }
    }
    pts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    pts.into_iter().map(|p| p.2).filter(|&p| keep(p)).take(n).collect()
}

impl NavState {
    /// Number of live formations.
    pub fn formations(&self) -> usize {
        self.formations.len()
    }

    /// Slot swaps in formations: an agent on its way to its slot (or pushed off it) that has
    /// made no progress for `after` ticks trades slots with a touching member of its formation (on its way or
    /// holding its slot) when the trade shortens their two distances to their slots by at
    /// least half the agent's radius — the best such trade, ties to the lower id. A member that
    /// was holding its slot goes on its way again. So an agent blocked by members standing
    /// between it and an inner slot takes the slot of the one in its way, who takes the inner
    /// slot one step nearer: the goal passes through the pack instead of the agent.
    /// Agents are visited in id order, positions as of `grid` (the tick's start). Returns how
    /// many trades were made. `max_radius`: the largest agent radius.
    pub fn swap_blocked_slots(&self, roster: &mut Roster, grid: &AgentGrid, after: u32, max_radius: f32) -> usize {
        if self.formations.is_empty() {
            return 0;
        }
        let (by_id, all) = roster.slots_and_storage_mut();
        let mut swaps = 0;
        for &ia in by_id {
            let ia = ia as usize;
            let Some(a) = all.get(ia) else { continue };
            // On its way, or pushed off its slot and not back yet (a holder's stall counts only
            // while it is off its slot).
            let Some(oa) = a.order.as_deref().filter(|o| !o.gave_up && o.formation != 0 && o.stall >= after) else { continue };
            let (Some(slot_a), Some(f)) = (oa.slot, self.formations.get(&oa.formation)) else { continue };
            let (pa, ra) = (a.position, a.limits.radius);
            let Some(&sa) = f.slots.get(slot_a as usize) else { continue };
            let mut best: Option<(f32, u32, usize, u32)> = None;
            grid.for_each_in_box_ranked(pa, 1.1 * (ra + max_radius), |rank, n| {
                if n.id == a.id || pa.distance(n.position) > 1.1 * (ra + n.radius) {
                    return;
                }
                let Some(&ib) = grid.order().get(rank) else { return };
                let Some(ob) = all.get(ib as usize).and_then(|b| b.order.as_deref()) else { return };
                let Some(slot_b) = ob.slot.filter(|_| ob.formation == oa.formation && !ob.gave_up) else { return };
                let Some(&sb) = f.slots.get(slot_b as usize) else { return };
                let pb = n.position;
                let gain = pa.distance(sa) + pb.distance(sb) - pa.distance(sb) - pb.distance(sa);
                if gain >= 0.5 * ra && best.is_none_or(|(g, id, _, _)| gain > g || (gain == g && n.id < id)) {
                    best = Some((gain, n.id, ib as usize, slot_b));
                }
            });
            let Some((_, _, ib, slot_b)) = best else { continue };
            let (Some(&sa), Some(&sb)) = (f.slots.get(slot_a as usize), f.slots.get(slot_b as usize)) else { continue };
            for (i, slot, at) in [(ia, slot_b, sb), (ib, slot_a, sa)] {
                if let Some(o) = all.get_mut(i).and_then(|x| x.order.as_deref_mut()) {
                    o.slot = Some(slot);
                    o.stop_point = at;
                    o.done = false;
                    o.best = f32::INFINITY;
                    o.stall = 0;
                }
            }
            swaps += 1;
        }
        swaps
    }

    /// Releases `order`'s slot and membership.
    pub fn release(&mut self, order: &MoveOrder) {
        let Some(f) = self.formations.get_mut(&order.formation) else { return };
        if let Some(s) = order.slot {
            if let Some(t) = f.taken.get_mut(s as usize) {
                *t = false;
            }
        }
        f.members = f.members.saturating_sub(1);
        if f.members == 0 {
            self.formations.remove(&order.formation);
        }
    }

    /// Agents near their goal claim formation slots, in id order.
    pub(super) fn claim_slots(&mut self, by_id: &[u32], all: &mut [Agent]) {
        for &slot in by_id {
            let Some(a) = all.get_mut(slot as usize) else { continue };
            let p = a.position;
            let Some(o) = a.order.as_mut().filter(|o| o.active() && o.slot.is_none()) else { continue };
            if p.distance(o.goal) > o.claim_radius {
                continue;
            }
            let Some(f) = self.formations.get_mut(&o.formation) else { continue };
            if let Some(s) = f.pick(p) {
                f.taken[s] = true;
                o.slot = Some(s as u32);
                o.stop_point = f.slots[s];
                o.best = f32::INFINITY;
                o.stall = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_slots_are_nearest_first_and_spaced() {
        // Spacing 1: the goal, then the six neighbours at distance 1, then distance √3.
        let s = hex_slots(Vec2::ZERO, 1.0, 13, 0, |_| true);
        assert_eq!(s.len(), 13);
        assert_eq!(s[0], Vec2::ZERO);
        for p in &s[1..7] {
            assert!((p.length() - 1.0).abs() < 1e-5, "{p:?}");
        }
        for p in &s[7..13] {
            assert!((p.length() - 3f32.sqrt()).abs() < 1e-4, "{p:?}");
        }
        for i in 0..s.len() {
            for j in i + 1..s.len() {
                assert!(s[i].distance(s[j]) > 0.999);
            }
        }
        // A filter drops slots (keep x ≥ 0) and the rest still fill up.
        let s = hex_slots(Vec2::ZERO, 1.0, 10, 0, |p| p.x >= -1e-6);
        assert_eq!(s.len(), 10);
        assert!(s.iter().all(|p| p.x >= -1e-6));
    }

    #[test]
    fn claims_fill_the_innermost_shell_nearest_first() {
        let slots = hex_slots(Vec2::ZERO, 1.0, 7, 0, |_| true);
        let dist = slots.iter().map(|s| s.length()).collect();
        let mut f = Formation { goal: Vec2::ZERO, taken: vec![false; 7], slots, dist, spacing: 1.0, members: 7 };
        // Innermost free slot is the centre (d 0); the shell reaches d ≤ 1, so an agent at
        // (5, 0) takes the ring slot (1, 0), the nearest to it.
        let i = f.pick(Vec2::new(5.0, 0.0)).unwrap_or(usize::MAX);
        assert!((f.slots[i] - Vec2::new(1.0, 0.0)).length() < 1e-5);
        f.taken[i] = true;
        // With the centre taken, an agent at (0, −5) takes (−0.5, −0.866) or (0.5, −0.866): both at
        // distance √(0.25 + 17.27); the tie goes to the lower index.
        f.taken[0] = true;
        let j = f.pick(Vec2::new(0.0, -5.0)).unwrap_or(usize::MAX);
        assert!((f.slots[j].y + 0.866).abs() < 1e-3);
        for t in f.taken.iter_mut() {
            *t = true;
        }
        assert_eq!(f.pick(Vec2::ZERO), None);
    }
}
