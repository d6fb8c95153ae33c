//! The world's fixed shapes: its bounds, circular obstacles and wall segments. Plain data that
//! imports nothing of the sim, so the indexes (`spatial`), the navigation grid (`nav`) and the
//! view behaviours read (`view`) all build on it.

use glam::Vec2;

/// A circular obstacle (001).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Obstacle {
    /// Stable id.
    pub id: u32,
    /// Centre.
    pub center: Vec2,
    /// Radius.
    pub radius: f32,
}

/// A wall segment (000). Walls are two-sided; `normal` is the left-hand unit normal of a→b.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wall {
    /// Stable id.
    pub id: u32,
    /// Start point.
    pub a: Vec2,
    /// End point.
    pub b: Vec2,
    /// Left-hand unit normal of a→b.
    pub normal: Vec2,
}

/// Axis-aligned world bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Lower-left corner.
    pub min: Vec2,
    /// Upper-right corner.
    pub max: Vec2,
}

impl Bounds {
    /// Width and height.
    pub fn size(&self) -> Vec2 {
        self.max - self.min
    }

    /// True when `p` lies inside (edges included).
    pub fn contains(&self, p: Vec2) -> bool {
        p.x >= self.min.x && p.y >= self.min.y && p.x <= self.max.x && p.y <= self.max.y
    }
}
