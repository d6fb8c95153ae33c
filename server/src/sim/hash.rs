//! `state_hash`: FNV-1a 64 over the quantized state of every agent in id order.

use super::world::World;

/// Position step of the hash's quantization (1/100 unit, as the wire protocol's default).
pub const POS_STEP: f32 = 0.01;
/// Velocity step.
pub const VEL_STEP: f32 = 0.01;
/// Orientation step, radians (2π/65536).
pub const ANGLE_STEP: f32 = std::f32::consts::TAU / 65536.0;

fn q(v: f32, step: f32) -> i64 {
    let x = (v / step).round();
    if x.is_finite() { x as i64 } else { i64::MIN }
}

/// FNV-1a 64 of the quantized (id, group, position, velocity, orientation) of every agent.
pub fn state_hash(world: &World) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for a in world.agents() {
        eat(&a.id.to_le_bytes());
        eat(&a.group.to_le_bytes());
        eat(&q(a.position.x, POS_STEP).to_le_bytes());
        eat(&q(a.position.y, POS_STEP).to_le_bytes());
        eat(&q(a.velocity.x, VEL_STEP).to_le_bytes());
        eat(&q(a.velocity.y, VEL_STEP).to_le_bytes());
        eat(&q(a.orientation, ANGLE_STEP).to_le_bytes());
    }
    h
}

/// Hash of the exact bits of every agent's state (stronger than [`state_hash`]; for tests).
pub fn exact_hash(world: &World) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for a in world.agents() {
        for v in [a.position.x, a.position.y, a.velocity.x, a.velocity.y, a.orientation, a.angular_velocity] {
            for b in v.to_bits().to_le_bytes() {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
    }
    h
}
