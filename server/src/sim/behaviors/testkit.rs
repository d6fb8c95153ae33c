//! Helpers for the behaviour unit tests: a small world with hand-placed agents.

use std::sync::Arc;

use glam::Vec2;

use super::{Behavior, BehaviorSet, Scratch};
use crate::sim::agent::{Agent, AgentMemory, Limits};
use crate::sim::rng::Rng;
use crate::sim::steering::Steering;
use crate::sim::world::{World, WorldConfig};

/// An agent with 000's limits (max speed 5, max accel 10), facing +x, radius 0.5.
pub fn agent_at(id: u32, position: Vec2, velocity: Vec2) -> Agent {
    Agent {
        id,
        group: 0,
        position,
        velocity,
        orientation: 0.0,
        angular_velocity: 0.0,
        limits: Limits::default(),
        behaviors: Arc::new(BehaviorSet::default()),
        memory: AgentMemory { path_step: 1, ..AgentMemory::default() },
        order: None,
    }
}

/// A 200×200 world centred on the origin holding `agents`.
pub fn world_with(agents: Vec<Agent>) -> World {
    let mut cfg = WorldConfig::default();
    cfg.bounds.min = Vec2::splat(-100.0);
    cfg.bounds.max = Vec2::splat(100.0);
    let mut w = World::new(cfg).expect("valid test config");
    for a in agents {
        w.insert_agent_for_test(a);
    }
    w.rebuild_indexes();
    w
}

/// The scratch an agent gets in tick 0.
pub fn scratch_for(agent: &Agent) -> Scratch {
    Scratch { rng: Rng::for_agent(1, agent.id, 0), memory: agent.memory, events: 0 }
}

/// One behaviour's steering for agent `id`.
pub fn steer_one(w: &World, id: u32, b: &Behavior) -> Steering {
    let view = w.view();
    let agent = view.agent(id).expect("agent exists");
    b.steer(agent, &view, &mut scratch_for(agent))
}

/// A set's blended steering for agent `id`.
pub fn steer_set(w: &World, id: u32, set: &BehaviorSet) -> Steering {
    let view = w.view();
    let agent = view.agent(id).expect("agent exists");
    set.steer(agent, &view, &mut scratch_for(agent))
}

/// Asserts two vectors agree to 1e-4.
#[track_caller]
pub fn assert_close(a: Vec2, b: Vec2) {
    assert!((a - b).length() < 1e-4, "{a:?} != {b:?}");
}

/// Asserts two floats agree to 1e-4.
#[track_caller]
pub fn assert_near(a: f32, b: f32) {
    assert!((a - b).abs() < 1e-4, "{a} != {b}");
}
