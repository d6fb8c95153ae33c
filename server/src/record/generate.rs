//! Makes recordings by driving a real world thread through its command path (the same
//! requests REST and WebSocket send): used by the regression-recording generator
//! (`cargo run --release -p steerd --example make_recordings`) and by tests.

use std::path::Path;
use std::sync::Arc;

use glam::Vec2;

use super::{RecordHub, RecordSettings};
use crate::config::LimitSettings;
use crate::metrics::Metrics;
use crate::runtime::world::{Actor, Request};
use crate::runtime::{CmdError, Registry};
use crate::scenario::{RandomObstacles, Scenario};
use crate::sim::world::Command;

/// One step of a script.
#[derive(Debug, Clone)]
pub enum Step {
    /// Run this many ticks (the world is paused otherwise, so ticks are exact).
    Run(u32),
    /// A sim command as an admin sends it.
    Cmd(Command),
    /// A sim command whose agents are given by index into the world's agents (id order),
    /// resolved when the step runs (ids depend on what ran before).
    CmdOn(Vec<usize>, fn(&[u32]) -> Command),
    /// Change the tick rate.
    TickRate(f32),
    /// Pause (recorded, no effect on the state; the world is paused already, so no tick runs
    /// on the clock).
    Pause,
    /// Random obstacles (their placement is recorded as the obstacles added).
    RandomObstacles(RandomObstacles),
    /// Start recording now (`PATCH {"recording": true}`).
    StartRecording { digests: bool },
    /// Back to the scenario (a new segment in the recording).
    Reset,
}

/// Why a script failed.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    /// The world refused a request.
    #[error("step {0}: {1}")]
    Cmd(usize, CmdError),
    /// Setup.
    #[error("{0}")]
    Setup(String),
}

/// Runs `script` on a world built from `scenario` (recording from its start if
/// `scenario.recording`), with recordings written to `dir`; returns the recording's bytes.
pub fn run_script(dir: &Path, scenario: Scenario, script: &[Step], threads: usize, digests: bool) -> Result<Vec<u8>, GenerateError> {
    let setup = |e: &dyn std::fmt::Display| GenerateError::Setup(e.to_string());
    let settings = RecordSettings { agent_digests: digests, ..RecordSettings::default() };
    let hub = RecordHub::start(dir, settings, false).map_err(|e| setup(&e))?;
    let limits = LimitSettings { sim_threads: threads, parallel_step_min_agents: if threads > 1 { 1 } else { 20_000 }, ..LimitSettings::default() };
    let players = Arc::new(crate::runtime::Players::new(crate::config::AuthSettings::default(), 0));
    let reg = Registry::new(limits, crate::config::PlayerSettings::default(), players, Arc::new(Metrics::new()))
        .map_err(|e| setup(&e))?
        .with_recorder(hub.clone());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| setup(&e))?;
    let w = reg.create("gen", scenario, None, true).map_err(|e| setup(&e))?;
    let admin = Actor::admin();
    let name = rt.block_on(async {
        for (i, s) in script.iter().enumerate() {
            let err = |e| GenerateError::Cmd(i, e);
            match s {
                Step::Run(n) => {
                    w.ask(|reply| Request::Step { ticks: *n, reply }).await.map_err(err)?;
                }
                Step::Cmd(c) => {
                    // Refusals are part of a run too (recorded, and refused again on replay).
                    let _ = w.apply(c.clone(), admin.clone()).await;
                }
                Step::CmdOn(idx, make) => {
                    let agents = w.ask(|reply| Request::Agents { limit: usize::MAX, stuck: false, sight: crate::authz::Sight::All, reply }).await.map_err(err)?;
                    let ids: Vec<u32> = idx.iter().filter_map(|&k| agents.get(k).map(|a| a.id)).collect();
                    let _ = w.apply(make(&ids), admin.clone()).await;
                }
                Step::TickRate(r) => {
                    w.ask(|reply| Request::Patch { tick_rate: Some(*r), paused: None, autosave: None, reply }).await.map_err(err)?;
                }
                Step::Pause => {
                    w.ask(|reply| Request::Patch { tick_rate: None, paused: Some(true), autosave: None, reply }).await.map_err(err)?;
                }
                Step::RandomObstacles(spec) => {
                    let spec = *spec;
                    w.ask(|reply| Request::RandomObstacles { spec, reply }).await.map_err(err)?;
                }
                Step::StartRecording { digests } => {
                    w.ask(|reply| Request::Recording { on: true, digests: Some(*digests), reply }).await.map_err(err)?;
                }
                Step::Reset => {
                    w.ask(|reply| Request::Reset { reply }).await.map_err(err)?;
                }
            }
        }
        let info = w.ask(|reply| Request::Recording { on: false, digests: None, reply }).await.map_err(|e| GenerateError::Cmd(script.len(), e))?;
        Ok::<_, GenerateError>(info.recording.name)
    })?;
    w.shutdown();
    if !hub.drain(std::time::Duration::from_secs(10)) {
        return Err(GenerateError::Setup("the recording writer did not finish".into()));
    }
    let name = name.ok_or_else(|| GenerateError::Setup("the world did not record".into()))?;
    let path = hub.path_of(&name).ok_or_else(|| GenerateError::Setup(format!("bad name {name}")))?;
    std::fs::read(&path).map_err(|e| setup(&e))
}

/// A point.
pub fn p(x: f32, y: f32) -> Vec2 {
    Vec2::new(x, y)
}

/// A regression recording: its file name in `tests/recordings/`, the shipped scenario it starts
/// from, whether recording starts with the world (else mid-run, from a snapshot), and the script.
pub struct Regression {
    /// File stem.
    pub name: &'static str,
    /// Shipped scenario (file stem in `scenarios/`).
    pub scenario: &'static str,
    /// Record from the world's start (the scenario flag) rather than by a request mid-run.
    pub from_start: bool,
    /// Per-agent digests at checkpoints (for recordings started with the world).
    pub digests: bool,
    /// What happens.
    pub script: Vec<Step>,
}

/// The shipped regression recordings (re-made on purpose by the `make_recordings` example).
pub fn regressions() -> Vec<Regression> {
    use crate::sim::behaviors::{Behavior, BehaviorEntry, Target, arrive, seek, separation, wander};
    use crate::sim::world::{SpawnArea, SpawnSpec};
    let entry = |b: Behavior| BehaviorEntry { behavior: b, weight: 1.0, priority: 0 };
    let seek_to = |x: f32, y: f32| entry(Behavior::Seek(seek::SeekParams { target: Target::Point(p(x, y)) }));
    vec![
        Regression {
            name: "patrol-edits",
            scenario: "patrol",
            from_start: true,
            digests: true,
            script: vec![
                Step::Run(40),
                Step::Cmd(Command::Spawn(SpawnSpec {
                    behaviors: vec![
                        entry(Behavior::Wander(wander::WanderParams::default())),
                        entry(Behavior::Separation(separation::SeparationParams { neighbor_radius: 2.0 })),
                    ],
                    ..SpawnSpec::new("visitors", 12, SpawnArea::Rect { min: p(60.0, 10.0), max: p(90.0, 30.0) })
                })),
                Step::Run(30),
                Step::CmdOn(vec![0, 1, 2, 3, 4, 5], |ids| Command::MoveTo { agents: ids.to_vec(), target: Vec2::new(120.0, 40.0), stopping_distance: 1.0 }),
                Step::Cmd(Command::AddObstacle { center: p(80.0, 45.0), radius: 4.0 }),
                Step::Run(40),
                Step::CmdOn(vec![7], |ids| Command::Despawn(ids[0])),
                Step::CmdOn(vec![8], |ids| Command::SetBehaviors {
                    agent: ids[0],
                    entries: vec![BehaviorEntry {
                        behavior: Behavior::Arrive(arrive::ArriveParams { target: Target::Point(Vec2::new(20.0, 20.0)), tuning: arrive::ArriveTuning::default() }),
                        weight: 1.0,
                        priority: 0,
                    }],
                }),
                Step::CmdOn(vec![9], |ids| Command::RemoveBehavior { agent: ids[0], kind: crate::sim::behaviors::BehaviorKind::Separation }),
                Step::Cmd(Command::AddWall { a: p(100.0, 10.0), b: p(100.0, 30.0) }),
                Step::TickRate(30.0),
                Step::Run(40),
                Step::Cmd(Command::MoveObstacle { id: 1, center: p(85.0, 50.0), radius: Some(5.0) }),
                Step::Pause,
                Step::Cmd(Command::RemoveWall(2)),
                Step::Cmd(Command::Despawn(999_999)),
                Step::Run(50),
            ],
        },
        Regression {
            name: "maze-moveto-orders",
            scenario: "maze-moveto",
            from_start: true,
            digests: false,
            script: vec![
                Step::Run(60),
                Step::CmdOn((0..40).collect(), |ids| Command::MoveTo { agents: ids.to_vec(), target: Vec2::new(10.0, 10.0), stopping_distance: 1.0 }),
                Step::Run(40),
                Step::CmdOn(vec![45, 46], |ids| Command::AddBehavior { agent: ids[0], entry: BehaviorEntry { behavior: Behavior::Seek(seek::SeekParams { target: Target::Agent(ids[1]) }), weight: 0.5, priority: 1 } }),
                Step::Cmd(Command::RemoveObstacle(1)),
                Step::CmdOn(vec![100, 101, 102], |ids| Command::Despawn(ids[1])),
                Step::Run(60),
            ],
        },
        Regression {
            name: "crossing-midrun",
            scenario: "crossing",
            from_start: false,
            digests: false,
            script: vec![
                Step::Run(35),
                Step::StartRecording { digests: true },
                Step::Run(20),
                Step::CmdOn(vec![3], |ids| Command::ResetBehaviors { agent: ids[0] }),
                Step::RandomObstacles(RandomObstacles { count: 3, min_radius: 1.0, max_radius: 2.0, min_gap: 4.0, border: 5.0, seed: Some(5), keep_clear: None }),
                Step::Cmd(Command::Spawn(SpawnSpec { behaviors: vec![seek_to(5.0, 5.0)], ..SpawnSpec::new("late", 5, SpawnArea::Disc { center: p(50.0, 50.0), radius: 5.0 }) })),
                Step::Run(60),
                Step::Reset,
                Step::Run(30),
            ],
        },
    ]
}

/// Makes one regression recording from the shipped scenarios in `scenarios_dir`.
pub fn make(reg: &Regression, scenarios_dir: &Path, work_dir: &Path, threads: usize) -> Result<Vec<u8>, GenerateError> {
    let path = scenarios_dir.join(format!("{}.json", reg.scenario));
    let mut sc = Scenario::from_file(&path).map_err(|e| GenerateError::Setup(format!("{}: {e}", path.display())))?;
    sc.recording = reg.from_start;
    run_script(work_dir, sc, &reg.script, threads, reg.digests)
}
