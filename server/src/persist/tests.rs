//! The format and recovery rules: a recovered world equals the one that ran (bit for bit, at the
//! last durable tick); a torn tail is cut; a corrupt snapshot falls back; a missing segment names
//! the file; a failing store keeps the world running, not durable, and catches up.

use std::path::PathBuf;
use std::sync::atomic::AtomicU32;

use glam::Vec2;

use super::*;
use crate::config::PersistSettings;
use crate::runtime::world::build_world;
use crate::scenario::Scenario;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("steerd-persist-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn crossing() -> Scenario {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios/crossing.json");
    Scenario::from_file(&path).unwrap()
}

fn settings() -> PersistSettings {
    // Every step is a group commit: what the tests read back is on disk after `drain`.
    PersistSettings { fsync_interval_ms: 1, snapshot_every_secs: 3600, ..PersistSettings::default() }
}

/// A store that fails appends while `fail` is above 0 (each failure counts it down), as a full
/// disk does.
struct Flaky {
    inner: disk::LocalDisk,
    fail: AtomicU32,
}

impl Store for Flaky {
    fn describe(&self, w: &str, s: Option<u64>) -> String {
        self.inner.describe(w, s)
    }
    fn describe_snapshot(&self, w: &str, s: u64) -> String {
        self.inner.describe_snapshot(w, s)
    }
    fn worlds(&self) -> Result<Vec<String>, PersistError> {
        self.inner.worlds()
    }
    fn segments(&self, w: &str) -> Result<Vec<u64>, PersistError> {
        self.inner.segments(w)
    }
    fn append(&self, w: &str, s: u64, b: &[u8]) -> Result<(), PersistError> {
        if self.fail.load(Ordering::SeqCst) > 0 {
            self.fail.fetch_sub(1, Ordering::SeqCst);
            return Err(PersistError::Io { file: self.inner.describe(w, Some(s)), reason: "No space left on device (injected)".into() });
        }
        self.inner.append(w, s, b)
    }
    fn sync(&self, w: &str, s: u64) -> Result<(), PersistError> {
        self.inner.sync(w, s)
    }
    fn close(&self, w: &str, s: u64) {
        self.inner.close(w, s)
    }
    fn read_segment(&self, w: &str, s: u64) -> Result<Vec<u8>, PersistError> {
        self.inner.read_segment(w, s)
    }
    fn truncate_segment(&self, w: &str, s: u64, l: u64) -> Result<(), PersistError> {
        self.inner.truncate_segment(w, s, l)
    }
    fn delete_segment(&self, w: &str, s: u64) -> Result<(), PersistError> {
        self.inner.delete_segment(w, s)
    }
    fn put_snapshot(&self, w: &str, s: u64, b: &[u8]) -> Result<(), PersistError> {
        self.inner.put_snapshot(w, s, b)
    }
    fn snapshots(&self, w: &str) -> Result<Vec<u64>, PersistError> {
        self.inner.snapshots(w)
    }
    fn read_snapshot(&self, w: &str, s: u64) -> Result<Vec<u8>, PersistError> {
        self.inner.read_snapshot(w, s)
    }
    fn delete_snapshot(&self, w: &str, s: u64) -> Result<(), PersistError> {
        self.inner.delete_snapshot(w, s)
    }
    fn remove_world(&self, w: &str) -> Result<(), PersistError> {
        self.inner.remove_world(w)
    }
}

/// A world driven as its thread drives it: commands through the hook, steps, commits.
struct Live {
    world: World,
    dur: Durable,
}

impl Live {
    fn start(writer: &Arc<Writer>, name: &str) -> Live {
        let sc = crossing();
        let world = build_world(&sc, 10_000, 1_000).unwrap();
        let dur = Durable::fresh(writer, name, &start_record(&sc, 10_000, 1_000));
        Live { world, dur }
    }

    fn apply(&mut self, c: Command) {
        self.dur.command(&self.world, &c);
        let _ = self.world.apply(c);
    }

    fn steps(&mut self, n: u32) {
        for _ in 0..n {
            self.world.step();
            drop(self.world.take_field_jobs());
            std::thread::sleep(Duration::from_millis(1));
            self.dur.after_step(&self.world);
        }
    }

    /// A snapshot, with the runner state of a world loaded from `crossing` and `owners`.
    fn snap(&mut self, owners: Vec<(u32, String, Option<String>)>) {
        let runner = RunnerState { scenario: serde_json::to_string(&crossing()).unwrap(), max_agents: 10_000, max_spawn: 1_000, owners, sessions: Vec::new() };
        self.dur.snapshot(&self.world, false, Some("crossing"), runner);
    }

    fn hashes(&self) -> (u64, u64, u64) {
        (self.world.tick(), crate::sim::hash::state_hash(&self.world), crate::sim::hash::exact_hash(&self.world))
    }
}

fn hashes(w: &World) -> (u64, u64, u64) {
    (w.tick(), crate::sim::hash::state_hash(w), crate::sim::hash::exact_hash(w))
}

fn some_commands(l: &mut Live) {
    l.apply(Command::AddObstacle { center: Vec2::new(3.0, 4.0), radius: 2.0 });
    l.apply(Command::MoveTo { agents: vec![1, 2, 3], target: Vec2::new(10.0, -5.0), stopping_distance: 0.5 });
    l.apply(Command::Despawn(7));
}

#[test]
fn snapshots_round_trip_and_a_flipped_bit_fails_the_checksum() {
    let m = SnapshotMeta {
        world: "w".into(),
        tick: 42,
        state_hash: 1,
        exact_hash: 2,
        base_segment: 3,
        segment: 4,
        records: 9,
        paused: true,
        scenario_name: Some("s".into()),
        taken_unix: 5,
        runner: Some(RunnerState { scenario: "{}".into(), max_agents: 1, max_spawn: 1, owners: vec![(3, "p".into(), None)], sessions: Vec::new() }),
    };
    let world = [7u8, 8, 9];
    let mut b = encode_snapshot(&m, &world);
    assert_eq!(decode_snapshot(&b).unwrap(), Snapshot { meta: m.clone(), world: Some(&world[..]) });
    assert_eq!(needs_log_from(&decode_snapshot(&b).unwrap()), 4);
    let last = b.len() - 3;
    b[last] ^= 0x10;
    assert_eq!(decode_snapshot(&b).unwrap_err(), "checksum mismatch");
    assert!(decode_snapshot(&b[..SNAP_HEADER + 2]).unwrap_err().contains("header says"));
    assert!(decode_snapshot(b"STEERREC....").unwrap_err().contains("magic"));
}

#[test]
fn a_recovered_world_is_the_one_that_ran_bit_for_bit_with_its_owners() {
    let dir = tmp("same");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), settings()).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(10);
    some_commands(&mut l);
    l.dur.owner(&l.world, 5, Some("alice"), Some("red"));
    l.dur.owner(&l.world, 6, Some("bob"), None);
    l.dur.owner(&l.world, 6, None, None);
    l.steps(15);
    l.dur.idle(&l.world);
    assert!(writer.drain(Duration::from_secs(10)));
    let live = l.hashes();
    assert!(l.dur.view().durable);
    assert_eq!(l.dur.status().durable_tick.load(Ordering::Relaxed), live.0);
    let r = recover(&*store, "w", 2).unwrap();
    assert_eq!(hashes(&r.world), live, "{:?}", r.report);
    assert_eq!(r.owners, vec![(5, "alice".to_string(), Some("red".to_string()))]);
    // The last checkpoint of the log is compared (the others are passed over).
    assert_eq!(r.report.checks, 1, "{:?}", r.report);
    assert!(r.report.torn.is_none());
    // The recovered world goes on exactly as the live one.
    let mut w = r.world;
    l.steps(5);
    for _ in 0..5 {
        w.step();
        drop(w.take_field_jobs());
    }
    assert_eq!(hashes(&w), l.hashes());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_torn_tail_is_cut_off_and_reported() {
    let dir = tmp("torn");
    let disk = disk::LocalDisk::open(&dir).unwrap();
    let store: Arc<dyn Store> = Arc::new(disk);
    let writer = Writer::start(store.clone(), settings()).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(12);
    assert!(writer.drain(Duration::from_secs(10)));
    let live = l.hashes();
    // A crash in the middle of the next chunk's write: its first bytes are there.
    let seg = *store.segments("w").unwrap().last().unwrap();
    let before = store.read_segment("w", seg).unwrap().len();
    let chunk = format::frame_chunk(&[2, 12, 1, 5]);
    store.append("w", seg, &chunk[..chunk.len() - 2]).unwrap();
    drop(l);
    let r = recover(&*store, "w", 1).unwrap();
    assert_eq!(hashes(&r.world), live);
    let torn = r.report.torn.unwrap();
    assert!(torn.contains("torn tail of 10 bytes") && torn.contains(&format!("seg-{seg:020}.log")), "{torn}");
    // The file is whole chunks again.
    assert_eq!(store.read_segment("w", seg).unwrap().len(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_snapshot_falls_back_to_the_one_before_and_more_log() {
    let dir = tmp("snap");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), PersistSettings { segment_max_bytes: 256, ..settings() }).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(10);
    l.snap(Vec::new());
    // A load: a new start, the log from here on is the world's.
    let sc = crossing();
    l.world = build_world(&sc, 10_000, 1_000).unwrap();
    l.dur.started(&start_record(&sc, 10_000, 1_000));
    l.steps(8);
    some_commands(&mut l);
    l.steps(4);
    l.snap(Vec::new());
    l.steps(3);
    l.dur.idle(&l.world);
    assert!(writer.drain(Duration::from_secs(10)));
    let live = l.hashes();
    let snaps = store.snapshots("w").unwrap();
    assert_eq!(snaps.len(), 2, "{snaps:?}");
    let (newest, older) = (store.read_snapshot("w", snaps[1]).unwrap(), store.read_snapshot("w", snaps[0]).unwrap());
    let (newest, older) = (decode_snapshot(&newest).unwrap().meta, decode_snapshot(&older).unwrap().meta);
    assert!(older.segment < newest.segment, "{older:?} {newest:?}");
    // Segments before the older snapshot's place were deleted; its segment is kept.
    assert_eq!(store.segments("w").unwrap()[0], older.segment);
    let ok = recover(&*store, "w", 1).unwrap();
    assert_eq!(hashes(&ok.world), live);
    assert_eq!(ok.scenario_name.as_deref(), Some("crossing"));
    // Damage the newest snapshot: the one before it and more log give the same world.
    let mut b = store.read_snapshot("w", snaps[1]).unwrap();
    let n = b.len() - 1;
    b[n] ^= 1;
    store.put_snapshot("w", snaps[1], &b).unwrap();
    let r = recover(&*store, "w", 1).unwrap();
    assert_eq!(hashes(&r.world), live);
    assert_eq!(r.report.snapshots_rejected.len(), 1, "{:?}", r.report);
    assert!(r.report.snapshots_rejected[0].contains("checksum mismatch"));
    assert!(r.report.snapshot.as_deref().is_some_and(|s| s.ends_with(&format!("snap-{:020}.snap", snaps[0]))));
    assert!(r.report.segments.len() > ok.report.segments.len(), "{:?} vs {:?}", r.report.segments, ok.report.segments);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_segment_stops_recovery_naming_the_file() {
    let dir = tmp("missing");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), PersistSettings { segment_max_bytes: 200, ..settings() }).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(20);
    let mut other = Live::start(&writer, "other");
    other.steps(3);
    assert!(writer.drain(Duration::from_secs(10)));
    let segs = store.segments("w").unwrap();
    assert!(segs.len() >= 3, "{segs:?}");
    store.delete_segment("w", segs[1]).unwrap();
    match recover(&*store, "w", 1) {
        Err(RecoverError::Missing { file }) => assert!(file.ends_with(&format!("w/seg-{:020}.log", segs[1])), "{file}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("recovered a world with a hole in its log"),
    }
    // The other world is not affected.
    assert_eq!(hashes(&recover(&*store, "other", 1).unwrap().world), other.hashes());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failed_writes_keep_the_world_running_not_durable_and_catch_up_without_a_gap() {
    let dir = tmp("flaky");
    let flaky = Arc::new(Flaky { inner: disk::LocalDisk::open(&dir).unwrap(), fail: AtomicU32::new(0) });
    let store: Arc<dyn Store> = flaky.clone();
    let writer = Writer::start(store.clone(), settings()).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(5);
    assert!(writer.drain(Duration::from_secs(10)));
    assert!(l.dur.view().durable);
    // The disk fills: every write fails until space returns (a count of failures would run
    // out in the retries, every 200 ms, on a machine slow enough to take a second here).
    flaky.fail.store(u32::MAX, Ordering::SeqCst);
    l.steps(4);
    some_commands(&mut l);
    l.steps(4);
    assert!(writer.drain(Duration::from_secs(10)));
    let v = l.dur.view();
    assert!(!v.durable, "{v:?}");
    assert!(v.error.as_deref().is_some_and(|e| e.contains("No space left")), "{v:?}");
    assert!(v.write_errors >= 1 && v.backlog_bytes > 0, "{v:?}");
    // Space returns: the retries (every 200 ms) write the backlog in order.
    flaky.fail.store(0, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !l.dur.view().durable && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        assert!(writer.drain(Duration::from_secs(10)));
    }
    let v = l.dur.view();
    assert!(v.durable && v.backlog_bytes == 0 && v.error.is_none(), "{v:?}");
    l.steps(3);
    assert!(writer.drain(Duration::from_secs(10)));
    let r = recover(&*store, "w", 1).unwrap();
    assert_eq!(hashes(&r.world), l.hashes());
    assert!(r.report.torn.is_none(), "{:?}", r.report);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_backlog_past_its_bound_ends_the_log_until_the_next_start() {
    let dir = tmp("bound");
    let flaky = Arc::new(Flaky { inner: disk::LocalDisk::open(&dir).unwrap(), fail: AtomicU32::new(0) });
    let store: Arc<dyn Store> = flaky.clone();
    let writer = Writer::start(store.clone(), PersistSettings { max_backlog_bytes: 200, ..settings() }).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(3);
    assert!(writer.drain(Duration::from_secs(10)));
    flaky.fail.store(u32::MAX, Ordering::SeqCst);
    l.steps(30);
    assert!(writer.drain(Duration::from_secs(10)));
    // The writer retries its backlogs at least every `RETRY_EVERY`: waiting that long, then
    // draining, makes sure a retry round ran after the log ended (see `retry_round`), and
    // chunks (with a command) keep coming after it, as they do on a world that runs on.
    retry_round(&writer);
    some_commands(&mut l);
    l.steps(3);
    assert!(writer.drain(Duration::from_secs(10)));
    let v = l.dur.view();
    assert!(!v.durable && v.error.as_deref().is_some_and(|e| e.contains("max_backlog_bytes")), "{v:?}");
    let (written, durable_tick) = (l.dur.status().bytes.load(Ordering::SeqCst), l.dur.status().durable_tick.load(Ordering::SeqCst));
    // Space returns: nothing after the gap is written, and the log stays not durable.
    flaky.fail.store(0, Ordering::SeqCst);
    l.apply(Command::MoveTo { agents: vec![2, 5], target: Vec2::new(-4.0, 3.0), stopping_distance: 0.5 });
    l.steps(3);
    retry_round(&writer);
    l.steps(3);
    assert!(writer.drain(Duration::from_secs(10)));
    let v = l.dur.view();
    assert!(!v.durable, "a log with a gap is not durable: {v:?}");
    assert!(v.error.as_deref().is_some_and(|e| e.contains("max_backlog_bytes")), "{v:?}");
    assert_eq!(l.dur.status().bytes.load(Ordering::SeqCst), written, "records were written after the gap");
    // What is on disk recovers: the world at the last tick before the gap.
    assert_eq!(recover(&*store, "w", 1).unwrap().world.tick(), durable_tick);
    // A load starts a new log: durable again, and recovery re-runs that one.
    let sc = crossing();
    l.world = build_world(&sc, 10_000, 1_000).unwrap();
    l.dur.started(&start_record(&sc, 10_000, 1_000));
    l.steps(6);
    assert!(writer.drain(Duration::from_secs(10)));
    assert!(l.dur.view().durable, "{:?}", l.dur.view());
    assert_eq!(hashes(&recover(&*store, "w", 1).unwrap().world), l.hashes());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Returns once the writer has run a retry round after this call began: it retries when a
/// group starts [`writer::RETRY_EVERY`] after the last round, or when none started for that
/// long, so after a sleep of that length the next group (the drain's barrier) comes after a
/// round, however the threads were scheduled.
fn retry_round(writer: &Writer) {
    std::thread::sleep(writer::RETRY_EVERY);
    assert!(writer.drain(Duration::from_secs(10)));
}

#[test]
fn every_command_replies_only_after_the_record_is_synced() {
    let dir = tmp("ack");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), PersistSettings { fsync: FsyncPolicy::EveryCommand, fsync_interval_ms: 60_000, ..settings() }).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(3);
    let (tx, rx) = std::sync::mpsc::channel();
    l.apply(Command::AddObstacle { center: Vec2::new(1.0, 1.0), radius: 1.0 });
    let store2 = store.clone();
    l.dur.reply(Box::new(move || {
        // When the reply goes, the command is in the file.
        let segs = store2.segments("w").unwrap();
        let mut found = false;
        for s in segs {
            let p = format::parse(&store2.read_segment("w", s).unwrap()).unwrap();
            found |= p.records.iter().any(|r| matches!(r, Record::Command { command: Command::AddObstacle { .. }, .. }));
        }
        let _ = tx.send(found);
    }));
    assert!(rx.recv_timeout(Duration::from_secs(10)).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_name_deleted_and_created_again_keeps_only_the_new_worlds_log() {
    let dir = tmp("again");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), settings()).unwrap();
    let mut old = Live::start(&writer, "w");
    old.steps(4);
    // DELETE then POST under the same name while the old thread still ends: the old world's
    // last chunks and its deletion arrive after the new world began.
    let mut new = Live::start(&writer, "w");
    new.apply(Command::AddObstacle { center: Vec2::new(5.0, 5.0), radius: 1.0 });
    new.steps(3);
    old.steps(6);
    old.dur.stop(&old.world, true);
    new.steps(2);
    assert!(writer.drain(Duration::from_secs(10)));
    let r = recover(&*store, "w", 1).unwrap();
    assert_eq!(hashes(&r.world), new.hashes());
    assert_eq!(r.world.obstacles().len(), new.world.obstacles().len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn recovery_restores_the_snapshot_and_re_runs_only_the_log_after_it() {
    let dir = tmp("tail");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), PersistSettings { segment_max_bytes: 300, ..settings() }).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(30);
    some_commands(&mut l);
    l.dur.owner(&l.world, 5, Some("alice"), Some("red"));
    l.steps(10);
    l.snap(vec![(5, "alice".into(), Some("red".into()))]);
    let at = l.world.tick();
    l.snap(vec![(5, "alice".into(), Some("red".into()))]);
    // After the snapshot: more steps, a command and an owner change, all in the tail.
    l.steps(7);
    l.apply(Command::MoveTo { agents: vec![4, 8], target: Vec2::new(-6.0, 2.0), stopping_distance: 0.5 });
    l.dur.owner(&l.world, 8, Some("bob"), None);
    l.steps(6);
    l.dur.idle(&l.world);
    assert!(writer.drain(Duration::from_secs(10)));
    let live = l.hashes();
    let r = recover(&*store, "w", 2).unwrap();
    assert_eq!(hashes(&r.world), live, "{:?}", r.report);
    assert_eq!(r.report.ticks, live.0 - at, "only the ticks after the snapshot are re-run: {:?}", r.report);
    assert_eq!(r.report.commands, 1, "{:?}", r.report);
    assert!(r.report.snapshot.is_some() && r.report.checks >= 1, "{:?}", r.report);
    assert_eq!(r.owners, vec![(5, "alice".to_string(), Some("red".to_string())), (8, "bob".to_string(), None)]);
    assert_eq!(r.scenario_name.as_deref(), Some("crossing"));
    // The segments before the older kept snapshot's place are gone: the log did not grow with
    // the world's life.
    let snaps = store.snapshots("w").unwrap();
    let older = decode_snapshot(&store.read_snapshot("w", snaps[0]).unwrap()).unwrap().meta;
    assert!(older.segment > 0);
    assert_eq!(store.segments("w").unwrap()[0], older.segment);
    // The recovered world goes on exactly as the live one.
    let mut w = r.world;
    l.steps(5);
    for _ in 0..5 {
        w.step();
        drop(w.take_field_jobs());
    }
    assert_eq!(hashes(&w), l.hashes());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_snapshot_whose_world_is_not_the_one_it_names_falls_back() {
    let dir = tmp("lie");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), settings()).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(5);
    l.snap(Vec::new());
    l.steps(5);
    l.snap(Vec::new());
    l.steps(3);
    assert!(writer.drain(Duration::from_secs(10)));
    let live = l.hashes();
    let snaps = store.snapshots("w").unwrap();
    // The newest snapshot's world is changed (an agent's x nudged) and its checksum made
    // good again: it loads, but does not hash to the state it names.
    let b = store.read_snapshot("w", snaps[1]).unwrap();
    let s = decode_snapshot(&b).unwrap();
    let mut world = s.world.unwrap().to_vec();
    let w = World::load(&world).unwrap();
    let x = w.agents().iter().next().unwrap().position.x;
    let at = world.windows(4).position(|q| q == x.to_bits().to_le_bytes()).unwrap();
    world[at..at + 4].copy_from_slice(&(x + 0.25).to_bits().to_le_bytes());
    store.put_snapshot("w", snaps[1], &encode_snapshot(&s.meta, &world)).unwrap();
    let r = recover(&*store, "w", 1).unwrap();
    assert_eq!(hashes(&r.world), live);
    assert!(r.report.snapshots_rejected.len() == 1 && r.report.snapshots_rejected[0].contains("is not the one it names"), "{:?}", r.report);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_exported_world_imports_into_any_store_and_recovers_to_the_same_state() {
    let mem: Arc<dyn Store> = Arc::new(mem::MemStore::new());
    let writer = Writer::start(mem.clone(), PersistSettings { segment_max_bytes: 400, ..settings() }).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(12);
    some_commands(&mut l);
    l.snap(vec![(5, "alice".into(), None)]);
    l.steps(9);
    l.dur.idle(&l.world);
    assert!(writer.drain(Duration::from_secs(10)));
    let live = l.hashes();
    let bytes = export_world(&*mem, "w").unwrap();
    // Into another in-memory store (a server receiving the world), under another name.
    let target = mem::MemStore::new();
    import_world(&target, "moved", &bytes).unwrap();
    let r = recover(&target, "moved", 1).unwrap();
    assert_eq!(hashes(&r.world), live);
    assert_eq!(r.owners, vec![(5, "alice".to_string(), None)]);
    assert!(r.report.snapshot.is_some());
    // Into a disk store, as the target's own persistence would keep it.
    let dir = tmp("import");
    let disk = disk::LocalDisk::open(&dir).unwrap();
    import_world(&disk, "w", &bytes).unwrap();
    assert_eq!(hashes(&recover(&disk, "w", 1).unwrap().world), live);
    // A damaged export changes nothing in the target.
    let mut bad = bytes.clone();
    let k = bad.len() / 2;
    bad[k] ^= 4;
    assert!(matches!(import_world(&target, "moved", &bad), Err(TransferError::Malformed(m)) if m.contains("checksum")));
    assert!(import_world(&target, "moved", &bytes[..bytes.len() - 9]).is_err());
    assert_eq!(hashes(&recover(&target, "moved", 1).unwrap().world), live);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sessions_logged_after_the_snapshot_are_the_ones_recovered() {
    let dir = tmp("sessions");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), settings()).unwrap();
    let mut l = Live::start(&writer, "w");
    let session = |k: u8, grace_ms: u64| StoredSession {
        token_sha256: format!("{k:064x}"),
        player: format!("p{k}"),
        role: steer_proto::Role::Player,
        team: None,
        worlds: None,
        expires: Some(4_000_000_000),
        subs: Vec::new(),
        grace_ms,
    };
    l.steps(3);
    l.snap(Vec::new());
    let before = vec![session(1, 30_000)];
    l.dur.sessions(&l.world, &before);
    l.steps(3);
    // The same set again is not logged again; a new one is.
    l.dur.sessions(&l.world, &[session(1, 20_000)]);
    let after = vec![session(1, 15_000), session(2, 30_000)];
    l.dur.sessions(&l.world, &after);
    l.steps(2);
    l.dur.idle(&l.world);
    assert!(writer.drain(Duration::from_secs(10)));
    let r = recover(&*store, "w", 1).unwrap();
    assert_eq!(r.sessions, after);
    assert_eq!(hashes(&r.world), l.hashes());
    let logged: usize = store
        .segments("w")
        .unwrap()
        .iter()
        .map(|&s| format::parse(&store.read_segment("w", s).unwrap()).unwrap().records.iter().filter(|r| matches!(r, Record::Sessions { .. })).count())
        .sum();
    assert_eq!(logged, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pruned_log_directory_replays_from_its_oldest_snapshot() {
    let dir = tmp("pruned");
    let store: Arc<dyn Store> = Arc::new(disk::LocalDisk::open(&dir).unwrap());
    let writer = Writer::start(store.clone(), PersistSettings { segment_max_bytes: 300, ..settings() }).unwrap();
    let mut l = Live::start(&writer, "w");
    l.steps(20);
    l.snap(Vec::new());
    l.steps(10);
    some_commands(&mut l);
    l.snap(Vec::new());
    l.steps(10);
    l.dur.idle(&l.world);
    assert!(writer.drain(Duration::from_secs(10)));
    let live = l.hashes();
    let d = disk::read_log_dir(&dir.join("w")).unwrap();
    assert!(!matches!(d.parsed.records.first(), Some(Record::Start { .. })), "the log's start was pruned");
    let snaps = store.snapshots("w").unwrap();
    assert!(d.snapshot.as_deref().is_some_and(|s| s.ends_with(&format!("snap-{:020}.snap", snaps[0]))), "{:?}", d.snapshot);
    let (rep, kept) = crate::record::replay::replay_onto(d.from, &d.parsed, &crate::record::replay::ReplayOptions::default(), &mut |_, _| {}).unwrap();
    assert!(rep.checks > 0 && rep.checks == rep.checks_ok, "{rep:?}");
    assert_eq!(hashes(&kept.unwrap().0), live);
    let _ = std::fs::remove_dir_all(&dir);
}
