//! Optimal reciprocal collision avoidance (ORCA; van den Berg, Guy, Lin, Manocha, "Reciprocal
//! n-Body Collision Avoidance", 2011): the velocity-level solver behind
//! [`super::behaviors::reciprocal_avoidance`] and MoveTo's default avoidance.
//!
//! Every neighbour (and every static obstacle or wall near the agent) contributes one
//! half-plane of permitted velocities, a [`HalfPlane`]. The new velocity is the one closest to
//! the preferred velocity that lies in every half-plane and within the speed disc ([`solve`]):
//! a 2-D linear program solved incrementally; when the half-planes leave no room (a dense jam),
//! a 3-D program picks the velocity that violates the agents' half-planes least, keeping the
//! static ones.
//!
//! Pure arithmetic on `glam::Vec2`: no allocation beyond the caller's buffers, and the result is
//! a function of the inputs in the order given, so callers that list neighbours in a fixed order
//! get bit-identical results on any thread count.

use glam::Vec2;

/// Determinants below this count as parallel lines.
const EPSILON: f32 = 1e-5;

/// A half-plane of permitted velocities: those on the left of the directed line through
/// `point` along the unit `direction` (`det(direction, point − v) ≤ 0`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HalfPlane {
    /// A point on the boundary line.
    pub point: Vec2,
    /// Unit direction of the boundary; permitted velocities lie to its left.
    pub direction: Vec2,
}

impl HalfPlane {
    /// How far `v` lies outside (positive) or inside (negative or zero) the half-plane.
    pub fn violation(&self, v: Vec2) -> f32 {
        det(self.direction, self.point - v)
    }
}

#[inline]
fn det(a: Vec2, b: Vec2) -> f32 {
    a.x * b.y - a.y * b.x
}

/// Two agents as [`agent_half_plane`] sees them: where and how fast the other is relative to
/// this one, and how close their centres may come.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pair {
    /// The other's position minus this one's.
    pub rel_pos: Vec2,
    /// This one's velocity minus the other's.
    pub rel_vel: Vec2,
    /// The sum of their radii.
    pub radius: f32,
}

/// The half-plane that agent A (velocity `va`) takes for neighbour B.
///
/// `rel_pos` = p_B − p_A, `rel_vel` = v_A − v_B, `radius` = r_A + r_B, `tau` the time horizon
/// (seconds), `dt` the step. `share` is A's share of the avoidance: ½ when B runs the same rule
/// (each does half, the reciprocal case), 1 when B will not react (a resting or non-avoiding
/// agent).
///
/// Not colliding: the velocity obstacle is the cone from the origin tangent to the disc of
/// `radius` round `rel_pos`, cut off by the disc of `radius/tau` round `rel_pos/tau`. `u` is
/// the shortest vector from `rel_vel` to the boundary of that truncated cone, `n` the boundary's
/// outward normal there; the half-plane passes through `va + share·u` with normal `n`.
/// Colliding already: the cut-off disc is that of one step (`tau = dt`), so that the pair is
/// apart after one step.
pub fn agent_half_plane(va: Vec2, pair: Pair, tau: f32, dt: f32, share: f32) -> HalfPlane {
    let Pair { rel_pos, rel_vel, radius } = pair;
    let dist_sq = rel_pos.length_squared();
    let r_sq = radius * radius;
    let (direction, u) = if dist_sq > r_sq {
        let inv_tau = 1.0 / tau;
        // From the cut-off centre to the relative velocity.
        let w = rel_vel - rel_pos * inv_tau;
        let w_len_sq = w.length_squared();
        let dot = w.dot(rel_pos);
        if dot < 0.0 && dot * dot > r_sq * w_len_sq {
            // Nearest boundary point is on the cut-off arc.
            let w_len = w_len_sq.sqrt();
            let unit_w = w / w_len;
            (Vec2::new(unit_w.y, -unit_w.x), unit_w * (radius * inv_tau - w_len))
        } else {
            // Nearest boundary point is on a leg of the cone: left leg when `w` lies to the left
            // of `rel_pos`, else the right leg.
            let leg = (dist_sq - r_sq).sqrt();
            let direction = if det(rel_pos, w) > 0.0 {
                Vec2::new(rel_pos.x * leg - rel_pos.y * radius, rel_pos.x * radius + rel_pos.y * leg) / dist_sq
            } else {
                -Vec2::new(rel_pos.x * leg + rel_pos.y * radius, -rel_pos.x * radius + rel_pos.y * leg) / dist_sq
            };
            (direction, direction * rel_vel.dot(direction) - rel_vel)
        }
    } else {
        let inv_dt = 1.0 / dt;
        let w = rel_vel - rel_pos * inv_dt;
        let w_len = w.length();
        // Coincident centres moving alike: `w` is zero; push along a fixed direction (the
        // caller separates such pairs by id before this is reached).
        let unit_w = if w_len > 0.0 { w / w_len } else { Vec2::X };
        (Vec2::new(unit_w.y, -unit_w.x), unit_w * (radius * inv_dt - w_len))
    };
    HalfPlane { point: va + u * share, direction }
}

/// The half-plane that keeps an agent of radius `radius` at `p` off a static point-like surface
/// at `closest` (the nearest point of an obstacle's or a wall's surface, with `gap` the distance
/// from the agent's edge to it): the velocity towards it may not exceed `gap / tau`, so that the
/// agent cannot touch it within the horizon; when already touching (`gap ≤ 0`) it must move away
/// at `−gap / dt` (at most `max_out`), so that it is clear after one step. Independent of the
/// agent's velocity, as obstacle constraints are.
pub fn static_half_plane(p: Vec2, closest: Vec2, gap: f32, tau: f32, dt: f32, max_out: f32) -> HalfPlane {
    let away = p - closest;
    let len = away.length();
    let n = if len > 0.0 { away / len } else { Vec2::X };
    // Permitted: v·n ≥ c.
    let c = if gap > 0.0 { -gap / tau } else { (-gap / dt).min(max_out) };
    HalfPlane { point: n * c, direction: Vec2::new(n.y, -n.x) }
}

/// Optimises along the boundary of `lines[i]`, subject to `lines[..i]` and the speed disc
/// `radius`. With `maximise_dir` the objective is to go as far as possible along `opt` (a unit
/// direction); otherwise to be as close as possible to `opt`. False when infeasible.
fn lp1(lines: &[HalfPlane], i: usize, radius: f32, opt: Vec2, maximise_dir: bool, result: &mut Vec2) -> bool {
    let line = lines[i];
    let dot = line.point.dot(line.direction);
    let disc = dot * dot + radius * radius - line.point.length_squared();
    if disc < 0.0 {
        // The speed disc lies entirely outside this half-plane.
        return false;
    }
    let sqrt_disc = disc.sqrt();
    let mut t_left = -dot - sqrt_disc;
    let mut t_right = -dot + sqrt_disc;
    for other in &lines[..i] {
        let denom = det(line.direction, other.direction);
        let numer = det(other.direction, line.point - other.point);
        if denom.abs() <= EPSILON {
            // Parallel: either this line lies wholly outside `other`, or `other` cuts nothing.
            if numer < 0.0 {
                return false;
            }
            continue;
        }
        let t = numer / denom;
        if denom >= 0.0 {
            t_right = t_right.min(t);
        } else {
            t_left = t_left.max(t);
        }
        if t_left > t_right {
            return false;
        }
    }
    let t = if maximise_dir {
        if opt.dot(line.direction) > 0.0 { t_right } else { t_left }
    } else {
        line.direction.dot(opt - line.point).clamp(t_left, t_right)
    };
    *result = line.point + line.direction * t;
    true
}

/// The velocity closest to `opt` (or furthest along the unit `opt` with `maximise_dir`) within
/// the speed disc and every half-plane of `lines`, written to `result`. Returns `lines.len()` on
/// success, else the index of the first half-plane that could not be met (`result` then holds
/// the optimum of the half-planes before it).
fn lp2(lines: &[HalfPlane], radius: f32, opt: Vec2, maximise_dir: bool, result: &mut Vec2) -> usize {
    *result = if maximise_dir {
        opt * radius
    } else if opt.length_squared() > radius * radius {
        opt.normalize_or_zero() * radius
    } else {
        opt
    };
    for i in 0..lines.len() {
        if lines[i].violation(*result) > 0.0 {
            let before = *result;
            if !lp1(lines, i, radius, opt, maximise_dir, result) {
                *result = before;
                return i;
            }
        }
    }
    lines.len()
}

/// The 3-D fallback: when `lines[begin..]` cannot all be met, the velocity within the speed disc
/// that minimises the largest violation of the half-planes from `lines[n_static..]`, while
/// meeting the first `n_static` (static) ones. `scratch` is reused for the projected lines.
fn lp3(lines: &[HalfPlane], n_static: usize, begin: usize, radius: f32, result: &mut Vec2, scratch: &mut Vec<HalfPlane>) {
    let mut distance = 0.0f32;
    for i in begin..lines.len() {
        if lines[i].violation(*result) <= distance {
            continue;
        }
        // Project the half-planes onto the boundary of line i: the optimum of the smallest
        // violation lies where line i and the others are violated equally.
        scratch.clear();
        scratch.extend_from_slice(&lines[..n_static]);
        for j in n_static..i {
            let (li, lj) = (lines[i], lines[j]);
            let d = det(li.direction, lj.direction);
            let point = if d.abs() <= EPSILON {
                if li.direction.dot(lj.direction) > 0.0 {
                    // Same direction: line j adds nothing.
                    continue;
                }
                (li.point + lj.point) * 0.5
            } else {
                li.point + li.direction * (det(lj.direction, li.point - lj.point) / d)
            };
            let direction = (lj.direction - li.direction).normalize_or_zero();
            if direction == Vec2::ZERO {
                continue;
            }
            scratch.push(HalfPlane { point, direction });
        }
        let before = *result;
        let opt = Vec2::new(-lines[i].direction.y, lines[i].direction.x);
        if lp2(scratch, radius, opt, true, result) < scratch.len() {
            // Only rounding can get here (the optimum of the previous step is feasible).
            *result = before;
        }
        distance = lines[i].violation(*result);
    }
}

/// The new velocity: within `max_speed` and every half-plane of `lines`, closest to
/// `preferred`; the first `n_static` half-planes (obstacles, walls) are kept whenever they can
/// be, the others are relaxed equally when they cannot all be met. `scratch` is reused across
/// calls. The result is always finite and no longer than `max_speed` (up to rounding).
pub fn solve(lines: &[HalfPlane], n_static: usize, preferred: Vec2, max_speed: f32, scratch: &mut Vec<HalfPlane>) -> Vec2 {
    let n_static = n_static.min(lines.len());
    let preferred = if preferred.is_finite() { preferred } else { Vec2::ZERO };
    let mut v = Vec2::ZERO;
    let failed = lp2(lines, max_speed, preferred, false, &mut v);
    if failed < lines.len() {
        // Static half-planes that cannot all be met (squeezed between obstacles) are relaxed
        // like the rest; the integrator's safety net keeps the agent out of them.
        let keep = if failed < n_static { 0 } else { n_static };
        lp3(lines, keep, failed.max(keep), max_speed, &mut v, scratch);
    }
    if v.is_finite() { crate::sim::math::clamp_len(v, max_speed) } else { Vec2::ZERO }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Vec2, b: Vec2) {
        assert!((a - b).length() < 1e-4, "{a} != {b}");
    }

    const S15: f32 = 3.872_983_3; // √15

    #[test]
    fn head_on_pair_each_takes_half_and_veers_right() {
        // A at the origin moving (1,0); B at (4,0) moving (−1,0); radii 0.5 (sum 1), τ = 2.
        // rel_pos (4,0), rel_vel (2,0): w = rel_vel − rel_pos/τ = (0,0), so the nearest boundary
        // is a leg. The legs leave rel_pos at ±asin(1/4); sin θ = 1/4, cos θ = √15/4. det = 0
        // picks the right leg, direction −(4·√15, −4)/16 = (−√15/4, 1/4). rel_vel·direction =
        // −√15/2; u = (−√15/2)·(−√15/4, 1/4) − (2,0) = (15/8 − 2, −√15/8) = (−1/8, −√15/8).
        // A's share is half: the boundary passes through (1 − 1/16, −√15/16).
        let h = agent_half_plane(Vec2::X, Pair { rel_pos: Vec2::new(4.0, 0.0), rel_vel: Vec2::new(2.0, 0.0), radius: 1.0 }, 2.0, 0.05, 0.5);
        close(h.direction, Vec2::new(-S15 / 4.0, 0.25));
        close(h.point, Vec2::new(15.0 / 16.0, -S15 / 16.0));
        // The preferred (1,0) is outside; its projection onto the boundary is the point itself
        // (direction·(pref − point) = −√15/4·1/16 + 1/4·√15/16 = 0).
        assert!(h.violation(Vec2::X) > 0.0);
        let mut scratch = Vec::new();
        let v = solve(&[h], 0, Vec2::X, 2.0, &mut scratch);
        close(v, Vec2::new(15.0 / 16.0, -S15 / 16.0));
        // B's view is the mirror image: it veers to its own right (+y), so they pass.
        let hb = agent_half_plane(-Vec2::X, Pair { rel_pos: Vec2::new(-4.0, 0.0), rel_vel: Vec2::new(-2.0, 0.0), radius: 1.0 }, 2.0, 0.05, 0.5);
        let vb = solve(&[hb], 0, -Vec2::X, 2.0, &mut scratch);
        close(vb, Vec2::new(-15.0 / 16.0, S15 / 16.0));
    }

    #[test]
    fn agent_at_rest_is_passed_along_the_cone_leg() {
        // B rests at (4,0) and will not react (share 1). A moves (3,0), τ = 2: w = (3,0) − (2,0)
        // = (1,0), w·rel_pos = 4 > 0, so the leg again. u = (−3/16·... ): the new velocity is the
        // projection of (3,0) on the right leg, 3·cos θ along (cos θ, −sin θ):
        // (3·15/16, −3·√15/16) = (2.8125, −0.72618).
        let h = agent_half_plane(Vec2::new(3.0, 0.0), Pair { rel_pos: Vec2::new(4.0, 0.0), rel_vel: Vec2::new(3.0, 0.0), radius: 1.0 }, 2.0, 0.05, 1.0);
        let mut scratch = Vec::new();
        let v = solve(&[h], 0, Vec2::new(3.0, 0.0), 5.0, &mut scratch);
        close(v, Vec2::new(2.8125, -3.0 * S15 / 16.0));
        // Slow enough to stop short of B within the horizon: (1,0) has w = (−1,0), outside the
        // cut-off disc (centre (2,0), radius 1/2) on the near side, so the cut-off arc gives the
        // boundary x = 1.5 (u = (1/2, 0), direction (0,1)) and (1,0) is already permitted.
        let h = agent_half_plane(Vec2::X, Pair { rel_pos: Vec2::new(4.0, 0.0), rel_vel: Vec2::X, radius: 1.0 }, 2.0, 0.05, 1.0);
        close(h.direction, Vec2::Y);
        close(h.point, Vec2::new(1.5, 0.0));
        close(solve(&[h], 0, Vec2::X, 5.0, &mut scratch), Vec2::X);
    }

    #[test]
    fn crossing_at_right_angles() {
        // A at the origin moving (1,0), B at (3,−3) moving (0,1): both reach (3,0) at t = 3.
        // τ = 2: w = (1,−1) − (1.5,−1.5) = (−0.5, 0.5); w·rel_pos = −3 < 0 and 9 > 1·0.5, so the
        // cut-off arc: |w| = √½, unit w = (−√½, √½), direction (√½, √½), u = (½ − √½)·unit w.
        // The collision is beyond the horizon and (1,0) is permitted.
        let h = agent_half_plane(Vec2::X, Pair { rel_pos: Vec2::new(3.0, -3.0), rel_vel: Vec2::new(1.0, -1.0), radius: 1.0 }, 2.0, 0.05, 0.5);
        let r = std::f32::consts::FRAC_1_SQRT_2;
        close(h.direction, Vec2::new(r, r));
        close(h.point, Vec2::X + Vec2::new(-r, r) * ((0.5 - r) * 0.5));
        assert!(h.violation(Vec2::X) <= 0.0);
        // τ = 4: w = (1,−1) − (0.75,−0.75) = (0.25,−0.25); w·rel_pos = 1.5 > 0 → a leg; det = 0
        // → the right leg: leg = √17, direction −(3√17 − 3, −3 − 3√17)/18. A's new velocity is
        // (1,0) + u/2 with u = (rel_vel·direction)·direction − rel_vel, and it must slow down
        // and turn away from B's path (x < 1, y < 0 … right of its course, behind B).
        let h = agent_half_plane(Vec2::X, Pair { rel_pos: Vec2::new(3.0, -3.0), rel_vel: Vec2::new(1.0, -1.0), radius: 1.0 }, 4.0, 0.05, 0.5);
        let s17 = 17f32.sqrt();
        let d = -Vec2::new(3.0 * s17 - 3.0, -3.0 - 3.0 * s17) / 18.0;
        close(h.direction, d);
        let u = d * Vec2::new(1.0, -1.0).dot(d) - Vec2::new(1.0, -1.0);
        close(h.point, Vec2::X + u * 0.5);
        let mut scratch = Vec::new();
        let v = solve(&[h], 0, Vec2::X, 2.0, &mut scratch);
        close(v, Vec2::X + u * 0.5);
        assert!(v.x < 1.0 && v.y < 0.0, "{v}");
    }

    #[test]
    fn already_overlapping_pair_is_apart_after_one_step() {
        // A at rest at the origin, B at rest at (0.5,0), radius sum 1: overlap 0.5. dt = 0.05:
        // w = 0 − (0.5,0)/0.05 = (−10,0); u = (1/0.05 − 10)·(−1,0) = (−10,0); half: the boundary
        // is x = −5 (direction (0,1)): A must move left at 5 units/s, B right at 5, and after
        // 0.05 s they are 0.5 further apart: just touching.
        let h = agent_half_plane(Vec2::ZERO, Pair { rel_pos: Vec2::new(0.5, 0.0), rel_vel: Vec2::ZERO, radius: 1.0 }, 2.0, 0.05, 0.5);
        close(h.direction, Vec2::Y);
        close(h.point, Vec2::new(-5.0, 0.0));
        let mut scratch = Vec::new();
        close(solve(&[h], 0, Vec2::ZERO, 10.0, &mut scratch), Vec2::new(-5.0, 0.0));
        // With a top speed of 2 it cannot: the 3-D fallback moves away as fast as it may.
        close(solve(&[h], 0, Vec2::ZERO, 2.0, &mut scratch), Vec2::new(-2.0, 0.0));
    }

    #[test]
    fn static_half_plane_limits_the_approach_speed() {
        // Agent at the origin, a surface point at (3,0), gap 2, τ = 1: speed towards +x at most
        // 2; sideways free. Preferred (5,0) → (2,0); preferred (1,3) stays.
        let h = static_half_plane(Vec2::ZERO, Vec2::new(3.0, 0.0), 2.0, 1.0, 0.05, 5.0);
        let mut scratch = Vec::new();
        close(solve(&[h], 1, Vec2::new(5.0, 0.0), 5.0, &mut scratch), Vec2::new(2.0, 0.0));
        close(solve(&[h], 1, Vec2::new(1.0, 3.0), 5.0, &mut scratch), Vec2::new(1.0, 3.0));
        // Touching by 0.1 (gap −0.1): away at 0.1/0.05 = 2 units/s at least.
        let h = static_half_plane(Vec2::ZERO, Vec2::new(0.4, 0.0), -0.1, 1.0, 0.05, 5.0);
        close(solve(&[h], 1, Vec2::ZERO, 5.0, &mut scratch), Vec2::new(-2.0, 0.0));
    }

    #[test]
    fn two_constraints_meet_at_their_corner() {
        // v.x ≤ 1 and v.y ≤ 1 (boundaries x = 1 upwards... permitted on the left): preferred
        // (3,3) → the corner (1,1).
        let hx = HalfPlane { point: Vec2::new(1.0, 0.0), direction: Vec2::Y };
        let hy = HalfPlane { point: Vec2::new(0.0, 1.0), direction: -Vec2::X };
        assert!(hx.violation(Vec2::new(2.0, 0.0)) > 0.0 && hx.violation(Vec2::ZERO) <= 0.0);
        assert!(hy.violation(Vec2::new(0.0, 2.0)) > 0.0 && hy.violation(Vec2::ZERO) <= 0.0);
        let mut scratch = Vec::new();
        close(solve(&[hx, hy], 0, Vec2::new(3.0, 3.0), 5.0, &mut scratch), Vec2::new(1.0, 1.0));
        // Infeasible pair: v.x ≤ −1 and v.x ≥ 1. The fallback balances the violations: v.x = 0,
        // and of those velocities it keeps the largest along the first failed line.
        let left = HalfPlane { point: Vec2::new(-1.0, 0.0), direction: Vec2::Y };
        let right = HalfPlane { point: Vec2::new(1.0, 0.0), direction: -Vec2::Y };
        let v = solve(&[left, right], 0, Vec2::new(0.0, 0.0), 2.0, &mut scratch);
        assert!(v.x.abs() < 1e-4, "{v}");
        assert!(v.length() <= 2.0 + 1e-4);
    }

    proptest::proptest! {
        #[test]
        fn chosen_velocity_is_finite_and_within_max_speed(
            nbrs in proptest::collection::vec(((-10.0f32..10.0, -10.0f32..10.0), (-5.0f32..5.0, -5.0f32..5.0), 0.1f32..2.0, proptest::bool::ANY), 0..24),
            walls in proptest::collection::vec(((-6.0f32..6.0, -6.0f32..6.0), -1.0f32..3.0), 0..4),
            pref in (-20.0f32..20.0, -20.0f32..20.0),
            va in (-5.0f32..5.0, -5.0f32..5.0),
            max_speed in 0.0f32..6.0,
            tau in 0.1f32..10.0,
        ) {
            let va = Vec2::new(va.0, va.1);
            let mut lines = Vec::new();
            for ((px, py), gap) in &walls {
                let c = Vec2::new(*px, *py);
                lines.push(static_half_plane(Vec2::ZERO, c, *gap, tau, 0.05, max_speed));
            }
            let n_static = lines.len();
            for ((px, py), (vx, vy), r, recip) in &nbrs {
                let rel = Vec2::new(*px, *py);
                if rel == Vec2::ZERO { continue; }
                lines.push(agent_half_plane(va, Pair { rel_pos: rel, rel_vel: va - Vec2::new(*vx, *vy), radius: 0.5 + r }, tau, 0.05, if *recip { 0.5 } else { 1.0 }));
            }
            let mut scratch = Vec::new();
            let v = solve(&lines, n_static, Vec2::new(pref.0, pref.1), max_speed, &mut scratch);
            proptest::prop_assert!(v.is_finite());
            proptest::prop_assert!(v.length() <= max_speed * (1.0 + 1e-5) + 1e-6, "{} > {}", v.length(), max_speed);
        }
    }
}
