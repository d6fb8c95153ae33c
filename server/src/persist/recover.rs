//! Recovery of a durable world on start: the newest valid snapshot names the segment the log is
//! re-run from; the segments from there are read in order and re-run through the replay
//! (`record::replay`), every recorded checkpoint compared, so the world is the one that ran, bit
//! for bit, at the last record on disk.
//!
//! Bad input never becomes a world: a torn last chunk of the last segment is cut off (and
//! reported); a snapshot that fails its checksum is skipped for the one before it (whose base is
//! an older segment: more log); a missing segment, a segment damaged before its end, or a
//! divergence stops this world's recovery with an error naming the file — the other worlds start.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::{PersistError, Store, decode_snapshot};
use crate::record::format::{self, Parsed, Record};
use crate::record::replay::{ReplayOptions, replay_keep};
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
    /// Steps re-run, commands re-applied, checkpoints compared (all matched).
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
    /// The segment of the last `Start`, the last segment, the last snapshot number.
    pub base_segment: u64,
    pub last_segment: u64,
    pub last_snapshot: u64,
    /// What was done.
    pub report: RecoveryReport,
}

/// Recovers `world` from `store`; `threads` step the re-run (the result does not depend on it).
pub fn recover(store: &dyn Store, world: &str, threads: usize) -> Result<Recovered, RecoverError> {
    let started = Instant::now();
    let mut report = RecoveryReport::default();
    let snaps = store.snapshots(world)?;
    let mut chosen = None;
    for seq in snaps.iter().rev() {
        let file = store.describe_snapshot(world, *seq);
        match store.read_snapshot(world, *seq).map_err(|e| e.to_string()).and_then(|b| decode_snapshot(&b)) {
            Ok(m) => {
                chosen = Some((file, m));
                break;
            }
            Err(e) => {
                tracing::warn!(world, "recovery: snapshot {file} skipped: {e}");
                report.snapshots_rejected.push(format!("{file}: {e}"));
            }
        }
    }
    let segs = store.segments(world)?;
    let Some(&last) = segs.last() else {
        return Err(RecoverError::Missing { file: store.describe(world, Some(chosen.as_ref().map_or(0, |c| c.1.base_segment))) });
    };
    let from = chosen.as_ref().map_or(segs[0], |c| c.1.base_segment);
    // Every segment from the base to the last must be there.
    for n in from..=last {
        if segs.binary_search(&n).is_err() {
            return Err(RecoverError::Missing { file: store.describe(world, Some(n)) });
        }
    }
    let mut records: Vec<(u64, Record)> = Vec::new();
    for n in from..=last {
        let file = store.describe(world, Some(n));
        let bytes = store.read_segment(world, n)?;
        if n == last && bytes.len() < format::HEADER_LEN {
            // Created, header not yet whole: nothing of it was ever durable.
            store.truncate_segment(world, n, 0)?;
            store.delete_segment(world, n)?;
            report.torn = Some(format!("{file}: {} bytes of a header cut off", bytes.len()));
            continue;
        }
        let parsed = format::parse(&bytes).map_err(|e| RecoverError::Corrupt { file: file.clone(), reason: e.to_string() })?;
        if let Some(reason) = &parsed.torn_reason {
            if n != last {
                return Err(RecoverError::Corrupt { file, reason: format!("damaged before its end ({reason}) in the middle of the log") });
            }
            let keep = (bytes.len() - parsed.torn_bytes) as u64;
            store.truncate_segment(world, n, keep)?;
            let msg = format!("{file}: torn tail of {} bytes cut off ({reason})", parsed.torn_bytes);
            tracing::warn!(world, "recovery: {msg}");
            report.torn = Some(msg);
        }
        report.segments.push(file);
        records.extend(parsed.records.into_iter().map(|r| (n, r)));
    }
    let Some(start_at) = records.iter().rposition(|(_, r)| matches!(r, Record::Start { .. })) else {
        return Err(RecoverError::NoStart { file: store.describe(world, Some(from)) });
    };
    let base_segment = records[start_at].0;
    let base_file = store.describe(world, Some(base_segment));
    let tail: Vec<Record> = records.drain(start_at..).map(|(_, r)| r).collect();
    let mut owners: BTreeMap<u32, (String, Option<String>)> = BTreeMap::new();
    let mut paused = false;
    for r in &tail {
        match r {
            Record::Owner { agent, player: Some(p), team, .. } => {
                owners.insert(*agent, (p.clone(), team.clone()));
            }
            Record::Owner { agent, player: None, .. } => {
                owners.remove(agent);
            }
            Record::Paused { paused: p, .. } => paused = *p,
            _ => {}
        }
    }
    let parsed = Parsed { records: tail, chunks: 0, torn_bytes: 0, torn_reason: None };
    let opts = ReplayOptions { verify: true, until: None, threads: threads.max(1) };
    let (rep, kept) = replay_keep(&parsed, &opts, &mut |_, _| {}).map_err(|e| RecoverError::Replay { file: base_file.clone(), reason: e.to_string() })?;
    if let Some(d) = rep.divergences.first() {
        return Err(RecoverError::Replay { file: base_file, reason: d.to_string() });
    }
    let Some((w, scenario)) = kept else { return Err(RecoverError::NoStart { file: base_file }) };
    // Agents that are gone have no owner.
    owners.retain(|id, _| w.agent(*id).is_some());
    report.tick = w.tick();
    report.state_hash = rep.final_state_hash.clone();
    report.ticks = rep.ticks;
    report.commands = rep.commands;
    report.checks = rep.checks;
    report.snapshot = chosen.as_ref().map(|c| c.0.clone());
    report.seconds = started.elapsed().as_secs_f64();
    Ok(Recovered {
        world: w,
        scenario,
        scenario_name: chosen.as_ref().and_then(|c| c.1.scenario_name.clone()),
        paused,
        owners: owners.into_iter().map(|(a, (p, t))| (a, p, t)).collect(),
        base_segment,
        last_segment: last,
        last_snapshot: snaps.last().copied().unwrap_or(0),
        report,
    })
}
