//! The obstacle and wall index: items bucketed by bounding box into every cell they touch,
//! rebuilt only when they change, each query reporting an item once in ascending index order.

use glam::Vec2;

use super::shape::GridShape;
use crate::sim::geometry::{Bounds, Obstacle, Wall};

/// Most cells of the obstacle and wall index ([`StaticIndex::build`] coarsens its cells to fit);
/// the runtime's admission checks bound the index's entries with the same shape.
pub const STATIC_INDEX_CELLS: usize = 1 << 20;

/// Compressed buckets: `starts[c]..starts[c+1]` indexes `items` for cell `c`.
#[derive(Debug, Clone, Default)]
struct Buckets {
    starts: Vec<u32>,
    items: Vec<u32>,
}

impl Buckets {
    /// Counting sort of `(cell, item)` pairs given in ascending item order.
    fn build(cells: usize, pairs: impl Iterator<Item = (usize, u32)> + Clone) -> Self {
        let mut starts = vec![0u32; cells + 1];
        let mut n = 0usize;
        for (c, _) in pairs.clone() {
            starts[c + 1] += 1;
            n += 1;
        }
        for c in 0..cells {
            starts[c + 1] += starts[c];
        }
        let mut fill = starts.clone();
        let mut items = vec![0u32; n];
        for (c, i) in pairs {
            items[fill[c] as usize] = i;
            fill[c] += 1;
        }
        Buckets { starts, items }
    }

    /// True if cells `first..=last` hold no item (their items are contiguous).
    #[inline]
    fn span_is_empty(&self, first: usize, last: usize) -> bool {
        match (self.starts.get(first), self.starts.get(last + 1)) {
            (Some(&s), Some(&e)) => s == e,
            _ => true,
        }
    }

    #[inline]
    fn cell(&self, c: usize) -> &[u32] {
        match (self.starts.get(c), self.starts.get(c + 1)) {
            (Some(&s), Some(&e)) => self.items.get(s as usize..e as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
}

/// Items with a bounding box, bucketed into every cell the box touches; each query reports an
/// item once (in the cell holding the lower corner of query box ∩ item box).
#[derive(Debug, Clone)]
struct BoxGrid {
    shape: GridShape,
    buckets: Buckets,
    boxes: Vec<(Vec2, Vec2)>,
}

impl BoxGrid {
    fn build(shape: GridShape, boxes: Vec<(Vec2, Vec2)>) -> Self {
        let mut pairs = Vec::new();
        for (i, (lo, hi)) in boxes.iter().enumerate() {
            let (x0, y0) = shape.coords(*lo);
            let (x1, y1) = shape.coords(*hi);
            for cy in y0..=y1 {
                for cx in x0..=x1 {
                    pairs.push((shape.index(cx, cy), i as u32));
                }
            }
        }
        BoxGrid { shape, buckets: Buckets::build(shape.len(), pairs.iter().copied()), boxes }
    }

    fn query(&self, p: Vec2, r: f32, mut f: impl FnMut(u32)) {
        let qlo = p - Vec2::splat(r);
        let qhi = p + Vec2::splat(r);
        let (x0, y0) = self.shape.coords(qlo);
        let (x1, y1) = self.shape.coords(qhi);
        for cy in y0..=y1 {
            let row = self.shape.index(0, cy);
            // Static geometry is sparse: skip a row whose cells x0..=x1 are all empty in one test.
            if self.buckets.span_is_empty(row + x0 as usize, row + x1 as usize) {
                continue;
            }
            for cx in x0..=x1 {
                for &i in self.buckets.cell(row + cx as usize) {
                    let Some(&(lo, hi)) = self.boxes.get(i as usize) else { continue };
                    if lo.x > qhi.x || lo.y > qhi.y || hi.x < qlo.x || hi.y < qlo.y {
                        continue;
                    }
                    if self.shape.coords(lo.max(qlo)) == (cx, cy) {
                        f(i);
                    }
                }
            }
        }
    }
}

/// Cells round an obstacle's box within which [`StaticIndex`] records each cell's clearance;
/// a cell further from every obstacle records this many cells' width.
const CLEARANCE_MARGIN_CELLS: u32 = 1;

/// Spatial index of the static geometry: obstacles and walls.
#[derive(Debug, Clone)]
pub struct StaticIndex {
    obstacles: BoxGrid,
    walls: BoxGrid,
    /// Per cell of the obstacles' grid: a lower bound of the distance from any point of the
    /// cell to any obstacle's edge (0 inside one), capped at [`CLEARANCE_MARGIN_CELLS`] cells.
    clearance: Vec<f32>,
}

/// The [`StaticIndex::clearance`] of every cell of `shape`: each obstacle lowers the cells of
/// its box and of a margin of [`CLEARANCE_MARGIN_CELLS`] round it to their distance from its
/// edge. A cell beyond every margin is at least the margin's width from every obstacle's box,
/// so from its edge.
fn obstacle_clearance(shape: GridShape, obstacles: &[Obstacle]) -> Vec<f32> {
    let m = CLEARANCE_MARGIN_CELLS;
    let mut out = vec![m as f32 * shape.cell; shape.len()];
    for o in obstacles {
        let (x0, y0) = shape.coords(o.center - Vec2::splat(o.radius));
        let (x1, y1) = shape.coords(o.center + Vec2::splat(o.radius));
        for cy in y0.saturating_sub(m)..=(y1 + m).min(shape.rows - 1) {
            for cx in x0.saturating_sub(m)..=(x1 + m).min(shape.cols - 1) {
                let lo = shape.origin + Vec2::new(cx as f32, cy as f32) * shape.cell;
                let hi = lo + Vec2::splat(shape.cell);
                let gap = (lo - o.center).max(o.center - hi).max(Vec2::ZERO).length() - o.radius;
                if let Some(c) = out.get_mut(shape.index(cx, cy)) {
                    *c = c.min(gap.max(0.0));
                }
            }
        }
    }
    out
}

impl StaticIndex {
    /// Indexes `obstacles` and `walls` over `bounds` with cells of side `cell`.
    pub fn build(bounds: Bounds, cell: f32, obstacles: &[Obstacle], walls: &[Wall]) -> Self {
        let shape = GridShape::new(bounds, cell, STATIC_INDEX_CELLS);
        let ob = obstacles
            .iter()
            .map(|o| (o.center - Vec2::splat(o.radius), o.center + Vec2::splat(o.radius)))
            .collect();
        let wb = walls.iter().map(|w| (w.a.min(w.b), w.a.max(w.b))).collect();
        StaticIndex { obstacles: BoxGrid::build(shape, ob), walls: BoxGrid::build(shape, wb), clearance: obstacle_clearance(shape, obstacles) }
    }

    /// True when no obstacle's edge comes within `r` of `p`, told by the clearance of `p`'s cell
    /// alone (false when unsure: `p` outside the grid, or within rounding of the bound). Then
    /// [`StaticIndex::for_each_obstacle`] finds no obstacle within `r` of `p`, and a query that
    /// only wants those can be skipped.
    #[inline]
    pub fn clear_of_obstacles(&self, p: Vec2, r: f32) -> bool {
        let s = &self.obstacles.shape;
        let c = (p - s.origin) * s.inv_cell;
        if !(c.x >= 0.0 && c.y >= 0.0 && c.x < s.cols as f32 && c.y < s.rows as f32) {
            return false;
        }
        let Some(&clear) = self.clearance.get(s.index(c.x as u32, c.y as u32)) else { return false };
        // Rounding of the cell's corners and of the callers' distance tests: far more than
        // f32's, relative to the coordinates' size.
        let slack = (p.abs().max_element() + s.origin.abs().max_element() + s.cell) * 1e-5;
        r + slack < clear
    }

    /// Calls `f` once with the index of each obstacle whose box meets the square of half-side
    /// `r` round `p`.
    pub fn for_each_obstacle(&self, p: Vec2, r: f32, f: impl FnMut(u32)) {
        self.obstacles.query(p, r, f);
    }

    /// Calls `f` once with the index of each wall whose box meets the square of half-side `r`
    /// round `p`.
    pub fn for_each_wall(&self, p: Vec2, r: f32, f: impl FnMut(u32)) {
        self.walls.query(p, r, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::spatial::test_bounds as bounds;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn static_index_reports_each_wall_and_obstacle_once(
            segs in proptest::collection::vec((0.0f32..100.0, 0.0f32..100.0, 0.0f32..100.0, 0.0f32..100.0), 0..40),
            circles in proptest::collection::vec((0.0f32..100.0, 0.0f32..100.0, 0.1f32..15.0), 0..40),
            q in (0.0f32..100.0, 0.0f32..100.0),
            r in 0.0f32..30.0,
        ) {
            let walls: Vec<Wall> = segs.iter().enumerate().map(|(i, &(ax, ay, bx, by))| Wall {
                id: i as u32, a: Vec2::new(ax, ay), b: Vec2::new(bx, by), normal: Vec2::Y,
            }).collect();
            let obs: Vec<Obstacle> = circles.iter().enumerate().map(|(i, &(x, y, r))| Obstacle {
                id: i as u32, center: Vec2::new(x, y), radius: r,
            }).collect();
            let idx = StaticIndex::build(bounds(), 7.0, &obs, &walls);
            let q = Vec2::new(q.0, q.1);
            let mut seen = Vec::new();
            idx.for_each_wall(q, r, |i| seen.push(i));
            let mut d = seen.clone(); d.sort_unstable(); d.dedup();
            prop_assert_eq!(d.len(), seen.len());
            for w in &walls {
                let c = crate::sim::math::closest_on_segment(q, w.a, w.b);
                if (c - q).abs().max_element() <= r {
                    prop_assert!(seen.contains(&w.id));
                }
            }
            let mut seen = Vec::new();
            idx.for_each_obstacle(q, r, |i| seen.push(i));
            let mut d = seen.clone(); d.sort_unstable(); d.dedup();
            prop_assert_eq!(d.len(), seen.len());
            let clear = idx.clear_of_obstacles(q, r);
            for o in &obs {
                if o.center.distance(q) <= r + o.radius {
                    prop_assert!(seen.contains(&o.id));
                    prop_assert!(!clear, "clear of obstacles, but obstacle {} is within {}", o.id, r);
                }
            }
        }
    }

    /// The clearance tells a point a cell's width from every obstacle without a query, and
    /// never one within reach of an obstacle's edge, nor one outside the grid.
    #[test]
    fn clearance_answers_far_points_and_only_them() {
        let obs = [Obstacle { id: 0, center: Vec2::new(50.0, 50.0), radius: 5.0 }];
        let idx = StaticIndex::build(bounds(), 8.0, &obs, &[]);
        // Far from the obstacle: clear within 3 (a cell's width from every box).
        assert!(idx.clear_of_obstacles(Vec2::new(10.0, 10.0), 3.0));
        assert!(!idx.clear_of_obstacles(Vec2::new(10.0, 10.0), 9.0), "beyond the cap: unsure");
        // (61, 50) is 6 from the edge, its cell (56..64) 1: clear within 0.5; unsure past 1.
        assert!(idx.clear_of_obstacles(Vec2::new(61.0, 50.0), 0.5));
        assert!(!idx.clear_of_obstacles(Vec2::new(61.0, 50.0), 1.5));
        assert!(!idx.clear_of_obstacles(Vec2::new(57.0, 50.0), 2.5), "2 from the edge");
        assert!(!idx.clear_of_obstacles(Vec2::new(50.0, 50.0), 0.0), "inside the obstacle");
        assert!(!idx.clear_of_obstacles(Vec2::new(-20.0, 10.0), 0.1), "outside the grid: unsure");
        assert!(!idx.clear_of_obstacles(Vec2::new(f32::NAN, 10.0), 0.1));
    }
}
