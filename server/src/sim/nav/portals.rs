//! Narrow passages taken one direction at a time.
//!
//! Two crowds meeting head on in a door too narrow for two lanes press into each other and
//! stay there: each agent's avoidance only sees that the way ahead is full. People at such a
//! door take turns, and so do agents here. A *portal* is a connected run of free navigation
//! cells where the way is narrower than `max_width` across one axis (a door, a gap between
//! obstacles, a narrow corridor). Each portal admits one direction at a time:
//!
//! - An agent *comes through* a portal when its MoveTo's flow field, sampled at the portal's
//!   centre, crosses it along its axis, and the agent is inside the portal, or before it
//!   (on the upstream side, within the approach distance, heading towards it).
//! - The direction with agents coming is given the portal; when the other direction has agents
//!   waiting and the owner has had it for `turn` ticks, the owner's agents not yet inside wait
//!   too, and once none is inside the other direction gets it. A direction with no agent
//!   coming gives the portal up at once.
//! - An agent that must wait gets a [`PortalTurn`] that says wait: it stays out of a disc round the
//!   portal (so that agents coming out have room), holds its place like an agent whose order is
//!   done (stepping aside for agents on their way), and its wait does not count as a stall.
//!
//! Everything is decided in the sequential pre-pass from the tick's start, agents in the grid's
//! cell order, portals in cell order: the same on any thread count.

use glam::Vec2;

use crate::sim::bytes::{Dec, DecodeError, Enc};
use crate::sim::agent::PortalTurn;
use super::cache::FlowCache;
use super::grid::NavGrid;
use crate::sim::roster::Roster;
use crate::sim::spatial::AgentGrid;

/// Most portals a grid keeps (the first in cell order); a maze with more has its other narrow
/// passages treated as open ground.
pub const MAX_PORTALS: usize = 4096;

/// How far from a portal, in radii of the largest agent beyond the portal's own extent, agents
/// count as coming to it: a crowd that queues for a door waits as a whole, instead of its back
/// pressing its front into the door's mouth.
const APPROACH_RADII: f32 = 24.0;

/// Radius, in radii of the largest agent beyond half the portal's length, of the disc round a
/// portal that waiting agents keep clear, so that agents coming out have room.
const CLEAR_RADII: f32 = 4.0;

/// Label of a cell in no portal.
const NONE: u32 = u32::MAX;

/// How a world's portals are found and run (from [`crate::sim::behaviors::move_to::MoveToParams`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PortalRules {
    /// Passages narrower than this (world units) are portals; 0 = none.
    pub max_width: f32,
    /// Ticks a direction keeps a portal while the other waits.
    pub turn: u64,
    /// The largest agent radius: sets the approach distance and the disc waiting agents keep clear.
    pub max_radius: f32,
}

/// One narrow passage.
#[derive(Debug, Clone, PartialEq)]
pub struct Portal {
    /// Mean of the cells' centres.
    pub center: Vec2,
    /// Unit axis agents pass along (across the narrow width).
    pub axis: Vec2,
    /// Half the portal's length along `axis` and half its width across it.
    pub half: Vec2,
    /// The direction admitted: +1 along `axis`, −1 against it, 0 none.
    pub owner: i8,
    /// Tick the owner got the portal.
    since: u64,
    /// The owner's turn is over: its agents not yet inside wait too.
    closing: bool,
}

/// The portals of a grid and their state.
#[derive(Debug, Clone, Default)]
pub struct Portals {
    /// Grid version and width they were found for.
    found_for: Option<(u64, u32)>,
    list: Vec<Portal>,
    /// Portal of each nav cell ([`NONE`] for most), empty when there are no portals.
    of_cell: Vec<u32>,
    /// Agents found coming on the last pre-pass (ids: the roster's storage order may change
    /// between ticks).
    coming: Vec<u32>,
}

impl Portals {
    /// The portals found.
    pub fn list(&self) -> &[Portal] {
        &self.list
    }

    /// Finds the portals of `grid` again if it or `max_width` changed since the last time
    /// (keeping nothing of the old ones' state).
    fn refresh(&mut self, grid: &NavGrid, max_width: f32) {
        let key = (grid.version(), max_width.to_bits());
        if self.found_for == Some(key) {
            return;
        }
        self.found_for = Some(key);
        let (list, of_cell) = find(grid, max_width);
        self.list = list;
        self.of_cell = of_cell;
    }
}

/// Width of the free run through each cell along one axis: `len` cells from `start` stepping by
/// `step`; blocked cells and the grid's edge bound a run.
fn runs(grid: &NavGrid, start: usize, step: usize, len: usize, out: &mut [u16]) {
    let mut i = 0;
    while i < len {
        if grid.is_blocked(start + i * step) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < len && !grid.is_blocked(start + j * step) {
            j += 1;
        }
        let run = u16::try_from(j - i).unwrap_or(u16::MAX);
        for k in i..j {
            if let Some(o) = out.get_mut(start + k * step) {
                *o = run;
            }
        }
        i = j;
    }
}

/// The portals of `grid`: cells whose free run across one axis, plus the clearance band on
/// both sides, is at most `max_width` and shorter than the run across the other axis, joined
/// 4-connected with the same axis.
fn find(grid: &NavGrid, max_width: f32) -> (Vec<Portal>, Vec<u32>) {
    if max_width <= 0.0 {
        return (Vec::new(), Vec::new());
    }
    let (cols, rows) = (grid.dims().0 as usize, grid.dims().1 as usize);
    let mut along_x = vec![0u16; grid.len()];
    let mut along_y = vec![0u16; grid.len()];
    for y in 0..rows {
        runs(grid, y * cols, 1, cols, &mut along_x);
    }
    for x in 0..cols {
        runs(grid, x, cols, rows, &mut along_y);
    }
    let width = |run: u16| f32::from(run) * grid.cell_size() + 2.0 * grid.clearance();
    // 1: narrow across y (pass along x), 2: narrow across x (pass along y), 0: open or blocked.
    let kind = |i: usize| -> u8 {
        let (wx, wy) = (width(along_x[i]), width(along_y[i]));
        if grid.is_blocked(i) {
            0
        } else if wy <= max_width && wy < wx {
            1
        } else if wx <= max_width && wx < wy {
            2
        } else {
            0
        }
    };
    let mut of_cell = vec![NONE; grid.len()];
    let mut list = Vec::new();
    let mut stack = Vec::new();
    for seed in 0..grid.len() {
        let k = kind(seed);
        if k == 0 || of_cell[seed] != NONE {
            continue;
        }
        if list.len() >= MAX_PORTALS {
            break;
        }
        let id = list.len() as u32;
        let (mut sum, mut n) = (Vec2::ZERO, 0u32);
        let (mut lo, mut hi) = (Vec2::splat(f32::INFINITY), Vec2::splat(f32::NEG_INFINITY));
        of_cell[seed] = id;
        stack.push(seed);
        while let Some(i) = stack.pop() {
            let c = grid.center(i);
            sum += c;
            n += 1;
            lo = lo.min(c);
            hi = hi.max(c);
            let (cx, cy) = grid.xy(i);
            for (dx, dy) in [(1, 0), (-1, 0), (0, 1), (0, -1)] {
                if let Some(j) = grid.offset(cx, cy, dx, dy) {
                    if of_cell[j] == NONE && kind(j) == k {
                        of_cell[j] = id;
                        stack.push(j);
                    }
                }
            }
        }
        let center = sum / n as f32;
        let half = (hi - lo) * 0.5 + grid.cell_size() * 0.5;
        let (axis, half) = if k == 1 { (Vec2::X, half) } else { (Vec2::Y, Vec2::new(half.y, half.x)) };
        list.push(Portal { center, axis, half, owner: 0, since: 0, closing: false });
    }
    if list.is_empty() {
        of_cell = Vec::new();
    }
    (list, of_cell)
}

/// An agent coming through a portal this tick.
struct Coming {
    /// Index into the roster's storage.
    index: u32,
    /// +1 along the axis, −1 against it.
    way: i8,
    inside: bool,
}

impl Portals {
    /// Takes turns at the portals of the nav grid `nav` (see the module docs): finds its portals
    /// when it changed, gives each portal to a direction, and sets
    /// [`crate::sim::agent::MoveOrder::portal`] on every agent coming through one (saying `wait`
    /// to those that must wait), clearing it on the rest; an agent comes through a portal along
    /// its order's flow field in `cache`. Positions as of `grid` (the tick's start). Returns how
    /// many agents are coming through a portal.
    pub(super) fn take_turns(&mut self, nav: &NavGrid, cache: &FlowCache, roster: &mut Roster, grid: &AgentGrid, tick: u64, rules: PortalRules) -> usize {
        for &id in &self.coming {
            if let Some(o) = roster.get_mut(id).and_then(|a| a.order.as_deref_mut()) {
                o.portal = None;
            }
        }
        self.coming.clear();
        let all = roster.storage_mut();
        self.refresh(nav, rules.max_width);
        if self.list.is_empty() {
            return 0;
        }
        let r = rules.max_radius;
        let mut coming: Vec<Coming> = Vec::new();
        for pi in 0..self.list.len() {
            let Some(portal) = self.list.get(pi) else { break };
            let (center, axis) = (portal.center, portal.axis);
            let approach = portal.half + Vec2::splat(APPROACH_RADII * r);
            coming.clear();
            grid.for_each_in_box_ranked(center, approach.x.max(approach.y), |rank, n| {
                let rel = n.position - center;
                let (u, v) = (rel.dot(axis), crate::sim::math::perp(axis).dot(rel));
                if u.abs() > approach.x || v.abs() > approach.y {
                    return;
                }
                let Some(&index) = grid.order().get(rank) else { return };
                let Some(a) = all.get(index as usize) else { return };
                let Some(o) = a.active_order() else { return };
                let Some(field) = cache.get(o.goal_cell as usize) else { return };
                let through = field.sample(nav, center).dot(axis);
                if through.abs() < 0.5 {
                    return;
                }
                let way: i8 = if through > 0.0 { 1 } else { -1 };
                let cell = nav.cell_of(n.position);
                let inside = self.of_cell.get(cell) == Some(&(pi as u32));
                let before = u * f32::from(way) < 0.0 && field.sample(nav, n.position).dot(-rel) > 0.0;
                if inside || before {
                    coming.push(Coming { index, way, inside });
                }
            });
            let count = |way: i8, inside_only: bool| coming.iter().filter(|c| c.way == way && (c.inside || !inside_only)).count();
            let Some(portal) = self.list.get_mut(pi) else { break };
            let s = portal.owner;
            if s == 0 || count(s, false) == 0 {
                let (pos, neg) = (count(1, false), count(-1, false));
                portal.owner = match s {
                    _ if pos == 0 && neg == 0 => 0,
                    0 if pos >= neg => 1,
                    0 => -1,
                    s if count(-s, false) > 0 => -s,
                    _ => 0,
                };
                portal.since = tick;
                portal.closing = false;
            } else {
                if !portal.closing && count(-s, false) > 0 && tick.saturating_sub(portal.since) >= rules.turn {
                    portal.closing = true;
                }
                if portal.closing && count(s, true) == 0 {
                    portal.owner = -s;
                    portal.since = tick;
                    portal.closing = false;
                }
            }
            let (owner, closing) = (portal.owner, portal.closing);
            let clear = portal.half.x + CLEAR_RADII * r;
            for c in &coming {
                let wait = !(c.inside || (c.way == owner && !closing));
                let Some(a) = all.get_mut(c.index as usize) else { continue };
                if let Some(o) = a.order.as_deref_mut().filter(|o| o.portal.is_none()) {
                    o.portal = Some(PortalTurn { center, clear, wait });
                    self.coming.push(a.id);
                }
            }
        }
        self.coming.len()
    }
}

impl Portals {
    /// Appends what a saved world keeps of the portals (`world/save.rs`): what they were found
    /// for, each portal's turn state, and the agents coming. The cell map is found again on load.
    pub(crate) fn save(&self, e: &mut Enc) {
        let Portals { found_for, list, of_cell: _, coming } = self;
        match found_for {
            None => e.u8(0),
            Some((v, w)) => {
                e.u8(1);
                e.u64(*v);
                e.fixed32(*w);
            }
        }
        e.u64(list.len() as u64);
        for p in list {
            let Portal { center, axis, half, owner, since, closing } = p;
            e.vec2(*center);
            e.vec2(*axis);
            e.vec2(*half);
            e.u8(*owner as u8);
            e.u64(*since);
            e.u8(u8::from(*closing));
        }
        e.u64(coming.len() as u64);
        for &id in coming {
            e.u64(u64::from(id));
        }
    }

    /// Reads what [`Portals::save`] wrote; `grid` is the loaded nav grid.
    pub(crate) fn load(d: &mut Dec, grid: &NavGrid) -> Result<Portals, DecodeError> {
        let found_for = if d.bool()? { Some((d.u64()?, d.fixed32()?)) } else { None };
        let list = d.list(|d| {
            let (center, axis, half) = (d.vec2()?, d.vec2()?, d.vec2()?);
            if !(center.is_finite() && axis.is_finite() && half.is_finite()) {
                return Err(d.err("portal geometry is not finite"));
            }
            let owner = d.u8()? as i8;
            if !(-1..=1).contains(&owner) {
                return Err(d.err(format!("portal owner {owner}")));
            }
            Ok(Portal { center, axis, half, owner, since: d.u64()?, closing: d.bool()? })
        })?;
        let coming = d.list(|d| d.u32())?;
        // The cell map of portals found on this grid version is found again (the same map);
        // portals of an older version are found anew on the next pre-pass anyway.
        let mut of_cell = Vec::new();
        if let Some((v, w)) = found_for.filter(|f| f.0 == grid.version()) {
            let (found, cells) = find(grid, f32::from_bits(w));
            if found.len() != list.len() {
                return Err(d.err(format!("{} portals saved, the nav grid has {}", list.len(), found.len())));
            }
            let _ = v;
            of_cell = cells;
        }
        Ok(Portals { found_for, list, of_cell, coming })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::geometry::{Bounds, Wall};

    fn door_grid() -> NavGrid {
        // 40 × 20 world, cell 1, clearance 0.5: a wall at x = 20 with a door from y = 8 to 12.
        let b = Bounds { min: Vec2::ZERO, max: Vec2::new(40.0, 20.0) };
        let walls = [
            Wall { id: 1, a: Vec2::new(20.0, 0.0), b: Vec2::new(20.0, 8.0), normal: Vec2::NEG_X },
            Wall { id: 2, a: Vec2::new(20.0, 12.0), b: Vec2::new(20.0, 20.0), normal: Vec2::NEG_X },
        ];
        NavGrid::build(b, 1.0, 0.5, &[], &walls)
    }

    #[test]
    fn a_door_is_one_portal_across_x() {
        let g = door_grid();
        let (list, of_cell) = find(&g, 6.0);
        assert_eq!(list.len(), 1, "{list:?}");
        let p = &list[0];
        assert_eq!(p.axis, Vec2::X);
        assert!((p.center - Vec2::new(20.0, 10.0)).length() < 0.6, "{:?}", p.center);
        // The door's cells are the portal's; open ground beside it is not.
        assert_eq!(of_cell[g.cell_of(Vec2::new(19.5, 10.5))], 0);
        assert_eq!(of_cell[g.cell_of(Vec2::new(15.5, 10.5))], NONE);
        // A wider threshold than the door changes nothing; a narrower one finds no portal.
        assert!(find(&g, 2.0).0.is_empty());
    }

    #[test]
    fn open_ground_has_no_portals() {
        let b = Bounds { min: Vec2::ZERO, max: Vec2::new(40.0, 20.0) };
        let g = NavGrid::build(b, 1.0, 0.5, &[], &[]);
        assert!(find(&g, 6.0).0.is_empty());
        assert!(find(&door_grid(), 0.0).0.is_empty());
    }
}
