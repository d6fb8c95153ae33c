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

/// Heading in units plus whether it is at least [`HEADING_TIE_MARGIN`] units
/// from a rounding tie: `floor(atan2(vy, vx)·32768/π + 0.5) mod 65536`.
fn heading_and_robust(vel: [i32; 2]) -> Option<(u16, bool)> {
    if vel == [0, 0] {
        return None;
    }
    // Shift into 32768..=98304 so that `as` (truncation) is `floor`: no libm
    // rounding calls on baseline x86-64.
    let u = f64::from(vel[1]).atan2(f64::from(vel[0])) * (ORIENT_UNITS / (2.0 * PI)) + ORIENT_UNITS;
    let frac = u - (u as i64) as f64;
    let robust = (frac - 0.5).abs() >= HEADING_TIE_MARGIN;
    // The cast to u16 wraps modulo 65536.
    Some(((u + 0.5) as i64 as u16, robust))
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

    /// The definition in PROTOCOL.md, with libm's atan2.
    fn reference(vel: [i32; 2]) -> (u16, f64) {
        let u = f64::from(vel[1]).atan2(f64::from(vel[0])) * 32768.0 / PI;
        (((u + 0.5).floor() as i64).rem_euclid(65536) as u16, (u - u.floor() - 0.5).abs())
    }

    #[test]
    fn heading_matches_definition_and_flags_ties() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = |range: i64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (2 * range as u64 + 1)) as i64 - range
        };
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
