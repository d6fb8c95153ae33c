//! The one writer thread of every durable world: it takes chunks and snapshots from the
//! worlds' [`super::Durable`] hooks over a bounded channel, appends and fsyncs them in group
//! commits, keeps a failed write's backlog in order and retries it, and prunes what the newest
//! snapshots no longer need.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::snapshot::{decode_snapshot, needs_log_from};
use super::store::{PersistError, Store};
use crate::config::PersistSettings;

/// A reply to send once its chunk is durable (or at once if it cannot be).
pub type Ack = Box<dyn FnOnce() + Send>;

/// Jobs of one incarnation of a world (`inc`): a world deleted and created again under the same
/// name is a new incarnation, and the writer drops what the old one still sends.
pub(super) enum Job {
    /// A world's incarnation begins (`fresh`: its stored state is deleted first).
    Begin { world: Arc<str>, inc: u64, fresh: bool },
    /// A chunk of the log (`starts_log`: it begins with the `Start` of a new log, which ends
    /// a gap).
    Append { world: Arc<str>, inc: u64, seg: u64, bytes: Vec<u8>, sync: bool, tick: u64, acks: Vec<Ack>, close_before: Option<u64>, starts_log: bool, status: Arc<DurableStatus> },
    Snapshot { world: Arc<str>, inc: u64, seq: u64, bytes: Vec<u8>, base: u64, status: Arc<DurableStatus> },
    /// Deletes a world's stored state: that incarnation's, or (none) whatever is there.
    Remove { world: Arc<str>, inc: Option<u64> },
    Barrier(SyncSender<()>),
}

/// The one thread that writes every durable world's chunks and snapshots.
pub struct Writer {
    tx: SyncSender<Job>,
    store: Arc<dyn Store>,
    pub(super) next_inc: AtomicU64,
    /// The settings.
    pub settings: PersistSettings,
}

/// A world's chunks that failed to write, retried in order.
struct Backlog {
    items: VecDeque<(u64, Vec<u8>, bool, u64)>,
    bytes: u64,
    /// It passed its bound and was dropped: the log has a gap, and every later chunk of that
    /// log is dropped too (the backlog stays, empty, to say so) until a chunk starts a new log.
    broken: bool,
    status: Arc<DurableStatus>,
}

/// How often a backlog is retried.
pub(super) const RETRY_EVERY: Duration = Duration::from_millis(200);
/// Snapshots kept per world (the newest, and the one before it as the fallback).
pub const SNAPSHOTS_KEPT: usize = 2;
/// Most jobs the writer takes before one round of fsyncs (group commit).
const GROUP_MAX: usize = 256;

impl Writer {
    /// Starts the writer thread over `store`.
    pub fn start(store: Arc<dyn Store>, settings: PersistSettings) -> std::io::Result<Arc<Self>> {
        let (tx, rx) = std::sync::mpsc::sync_channel(settings.writer_queue.max(1));
        let s = store.clone();
        let max_backlog = settings.max_backlog_bytes;
        std::thread::Builder::new().name("persist".into()).spawn(move || write_loop(&*s, rx, max_backlog))?;
        Ok(Arc::new(Writer { tx, store, next_inc: AtomicU64::new(1), settings }))
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub(super) fn send(&self, job: Job) -> Result<(), Job> {
        match self.tx.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(j) | TrySendError::Disconnected(j)) => Err(j),
        }
    }

    /// Deletes a world's stored state (after everything queued before).
    pub fn remove(&self, world: &str) {
        if self.send(Job::Remove { world: Arc::from(world), inc: None }).is_err() {
            tracing::warn!(world, "persistence: the writer's queue is full; the world's files stay");
        }
    }

    /// Waits (at most `timeout`) until every job queued before now is done.
    pub fn drain(&self, timeout: Duration) -> bool {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let deadline = Instant::now() + timeout;
        let mut job = Job::Barrier(tx);
        loop {
            match self.tx.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Full(j)) if Instant::now() < deadline => {
                    job = j;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return false,
            }
        }
        rx.recv_timeout(deadline.saturating_duration_since(Instant::now())).is_ok()
    }
}

fn write_loop(store: &dyn Store, rx: Receiver<Job>, max_backlog: u64) {
    let mut disk = Disk { store, max_backlog, backlogs: HashMap::new(), current: HashMap::new() };
    let mut next_retry = Instant::now() + RETRY_EVERY;
    while let Some(jobs) = next_group(&rx) {
        if Instant::now() >= next_retry || jobs.is_empty() {
            retry_backlogs(store, &mut disk.backlogs);
            next_retry = Instant::now() + RETRY_EVERY;
        }
        // Group commit: every append first, then one fsync per segment, then the replies.
        let mut group = Group::default();
        for job in jobs {
            disk.take(job, &mut group);
        }
        disk.commit(group);
    }
}

/// The jobs of the next group commit: the first one waited for (at most [`RETRY_EVERY`]; none
/// when that passes), then those already queued, at most [`GROUP_MAX`]. `None`: the channel
/// closed.
fn next_group(rx: &Receiver<Job>) -> Option<Vec<Job>> {
    let first = match rx.recv_timeout(RETRY_EVERY) {
        Ok(j) => Some(j),
        Err(RecvTimeoutError::Timeout) => None,
        Err(RecvTimeoutError::Disconnected) => return None,
    };
    let mut jobs: Vec<Job> = first.into_iter().collect();
    while jobs.len() < GROUP_MAX {
        match rx.try_recv() {
            Ok(j) => jobs.push(j),
            Err(_) => break,
        }
    }
    Some(jobs)
}

/// The writer thread's state between groups.
struct Disk<'a> {
    store: &'a dyn Store,
    max_backlog: u64,
    /// Per world, the appends that failed, retried in order.
    backlogs: HashMap<Arc<str>, Backlog>,
    /// Per world, the incarnation whose jobs count (an earlier one's world is gone).
    current: HashMap<Arc<str>, u64>,
}

/// What one group commit owes after its appends: segments to sync (world, segment, newest
/// tick, status), then the replies and barriers.
#[derive(Default)]
struct Group {
    to_sync: Vec<(Arc<str>, u64, u64, Arc<DurableStatus>)>,
    acks: Vec<Ack>,
    barriers: Vec<SyncSender<()>>,
}

impl Disk<'_> {
    /// Carries out one job of a group (fsyncs and replies wait for [`Disk::commit`]).
    fn take(&mut self, job: Job, group: &mut Group) {
        match job {
            Job::Begin { world, inc, fresh } => {
                if fresh {
                    self.backlogs.remove(&world);
                    group.to_sync.retain(|e| e.0 != world);
                    if let Err(e) = self.store.remove_world(&world) {
                        tracing::warn!(world = %world, "persistence: {e}");
                    }
                }
                self.current.insert(world, inc);
            }
            Job::Append { world, inc, seg, bytes, sync, tick, acks, close_before, starts_log, status } => {
                if self.current.get(&world) != Some(&inc) {
                    // An earlier incarnation of the name: its world is gone.
                    group.acks.extend(acks);
                    return;
                }
                if let Some(old) = close_before {
                    self.store.close(&world, old);
                }
                if starts_log && self.backlogs.get(&world).is_some_and(|b| b.broken) {
                    // A new log from here: the gap is behind it.
                    self.backlogs.remove(&world);
                }
                group.acks.extend(acks);
                self.append(group, world, (seg, bytes, sync, tick), status);
            }
            Job::Snapshot { world, inc, seq, bytes, base, status } => {
                if self.current.get(&world) != Some(&inc) || self.backlogs.contains_key(&world) {
                    // The log before it is not all on disk: the snapshot would cover a gap.
                    return;
                }
                self.snapshot(group, &world, (seq, bytes, base), &status);
            }
            Job::Remove { world, inc } => {
                if inc.is_some_and(|i| self.current.get(&world) != Some(&i)) {
                    return;
                }
                self.current.remove(&world);
                self.backlogs.remove(&world);
                group.to_sync.retain(|e| e.0 != world);
                if let Err(e) = self.store.remove_world(&world) {
                    tracing::warn!(world = %world, "persistence: {e}");
                }
            }
            // Answered once everything before it is synced and acknowledged.
            Job::Barrier(done) => group.barriers.push(done),
        }
    }

    /// Appends a chunk (segment, bytes, sync, tick) to a world's log, or to its backlog if
    /// it has one or the append fails; a chunk to sync marks its segment for the group's fsync.
    fn append(&mut self, group: &mut Group, world: Arc<str>, chunk: (u64, Vec<u8>, bool, u64), status: Arc<DurableStatus>) {
        let (seg, bytes, sync, tick) = chunk;
        if let Some(b) = self.backlogs.get_mut(&world) {
            push_backlog(b, seg, bytes, sync, tick, self.max_backlog);
            return;
        }
        match self.store.append(&world, seg, &bytes) {
            Ok(()) => {
                status.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                if sync {
                    if let Some(e) = group.to_sync.iter_mut().find(|e| e.0 == world && e.1 == seg) {
                        e.2 = e.2.max(tick);
                    } else {
                        group.to_sync.push((world, seg, tick, status));
                    }
                }
            }
            Err(e) => {
                fail(&status, &e);
                let mut b = Backlog { items: VecDeque::new(), bytes: 0, broken: false, status };
                push_backlog(&mut b, seg, bytes, sync, tick, self.max_backlog);
                self.backlogs.insert(world, b);
            }
        }
    }

    /// Writes a snapshot (number, bytes, the segment its log starts at) after syncing the log
    /// it covers; then prunes what the kept snapshots no longer need.
    fn snapshot(&mut self, group: &Group, world: &Arc<str>, snap: (u64, Vec<u8>, u64), status: &DurableStatus) {
        let (seq, bytes, base) = snap;
        for (w, s, _, st) in group.to_sync.iter().filter(|e| e.0 == *world) {
            if let Err(e) = self.store.sync(w, *s) {
                fail(st, &e);
            }
        }
        match self.store.put_snapshot(world, seq, &bytes) {
            Ok(()) => {
                status.snapshots.fetch_add(1, Ordering::Relaxed);
                prune(self.store, world, base);
            }
            Err(e) => {
                status.write_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(world = %world, "persistence: snapshot not written: {e}");
            }
        }
    }

    /// Ends a group: one fsync per segment appended to, then the replies, then the barriers.
    fn commit(&mut self, group: Group) {
        for (world, seg, tick, status) in group.to_sync {
            match self.store.sync(&world, seg) {
                Ok(()) => {
                    status.durable_tick.fetch_max(tick, Ordering::Relaxed);
                    if !status.broken.load(Ordering::Relaxed) && !self.backlogs.contains_key(&world) {
                        status.durable.store(true, Ordering::Relaxed);
                        status.set_error(None);
                    }
                }
                Err(e) => fail(&status, &e),
            }
        }
        for a in group.acks {
            a();
        }
        for b in group.barriers {
            let _ = b.try_send(());
        }
    }
}

fn fail(status: &DurableStatus, e: &PersistError) {
    if status.durable.swap(false, Ordering::Relaxed) {
        tracing::error!("persistence: {e}; the world runs on, not durable, and the write is retried");
    }
    status.write_errors.fetch_add(1, Ordering::Relaxed);
    status.set_error(Some(e.to_string()));
}

fn push_backlog(b: &mut Backlog, seg: u64, bytes: Vec<u8>, sync: bool, tick: u64, max: u64) {
    if b.broken {
        return;
    }
    b.bytes += bytes.len() as u64;
    b.items.push_back((seg, bytes, sync, tick));
    if b.bytes > max {
        b.items.clear();
        b.bytes = 0;
        b.broken = true;
        b.status.broken.store(true, Ordering::Relaxed);
        b.status.set_error(Some(format!(
            "the log's backlog passed persistence.max_backlog_bytes ({max}); records are dropped, the world is not durable until its next load or reset"
        )));
        tracing::error!("persistence: backlog over {max} bytes; the world's log ends here");
    }
    b.status.backlog.store(b.bytes, Ordering::Relaxed);
}

fn retry_backlogs(store: &dyn Store, backlogs: &mut HashMap<Arc<str>, Backlog>) {
    backlogs.retain(|world, b| {
        if b.broken {
            // Nothing to retry, and nothing of this log is written again (a gap).
            return true;
        }
        while let Some((seg, bytes, sync, tick)) = b.items.front() {
            let r = store.append(world, *seg, bytes).and_then(|()| if *sync { store.sync(world, *seg) } else { Ok(()) });
            match r {
                Ok(()) => {
                    b.status.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                    b.status.durable_tick.fetch_max(*tick, Ordering::Relaxed);
                    b.bytes -= bytes.len() as u64;
                    b.items.pop_front();
                }
                Err(e) => {
                    b.status.write_errors.fetch_add(1, Ordering::Relaxed);
                    b.status.set_error(Some(e.to_string()));
                    b.status.backlog.store(b.bytes, Ordering::Relaxed);
                    return true;
                }
            }
        }
        b.status.backlog.store(0, Ordering::Relaxed);
        if !b.status.broken.load(Ordering::Relaxed) {
            tracing::info!(world = %world, "persistence: writes succeed again; the world is durable");
            b.status.durable.store(true, Ordering::Relaxed);
            b.status.set_error(None);
        }
        false
    });
}

/// Keeps the newest [`SNAPSHOTS_KEPT`] snapshots and deletes the segments none of them needs.
fn prune(store: &dyn Store, world: &str, newest_base: u64) {
    let Ok(snaps) = store.snapshots(world) else { return };
    let keep_from = snaps.len().saturating_sub(SNAPSHOTS_KEPT);
    let mut oldest_base = newest_base;
    for (i, seq) in snaps.iter().enumerate() {
        if i < keep_from {
            let _ = store.delete_snapshot(world, *seq);
        } else if let Ok(b) = store.read_snapshot(world, *seq) {
            if let Ok(s) = decode_snapshot(&b) {
                oldest_base = oldest_base.min(needs_log_from(&s));
            }
        }
    }
    if let Ok(segs) = store.segments(world) {
        for s in segs.into_iter().filter(|&s| s < oldest_base) {
            if let Err(e) = store.delete_segment(world, s) {
                tracing::warn!(world, "persistence: {e}");
            }
        }
    }
}

/// A durable world's state as the writer sees it, shared with the world thread and the
/// health and metrics views (atomics; the error under a short mutex).
#[derive(Debug, Default)]
pub struct DurableStatus {
    /// Everything handed to the writer so far is on disk (or on its way, within the fsync
    /// policy), and the log has no gap.
    pub durable: AtomicBool,
    /// The log has a gap (queue full or backlog over its bound): records are no longer written
    /// until a load or reset starts a new log.
    pub broken: AtomicBool,
    /// Bytes written to the store.
    pub bytes: AtomicU64,
    /// Bytes waiting to be retried after a failed write.
    pub backlog: AtomicU64,
    /// Failed writes (each retried).
    pub write_errors: AtomicU64,
    /// The newest sim tick whose checkpoint is on disk.
    pub durable_tick: AtomicU64,
    /// Snapshots written.
    pub snapshots: AtomicU64,
    /// The last error, until a write succeeds again.
    pub error: Mutex<Option<String>>,
}

impl DurableStatus {
    pub(super) fn set_error(&self, e: Option<String>) {
        if let Ok(mut g) = self.error.lock() {
            *g = e;
        }
    }

    /// The last error.
    pub fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|g| g.clone())
    }
}
