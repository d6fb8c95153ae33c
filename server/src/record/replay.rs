//! `steerd replay`: re-runs a recording headless as fast as the machine goes and checks every
//! recorded checkpoint.

use std::time::Instant;

use serde::Serialize;

use super::format::{Parsed, Record};
use super::{agent_digest, checkpoint};
use crate::scenario::Scenario;
use crate::sim::world::World;

/// Options of one replay.
#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Stop at the first divergence.
    pub verify: bool,
    /// Stop when the world of the first segment reaching it is at this tick.
    pub until: Option<u64>,
    /// Worker threads for the step (does not change the result).
    pub threads: usize,
    /// Compare only the last checkpoint of the records (each comparison hashes the whole
    /// world): what ends equal there is the state that ran, and a divergence is still found,
    /// at that checkpoint rather than the first one it shows at.
    pub last_check_only: bool,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions { verify: true, until: None, threads: 1, last_check_only: false }
    }
}

/// A checkpoint the replay does not reproduce.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Divergence {
    /// Segment (0 = from the file's start; +1 at every recorded load/reset).
    pub segment: usize,
    /// The world's tick at the checkpoint.
    pub tick: u64,
    /// Recorded and replayed `state_hash` / `exact_hash`, hex.
    pub recorded: String,
    pub replayed: String,
    /// The first agent (by id) whose state differs, when the recording has per-agent digests.
    pub agent: Option<String>,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "diverged at tick {} (segment {}): recorded {}, replayed {}", self.tick, self.segment, self.recorded, self.replayed)?;
        match &self.agent {
            Some(a) => write!(f, "; first differing agent: {a}"),
            None => write!(f, "; no per-agent digests in this recording (record with agent digests to name the agent)"),
        }
    }
}

/// What a replay did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayReport {
    /// Segments (world starts) replayed.
    pub segments: usize,
    /// Steps run in all.
    pub ticks: u64,
    /// Commands applied (and how many of them the sim refused, as it did live).
    pub commands: u64,
    pub commands_refused: u64,
    /// Checkpoints compared, and those that matched.
    pub checks: u64,
    pub checks_ok: u64,
    /// Checkpoints passed over ([`ReplayOptions::last_check_only`]).
    pub checks_skipped: u64,
    /// Divergences found (at most one with `verify`).
    pub divergences: Vec<Divergence>,
    /// `state_hash` of the final state, hex.
    pub final_state_hash: String,
    /// The final world tick.
    pub final_tick: u64,
    /// Wall time, seconds, and simulated time over wall time.
    pub seconds: f64,
    pub realtime_factor: f64,
    /// The recording's `End` (tick, reason), absent if the recording was cut off.
    pub end: Option<(u64, String)>,
    /// A torn or corrupt tail that was ignored (bytes, reason).
    pub torn: Option<(usize, String)>,
    /// Stopped at `--until`.
    pub stopped_at_until: bool,
}

/// Why a replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file does not start with a `Start` record.
    #[error("the recording has no start record")]
    NoStart,
    /// The start scenario does not build.
    #[error("segment {0}: the recorded scenario does not build: {1}")]
    Scenario(usize, String),
    /// Records out of order.
    #[error("segment {segment}: a record at tick {tick} follows tick {now}")]
    TickBack { segment: usize, tick: u64, now: u64 },
    /// Worker threads.
    #[error("cannot start {0} worker threads: {1}")]
    Threads(usize, String),
    /// A tick-rate change the sim refuses (the recording is corrupt).
    #[error("segment {0}: {1}")]
    Sim(usize, String),
}

struct Run<'a> {
    pool: rayon::ThreadPool,
    world: Option<World>,
    segment: usize,
    report: ReplayReport,
    until: Option<u64>,
    sim_seconds: f64,
    on_until: &'a mut dyn FnMut(&World, &Scenario),
    scenario: Option<Scenario>,
}

impl Run<'_> {
    /// Replays one record; false when the run stops there (`--until` reached, or with
    /// `verify` the first divergence). A checkpoint is compared only with `compare`.
    fn record(&mut self, rec: &Record, verify: bool, compare: bool) -> Result<bool, ReplayError> {
        match rec {
            Record::Start { max_agents, max_spawn, scenario, .. } => {
                self.start_segment(scenario, *max_agents, *max_spawn)?;
                self.advance_to(0)
            }
            Record::Command { tick, command } => {
                if !self.advance_to(*tick)? {
                    return Ok(false);
                }
                if let Some(w) = self.world.as_mut() {
                    self.report.commands += 1;
                    // Refused commands leave the world unchanged, here as they did live.
                    if w.apply(command.clone()).is_err() {
                        self.report.commands_refused += 1;
                    }
                }
                Ok(true)
            }
            Record::TickRate { tick, rate } => {
                if !self.advance_to(*tick)? {
                    return Ok(false);
                }
                if let Some(w) = self.world.as_mut() {
                    w.set_tick_rate(*rate).map_err(|e| ReplayError::Sim(self.segment, e.to_string()))?;
                }
                Ok(true)
            }
            Record::Paused { tick, .. } => self.advance_to(*tick),
            Record::Check { tick, state_hash, exact_hash, agents } => {
                if !self.advance_to(*tick)? {
                    return Ok(false);
                }
                if !compare {
                    self.report.checks_skipped += 1;
                    return Ok(true);
                }
                let diverged = self.check(*tick, (*state_hash, *exact_hash), agents)?;
                Ok(!(diverged && verify))
            }
            Record::End { tick, reason } => {
                if !self.advance_to(*tick)? {
                    return Ok(false);
                }
                self.report.end = Some((*tick, reason.clone()));
                Ok(true)
            }
            // Ownership and sessions are the runtime's: they change nothing in the sim.
            Record::Owner { .. } | Record::Sessions { .. } => Ok(true),
        }
    }

    /// A `Start` record: a new segment, its world built from the recorded scenario and caps.
    fn start_segment(&mut self, scenario: &str, max_agents: u64, max_spawn: u64) -> Result<(), ReplayError> {
        if self.world.is_some() {
            self.segment += 1;
            // `--until` names a tick of the first segment that reaches it.
        }
        let sc = Scenario::from_stored_json(scenario).map_err(|e| ReplayError::Scenario(self.segment, e.to_string()))?;
        let caps = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let w = sc.build_capped(caps(max_agents), caps(max_spawn)).map_err(|e| ReplayError::Scenario(self.segment, e.to_string()))?;
        self.world = Some(w);
        self.scenario = Some(sc);
        self.report.segments += 1;
        Ok(())
    }

    /// A checkpoint: the world's hashes against the recorded (state, exact) ones; a divergence
    /// is reported with the first agent that differs (when digests were recorded). Answers
    /// whether it diverged.
    fn check(&mut self, tick: u64, (state_hash, exact_hash): (u64, u64), agents: &[(u32, u32)]) -> Result<bool, ReplayError> {
        let Some(w) = self.world.as_ref() else { return Err(ReplayError::NoStart) };
        self.report.checks += 1;
        let Record::Check { state_hash: sh, exact_hash: eh, .. } = checkpoint(w, false) else { return Ok(false) };
        if sh == state_hash && eh == exact_hash {
            self.report.checks_ok += 1;
            return Ok(false);
        }
        let agent = (!agents.is_empty()).then(|| first_differing_agent(w, agents)).flatten();
        self.report.divergences.push(Divergence {
            segment: self.segment,
            tick,
            recorded: format!("state_hash {state_hash:016x} exact_hash {exact_hash:016x}"),
            replayed: format!("state_hash {sh:016x} exact_hash {eh:016x}"),
            agent,
        });
        Ok(true)
    }

    /// Steps to `tick`; false when `--until` stopped the run.
    fn advance_to(&mut self, tick: u64) -> Result<bool, ReplayError> {
        let Some(w) = self.world.as_mut() else { return Err(ReplayError::NoStart) };
        if tick < w.tick() {
            return Err(ReplayError::TickBack { segment: self.segment, tick, now: w.tick() });
        }
        while w.tick() < tick {
            if self.until.is_some_and(|u| w.tick() >= u) {
                break;
            }
            self.pool.install(|| w.step());
            // The fields the step requested are built now, in parallel on the pool, and handed
            // back before they are due, as the live server's builders do (a field is a pure
            // function of its job: when it is built changes nothing).
            let jobs = w.take_field_jobs();
            if !jobs.is_empty() {
                use rayon::prelude::*;
                let fields: Vec<_> = self.pool.install(|| jobs.par_iter().map(crate::sim::nav::FieldJob::build).collect());
                for f in fields {
                    w.deliver_field(f);
                }
            }
            drop(w.drain_events());
            self.report.ticks += 1;
            self.sim_seconds += f64::from(w.config().dt());
        }
        if let Some(u) = self.until
            && w.tick() >= u
        {
            if let Some(sc) = &self.scenario {
                (self.on_until)(w, sc);
            }
            self.report.stopped_at_until = true;
            return Ok(false);
        }
        Ok(true)
    }
}

/// Replays `parsed`. `on_until` sees the world when `--until` is reached.
pub fn replay(parsed: &Parsed, opts: &ReplayOptions, on_until: &mut dyn FnMut(&World, &Scenario)) -> Result<ReplayReport, ReplayError> {
    replay_keep(parsed, opts, on_until).map(|(report, _)| report)
}

/// Replays `parsed` and keeps the world where the replay ended, with the scenario of its last
/// segment (what a durable world's recovery continues from: `crate::persist`).
pub fn replay_keep(parsed: &Parsed, opts: &ReplayOptions, on_until: &mut dyn FnMut(&World, &Scenario)) -> Result<(ReplayReport, Option<(World, Scenario)>), ReplayError> {
    replay_onto(None, parsed, opts, on_until)
}

/// Replays `parsed` onto `from` (a world restored from a snapshot, with the scenario its last
/// `Start` built), or, with `None`, from the `Start` record `parsed` must begin with; keeps the
/// world where the replay ended. The records continue `from`'s log: none may be before its tick.
pub fn replay_onto(
    from: Option<(World, Scenario)>,
    parsed: &Parsed,
    opts: &ReplayOptions,
    on_until: &mut dyn FnMut(&World, &Scenario),
) -> Result<(ReplayReport, Option<(World, Scenario)>), ReplayError> {
    let threads = opts.threads.max(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| ReplayError::Threads(threads, e.to_string()))?;
    let (world, scenario) = from.map_or((None, None), |(w, s)| (Some(w), Some(s)));
    let resumed = world.is_some();
    let mut run = Run { pool, world, segment: 0, report: ReplayReport::default(), until: opts.until, sim_seconds: 0.0, on_until, scenario };
    if !resumed && !matches!(parsed.records.first(), Some(Record::Start { .. })) {
        return Err(ReplayError::NoStart);
    }
    if resumed {
        run.report.segments = 1;
    }
    let start = Instant::now();
    let last_check = parsed.records.iter().rposition(|r| matches!(r, Record::Check { .. }));
    for (i, rec) in parsed.records.iter().enumerate() {
        let compare = !opts.last_check_only || Some(i) == last_check;
        if !run.record(rec, opts.verify, compare)? {
            break;
        }
    }
    let mut report = run.report;
    report.seconds = start.elapsed().as_secs_f64();
    report.realtime_factor = if report.seconds > 0.0 { run.sim_seconds / report.seconds } else { 0.0 };
    if let Some(w) = &run.world {
        report.final_state_hash = format!("{:016x}", crate::sim::hash::state_hash(w));
        report.final_tick = w.tick();
    }
    report.torn = parsed.torn_reason.clone().map(|r| (parsed.torn_bytes, r));
    let kept = run.world.zip(run.scenario);
    Ok((report, kept))
}

/// The first agent (by id) whose digest differs from the recorded one, or who is missing on
/// either side.
pub(super) fn first_differing_agent(w: &World, recorded: &[(u32, u32)]) -> Option<String> {
    let now: Vec<(u32, u32)> = w.agents().iter().map(|a| (a.id, agent_digest(a))).collect();
    let (mut i, mut j) = (0, 0);
    while i < recorded.len() || j < now.len() {
        match (recorded.get(i), now.get(j)) {
            (Some(&(ri, rd)), Some(&(ni, nd))) if ri == ni => {
                if rd != nd {
                    let a = w.agent(ni)?;
                    return Some(format!(
                        "{ni} (replayed position ({}, {}), velocity ({}, {}))",
                        a.position.x, a.position.y, a.velocity.x, a.velocity.y
                    ));
                }
                i += 1;
                j += 1;
            }
            (Some(&(ri, _)), Some(&(ni, _))) if ri < ni => return Some(format!("{ri} (recorded, missing in the replay)")),
            (Some(_), Some(&(ni, _))) => return Some(format!("{ni} (in the replay, not recorded)")),
            (Some(&(ri, _)), None) => return Some(format!("{ri} (recorded, missing in the replay)")),
            (None, Some(&(ni, _))) => return Some(format!("{ni} (in the replay, not recorded)")),
            (None, None) => break,
        }
    }
    None
}

/// The state at a tick as `--snapshot` writes it: the agents' exact state, obstacles, walls,
/// and the state as a loadable scenario (positions only: see `snapshot_scenario`).
pub fn snapshot_json(w: &World, base: Option<&Scenario>) -> serde_json::Value {
    let agents: Vec<serde_json::Value> = w
        .agents()
        .iter()
        .map(|a| {
            serde_json::json!({
                "id": a.id,
                "group": w.groups().get(usize::from(a.group)).cloned().unwrap_or_default(),
                "position": [a.position.x, a.position.y],
                "velocity": [a.velocity.x, a.velocity.y],
                "orientation": a.orientation,
                "angular_velocity": a.angular_velocity,
            })
        })
        .collect();
    serde_json::json!({
        "tick": w.tick(),
        "state_hash": format!("{:016x}", crate::sim::hash::state_hash(w)),
        "agents": agents,
        "obstacles": w.obstacles().iter().map(|o| serde_json::json!({"id": o.id, "center": [o.center.x, o.center.y], "radius": o.radius})).collect::<Vec<_>>(),
        "walls": w.walls().iter().map(|x| serde_json::json!({"id": x.id, "a": [x.a.x, x.a.y], "b": [x.b.x, x.b.y]})).collect::<Vec<_>>(),
        "scenario": base.map(|b| crate::scenario::snapshot_scenario(w, b)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::codec::Enc;
    use crate::record::format::{self, parse};
    use crate::record::generate;
    use std::path::PathBuf;

    fn root() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("steerd-replay-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn verify(bytes: &[u8], threads: usize) -> ReplayReport {
        let p = parse(bytes).unwrap();
        replay(&p, &ReplayOptions { threads, ..ReplayOptions::default() }, &mut |_, _| {}).unwrap()
    }

    /// The shipped regression recordings still replay bit for bit: a change to the simulation
    /// that alters behaviour fails here and must be re-recorded on purpose
    /// (`cargo run --release -p steerd --example make_recordings`).
    #[test]
    fn shipped_regression_recordings_verify() {
        let regs = generate::regressions();
        assert!(regs.len() >= 3);
        for reg in regs {
            let path = root().join("tests/recordings").join(format!("{}.{}", reg.name, crate::record::EXT));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let r = verify(&bytes, 1);
            assert!(r.divergences.is_empty(), "{}: {}", reg.name, r.divergences[0]);
            assert!(r.checks >= 5 && r.checks == r.checks_ok, "{}: {r:?}", reg.name);
            assert!(r.commands >= 3, "{}: {r:?}", reg.name);
            assert!(r.end.is_some() && r.torn.is_none(), "{}: {r:?}", reg.name);
        }
    }

    /// Recording a world driven through its command path, then replaying it, reproduces every
    /// checkpoint, on one thread and on three, for every kind of start (scenario, mid-run
    /// snapshot with a reset after).
    #[test]
    fn a_fresh_recording_replays_exactly_on_any_thread_count() {
        for reg in generate::regressions().into_iter().filter(|r| r.name != "maze-moveto-orders") {
            let dir = tmp(reg.name);
            let bytes = generate::make(&reg, &root().join("scenarios"), &dir, 2).unwrap();
            let one = verify(&bytes, 1);
            let three = verify(&bytes, 3);
            assert!(one.divergences.is_empty() && one.checks > 0 && one.checks == one.checks_ok, "{}: {one:?}", reg.name);
            assert_eq!((one.final_state_hash.clone(), one.ticks), (three.final_state_hash.clone(), three.ticks), "{}", reg.name);
            assert!(three.divergences.is_empty(), "{}", reg.name);
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    fn rewrite(bytes: &[u8], f: impl Fn(&mut Record)) -> Vec<u8> {
        let p = parse(bytes).unwrap();
        let mut out = format::header().to_vec();
        let mut e = Enc::default();
        for mut r in p.records {
            f(&mut r);
            r.encode(&mut e);
        }
        out.extend(format::frame_chunk(&e.buf));
        out
    }

    /// A recording whose commands differ from what the replay's sim does diverges: `--verify`
    /// names the first checkpoint that differs and, with digests, the first differing agent.
    #[test]
    fn a_changed_command_diverges_at_the_next_checkpoint_and_names_the_agent() {
        let bytes = std::fs::read(root().join("tests/recordings/patrol-edits.rec")).unwrap();
        // Move the new obstacle elsewhere: the run the file describes is no longer the one
        // its checkpoints saw.
        let changed = rewrite(&bytes, |r| {
            if let Record::Command { command: crate::sim::world::Command::AddObstacle { center, .. }, .. } = r {
                center.x -= 30.0;
            }
        });
        let p = parse(&changed).unwrap();
        let r = replay(&p, &ReplayOptions::default(), &mut |_, _| {}).unwrap();
        assert_eq!(r.divergences.len(), 1, "{r:?}");
        let d = &r.divergences[0];
        let add_tick = p.records.iter().find_map(|r| match r {
            Record::Command { tick, command: crate::sim::world::Command::AddObstacle { .. } } => Some(*tick),
            _ => None,
        });
        assert!(d.tick > add_tick.unwrap(), "{d}");
        assert!(d.agent.as_deref().is_some_and(|a| a.contains("replayed position")), "{d}");
        // Without --verify the replay goes on and counts the rest.
        let r = replay(&p, &ReplayOptions { verify: false, ..ReplayOptions::default() }, &mut |_, _| {}).unwrap();
        assert!(r.divergences.len() > 1 && r.end.is_some(), "{r:?}");
        // Comparing the last checkpoint only (a durable world's recovery) finds it there.
        let last = p.records.iter().rev().find_map(|r| match r {
            Record::Check { tick, .. } => Some(*tick),
            _ => None,
        });
        let r = replay(&p, &ReplayOptions { last_check_only: true, ..ReplayOptions::default() }, &mut |_, _| {}).unwrap();
        assert_eq!((r.checks, r.checks_ok, r.divergences.len()), (1, 0, 1), "{r:?}");
        assert_eq!(Some(r.divergences[0].tick), last, "{r:?}");
        assert!(r.checks_skipped >= 5, "{r:?}");
        // The unchanged file matches there.
        let r = replay(&parse(&bytes).unwrap(), &ReplayOptions { last_check_only: true, ..ReplayOptions::default() }, &mut |_, _| {}).unwrap();
        assert_eq!((r.checks, r.checks_ok, r.divergences.len()), (1, 1, 0), "{r:?}");
    }

    #[test]
    fn until_hands_over_the_state_at_that_tick() {
        let bytes = std::fs::read(root().join("tests/recordings/patrol-edits.rec")).unwrap();
        let p = parse(&bytes).unwrap();
        let check60 = p.records.iter().find_map(|r| match r {
            Record::Check { tick: 60, state_hash, .. } => Some(*state_hash),
            _ => None,
        });
        let mut seen = None;
        let r = replay(&p, &ReplayOptions { until: Some(60), ..ReplayOptions::default() }, &mut |w, sc| {
            let v = snapshot_json(w, Some(sc));
            seen = Some((w.tick(), crate::sim::hash::state_hash(w), v["agents"].as_array().map(Vec::len)));
        })
        .unwrap();
        assert!(r.stopped_at_until && r.divergences.is_empty(), "{r:?}");
        let (tick, hash, agents) = seen.unwrap();
        assert_eq!(tick, 60);
        assert_eq!(Some(hash), check60);
        assert!(agents.unwrap_or(0) >= 30);
    }
}
