//! A world's two witnesses: the recording (`record::Hook`, on request or with `record_all`)
//! and a durable world's log (`persist::Durable`). Both see every change to the world in the
//! order it is made; the log also sees owners and sessions, and takes snapshots.

use super::types::{CmdError, Reply};
use crate::persist::{Durable, RunnerState, StoredSession};
use crate::record::Hook;
use crate::scenario::Scenario;
use crate::sim::world::Command;
use crate::sim::{AgentId, World};

pub(super) struct Recorder {
    /// Recording: sees every change to the world (commands, tick rate, pauses, steps, loads).
    pub(super) rec: Hook,
    /// A durable world's log: sees what `rec` sees, and ownership and sessions.
    pub(super) dur: Option<Durable>,
}

impl Recorder {
    pub(super) fn new(rec: Hook, dur: Option<Durable>) -> Self {
        Recorder { rec, dur }
    }

    /// True for a durable world.
    pub(super) fn durable(&self) -> bool {
        self.dur.is_some()
    }

    /// The world was replaced by one built from `scenario` (load, reset, a recording's re-base).
    pub(super) fn replaced(&mut self, world_name: &str, scenario: &Scenario, max_agents: usize, max_spawn: usize) {
        self.rec.started(world_name, scenario);
        if let Some(d) = self.dur.as_mut() {
            d.started(&crate::persist::start_record(scenario, max_agents, max_spawn));
        }
    }

    /// A sim command, before it is applied.
    pub(super) fn command(&mut self, world: &World, cmd: &Command) {
        self.rec.command(world, cmd);
        if let Some(d) = self.dur.as_mut() {
            d.command(world, cmd);
        }
    }

    /// A tick-rate change.
    pub(super) fn tick_rate(&mut self, world: &World, rate: f32) {
        self.rec.tick_rate(world, rate);
        if let Some(d) = self.dur.as_mut() {
            d.tick_rate(world, rate);
        }
    }

    /// A pause or resume.
    pub(super) fn paused(&mut self, world: &World, paused: bool) {
        self.rec.paused(world, paused);
        if let Some(d) = self.dur.as_mut() {
            d.paused(world, paused);
        }
    }

    /// A step was taken.
    pub(super) fn after_step(&mut self, world: &World) {
        self.rec.after_step(world);
        if let Some(d) = self.dur.as_mut() {
            d.after_step(world);
        }
    }

    /// An agent's owner changed (the log keeps owners; the recording does not).
    pub(super) fn owner(&mut self, world: &World, agent: AgentId, player: Option<&str>, team: Option<&str>) {
        if let Some(d) = self.dur.as_mut() {
            d.owner(world, agent, player, team);
        }
    }

    /// The world's sessions as they are now (the log writes them when their set changed).
    pub(super) fn sessions(&mut self, world: &World, sessions: &[StoredSession]) {
        if let Some(d) = self.dur.as_mut() {
            d.sessions(world, sessions);
        }
    }

    /// A turn of the loop with no step: the log flushes what is due.
    pub(super) fn idle(&mut self, world: &World) {
        if let Some(d) = self.dur.as_mut() {
            d.idle(world);
        }
    }

    /// True when a durable world should take a snapshot (`now`: at once, if durable).
    pub(super) fn snapshot_due(&self, now: bool) -> bool {
        self.dur.as_ref().is_some_and(|d| now || d.snapshot_due())
    }

    /// Takes a durable world's snapshot.
    pub(super) fn snapshot(&mut self, world: &World, paused: bool, scenario_name: Option<&str>, state: RunnerState) {
        if let Some(d) = self.dur.as_mut() {
            d.snapshot(world, paused, scenario_name, state);
        }
    }

    /// Sends a command's answer: under `every_command` a durable world's writer sends it once
    /// the command's record is on disk; otherwise at once.
    pub(super) fn answer<T: Send + 'static>(&mut self, reply: Reply<T>, r: Result<T, CmdError>) {
        match self.dur.as_mut() {
            Some(d) => d.reply(Box::new(move || {
                let _ = reply.send(r);
            })),
            None => {
                let _ = reply.send(r);
            }
        }
    }

    /// The world thread stops: the log closes (`forget`: its stored state is deleted).
    pub(super) fn close_log(&mut self, world: &World, forget: bool) {
        if let Some(d) = self.dur.as_mut() {
            d.stop(world, forget);
        }
    }
}
