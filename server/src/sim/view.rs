//! The read-only view of the world that every behaviour sees during the compute phase.

use glam::Vec2;

use super::agent::{Agent, AgentId};
use super::roster::Roster;
use super::behaviors::move_to::MoveToParams;
use super::nav::NavState;
use super::spatial::{AgentGrid, Neighbor, StaticIndex};

pub use super::geometry::{Bounds, Obstacle, Wall};

/// Position, velocity and orientation of something a behaviour aims at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Kinematic {
    /// Position.
    pub position: Vec2,
    /// Velocity.
    pub velocity: Vec2,
    /// Orientation.
    pub orientation: f32,
}

/// Immutable snapshot handed to behaviours.
pub struct WorldView<'a> {
    /// All agents (in storage order; look one up by id with [`WorldView::agent`]).
    pub agents: &'a Roster,
    /// Agent spatial index, built from `agents` at the start of the tick.
    pub grid: &'a AgentGrid,
    /// Obstacles.
    pub obstacles: &'a [Obstacle],
    /// Walls.
    pub walls: &'a [Wall],
    /// Spatial index of obstacles and walls.
    pub statics: &'a StaticIndex,
    /// World bounds.
    pub bounds: Bounds,
    /// Fixed step, seconds.
    pub dt: f32,
    /// Tick number being computed.
    pub tick: u64,
    /// Simulation time at the start of this tick, seconds.
    pub time: f32,
    /// Scan every agent for neighbour queries instead of the grid (the O(N²) baseline; gives
    /// the same neighbours in the same order).
    pub brute_force: bool,
    /// Navigation grid and flow fields (once a MoveTo was issued).
    pub nav: Option<&'a NavState>,
    /// MoveTo tuning.
    pub move_to: &'a MoveToParams,
    /// Largest radius and top speed any agent of the world may have (bounds for contact tests).
    pub extent: (f32, f32),
}

impl WorldView<'_> {
    /// The agent with `id`, if any.
    pub fn agent(&self, id: AgentId) -> Option<&Agent> {
        self.agents.get(id)
    }

    /// Calls `f` for every agent whose centre lies within `radius` of `p` (itself included if it
    /// is there), in a deterministic order, with a packed copy of the agent's kinematics.
    pub fn for_each_agent_near(&self, p: Vec2, radius: f32, mut f: impl FnMut(&Neighbor)) {
        let r2 = radius * radius;
        let visit = |n: &Neighbor| {
            if n.position.distance_squared(p) <= r2 {
                f(n);
            }
        };
        if self.brute_force {
            self.grid.all().iter().for_each(visit);
        } else {
            self.grid.for_each_in_box(p, radius, visit);
        }
    }

    /// Like [`WorldView::for_each_agent_near`], with each agent's rank in the grid (its index in
    /// [`AgentGrid::all`]).
    pub fn for_each_agent_near_ranked(&self, p: Vec2, radius: f32, mut f: impl FnMut(usize, &Neighbor)) {
        let r2 = radius * radius;
        let mut visit = |k: usize, n: &Neighbor| {
            if n.position.distance_squared(p) <= r2 {
                f(k, n);
            }
        };
        if self.brute_force {
            self.grid.all().iter().enumerate().for_each(|(k, n)| visit(k, n));
        } else {
            self.grid.for_each_in_box_ranked(p, radius, visit);
        }
    }

    /// Like [`WorldView::for_each_agent_near_ranked`] for a nearest-neighbours search: `f` gets
    /// each agent's squared distance from `p` too, and returns the squared distance beyond which
    /// it wants no more agents; agents further than that are not offered, and the grid stops
    /// looking past it (see [`AgentGrid::for_each_in_rings_ranked`]).
    pub fn for_each_agent_nearest_ranked(&self, p: Vec2, radius: f32, mut f: impl FnMut(usize, &Neighbor, f32) -> f32) {
        let r2 = radius * radius;
        let mut want = r2;
        let mut visit = |k: usize, n: &Neighbor| {
            let d2 = n.position.distance_squared(p);
            if d2 <= want {
                want = f(k, n, d2).min(r2);
            }
            want
        };
        if self.brute_force {
            self.grid.all().iter().enumerate().for_each(|(k, n)| {
                visit(k, n);
            });
        } else {
            self.grid.for_each_in_rings_ranked(p, radius, visit);
        }
    }

    /// Calls `f` for every obstacle whose edge may lie within `radius` of `p`.
    pub fn for_each_obstacle_near(&self, p: Vec2, radius: f32, mut f: impl FnMut(&Obstacle)) {
        if self.obstacles.is_empty() || self.statics.clear_of_obstacles(p, radius) {
            return;
        }
        self.statics.for_each_obstacle(p, radius, |i| {
            if let Some(o) = self.obstacles.get(i as usize) {
                let reach = radius + o.radius;
                if o.center.distance_squared(p) <= reach * reach {
                    f(o);
                }
            }
        });
    }

    /// Calls `f` for every wall that may come within `radius` of `p` (each once).
    pub fn for_each_wall_near(&self, p: Vec2, radius: f32, mut f: impl FnMut(&Wall)) {
        if self.walls.is_empty() {
            return;
        }
        self.statics.for_each_wall(p, radius, |i| {
            if let Some(w) = self.walls.get(i as usize) {
                f(w);
            }
        });
    }
}
