//! Recovery of a durable world on start: the newest valid snapshot holds the world and the
//! runner's state at its place in the log; the records after that place (the log's tail) are
//! read in order and re-run on it through the replay (`record::replay`), the last recorded
//! checkpoint compared (`state_hash` and `exact_hash`: hashing the world at each of them would
//! cost as much as the steps; `steerd replay --verify` compares every one), so the world is the
//! one that ran, bit for bit, at the last record on disk. A tail with a `Start` (a load or reset after the snapshot) is re-run from its last
//! `Start`; a version-1 snapshot (no world) from the `Start` in its base segment.
//!
//! Bad input never becomes a world: a torn last chunk of the last segment is cut off (and
//! reported); a snapshot that fails its checksum, does not load, or does not hash to the state
//! it names is skipped for the one before it (whose place is further back: more log); a missing
//! segment, a segment damaged before its end, or a divergence stops this world's recovery with
//! an error naming the file — the other worlds start.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::snapshot::{RunnerState, SnapshotMeta, StoredSession, decode_snapshot};
use super::store::{PersistError, Store};
use crate::record::format::{self, Parsed, Record};
use crate::record::replay::{ReplayOptions, replay_onto};
use crate::scenario::Scenario;
use crate::sim::world::World;

/// Why a world could not be recovered.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RecoverError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] PersistError),
    /// A segment the log needs is not there.
    #[error("missing segment {file}: the world's log is incomplete and cannot be re-run")]
    Missing { file: String },
    /// A file is damaged where a whole one is needed.
    #[error("{file}: {reason}")]
    Corrupt { file: String, reason: String },
    /// No `Start` record from the base on.
    #[error("{file}: the log has no start record")]
    NoStart { file: String },
    /// The re-run failed or did not reproduce a recorded checkpoint.
    #[error("re-running the log from {file}: {reason}")]
    Replay { file: String, reason: String },
}

/// How a world was recovered (its view shows it, and the log says it).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RecoveryReport {
    /// The sim tick it resumed at, and its `state_hash` there (hex).
    pub tick: u64,
    pub state_hash: String,
    /// The snapshot used (none: the log from its first segment).
    pub snapshot: Option<String>,
    /// Snapshots skipped, each with why.
    pub snapshots_rejected: Vec<String>,
    /// The segments re-run.
    pub segments: Vec<String>,
    /// A torn tail cut off the last segment: the file, bytes and why.
    pub torn: Option<String>,
    /// Steps re-run, commands re-applied, checkpoints compared (the last of the log's; it
    /// matched).
    pub ticks: u64,
    pub commands: u64,
    pub checks: u64,
    /// Wall time of the recovery, seconds.
    pub seconds: f64,
}

/// A recovered world and what the runtime keeps beside it.
pub struct Recovered {
    /// The world at the last record on disk.
    pub world: World,
    /// The scenario its last `Start` built (what `reset` goes back to).
    pub scenario: Scenario,
    /// The scenario's name, from the snapshot.
    pub scenario_name: Option<String>,
    /// Paused at the end of the log.
    pub paused: bool,
    /// Owned agents: (agent, player, team).
    pub owners: Vec<(u32, String, Option<String>)>,
    /// The players' sessions kept by the snapshot used (resumable again, with the grace left).
    pub sessions: Vec<StoredSession>,
    /// The segment of the last `Start`, the last segment, the last snapshot number.
    pub base_segment: u64,
    pub last_segment: u64,
    pub last_snapshot: u64,
    /// What was done.
    pub report: RecoveryReport,
}

/// The snapshot recovery starts from.
enum Base {
    /// A version-2 snapshot: the world and the runner's state at (`meta.segment`, `meta.records`).
    State { file: String, meta: SnapshotMeta, world: Box<World>, scenario: Box<Scenario>, runner: RunnerState },
    /// A version-1 snapshot: the log is re-run from its base segment.
    Pointer { file: String, meta: SnapshotMeta },
}

/// The world and runner state a version-2 snapshot holds, checked against the hashes it names.
pub(crate) fn restore(meta: &SnapshotMeta, world: &[u8]) -> Result<(World, Scenario, RunnerState), String> {
    let runner = meta.runner.clone().ok_or("no runner state")?;
    let w = World::load(world).map_err(|e| e.to_string())?;
    let (sh, eh) = (crate::sim::hash::state_hash(&w), crate::sim::hash::exact_hash(&w));
    if w.tick() != meta.tick || sh != meta.state_hash || eh != meta.exact_hash {
        return Err(format!(
            "the world it holds (tick {}, state_hash {sh:016x}) is not the one it names (tick {}, state_hash {:016x})",
            w.tick(),
            meta.tick,
            meta.state_hash
        ));
    }
    let scenario = Scenario::from_stored_json(&runner.scenario).map_err(|e| format!("scenario: {e}"))?;
    Ok((w, scenario, runner))
}

/// Recovers `world` from `store`; `threads` step the re-run (the result does not depend on it).
pub fn recover(store: &dyn Store, world: &str, threads: usize) -> Result<Recovered, RecoverError> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    let snaps = store.snapshots(world)?;
    let chosen = newest_base(store, world, &snaps, &mut report);
    let Tail { mut records, from, last } = read_tail(store, world, chosen.as_ref(), &mut report)?;
    // A load or reset after the snapshot: the world is the log's from its last `Start`.
    let restart = records.iter().rposition(|(_, r)| matches!(r, Record::Start { .. }));
    let (initial, base_segment, mut rt, scenario_name, from_file) = match (chosen, restart) {
        (Some(Base::State { file, meta, world: w, scenario, runner }), None) => {
            let owners = runner.owners.into_iter().map(|(a, p, t)| (a, (p, t))).collect();
            report.snapshot = Some(file.clone());
            (Some((*w, *scenario)), meta.base_segment, RuntimeState { owners, paused: meta.paused, sessions: runner.sessions }, meta.scenario_name, file)
        }
        (chosen, Some(at)) => {
            let seg = records[at].0;
            records.drain(..at);
            let (name, sessions, file) = match chosen {
                Some(Base::State { meta, runner, file, .. }) => (meta.scenario_name, runner.sessions, Some(file)),
                Some(Base::Pointer { meta, file }) => (meta.scenario_name, Vec::new(), Some(file)),
                None => (None, Vec::new(), None),
            };
            report.snapshot = file;
            (None, seg, RuntimeState { owners: BTreeMap::new(), paused: false, sessions }, name, store.describe(world, Some(seg)))
        }
        (_, None) => return Err(RecoverError::NoStart { file: store.describe(world, Some(from)) }),
    };
    let tail: Vec<Record> = records.into_iter().map(|(_, r)| r).collect();
    rt.follow(world, &tail);
    let parsed = Parsed { records: tail, chunks: 0, torn_bytes: 0, torn_reason: None };
    let opts = ReplayOptions { verify: true, until: None, threads: threads.max(1), last_check_only: true };
    let (rep, kept) = replay_onto(initial, &parsed, &opts, &mut |_, _| {}).map_err(|e| RecoverError::Replay { file: from_file.clone(), reason: e.to_string() })?;
    if let Some(d) = rep.divergences.first() {
        return Err(RecoverError::Replay { file: from_file, reason: d.to_string() });
    }
    let Some((w, scenario)) = kept else { return Err(RecoverError::NoStart { file: from_file }) };
    // Agents that are gone have no owner.
    rt.owners.retain(|id, _| w.agent(*id).is_some());
    report.tick = w.tick();
    report.state_hash = format!("{:016x}", crate::sim::hash::state_hash(&w));
    report.ticks = rep.ticks;
    report.commands = rep.commands;
    report.checks = rep.checks;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(Recovered {
        world: w,
        scenario,
        scenario_name,
        paused: rt.paused,
        owners: rt.owners.into_iter().map(|(a, (p, t))| (a, p, t)).collect(),
        sessions: rt.sessions,
        base_segment,
        last_segment: last,
        last_snapshot: snaps.last().copied().unwrap_or(0),
        report,
    })
}

/// The newest of `snaps` that reads, decodes and (version 2) loads into the world it names;
/// those skipped are reported with why.
fn newest_base(store: &dyn Store, world: &str, snaps: &[u64], report: &mut RecoveryReport) -> Option<Base> {
    for seq in snaps.iter().rev() {
        let file = store.describe_snapshot(world, *seq);
        let got = store.read_snapshot(world, *seq).map_err(|e| e.to_string()).and_then(|bytes| {
            decode_snapshot(&bytes).and_then(|s| match s.world {
                Some(wb) => restore(&s.meta, wb).map(|(world, scenario, runner)| Base::State { file: file.clone(), meta: s.meta, world: Box::new(world), scenario: Box::new(scenario), runner }),
                None => Ok(Base::Pointer { file: file.clone(), meta: s.meta }),
            })
        });
        match got {
            Ok(b) => return Some(b),
            Err(e) => {
                tracing::warn!(world, "recovery: snapshot {file} skipped: {e}");
                report.snapshots_rejected.push(format!("{file}: {e}"));
            }
        }
    }
    None
}

/// The log after a snapshot's place: its records with their segments, from segment `from` to
/// `last`.
struct Tail {
    records: Vec<(u64, Record)>,
    from: u64,
    last: u64,
}

/// Reads the log `chosen` needs (all of it without a snapshot): every segment from its place to
/// the last must be there and whole, but for a torn end of the last, which is cut off.
fn read_tail(store: &dyn Store, world: &str, chosen: Option<&Base>, report: &mut RecoveryReport) -> Result<Tail, RecoverError> {
    let segs = store.segments(world)?;
    // Where the log is needed from, and how many records of that segment the snapshot covers.
    let (from, skip) = match chosen {
        Some(Base::State { meta, .. }) => (meta.segment, meta.records),
        Some(Base::Pointer { meta, .. }) => (meta.base_segment, 0),
        None => (segs.first().copied().unwrap_or(0), 0),
    };
    let last = match (segs.last(), chosen) {
        (Some(&l), _) => l.max(from),
        // A snapshot taken right after its segment was closed: no log after it yet.
        (None, Some(Base::State { .. })) => from,
        (None, _) => return Err(RecoverError::Missing { file: store.describe(world, Some(from)) }),
    };
    let mut records: Vec<(u64, Record)> = Vec::new();
    if matches!(chosen, Some(Base::State { .. })) && segs.last().is_none_or(|&l| l < from) {
        return Ok(Tail { records, from, last });
    }
    // Every segment from the snapshot's place to the last must be there.
    for n in from..=last {
        if segs.binary_search(&n).is_err() {
            return Err(RecoverError::Missing { file: store.describe(world, Some(n)) });
        }
    }
    for n in from..=last {
        let covered = if n == from { skip } else { 0 };
        let Some(recs) = read_segment(store, world, n, n == last, covered, report)? else { continue };
        report.segments.push(store.describe(world, Some(n)));
        records.extend(recs.into_iter().map(|r| (n, r)));
    }
    Ok(Tail { records, from, last })
}

/// Segment `n`'s records after the first `covered` (those a snapshot holds). The `last`
/// segment's torn end is cut off (none: created, its header never whole); any other damage is
/// an error naming the file.
fn read_segment(store: &dyn Store, world: &str, n: u64, last: bool, covered: u64, report: &mut RecoveryReport) -> Result<Option<Vec<Record>>, RecoverError> {
    let file = store.describe(world, Some(n));
    let bytes = store.read_segment(world, n)?;
    if last && bytes.len() < format::HEADER_LEN {
        // Created, header not yet whole: nothing of it was ever durable.
        store.truncate_segment(world, n, 0)?;
        store.delete_segment(world, n)?;
        report.torn = Some(format!("{file}: {} bytes of a header cut off", bytes.len()));
        if covered > 0 {
            return Err(RecoverError::Corrupt { file, reason: format!("holds no record; the snapshot covers {covered}") });
        }
        return Ok(None);
    }
    let parsed = format::parse(&bytes).map_err(|e| RecoverError::Corrupt { file: file.clone(), reason: e.to_string() })?;
    if let Some(reason) = &parsed.torn_reason {
        if !last {
            return Err(RecoverError::Corrupt { file, reason: format!("damaged before its end ({reason}) in the middle of the log") });
        }
        let keep = (bytes.len() - parsed.torn_bytes) as u64;
        store.truncate_segment(world, n, keep)?;
        let msg = format!("{file}: torn tail of {} bytes cut off ({reason})", parsed.torn_bytes);
        tracing::warn!(world, "recovery: {msg}");
        report.torn = Some(msg);
    }
    let mut recs = parsed.records;
    if covered > 0 {
        let skip = usize::try_from(covered).unwrap_or(usize::MAX);
        if recs.len() < skip {
            return Err(RecoverError::Corrupt { file, reason: format!("holds {} records; the snapshot covers {covered}", recs.len()) });
        }
        recs.drain(..skip);
    }
    Ok(Some(recs))
}

/// What the runtime keeps beside the world: owners by agent, paused, the players' sessions.
struct RuntimeState {
    owners: BTreeMap<u32, (String, Option<String>)>,
    paused: bool,
    sessions: Vec<StoredSession>,
}

impl RuntimeState {
    /// Follows the log's owner, pause and sessions records.
    fn follow(&mut self, world: &str, tail: &[Record]) {
        for r in tail {
            match r {
                Record::Owner { agent, player: Some(p), team, .. } => {
                    self.owners.insert(*agent, (p.clone(), team.clone()));
                }
                Record::Owner { agent, player: None, .. } => {
                    self.owners.remove(agent);
                }
                Record::Paused { paused: p, .. } => self.paused = *p,
                Record::Sessions { sessions: s, .. } => match serde_json::from_str::<Vec<StoredSession>>(s) {
                    Ok(v) => self.sessions = v,
                    // Sessions are the runtime's, not the world's: a bad record loses them, not the world.
                    Err(e) => tracing::warn!(world, "recovery: a sessions record does not read ({e}); kept the ones before it"),
                },
                _ => {}
            }
        }
    }
}
