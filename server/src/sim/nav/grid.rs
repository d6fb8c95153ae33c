//! The navigation grid: square cells over the world bounds, each free or blocked.
//!
//! A cell is blocked when its centre lies within `obstacle.radius + clearance` of an obstacle's
//! centre, or within `max(clearance, 0.7072·cell)` of a wall. The wall band is at least half a
//! cell diagonal wide, so the straight step between the centres of two free neighbouring cells
//! (orthogonal or diagonal) can never cross a wall: a crossing point on that step is within
//! half its length (≤ 0.7071·cell) of one of the two centres.
//!
//! Changes are cheap: [`NavGrid::refresh`] re-rasterizes only the cells of a box (the old and
//! new extent of a changed obstacle or wall), querying the static index per cell.
//!
//! Connectivity is 4-neighbour (the fast-marching update uses the four axis neighbours);
//! [`NavGrid::update_components`] labels the connected free regions.

use glam::Vec2;

use crate::sim::bytes::{Dec, DecodeError, Enc};
use crate::sim::math::{cell_axis, closest_on_segment};
use crate::sim::spatial::StaticIndex;
use crate::sim::geometry::{Bounds, Obstacle, Wall};

/// Most cells a navigation grid may have; a finer cell size is coarsened to fit (2048²).
pub const MAX_NAV_CELLS: usize = 1 << 22;

/// Label of a blocked cell in [`NavGrid::components`].
pub const NO_COMPONENT: u32 = u32::MAX;

/// The navigation grid.
#[derive(Debug, Clone)]
pub struct NavGrid {
    origin: Vec2,
    cell: f32,
    cols: u32,
    rows: u32,
    clearance: f32,
    blocked: Vec<bool>,
    /// Bumped by every change; flow fields built for another version are stale.
    version: u64,
    components: Vec<u32>,
    components_version: u64,
    /// Chessboard distance, in cells, from each cell to the nearest blocked cell (saturating;
    /// computed with the components): every cell within `clear[i] − 1` of cell `i` is free, so a
    /// line test can jump over that stretch instead of sampling it.
    clear: Vec<u16>,
}

impl NavGrid {
    /// An all-free grid of cells of side ≥ `cell` over `bounds` (coarsened to at most
    /// [`MAX_NAV_CELLS`] cells).
    pub fn empty(bounds: Bounds, cell: f32, clearance: f32) -> Self {
        let size = bounds.size().max(Vec2::splat(1e-3));
        let mut cell = if cell.is_finite() && cell > 1e-3 { cell } else { 1.0 };
        let (cols, rows) = loop {
            let cols = (size.x / cell).ceil().max(1.0);
            let rows = (size.y / cell).ceil().max(1.0);
            if cols * rows <= MAX_NAV_CELLS as f32 {
                break (cols as u32, rows as u32);
            }
            cell *= 1.25;
        };
        let n = cols as usize * rows as usize;
        NavGrid {
            origin: bounds.min,
            cell,
            cols,
            rows,
            clearance: clearance.max(0.0),
            blocked: vec![false; n],
            version: 1,
            components: Vec::new(),
            components_version: 0,
            clear: Vec::new(),
        }
    }

    /// A grid rasterized from `obstacles` and `walls` (builds its own static index).
    pub fn build(bounds: Bounds, cell: f32, clearance: f32, obstacles: &[Obstacle], walls: &[Wall]) -> Self {
        let mut g = NavGrid::empty(bounds, cell, clearance);
        let statics = StaticIndex::build(bounds, (g.cell * 8.0).max(1.0), obstacles, walls);
        g.refresh(bounds.min, bounds.max, obstacles, walls, &statics);
        g
    }

    /// Re-rasterizes every cell whose centre lies in the box `lo`–`hi` (inflated by the
    /// clearance and one cell) and bumps the version.
    pub fn refresh(&mut self, lo: Vec2, hi: Vec2, obstacles: &[Obstacle], walls: &[Wall], statics: &StaticIndex) {
        let pad = Vec2::splat(self.wall_band() + self.cell);
        let (x0, y0) = self.coords(lo - pad);
        let (x1, y1) = self.coords(hi + pad);
        let wall_band = self.wall_band();
        for cy in y0..=y1 {
            for cx in x0..=x1 {
                let c = self.center_of(cx, cy);
                let mut blocked = false;
                statics.for_each_obstacle(c, self.clearance, |i| {
                    if let Some(o) = obstacles.get(i as usize) {
                        let reach = o.radius + self.clearance;
                        blocked |= o.center.distance_squared(c) < reach * reach;
                    }
                });
                if !blocked {
                    statics.for_each_wall(c, wall_band, |i| {
                        if let Some(w) = walls.get(i as usize) {
                            blocked |= closest_on_segment(c, w.a, w.b).distance_squared(c) < wall_band * wall_band;
                        }
                    });
                }
                let i = self.index(cx, cy);
                if let Some(b) = self.blocked.get_mut(i) {
                    *b = blocked;
                }
            }
        }
        self.version += 1;
    }

    /// Half-width of the blocked band round a wall.
    pub fn wall_band(&self) -> f32 {
        self.clearance.max(self.cell * 0.7072)
    }

    /// Lower-left corner of the grid.
    pub fn origin(&self) -> Vec2 {
        self.origin
    }

    /// Side of a cell.
    pub fn cell_size(&self) -> f32 {
        self.cell
    }

    /// Clearance kept from obstacles.
    pub fn clearance(&self) -> f32 {
        self.clearance
    }

    /// Columns and rows.
    pub fn dims(&self) -> (u32, u32) {
        (self.cols, self.rows)
    }

    /// Number of cells.
    pub fn len(&self) -> usize {
        self.blocked.len()
    }

    /// True when the grid has no cells (never).
    pub fn is_empty(&self) -> bool {
        self.blocked.is_empty()
    }

    /// Version (bumped by every change).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Bytes held by the grid's arrays.
    pub fn bytes(&self) -> usize {
        self.blocked.len() + self.components.len() * 4 + self.clear.len() * 2
    }

    /// Column and row of `p`, clamped onto the grid (a non-finite coordinate maps to 0).
    #[inline]
    pub fn coords(&self, p: Vec2) -> (u32, u32) {
        let c = (p - self.origin) / self.cell;
        (cell_axis(c.x, self.cols), cell_axis(c.y, self.rows))
    }

    /// Index of the cell holding `p` (clamped onto the grid).
    #[inline]
    pub fn cell_of(&self, p: Vec2) -> usize {
        let (cx, cy) = self.coords(p);
        self.index(cx, cy)
    }

    /// Index of cell (`cx`, `cy`) (must be on the grid).
    #[inline]
    pub fn index(&self, cx: u32, cy: u32) -> usize {
        cy as usize * self.cols as usize + cx as usize
    }

    /// Column and row of cell `i`.
    #[inline]
    pub fn xy(&self, i: usize) -> (u32, u32) {
        ((i % self.cols as usize) as u32, (i / self.cols as usize) as u32)
    }

    /// The index of the cell at (`cx + dx`, `cy + dy`), if on the grid.
    #[inline]
    pub fn offset(&self, cx: u32, cy: u32, dx: i32, dy: i32) -> Option<usize> {
        let x = cx as i64 + i64::from(dx);
        let y = cy as i64 + i64::from(dy);
        if x < 0 || y < 0 || x >= i64::from(self.cols) || y >= i64::from(self.rows) {
            return None;
        }
        Some(self.index(x as u32, y as u32))
    }

    /// Centre of cell (`cx`, `cy`).
    #[inline]
    pub fn center_of(&self, cx: u32, cy: u32) -> Vec2 {
        self.origin + (Vec2::new(cx as f32, cy as f32) + 0.5) * self.cell
    }

    /// Centre of cell `i`.
    #[inline]
    pub fn center(&self, i: usize) -> Vec2 {
        let (cx, cy) = self.xy(i);
        self.center_of(cx, cy)
    }

    /// True when cell `i` is blocked (or off the grid).
    #[inline]
    pub fn is_blocked(&self, i: usize) -> bool {
        self.blocked.get(i).copied().unwrap_or(true)
    }

    /// Marks a cell (tests and tools).
    pub fn set_blocked(&mut self, i: usize, blocked: bool) {
        if let Some(b) = self.blocked.get_mut(i) {
            *b = blocked;
            self.version += 1;
        }
    }

    /// True when the straight segment `a`→`b` stays on free cells (sampled every third of a cell).
    pub fn line_free(&self, a: Vec2, b: Vec2) -> bool {
        self.samples_free(a, b, None)
    }

    /// The samples of `a`→`b` (every third of a cell) lie on free cells, except those within
    /// `skip` of `a`.
    ///
    /// With the clearance map current, a sample in a cell whose nearest blocked cell is `D`
    /// cells away vouches for every later sample closer (per axis) than `D − 1.01` cells: those
    /// lie in free cells, so they are skipped. The answer is the one sampling every point gives;
    /// in open ground a line costs a few samples instead of three per cell.
    fn samples_free(&self, a: Vec2, b: Vec2, skip: Option<f32>) -> bool {
        let len = a.distance(b);
        let steps = (len / (self.cell / 3.0)).ceil().max(1.0) as u32;
        let span = (b - a).abs().max_element();
        let clear = if self.components_current() && self.clear.len() == self.blocked.len() { Some(&self.clear) } else { None };
        let mut k = 0u32;
        while k <= steps {
            let p = a.lerp(b, k as f32 / steps as f32);
            if skip.is_some_and(|s| p.distance(a) <= s) {
                k += 1;
                continue;
            }
            let c = self.cell_of(p);
            if self.is_blocked(c) {
                return false;
            }
            let d = clear.and_then(|m| m.get(c)).map_or(0.0, |&d| f32::from(d));
            let jump = if d >= 2.0 && span > 0.0 { ((d - 1.01) * self.cell / span * steps as f32).floor() } else { 0.0 };
            k = k.saturating_add((jump.min(u32::MAX as f32) as u32).max(1));
        }
        true
    }

    /// True when the component labels match the current version.
    pub fn components_current(&self) -> bool {
        self.components_version == self.version && self.components.len() == self.blocked.len()
    }

    /// Like [`NavGrid::line_free`], but blocked cells within one and a half cells of `a` do
    /// not count: an agent standing in an obstacle's clearance band still sees past it when
    /// the line leads away from it.
    pub fn line_free_from(&self, a: Vec2, b: Vec2) -> bool {
        self.samples_free(a, b, Some(1.5 * self.cell))
    }

    /// Recomputes the connected-component labels (4-neighbour; [`NO_COMPONENT`] for blocked)
    /// if the grid changed since. Labels are numbered in scan order.
    pub fn update_components(&mut self) {
        if self.components_current() {
            return;
        }
        let mut label = vec![NO_COMPONENT; self.blocked.len()];
        let mut next = 0u32;
        let mut stack = Vec::new();
        for start in 0..self.blocked.len() {
            if self.blocked[start] || label[start] != NO_COMPONENT {
                continue;
            }
            label[start] = next;
            stack.push(start);
            while let Some(i) = stack.pop() {
                let (cx, cy) = self.xy(i);
                for (dx, dy) in [(1, 0), (-1, 0), (0, 1), (0, -1)] {
                    if let Some(j) = self.offset(cx, cy, dx, dy) {
                        if !self.blocked[j] && label[j] == NO_COMPONENT {
                            label[j] = next;
                            stack.push(j);
                        }
                    }
                }
            }
            next += 1;
        }
        self.components = label;
        self.components_version = self.version;
        self.update_clearance();
    }

    /// Two-pass chamfer transform of the chessboard distance to the nearest blocked cell (cells
    /// off the grid count as free, as `cell_of` clamps to the grid).
    fn update_clearance(&mut self) {
        let (cols, rows) = (self.cols as usize, self.rows as usize);
        let mut d = vec![u16::MAX; self.blocked.len()];
        let at = |d: &[u16], x: usize, y: usize| d[y * cols + x];
        for y in 0..rows {
            for x in 0..cols {
                let i = y * cols + x;
                if self.blocked[i] {
                    d[i] = 0;
                    continue;
                }
                let mut m = u16::MAX;
                if x > 0 {
                    m = m.min(at(&d, x - 1, y));
                }
                if y > 0 {
                    m = m.min(at(&d, x, y - 1));
                    if x > 0 {
                        m = m.min(at(&d, x - 1, y - 1));
                    }
                    if x + 1 < cols {
                        m = m.min(at(&d, x + 1, y - 1));
                    }
                }
                d[i] = m.saturating_add(1);
            }
        }
        for y in (0..rows).rev() {
            for x in (0..cols).rev() {
                let i = y * cols + x;
                let mut m = u16::MAX;
                if x + 1 < cols {
                    m = m.min(at(&d, x + 1, y));
                }
                if y + 1 < rows {
                    m = m.min(at(&d, x, y + 1));
                    if x + 1 < cols {
                        m = m.min(at(&d, x + 1, y + 1));
                    }
                    if x > 0 {
                        m = m.min(at(&d, x - 1, y + 1));
                    }
                }
                d[i] = d[i].min(m.saturating_add(1));
            }
        }
        self.clear = d;
    }

    /// Component label of cell `i` as of the last [`NavGrid::update_components`]
    /// ([`NO_COMPONENT`] when blocked or never computed).
    pub fn component(&self, i: usize) -> u32 {
        if self.components_version != self.version {
            return NO_COMPONENT;
        }
        self.components.get(i).copied().unwrap_or(NO_COMPONENT)
    }

    /// The free cell of component `comp` whose centre is nearest to `p` (ties: lowest index).
    pub fn nearest_in_component(&self, p: Vec2, comp: u32) -> Option<usize> {
        let mut best: Option<(f32, usize)> = None;
        for i in 0..self.blocked.len() {
            if self.component(i) == comp {
                let d = self.center(i).distance_squared(p);
                if best.is_none_or(|b| d < b.0) {
                    best = Some((d, i));
                }
            }
        }
        best.map(|b| b.1)
    }
}

impl NavGrid {
    /// Appends what a saved world keeps of the grid (`world/save.rs`): the version, whether the
    /// component labels are current, and the blocked flags (one bit per cell). The shape comes
    /// from the world's settings; labels and clearance map are computed again on load.
    pub(crate) fn save(&self, e: &mut Enc) {
        e.u64(self.version);
        e.u8(u8::from(self.components_current()));
        e.u64(self.blocked.len() as u64);
        for chunk in self.blocked.chunks(8) {
            e.u8(chunk.iter().enumerate().fold(0u8, |b, (i, &x)| b | (u8::from(x) << i)));
        }
    }

    /// Reads what [`NavGrid::save`] wrote into this grid (built empty from the same settings).
    pub(crate) fn load(&mut self, d: &mut Dec) -> Result<(), DecodeError> {
        let version = d.u64()?;
        let current = d.bool()?;
        let n = usize::try_from(d.u64()?).map_err(|_| d.err("nav cells"))?;
        if n != self.blocked.len() {
            return Err(d.err(format!("nav grid has {n} cells, the world's settings give {}", self.blocked.len())));
        }
        for k in 0..n.div_ceil(8) {
            let b = d.u8()?;
            for (i, cell) in self.blocked.iter_mut().skip(8 * k).take(8).enumerate() {
                *cell = b & (1 << i) != 0;
            }
        }
        self.version = version;
        self.components = Vec::new();
        self.clear = Vec::new();
        self.components_version = 0;
        if current {
            self.update_components();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(w: f32, h: f32) -> Bounds {
        Bounds { min: Vec2::ZERO, max: Vec2::new(w, h) }
    }

    #[test]
    fn coords_of_non_finite_points_are_zero() {
        let g = NavGrid::empty(bounds(10.0, 10.0), 1.0, 0.5);
        assert_eq!(g.coords(Vec2::new(f32::NAN, 5.5)), (0, 5));
        assert_eq!(g.coords(Vec2::new(f32::INFINITY, f32::NEG_INFINITY)), (0, 0));
        assert_eq!(g.coords(Vec2::new(1.0e30, -0.5)), (9, 0));
    }

    #[test]
    fn obstacles_block_cells_within_radius_plus_clearance() {
        // 10×10 cells of 1; obstacle r=1 at (5,5), clearance 0.5 → reach 1.5.
        // Cell (4,4) centre (4.5,4.5): distance 0.707 < 1.5 → blocked.
        // Cell (6,5) centre (6.5,5.5): distance √(2.25+0.25)=1.58 ≥ 1.5 → free.
        // Cell (6,4) centre (6.5,4.5): distance 1.58 → free; (5,6) centre (5.5,6.5): 1.58 → free.
        // Cell (3,5) centre (3.5,5.5): 1.58 → free; (5,5) centre (5.5,5.5): 0.707 → blocked.
        let o = [Obstacle { id: 1, center: Vec2::new(5.0, 5.0), radius: 1.0 }];
        let g = NavGrid::build(bounds(10.0, 10.0), 1.0, 0.5, &o, &[]);
        let blocked: Vec<(u32, u32)> = (0..g.len()).filter(|&i| g.is_blocked(i)).map(|i| g.xy(i)).collect();
        assert_eq!(blocked, vec![(4, 4), (5, 4), (4, 5), (5, 5)]);
    }

    #[test]
    fn walls_block_a_band_at_least_half_a_diagonal_wide() {
        // Wall x = 5 from y 0 to 10, clearance 0.3 → band max(0.3, 0.7072) = 0.7072.
        // Centres at x = 4.5 and 5.5 are 0.5 away → blocked; 3.5 and 6.5 are 1.5 away → free.
        let w = [Wall { id: 1, a: Vec2::new(5.0, 0.0), b: Vec2::new(5.0, 10.0), normal: Vec2::X }];
        let mut g = NavGrid::build(bounds(10.0, 10.0), 1.0, 0.3, &[], &w);
        for cy in 0..10 {
            for cx in 0..10 {
                assert_eq!(g.is_blocked(g.index(cx, cy)), cx == 4 || cx == 5, "cell {cx},{cy}");
            }
        }
        // Two components: left (first in scan order) and right.
        g.update_components();
        assert_eq!(g.component(g.index(0, 0)), 0);
        assert_eq!(g.component(g.index(9, 9)), 1);
        assert_eq!(g.component(g.index(4, 0)), NO_COMPONENT);
        assert_eq!(g.nearest_in_component(Vec2::new(9.0, 5.5), 0), Some(g.index(3, 5)));
        assert!(!g.line_free(Vec2::new(1.0, 1.0), Vec2::new(8.0, 1.0)));
        assert!(g.line_free(Vec2::new(1.0, 1.0), Vec2::new(1.0, 8.0)));
    }

    #[test]
    fn refresh_updates_only_the_changed_region() {
        let mut o = vec![Obstacle { id: 1, center: Vec2::new(2.0, 2.0), radius: 0.5 }];
        let b = bounds(20.0, 20.0);
        let mut g = NavGrid::build(b, 1.0, 0.5, &o, &[]);
        let v = g.version();
        assert!(g.is_blocked(g.cell_of(Vec2::new(2.1, 2.1))));
        let old = o[0].center;
        o[0].center = Vec2::new(15.0, 15.0);
        let statics = StaticIndex::build(b, 8.0, &o, &[]);
        g.refresh(old - 1.0, old + 1.0, &o, &[], &statics);
        g.refresh(o[0].center - 1.0, o[0].center + 1.0, &o, &[], &statics);
        assert!(g.version() > v);
        assert!(!g.is_blocked(g.cell_of(Vec2::new(2.1, 2.1))));
        assert!(g.is_blocked(g.cell_of(Vec2::new(15.1, 15.1))));
        let full = NavGrid::build(b, 1.0, 0.5, &o, &[]);
        assert!((0..g.len()).all(|i| g.is_blocked(i) == full.is_blocked(i)));
    }

    /// Every sample, no jumps: what `samples_free` must answer.
    fn naive(g: &NavGrid, a: Vec2, b: Vec2, skip: Option<f32>) -> bool {
        let steps = (a.distance(b) / (g.cell / 3.0)).ceil().max(1.0) as u32;
        (0..=steps).all(|k| {
            let p = a.lerp(b, k as f32 / steps as f32);
            skip.is_some_and(|s| p.distance(a) <= s) || !g.is_blocked(g.cell_of(p))
        })
    }

    proptest::proptest! {
        /// The floor-free `coords` gives what the floor formula gives, on and off the grid.
        #[test]
        fn coords_equal_the_floor_formula(x in -1.0e7f32..1.0e7, y in -1.0e7f32..1.0e7, cell in 0.05f32..50.0, w in 1.0f32..5000.0) {
            let g = NavGrid::empty(Bounds { min: Vec2::new(-3.0, 7.0), max: Vec2::new(w, w + 10.0) }, cell, 0.5);
            let p = Vec2::new(x, y);
            let c = ((p - g.origin) / g.cell).floor();
            let want = (c.x.clamp(0.0, (g.cols - 1) as f32) as u32, c.y.clamp(0.0, (g.rows - 1) as f32) as u32);
            proptest::prop_assert_eq!(g.coords(p), want);
            let near = g.origin + Vec2::splat(g.cell) * Vec2::new((x / 1e7).abs() * 3.0, (y / 1e7).abs() * 3.0);
            let c = ((near - g.origin) / g.cell).floor();
            let want = (c.x.clamp(0.0, (g.cols - 1) as f32) as u32, c.y.clamp(0.0, (g.rows - 1) as f32) as u32);
            proptest::prop_assert_eq!(g.coords(near), want);
        }

        #[test]
        fn clearance_jumps_give_the_answer_of_every_sample(
            blocked in proptest::collection::vec((0u32..40, 0u32..30), 0..25),
            a in (-5.0f32..85.0, -5.0f32..65.0),
            b in (-5.0f32..85.0, -5.0f32..65.0),
            skip in proptest::option::of(0.0f32..5.0),
        ) {
            let bounds = Bounds { min: Vec2::ZERO, max: Vec2::new(80.0, 60.0) };
            let mut g = NavGrid::empty(bounds, 2.0, 0.5);
            for (x, y) in blocked {
                let i = g.index(x, y);
                g.set_blocked(i, true);
            }
            g.update_components();
            let (a, b) = (Vec2::new(a.0, a.1), Vec2::new(b.0, b.1));
            proptest::prop_assert_eq!(g.samples_free(a, b, skip), naive(&g, a, b, skip));
        }
    }

    #[test]
    fn clearance_is_the_chessboard_distance_to_the_nearest_blocked_cell() {
        // 10×10 cells of 1, one blocked cell at (3,4): cell (3,4) 0, (5,5) max(2,1) = 2, (9,0) 6.
        let mut g = NavGrid::empty(Bounds { min: Vec2::ZERO, max: Vec2::splat(10.0) }, 1.0, 0.0);
        let i = g.index(3, 4);
        g.set_blocked(i, true);
        g.update_components();
        assert_eq!(g.clear[g.index(3, 4)], 0);
        assert_eq!(g.clear[g.index(5, 5)], 2);
        assert_eq!(g.clear[g.index(9, 0)], 6);
        // No blocked cell: saturated.
        let mut open = NavGrid::empty(Bounds { min: Vec2::ZERO, max: Vec2::splat(10.0) }, 1.0, 0.0);
        open.update_components();
        assert_eq!(open.clear[0], u16::MAX);
    }
}
