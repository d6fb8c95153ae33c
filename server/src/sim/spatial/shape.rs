//! The shape of a uniform grid over the world bounds, shared by the agent grid (`agents`) and
//! the obstacle and wall index (`statics`).

use glam::Vec2;

use crate::sim::geometry::Bounds;
use crate::sim::math::cell_axis;

/// Most cells any grid may have; a finer grid is coarsened to fit.
pub const MAX_CELLS: usize = 1 << 22;

/// Shape of a uniform grid over the world bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GridShape {
    pub(super) origin: Vec2,
    pub(super) cell: f32,
    pub(super) inv_cell: f32,
    pub(super) cols: u32,
    pub(super) rows: u32,
}

impl GridShape {
    /// A grid of square cells of side ≥ `cell` covering `bounds`, with at most `max_cells` cells.
    pub fn new(bounds: Bounds, cell: f32, max_cells: usize) -> Self {
        let size = bounds.size().max(Vec2::splat(1e-3));
        let mut cell = if cell.is_finite() && cell > 1e-3 { cell } else { 1.0 };
        let max_cells = max_cells.clamp(1, MAX_CELLS) as f32;
        loop {
            let cols = (size.x / cell).ceil().max(1.0);
            let rows = (size.y / cell).ceil().max(1.0);
            if cols * rows <= max_cells {
                return GridShape { origin: bounds.min, cell, inv_cell: 1.0 / cell, cols: cols as u32, rows: rows as u32 };
            }
            cell *= 1.5;
        }
    }

    /// Side of a cell.
    pub fn cell_size(&self) -> f32 {
        self.cell
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.cols as usize * self.rows as usize
    }

    /// True if the grid has no cells (never: a grid has at least one).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Column and row of `p`, clamped onto the grid (a non-finite coordinate maps to 0).
    #[inline]
    pub fn coords(&self, p: Vec2) -> (u32, u32) {
        let c = (p - self.origin) * self.inv_cell;
        (cell_axis(c.x, self.cols), cell_axis(c.y, self.rows))
    }

    #[inline]
    pub(super) fn index(&self, cx: u32, cy: u32) -> usize {
        cy as usize * self.cols as usize + cx as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::spatial::test_bounds;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn coords_equal_the_floor_formula(x in -1.0e7f32..1.0e7, y in -1.0e7f32..1.0e7, cell in 0.01f32..50.0) {
            let b = Bounds { min: Vec2::new(-3.0, 5.0), max: Vec2::new(400.0, 90.0) };
            let s = GridShape::new(b, cell, 1 << 16);
            let p = Vec2::new(x, y);
            let c = ((p - s.origin) * s.inv_cell).floor();
            let want = (c.x.clamp(0.0, (s.cols - 1) as f32) as u32, c.y.clamp(0.0, (s.rows - 1) as f32) as u32);
            prop_assert_eq!(s.coords(p), want);
        }
    }

    #[test]
    fn coords_of_non_finite_points_are_zero() {
        let s = GridShape::new(test_bounds(), 1.0, 1 << 16);
        assert_eq!(s.coords(Vec2::new(f32::NAN, 5.5)), (0, 5));
        assert_eq!(s.coords(Vec2::new(f32::INFINITY, f32::NEG_INFINITY)), (0, 0));
        assert_eq!(s.coords(Vec2::new(1.0e30, 99.9)), (99, 99));
    }

    #[test]
    fn grid_is_coarsened_to_the_cell_cap() {
        let s = GridShape::new(Bounds { min: Vec2::ZERO, max: Vec2::splat(1.0e5) }, 0.01, 1000);
        assert!(s.len() <= 1000);
        assert!(s.cell_size() >= 1.0e5 / 32.0);
    }
}
