//! How a world's sim steps: inline on the world's own one-thread pool while the world is
//! small, else on the pool every large world shares.

use std::sync::Arc;

use crate::sim::World;

#[derive(Clone)]
pub(super) struct Stepper {
    /// Steps large worlds.
    pool: Arc<rayon::ThreadPool>,
    /// The runner runs on a one-thread pool of its own, which steps this world while it is
    /// small: a tick never hands work to, or waits at a parallel join for, a thread the OS has
    /// given to someone else (false if that pool could not start: then the shared pool steps it).
    solo: bool,
    /// Agent count from which the shared pool steps this world.
    parallel_min: usize,
}

impl Stepper {
    pub(super) fn new(pool: Arc<rayon::ThreadPool>, parallel_min: usize) -> Self {
        Stepper { pool, solo: false, parallel_min }
    }

    /// The runner runs on its own one-thread pool from now on.
    pub(super) fn on_solo_pool(&mut self) {
        self.solo = true;
    }

    /// Steps `world` once.
    pub(super) fn step(&self, world: &mut World) {
        if self.solo && world.agents().len() < self.parallel_min {
            // On this world's own one-thread pool: the step's parallel loops run inline.
            world.step();
        } else {
            self.pool.install(|| world.step());
        }
    }
}
