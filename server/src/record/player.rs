//! Replay worlds (issue 19): a recording played back as a read-only world, with seek, play,
//! pause and speed. This module is the part without threads or sockets: [`Player`] walks a
//! recording's records against a sim [`World`] owned by the caller (the world thread), and
//! [`KeyframeStore`] keeps forks of that world every K ticks so that a seek backwards costs at
//! most K ticks of simulation instead of a re-run from tick 0.
//!
//! The state at tick T is the state after T steps and every record before tick T (commands
//! and tick-rate changes recorded at tick T are applied on the way to T+1), which is what
//! `steerd replay --until T --snapshot` writes; the recorded checkpoint of tick T is compared
//! with it.

use std::sync::Arc;

use serde::Serialize;

use super::checkpoint;
use super::format::{Parsed, Record};
use super::replay::Divergence;
use crate::scenario::Scenario;
use crate::sim::world::World;

/// Replay-world settings (`limits.replay_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplaySettings {
    /// Ticks between keyframes (K): a seek simulates fewer than this many ticks, until the
    /// store has had to thin out (see [`KeyframeStore`]).
    pub keyframe_every: u64,
    /// Most keyframes kept per replay world.
    pub max_keyframes: usize,
    /// Most bytes of keyframes kept per replay world (estimated by [`World::fork_bytes`]).
    pub keyframe_max_bytes: usize,
    /// Fastest playback, as a multiple of the recorded tick rate.
    pub max_speed: f64,
}

impl From<&crate::config::LimitSettings> for ReplaySettings {
    fn from(l: &crate::config::LimitSettings) -> Self {
        ReplaySettings {
            keyframe_every: u64::from(l.replay_keyframe_every.max(1)),
            max_keyframes: l.replay_max_keyframes.max(1),
            keyframe_max_bytes: usize::try_from(l.replay_keyframe_max_bytes).unwrap_or(usize::MAX),
            max_speed: l.replay_max_speed,
        }
    }
}

impl Default for ReplaySettings {
    fn default() -> Self {
        ReplaySettings { keyframe_every: 100, max_keyframes: 64, keyframe_max_bytes: 256 << 20, max_speed: 16.0 }
    }
}

/// Keyframes at ticks 0, K, 2K, … (K = the current interval), at most `max` of them and at
/// most `max_bytes` together. When a new one would exceed either bound the store thins out:
/// it doubles its interval and drops the keyframes that are not on the new lattice (the one
/// at tick 0 always stays), so it keeps covering the whole recording at a coarser step and a
/// seek costs less than the (current) interval. A single keyframe larger than `max_bytes` is
/// still kept at tick 0 (there must be one to go back to).
#[derive(Debug)]
pub struct KeyframeStore<T> {
    interval: u64,
    max: usize,
    max_bytes: usize,
    frames: Vec<(u64, T, usize)>,
    bytes: usize,
    thinned: u32,
}

impl<T> KeyframeStore<T> {
    /// An empty store with interval `every` (≥ 1), at most `max` (≥ 1) keyframes and
    /// `max_bytes` bytes.
    pub fn new(every: u64, max: usize, max_bytes: usize) -> Self {
        KeyframeStore { interval: every.max(1), max: max.max(1), max_bytes, frames: Vec::new(), bytes: 0, thinned: 0 }
    }

    /// The current interval (K, doubled at every thinning).
    pub fn interval(&self) -> u64 {
        self.interval
    }

    /// Keyframes held.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Their bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Times the store doubled its interval.
    pub fn thinned(&self) -> u32 {
        self.thinned
    }

    /// True when a keyframe belongs at `tick` and is not there yet (ticks are added in
    /// increasing order).
    pub fn wants(&self, tick: u64) -> bool {
        tick % self.interval == 0 && self.frames.last().is_none_or(|f| f.0 < tick)
    }

    /// Adds the keyframe of `tick` (ignored unless [`KeyframeStore::wants`] it), then thins
    /// out while a bound is exceeded.
    pub fn insert(&mut self, tick: u64, value: T, bytes: usize) {
        if !self.wants(tick) {
            return;
        }
        self.frames.push((tick, value, bytes));
        self.bytes += bytes;
        while self.frames.len() > 1 && (self.frames.len() > self.max || self.bytes > self.max_bytes) {
            self.interval = self.interval.saturating_mul(2);
            self.thinned += 1;
            let interval = self.interval;
            self.frames.retain(|f| f.0 % interval == 0);
            self.bytes = self.frames.iter().map(|f| f.2).sum();
        }
    }

    /// The keyframe nearest at or before `tick`.
    pub fn at_or_before(&self, tick: u64) -> Option<(u64, &T)> {
        let i = self.frames.partition_point(|f| f.0 <= tick);
        i.checked_sub(1).and_then(|i| self.frames.get(i)).map(|f| (f.0, &f.1))
    }

    /// Ticks of the keyframes held.
    pub fn ticks(&self) -> Vec<u64> {
        self.frames.iter().map(|f| f.0).collect()
    }
}

/// Why a recording cannot be opened as a replay world.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Not a start.
    #[error("the recording has no start record")]
    NoStart,
    /// More than one segment.
    #[error(
        "the recording has {0} segments (a load or reset of the recorded world started a new one): a replay world plays single-segment recordings only; `steerd replay FILE` replays every segment"
    )]
    Segments(usize),
    /// The start scenario does not build.
    #[error("the recorded scenario does not build: {0}")]
    Scenario(String),
    /// Records out of order.
    #[error("a record at tick {tick} follows tick {now}: the recording is corrupt")]
    TickBack { tick: u64, now: u64 },
    /// A recorded tick-rate change the sim refuses.
    #[error("recorded tick-rate change at tick {0}: {1}")]
    TickRate(u64, String),
}

/// The result of a seek.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct SeekReport {
    /// The tick asked for.
    pub asked: u64,
    /// The tick reached (clamped to the end).
    pub tick: u64,
    /// The tick the simulation restarted from: a keyframe, or the current tick when that was
    /// nearer.
    pub from: u64,
    /// Ticks simulated for the seek (less than the keyframe interval).
    pub ticks_simulated: u64,
}

/// Counters of checkpoint verification.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Verification {
    /// Recorded checkpoints compared (each counted once).
    pub checks: u64,
    /// Of those, reproduced exactly.
    pub checks_ok: u64,
    /// Divergences seen (counted once per checkpoint tick).
    pub divergences: u64,
    /// The first divergences (at most [`MAX_DIVERGENCES_KEPT`]).
    pub first_divergences: Vec<Divergence>,
}

/// Divergences kept in full for `GET /worlds/{w}`.
pub const MAX_DIVERGENCES_KEPT: usize = 8;

/// A keyframe: the world and the index of the first record not yet applied to it.
pub struct Keyframe {
    world: World,
    cursor: usize,
}

/// Plays a single-segment recording against a world the caller owns.
pub struct Player {
    records: Arc<Vec<Record>>,
    cursor: usize,
    end: u64,
    keyframes: KeyframeStore<Keyframe>,
    verification: Verification,
    /// Checkpoints up to this tick were counted (later passes only look for divergences).
    verified_to: Option<u64>,
    /// Ticks simulated while opening (building keyframes and checking every checkpoint).
    pub open_ticks: u64,
    /// Ticks simulated by seeks, in all.
    pub seek_ticks: u64,
    /// Seeks served.
    pub seeks: u64,
    /// The last seek.
    pub last_seek: Option<SeekReport>,
    /// Per-agent digests are in the checkpoints.
    digests: bool,
    scenario: Scenario,
}

impl Player {
    /// Opens `parsed`: builds its start with the recorded caps, runs it to its end once,
    /// keeping a keyframe every `settings.keyframe_every` ticks and comparing every recorded
    /// checkpoint, and leaves the world at tick 0. Answers the player and the world.
    pub fn open(parsed: Parsed, settings: &ReplaySettings) -> Result<(Player, World), OpenError> {
        let mut records = parsed.records;
        let segments = records.iter().filter(|r| matches!(r, Record::Start { .. })).count();
        if segments > 1 {
            return Err(OpenError::Segments(segments));
        }
        if !matches!(records.first(), Some(Record::Start { .. })) {
            return Err(OpenError::NoStart);
        }
        let Record::Start { max_agents, max_spawn, digests, scenario, .. } = records.remove(0) else { return Err(OpenError::NoStart) };
        let sc = Scenario::from_stored_json(&scenario).map_err(|e| OpenError::Scenario(e.to_string()))?;
        let caps = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let mut world = sc.build_capped(caps(max_agents), caps(max_spawn)).map_err(|e| OpenError::Scenario(e.to_string()))?;
        let mut last = 0;
        for r in &records {
            let t = record_tick(r);
            if t < last {
                return Err(OpenError::TickBack { tick: t, now: last });
            }
            last = t;
        }
        let end = last;
        let mut p = Player {
            records: Arc::new(records),
            cursor: 0,
            end,
            keyframes: KeyframeStore::new(settings.keyframe_every, settings.max_keyframes, settings.keyframe_max_bytes),
            verification: Verification::default(),
            verified_to: None,
            open_ticks: 0,
            seek_ticks: 0,
            seeks: 0,
            last_seek: None,
            digests,
            scenario: sc,
        };
        p.settle(&mut world)?;
        p.keep(&world);
        let (first, cursor0) = (world.fork(), p.cursor);
        while world.tick() < p.end {
            p.step(&mut world)?;
            p.open_ticks += 1;
        }
        // Back to the start (the keyframe of tick 0 is this state too).
        p.cursor = cursor0;
        Ok((p, first))
    }

    /// The last tick of the recording.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Checkpoint verification so far.
    pub fn verification(&self) -> &Verification {
        &self.verification
    }

    /// The keyframes.
    pub fn keyframes(&self) -> &KeyframeStore<Keyframe> {
        &self.keyframes
    }

    /// The recording's start scenario.
    pub fn scenario(&self) -> &Scenario {
        &self.scenario
    }

    /// Applies the records due at the world's tick before it steps (commands and tick-rate
    /// changes of ticks before now, and the checkpoints of now).
    fn settle(&mut self, world: &mut World) -> Result<(), OpenError> {
        let records = self.records.clone();
        while let Some(r) = records.get(self.cursor) {
            let t = record_tick(r);
            let now = world.tick();
            let due = t < now || (t == now && matches!(r, Record::Check { .. }));
            if !due {
                break;
            }
            self.apply(world, r)?;
            self.cursor += 1;
        }
        Ok(())
    }

    fn apply(&mut self, world: &mut World, r: &Record) -> Result<(), OpenError> {
        match r {
            // Refused commands leave the world unchanged, here as they did live.
            Record::Command { command, .. } => drop(world.apply(command.clone())),
            Record::TickRate { tick, rate } => world.set_tick_rate(*rate).map_err(|e| OpenError::TickRate(*tick, e.to_string()))?,
            Record::Check { tick, state_hash, exact_hash, agents } => self.check(world, *tick, *state_hash, *exact_hash, agents),
            Record::Start { .. } | Record::Paused { .. } | Record::End { .. } | Record::Owner { .. } | Record::Sessions { .. } => {}
        }
        Ok(())
    }

    /// Compares a recorded checkpoint. The first pass over a checkpoint counts it; a later pass
    /// (after a seek) that diverges where the first did not is counted too, as long as the
    /// kept list has room to tell it apart.
    fn check(&mut self, world: &World, tick: u64, state_hash: u64, exact_hash: u64, agents: &[(u32, u32)]) {
        let first_time = self.verified_to.is_none_or(|v| tick > v);
        let Record::Check { state_hash: sh, exact_hash: eh, .. } = checkpoint(world, false) else { return };
        let ok = sh == state_hash && eh == exact_hash;
        if first_time {
            self.verified_to = Some(tick);
            self.verification.checks += 1;
            if ok {
                self.verification.checks_ok += 1;
            }
        }
        let kept = &self.verification.first_divergences;
        if ok || kept.iter().any(|d| d.tick == tick) || (!first_time && kept.len() >= MAX_DIVERGENCES_KEPT) {
            return;
        }
        self.verification.divergences += 1;
        if self.verification.first_divergences.len() < MAX_DIVERGENCES_KEPT {
            let agent = (self.digests && !agents.is_empty()).then(|| super::replay::first_differing_agent(world, agents)).flatten();
            self.verification.first_divergences.push(Divergence {
                segment: 0,
                tick,
                recorded: format!("state_hash {state_hash:016x} exact_hash {exact_hash:016x}"),
                replayed: format!("state_hash {sh:016x} exact_hash {eh:016x}"),
                agent,
            });
        }
    }

    fn keep(&mut self, world: &World) {
        if self.keyframes.wants(world.tick()) {
            let bytes = world.fork_bytes();
            self.keyframes.insert(world.tick(), Keyframe { world: world.fork(), cursor: self.cursor }, bytes);
        }
    }

    /// Steps the world once, with the records due before and after; keeps a keyframe when
    /// one is due. False (and nothing done) at the end of the recording.
    pub fn step(&mut self, world: &mut World) -> Result<bool, OpenError> {
        self.step_with(world, &mut |w: &mut World| {
            let _ = w.step();
        })
    }

    /// [`Player::step`] with the sim step run by `run` (e.g. on a thread pool).
    pub fn step_with(&mut self, world: &mut World, run: &mut dyn FnMut(&mut World)) -> Result<bool, OpenError> {
        if world.tick() >= self.end {
            return Ok(false);
        }
        // Everything recorded at this tick applies before the step.
        let records = self.records.clone();
        while let Some(r) = records.get(self.cursor).filter(|r| record_tick(r) <= world.tick()) {
            self.apply(world, r)?;
            self.cursor += 1;
        }
        run(world);
        // Replay worlds build their flow fields on the tick (no builder: a fork shares no
        // job with anyone), which gives the same fields.
        drop(world.take_field_jobs());
        self.settle(world)?;
        self.keep(world);
        Ok(true)
    }

    /// Moves the world to `tick` (clamped to the end): from the current state when it is
    /// behind `tick` and no keyframe is nearer, else from the nearest keyframe at or before
    /// `tick`.
    pub fn seek(&mut self, world: &mut World, tick: u64) -> Result<SeekReport, OpenError> {
        self.seek_with(world, tick, &mut |w: &mut World| {
            let _ = w.step();
        })
    }

    /// [`Player::seek`] with the sim steps run by `run`.
    pub fn seek_with(&mut self, world: &mut World, tick: u64, run: &mut dyn FnMut(&mut World)) -> Result<SeekReport, OpenError> {
        let target = tick.min(self.end);
        let here = world.tick();
        let key = self.keyframes.at_or_before(target).map(|(t, _)| t);
        let from_here = here <= target && key.is_none_or(|k| k <= here);
        if !from_here {
            if let Some((_, k)) = self.keyframes.at_or_before(target) {
                *world = k.world.fork();
                self.cursor = k.cursor;
            }
        }
        let from = world.tick();
        let mut simulated = 0;
        while world.tick() < target && self.step_with(world, run)? {
            simulated += 1;
        }
        let report = SeekReport { asked: tick, tick: world.tick(), from, ticks_simulated: simulated };
        self.seeks += 1;
        self.seek_ticks += simulated;
        self.last_seek = Some(report);
        Ok(report)
    }
}

/// The tick a record belongs to.
fn record_tick(r: &Record) -> u64 {
    match r {
        Record::Start { .. } => 0,
        Record::Command { tick, .. } | Record::TickRate { tick, .. } | Record::Paused { tick, .. } | Record::Check { tick, .. } | Record::End { tick, .. } | Record::Owner { tick, .. } | Record::Sessions { tick, .. } => *tick,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::format::parse;
    use crate::sim::hash::{exact_hash, state_hash};
    use std::path::PathBuf;

    fn recording(name: &str) -> Parsed {
        let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/recordings").join(name);
        parse(&std::fs::read(&p).unwrap()).unwrap()
    }

    #[test]
    fn keyframe_store_keeps_its_bounds_by_thinning_and_keeps_tick_zero() {
        let mut s: KeyframeStore<u64> = KeyframeStore::new(10, 4, usize::MAX);
        for t in 0..=100 {
            s.insert(t, t, 1);
            assert!(s.len() <= 4, "tick {t}: {:?}", s.ticks());
        }
        // 0,10,20,30 fit; 40 doubles to 20 (0,20,40); 60 fits (4); 80 doubles to 40 (0,40,80);
        // 100 is not on the lattice of 40.
        assert_eq!(s.interval(), 40);
        assert_eq!(s.ticks(), vec![0, 40, 80]);
        assert_eq!(s.thinned(), 2);
        // Byte bound: keyframes of 30 bytes, at most 100 bytes.
        let mut b: KeyframeStore<()> = KeyframeStore::new(5, 1000, 100);
        for t in (0..=50).step_by(5) {
            b.insert(t, (), 30);
            assert!(b.bytes() <= 100, "tick {t}: {} bytes", b.bytes());
        }
        assert_eq!(b.ticks().first(), Some(&0));
        // One keyframe larger than the budget still stays at tick 0.
        let mut one: KeyframeStore<()> = KeyframeStore::new(5, 10, 10);
        one.insert(0, (), 50);
        one.insert(5, (), 50);
        assert_eq!(one.ticks(), vec![0]);
    }

    #[test]
    fn keyframe_store_finds_the_nearest_at_or_before() {
        let mut s: KeyframeStore<u64> = KeyframeStore::new(10, 100, usize::MAX);
        for t in [0, 10, 20, 30] {
            s.insert(t, t * 2, 1);
        }
        // Off the lattice, repeated, or out of order: ignored.
        s.insert(25, 0, 1);
        s.insert(30, 0, 1);
        s.insert(10, 0, 1);
        assert_eq!(s.ticks(), vec![0, 10, 20, 30]);
        assert_eq!(s.at_or_before(0).map(|(t, v)| (t, *v)), Some((0, 0)));
        assert_eq!(s.at_or_before(9).map(|(t, _)| t), Some(0));
        assert_eq!(s.at_or_before(10).map(|(t, v)| (t, *v)), Some((10, 20)));
        assert_eq!(s.at_or_before(29).map(|(t, _)| t), Some(20));
        assert_eq!(s.at_or_before(1000).map(|(t, _)| t), Some(30));
        let e: KeyframeStore<u64> = KeyframeStore::new(10, 100, usize::MAX);
        assert!(e.at_or_before(5).is_none());
    }

    /// A fork continues exactly as the original (MoveTo orders with flow fields pending, RNG,
    /// velocities): maze-moveto-orders forked mid-run and both run to the end.
    #[test]
    fn a_forked_world_continues_bit_identically() {
        let settings = ReplaySettings { keyframe_every: 1000, ..ReplaySettings::default() };
        let (mut p, mut w) = Player::open(recording("maze-moveto-orders.rec"), &settings).unwrap();
        p.seek(&mut w, 37).unwrap();
        let (mut copy, cursor) = (w.fork(), p.cursor);
        let run = |p: &mut Player, w: &mut World| {
            let mut states = Vec::new();
            while p.step(w).unwrap() {
                states.push((w.tick(), state_hash(w), exact_hash(w)));
            }
            states
        };
        let original = run(&mut p, &mut w);
        p.cursor = cursor;
        let forked = run(&mut p, &mut copy);
        assert_eq!(original.len() as u64, p.end() - 37);
        assert_eq!(original, forked);
        assert_eq!(p.verification().divergences, 0);
    }

    /// Every checkpoint of the shipped recordings is reproduced while opening; the world then
    /// stands at tick 0 with a keyframe every K ticks.
    #[test]
    fn opening_verifies_every_checkpoint_and_keeps_keyframes_every_k() {
        for name in ["patrol-edits.rec", "maze-moveto-orders.rec"] {
            let settings = ReplaySettings { keyframe_every: 25, ..ReplaySettings::default() };
            let (p, w) = Player::open(recording(name), &settings).unwrap();
            let v = p.verification();
            assert!(v.checks >= 5 && v.checks == v.checks_ok && v.divergences == 0, "{name}: {v:?}");
            assert_eq!(w.tick(), 0);
            assert_eq!(p.open_ticks, p.end());
            let expect: Vec<u64> = (0..=p.end()).step_by(25).collect();
            assert_eq!(p.keyframes().ticks(), expect, "{name}");
        }
    }

    /// A seek lands on the recorded checkpoint's state, simulates less than K ticks, restarts
    /// from the nearest keyframe at or before the target (or from here going forward), and
    /// clamps past the end.
    #[test]
    fn seeks_are_exact_and_cost_less_than_k_ticks() {
        let parsed = recording("patrol-edits.rec");
        let checks: Vec<(u64, u64)> = parsed.records.iter().filter_map(|r| if let Record::Check { tick, state_hash, .. } = r { Some((*tick, *state_hash)) } else { None }).collect();
        let (mut p, mut w) = Player::open(parsed, &ReplaySettings { keyframe_every: 25, ..ReplaySettings::default() }).unwrap();
        // Backward and forward, in a scrambled order.
        let mut order = checks.clone();
        order.reverse();
        order.swap(1, 4);
        for (tick, hash) in order {
            let r = p.seek(&mut w, tick).unwrap();
            assert_eq!((r.tick, w.tick()), (tick, tick));
            assert_eq!(state_hash(&w), hash, "state at {tick}");
            assert!(r.ticks_simulated < 25, "{r:?}");
            assert!(r.from <= tick && tick - r.from == r.ticks_simulated, "{r:?}");
        }
        // From tick 160 to 170: forward from here (10 ticks), not from keyframe 150 (20).
        p.seek(&mut w, 160).unwrap();
        let r = p.seek(&mut w, 170).unwrap();
        assert_eq!((r.from, r.ticks_simulated), (160, 10));
        // Back from 170 to 151: keyframe 150.
        let r = p.seek(&mut w, 151).unwrap();
        assert_eq!((r.from, r.ticks_simulated), (150, 1));
        let r = p.seek(&mut w, 1_000_000).unwrap();
        assert_eq!((r.tick, w.tick()), (p.end(), p.end()));
        assert!(!p.step(&mut w).unwrap(), "no step past the end");
        assert_eq!(p.verification().divergences, 0);
    }

    #[test]
    fn multi_segment_recordings_are_refused_naming_why() {
        let Err(e) = Player::open(recording("crossing-midrun.rec"), &ReplaySettings::default()) else { panic!("opened") };
        assert!(e.to_string().contains("2 segments"), "{e}");
    }

    /// A recording whose checkpoints the replay does not reproduce is reported, not ignored.
    #[test]
    fn a_divergence_is_reported() {
        let mut parsed = recording("patrol-edits.rec");
        for r in &mut parsed.records {
            if let Record::Check { tick: 100, state_hash, .. } = r {
                *state_hash ^= 1;
            }
        }
        let (mut p, mut w) = Player::open(parsed, &ReplaySettings::default()).unwrap();
        let v = p.verification().clone();
        assert_eq!(v.divergences, 1, "{v:?}");
        assert_eq!(v.first_divergences[0].tick, 100);
        assert_eq!(v.checks, v.checks_ok + 1);
        // Playing over it again does not count it twice.
        p.seek(&mut w, 120).unwrap();
        assert_eq!(p.verification().divergences, 1);
    }
}
