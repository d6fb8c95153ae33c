//! The agent grid: every agent re-bucketed each tick with a counting sort, packed in cell order,
//! and the neighbour queries over it (boxes, radii, k-nearest rings), each visiting agents in
//! ascending id order within a cell.

use std::sync::atomic::{AtomicU32, Ordering};

use glam::Vec2;
use rayon::prelude::*;

use super::shape::GridShape;
use crate::sim::geometry::Bounds;

/// An agent grid has at most this many cells per agent (at least [`MIN_CELLS`]): a sparse world
/// with a dense spot (a crowd converging in a large world) keeps cells small enough that a
/// query in the crowd reads few agents, while clearing the cell counts each tick stays a small
/// part of the tick.
pub const CELLS_PER_AGENT: usize = 8;
/// Fewest cells an agent grid may be capped at.
pub const MIN_CELLS: usize = 4096;

/// Agent count from which [`AgentGrid::rebuild`] splits its work across the rayon pool (at
/// 10,000 agents on 2 threads the split makes circle's and swarm-10k's ticks ~7 % faster; at
/// 1,000 a single band is faster than moving the grid between cores).
const PARALLEL_REBUILD_MIN: usize = 8_192;

/// What a neighbour query sees of another agent: a packed copy, stored in cell order so that a
/// query reads contiguous memory. Only what every neighbour walk reads (24 bytes); what the
/// crowd behaviours read besides is in a [`Crowd`] record of the same rank
/// ([`AgentGrid::crowd`]), so that the walks of wander swarms read no more memory than they use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Neighbor {
    /// Agent id.
    pub id: u32,
    /// Bounding radius.
    pub radius: f32,
    /// Position.
    pub position: Vec2,
    /// Velocity.
    pub velocity: Vec2,
}

/// What reciprocal avoidance, MoveTo and the contact rule read of a neighbour besides its
/// [`Neighbor`] record: stored apart, by the same rank (8 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Crowd {
    /// Top speed (the integrator's clamp; lets a neighbour predict where this agent goes).
    pub max_speed: f32,
    /// Ticks the agent's MoveTo has made no progress (saturating; 0 without an active order):
    /// of two agents on their way, the one stuck longer takes the smaller share of avoiding.
    pub stall: u16,
    /// True when the agent avoids others reciprocally this tick (then each of a pair takes half
    /// of the avoidance; see `behaviors::reciprocal_avoidance`).
    pub reciprocal: bool,
    /// Whether and why the agent makes way for agents on their way (it then takes the larger
    /// share of avoiding them).
    pub yielding: Yielding,
}

/// Whether an agent makes way for agents on their way ([`crate::sim::agent::Agent::gives_way`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Yielding {
    /// It is on its way, or steered by its behaviours.
    #[default]
    No,
    /// It holds its place after a MoveTo ([`crate::sim::agent::Agent::held_order`]).
    Holds,
    /// It waits for its turn at a narrow passage ([`crate::sim::nav::portals`]).
    Waits,
}

impl Yielding {
    /// True unless [`Yielding::No`].
    pub fn any(self) -> bool {
        self != Yielding::No
    }
}

/// Agents bucketed by the cell of their centre, with a packed [`Neighbor`] copy of each agent in
/// cell order. Buffers are reused from tick to tick.
#[derive(Debug)]
pub struct AgentGrid {
    shape: GridShape,
    /// `starts[c]..starts[c+1]` indexes `order`/`packed` for cell `c`.
    starts: Vec<u32>,
    /// Agent indices in cell order (ascending id within a cell).
    order: Vec<u32>,
    /// `rank[i]` = position of agent `i` in `order` (atomic so that the bands of a parallel
    /// rebuild can each write their agents' ranks; relaxed stores, read after the join).
    rank: Vec<AtomicU32>,
    /// Packed neighbour records, parallel to `order`.
    packed: Vec<Neighbor>,
    /// Crowd records, parallel to `order`.
    crowd: Vec<Crowd>,
    /// Record of each agent in index order (the rebuild's staging buffer).
    staged: Vec<Neighbor>,
    /// Cell of each agent in index order (staging, like `staged`).
    cells: Vec<u32>,
    /// Crowd record of each agent in index order (staging, like `staged`).
    staged_crowd: Vec<Crowd>,
    /// See [`AgentGrid::breaks`].
    breaks: usize,
}

impl Clone for AgentGrid {
    /// A copy with the same contents (the ranks' values copied out of their atomics).
    fn clone(&self) -> Self {
        AgentGrid {
            shape: self.shape,
            starts: self.starts.clone(),
            order: self.order.clone(),
            rank: self.rank.iter().map(|r| AtomicU32::new(r.load(Ordering::Relaxed))).collect(),
            packed: self.packed.clone(),
            crowd: self.crowd.clone(),
            staged: self.staged.clone(),
            cells: self.cells.clone(),
            staged_crowd: self.staged_crowd.clone(),
            breaks: self.breaks,
        }
    }
}

impl AgentGrid {
    /// An empty grid.
    pub fn empty(bounds: Bounds) -> Self {
        AgentGrid {
            shape: GridShape::new(bounds, 1.0, 1),
            starts: vec![0, 0],
            order: Vec::new(),
            rank: Vec::new(),
            packed: Vec::new(),
            crowd: Vec::new(),
            staged: Vec::new(),
            cells: Vec::new(),
            staged_crowd: Vec::new(),
            breaks: 0,
        }
    }

    /// Re-buckets `n` agents given by `get(i) -> (Neighbor, Crowd)` on cells of side `cell` over `bounds`
    /// (a counting sort, O(n + cells)), reusing the buffers, in parallel on the current rayon
    /// pool. The agents are read once into compact staged records, which pass also takes the
    /// extent of their positions and each one's cell in the last rebuild's shape (the shape is
    /// the same from tick to tick while the crowd stays within its lattice, and the cells are
    /// computed again when it is not); then the cells are cut into one contiguous band per
    /// thread, and each band counts and scatters the records that fall in it (reading the
    /// 4-byte cells of all and the records of its own) and sorts each of its cells by id, so
    /// the result depends neither on the thread count nor on the order the agents are stored in.
    pub fn rebuild(&mut self, bounds: Bounds, cell: f32, n: usize, get: impl Fn(usize) -> (Neighbor, Crowd) + Sync) {
        self.rebuild_sized(bounds, |_| cell, n, |i| {
            let (nb, cw) = get(i);
            (nb, cw, 0.0)
        });
    }

    /// [`AgentGrid::rebuild`] with a cell side that follows from the agents: `get(i)` also
    /// gives a reach of agent `i`, and the cells' side is `cell(r)` of the largest reach `r`
    /// (0 with no agents), taken in the same pass that reads the agents.
    pub fn rebuild_sized(&mut self, bounds: Bounds, cell: impl FnOnce(f32) -> f32, n: usize, get: impl Fn(usize) -> (Neighbor, Crowd, f32) + Sync) {
        let max_cells = (n * CELLS_PER_AGENT).max(MIN_CELLS);
        let last = self.shape;
        let chunk = PARALLEL_REBUILD_MIN / 2;
        let (extent, reach) = self.stage(n, chunk, get);
        let cell = cell(reach);
        let shape = GridShape::new(occupied(extent, bounds, cell), cell, max_cells);
        self.shape = shape;
        let cells = shape.len();
        if shape != last {
            self.cells.par_iter_mut().zip(self.staged.par_iter()).with_min_len(chunk).for_each(|(c, nb)| {
                let (cx, cy) = shape.coords(nb.position);
                *c = shape.index(cx, cy) as u32;
            });
        }
        // Below `PARALLEL_REBUILD_MIN` agents the grid fits in one core's cache and a single band
        // is faster than moving it between cores.
        let bands = if n < PARALLEL_REBUILD_MIN { 1 } else { rayon::current_num_threads().clamp(1, 64) };
        let band = cells.div_ceil(bands);
        let totals = self.count(cells, band, bands);
        self.breaks = self.scatter(n, cells, band, &totals);
        self.starts[cells] = n as u32;
    }

    /// Reads the `n` agents once into the staging buffers (every slot is written, so they are
    /// only resized), each with its cell in the last rebuild's shape, in chunks of `chunk` in
    /// parallel. Answers the extent of their positions and their largest reach (0 with none).
    fn stage(&mut self, n: usize, chunk: usize, get: impl Fn(usize) -> (Neighbor, Crowd, f32) + Sync) -> ((Vec2, Vec2), f32) {
        self.staged.resize(n, EMPTY_NEIGHBOR);
        self.staged_crowd.resize(n, Crowd::default());
        self.cells.resize(n, 0);
        let last = self.shape;
        self
            .staged
            .par_chunks_mut(chunk)
            .zip(self.staged_crowd.par_chunks_mut(chunk))
            .zip(self.cells.par_chunks_mut(chunk))
            .enumerate()
            .map(|(k, ((staged, crowd), cells))| {
                let (mut ext, mut reach) = (NO_EXTENT, 0.0f32);
                for (j, ((s, w), c)) in staged.iter_mut().zip(crowd.iter_mut()).zip(cells.iter_mut()).enumerate() {
                    let (nb, cw, r) = get(k * chunk + j);
                    ext = extend(ext, nb.position);
                    reach = reach.max(r);
                    let (cx, cy) = last.coords(nb.position);
                    (*s, *w, *c) = (nb, cw, last.index(cx, cy) as u32);
                }
                (ext, reach)
            })
            // `max` is order-independent: the reach does not depend on the split.
            .reduce(|| (NO_EXTENT, 0.0), |((a, b), r), ((c, d), q)| ((a.min(c), b.max(d)), r.max(q)))
    }

    /// Pass 1, per band of `band` cells: counts per cell, turned into starts relative to the
    /// band. Answers each band's agent count.
    fn count(&mut self, cells: usize, band: usize, bands: usize) -> Vec<u32> {
        let staged_cells = &self.cells;
        self.starts.clear();
        self.starts.resize(cells + 1, 0);
        let mut totals: Vec<u32> = Vec::with_capacity(bands);
        self.starts[..cells]
            .par_chunks_mut(band)
            .enumerate()
            .map(|(b, starts)| {
                let lo = b * band;
                for &c in staged_cells {
                    if let Some(k) = (c as usize).checked_sub(lo) {
                        if let Some(s) = starts.get_mut(k) {
                            *s += 1;
                        }
                    }
                }
                let mut sum = 0u32;
                for s in starts.iter_mut() {
                    let count = *s;
                    *s = sum;
                    sum += count;
                }
                sum
            })
            .collect_into_vec(&mut totals);
        totals
    }

    /// Pass 2, per band: scatters the staged agents into the band's own slices of `order`,
    /// `packed` and `crowd`, sorts each cell by id and makes the starts global. Answers how
    /// many agents do not follow their storage predecessor (see [`AgentGrid::breaks`]).
    fn scatter(&mut self, n: usize, cells: usize, band: usize, totals: &[u32]) -> usize {
        let (staged, staged_crowd, staged_cells) = (&self.staged, &self.staged_crowd, &self.cells);
        // Every slot of these is written below (the scatter is a permutation), so they are only
        // resized, not cleared.
        self.order.resize(n, 0);
        self.packed.resize(n, EMPTY_NEIGHBOR);
        self.crowd.resize(n, Crowd::default());
        self.rank.resize_with(n, || AtomicU32::new(0));
        let mut jobs = Vec::with_capacity(totals.len());
        let (mut order, mut packed, mut crowd) = (&mut self.order[..], &mut self.packed[..], &mut self.crowd[..]);
        let mut offset = 0u32;
        for (b, starts) in self.starts[..cells].chunks_mut(band).enumerate() {
            let total = totals.get(b).copied().unwrap_or(0);
            let take = (total as usize).min(order.len()).min(packed.len()).min(crowd.len());
            let (o, rest_o) = std::mem::take(&mut order).split_at_mut(take);
            let (p, rest_p) = std::mem::take(&mut packed).split_at_mut(take);
            let (w, rest_w) = std::mem::take(&mut crowd).split_at_mut(take);
            (order, packed, crowd) = (rest_o, rest_p, rest_w);
            jobs.push((b * band, offset, starts, o, p, w));
            offset += total;
        }
        let rank = &self.rank;
        jobs
            .into_par_iter()
            .map(|(lo, offset, starts, order, packed, crowd)| {
                for (i, &c) in staged_cells.iter().enumerate() {
                    let Some(k) = (c as usize).checked_sub(lo) else { continue };
                    let Some(s) = starts.get_mut(k) else { continue };
                    let at = *s as usize;
                    *s += 1;
                    if let (Some(o), Some(p), Some(w), Some(&nb), Some(&cw)) = (order.get_mut(at), packed.get_mut(at), crowd.get_mut(at), staged.get(i), staged_crowd.get(i)) {
                        *o = i as u32;
                        *p = nb;
                        *w = cw;
                    }
                }
                // Each start was advanced to the next cell's start, which is where this cell
                // ends: in one pass, sort every cell by id and set its start back (to the
                // previous cell's end), made global.
                let mut from = 0usize;
                let mut scratch = Vec::new();
                for s in starts.iter_mut() {
                    let to = *s as usize;
                    *s = from as u32 + offset;
                    // Most cells of a sparse crowd hold none or one agent: nothing to order.
                    if to > from + 1 {
                        if let (Some(o), Some(p), Some(w)) = (order.get_mut(from..to), packed.get_mut(from..to), crowd.get_mut(from..to)) {
                            sort_cell_by_id(o, p, w, &mut scratch);
                        }
                    }
                    from = to;
                }
                let mut breaks = 0;
                for (k, &i) in order.iter().enumerate() {
                    if let Some(r) = rank.get(i as usize) {
                        r.store(offset + k as u32, Ordering::Relaxed);
                    }
                    if k > 0 && order[k - 1].wrapping_add(1) != i {
                        breaks += 1;
                    }
                }
                breaks
            })
            .sum()
    }

    /// Shape of the grid.
    pub fn shape(&self) -> &GridShape {
        &self.shape
    }

    /// Agent indices in cell order (ascending id within a cell).
    pub fn order(&self) -> &[u32] {
        &self.order
    }

    /// Bytes of the grid's buffers.
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.starts.capacity() * size_of::<u32>()
            + self.order.capacity() * size_of::<u32>()
            + self.rank.capacity() * size_of::<AtomicU32>()
            + self.packed.capacity() * size_of::<Neighbor>()
            + self.crowd.capacity() * size_of::<Crowd>()
            + self.staged.capacity() * size_of::<Neighbor>()
            + self.cells.capacity() * size_of::<u32>()
            + self.staged_crowd.capacity() * size_of::<Crowd>()
    }

    /// How many times [`AgentGrid::order`] does not step to the next index (within each
    /// band of the last rebuild): 0 when the agents are stored in cell order.
    pub fn breaks(&self) -> usize {
        self.breaks
    }

    /// Records that the agents were just permuted into [`AgentGrid::order`] (see
    /// [`super::roster::Roster::permute`]): the order becomes the identity. The packed records
    /// and cells are unchanged.
    pub fn agents_permuted_into_order(&mut self) {
        for (k, (o, r)) in self.order.iter_mut().zip(&self.rank).enumerate() {
            *o = k as u32;
            r.store(k as u32, Ordering::Relaxed);
        }
        self.breaks = 0;
    }

    /// Position of agent `i` in [`AgentGrid::order`].
    pub fn rank(&self, i: usize) -> usize {
        self.rank.get(i).map_or(0, |r| r.load(Ordering::Relaxed) as usize)
    }

    /// Every packed agent, in cell order (the brute-force baseline scans this).
    pub fn all(&self) -> &[Neighbor] {
        &self.packed
    }

    /// The crowd record of the agent of rank `rank` (its index in [`AgentGrid::all`]); the
    /// default record past the end.
    #[inline]
    pub fn crowd(&self, rank: usize) -> Crowd {
        self.crowd.get(rank).copied().unwrap_or_default()
    }

    /// Like [`AgentGrid::for_each_in_box`], with each agent's rank (its index in [`AgentGrid::order`]).
    pub fn for_each_in_box_ranked(&self, p: Vec2, r: f32, mut f: impl FnMut(usize, &Neighbor)) {
        let (x0, y0) = self.shape.coords(p - Vec2::splat(r));
        let (x1, y1) = self.shape.coords(p + Vec2::splat(r));
        for cy in y0..=y1 {
            let row = self.shape.index(0, cy);
            let (s, e) = (self.starts.get(row + x0 as usize), self.starts.get(row + x1 as usize + 1));
            if let (Some(&s), Some(&e)) = (s, e) {
                // Cells x0..=x1 of one row are contiguous in `packed`.
                for (k, n) in self.packed.get(s as usize..e as usize).unwrap_or(&[]).iter().enumerate() {
                    f(s as usize + k, n);
                }
            }
        }
    }

    /// Calls `f` with the agents of the cells overlapping the square of half-side `r` round `p`,
    /// like [`AgentGrid::for_each_in_box_ranked`], but ring by ring of cells outwards from `p`'s
    /// cell, and stops before a ring whose agents all stand further than `f`'s last answer: `f`
    /// returns the squared distance beyond which it wants no more agents (a k-nearest search
    /// returns its k-th nearest once it has k). Every agent within that distance of `p` and
    /// within the square is still visited, so a search that keeps the k nearest by (distance,
    /// id) finds the same ones as a scan of the whole square; in a crowd it reads the few
    /// cells round `p` instead of the whole square.
    pub fn for_each_in_rings_ranked(&self, p: Vec2, r: f32, mut f: impl FnMut(usize, &Neighbor) -> f32) {
        let s = &self.shape;
        let c = (p - s.origin) * s.inv_cell;
        let inside = c.x >= 0.0 && c.y >= 0.0 && c.x < s.cols as f32 && c.y < s.rows as f32;
        if !inside {
            // Outside the grid (clamped onto its edge cells), rings tell no distance.
            self.for_each_in_box_ranked(p, r, |k, n| {
                f(k, n);
            });
            return;
        }
        let (x0, y0) = s.coords(p - Vec2::splat(r));
        let (x1, y1) = s.coords(p + Vec2::splat(r));
        let (cx, cy) = s.coords(p);
        let mut want = f32::INFINITY;
        let mut run = |row: u32, from: u32, to: u32, want: &mut f32| {
            let row = s.index(0, row);
            if let (Some(&a), Some(&b)) = (self.starts.get(row + from as usize), self.starts.get(row + to as usize + 1)) {
                for (k, n) in self.packed.get(a as usize..b as usize).unwrap_or(&[]).iter().enumerate() {
                    *want = f(a as usize + k, n);
                }
            }
        };
        let rings = (cx - x0).max(x1 - cx).max(cy - y0).max(y1 - cy);
        for m in 0..=rings {
            if m >= 2 {
                // p lies in its cell, so an agent of ring m (m ≥ 1) is at least m − 1 cells
                // away along x or y (agents clamped onto an edge cell are further still); a
                // little less, for rounding.
                let gap = (m - 1) as f32 * s.cell * 0.999;
                if gap * gap > want {
                    return;
                }
            }
            let (lo, hi) = (cx.saturating_sub(m).max(x0), (cx + m).min(x1));
            if m <= cy && cy - m >= y0 {
                run(cy - m, lo, hi, &mut want);
            }
            if m > 0 && cy + m <= y1 {
                run(cy + m, lo, hi, &mut want);
            }
            if m > 0 {
                for row in cy.saturating_sub(m - 1).max(y0)..=(cy + m - 1).min(y1) {
                    if m <= cx && cx - m >= x0 {
                        run(row, cx - m, cx - m, &mut want);
                    }
                    if cx + m <= x1 {
                        run(row, cx + m, cx + m, &mut want);
                    }
                }
            }
        }
    }

    /// Calls `f` with every agent bucketed in a cell overlapping the square of half-side `r`
    /// round `p` (a superset of those within `r`), cell by cell, in ascending id per cell.
    #[inline]
    pub fn for_each_in_box(&self, p: Vec2, r: f32, mut f: impl FnMut(&Neighbor)) {
        self.for_each_in_box_ranked(p, r, |_, n| f(n));
    }
}

/// Cells of the lattice that [`occupied`] snaps the agents' extent to, per side.
const OCCUPIED_SNAP_CELLS: f32 = 16.0;

/// A staging slot before it is written.
const EMPTY_NEIGHBOR: Neighbor = Neighbor { id: 0, radius: 0.0, position: Vec2::ZERO, velocity: Vec2::ZERO };

/// The extent of no point (the identity of [`extend`]).
const NO_EXTENT: (Vec2, Vec2) = (Vec2::splat(f32::INFINITY), Vec2::splat(f32::NEG_INFINITY));

/// `ext` grown to take in `p` when `p` is finite.
#[inline]
fn extend(ext: (Vec2, Vec2), p: Vec2) -> (Vec2, Vec2) {
    if p.is_finite() { (ext.0.min(p), ext.1.max(p)) } else { ext }
}

/// The part of `bounds` that the extent `(lo, hi)` of the agents' finite positions occupies
/// ([`NO_EXTENT`]: none), snapped outwards to a lattice of
/// [`OCCUPIED_SNAP_CELLS`] cells of side `cell`, so that the grid's shape stays the same from
/// tick to tick while the crowd moves within it. The agent grid covers this, not the whole
/// world: a crowd gathered in a corner of a large world (a jam) gets cells as small as asked,
/// where a grid over the world would be coarsened to its cell cap. Points outside are clamped
/// onto the edge cells, as always. A function of the positions alone (min and max do not
/// depend on the order in which the extent was taken), so the same on any thread count.
fn occupied((lo, hi): (Vec2, Vec2), bounds: Bounds, cell: f32) -> Bounds {
    let q = if cell.is_finite() && cell > 1e-3 { cell * OCCUPIED_SNAP_CELLS } else { return bounds };
    let lo = ((lo - bounds.min) / q).floor() * q + bounds.min;
    let hi = ((hi - bounds.min) / q).floor() * q + bounds.min + Vec2::splat(q);
    let out = Bounds { min: lo.max(bounds.min), max: hi.min(bounds.max) };
    if out.min.is_finite() && out.max.is_finite() && out.min.cmplt(out.max).all() { out } else { bounds }
}

/// Sorts one cell's agent indices and packed records by id (ids are unique). A cell is almost
/// always sorted already (the agents are stored in cell order, ids ascending within a cell, and
/// few change cells per tick), so it is checked first; `scratch` is reused across cells.
fn sort_cell_by_id(order: &mut [u32], packed: &mut [Neighbor], crowd: &mut [Crowd], scratch: &mut Vec<(Neighbor, u32, Crowd)>) {
    if packed.windows(2).all(|w| w[0].id < w[1].id) {
        return;
    }
    scratch.clear();
    scratch.extend(packed.iter().zip(order.iter()).zip(crowd.iter()).map(|((&nb, &i), &c)| (nb, i, c)));
    scratch.sort_unstable_by_key(|(nb, _, _)| nb.id);
    for (((p, o), w), &(nb, i, c)) in packed.iter_mut().zip(order.iter_mut()).zip(crowd.iter_mut()).zip(scratch.iter()) {
        *p = nb;
        *o = i;
        *w = c;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::spatial::test_bounds as bounds;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn agent_grid_query_is_superset_of_brute_force(
            pts in proptest::collection::vec((0.0f32..100.0, 0.0f32..100.0), 0..200),
            q in (0.0f32..100.0, 0.0f32..100.0),
            r in 0.0f32..30.0,
            cell in 0.5f32..20.0,
        ) {
            let pos: Vec<Vec2> = pts.iter().map(|&(x, y)| Vec2::new(x, y)).collect();
            let mut g = AgentGrid::empty(bounds());
            g.rebuild(bounds(), cell, pos.len(), |i| (Neighbor { id: i as u32, radius: 0.5, position: pos[i], velocity: Vec2::ZERO }, Crowd::default()));
            let q = Vec2::new(q.0, q.1);
            let mut seen = Vec::new();
            g.for_each_in_box(q, r, |n| seen.push(n.id));
            for (k, &i) in g.order().iter().enumerate() {
                prop_assert_eq!(g.rank(i as usize), k);
            }
            let mut sorted = seen.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), seen.len(), "an agent was reported twice");
            for (i, p) in pos.iter().enumerate() {
                if p.distance(q) <= r {
                    prop_assert!(seen.contains(&(i as u32)), "missed agent {} at {:?}", i, p);
                }
            }
        }

        /// A k-nearest search over the rings, stopping at its k-th nearest, finds exactly the
        /// k nearest by (distance, id) within r that a brute-force scan finds, with their ranks;
        /// query points outside the grid's extent included.
        #[test]
        fn ring_search_finds_the_same_k_nearest_as_brute_force(
            pts in proptest::collection::vec((20.0f32..80.0, 20.0f32..80.0), 1..300),
            q in (0.0f32..100.0, 0.0f32..100.0),
            r in 0.0f32..40.0,
            cell in 0.5f32..20.0,
            k in 1usize..12,
        ) {
            let pos: Vec<Vec2> = pts.iter().map(|&(x, y)| Vec2::new(x, y)).collect();
            let mut g = AgentGrid::empty(bounds());
            g.rebuild(bounds(), cell, pos.len(), |i| (Neighbor { id: i as u32, radius: 0.5, position: pos[i], velocity: Vec2::ZERO }, Crowd::default()));
            let q = Vec2::new(q.0, q.1);
            let mut want: Vec<(f32, u32, usize)> = g.all().iter().enumerate()
                .map(|(rank, n)| (n.position.distance_squared(q), n.id, rank))
                .filter(|x| x.0 <= r * r)
                .collect();
            want.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            want.truncate(k);
            let mut got: Vec<(f32, u32, usize)> = Vec::new();
            let mut visited = Vec::new();
            g.for_each_in_rings_ranked(q, r, |rank, n| {
                visited.push(n.id);
                let d2 = n.position.distance_squared(q);
                if d2 <= r * r {
                    got.push((d2, n.id, rank));
                    got.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                    got.truncate(k);
                }
                if got.len() == k { got[k - 1].0 } else { f32::INFINITY }
            });
            prop_assert_eq!(got, want);
            let n_visited = visited.len();
            visited.sort_unstable();
            visited.dedup();
            prop_assert_eq!(visited.len(), n_visited, "an agent was visited twice");
        }

    }

    /// Rebuilds `n` seeded random agents on a pool of `threads` and returns (order, ranks, starts).
    fn banded_rebuild(n: usize, threads: usize) -> (Vec<u32>, Vec<usize>, Vec<u32>) {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32 * 100.0
        };
        let pos: Vec<Vec2> = (0..n).map(|_| Vec2::new(next(), next())).collect();
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
        let mut g = AgentGrid::empty(bounds());
        pool.install(|| g.rebuild(bounds(), 0.5, n, |i| (Neighbor { id: i as u32, radius: 0.5, position: pos[i], velocity: Vec2::ZERO }, Crowd::default())));
        let ranks = (0..n).map(|i| g.rank(i)).collect();
        (g.order.clone(), ranks, g.starts.clone())
    }

    /// A grid rebuilt from the last tick's (its cells taken in the last shape, kept when the
    /// shape is unchanged and taken again when not) is the grid built from nothing.
    #[test]
    fn a_rebuild_over_the_last_grid_equals_a_fresh_one() {
        let world = Bounds { min: Vec2::ZERO, max: Vec2::splat(1000.0) };
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 24) as f32
        };
        let n = PARALLEL_REBUILD_MIN + 1_000;
        let crowd = |at: Vec2, spread: f32, next: &mut dyn FnMut() -> f32| -> Vec<Vec2> { (0..n).map(|_| at + Vec2::new(next(), next()) * spread).collect() };
        let build = |g: &mut AgentGrid, pos: &[Vec2]| {
            g.rebuild(world, 2.0, pos.len(), |i| (Neighbor { id: (pos.len() - i) as u32, radius: 0.5, position: pos[i], velocity: Vec2::ZERO }, Crowd { max_speed: i as f32, ..Crowd::default() }));
        };
        let fresh = |pos: &[Vec2]| {
            let mut g = AgentGrid::empty(world);
            build(&mut g, pos);
            g
        };
        let same = |a: &AgentGrid, b: &AgentGrid| {
            assert_eq!(a.shape, b.shape);
            assert_eq!(a.starts, b.starts);
            assert_eq!(a.order, b.order);
            assert_eq!(a.packed, b.packed);
            assert_eq!(a.crowd, b.crowd);
            assert_eq!((0..n).map(|i| a.rank(i)).collect::<Vec<_>>(), (0..n).map(|i| b.rank(i)).collect::<Vec<_>>());
        };
        let mut g = AgentGrid::empty(world);
        let first = crowd(Vec2::new(100.0, 100.0), 300.0, &mut next);
        build(&mut g, &first);
        same(&g, &fresh(&first));
        // Moved a little: the same shape, the cells of the first pass kept.
        let nudged: Vec<Vec2> = first.iter().map(|p| *p + Vec2::new(next() - 0.5, next() - 0.5)).collect();
        let shape = g.shape;
        build(&mut g, &nudged);
        assert_eq!(g.shape, shape, "the crowd stayed within its lattice");
        same(&g, &fresh(&nudged));
        // Gone elsewhere: a new shape, the cells taken again.
        let moved = crowd(Vec2::new(600.0, 500.0), 100.0, &mut next);
        build(&mut g, &moved);
        assert_ne!(g.shape, shape);
        same(&g, &fresh(&moved));
    }

    #[test]
    fn banded_rebuild_is_the_same_on_any_thread_count() {
        let n = PARALLEL_REBUILD_MIN + 7_919;
        let one = banded_rebuild(n, 1);
        let (order, ranks, starts) = &one;
        // A valid counting sort: ranks invert the order, and each cell lists ascending indices.
        for (k, &i) in order.iter().enumerate() {
            assert_eq!(ranks[i as usize], k);
        }
        assert_eq!(starts.last().copied(), Some(n as u32));
        for w in starts.windows(2) {
            let cell = &order[w[0] as usize..w[1] as usize];
            assert!(cell.windows(2).all(|p| p[0] < p[1]));
        }
        assert!(starts.windows(2).filter(|w| w[1] > w[0]).count() > 1_000, "points spread over many cells");
        assert_eq!(banded_rebuild(n, 2), one);
        assert_eq!(banded_rebuild(n, 3), one);
    }

    #[test]
    fn occupied_extent_is_snapped_to_the_lattice_and_clipped_to_the_world() {
        let nb = |x: f32, y: f32| (0, Neighbor { id: 0, radius: 0.5, position: Vec2::new(x, y), velocity: Vec2::ZERO });
        let occupied = |pts: &[(u32, Neighbor)], world, cell| occupied(pts.iter().fold(NO_EXTENT, |e, (_, nb)| extend(e, nb.position)), world, cell);
        let world = Bounds { min: Vec2::ZERO, max: Vec2::splat(1000.0) };
        // Cell 2: a lattice of 32. x 105..130 → 96..160; y 210..250 → 192..256.
        let b = occupied(&[nb(105.0, 210.0), nb(130.0, 250.0), nb(f32::NAN, 0.0)], world, 2.0);
        assert_eq!((b.min, b.max), (Vec2::new(96.0, 192.0), Vec2::new(160.0, 256.0)));
        // Near the edge: clipped to the world.
        let b = occupied(&[nb(1.0, 999.0)], world, 2.0);
        assert_eq!((b.min, b.max), (Vec2::new(0.0, 992.0), Vec2::new(32.0, 1000.0)));
        // No finite position: the whole world.
        let b = occupied(&[], world, 2.0);
        assert_eq!((b.min, b.max), (world.min, world.max));
        // A crowd in a corner of a large world gets the cells asked for: 100 agents within 20
        // units of (10, 10) in a 100,000-unit world, cell 1 (the world-wide grid would be
        // coarsened to 4,096 cells of ~1,560 units).
        let mut g = AgentGrid::empty(world);
        let big = Bounds { min: Vec2::ZERO, max: Vec2::splat(1.0e5) };
        g.rebuild(big, 1.0, 100, |i| (nb(10.0 + (i % 10) as f32 * 2.0, 10.0 + (i / 10) as f32 * 2.0).1, Crowd::default()));
        assert_eq!(g.shape().cell_size(), 1.0);
    }
}
