//! Record and replay (issue 19): a world's run — its starting scenario, every command applied to
//! its sim `World` with the tick it applied at, tick-rate changes, pauses, and a state hash every
//! N ticks — written to an append-only file that `steerd replay` re-runs and verifies.
//! File format: `server/RECORDING.md`.
//!
//! **Invariant:** the world thread never waits on the disk. A [`Recorder`] encodes into an
//! in-memory chunk and hands finished chunks to the one writer thread over a bounded channel
//! with `try_send`; when the channel is full the recording stops (and says why in the world's
//! status) rather than stall the tick.

/// The command codec lives in the sim core (`sim::codec`), shared with world snapshots.
pub use crate::sim::codec;
pub mod format;
pub mod generate;
pub mod player;
pub mod replay;

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use codec::Enc;
use format::Record;

use crate::sim::hash::{exact_hash, state_hash};
use crate::sim::world::{Command, World};

/// File name extension of recordings.
pub const EXT: &str = "rec";

/// Recording settings (from `limits.recording_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecordSettings {
    /// A file stops growing (the recording ends) once it reaches this size.
    pub max_bytes: u64,
    /// Most recording files kept per world: starting a new one deletes the oldest beyond it.
    pub max_files: usize,
    /// Ticks between state-hash checkpoints.
    pub hash_every_ticks: u64,
    /// Chunks queued for the writer thread, at most.
    pub writer_queue: usize,
    /// A chunk is handed to the writer at every checkpoint, or earlier when it reaches this.
    pub chunk_bytes: usize,
    /// Checkpoints carry per-agent digests (lets `replay --verify` name the first differing
    /// agent; costs 4–6 bytes per agent per checkpoint).
    pub agent_digests: bool,
}

impl From<&crate::config::LimitSettings> for RecordSettings {
    fn from(l: &crate::config::LimitSettings) -> Self {
        RecordSettings {
            max_bytes: l.recording_max_bytes,
            max_files: l.recording_max_files,
            hash_every_ticks: u64::from(l.recording_hash_every_ticks.max(1)),
            writer_queue: l.recording_writer_queue,
            agent_digests: l.recording_agent_digests,
            ..RecordSettings::default()
        }
    }
}

impl Default for RecordSettings {
    fn default() -> Self {
        RecordSettings { max_bytes: 64 << 20, max_files: 8, hash_every_ticks: 20, writer_queue: 256, chunk_bytes: 64 << 10, agent_digests: false }
    }
}

/// What a world's recording is doing (part of `GET /worlds/{w}`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct RecordingView {
    /// Recording now.
    pub active: bool,
    /// The current (or last) recording's name (`GET /worlds/{w}/recording` downloads it).
    pub name: Option<String>,
    /// Bytes handed to the writer so far.
    pub bytes: u64,
    /// Why the last recording stopped, or the writer's error.
    pub stopped: Option<String>,
}

/// Per-file state shared with the writer thread.
#[derive(Debug, Default)]
struct FileShared {
    error: Mutex<Option<String>>,
    written: AtomicU64,
}

enum Job {
    Open { name: String, world: String, shared: Arc<FileShared> },
    Append { name: String, bytes: Vec<u8>, shared: Arc<FileShared> },
    Close { name: String },
    /// Answered once every job before it is done.
    Barrier(SyncSender<()>),
}

/// The recordings directory and its writer thread, shared by every world.
pub struct RecordHub {
    dir: PathBuf,
    tx: SyncSender<Job>,
    /// The settings.
    pub settings: RecordSettings,
    /// Record every world from its start (`serve --record`).
    pub record_all: bool,
    active: Mutex<HashMap<String, ()>>,
    seq: AtomicU64,
}

/// Why the hub could not start.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// Disk trouble.
    #[error("recordings directory {0}: {1}")]
    Io(PathBuf, std::io::Error),
}

impl RecordHub {
    /// Creates `dir` and starts the writer thread.
    pub fn start(dir: &Path, settings: RecordSettings, record_all: bool) -> Result<Arc<Self>, HubError> {
        std::fs::create_dir_all(dir).map_err(|e| HubError::Io(dir.to_path_buf(), e))?;
        let (tx, rx) = std::sync::mpsc::sync_channel(settings.writer_queue.max(1));
        let wdir = dir.to_path_buf();
        let max_files = settings.max_files.max(1);
        std::thread::Builder::new()
            .name("recorder".into())
            .spawn(move || writer(&wdir, max_files, rx))
            .map_err(|e| HubError::Io(dir.to_path_buf(), e))?;
        Ok(Arc::new(RecordHub { dir: dir.to_path_buf(), tx, settings, record_all, active: Mutex::new(HashMap::new()), seq: AtomicU64::new(0) }))
    }

    /// The recordings directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of a recording name (None if the name is not valid).
    pub fn path_of(&self, name: &str) -> Option<PathBuf> {
        crate::scenario::valid_name(name).then(|| self.dir.join(format!("{name}.{EXT}")))
    }

    /// True while a world writes to this recording.
    pub fn is_active(&self, name: &str) -> bool {
        self.active.lock().map(|a| a.contains_key(name)).unwrap_or(false)
    }

    /// Recordings on disk: name, bytes, active.
    pub fn list(&self) -> std::io::Result<Vec<(String, u64, bool)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            let p = e.path();
            if p.extension().and_then(|x| x.to_str()) != Some(EXT) {
                continue;
            }
            let Some(name) = p.file_stem().and_then(|s| s.to_str()) else { continue };
            if !crate::scenario::valid_name(name) {
                continue;
            }
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            out.push((name.to_string(), len, self.is_active(name)));
        }
        out.sort();
        Ok(out)
    }

    fn new_name(&self, world: &str) -> String {
        let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        // valid_name allows 64 bytes: world (≤ 40) + '-' + 10 digits + '-' + sequence.
        let w: String = world.chars().take(40).collect();
        format!("{w}-{secs:010}-{seq}")
    }

    fn send(&self, job: Job) -> Result<(), &'static str> {
        match self.tx.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_)) => Err("the recording writer's queue is full (disk too slow)"),
            Err(TrySendError::Disconnected(_)) => Err("the recording writer thread is gone"),
        }
    }
}

/// The writer thread: appends chunks; never called from a world thread.
fn writer(dir: &Path, max_files: usize, rx: Receiver<Job>) {
    let mut files: HashMap<String, File> = HashMap::new();
    let fail = |shared: &FileShared, e: String| {
        tracing::error!("recording: {e}");
        if let Ok(mut s) = shared.error.lock() {
            s.get_or_insert(e);
        }
    };
    while let Ok(job) = rx.recv() {
        match job {
            Job::Open { name, world, shared } => {
                rotate(dir, &world, max_files.saturating_sub(1));
                let path = dir.join(format!("{name}.{EXT}"));
                match OpenOptions::new().create_new(true).append(true).open(&path) {
                    Ok(mut f) => match f.write_all(&format::header()) {
                        Ok(()) => {
                            shared.written.fetch_add(format::HEADER_LEN as u64, Ordering::Relaxed);
                            files.insert(name, f);
                        }
                        Err(e) => fail(&shared, format!("cannot write {}: {e}", path.display())),
                    },
                    Err(e) => fail(&shared, format!("cannot create {}: {e}", path.display())),
                }
            }
            Job::Append { name, bytes, shared } => {
                if let Some(f) = files.get_mut(&name) {
                    // One write per chunk; a crash mid-write leaves a torn last chunk that
                    // readers detect (length/CRC) and drop.
                    match f.write_all(&bytes) {
                        Ok(()) => {
                            shared.written.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                        }
                        Err(e) => {
                            fail(&shared, format!("cannot append to recording {name}: {e}"));
                            files.remove(&name);
                        }
                    }
                }
            }
            Job::Close { name } => {
                if let Some(f) = files.remove(&name) {
                    let _ = f.sync_data();
                }
            }
            Job::Barrier(done) => {
                let _ = done.try_send(());
            }
        }
    }
}

/// Deletes the oldest recordings of `world` until at most `keep` remain (names sort by time).
fn rotate(dir: &Path, world: &str, keep: usize) {
    let w: String = world.chars().take(40).collect();
    let prefix = format!("{w}-");
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    let mut mine: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|x| x.to_str()) == Some(EXT))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_string();
            // `<world>-<10 digits>-<n>`: only this world's own files.
            let rest = stem.strip_prefix(&prefix)?;
            let (secs, seq) = rest.split_once('-')?;
            (secs.len() == 10 && secs.bytes().all(|b| b.is_ascii_digit()) && seq.bytes().all(|b| b.is_ascii_digit())).then(|| {
                let key = format!("{secs}-{seq:0>20}");
                (key, p)
            })
        })
        .collect();
    mine.sort();
    while mine.len() > keep {
        let (_, p) = mine.remove(0);
        match std::fs::remove_file(&p) {
            Ok(()) => tracing::info!("recording rotated out: {}", p.display()),
            Err(e) => tracing::warn!("cannot rotate out {}: {e}", p.display()),
        }
    }
}

/// A world's recording in progress. Lives on the world thread; every call is non-blocking.
pub struct Recorder {
    hub: Arc<RecordHub>,
    name: String,
    shared: Arc<FileShared>,
    chunk: Enc,
    queued: u64,
    hash_every: u64,
    digests: bool,
    stopped: Option<String>,
}

impl Recorder {
    /// Starts a recording of world `world` whose first record is `start` (a `Record::Start`).
    pub fn start(hub: &Arc<RecordHub>, world: &str, start: &Record) -> Recorder {
        let name = hub.new_name(world);
        let shared = Arc::new(FileShared::default());
        let (hash_every, digests) = match start {
            Record::Start { hash_every, digests, .. } => (*hash_every, *digests),
            _ => (hub.settings.hash_every_ticks, hub.settings.agent_digests),
        };
        let mut r = Recorder {
            hub: hub.clone(),
            name: name.clone(),
            shared: shared.clone(),
            chunk: Enc::default(),
            queued: format::HEADER_LEN as u64,
            hash_every: hash_every.max(1),
            digests,
            stopped: None,
        };
        match hub.send(Job::Open { name: name.clone(), world: world.to_string(), shared }) {
            Ok(()) => {
                if let Ok(mut a) = hub.active.lock() {
                    a.insert(name, ());
                }
                r.push(start);
                r.flush();
            }
            Err(e) => r.stopped = Some(e.to_string()),
        }
        r
    }

    /// The `Start` record of a fresh recording of `scenario`.
    pub fn start_record(hub: &RecordHub, scenario: &crate::scenario::Scenario, max_agents: usize, max_spawn: usize, digests: bool, from_snapshot: bool) -> Record {
        Record::Start {
            max_agents: max_agents as u64,
            max_spawn: max_spawn as u64,
            hash_every: hub.settings.hash_every_ticks.max(1),
            digests,
            from_snapshot,
            scenario: serde_json::to_string(scenario).unwrap_or_default(),
        }
    }

    /// Recording now (not stopped).
    pub fn active(&self) -> bool {
        self.stopped.is_none()
    }

    /// The status.
    pub fn view(&self) -> RecordingView {
        let err = self.shared.error.lock().ok().and_then(|e| e.clone());
        RecordingView {
            active: self.stopped.is_none() && err.is_none(),
            name: Some(self.name.clone()),
            bytes: self.queued,
            stopped: err.or_else(|| self.stopped.clone()),
        }
    }

    fn push(&mut self, r: &Record) {
        if self.stopped.is_some() {
            return;
        }
        r.encode(&mut self.chunk);
        if self.chunk.buf.len() >= self.hub.settings.chunk_bytes {
            self.flush();
        }
    }

    /// Hands the chunk so far to the writer.
    fn flush(&mut self) {
        if self.stopped.is_some() || self.chunk.buf.is_empty() {
            return;
        }
        let bytes = format::frame_chunk(&std::mem::take(&mut self.chunk.buf));
        let n = bytes.len() as u64;
        match self.hub.send(Job::Append { name: self.name.clone(), bytes, shared: self.shared.clone() }) {
            Ok(()) => self.queued += n,
            Err(e) => self.halt(e.to_string()),
        }
        if self.stopped.is_none() && self.queued >= self.hub.settings.max_bytes {
            self.halt(format!("reached recording_max_bytes ({} bytes)", self.hub.settings.max_bytes));
        }
    }

    fn halt(&mut self, reason: String) {
        tracing::warn!(recording = %self.name, "recording stopped: {reason}");
        self.stopped = Some(reason);
        let _ = self.hub.send(Job::Close { name: self.name.clone() });
        if let Ok(mut a) = self.hub.active.lock() {
            a.remove(&self.name);
        }
    }

    /// A command about to be applied to `world`.
    pub fn command(&mut self, world: &World, command: &Command) {
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

    /// The world was replaced (load/reset): a new segment starts from `start`.
    pub fn restart(&mut self, start: &Record) {
        self.push(start);
        self.flush();
    }

    /// After a step: a checkpoint (and a chunk handed to the writer) every `hash_every` ticks.
    pub fn after_step(&mut self, world: &World) {
        if self.stopped.is_some() || world.tick() % self.hash_every != 0 {
            return;
        }
        self.push(&checkpoint(world, self.digests));
        self.flush();
    }

    /// Ends the recording (an `End` record, then the file is closed).
    pub fn stop(&mut self, world: &World, reason: &str) {
        if self.stopped.is_some() {
            return;
        }
        self.push(&Record::End { tick: world.tick(), reason: reason.to_string() });
        self.flush();
        if self.stopped.is_none() {
            self.halt(reason.to_string());
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if self.stopped.is_none() {
            self.flush();
            self.halt("world stopped".into());
        }
    }
}

/// FNV-1a 64 of one agent's exact float state, truncated to 32 bits.
pub fn agent_digest(a: &crate::sim::Agent) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in [a.position.x, a.position.y, a.velocity.x, a.velocity.y, a.orientation, a.angular_velocity] {
        for b in v.to_bits().to_le_bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    (h ^ (h >> 32)) as u32
}

/// The checkpoint of the current state.
pub fn checkpoint(world: &World, digests: bool) -> Record {
    Record::Check {
        tick: world.tick(),
        state_hash: state_hash(world),
        exact_hash: exact_hash(world),
        agents: if digests { world.agents().iter().map(|a| (a.id, agent_digest(a))).collect() } else { Vec::new() },
    }
}

/// A world thread's recording state: the one object its runner calls at each place the sim
/// `World` changes (commands, tick-rate changes, pauses, steps, loads).
pub struct Hook {
    hub: Option<Arc<RecordHub>>,
    rec: Option<Recorder>,
    /// The world is exactly what its scenario builds (no command, step or change since).
    pristine: bool,
    /// Per-agent digests for recordings started from now on.
    digests: bool,
    max_agents: usize,
    max_spawn: usize,
}

impl Hook {
    /// The hook of a world built from a scenario with these caps.
    pub fn new(hub: Option<Arc<RecordHub>>, max_agents: usize, max_spawn: usize) -> Self {
        let digests = hub.as_ref().is_some_and(|h| h.settings.agent_digests);
        Hook { hub, rec: None, pristine: true, digests, max_agents, max_spawn }
    }

    /// Recording now.
    pub fn active(&self) -> bool {
        self.rec.as_ref().is_some_and(Recorder::active)
    }

    /// The world (re)started from `scenario`: a recording in progress starts a new segment;
    /// otherwise one starts if the scenario or the server asks for it.
    pub fn started(&mut self, world_name: &str, scenario: &crate::scenario::Scenario) {
        self.pristine = true;
        let Some(hub) = self.hub.clone() else { return };
        let start = Recorder::start_record(&hub, scenario, self.max_agents, self.max_spawn, self.digests, false);
        if let Some(r) = self.rec.as_mut().filter(|r| r.active()) {
            r.restart(&start);
        } else if hub.record_all || scenario.recording {
            self.rec = Some(Recorder::start(&hub, world_name, &start));
        }
    }

    /// True when a recording can start from the scenario itself (else from a snapshot).
    pub fn pristine(&self) -> bool {
        self.pristine
    }

    /// Starts recording from `scenario` (the world must be exactly what it builds).
    pub fn start(&mut self, world_name: &str, scenario: &crate::scenario::Scenario, digests: Option<bool>, from_snapshot: bool) -> Result<(), String> {
        let Some(hub) = self.hub.clone() else { return Err("this server has no recordings directory".into()) };
        if let Some(d) = digests {
            self.digests = d;
        }
        if self.active() {
            return Ok(());
        }
        let start = Recorder::start_record(&hub, scenario, self.max_agents, self.max_spawn, self.digests, from_snapshot);
        let r = Recorder::start(&hub, world_name, &start);
        let err = r.view().stopped;
        self.rec = Some(r);
        err.map_or(Ok(()), Err)
    }

    /// Stops recording (the file stays).
    pub fn stop(&mut self, world: &World, reason: &str) {
        if let Some(r) = self.rec.as_mut() {
            r.stop(world, reason);
        }
    }

    /// A command is about to be applied.
    pub fn command(&mut self, world: &World, command: &Command) {
        self.pristine = false;
        if let Some(r) = self.rec.as_mut() {
            r.command(world, command);
        }
    }

    /// The tick rate changed.
    pub fn tick_rate(&mut self, world: &World, rate: f32) {
        self.pristine = false;
        if let Some(r) = self.rec.as_mut() {
            r.tick_rate(world, rate);
        }
    }

    /// Paused or resumed.
    pub fn paused(&mut self, world: &World, paused: bool) {
        if let Some(r) = self.rec.as_mut() {
            r.paused(world, paused);
        }
    }

    /// A step ran.
    pub fn after_step(&mut self, world: &World) {
        self.pristine = false;
        if let Some(r) = self.rec.as_mut() {
            r.after_step(world);
        }
    }

    /// The status.
    pub fn view(&self) -> RecordingView {
        self.rec.as_ref().map(Recorder::view).unwrap_or_default()
    }
}

impl RecordHub {
    /// Waits (at most `timeout`) until the writer has written everything queued before now.
    pub fn drain(&self, timeout: std::time::Duration) -> bool {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let deadline = std::time::Instant::now() + timeout;
        let mut job = Job::Barrier(tx);
        loop {
            match self.tx.try_send(job) {
                Ok(()) => break,
                Err(TrySendError::Full(j)) if std::time::Instant::now() < deadline => {
                    job = j;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                Err(_) => return false,
            }
        }
        rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_the_newest_files_of_that_world_only() {
        let dir = std::env::temp_dir().join(format!("steerd-rotate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let names = [
            "w-1700000000-0",
            "w-1700000000-10",
            "w-1700000000-9",
            "w-1700000001-0",
            "w-1234567890-1700000000-0", // world `w-1234567890`
            "ww-1600000000-0",
            "notes",
        ];
        for n in names {
            std::fs::write(dir.join(format!("{n}.{EXT}")), b"x").unwrap();
        }
        rotate(&dir, "w", 2);
        let mut left: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["notes", "w-1234567890-1700000000-0", "w-1700000000-10", "w-1700000001-0", "ww-1600000000-0"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_recorder_that_cannot_hand_over_stops_and_says_why() {
        let dir = std::env::temp_dir().join(format!("steerd-rec-stop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // A 1-byte cap: the first chunk crosses it, the recording stops, the world goes on.
        let hub = RecordHub::start(&dir, RecordSettings { max_bytes: 1, ..RecordSettings::default() }, false).unwrap();
        let sc = crate::scenario::Scenario::from_json(r#"{"bounds": {"min": {"x": 0, "y": 0}, "max": {"x": 10, "y": 10}}}"#).unwrap();
        let mut world = sc.build().unwrap();
        let mut hook = Hook::new(Some(hub.clone()), 10, 10);
        let e = hook.start("w", &sc, None, false).unwrap_err();
        assert!(e.contains("recording_max_bytes"), "{e}");
        assert!(!hook.active());
        let v = hook.view();
        assert!(v.stopped.as_deref().is_some_and(|s| s.contains("recording_max_bytes")), "{v:?}");
        // Further calls are no-ops.
        hook.command(&world, &Command::Despawn(1));
        world.step();
        hook.after_step(&world);
        assert!(hub.drain(std::time::Duration::from_secs(5)));
        assert!(!hub.is_active(v.name.as_deref().unwrap()));
        let bytes = std::fs::read(hub.path_of(v.name.as_deref().unwrap()).unwrap()).unwrap();
        let p = format::parse(&bytes).unwrap();
        assert_eq!(p.records.len(), 1, "{:?}", p.records);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
