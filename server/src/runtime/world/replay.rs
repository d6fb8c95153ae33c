//! A read-only replay world's state on its thread: the recording it plays (keyframes, seeks,
//! verification against the recorded digests) and its playback speed.

use std::time::Instant;

use super::types::CmdError;
use super::views::{ReplayOp, ReplayView};
use crate::metrics::Metrics;
use crate::sim::{SimError, World};

pub(super) struct ReplayState {
    pub(super) player: Box<crate::record::player::Player>,
    pub(super) recording: String,
    pub(super) speed: f64,
    pub(super) max_speed: f64,
}

/// What a replay control did to the world.
pub(super) enum Control {
    /// Nothing but the state it answers with.
    Shown,
    /// Playback pauses (`true`) or plays (`false`).
    Paused(bool),
    /// The world jumped to another tick (`paused`: it stands at the recording's end). Its
    /// subscribers must resync.
    Sought { paused: bool },
}

impl ReplayState {
    /// A recording played from its start at speed 1.
    pub(super) fn new(player: Box<crate::record::player::Player>, recording: String, max_speed: f64) -> Self {
        ReplayState { player, recording, speed: 1.0, max_speed }
    }

    /// Counts the divergences found while the recording was opened (its keyframes built).
    pub(super) fn count_divergences(&self, metrics: &Metrics) {
        let d = self.player.verification().divergences;
        if d > 0 {
            metrics.replay_divergences.inc_by(d);
        }
    }

    /// One replay tick: the recording's next step (`run` steps the world). Answers `false`
    /// when playback must pause (the recording ended or failed).
    pub(super) fn advance(&mut self, world: &mut World, run: &mut impl FnMut(&mut World), metrics: &Metrics) -> bool {
        let start = Instant::now();
        let before = self.player.verification().divergences;
        let mut plays = match self.player.step_with(world, run) {
            Ok(more) => more,
            Err(e) => {
                tracing::error!("replay stopped: {e}");
                false
            }
        };
        if world.tick() >= self.player.end() {
            plays = false;
        }
        let diverged = self.player.verification().divergences - before;
        if diverged > 0 {
            metrics.replay_divergences.inc_by(diverged);
        }
        metrics.tick_seconds.observe(start.elapsed().as_secs_f64());
        plays
    }

    /// Carries out a replay control on `world` (a seek's events are drained: they are history).
    pub(super) fn control(&mut self, op: ReplayOp, world: &mut World, run: &mut impl FnMut(&mut World), metrics: &Metrics) -> Result<Control, CmdError> {
        match op {
            ReplayOp::Get => Ok(Control::Shown),
            ReplayOp::Pause => Ok(Control::Paused(true)),
            // At the end there is nothing left to play: it stays paused there.
            ReplayOp::Play => Ok(Control::Paused(world.tick() >= self.player.end())),
            ReplayOp::Speed(s) => {
                if !(s.is_finite() && s > 0.0 && s <= self.max_speed) {
                    return Err(CmdError::Sim(SimError::invalid("speed", format!("must be above 0 and at most {} (limits.replay_max_speed)", self.max_speed))));
                }
                self.speed = s;
                Ok(Control::Shown)
            }
            ReplayOp::Seek(t) => {
                let before = self.player.verification().divergences;
                let rep = self.player.seek_with(world, t, run).map_err(|e| CmdError::Invalid(e.to_string()))?;
                let diverged = self.player.verification().divergences - before;
                metrics.replay_divergences.inc_by(diverged);
                metrics.replay_seeks.inc();
                metrics.replay_seek_ticks.inc_by(rep.ticks_simulated);
                drop(world.drain_events());
                Ok(Control::Sought { paused: world.tick() >= self.player.end() })
            }
        }
    }

    /// The replay's state as REST shows it.
    pub(super) fn view(&self, world: &World, playing: bool) -> ReplayView {
        let p = &self.player;
        ReplayView {
            recording: self.recording.clone(),
            tick: world.tick(),
            end_tick: p.end(),
            playing,
            speed: self.speed,
            max_speed: self.max_speed,
            state_hash: format!("{:016x}", crate::sim::hash::state_hash(world)),
            keyframes: p.keyframes().len(),
            keyframe_interval: p.keyframes().interval(),
            keyframe_bytes: p.keyframes().bytes() as u64,
            open_ticks: p.open_ticks,
            seeks: p.seeks,
            seek_ticks: p.seek_ticks,
            last_seek: p.last_seek,
            verification: p.verification().clone(),
        }
    }

    /// The refusal of a change (`what`) to world `name`: it changes only as its recording says.
    pub(super) fn refusal(&self, name: &str, what: &str) -> CmdError {
        CmdError::ReadOnly(format!(
            "world `{name}` is a read-only replay of recording `{}`: {what} would change it (use /worlds/{name}/replay/seek, play, pause, speed)",
            self.recording
        ))
    }
}
