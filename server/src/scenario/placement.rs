//! 001's `CreateObstacles`: random obstacles that keep a gap between them and from the bounds.

use glam::Vec2;

use super::spec::RandomObstacles;
use crate::convert::vec2;
use crate::sim::error::{SimError, check_non_negative, check_positive, check_vec};
use crate::sim::rng::Rng;
use crate::sim::view::Bounds;

/// Tries per obstacle before giving up (001).
pub const PLACEMENT_TRIES: usize = 2000;

/// Places obstacles at random without overlap (001 `CreateObstacles`); returns (centre, radius).
pub fn place_random_obstacles(
    bounds: Bounds,
    spec: &RandomObstacles,
    existing: &[(Vec2, f32)],
    seed: u64,
) -> Result<Vec<(Vec2, f32)>, SimError> {
    check_positive("min_radius", spec.min_radius)?;
    check_positive("max_radius", spec.max_radius)?;
    check_non_negative("min_gap", spec.min_gap)?;
    check_non_negative("border", spec.border)?;
    if spec.max_radius < spec.min_radius {
        return Err(SimError::invalid("max_radius", "must be >= min_radius"));
    }
    if spec.count > 10_000 {
        return Err(SimError::invalid("count", "must be at most 10000"));
    }
    let keep_clear = match spec.keep_clear {
        Some(k) => {
            let kmin = check_vec("keep_clear.min", vec2(k.min))?;
            let kmax = check_vec("keep_clear.max", vec2(k.max))?;
            if kmin.x > kmax.x || kmin.y > kmax.y {
                return Err(SimError::invalid("keep_clear", "min must be <= max on both axes"));
            }
            Some((kmin, kmax))
        }
        None => None,
    };
    let mut rng = Rng::new(spec.seed.unwrap_or(seed));
    let mut placed: Vec<(Vec2, f32)> = existing.to_vec();
    let mut out = Vec::new();
    'each: for _ in 0..spec.count {
        for _ in 0..PLACEMENT_TRIES {
            let r = rng.range(spec.min_radius, spec.max_radius);
            let lo = bounds.min + Vec2::splat(r + spec.border);
            let hi = bounds.max - Vec2::splat(r + spec.border);
            if hi.x < lo.x || hi.y < lo.y {
                return Ok(out);
            }
            let c = Vec2::new(rng.range(lo.x, hi.x), rng.range(lo.y, hi.y));
            if let Some((kmin, kmax)) = keep_clear {
                let near = c.clamp(kmin, kmax);
                if near.distance(c) < r {
                    continue;
                }
            }
            // 001 `Overlapped`: circles (c, r + gap) and (other, other r) must not meet.
            if placed.iter().all(|&(o, orad)| o.distance(c) > r + spec.min_gap + orad) {
                placed.push((c, r));
                out.push((c, r));
                continue 'each;
            }
        }
        break;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::BoundsSpec;
    use steer_proto::Point;

    #[test]
    fn random_obstacles_keep_gap_border_and_are_seeded() {
        let b = Bounds { min: Vec2::ZERO, max: Vec2::splat(500.0) };
        let spec = RandomObstacles { count: 30, min_radius: 5.0, max_radius: 15.0, min_gap: 20.0, border: 10.0, seed: Some(3), keep_clear: None };
        let a = place_random_obstacles(b, &spec, &[], 0).unwrap();
        assert_eq!(a, place_random_obstacles(b, &spec, &[], 0).unwrap());
        assert!(!a.is_empty());
        for (i, &(c, r)) in a.iter().enumerate() {
            assert!((5.0..=15.0).contains(&r));
            assert!(c.x - r >= 10.0 && c.y - r >= 10.0 && c.x + r <= 490.0 && c.y + r <= 490.0);
            for &(d, s) in &a[i + 1..] {
                assert!(c.distance(d) > r + s + 20.0);
            }
        }
    }

    #[test]
    fn random_obstacles_refuse_a_keep_clear_area_out_of_range_or_inverted() {
        let b = Bounds { min: Vec2::ZERO, max: Vec2::splat(500.0) };
        let spec = |min: Point, max: Point| RandomObstacles {
            count: 3,
            min_radius: 1.0,
            max_radius: 2.0,
            min_gap: 1.0,
            border: 1.0,
            seed: Some(1),
            keep_clear: Some(BoundsSpec { min, max }),
        };
        // schemathesis's case: x beyond 1e6 (f32 infinity after parsing), and min.y > max.y.
        let far = spec(Point { x: 6.5e16, y: 490_980.0 }, Point { x: f32::INFINITY, y: -472_794.9 });
        let e = place_random_obstacles(b, &far, &[], 0).unwrap_err().to_string();
        assert!(e.contains("keep_clear.min.x"), "{e}");
        let inverted = spec(Point { x: 0.0, y: 100.0 }, Point { x: 50.0, y: 10.0 });
        let e = place_random_obstacles(b, &inverted, &[], 0).unwrap_err().to_string();
        assert!(e.contains("keep_clear") && e.contains("min must be <= max"), "{e}");
        assert!(place_random_obstacles(b, &spec(Point { x: 0.0, y: 0.0 }, Point { x: 50.0, y: 50.0 }), &[], 0).is_ok());
    }
}
