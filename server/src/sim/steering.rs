//! The output of every behaviour.

use glam::Vec2;
use std::ops::{Add, AddAssign, Mul};

/// A steering request: linear acceleration (units/s²) and angular acceleration (rad/s²).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Steering {
    /// Linear acceleration.
    pub linear: Vec2,
    /// Angular acceleration.
    pub angular: f32,
}

impl Steering {
    /// No steering.
    pub const ZERO: Steering = Steering { linear: Vec2::ZERO, angular: 0.0 };

    /// Linear-only steering.
    pub fn linear(linear: Vec2) -> Self {
        Steering { linear, angular: 0.0 }
    }

    /// Angular-only steering.
    pub fn angular(angular: f32) -> Self {
        Steering { linear: Vec2::ZERO, angular }
    }

    /// True when both parts are (nearly) zero.
    pub fn is_negligible(&self, eps: f32) -> bool {
        self.linear.length_squared() <= eps * eps && self.angular.abs() <= eps
    }

    /// Clamps linear to `max_accel` and angular to ±`max_angular` (000 BlendedSteering).
    pub fn clamped(self, max_accel: f32, max_angular: f32) -> Self {
        Steering {
            linear: crate::sim::math::clamp_len(self.linear, max_accel),
            angular: self.angular.clamp(-max_angular, max_angular),
        }
    }

    /// Replaces non-finite parts by zero (a last line of defence; behaviours should not need it).
    pub fn sanitized(self) -> Self {
        Steering {
            linear: if self.linear.is_finite() { self.linear } else { Vec2::ZERO },
            angular: if self.angular.is_finite() { self.angular } else { 0.0 },
        }
    }
}

impl Add for Steering {
    type Output = Steering;
    fn add(self, o: Steering) -> Steering {
        Steering { linear: self.linear + o.linear, angular: self.angular + o.angular }
    }
}

impl AddAssign for Steering {
    fn add_assign(&mut self, o: Steering) {
        self.linear += o.linear;
        self.angular += o.angular;
    }
}

impl Mul<f32> for Steering {
    type Output = Steering;
    fn mul(self, w: f32) -> Steering {
        Steering { linear: self.linear * w, angular: self.angular * w }
    }
}
