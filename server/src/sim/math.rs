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
    if v.length_squared() > EPSILON * EPSILON { atan2(v.y, v.x) } else { fallback }
}

/// tan(π/8): above it [`atan2`] works on (t − 1)/(t + 1) instead of t.
const TAN_PI_8: f32 = 0.414_213_57;

/// atan(u) for |u| ≤ tan(π/8): its Taylor series to u¹⁵ (the next term is below 2e-8 there).
#[inline]
fn atan_small(u: f32) -> f32 {
    let u2 = u * u;
    let p = -1.0 / 15.0;
    let p = p * u2 + 1.0 / 13.0;
    let p = p * u2 - 1.0 / 11.0;
    let p = p * u2 + 1.0 / 9.0;
    let p = p * u2 - 1.0 / 7.0;
    let p = p * u2 + 1.0 / 5.0;
    let p = p * u2 - 1.0 / 3.0;
    u + u * u2 * p
}

/// The angle of (x, y), as `f32::atan2` (same quadrants and signed zeros, within 3e-7 rad), in
/// plain arithmetic: the integrator takes one per moving agent per tick, where the library call
/// was a tenth of a wander swarm's tick; and the same bits on every platform, where libraries'
/// `atan2f` differ in their last bits. Non-finite input goes to the library.
#[inline]
pub fn atan2(y: f32, x: f32) -> f32 {
    use std::f32::consts::{FRAC_PI_2, FRAC_PI_4, PI};
    let (ax, ay) = (x.abs(), y.abs());
    if !(ax.is_finite() && ay.is_finite()) {
        return y.atan2(x);
    }
    // The angle of (|x|, |y|), in [0, π/2].
    let a = if ay == 0.0 {
        0.0
    } else if ax == 0.0 {
        FRAC_PI_2
    } else {
        let steep = ay > ax;
        let t = if steep { ax / ay } else { ay / ax };
        let r = if t > TAN_PI_8 { FRAC_PI_4 + atan_small((t - 1.0) / (t + 1.0)) } else { atan_small(t) };
        if steep { FRAC_PI_2 - r } else { r }
    };
    let a = if x.is_sign_negative() { PI - a } else { a };
    a.copysign(y)
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

    #[test]
    fn atan2_keeps_the_library_quadrants_and_signed_zeros() {
        use std::f32::consts::{FRAC_PI_2, FRAC_PI_4, PI};
        for (y, x) in [(0.0f32, 0.0f32), (-0.0, 0.0), (0.0, -0.0), (-0.0, -0.0), (0.0, 1.0), (-0.0, 1.0), (0.0, -1.0), (-0.0, -1.0), (1.0, 0.0), (-1.0, 0.0), (1.0, -0.0), (3.0, 3.0), (-2.0, -2.0), (1e-30, -5.0), (-1e-30, -5.0)] {
            let (ours, lib) = (atan2(y, x), y.atan2(x));
            assert!((ours - lib).abs() <= 3e-7 && ours.is_sign_negative() == lib.is_sign_negative(), "atan2({y}, {x}) = {ours}, library {lib}");
        }
        assert_eq!(atan2(1.0, 0.0), FRAC_PI_2);
        assert_eq!(atan2(0.0, -1.0), PI);
        assert_eq!(atan2(-0.0, -1.0), -PI);
        assert!((atan2(1.0, 1.0) - FRAC_PI_4).abs() <= 1e-7);
        assert!(atan2(f32::NAN, 1.0).is_nan() && atan2(1.0, f32::INFINITY) == 0.0);
    }

    proptest::proptest! {
        /// Within 3e-7 rad of the library's `atan2` over every quadrant and scale.
        #[test]
        fn atan2_is_the_library_angle_within_3e_7(y in -1e4f32..1e4, x in -1e4f32..1e4, e in -20i32..20) {
            let s = 2f32.powi(e);
            let (ours, lib) = (atan2(y * s, x), (y * s).atan2(x));
            proptest::prop_assert!((ours - lib).abs() <= 3e-7, "atan2({}, {x}) = {ours}, library {lib}", y * s);
        }

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
