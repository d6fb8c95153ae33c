//! Editing a world between ticks: its obstacles, walls, agents' removal and groups (commands
//! of [`World::apply`] that steer nothing). Each marks the navigation data it changes stale.

use glam::Vec2;

use super::World;
use super::types::Event;
use crate::sim::agent::{AgentId, GroupId};
use crate::sim::error::{SimError, check_positive, check_vec};
use crate::sim::geometry::{Obstacle, Wall};
use crate::sim::math::{dir, perp};

impl World {
    /// Adds an obstacle; returns its id.
    pub fn add_obstacle(&mut self, center: Vec2, radius: f32) -> Result<u32, SimError> {
        check_vec("center", center)?;
        check_positive("radius", radius)?;
        if self.obstacles.len() >= self.config.max_obstacles {
            return Err(SimError::LimitExceeded { what: "obstacles".into(), max: self.config.max_obstacles });
        }
        let id = self.next_static_id;
        self.next_static_id += 1;
        self.obstacles.push(Obstacle { id, center, radius });
        self.mark_nav_dirty(center - Vec2::splat(radius), center + Vec2::splat(radius));
        Ok(id)
    }

    /// Moves an obstacle.
    pub fn move_obstacle(&mut self, id: u32, center: Vec2) -> Result<(), SimError> {
        check_vec("center", center)?;
        let o = self.obstacles.iter_mut().find(|o| o.id == id).ok_or(SimError::UnknownObstacle(id))?;
        let (old, r) = (o.center, o.radius);
        o.center = center;
        self.mark_nav_dirty(old - Vec2::splat(r), old + Vec2::splat(r));
        self.mark_nav_dirty(center - Vec2::splat(r), center + Vec2::splat(r));
        Ok(())
    }

    /// Moves an obstacle and, with `radius`, resizes it (validated; nothing changes on error).
    pub fn reshape_obstacle(&mut self, id: u32, center: Vec2, radius: Option<f32>) -> Result<(), SimError> {
        check_vec("center", center)?;
        if let Some(r) = radius {
            check_positive("radius", r)?;
        }
        let o = self.obstacles.iter_mut().find(|o| o.id == id).ok_or(SimError::UnknownObstacle(id))?;
        let (old, old_r) = (o.center, o.radius);
        o.radius = radius.unwrap_or(old_r);
        let r = old_r.max(o.radius);
        self.move_obstacle(id, center)?;
        self.mark_nav_dirty(old - Vec2::splat(r), old + Vec2::splat(r));
        self.mark_nav_dirty(center - Vec2::splat(r), center + Vec2::splat(r));
        Ok(())
    }

    /// Removes an obstacle.
    pub fn remove_obstacle(&mut self, id: u32) -> Result<(), SimError> {
        let i = self.obstacles.iter().position(|o| o.id == id).ok_or(SimError::UnknownObstacle(id))?;
        let o = self.obstacles.remove(i);
        self.mark_nav_dirty(o.center - Vec2::splat(o.radius), o.center + Vec2::splat(o.radius));
        Ok(())
    }

    /// Adds a wall segment; returns its id.
    pub fn add_wall(&mut self, a: Vec2, b: Vec2) -> Result<u32, SimError> {
        check_vec("a", a)?;
        check_vec("b", b)?;
        if a.distance_squared(b) < 1e-8 {
            return Err(SimError::invalid("b", "a wall needs two distinct end points"));
        }
        if self.walls.len() >= self.config.max_walls {
            return Err(SimError::LimitExceeded { what: "walls".into(), max: self.config.max_walls });
        }
        let id = self.next_static_id;
        self.next_static_id += 1;
        self.walls.push(Wall { id, a, b, normal: dir(perp(b - a)) });
        self.mark_nav_dirty(a.min(b), a.max(b));
        Ok(id)
    }

    /// Removes a wall.
    pub fn remove_wall(&mut self, id: u32) -> Result<(), SimError> {
        let i = self.walls.iter().position(|w| w.id == id).ok_or(SimError::UnknownWall(id))?;
        let w = self.walls.remove(i);
        self.mark_nav_dirty(w.a.min(w.b), w.a.max(w.b));
        Ok(())
    }

    /// Removes an agent.
    pub fn despawn(&mut self, id: AgentId) -> Result<(), SimError> {
        let a = self.agents.remove(id).ok_or(SimError::UnknownAgent(id))?;
        if let (Some(nav), Some(o)) = (self.nav.as_mut(), a.order.as_deref()) {
            nav.release(o);
        }
        self.push_event(Event::Despawned { id });
        Ok(())
    }

    /// The id of group `name`, created if new.
    pub fn ensure_group(&mut self, name: &str) -> Result<GroupId, SimError> {
        if let Some(g) = self.group_id(name) {
            return Ok(g);
        }
        if name.is_empty() || name.len() > 64 {
            return Err(SimError::invalid("group", "must be 1 to 64 bytes"));
        }
        if self.groups.len() >= usize::from(u16::MAX) {
            return Err(SimError::LimitExceeded { what: "groups".into(), max: usize::from(u16::MAX) });
        }
        self.groups.push(name.to_string());
        Ok((self.groups.len() - 1) as GroupId)
    }
}
