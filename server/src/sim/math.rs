//! Small numeric helpers shared by every behaviour. None of them can produce NaN or ±Inf
//! from finite input: a zero-length normalise returns zero.

use glam::Vec2;

/// Lengths below this are treated as zero when normalising.
pub const EPSILON: f32 = 1e-6;

/// The unit vector of `v`, or zero when `v` is (nearly) zero or not finite.
#[inline]
pub fn dir(v: Vec2) -> Vec2 {
    let len = v.length();
    if len > EPSILON && len.is_finite() { v / len } else { Vec2::ZERO }
}

/// `v` shortened to at most `max` (Unity's `ClampMagnitude`).
#[inline]
pub fn clamp_len(v: Vec2, max: f32) -> Vec2 {
    let len_sq = v.length_squared();
    if len_sq > max * max && len_sq > 0.0 { v * (max / len_sq.sqrt()) } else { v }
}

/// Maps an angle into (−π, π].
#[inline]
pub fn wrap_angle(a: f32) -> f32 {
    use std::f32::consts::{PI, TAU};
    if !a.is_finite() {
        return 0.0;
    }
    // `a % TAU` is `a` itself when |a| < TAU; skipping the (library) call gives the same bits.
    let mut r = if a.abs() < TAU { a } else { a % TAU };
    if r > PI {
        r -= TAU;
    } else if r <= -PI {
        r += TAU;
    }
    r
}

/// Cell index along one axis of a grid of `n ≥ 1` cells: `floor(c)` clamped to `0..n`, where
/// `c` is the coordinate in cells (a non-finite `c` maps to 0). Without a `floor` call (the
/// x86-64 baseline has no rounding instruction, so `floor` is a library call, once 13 % of a
/// tick): for `c ≥ 0` truncation is floor, and every `c < 0` clamps to 0 either way. The agent
/// grid and the nav grid both use it.
#[inline]
pub fn cell_axis(c: f32, n: u32) -> u32 {
    if c.is_finite() { (c.max(0.0) as u32).min(n.saturating_sub(1)) } else { 0 }
}

/// The heading of orientation `theta`: (cos θ, sin θ). θ = 0 faces +x, counter-clockwise positive.
#[inline]
pub fn heading(theta: f32) -> Vec2 {
    Vec2::new(theta.cos(), theta.sin())
}

/// The orientation of direction `v` (inverse of [`heading`]); `fallback` when `v` is zero.
#[inline]
pub fn orientation_of(v: Vec2, fallback: f32) -> f32 {
    if v.length_squared() > EPSILON * EPSILON { v.y.atan2(v.x) } else { fallback }
}

/// The left-hand perpendicular (rotates +90°).
#[inline]
pub fn perp(v: Vec2) -> Vec2 {
    Vec2::new(-v.y, v.x)
}

/// A fixed unit direction that separates two agents standing on the same spot, as seen from
/// `a` (`b` gets the opposite): the golden angle times a number made of both ids.
pub fn pair_dir(a: u32, b: u32) -> Vec2 {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    let d = heading(lo.wrapping_mul(31).wrapping_add(hi) as f32 * 2.399_963);
    if a < b { d } else { -d }
}

/// Distance from `p` to the segment `a`–`b`, and the closest point on it.
pub fn closest_on_segment(p: Vec2, a: Vec2, b: Vec2) -> Vec2 {
    let ab = b - a;
    let len_sq = ab.length_squared();
    if len_sq <= EPSILON * EPSILON {
        return a;
    }
    let t = ((p - a).dot(ab) / len_sq).clamp(0.0, 1.0);
    a + ab * t
}

/// Intersection of segment p→q with segment a→b: the parameter t ∈ [0,1] along p→q, if they cross.
pub fn segment_intersection(p: Vec2, q: Vec2, a: Vec2, b: Vec2) -> Option<f32> {
    let r = q - p;
    let s = b - a;
    let denom = r.perp_dot(s);
    if denom.abs() <= 1e-12 {
        return None;
    }
    let ap = a - p;
    let t = ap.perp_dot(s) / denom;
    let u = ap.perp_dot(r) / denom;
    if (0.0..=1.0).contains(&t) && (0.0..=1.0).contains(&u) { Some(t) } else { None }
}

/// First hit of a circle of radius `r` swept from `p` along unit `d` for `len` against the circle
/// (`c`, `cr`): the distance travelled at contact, 0 when already overlapping.
pub fn sweep_circle(p: Vec2, d: Vec2, len: f32, r: f32, c: Vec2, cr: f32) -> Option<f32> {
    let rr = r + cr;
    let m = p - c;
    let cc = m.length_squared() - rr * rr;
    if cc <= 0.0 {
        return Some(0.0);
    }
    let b = m.dot(d);
    if b > 0.0 {
        return None;
    }
    let disc = b * b - cc;
    if disc < 0.0 {
        return None;
    }
    let t = -b - disc.sqrt();
    if t <= len { Some(t.max(0.0)) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn wrap_angle_equals_the_fmod_formula(a in -1.0e6f32..1.0e6) {
            use std::f32::consts::{PI, TAU};
            let mut r = a % TAU;
            if r > PI {
                r -= TAU;
            } else if r <= -PI {
                r += TAU;
            }
            proptest::prop_assert_eq!(wrap_angle(a).to_bits(), r.to_bits());
        }
    }

    #[test]
    fn dir_of_zero_is_zero() {
        assert_eq!(dir(Vec2::ZERO), Vec2::ZERO);
        assert_eq!(dir(Vec2::new(f32::NAN, 1.0)), Vec2::ZERO);
        assert!((dir(Vec2::new(3.0, 4.0)) - Vec2::new(0.6, 0.8)).length() < 1e-6);
    }

    #[test]
    fn clamp_len_shortens_only_long_vectors() {
        assert_eq!(clamp_len(Vec2::new(3.0, 4.0), 10.0), Vec2::new(3.0, 4.0));
        assert!((clamp_len(Vec2::new(3.0, 4.0), 1.0) - Vec2::new(0.6, 0.8)).length() < 1e-6);
    }

    #[test]
    fn wrap_angle_maps_into_half_open_range() {
        use std::f32::consts::PI;
        assert!((wrap_angle(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-5);
        assert!((wrap_angle(-3.0 * PI / 2.0) - PI / 2.0).abs() < 1e-5);
        assert!((wrap_angle(PI) - PI).abs() < 1e-6);
        assert!((wrap_angle(-PI) - PI).abs() < 1e-6);
        assert_eq!(wrap_angle(f32::NAN), 0.0);
    }

    #[test]
    fn segments_cross_at_expected_parameter() {
        let t = segment_intersection(
            Vec2::new(0.0, -1.0),
            Vec2::new(0.0, 3.0),
            Vec2::new(-1.0, 0.0),
            Vec2::new(1.0, 0.0),
        );
        assert!((t.unwrap_or(-1.0) - 0.25).abs() < 1e-6);
        assert!(segment_intersection(Vec2::ZERO, Vec2::X, Vec2::Y, Vec2::new(1.0, 1.0)).is_none());
    }

    #[test]
    fn sweep_hits_circle_at_contact_distance() {
        // A radius-0.5 circle moving +x from origin meets a radius-1 circle at x=5 after 3.5.
        let t = sweep_circle(Vec2::ZERO, Vec2::X, 10.0, 0.5, Vec2::new(5.0, 0.0), 1.0);
        assert!((t.unwrap_or(-1.0) - 3.5).abs() < 1e-5);
        assert!(sweep_circle(Vec2::ZERO, Vec2::X, 3.0, 0.5, Vec2::new(5.0, 0.0), 1.0).is_none());
        assert!(sweep_circle(Vec2::ZERO, -Vec2::X, 10.0, 0.5, Vec2::new(5.0, 0.0), 1.0).is_none());
    }
}
