//! Flow fields: an integration field from a goal cell and a smooth direction per cell.
//!
//! **Integration: fast marching (Sethian), not Dijkstra.** Dijkstra on a 4- or 8-neighbour grid
//! measures Manhattan or octile distance; the steepest descent of those points in only 4 or 8
//! directions, which is the 8-way zig-zag. Fast marching solves the eikonal equation |∇T| = 1
//! with the first-order upwind update
//! `T = (a + b + √(2h² − (a − b)²)) / 2` when |a − b| < h, else `min(a, b) + h`
//! (a, b: the smaller accepted neighbour value along x and along y), so T approximates the
//! Euclidean path length round the blocked cells, and its gradient turns smoothly. It keeps
//! Dijkstra's O(n log n) heap order; ties pop by cell index, so a field is a pure function of
//! the grid and the goal.
//!
//! **Directions.** Per cell, the upwind gradient: along each axis the difference to the smaller
//! of the two neighbours when it is smaller than the cell (the side the front came from),
//! negated and normalised. Cells within [`LOS_RADIUS_CELLS`] of the goal that see the goal
//! (the straight line stays on free cells) point straight at it (the line-of-sight shortcut).
//! Finally every direction is checked: the neighbour it points into (the cell holding
//! `centre + dir·cell`) must be free; otherwise the cell points at its free neighbour with the
//! least T (diagonals only when both orthogonal cells are free, so corners are not cut).
//! Directions are stored as a 16-bit angle (`NO_DIR` for none): 6 bytes per cell with T.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use glam::Vec2;

use super::grid::NavGrid;
use crate::sim::math::{dir, heading};

/// Cells within this many cells of the goal get the line-of-sight shortcut.
pub const LOS_RADIUS_CELLS: f32 = 24.0;

/// Stored angle meaning "no direction" (blocked, unreachable, or the goal cell itself).
pub const NO_DIR: u16 = u16::MAX;

const ANGLE_SCALE: f32 = 65535.0 / std::f32::consts::TAU;

/// An integration field and its direction field for one goal cell of one grid version.
#[derive(Debug, Clone)]
pub struct FlowField {
    goal_cell: usize,
    goal: Vec2,
    grid_version: u64,
    cols: u32,
    rows: u32,
    /// Path length to the goal, world units (∞ = unreachable or blocked).
    cost: Vec<f32>,
    /// Direction angle (`NO_DIR` = none).
    dirs: Vec<u16>,
}

fn encode(d: Vec2) -> u16 {
    if d == Vec2::ZERO {
        return NO_DIR;
    }
    let a = d.y.atan2(d.x);
    // Same as `rem_euclid(TAU)` for atan2's range [−π, π], without the float modulo.
    let a = if a < 0.0 { a + std::f32::consts::TAU } else { a };
    ((a * ANGLE_SCALE).round() as u32 % 65535) as u16
}

fn decode(a: u16) -> Vec2 {
    if a == NO_DIR { Vec2::ZERO } else { heading(f32::from(a) / ANGLE_SCALE) }
}

const NEIGHBOURS8: [(i32, i32); 8] = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)];

impl FlowField {
    /// Builds the field towards `goal` (a point in free cell `goal_cell` of `grid`; when the cell
    /// is blocked every cell is unreachable).
    pub fn build(grid: &NavGrid, goal_cell: usize, goal: Vec2) -> Self {
        let cost = march(grid, goal_cell);
        let (cols, rows) = grid.dims();
        let n = grid.len();
        let mut f = FlowField { goal_cell, goal, grid_version: grid.version(), cols, rows, cost, dirs: vec![NO_DIR; n] };
        f.compute_dirs(grid);
        f
    }

    fn compute_dirs(&mut self, grid: &NavGrid) {
        let h = grid.cell_size();
        let los_r2 = (LOS_RADIUS_CELLS * h) * (LOS_RADIUS_CELLS * h);
        for i in 0..grid.len() {
            let c = self.cost[i];
            if !c.is_finite() || i == self.goal_cell {
                continue;
            }
            let (cx, cy) = grid.xy(i);
            let centre = grid.center_of(cx, cy);
            let mut d = if centre.distance_squared(self.goal) <= los_r2 && grid.line_free(centre, self.goal) {
                dir(self.goal - centre)
            } else {
                let t = |dx: i32, dy: i32| grid.offset(cx, cy, dx, dy).map_or(f32::INFINITY, |j| self.cost[j]);
                let slope = |lo: f32, hi: f32| {
                    // Upwind: towards the smaller neighbour, if it is below the cell.
                    if lo <= hi && lo < c {
                        c - lo
                    } else if hi < c {
                        hi - c
                    } else {
                        0.0
                    }
                };
                // Gradient of T (pointing uphill); the flow goes downhill.
                let g = Vec2::new(slope(t(-1, 0), t(1, 0)), slope(t(0, -1), t(0, 1)));
                -dir(g)
            };
            if d == Vec2::ZERO || !self.points_free(grid, cx, cy, d) {
                d = self.best_neighbour(grid, cx, cy);
            }
            self.dirs[i] = encode(d);
            // Quantization could move a direction across a sector edge: re-check the stored one.
            if !self.points_free(grid, cx, cy, decode(self.dirs[i])) {
                self.dirs[i] = encode(self.best_neighbour(grid, cx, cy));
            }
        }
    }

    /// True when `d` is zero or the cell it points into (the one holding centre + d·cell) is free.
    fn points_free(&self, grid: &NavGrid, cx: u32, cy: u32, d: Vec2) -> bool {
        if d == Vec2::ZERO {
            return true;
        }
        let (sx, sy) = step_of(d);
        grid.offset(cx, cy, sx, sy).is_some_and(|j| !grid.is_blocked(j) && self.cost[j].is_finite())
    }

    /// Unit direction to the free neighbour with the least T (no corner cutting); zero if none.
    fn best_neighbour(&self, grid: &NavGrid, cx: u32, cy: u32) -> Vec2 {
        let free = |dx: i32, dy: i32| grid.offset(cx, cy, dx, dy).filter(|&j| !grid.is_blocked(j) && self.cost[j].is_finite());
        let mut best: Option<(f32, (i32, i32))> = None;
        for (dx, dy) in NEIGHBOURS8 {
            let Some(j) = free(dx, dy) else { continue };
            if dx != 0 && dy != 0 && (free(dx, 0).is_none() || free(0, dy).is_none()) {
                continue;
            }
            let step = if dx != 0 && dy != 0 { std::f32::consts::SQRT_2 } else { 1.0 } * grid.cell_size();
            let via = self.cost[j] + step;
            if best.is_none_or(|b| via < b.0) {
                best = Some((via, (dx, dy)));
            }
        }
        best.map_or(Vec2::ZERO, |(_, (dx, dy))| dir(Vec2::new(dx as f32, dy as f32)))
    }

    /// The goal cell.
    pub fn goal_cell(&self) -> usize {
        self.goal_cell
    }

    /// The goal point.
    pub fn goal(&self) -> Vec2 {
        self.goal
    }

    /// Grid version the field was built for.
    pub fn grid_version(&self) -> u64 {
        self.grid_version
    }

    /// Path length from cell `i` to the goal (∞ when unreachable).
    pub fn cost(&self, i: usize) -> f32 {
        self.cost.get(i).copied().unwrap_or(f32::INFINITY)
    }

    /// Unit direction of cell `i`, or zero (blocked, unreachable, goal cell).
    pub fn dir(&self, i: usize) -> Vec2 {
        self.dirs.get(i).map_or(Vec2::ZERO, |&a| decode(a))
    }

    /// Bytes held by the field (T as f32 + a 16-bit angle per cell, plus the struct).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.cost.len() * 4 + self.dirs.len() * 2
    }

    /// The direction at `p`: the cell directions of the four cells round `p` blended bilinearly
    /// (cells without a direction left out), normalised; the own cell's direction when the blend
    /// nearly cancels (a ridge where paths part). Zero when the own cell has no direction.
    pub fn sample(&self, grid: &NavGrid, p: Vec2) -> Vec2 {
        let own = self.dir(grid.cell_of(p));
        if own == Vec2::ZERO || (grid.dims() != (self.cols, self.rows)) {
            return own;
        }
        let h = grid.cell_size();
        let q = (p - grid.origin()) / h - 0.5;
        let base = q.floor();
        let f = q - base;
        let mut sum = Vec2::ZERO;
        let mut wsum = 0.0;
        for (ox, oy, w) in [(0, 0, (1.0 - f.x) * (1.0 - f.y)), (1, 0, f.x * (1.0 - f.y)), (0, 1, (1.0 - f.x) * f.y), (1, 1, f.x * f.y)] {
            let (x, y) = (base.x as i64 + ox, base.y as i64 + oy);
            if x < 0 || y < 0 || x >= i64::from(self.cols) || y >= i64::from(self.rows) {
                continue;
            }
            let d = self.dir(grid.index(x as u32, y as u32));
            if d != Vec2::ZERO {
                sum += d * w;
                wsum += w;
            }
        }
        if wsum <= 0.0 || sum.length() < 0.5 * wsum { own } else { dir(sum) }
    }
}

/// The fast-marching integration: T per cell (∞ for blocked and unreachable cells).
///
/// Works on a copy of the grid padded with one blocked cell on every side, so neighbours need
/// no bounds checks, and keeps T of accepted cells in `accepted` (∞ until accepted), so the
/// smaller accepted neighbour along an axis is a plain `min`. Heap keys pack (T bits, cell) into
/// one `u64`: T ≥ 0, so its bits order like the value, and padded indices order like grid
/// indices, so ties pop by cell index exactly as with `(T, cell)` pairs.
fn march(grid: &NavGrid, goal_cell: usize) -> Vec<f32> {
    let n = grid.len();
    let h = grid.cell_size();
    let (cols, rows) = grid.dims();
    let (cols, rows) = (cols as usize, rows as usize);
    let w = cols + 2;
    let padded = |i: usize| (i / cols + 1) * w + i % cols + 1;
    // Free, not yet accepted cells; the padding and blocked cells are never open.
    let mut open = vec![false; w * (rows + 2)];
    for y in 0..rows {
        for x in 0..cols {
            open[(y + 1) * w + x + 1] = !grid.is_blocked(y * cols + x);
        }
    }
    let mut tentative = vec![f32::INFINITY; open.len()];
    let mut accepted = vec![f32::INFINITY; open.len()];
    let mut heap: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
    let key = |t: f32, p: usize| (u64::from(t.to_bits()) << 32) | p as u64;
    if goal_cell < n && !grid.is_blocked(goal_cell) {
        let g = padded(goal_cell);
        tentative[g] = 0.0;
        heap.push(Reverse(key(0.0, g)));
    }
    while let Some(Reverse(k)) = heap.pop() {
        let p = (k & 0xffff_ffff) as usize;
        if !open[p] || f32::from_bits((k >> 32) as u32) > tentative[p] {
            continue;
        }
        open[p] = false;
        accepted[p] = tentative[p];
        for q in [p + 1, p - 1, p + w, p - w] {
            if !open[q] {
                continue;
            }
            let a = accepted[q - 1].min(accepted[q + 1]);
            let b = accepted[q - w].min(accepted[q + w]);
            let t = eikonal_update(a, b, h);
            if t < tentative[q] {
                tentative[q] = t;
                heap.push(Reverse(key(t, q)));
            }
        }
    }
    (0..n).map(|i| accepted[padded(i)]).collect()
}

/// A field's directions sampled on a coarser lattice (for display): block `(bx, by)` of
/// `stride × stride` cells shows the direction of its centre cell.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSample {
    /// Lower-left corner of block (0, 0).
    pub origin: Vec2,
    /// Side of a block, world units.
    pub spacing: f32,
    /// Blocks per row and column.
    pub cols: u32,
    /// Block rows.
    pub rows: u32,
    /// Direction angle per block (radians, row-major from the lower-left), `None` = none.
    pub angles: Vec<Option<f32>>,
}

impl FlowField {
    /// The directions sampled on at most `max_side` × `max_side` blocks (at least 1 per side).
    pub fn sample_grid(&self, grid: &NavGrid, max_side: u32) -> FieldSample {
        let max_side = max_side.max(1);
        let stride = self.cols.max(self.rows).div_ceil(max_side).max(1);
        let (cols, rows) = (self.cols.div_ceil(stride), self.rows.div_ceil(stride));
        let mut angles = Vec::with_capacity(cols as usize * rows as usize);
        for by in 0..rows {
            for bx in 0..cols {
                let cx = (bx * stride + stride / 2).min(self.cols - 1);
                let cy = (by * stride + stride / 2).min(self.rows - 1);
                let d = self.dir(grid.index(cx, cy));
                angles.push((d != Vec2::ZERO).then(|| d.y.atan2(d.x)));
            }
        }
        FieldSample { origin: grid.origin(), spacing: grid.cell_size() * stride as f32, cols, rows, angles }
    }
}

/// The 8-neighbour offset a unit direction points into (the cell holding centre + d·cell).
pub fn step_of(d: Vec2) -> (i32, i32) {
    let s = |v: f32| {
        if v > 0.5 {
            1
        } else if v < -0.5 {
            -1
        } else {
            0
        }
    };
    (s(d.x), s(d.y))
}

/// First-order eikonal update from the smaller accepted neighbours `a` (x) and `b` (y), cell `h`.
pub fn eikonal_update(a: f32, b: f32, h: f32) -> f32 {
    if a.is_finite() && b.is_finite() && (a - b).abs() < h {
        (a + b + (2.0 * h * h - (a - b) * (a - b)).sqrt()) * 0.5
    } else {
        a.min(b) + h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::view::Bounds;
    use proptest::prelude::*;

    fn open(n: u32) -> NavGrid {
        NavGrid::empty(Bounds { min: Vec2::ZERO, max: Vec2::splat(n as f32) }, 1.0, 0.0)
    }

    #[test]
    fn eikonal_update_by_hand() {
        // One known neighbour: a + h. Two equal: (1 + 1 + √(2 − 0))/2 = 1.7071.
        assert!((eikonal_update(1.0, f32::INFINITY, 1.0) - 2.0).abs() < 1e-6);
        assert!((eikonal_update(1.0, 1.0, 1.0) - 1.707_106_8).abs() < 1e-6);
        // |a − b| ≥ h falls back to min + h.
        assert!((eikonal_update(0.0, 1.0, 1.0) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn integration_costs_on_a_5x5_grid_with_a_wall() {
        // 5×5, goal cell (0,0). Column x = 2 blocked for y = 0..3 (a wall with a gap at y = 4).
        //   y=4  .  .  .  .  .
        //   y=3  .  .  #  .  .
        //   ...  .  .  #  .  .
        //   y=0  G  .  #  .  .
        let mut g = open(5);
        for y in 0..4 {
            let i = g.index(2, y);
            g.set_blocked(i, true);
        }
        let f = FlowField::build(&g, 0, Vec2::new(0.5, 0.5));
        let t = |x, y| f.cost(g.index(x, y));
        // Along the axes: T = distance. (1,0) = 1, (0,1) = 1, (0,4) = 4.
        assert!((t(1, 0) - 1.0).abs() < 1e-5);
        assert!((t(0, 4) - 4.0).abs() < 1e-5);
        // (1,1) from a = b = 1: 1.7071 (Euclidean √2 = 1.414; first-order FMM overestimates).
        assert!((t(1, 1) - 1.707_106_8).abs() < 1e-5);
        // Blocked cells stay ∞; cells behind the wall are reached through the gap: T(3,0) must
        // exceed the detour's straight part T(2,4) + 4 rows down ≥ 4 + 4.
        assert!(t(2, 0).is_infinite());
        assert!(t(3, 0) > t(2, 4) + 3.9, "{} vs {}", t(3, 0), t(2, 4));
        // Directions: (1,0) sees the goal: straight −x. (3,0) must go up (+y) towards the gap.
        let d = f.dir(g.index(1, 0));
        assert!((d - Vec2::new(-1.0, 0.0)).length() < 1e-3, "{d:?}");
        let d = f.dir(g.index(3, 0));
        assert!(d.y > 0.9 && d.x.abs() < 0.45, "{d:?}");
        // The goal cell has no direction; blocked cells have none.
        assert_eq!(f.dir(0), Vec2::ZERO);
        assert_eq!(f.dir(g.index(2, 1)), Vec2::ZERO);
    }

    #[test]
    fn directions_are_smooth_not_eight_way() {
        // Open 64×64 field, goal at (0,0)'s cell; far cells (beyond the LOS radius) still point
        // near the true bearing to the goal, not at a multiple of 45°.
        let g = open(64);
        let f = FlowField::build(&g, 0, Vec2::new(0.5, 0.5));
        let i = g.index(60, 25);
        let want = dir(Vec2::new(0.5, 0.5) - g.center(i));
        let got = f.dir(i);
        assert!(got.angle_to(want).abs() < 0.12, "{got:?} vs {want:?}");
        // 8-way Dijkstra would give −45° or −90°... ; the true bearing is ~22.6° off the axis.
        assert!((got.y / got.x).abs() > 0.25 && (got.y / got.x).abs() < 0.6);
    }

    #[test]
    fn sample_grid_takes_block_centres() {
        // 10×10 open cells, goal in cell (0, 0). At most 4 blocks per side: stride ⌈10/4⌉ = 3,
        // so 4×4 blocks of 3 cells (the last ones partial); block (1, 0) shows cell (4, 1),
        // which sees the goal: it points at the goal centre (0.5, 0.5) from (4.5, 1.5), i.e.
        // atan2(−1, −4) = −2.8966 rad. Block (0, 0) shows cell (1, 1): atan2(−1, −1) = −3π/4.
        let g = open(10);
        let f = FlowField::build(&g, 0, Vec2::new(0.5, 0.5));
        let s = f.sample_grid(&g, 4);
        assert_eq!((s.cols, s.rows), (4, 4));
        assert!((s.spacing - 3.0).abs() < 1e-6);
        assert_eq!(s.origin, Vec2::ZERO);
        assert_eq!(s.angles.len(), 16);
        let a = s.angles[1].unwrap_or(f32::NAN);
        assert!((a - (-1.0f32).atan2(-4.0)).abs() < 2e-4, "{a}");
        let a = s.angles[0].unwrap_or(f32::NAN);
        assert!((a + 3.0 * std::f32::consts::FRAC_PI_4).abs() < 2e-4, "{a}");
        // Never more blocks than asked, and a field smaller than the limit is shown cell by cell.
        assert_eq!(f.sample_grid(&g, 64).spacing, 1.0);
        assert_eq!(f.sample_grid(&g, 0).angles.len(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn directions_are_unit_or_zero_and_never_point_into_blocked_cells(
            blocked in proptest::collection::vec(any::<bool>(), 144),
            goal in 0usize..144,
            density in 0u8..4,
        ) {
            let mut g = open(12);
            for (i, b) in blocked.iter().enumerate() {
                // Keep roughly a quarter to a half blocked depending on `density`.
                if *b && (i as u8 % 4) < density {
                    g.set_blocked(i, true);
                }
            }
            let f = FlowField::build(&g, goal, g.center(goal));
            for i in 0..g.len() {
                let d = f.dir(i);
                prop_assert!(d.is_finite());
                prop_assert!(d == Vec2::ZERO || (d.length() - 1.0).abs() < 1e-4);
                if d != Vec2::ZERO {
                    prop_assert!(!g.is_blocked(i) && f.cost(i).is_finite());
                    let (cx, cy) = g.xy(i);
                    let (sx, sy) = step_of(d);
                    let j = g.offset(cx, cy, sx, sy);
                    prop_assert!(j.is_some_and(|j| !g.is_blocked(j)), "cell {:?} dir {:?}", (cx, cy), d);
                } else if f.cost(i).is_finite() && i != goal {
                    prop_assert!(false, "reachable cell {} without direction", i);
                }
                let s = f.sample(&g, g.center(i) + Vec2::new(0.2, -0.3));
                prop_assert!(s.is_finite() && (s == Vec2::ZERO || (s.length() - 1.0).abs() < 1e-4));
            }
        }
    }
}
