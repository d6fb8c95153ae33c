//! Quantization of agent state, the heading rule, dead reckoning and the
//! state checksum. Everything a client needs to reproduce the server's
//! quantized state bit for bit.

use serde::{Deserialize, Serialize};
use std::f64::consts::PI;

/// Fixed-point shift of [`Quantization::predict_num`].
pub const PREDICT_SHIFT: u32 = 16;
/// Orientation units per full turn (orientation is a `u16`).
pub const ORIENT_UNITS: f64 = 65536.0;
/// The server sets the "face" flag only when `atan2·32768/π` is at least this
/// far from a rounding tie, so every correct `atan2` yields the same `u16`.
pub const HEADING_TIE_MARGIN: f64 = 1e-4;

wire_struct! {
    /// Quantization steps announced in `Welcome`.
    #[derive(Copy)]
    pub struct Quantization {
        /// World units per position step (default 0.01).
        pub pos_step: f32,
        /// Units/second per velocity step (default 0.1).
        pub vel_step: f32,
        /// Dead-reckoning factor in 1/65536 position steps per velocity step
        /// per tick: `round(vel_step · dt / pos_step · 65536)` (default 32768).
        pub predict_num: i32,
        /// Radians: an orientation within this angle of the quantized
        /// velocity's heading is snapped to that heading (default 0.035).
        pub orient_snap: f32,
    }
}

impl Default for Quantization {
    fn default() -> Self {
        Quantization::new(0.01, 0.1, 20.0)
    }
}

impl Quantization {
    /// Steps for a server ticking at `tick_hz` (orient_snap 0.035 rad).
    pub fn new(pos_step: f32, vel_step: f32, tick_hz: f32) -> Self {
        let k = f64::from(vel_step) / f64::from(tick_hz) / f64::from(pos_step);
        let num = (k * f64::from(1u32 << PREDICT_SHIFT)).round();
        // `as` saturates (and maps NaN to 0): no panic on silly inputs.
        Quantization { pos_step, vel_step, predict_num: num as i32, orient_snap: 0.035 }
    }

    /// Dead-reckoned position offset (in position steps) for one tick at
    /// quantized velocity component `v`:
    /// `floor((v · predict_num + 32768) / 65536)`, truncated to 32 bits.
    pub fn predict(&self, v: i32) -> i32 {
        let p = (i64::from(v) * i64::from(self.predict_num) + (1i64 << (PREDICT_SHIFT - 1))) >> PREDICT_SHIFT;
        p as i32
    }

    /// Quantizes one agent's float state.
    pub fn quantize(&self, s: &AgentSample) -> QAgent {
        let q = |x: f32, step: f32| round_half_up(f64::from(x) / f64::from(step)).clamp(i32::MIN.into(), i32::MAX.into()) as i32;
        let pos = [q(s.pos[0], self.pos_step), q(s.pos[1], self.pos_step)];
        let vel = [q(s.vel[0], self.vel_step), q(s.vel[1], self.vel_step)];
        let raw = orient_from_radians(s.orientation);
        let snap_units = f64::from(self.orient_snap) * ORIENT_UNITS / (2.0 * PI);
        let orient = match robust_heading(vel) {
            Some(h) if f64::from(h.wrapping_sub(raw) as i16).abs() <= snap_units => h,
            _ => raw,
        };
        QAgent { id: s.id, group: s.group, pos, vel, orient }
    }

    /// Back to world units: `(pos, vel, orientation radians)`.
    pub fn dequantize(&self, a: &QAgent) -> ([f32; 2], [f32; 2], f32) {
        let p = |v: i32, step: f32| (f64::from(v) * f64::from(step)) as f32;
        (
            [p(a.pos[0], self.pos_step), p(a.pos[1], self.pos_step)],
            [p(a.vel[0], self.vel_step), p(a.vel[1], self.vel_step)],
            (f64::from(a.orient) * 2.0 * PI / ORIENT_UNITS) as f32,
        )
    }
}

/// Convenience for [`Quantization::quantize`].
pub fn quantize(s: &AgentSample, q: &Quantization) -> QAgent {
    q.quantize(s)
}

/// An agent's float state as the simulation holds it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AgentSample {
    pub id: u32,
    pub group: u16,
    pub pos: [f32; 2],
    pub vel: [f32; 2],
    /// Radians, 0 = +x, counter-clockwise.
    pub orientation: f32,
}

/// An agent's quantized state: exactly what a client holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QAgent {
    pub id: u32,
    pub group: u16,
    /// Position in `pos_step` units.
    pub pos: [i32; 2],
    /// Velocity in `vel_step` units.
    pub vel: [i32; 2],
    /// Orientation in 2π/65536 units, 0 = +x, counter-clockwise.
    pub orient: u16,
}

/// Radians to orientation units: `floor(θ·32768/π + 0.5) mod 65536` (NaN → 0).
pub fn orient_from_radians(theta: f32) -> u16 {
    round_half_up(f64::from(theta) * ORIENT_UNITS / (2.0 * PI)) as u16
}

/// `floor(x + 0.5)` without a libm call; saturating, NaN → 0.
fn round_half_up(x: f64) -> i64 {
    let r = x + 0.5;
    let t = r as i64;
    if (t as f64) > r { t - 1 } else { t }
}

/// `atan(i / 64)` for `i` in `0..=64` (checked against `f64::atan` in a test).
#[rustfmt::skip]
const ATAN_TABLE: [f64; 65] = [
    0.0, 0.015623728620476831, 0.031239833430268277, 0.046840712915969654,
    0.06241880999595735, 0.0779666338315423, 0.09347678115858947, 0.10894195698986579,
    0.12435499454676144, 0.13970887428916365, 0.15499674192394097, 0.1702119252854744,
    0.18534794999569476, 0.2003985538258785, 0.21535769969773805, 0.23021958727684372,
    0.24497866312686414, 0.2596296294082575, 0.2741674511196588, 0.2885873618940774,
    0.3028848683749714, 0.31705575320914703, 0.3310960767041321, 0.34500217720710513,
    0.35877067027057225, 0.3723984466767542, 0.38588266939807375, 0.39922076957525254,
    0.4124104415973873, 0.42544963737004227, 0.43833655985795783, 0.4510696559885235,
    0.4636476090008061, 0.4760693303227612, 0.48833395105640554, 0.5004408131472942,
    0.5123894603107377, 0.5241796287829132, 0.5358112379604637, 0.5472843809874369,
    0.5585993153435624, 0.5697564534829784, 0.5807563535676704, 0.5915997103351114,
    0.6022873461349642, 0.6128202021652414, 0.6231993299340659, 0.6334258829691446,
    0.6435011087932844, 0.6534263411807619, 0.6632029927060933, 0.6728325475937632,
    0.6823165548747481, 0.6916566218531999, 0.7008544078844502, 0.7099116184635249,
    0.7188299996216245, 0.7276113326265107, 0.7362574289814281, 0.7447701257160751,
    0.7531512809621944, 0.7614027698055784, 0.7695264804056583, 0.7775243103733478,
    std::f64::consts::FRAC_PI_4,
];

/// `1.5 · 2^52`: adding it to a double of magnitude below `2^51` rounds that
/// to an integer (ties to even), which the low mantissa bits then hold.
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;

/// `atan2(y, x)` for `(x, y) != (0, 0)`, within 2e-15 rad of the exact value
/// (and of libm's, which is within an ulp). Octant reduction to `r = lo/hi`
/// in `[0, 1]`, then `atan(r) = atan(c) + atan(t)` with `c = k/64` the
/// nearest table point and `t = (r - c)/(1 + r·c) = (lo - c·hi)/(hi + c·lo)`,
/// `|t| <= 1/128`, where `t - t³/3 + t⁵/5` leaves an error below
/// `t⁷/7 < 3e-16`. Two to three times faster than glibc's `atan2`; written
/// with no integer conversions and no branches (the signs of real velocities
/// are unpredictable).
#[inline]
fn fast_atan2(y: f64, x: f64) -> f64 {
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4};
    let (ax, ay) = (x.abs(), y.abs());
    let (lo, hi) = (ax.min(ay), ax.max(ay));
    // 64·lo/hi is in [0, 64]: m holds k = round(64·lo/hi) in its low bits.
    let m = lo / hi * 64.0 + ROUND_MAGIC;
    let k = (m.to_bits() & 0x7f) as usize;
    let c = (m - ROUND_MAGIC) * (1.0 / 64.0);
    let t = (lo - c * hi) / (hi + c * lo);
    let t2 = t * t;
    let a = ATAN_TABLE.get(k).copied().unwrap_or(FRAC_PI_4) + (t + (t2 * t) * (t2 * (1.0 / 5.0) - 1.0 / 3.0));
    let a = if ay > ax { FRAC_PI_2 - a } else { a };
    let a = if x < 0.0 { PI - a } else { a };
    // `atan2(±0, x)` is ±0 or ±π; the velocity components are never -0.
    a.copysign(y)
}

/// Angle in radians to orientation units shifted into `32768..=98304`, so that
/// `as` (truncation) is `floor`: no libm rounding calls on baseline x86-64.
fn angle_units(theta: f64) -> f64 {
    theta * (ORIENT_UNITS / (2.0 * PI)) + ORIENT_UNITS
}

/// How close (in orientation units) the result of [`fast_atan2`] may come to a
/// decision boundary of [`heading_and_robust`] (a rounding tie, or
/// [`HEADING_TIE_MARGIN`] from one) before libm's `atan2` decides instead.
/// The two differ by less than 1e-10 units, so the results are identical to
/// computing with libm's `atan2` throughout.
const FAST_ATAN2_GUARD: f64 = 1e-6;

/// Velocities with both components in `-HEADING_TABLE_HALF..HEADING_TABLE_HALF`
/// (below 6.4 units/s each at the default velocity step of 0.1, which covers
/// typical steering agents) take their heading from a table.
const HEADING_TABLE_HALF: i32 = 64;
const HEADING_TABLE_SIDE: u32 = 2 * HEADING_TABLE_HALF as u32;
/// Table entry of the velocities whose heading is computed instead: zero, or
/// not robust (none in practice). No velocity in the table's range has this
/// heading (the smallest nonzero angle there is `atan(1/63)`, 166 units), and
/// if one did, computing it would still give the right answer.
const HEADING_TABLE_COMPUTE: u16 = 1;

/// The robust heading of every velocity in the table's range, indexed by
/// `(vx + HALF) · SIDE + (vy + HALF)`, or [`HEADING_TABLE_COMPUTE`]: 32 KiB,
/// built on first use (well under a millisecond).
fn heading_table() -> &'static [u16] {
    static TABLE: std::sync::OnceLock<Box<[u16]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let range = -HEADING_TABLE_HALF..HEADING_TABLE_HALF;
        range
            .clone()
            .flat_map(|vx| range.clone().map(move |vy| [vx, vy]))
            .map(|vel| match computed_heading_and_robust(vel) {
                Some((h, true)) => h,
                _ => HEADING_TABLE_COMPUTE,
            })
            .collect()
    })
}

/// Heading in units plus whether it is at least [`HEADING_TIE_MARGIN`] units
/// from a rounding tie: `floor(atan2(vy, vx)·32768/π + 0.5) mod 65536`.
/// A table lookup for small velocities (several times faster than even
/// [`fast_atan2`]), computed otherwise.
fn heading_and_robust(vel: [i32; 2]) -> Option<(u16, bool)> {
    let (ix, iy) = (vel[0].wrapping_add(HEADING_TABLE_HALF) as u32, vel[1].wrapping_add(HEADING_TABLE_HALF) as u32);
    if ix < HEADING_TABLE_SIDE && iy < HEADING_TABLE_SIDE {
        match heading_table().get((ix * HEADING_TABLE_SIDE + iy) as usize) {
            Some(&h) if h != HEADING_TABLE_COMPUTE => return Some((h, true)),
            _ => {}
        }
    }
    computed_heading_and_robust(vel)
}

/// [`heading_and_robust`] computed: [`fast_atan2`], or libm's `atan2` close
/// to a decision boundary.
fn computed_heading_and_robust(vel: [i32; 2]) -> Option<(u16, bool)> {
    if vel == [0, 0] {
        return None;
    }
    let (y, x) = (f64::from(vel[1]), f64::from(vel[0]));
    let u = angle_units(fast_atan2(y, x));
    // n: u rounded to the nearest integer, in its low bits.
    let n = u + ROUND_MAGIC;
    let tie_distance = 0.5 - (u - (n - ROUND_MAGIC)).abs();
    if tie_distance >= FAST_ATAN2_GUARD && (tie_distance - HEADING_TIE_MARGIN).abs() >= FAST_ATAN2_GUARD {
        // Away from a tie, rounding to nearest is `floor(u + 0.5)`; the cast wraps modulo 65536.
        Some((n.to_bits() as u16, tie_distance >= HEADING_TIE_MARGIN))
    } else {
        Some(libm_heading_and_robust(y, x))
    }
}

/// [`heading_and_robust`] close to a decision boundary: decided with libm's
/// `atan2`, as defined.
#[cold]
#[inline(never)]
fn libm_heading_and_robust(y: f64, x: f64) -> (u16, bool) {
    let u = angle_units(y.atan2(x));
    let frac = u - (u as i64) as f64;
    let robust = (frac - 0.5).abs() >= HEADING_TIE_MARGIN;
    // The cast to u16 wraps modulo 65536.
    ((u + 0.5) as i64 as u16, robust)
}

/// The heading of a quantized velocity in orientation units:
/// `floor(atan2(vy, vx) · 32768/π + 0.5) mod 65536`; `None` for zero velocity.
pub fn heading(vel: [i32; 2]) -> Option<u16> {
    heading_and_robust(vel).map(|(h, _)| h)
}

/// [`heading`], but `None` also when the value is within
/// [`HEADING_TIE_MARGIN`] of a rounding tie (so another `atan2` could differ).
pub fn robust_heading(vel: [i32; 2]) -> Option<u16> {
    heading_and_robust(vel).and_then(|(h, robust)| robust.then_some(h))
}

/// FNV-1a 64-bit offset basis.
pub const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
pub const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// State checksum: FNV-1a 64 over the agents in id order, each as 24 bytes
/// little-endian: `id u32, group u16, pos.x i32, pos.y i32, vel.x i32,
/// vel.y i32, orient u16`. An empty cell hashes to [`FNV_OFFSET`].
pub fn checksum(agents: &[QAgent]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut rec = [0u8; 24];
    for a in agents {
        rec[0..4].copy_from_slice(&a.id.to_le_bytes());
        rec[4..6].copy_from_slice(&a.group.to_le_bytes());
        rec[6..10].copy_from_slice(&a.pos[0].to_le_bytes());
        rec[10..14].copy_from_slice(&a.pos[1].to_le_bytes());
        rec[14..18].copy_from_slice(&a.vel[0].to_le_bytes());
        rec[18..22].copy_from_slice(&a.vel[1].to_le_bytes());
        rec[22..24].copy_from_slice(&a.orient.to_le_bytes());
        for b in rec {
            h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_reference_vectors() {
        // Reference FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c; check the core loop.
        let mut h = FNV_OFFSET;
        for b in b"a" {
            h = (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME);
        }
        assert_eq!(h, 0xaf63_dc4c_8601_ec8c);
        assert_eq!(checksum(&[]), FNV_OFFSET);
        let a = QAgent { id: 1, group: 2, pos: [3, -4], vel: [5, -6], orient: 7 };
        let mut b = a;
        b.orient = 8;
        assert_ne!(checksum(&[a]), checksum(&[b]));
    }

    #[test]
    fn heading_convention() {
        assert_eq!(heading([0, 0]), None);
        assert_eq!(heading([10, 0]), Some(0));
        assert_eq!(heading([0, 10]), Some(16384));
        assert_eq!(heading([-10, 0]), Some(32768));
        assert_eq!(heading([0, -10]), Some(49152));
        assert_eq!(heading([5, 5]), Some(8192));
        assert_eq!(orient_from_radians(-std::f32::consts::FRAC_PI_2), 49152);
        assert_eq!(orient_from_radians(f32::NAN), 0);
    }

    /// A seeded stream of integers in `-range..=range` (test inputs): proptest's deterministic
    /// ChaCha generator, so the crate carries no generator of its own.
    fn inputs(seed: u8) -> impl FnMut(i64) -> i64 {
        use proptest::prelude::Rng;
        use proptest::test_runner::{RngAlgorithm, TestRng};
        let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]);
        move |range: i64| rng.random_range(-range..=range)
    }

    /// The definition in PROTOCOL.md, with libm's atan2.
    fn reference(vel: [i32; 2]) -> (u16, f64) {
        let u = f64::from(vel[1]).atan2(f64::from(vel[0])) * 32768.0 / PI;
        (((u + 0.5).floor() as i64).rem_euclid(65536) as u16, (u - u.floor() - 0.5).abs())
    }

    #[test]
    fn heading_matches_definition_and_flags_ties() {
        let mut next = inputs(1);
        let (mut robust, mut checked) = (0, 0);
        for i in 0..400_000 {
            let range = [60, 1000, 100_000, i32::MAX as i64][i % 4];
            let v = [next(range) as i32, next(range) as i32];
            if v == [0, 0] {
                continue;
            }
            let (want, tie_dist) = reference(v);
            let (got, is_robust) = heading_and_robust(v).unwrap();
            checked += 1;
            if is_robust {
                robust += 1;
                assert_eq!(got, want, "{v:?}");
                assert!(tie_dist >= HEADING_TIE_MARGIN, "{v:?} flagged robust at tie distance {tie_dist}");
            } else if tie_dist > 1e-3 {
                panic!("{v:?} not robust at tie distance {tie_dist}");
            }
        }
        assert!(robust * 100 > checked * 99, "{robust}/{checked}");
        for v in [[1, 0], [0, 1], [-1, 0], [0, -1], [1, 1], [-1, 1], [-1, -1], [1, -1], [i32::MIN, i32::MIN]] {
            assert_eq!(heading(v), Some(reference(v).0), "{v:?}");
        }
    }

    /// `heading_and_robust` computed with libm's `atan2` only.
    fn reference_heading_and_robust(vel: [i32; 2]) -> Option<(u16, bool)> {
        if vel == [0, 0] {
            return None;
        }
        let u = angle_units(f64::from(vel[1]).atan2(f64::from(vel[0])));
        let frac = u - (u as i64) as f64;
        Some(((u + 0.5) as i64 as u16, (frac - 0.5).abs() >= HEADING_TIE_MARGIN))
    }

    #[test]
    fn atan_table_and_fast_atan2_match_libm() {
        for (i, &t) in ATAN_TABLE.iter().enumerate() {
            let want = (i as f64 / 64.0).atan();
            assert!((t - want).abs() <= f64::EPSILON * want, "atan({i}/64): {t} vs {want}");
        }
        let mut next = inputs(2);
        let mut worst = 0.0f64;
        for i in 0..200_000 {
            let range = [3, 60, 1000, 100_000, i32::MAX as i64][i % 5];
            let (vx, vy) = (next(range) as f64, next(range) as f64);
            if vx == 0.0 && vy == 0.0 {
                continue;
            }
            worst = worst.max((fast_atan2(vy, vx) - vy.atan2(vx)).abs());
        }
        for (vy, vx) in [(0.0, 1.0), (0.0, -1.0), (1.0, 0.0), (-1.0, 0.0), (1.0, 1.0), (-7.0, -7.0), (-1.0, 1e9)] {
            worst = worst.max((fast_atan2(vy, vx) - f64::atan2(vy, vx)).abs());
        }
        assert!(worst < 2e-15, "fast_atan2 is off by {worst:e} rad");
    }

    #[test]
    fn heading_table_covers_its_range() {
        let computed = heading_table().iter().filter(|&&h| h == HEADING_TABLE_COMPUTE).count();
        // Only the zero velocity: every other one in range is robust.
        assert_eq!(computed, 1);
    }

    #[test]
    fn fast_heading_is_identical_to_libm_heading() {
        // Every velocity with components in -300..=300 (the table and beyond) ...
        for vx in -300..=300 {
            for vy in -300..=300 {
                let want = reference_heading_and_robust([vx, vy]);
                assert_eq!(heading_and_robust([vx, vy]), want, "{vx} {vy}");
                assert_eq!(computed_heading_and_robust([vx, vy]), want, "{vx} {vy}");
            }
        }
        // ... and random ones, including velocities near ties and near the robustness margin.
        let mut next = inputs(3);
        let mut guarded = [0; 2];
        for i in 0..400_000 {
            let v = if i % 2 == 0 {
                let range = [1000, 100_000, i32::MAX as i64][i % 3];
                [next(range) as i32, next(range) as i32]
            } else {
                // A long vector whose angle is a tie (or margin) plus a tiny offset.
                let unit = next(65_535) as f64 + [0.5, 0.5 + HEADING_TIE_MARGIN, 0.5 - HEADING_TIE_MARGIN][i % 3];
                let theta = unit * 2.0 * PI / ORIENT_UNITS;
                let r = 1e9 + next(100_000_000) as f64;
                [(r * theta.cos()).round() as i32, (r * theta.sin()).round() as i32]
            };
            let u = angle_units(fast_atan2(f64::from(v[1]), f64::from(v[0])));
            let d = (u - (u as i64) as f64 - 0.5).abs();
            if d < FAST_ATAN2_GUARD || (d - HEADING_TIE_MARGIN).abs() < FAST_ATAN2_GUARD {
                guarded[i % 2] += 1;
            }
            assert_eq!(heading_and_robust(v), reference_heading_and_robust(v), "{v:?}");
        }
        // The near-tie half exercises the fallback; random velocities almost never need it.
        assert!(guarded[1] > 1000 && guarded[0] < 100, "{guarded:?} of 200,000 each took the libm path");
    }

    #[test]
    fn predict_rounds_half_up() {
        let q = Quantization::default();
        assert_eq!(q.predict_num, 32768); // 0.1 * 0.05 / 0.01 = 0.5 step per vel unit
        assert_eq!(q.predict(0), 0);
        assert_eq!(q.predict(1), 1); // 0.5 -> 1
        assert_eq!(q.predict(-1), 0); // -0.5 -> 0
        assert_eq!(q.predict(7), 4); // 3.5 -> 4
        assert_eq!(q.predict(-50), -25);
        assert_eq!(q.predict(i32::MIN), -(1 << 30));
    }

    #[test]
    fn quantize_snaps_orientation_to_heading() {
        let q = Quantization::default();
        let s = AgentSample { id: 1, group: 0, pos: [1.004, -2.006], vel: [3.0, 4.0], orientation: 0.93 };
        let a = q.quantize(&s);
        assert_eq!(a.pos, [100, -201]);
        assert_eq!(a.vel, [30, 40]);
        assert_eq!(Some(a.orient), heading([30, 40]));
        let far = AgentSample { orientation: 2.0, ..s };
        assert_eq!(q.quantize(&far).orient, orient_from_radians(2.0));
        let (p, v, o) = q.dequantize(&a);
        assert!((p[0] - 1.0).abs() < 1e-4 && (v[1] - 4.0).abs() < 1e-4);
        assert!((o - 0.9273).abs() < 1e-3);
        let nan = AgentSample { pos: [f32::NAN, f32::INFINITY], ..s };
        assert_eq!(q.quantize(&nan).pos, [0, i32::MAX]);
    }
}
