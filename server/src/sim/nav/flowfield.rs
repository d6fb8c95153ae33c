//! Flow fields: an integration field from a goal cell and a smooth direction per cell.
//!
//! **Integration: fast marching (Sethian), not Dijkstra.** Dijkstra on a 4- or 8-neighbour grid
//! measures Manhattan or octile distance; the steepest descent of those points in only 4 or 8
//! directions, which is the 8-way zig-zag. Fast marching solves the eikonal equation |∇T| = 1
//! with the first-order upwind update
//! `T = (a + b + √(2h² − (a − b)²)) / 2` when |a − b| < h, else `min(a, b) + h`
//! (a, b: the smaller accepted neighbour value along x and along y), so T approximates the
//! Euclidean path length round the blocked cells, and its gradient turns smoothly. It accepts
//! cells in Dijkstra's order, least T first, ties by cell index, so a field is a pure function
//! of the grid and the goal. The queue is a bucket queue over T that pops exactly that order
//! (the front spans about one cell side of T, so a bucket holds a few cells; see `FrontQueue`).
//!
//! **Directions.** Per cell, the upwind gradient: along each axis the difference to the smaller
//! of the two neighbours when it is smaller than the cell (the side the front came from),
//! negated and normalised. Cells within [`LOS_RADIUS_CELLS`] of the goal that see the goal
//! (the straight line stays on free cells) point straight at it (the line-of-sight shortcut).
//! Finally every direction is checked: the neighbour it points into (the cell holding
//! `centre + dir·cell`) must be free; otherwise the cell points at its free neighbour with the
//! least T (diagonals only when both orthogonal cells are free, so corners are not cut).
//! Directions are stored as a 16-bit angle (`NO_DIR` for none): 6 bytes per cell with T.
//!
//! A test-only copy of the first implementation (a binary heap, per-cell bounds checks) is the
//! reference every field must equal bit for bit: replays and state hashes depend on the fields.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;

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
    let a = crate::sim::math::atan2(d.y, d.x);
    // Same as `rem_euclid(TAU)` for atan2's range [−π, π], without the float modulo.
    let a = if a < 0.0 { a + std::f32::consts::TAU } else { a };
    (round_half_away(a * ANGLE_SCALE) % 65535) as u16
}

/// `x.round() as u32` for 0 ≤ x < 2²³ (or −0), without the libm call `round` is on targets
/// without SSE4.1: below 2²³ the fraction `x − trunc(x)` is exact, so comparing it with ½ rounds
/// halves away from zero exactly as `round` does.
#[inline]
fn round_half_away(x: f32) -> u32 {
    let t = x as u32;
    if x - t as f32 >= 0.5 { t + 1 } else { t }
}

fn decode(a: u16) -> Vec2 {
    if a == NO_DIR { Vec2::ZERO } else { heading(f32::from(a) / ANGLE_SCALE) }
}

const NEIGHBOURS8: [(i32, i32); 8] = [(1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (1, -1), (-1, 1), (-1, -1)];

impl FlowField {
    /// Builds the field towards `goal` (a point in free cell `goal_cell` of `grid`; when the cell
    /// is blocked every cell is unreachable).
    pub fn build(grid: &NavGrid, goal_cell: usize, goal: Vec2) -> Self {
        let t = march(grid, goal_cell);
        let (cols, rows) = grid.dims();
        let n = grid.len();
        let mut cost = Vec::with_capacity(n);
        for y in 0..rows as usize {
            cost.extend(t.cells[t.at(0, y)..][..cols as usize].iter().map(|c| c.t));
        }
        let mut f = FlowField { goal_cell, goal, grid_version: grid.version(), cols, rows, cost, dirs: vec![NO_DIR; n] };
        f.compute_dirs(grid, &t);
        f
    }

    /// The direction per cell, from the march's padded cells `t` (the same T as `self.cost`).
    ///
    /// Row by row over the padded cells, so the neighbours are fixed offsets and a cell off the
    /// grid reads ∞ like a blocked or unreachable one. "The cell `d` points into is free" is
    /// then "its T is finite" (a blocked cell is never reached), and the check of the stored
    /// angle looks its step up in [`decoded_steps`] instead of decoding it. A row whose vertical
    /// distance to the goal alone exceeds the line-of-sight radius skips the per-cell distance
    /// test: `dx² + dy²` cannot round below `dy²`, so every cell of it fails that test. The angles
    /// of a row are encoded after its directions are found (the atan2 calls pipeline better
    /// away from the branches).
    fn compute_dirs(&mut self, grid: &NavGrid, t: &Padded) {
        let h = grid.cell_size();
        let los_r2 = (LOS_RADIUS_CELLS * h) * (LOS_RADIUS_CELLS * h);
        let (cols, rows) = (self.cols as usize, self.rows as usize);
        let w = t.width;
        let v = &t.cells[..];
        // Offset in `v` of the cell one step (sx, sy) away, by `step_index`.
        let wi = w as isize;
        let offsets: [isize; 9] = [-wi - 1, -wi, -wi + 1, -1, 0, 1, wi - 1, wi, wi + 1];
        let free = |p: usize, s: usize| v[p.wrapping_add_signed(offsets[s])].t.is_finite();
        let neighbours = Neighbours::new(h, w);
        let steps = decoded_steps();
        // Angle `a` for padded cell `p`, whose direction steps `s` (into a free cell): re-checked,
        // as quantization could move a direction across a sector edge (no need when it still
        // steps where the direction did).
        let checked = |a: u16, s: usize, p: usize| {
            if a != NO_DIR {
                let sa = usize::from(steps[usize::from(a)]);
                if sa != s && !free(p, sa) {
                    return neighbours.best(v, p).0;
                }
            }
            a
        };
        let mut to_encode: Vec<(usize, usize, Vec2, usize)> = Vec::with_capacity(cols);
        for y in 0..rows {
            let row = y * cols;
            let prow = t.at(0, y);
            let dy = grid.center_of(0, y as u32).y - self.goal.y;
            let far_row = dy * dy > los_r2;
            for x in 0..cols {
                let (i, p) = (row + x, prow + x);
                let c = v[p].t;
                if !c.is_finite() || i == self.goal_cell {
                    continue;
                }
                let sees_goal = |&centre: &Vec2| centre.distance_squared(self.goal) <= los_r2 && grid.line_free(centre, self.goal);
                let d = if let Some(centre) = (!far_row).then(|| grid.center_of(x as u32, y as u32)).filter(sees_goal) {
                    dir(self.goal - centre)
                } else {
                    let slope = |lo: f32, hi: f32| upwind_slope(c, lo, hi);
                    // Gradient of T (pointing uphill); the flow goes downhill.
                    let g = Vec2::new(slope(v[p - 1].t, v[p + 1].t), slope(v[p - w].t, v[p + w].t));
                    -dir(g)
                };
                // The step of `d`; if it leads into a free cell, the angle is stored below.
                let s = if d == Vec2::ZERO { 4 } else { step_index(d) };
                if d != Vec2::ZERO && free(p, s) {
                    to_encode.push((i, p, d, s));
                } else {
                    let (a, s) = neighbours.best(v, p);
                    self.dirs[i] = checked(a, s, p);
                }
            }
            // The angles of the row's directions, apart from the branchy loop above (the atan2
            // calls do not depend on one another).
            for &(i, p, d, s) in &to_encode {
                self.dirs[i] = checked(encode(d), s, p);
            }
            to_encode.clear();
        }
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

/// The 8 neighbours in [`NEIGHBOURS8`] order, as offsets in a padded field of a given width,
/// with their step length and the stored angle of their direction.
struct Neighbours {
    /// (offset, step length, angle, offsets of the two orthogonal cells a diagonal must not cut
    /// (0, 0 for an orthogonal step: the cell itself, which is reachable), step index).
    n: [(isize, f32, u16, isize, isize, usize); 8],
}

impl Neighbours {
    fn new(h: f32, width: usize) -> Self {
        let w = width as isize;
        let n = NEIGHBOURS8.map(|(dx, dy)| {
            let (dx, dy) = (dx as isize, dy as isize);
            let step = if dx != 0 && dy != 0 { std::f32::consts::SQRT_2 } else { 1.0 } * h;
            let code = encode(dir(Vec2::new(dx as f32, dy as f32)));
            let (ox, oy) = if dx != 0 && dy != 0 { (dx, dy * w) } else { (0, 0) };
            (dx + dy * w, step, code, ox, oy, ((dy + 1) * 3 + dx + 1) as usize)
        });
        Neighbours { n }
    }

    /// The stored angle towards the reachable neighbour of padded cell `p` with the least
    /// T + step (no corner cutting; the first of equals in [`NEIGHBOURS8`] order), and the
    /// neighbour's [`step_index`]; `NO_DIR` if none. The angle is what `encode` gives the unit
    /// direction of the neighbour's offset.
    fn best(&self, v: &[Node], p: usize) -> (u16, usize) {
        let at = |o: isize| v[p.wrapping_add_signed(o)].t;
        let mut best: Option<(f32, u16, usize)> = None;
        for &(o, step, code, ox, oy, s) in &self.n {
            let tj = at(o);
            if !tj.is_finite() || !at(ox).is_finite() || !at(oy).is_finite() {
                continue;
            }
            let via = tj + step;
            if best.is_none_or(|b| via < b.0) {
                best = Some((via, code, s));
            }
        }
        best.map_or((NO_DIR, 4), |b| (b.1, b.2))
    }
}

/// [`step_index`] of the decoded direction of every stored angle (`NO_DIR` included: step 0, 0).
/// Decoding all 65,536 once per process (sin and cos each) makes the table exactly what
/// decoding each cell's angle would give.
fn decoded_steps() -> &'static [u8] {
    static STEPS: OnceLock<Box<[u8]>> = OnceLock::new();
    STEPS.get_or_init(|| (0..=u16::MAX).map(|a| step_index(decode(a)) as u8).collect())
}

/// [`step_of`] as an index 0..9: `(sy + 1) · 3 + (sx + 1)`.
fn step_index(d: Vec2) -> usize {
    let (sx, sy) = step_of(d);
    ((sy + 1) * 3 + (sx + 1)) as usize
}

/// The march's cells over the grid padded with one cell on every side.
struct Padded {
    /// Row-major, `width` = columns + 2; the padding is never reached (T = ∞).
    cells: Vec<Node>,
    width: usize,
}

impl Padded {
    /// Index of grid cell (`x`, `y`).
    fn at(&self, x: usize, y: usize) -> usize {
        (y + 1) * self.width + x + 1
    }
}

/// Buckets of the march's queue per cell side of T.
const BUCKETS_PER_CELL: f32 = 16.0;

/// Buckets in the queue's ring (a power of two; four cell sides of T).
const RING: usize = 64;

/// The march's priority queue of packed keys (T bits << 32 | cell): pops exactly the least key
/// held (of those still live), as a binary heap of all of them would, so the march accepts the
/// same cells in the same order. The keys are unique (a cell is pushed again only with a smaller
/// T).
///
/// Keys are bucketed by `⌊T · scale⌋`, which never decreases as T grows: a key in a later bucket
/// is greater than every key in an earlier one. The `RING − 1` buckets after the current one are
/// unsorted vectors in a ring. When the current bucket is used up, the next non-empty one
/// becomes current: its dead keys are dropped (a key that is dead stays dead), the rest go to
/// `now` (the least found by a scan, or sorted when there are many). A key pushed into the
/// current bucket or an earlier one (rare: a new T is seldom within a bucket of the last one
/// popped; float rounding can even put it below) goes to a small heap, `late`. The march's front
/// spans about one cell side of T (16 buckets), so a bucket holds a few keys, not the front.
///
/// A key `RING` or more buckets ahead would go to a plain heap, `overflow` (none does: a new T
/// is at most the largest accepted T plus a cell side, and some rounding). The least of `now`,
/// `late` and `overflow` is popped, so the order is exact whatever T does.
struct FrontQueue {
    scale: f32,
    cur: u64,
    /// The current bucket (sorted descending when `sorted`).
    now: Vec<u64>,
    sorted: bool,
    late: BinaryHeap<Reverse<u64>>,
    ring: Vec<Vec<u64>>,
    in_ring: usize,
    overflow: BinaryHeap<Reverse<u64>>,
}

impl FrontQueue {
    fn new(h: f32) -> Self {
        FrontQueue {
            scale: BUCKETS_PER_CELL / h,
            cur: 0,
            now: Vec::new(),
            sorted: false,
            late: BinaryHeap::new(),
            ring: vec![Vec::new(); RING],
            in_ring: 0,
            overflow: BinaryHeap::new(),
        }
    }

    /// Adds `key`, whose T is `t` (≥ 0).
    // Out of line: the march measured a little faster so than with it inlined into its loop.
    #[inline(never)]
    fn push(&mut self, t: f32, key: u64) {
        // Saturating float-to-int conversion: monotone in t.
        let b = u64::from((t * self.scale) as u32);
        if b <= self.cur {
            self.late.push(Reverse(key));
        } else if b - self.cur < RING as u64 {
            self.ring[(b % RING as u64) as usize].push(key);
            self.in_ring += 1;
        } else {
            self.overflow.push(Reverse(key));
        }
    }

    /// Removes and returns the least key, dropping (unreturned) keys `live` says are dead when
    /// their bucket becomes current.
    #[inline]
    fn pop(&mut self, live: impl Fn(u64) -> bool) -> Option<u64> {
        loop {
            if self.late.is_empty() && self.overflow.is_empty() {
                // The common case: the least key is the current bucket's least.
                if let Some((k, at)) = self.now_min() {
                    self.now.swap_remove(at);
                    return Some(k);
                }
            } else if !self.now.is_empty() || !self.late.is_empty() || self.in_ring == 0 {
                let now = self.now_min();
                let mut best = now.map(|m| m.0);
                let mut from = 0;
                for (i, next) in [self.late.peek(), self.overflow.peek()].into_iter().enumerate() {
                    if let Some(&Reverse(k)) = next {
                        if best.is_none_or(|b| k < b) {
                            best = Some(k);
                            from = i + 1;
                        }
                    }
                }
                return match (from, now) {
                    (0, Some((k, at))) => {
                        self.now.swap_remove(at);
                        Some(k)
                    }
                    (1, _) => self.late.pop().map(|Reverse(k)| k),
                    _ => self.overflow.pop().map(|Reverse(k)| k),
                };
            }
            // `now` and `late` are empty.
            if self.in_ring == 0 {
                return None;
            }
            self.next_bucket(&live);
        }
    }

    /// The least key of the current bucket and its index in `now`.
    #[inline]
    fn now_min(&self) -> Option<(u64, usize)> {
        if self.sorted {
            return self.now.last().map(|&k| (k, self.now.len() - 1));
        }
        let mut min = (*self.now.first()?, 0);
        for (i, &k) in self.now.iter().enumerate().skip(1) {
            if k < min.0 {
                min = (k, i);
            }
        }
        Some(min)
    }

    /// Makes the next non-empty bucket of the ring current (`now` and `late` are empty, the
    /// ring is not).
    fn next_bucket(&mut self, live: &impl Fn(u64) -> bool) {
        if !self.load_next_bucket(live) {
            // Unreachable while the ring holds only buckets cur + 1 .. cur + RING; should that
            // ever break, the exact heap takes every key (the order stays right, the pops end).
            for slot in &mut self.ring {
                self.overflow.extend(slot.drain(..).map(Reverse));
            }
            self.in_ring = 0;
        }
    }

    /// [`FrontQueue::next_bucket`]; false if the ring had no key in the buckets it should hold.
    fn load_next_bucket(&mut self, live: &impl Fn(u64) -> bool) -> bool {
        // Every ring key's bucket is in cur + 1 .. cur + RING: the first non-empty slot from
        // cur + 1 holds the least of them.
        for k in 1..RING as u64 {
            let b = self.cur.saturating_add(k);
            let slot = (b % RING as u64) as usize;
            if !self.ring[slot].is_empty() {
                // Swap buffers: `now` is empty, and keeps its capacity for the slot.
                std::mem::swap(&mut self.now, &mut self.ring[slot]);
                self.in_ring -= self.now.len();
                // Keep the live keys (without a branch per key: about half are dead).
                let mut kept = 0;
                for i in 0..self.now.len() {
                    let k = self.now[i];
                    self.now[kept] = k;
                    kept += usize::from(live(k));
                }
                self.now.truncate(kept);
                // A few keys: found by a scan per pop; more: sorted descending, popped from the back.
                self.sorted = kept > SCAN_MAX;
                if self.sorted {
                    self.now.sort_unstable_by(|a, b| b.cmp(a));
                }
                self.cur = b;
                return true;
            }
        }
        false
    }
}

/// Most keys in the current bucket for which a pop scans for the least instead of sorting.
const SCAN_MAX: usize = 16;

/// The fast-marching integration: T per cell (∞ for blocked and unreachable cells), padded.
///
/// Works on a copy of the grid padded with one blocked cell on every side, so neighbours need
/// no bounds checks, and keeps T of accepted cells (∞ until accepted), so the smaller accepted
/// neighbour along an axis is a plain `min`. Queue keys pack (T bits, cell) into one `u64`:
/// T ≥ 0, so its bits order like the value, and padded indices order like grid indices, so ties
/// pop by cell index exactly as with `(T, cell)` pairs. Lazy deletion: a cell improved again is
/// pushed again, and a key that is not the cell's current T, or whose cell is already accepted,
/// is dead: skipped when popped (or dropped by the queue before).
fn march(grid: &NavGrid, goal_cell: usize) -> Padded {
    let n = grid.len();
    let h = grid.cell_size();
    let (cols, rows) = grid.dims();
    let (cols, rows) = (cols as usize, rows as usize);
    let w = cols + 2;
    let at = |x: usize, y: usize| (y + 1) * w + x + 1;
    // T of accepted cells (∞ until accepted) and the tentative T of open cells (free, not yet
    // accepted), side by side; a cell that is not open (the padding, blocked and accepted
    // cells) has a negative tentative T.
    let mut cells = vec![Node { t: f32::INFINITY, tentative: CLOSED }; w * (rows + 2)];
    for y in 0..rows {
        let p = at(0, y);
        for (x, c) in cells[p..p + cols].iter_mut().enumerate() {
            if !grid.is_blocked(y * cols + x) {
                c.tentative = f32::INFINITY;
            }
        }
    }
    let mut queue = FrontQueue::new(h);
    let key = |t: f32, p: usize| (u64::from(t.to_bits()) << 32) | p as u64;
    if goal_cell < n && !grid.is_blocked(goal_cell) {
        let g = at(goal_cell % cols, goal_cell / cols);
        cells[g].tentative = 0.0;
        queue.push(0.0, key(0.0, g));
    }
    // A key is dead when its cell is accepted or has a smaller T since: it stays dead.
    let dead = |k: u64, cells: &[Node]| {
        let c = cells[(k & 0xffff_ffff) as usize];
        c.tentative < 0.0 || f32::from_bits((k >> 32) as u32) > c.tentative
    };
    while let Some(k) = queue.pop(|k| !dead(k, &cells)) {
        if dead(k, &cells) {
            continue;
        }
        let p = (k & 0xffff_ffff) as usize;
        cells[p].t = cells[p].tentative;
        cells[p].tentative = CLOSED;
        for q in [p + 1, p - 1, p + w, p - w] {
            if cells[q].tentative < 0.0 {
                continue;
            }
            let a = cells[q - 1].t.min(cells[q + 1].t);
            let b = cells[q - w].t.min(cells[q + w].t);
            let t = eikonal_update(a, b, h);
            if t < cells[q].tentative {
                cells[q].tentative = t;
                queue.push(t, key(t, q));
            }
        }
    }
    Padded { cells, width: w }
}

/// A cell of the march: its accepted T and its tentative T ([`CLOSED`] when not open).
#[derive(Clone, Copy)]
struct Node {
    t: f32,
    tentative: f32,
}

/// Tentative T of a cell that is not open (padding, blocked, accepted).
const CLOSED: f32 = -1.0;

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
                angles.push((d != Vec2::ZERO).then(|| crate::sim::math::atan2(d.y, d.x)));
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

/// One axis of T's upwind gradient at a cell of time `c` whose neighbours on that axis have
/// times `lo` (the lower side) and `hi`: towards the smaller neighbour, if it is below the cell.
fn upwind_slope(c: f32, lo: f32, hi: f32) -> f32 {
    if lo <= hi && lo < c {
        c - lo
    } else if hi < c {
        hi - c
    } else {
        0.0
    }
}

/// First-order eikonal update from the smaller accepted neighbours `a` (x) and `b` (y), cell `h`.
pub fn eikonal_update(a: f32, b: f32, h: f32) -> f32 {
    if a.is_finite() && b.is_finite() && (a - b).abs() < h {
        (a + b + (2.0 * h * h - (a - b) * (a - b)).sqrt()) * 0.5
    } else {
        a.min(b) + h
    }
}

/// The implementation before the bucket queue and the padded direction pass, kept verbatim (but
/// for the helpers the rewrite left unchanged, which it shares) as the reference the fast one
/// must equal bit for bit (T and stored angle of every cell).
#[cfg(test)]
mod reference {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    use std::ops::{Deref, DerefMut};

    use glam::Vec2;

    // Unchanged by the rewrite, so shared: the constants, `decode`, the neighbour order, the
    // step of a direction, the eikonal update and the upwind slope. Only `encode` (its rounding)
    // differs.
    use super::{ANGLE_SCALE, FlowField, LOS_RADIUS_CELLS, NEIGHBOURS8, NO_DIR, decode, eikonal_update, step_of, upwind_slope};
    use crate::sim::math::dir;
    use crate::sim::nav::grid::NavGrid;

    fn encode(d: Vec2) -> u16 {
        if d == Vec2::ZERO {
            return NO_DIR;
        }
        let a = crate::sim::math::atan2(d.y, d.x);
        // Same as `rem_euclid(TAU)` for atan2's range [−π, π], without the float modulo.
        let a = if a < 0.0 { a + std::f32::consts::TAU } else { a };
        ((a * ANGLE_SCALE).round() as u32 % 65535) as u16
    }

    /// The old `FlowField::build`.
    pub fn build(grid: &NavGrid, goal_cell: usize, goal: Vec2) -> FlowField {
        let cost = march(grid, goal_cell);
        let (cols, rows) = grid.dims();
        let n = grid.len();
        let mut f = Old(FlowField { goal_cell, goal, grid_version: grid.version(), cols, rows, cost, dirs: vec![NO_DIR; n] });
        f.compute_dirs(grid);
        f.0
    }

    /// The field, with the old methods (their bodies unchanged: `self.cost` reads through).
    struct Old(FlowField);

    impl Deref for Old {
        type Target = FlowField;
        fn deref(&self) -> &FlowField {
            &self.0
        }
    }

    impl DerefMut for Old {
        fn deref_mut(&mut self) -> &mut FlowField {
            &mut self.0
        }
    }

    impl Old {
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
                    let slope = |lo: f32, hi: f32| upwind_slope(c, lo, hi);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::Rng;
    use crate::sim::geometry::{Bounds, Obstacle, Wall};
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

    /// Where the fast build differs from the reference build (T bits, stored angle, or the rest).
    fn differs_from_reference(g: &NavGrid, goal_cell: usize, goal: Vec2) -> Option<String> {
        let new = FlowField::build(g, goal_cell, goal);
        let old = reference::build(g, goal_cell, goal);
        let head = |f: &FlowField| (f.goal_cell, f.goal, f.grid_version, f.cols, f.rows, f.cost.len(), f.dirs.len());
        if head(&new) != head(&old) {
            return Some(format!("{:?} vs {:?}", head(&new), head(&old)));
        }
        let i = (0..old.cost.len()).find(|&i| new.cost[i].to_bits() != old.cost[i].to_bits() || new.dirs[i] != old.dirs[i])?;
        Some(format!(
            "grid {:?} cell {}, goal cell {goal_cell}: cell {:?} T {:?} vs {:?}, dir {} vs {}",
            g.dims(),
            g.cell_size(),
            g.xy(i),
            new.cost[i],
            old.cost[i],
            new.dirs[i],
            old.dirs[i]
        ))
    }

    /// A `cols` × `rows` grid of cells of `cell` from `origin`, with about `percent` % of the
    /// cells blocked at random (`seed`), in clumps when `clumped`.
    fn random_grid(cols: u32, rows: u32, cell: f32, origin: Vec2, seed: u64, percent: u32, clumped: bool) -> NavGrid {
        let size = Vec2::new(cols as f32, rows as f32) * cell;
        let mut g = NavGrid::empty(Bounds { min: origin, max: origin + size }, cell, 0.0);
        let mut rng = Rng::new(seed);
        let n = g.len();
        for i in 0..n {
            if (rng.next_u64() % 100) < u64::from(percent) {
                g.set_blocked(i, true);
                if clumped {
                    let (x, y) = g.xy(i);
                    for (dx, dy) in [(1, 0), (0, 1), (1, 1)] {
                        if let Some(j) = g.offset(x, y, dx, dy) {
                            g.set_blocked(j, true);
                        }
                    }
                }
            }
        }
        g
    }

    /// A `cols` × `rows` grid of cells of `cell` rasterized from random circles and walls.
    fn built_grid(cols: u32, rows: u32, cell: f32, seed: u64, circles: u32, walls: u32) -> NavGrid {
        let max = Vec2::new(cols as f32, rows as f32) * cell;
        let bounds = Bounds { min: Vec2::ZERO, max };
        let mut rng = Rng::new(seed);
        let point = |rng: &mut Rng| Vec2::new(rng.range(0.0, max.x), rng.range(0.0, max.y));
        let obstacles: Vec<Obstacle> =
            (0..circles).map(|id| Obstacle { id, center: point(&mut rng), radius: rng.range(0.5, 8.0) * cell }).collect();
        let walls: Vec<Wall> = (0..walls)
            .map(|id| {
                let a = point(&mut rng);
                let b = a + Vec2::new(rng.range(-40.0, 40.0), rng.range(-40.0, 40.0)) * cell;
                Wall { id, a, b, normal: dir((b - a).perp()) }
            })
            .collect();
        NavGrid::build(bounds, cell, 0.75, &obstacles, &walls)
    }

    #[test]
    fn round_half_away_is_round_on_the_angle_range() {
        let round = |x: f32| x.round() as u32;
        let around = |x: f32| [f32::from_bits(x.to_bits() - 1), x, f32::from_bits(x.to_bits() + 1)];
        assert_eq!(round_half_away(-0.0), 0);
        assert_eq!(round_half_away(0.0), 0);
        for k in 0..=65536u32 {
            // Every half and whole, and the floats either side of them.
            for x in around(k as f32 + 0.5).into_iter().chain(if k > 0 { around(k as f32) } else { [0.0; 3] }) {
                assert_eq!(round_half_away(x), round(x), "{x}");
            }
        }
        let mut rng = Rng::new(3);
        for _ in 0..1_000_000 {
            let x = rng.range(0.0, 65536.0);
            assert_eq!(round_half_away(x), round(x), "{x}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// The queue pops its least key whatever T does (keys in the current bucket or below it,
        /// far ahead of the ring), dropping only dead keys: every held key below a popped one is
        /// dead, and so is every key left when it runs empty.
        #[test]
        fn front_queue_pops_the_least_live_key(
            ops in proptest::collection::vec((0u8..4, -3.0f32..40.0), 1..400),
            h in prop_oneof![Just(1.0f32), Just(2.0), 0.01f32..10.0],
        ) {
            // A key is dead when its counter is a multiple of 5 (it stays dead).
            let live = |k: u64| (k & 0xffff_ffff) % 5 != 0;
            let mut queue = FrontQueue::new(h);
            let mut held = std::collections::BTreeSet::new();
            let mut last = 0.0f32;
            let check = |k: u64, held: &mut std::collections::BTreeSet<u64>| -> Result<(), TestCaseError> {
                prop_assert!(held.remove(&k), "{} not held", k);
                let below: Vec<u64> = held.range(..k).copied().collect();
                prop_assert!(below.iter().all(|&b| !live(b)), "{:?} held below {}", below, k);
                for b in below {
                    held.remove(&b);
                }
                Ok(())
            };
            for (i, &(op, off)) in ops.iter().enumerate() {
                if op == 0 {
                    if let Some(k) = queue.pop(live) {
                        check(k, &mut held)?;
                        last = f32::from_bits((k >> 32) as u32);
                    }
                } else {
                    let t = (last + off * h).max(0.0);
                    let k = (u64::from(t.to_bits()) << 32) | i as u64;
                    queue.push(t, k);
                    held.insert(k);
                }
            }
            while let Some(k) = queue.pop(live) {
                check(k, &mut held)?;
            }
            prop_assert!(held.iter().all(|&k| !live(k)), "{:?} left", held);
        }
    }

    #[test]
    fn a_stored_angle_decoding_into_a_blocked_cell_is_replaced_as_in_the_reference() {
        // The goal in the cell next to (4, 4), seen at an angle just off a step edge (|cos| or
        // |sin| = ½): the stored angle can decode into the neighbouring step. With that cell
        // blocked (it is off the line of sight), the cell must fall back to its best neighbour.
        let mut rechecked = 0;
        for edge in [30.0f32, 60.0, 120.0, 150.0, 210.0, 240.0, 300.0, 330.0] {
            for j in -60..=60 {
                let theta = edge.to_radians() + j as f32 * 2e-6;
                for r in [0.7f32, 0.9] {
                    let mut g = open(9);
                    let (c, centre) = (g.index(4, 4), g.center_of(4, 4));
                    let goal = centre + Vec2::new(theta.cos(), theta.sin()) * r;
                    let d = dir(goal - centre);
                    let stored = step_of(decode(encode(d)));
                    if stored == step_of(d) {
                        continue;
                    }
                    let goal_cell = g.cell_of(goal);
                    let Some(b) = g.offset(4, 4, stored.0, stored.1).filter(|&b| b != goal_cell) else { continue };
                    g.set_blocked(b, true);
                    assert_eq!(differs_from_reference(&g, goal_cell, goal), None, "edge {edge} j {j} r {r}");
                    if reference::build(&g, goal_cell, goal).dirs[c] != encode(d) {
                        rechecked += 1;
                    }
                }
            }
        }
        assert!(rechecked > 0, "no case reached the re-check");
    }

    #[test]
    fn large_grids_equal_the_reference_bit_for_bit() {
        let cases = [
            built_grid(300, 200, 1.0, 1, 60, 25),
            built_grid(200, 300, 2.0, 2, 80, 10),
            built_grid(257, 131, 0.7, 3, 40, 40),
            built_grid(500, 500, 2.0, 4, 100, 0),
            random_grid(300, 200, 1.0, Vec2::new(-13.25, 7.5), 5, 30, true),
        ];
        for (k, mut g) in cases.into_iter().enumerate() {
            let (cols, rows) = g.dims();
            let n = g.len();
            let mut goals: Vec<usize> = vec![0, n - 1, g.index(cols / 2, rows / 2), g.index(cols - 1, rows / 3), g.index(cols / 4, 0)];
            // A blocked goal, if any cell is blocked.
            goals.extend((0..n).find(|&i| g.is_blocked(i)));
            let mut rng = Rng::new(k as u64);
            goals.extend((0..4).map(|_| (rng.next_u64() % n as u64) as usize));
            for labelled in [false, true] {
                if labelled {
                    // The clearance map lets `line_free` skip samples: the same answers.
                    g.update_components();
                }
                for &goal in &goals {
                    let p = g.center(goal) + Vec2::new(0.3, -0.2) * g.cell_size();
                    if let Some(e) = differs_from_reference(&g, goal, p) {
                        panic!("case {k}, labelled {labelled}: {e}");
                    }
                }
            }
        }
    }

    #[test]
    fn small_special_grids_equal_the_reference_bit_for_bit() {
        // One row, one column, one cell, all blocked, goal out of range, goal on each border.
        for (cols, rows) in [(1, 1), (1, 9), (9, 1), (2, 2), (5, 3)] {
            for percent in [0, 30, 100] {
                let g = random_grid(cols, rows, 1.5, Vec2::new(2.0, -3.0), u64::from(cols * 31 + rows), percent, false);
                for goal in 0..g.len() + 2 {
                    let p = if goal < g.len() { g.center(goal) } else { Vec2::ZERO };
                    assert_eq!(differs_from_reference(&g, goal, p), None);
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn random_grids_equal_the_reference_bit_for_bit(
            cols in 1u32..48,
            rows in 1u32..48,
            cell in prop_oneof![Just(1.0f32), Just(2.0), Just(0.5), Just(0.3), 0.05f32..5.0],
            origin in (-50.0f32..50.0, -50.0f32..50.0),
            seed in any::<u64>(),
            percent in 0u32..70,
            clumped in any::<bool>(),
            goal in any::<proptest::sample::Index>(),
            goal_off in (0.0f32..1.0, 0.0f32..1.0),
            labelled in any::<bool>(),
        ) {
            let mut g = random_grid(cols, rows, cell, Vec2::new(origin.0, origin.1), seed, percent, clumped);
            if labelled {
                g.update_components();
            }
            // Now and then a goal cell off the grid (every cell unreachable).
            let goal = goal.index(g.len() + 1);
            let p = if goal < g.len() {
                let (x, y) = g.xy(goal);
                g.origin() + (Vec2::new(x as f32, y as f32) + Vec2::new(goal_off.0, goal_off.1)) * g.cell_size()
            } else {
                g.origin()
            };
            let diff = differs_from_reference(&g, goal, p);
            prop_assert!(diff.is_none(), "{:?}", diff);
        }
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

