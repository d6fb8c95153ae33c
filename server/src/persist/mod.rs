//! Durable worlds (issue 42): each durable world's command log — the recording format of
//! `record/`, in numbered segments — and its snapshots, written behind one storage interface
//! ([`Store`]) whose embedded default is the local disk ([`disk::LocalDisk`]); recovery on start
//! ([`recover`]). Operators' page: `docs/persistence.md`.
//!
//! **Invariant:** the world thread never waits on the store. Its [`Durable`] hook encodes records
//! into an in-memory chunk and hands chunks to the one [`Writer`] thread over a bounded channel
//! (`persistence.writer_queue`) with `try_send`. Under `fsync = "interval"` a chunk (ending with
//! a checkpoint) goes every `fsync_interval_ms`; under `every_command` a command's reply travels
//! with its chunk and is sent by the writer once the chunk is fsynced.
//!
//! **Invariant:** a log never has a gap. A failed write is cut back to whole chunks and kept
//! (with every later chunk of that world, at most `persistence.max_backlog_bytes`) to be retried;
//! meanwhile the world runs and is reported not durable. A backlog beyond its bound, or a full
//! writer queue, ends that log: the world stays not durable until its next load or reset starts
//! a new one from a scenario.

pub mod disk;
pub mod mem;
pub mod recover;
pub mod snapshot;
pub mod store;
pub mod transfer;
mod writer;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

pub use recover::{RecoverError, Recovered, RecoveryReport, recover};
pub use snapshot::{RunnerState, SNAP_HEADER, SNAP_MAGIC, SNAP_VERSION, Snapshot, SnapshotMeta, StoredSession, decode_snapshot, encode_snapshot, needs_log_from};
pub use store::{PersistError, Store};
pub use transfer::{TransferError, export_world, import_world};
use writer::Job;
pub use writer::{Ack, DurableStatus, SNAPSHOTS_KEPT, Writer};

use crate::config::FsyncPolicy;
use crate::record::codec::Enc;
use crate::record::format::{self, Record};
use crate::sim::world::{Command, World};

/// A durable world's persistence, as `GET /worlds/{w}` and `/health` show it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PersistenceView {
    /// Everything acknowledged is on disk within the fsync policy, and the log has no gap.
    pub durable: bool,
    /// The fsync policy.
    #[schema(value_type = String)]
    pub fsync: FsyncPolicy,
    /// The newest sim tick whose checkpoint is on disk.
    pub durable_tick: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Bytes waiting for a failed write to succeed.
    pub backlog_bytes: u64,
    /// Failed writes.
    pub write_errors: u64,
    /// Snapshots written.
    pub snapshots: u64,
    /// Why the world is not durable now.
    pub error: Option<String>,
    /// How the world was recovered at start (absent for a world created in this process).
    #[schema(value_type = Option<Object>)]
    pub recovered: Option<RecoveryReport>,
}

/// What the health and REST views show of a durable world.
impl DurableStatus {
    /// The view `GET /worlds/{w}` and `/health` show.
    pub fn view(&self, policy: FsyncPolicy) -> PersistenceView {
        PersistenceView {
            durable: self.durable.load(Ordering::Relaxed) && !self.broken.load(Ordering::Relaxed),
            fsync: policy,
            durable_tick: self.durable_tick.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            backlog_bytes: self.backlog.load(Ordering::Relaxed),
            write_errors: self.write_errors.load(Ordering::Relaxed),
            snapshots: self.snapshots.load(Ordering::Relaxed),
            error: self.error(),
            recovered: None,
        }
    }
}

/// The `Start` record of a durable world's log built from `scenario` with these caps. Its
/// checkpoints fall at group commits, not on a lattice: `hash_every` is 1.
pub fn start_record(scenario: &crate::scenario::Scenario, max_agents: usize, max_spawn: usize) -> Record {
    Record::Start {
        max_agents: max_agents as u64,
        max_spawn: max_spawn as u64,
        hash_every: 1,
        digests: false,
        from_snapshot: false,
        scenario: serde_json::to_string(scenario).unwrap_or_default(),
    }
}

/// A durable world's hook on its thread: sees every change the recording sees, plus ownership,
/// and hands chunks to the writer without waiting.
pub struct Durable {
    world: Arc<str>,
    /// This incarnation of the name (see [`Job`]).
    inc: u64,
    writer: Arc<Writer>,
    status: Arc<DurableStatus>,
    policy: FsyncPolicy,
    interval: Duration,
    snapshot_every: Duration,
    chunk: Enc,
    seg: u64,
    seg_bytes: u64,
    /// Records handed to the writer for `seg`, and records in the chunk not yet handed: a
    /// snapshot's place in the log is (`seg`, `seg_records`) right after a flush.
    seg_records: u64,
    chunk_records: u64,
    base_seg: u64,
    last_flush: Instant,
    /// When the last checkpoint was written (one every interval, however often commands flush).
    last_check: Instant,
    last_snapshot: Instant,
    snap_seq: u64,
    /// A snapshot is wanted at the runner's next turn (a recovered world's first one).
    snapshot_wanted: bool,
    /// The resume-token hashes of the sessions last logged (a `Sessions` record or a snapshot).
    sessions_logged: Vec<String>,
    acks: Vec<Ack>,
    /// The segment to close when the next chunk goes (a new segment started).
    close_before: Option<u64>,
    /// No log is being written (a gap: until the next start).
    off: bool,
    /// The next chunk handed over begins with the `Start` of a new log (see [`Job`]).
    starts_log: bool,
    /// A step ran since the last checkpoint.
    stepped: bool,
    /// The tick of the newest command or checkpoint in the chunk.
    pending_tick: u64,
    /// How the world was recovered (shown in its view).
    pub recovered: Option<RecoveryReport>,
}

/// Where a recovered world's log stands: the segment of its last `Start`, its last segment,
/// and its last snapshot's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPlace {
    pub base_segment: u64,
    pub last_segment: u64,
    pub last_snapshot: u64,
}

impl Recovered {
    /// Where its log stands.
    pub fn log_place(&self) -> LogPlace {
        LogPlace { base_segment: self.base_segment, last_segment: self.last_segment, last_snapshot: self.last_snapshot }
    }
}

impl Durable {
    /// The hook of a world with no stored state: anything stored under its name is deleted
    /// first, then the log starts with `start`.
    pub fn fresh(writer: &Arc<Writer>, world: &str, start: &Record) -> Durable {
        let mut d = Durable::new(writer, world, 0, 0, 0, None);
        d.begin(true);
        d.push(start);
        d.flush(true);
        d
    }

    /// The hook of a recovered world: its log goes on in a new segment after `at.last_segment`, from
    /// the recovered state (whose `Start` is in `base_segment`); it takes a snapshot at the
    /// runner's first turn ([`Durable::snapshot_due`]).
    pub fn resumed(writer: &Arc<Writer>, world: &str, at: LogPlace, world_now: &World, report: RecoveryReport) -> Durable {
        let mut d = Durable::new(writer, world, at.last_segment + 1, at.base_segment, at.last_snapshot + 1, Some(report));
        d.begin(false);
        d.status.durable_tick.store(world_now.tick(), Ordering::Relaxed);
        d.snapshot_wanted = true;
        d
    }

    fn new(writer: &Arc<Writer>, world: &str, seg: u64, base_seg: u64, snap_seq: u64, recovered: Option<RecoveryReport>) -> Durable {
        let s = &writer.settings;
        let status = Arc::new(DurableStatus::default());
        status.durable.store(true, Ordering::Relaxed);
        Durable {
            world: Arc::from(world),
            inc: writer.next_inc.fetch_add(1, Ordering::Relaxed),
            writer: writer.clone(),
            status,
            policy: s.fsync,
            interval: Duration::from_millis(s.fsync_interval_ms.max(1)),
            snapshot_every: Duration::from_secs(s.snapshot_every_secs.max(1)),
            chunk: Enc::default(),
            seg,
            seg_bytes: 0,
            seg_records: 0,
            chunk_records: 0,
            base_seg,
            last_flush: Instant::now(),
            last_check: Instant::now(),
            last_snapshot: Instant::now(),
            snap_seq,
            snapshot_wanted: false,
            sessions_logged: Vec::new(),
            acks: Vec::new(),
            close_before: None,
            off: false,
            starts_log: false,
            stepped: false,
            pending_tick: 0,
            recovered,
        }
    }

    fn begin(&mut self, fresh: bool) {
        if self.writer.send(Job::Begin { world: self.world.clone(), inc: self.inc, fresh }).is_err() {
            self.end_log("the persistence writer's queue is full (persistence.writer_queue) at the world's start");
        }
    }

    /// The fsync policy.
    pub fn policy(&self) -> FsyncPolicy {
        self.policy
    }

    /// The status (shared with the views).
    pub fn status(&self) -> &Arc<DurableStatus> {
        &self.status
    }

    /// The view.
    pub fn view(&self) -> PersistenceView {
        let mut v = self.status.view(self.policy);
        v.durable &= !self.off;
        v.recovered = self.recovered.clone();
        v
    }

    fn push(&mut self, r: &Record) {
        if self.off {
            return;
        }
        r.encode(&mut self.chunk);
        self.chunk_records += 1;
        if self.chunk.buf.len() >= format::MAX_CHUNK / 4 {
            self.flush(false);
        }
    }

    /// Hands the chunk so far to the writer (`sync`: fsynced before its replies go).
    fn flush(&mut self, sync: bool) {
        if self.off || (self.chunk.buf.is_empty() && self.acks.is_empty()) {
            self.release_acks();
            return;
        }
        let bytes = if self.chunk.buf.is_empty() { Vec::new() } else { format::frame_chunk(&std::mem::take(&mut self.chunk.buf)) };
        let n = bytes.len() as u64;
        let job = Job::Append {
            world: self.world.clone(),
            inc: self.inc,
            seg: self.seg,
            bytes,
            sync,
            tick: self.status.durable_tick.load(Ordering::Relaxed).max(self.pending_tick),
            acks: std::mem::take(&mut self.acks),
            close_before: self.close_before.take(),
            starts_log: std::mem::take(&mut self.starts_log),
            status: self.status.clone(),
        };
        match self.writer.send(job) {
            Ok(()) => {
                self.seg_bytes += n;
                self.seg_records += std::mem::take(&mut self.chunk_records);
                self.last_flush = Instant::now();
                if self.seg_bytes >= self.writer.settings.segment_max_bytes {
                    self.close_before = Some(self.seg);
                    self.seg += 1;
                    self.seg_bytes = 0;
                    self.seg_records = 0;
                }
            }
            Err(job) => {
                if let Job::Append { acks, .. } = job {
                    for a in acks {
                        a();
                    }
                }
                self.end_log("the persistence writer's queue is full (persistence.writer_queue; disk too slow)");
            }
        }
    }

    fn release_acks(&mut self) {
        for a in std::mem::take(&mut self.acks) {
            a();
        }
    }

    fn end_log(&mut self, why: &str) {
        tracing::error!(world = %self.world, "persistence: {why}; the world is not durable until its next load or reset");
        self.off = true;
        self.chunk.buf.clear();
        self.chunk_records = 0;
        self.status.durable.store(false, Ordering::Relaxed);
        self.status.broken.store(true, Ordering::Relaxed);
        self.status.set_error(Some(why.to_string()));
        self.release_acks();
    }

    /// The world (re)started from a scenario: a new segment with a `Start` record begins a new
    /// log, which ends a gap.
    pub fn started(&mut self, start: &Record) {
        self.flush(true);
        // The start goes first in a segment of its own (a fresh one after a rotation is).
        if self.seg_bytes > 0 {
            self.close_before = Some(self.seg);
            self.seg += 1;
            self.seg_bytes = 0;
            self.seg_records = 0;
        }
        if self.off || self.status.broken.load(Ordering::Relaxed) {
            self.off = false;
            self.status.broken.store(false, Ordering::Relaxed);
            self.status.durable.store(true, Ordering::Relaxed);
            self.status.set_error(None);
        }
        self.base_seg = self.seg;
        self.pending_tick = 0;
        self.status.durable_tick.store(0, Ordering::Relaxed);
        self.starts_log = true;
        self.push(start);
        self.flush(true);
    }

    /// A command about to be applied.
    pub fn command(&mut self, world: &World, command: &Command) {
        self.pending_tick = world.tick();
        self.push(&Record::Command { tick: world.tick(), command: command.clone() });
    }

    /// The tick rate changed.
    pub fn tick_rate(&mut self, world: &World, rate: f32) {
        self.push(&Record::TickRate { tick: world.tick(), rate });
    }

    /// Paused or resumed.
    pub fn paused(&mut self, world: &World, paused: bool) {
        self.push(&Record::Paused { tick: world.tick(), paused });
    }

    /// An agent's owner changed.
    pub fn owner(&mut self, world: &World, agent: u32, player: Option<&str>, team: Option<&str>) {
        self.push(&Record::Owner { tick: world.tick(), agent, player: player.map(str::to_string), team: team.map(str::to_string) });
    }

    /// The world's sessions now (`Players::stored_sessions`): logged (a `Sessions` record) when
    /// their set of resume tokens changed since last logged, so a session opened or resumed is
    /// durable within the runner's check (a second) and the next group commit.
    pub fn sessions(&mut self, world: &World, sessions: &[StoredSession]) {
        if self.off || sessions.iter().map(|s| &s.token_sha256).eq(self.sessions_logged.iter()) {
            return;
        }
        self.sessions_logged = sessions.iter().map(|s| s.token_sha256.clone()).collect();
        self.push(&Record::Sessions { tick: world.tick(), sessions: serde_json::to_string(sessions).unwrap_or_default() });
    }

    /// After a step: every `fsync_interval_ms` a checkpoint and a synced chunk.
    pub fn after_step(&mut self, world: &World) {
        self.stepped = true;
        if self.off {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.last_flush) >= self.interval || now.duration_since(self.last_check) >= self.interval {
            self.checkpoint(world);
            self.flush(true);
        }
    }

    /// A snapshot is due: `snapshot_every_secs` passed since the last, or the world was just
    /// recovered. The runner then calls [`Durable::snapshot`] with its state.
    pub fn snapshot_due(&self) -> bool {
        !self.off && (self.snapshot_wanted || self.last_snapshot.elapsed() >= self.snapshot_every)
    }

    /// Called every turn of the loop (also paused): a chunk left unsynced for an interval goes.
    pub fn idle(&mut self, world: &World) {
        if !self.off && (!self.chunk.buf.is_empty() || self.stepped) && self.last_flush.elapsed() >= self.interval {
            self.checkpoint(world);
            self.flush(true);
        }
    }

    fn checkpoint(&mut self, world: &World) {
        if self.stepped {
            self.push(&crate::record::checkpoint(world, false));
            self.pending_tick = world.tick();
            self.stepped = false;
            self.last_check = Instant::now();
        }
    }

    /// Writes a snapshot: the world's saved form, the runner's state (`paused`, the scenario's
    /// name, `runner`) and its place in the log (after syncing the log up to here).
    pub fn snapshot(&mut self, world: &World, paused: bool, scenario_name: Option<&str>, runner: RunnerState) {
        self.last_snapshot = Instant::now();
        self.snapshot_wanted = false;
        if self.off {
            return;
        }
        self.checkpoint(world);
        self.flush(true);
        if self.off {
            return;
        }
        let meta = SnapshotMeta {
            world: self.world.to_string(),
            tick: world.tick(),
            state_hash: crate::sim::hash::state_hash(world),
            exact_hash: crate::sim::hash::exact_hash(world),
            base_segment: self.base_seg,
            segment: self.seg,
            records: self.seg_records,
            paused,
            scenario_name: scenario_name.map(str::to_string),
            taken_unix: crate::auth::now_secs(),
            runner: None,
        };
        self.sessions_logged = runner.sessions.iter().map(|s| s.token_sha256.clone()).collect();
        let meta = SnapshotMeta { runner: Some(runner), ..meta };
        let bytes = encode_snapshot(&meta, &world.save());
        let job = Job::Snapshot { world: self.world.clone(), inc: self.inc, seq: self.snap_seq, bytes, base: self.seg, status: self.status.clone() };
        self.snap_seq += 1;
        if self.writer.send(job).is_err() {
            tracing::warn!(world = %self.world, "persistence: the writer's queue is full; snapshot skipped");
        }
    }

    /// Under `every_command`, `reply` goes once the records so far are on disk; otherwise now.
    pub fn reply(&mut self, reply: Ack) {
        if self.off || self.policy != FsyncPolicy::EveryCommand {
            reply();
            return;
        }
        self.acks.push(reply);
        self.flush(true);
    }

    /// The world thread ends (shutdown or DELETE): an `End` record and a last synced chunk;
    /// `forget` deletes its stored state after that instead.
    pub fn stop(&mut self, world: &World, forget: bool) {
        if forget {
            self.chunk.buf.clear();
            self.release_acks();
            if self.writer.send(Job::Remove { world: self.world.clone(), inc: Some(self.inc) }).is_err() {
                tracing::warn!(world = %self.world, "persistence: the writer's queue is full; the deleted world's files stay");
            }
            self.off = true;
            return;
        }
        self.checkpoint(world);
        self.push(&Record::End { tick: world.tick(), reason: "world stopped".into() });
        self.flush(true);
        self.off = true;
    }
}

impl Drop for Durable {
    fn drop(&mut self) {
        self.release_acks();
    }
}

#[cfg(test)]
mod tests;
