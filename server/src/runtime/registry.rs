//! The named worlds of one process.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

use super::fields::{FieldBuilder, FieldBuilderError};
use super::world::{Arrival, CmdError, DurableSpawn, ReplaySpawn, WorldHandle, WorldSpawn};
use crate::config::{LimitSettings, PlayerSettings};
use super::players::Players;
use crate::metrics::Metrics;
use crate::scenario::Scenario;

/// Why a registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Bad world name.
    #[error("invalid world name `{0}`: use 1 to 64 of A-Z a-z 0-9 _ -")]
    BadName(String),
    /// Name taken.
    #[error("world `{0}` already exists")]
    Exists(String),
    /// Unknown name.
    #[error("no world `{0}`")]
    Unknown(String),
    /// Too many worlds.
    #[error("at most {0} worlds")]
    TooMany(usize),
    /// The world could not start.
    #[error(transparent)]
    Start(#[from] CmdError),
    /// The name's stored state failed to recover: it stays on disk for the operator, and the
    /// name is not reused meanwhile.
    #[error("world `{0}` failed to recover from its stored state ({1}); see GET /health")]
    Unrecovered(String, String),
    /// The world was handed off to another server (where it runs now).
    #[error("world `{0}` moved to another server: {1}")]
    Moved(String, String),
}

/// Most handed-off worlds remembered (for the error that says where they went); the oldest
/// is forgotten first.
pub const MAX_MOVED: usize = 1024;

use crate::scenario::valid_name;

/// How a world starts besides its scenario: a replay, durable, or arrived by a handoff.
struct Start {
    replay: Option<ReplaySpawn>,
    durable: Option<DurableSpawn>,
    arrival: Option<Arrival>,
}

/// Worlds by name.
pub struct Registry {
    worlds: RwLock<BTreeMap<String, WorldHandle>>,
    next_id: AtomicU32,
    limits: LimitSettings,
    metrics: Arc<Metrics>,
    fields: Arc<FieldBuilder>,
    sim_pool: Arc<rayon::ThreadPool>,
    /// Where worlds record (none: recording is refused).
    recorder: Option<Arc<crate::record::RecordHub>>,
    player_rules: PlayerSettings,
    /// Players and sessions (shared with every world).
    pub players: Arc<Players>,
    /// Durable worlds' writer (none: no world is durable), and whether worlds are durable by
    /// default.
    persist: Option<(Arc<crate::persist::Writer>, bool)>,
    /// Stored worlds that failed to recover at start, with why.
    failed: std::sync::Mutex<BTreeMap<String, String>>,
    /// Worlds handed off to another server: name → the URL clients reach it at (at most
    /// [`MAX_MOVED`], oldest first).
    moved: std::sync::Mutex<std::collections::VecDeque<(String, String)>>,
}

impl Registry {
    /// An empty registry, with the flow-field builder threads its worlds share.
    pub fn new(limits: LimitSettings, player_rules: PlayerSettings, players: Arc<Players>, metrics: Arc<Metrics>) -> Result<Self, FieldBuilderError> {
        let fields = Arc::new(FieldBuilder::new(limits.nav_threads, limits.max_queued_field_builds, limits.nav_nice)?);
        // 0 threads = rayon's default, one per core.
        let sim_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(limits.sim_threads)
            .thread_name(|i| format!("sim-{i}"))
            .build()
            .map_err(FieldBuilderError::from)?;
        let sim_pool = Arc::new(sim_pool);
        Ok(Registry {
            worlds: RwLock::new(BTreeMap::new()),
            next_id: AtomicU32::new(1),
            limits,
            metrics,
            fields,
            sim_pool,
            recorder: None,
            player_rules,
            players,
            persist: None,
            failed: std::sync::Mutex::new(BTreeMap::new()),
            moved: std::sync::Mutex::new(std::collections::VecDeque::new()),
        })
    }

    /// Makes worlds durable through `writer` (by default when `default_on`; set before the
    /// first world starts).
    pub fn with_persistence(mut self, writer: Arc<crate::persist::Writer>, default_on: bool) -> Self {
        self.persist = Some((writer, default_on));
        self
    }

    /// The durable worlds' writer, if any.
    pub fn persistence(&self) -> Option<&Arc<crate::persist::Writer>> {
        self.persist.as_ref().map(|(w, _)| w)
    }

    /// Stored worlds that failed to recover at start, with why.
    pub fn failed_recoveries(&self) -> BTreeMap<String, String> {
        self.failed.lock().map(|f| f.clone()).unwrap_or_default()
    }

    /// Recovers every stored world (blocking: re-runs their logs). Each world that fails is
    /// reported and kept on disk; the others start. Answers the names of the worlds started.
    pub fn recover_all(&self) -> Vec<String> {
        let Some((writer, _)) = self.persist.clone() else { return Vec::new() };
        let names = match writer.store().worlds() {
            Ok(n) => n,
            Err(e) => {
                tracing::error!("persistence: cannot list the stored worlds: {e}");
                return Vec::new();
            }
        };
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut started = Vec::new();
        for name in names {
            let r = crate::persist::recover(&**writer.store(), &name, threads);
            match r {
                Ok(rec) => {
                    let report = rec.report.clone();
                    let scenario = rec.scenario.clone();
                    match self.create_inner(&name, scenario, None, rec.paused, None, Some(DurableSpawn::Recovered(writer.clone(), Box::new(rec)))) {
                        Ok(_) => {
                            tracing::info!(world = %name, tick = report.tick, state_hash = %report.state_hash, ticks = report.ticks, checks = report.checks, torn = ?report.torn,
                                seconds = report.seconds, "persistence: world recovered");
                            started.push(name);
                        }
                        Err(e) => self.fail_recovery(&name, e.to_string()),
                    }
                }
                Err(e) => self.fail_recovery(&name, e.to_string()),
            }
        }
        started
    }

    fn fail_recovery(&self, name: &str, why: String) {
        tracing::error!(world = %name, "persistence: the world failed to recover and does not start (its files stay): {why}");
        if let Ok(mut f) = self.failed.lock() {
            f.insert(name.to_string(), why);
        }
    }

    /// Lets worlds record into `hub` (set before the first world starts).
    pub fn with_recorder(mut self, hub: Arc<crate::record::RecordHub>) -> Self {
        self.recorder = Some(hub);
        self
    }

    /// The recordings hub, if any.
    pub fn recorder(&self) -> Option<&Arc<crate::record::RecordHub>> {
        self.recorder.as_ref()
    }

    /// The world named `name` (a world handed off elsewhere says where it went).
    pub fn get(&self, name: &str) -> Result<WorldHandle, RegistryError> {
        let map = self.worlds.read().unwrap_or_else(|p| p.into_inner());
        match map.get(name) {
            Some(w) => Ok(w.clone()),
            None => Err(match self.moved_to(name) {
                Some(to) => RegistryError::Moved(name.to_string(), to),
                None => RegistryError::Unknown(name.to_string()),
            }),
        }
    }

    /// Where world `name` went, if it was handed off from here (and is not here again).
    pub fn moved_to(&self, name: &str) -> Option<String> {
        let m = self.moved.lock().unwrap_or_else(|p| p.into_inner());
        m.iter().rev().find(|(n, _)| n == name).map(|(_, to)| to.clone())
    }

    /// The world was handed off to the server clients reach at `to`: it is stopped here and
    /// its stored state deleted (the other server keeps it now), and its name answers where it
    /// went until a world of that name is created here again.
    pub fn handed_off(&self, name: &str, to: &str) -> Result<(), RegistryError> {
        self.remove(name)?;
        let mut m = self.moved.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|(n, _)| n != name);
        if m.len() >= MAX_MOVED {
            m.pop_front();
        }
        m.push_back((name.to_string(), to.to_string()));
        Ok(())
    }

    /// Starts a world handed over by another server, from its state recovered from this
    /// server's store (durable here).
    pub fn create_arrived(&self, name: &str, rec: crate::persist::Recovered, arrival: Arrival) -> Result<WorldHandle, RegistryError> {
        let scenario = rec.scenario.clone();
        let paused = rec.paused;
        let Some((w, _)) = &self.persist else {
            return Err(RegistryError::Start(CmdError::Invalid("this server has no persistence writer to take a world into".into())));
        };
        let spawn = DurableSpawn::Recovered(w.clone(), Box::new(rec));
        self.create_full(name, scenario, None, paused, Start { replay: None, durable: Some(spawn), arrival: Some(arrival) })
    }

    /// The world with wire id `id`.
    pub fn by_id(&self, id: u32) -> Option<WorldHandle> {
        let map = self.worlds.read().unwrap_or_else(|p| p.into_inner());
        map.values().find(|w| w.id == id).cloned()
    }

    /// The player rules of world `name`.
    pub fn policy(&self, name: &str) -> &crate::config::WorldPolicy {
        self.player_rules.policy(name)
    }

    /// All worlds.
    pub fn list(&self) -> Vec<WorldHandle> {
        let map = self.worlds.read().unwrap_or_else(|p| p.into_inner());
        map.values().cloned().collect()
    }

    /// Creates and starts a world.
    pub fn create(&self, name: &str, scenario: Scenario, scenario_name: Option<String>, paused: bool) -> Result<WorldHandle, RegistryError> {
        self.create_durable(name, scenario, scenario_name, paused, None)
    }

    /// Creates and starts a world, durable when `durable` says so (none: the server's default).
    pub fn create_durable(&self, name: &str, scenario: Scenario, scenario_name: Option<String>, paused: bool, durable: Option<bool>) -> Result<WorldHandle, RegistryError> {
        let d = match (&self.persist, durable) {
            (Some((w, on)), d) if d.unwrap_or(*on) => Some(DurableSpawn::Fresh(w.clone())),
            (None, Some(true)) => return Err(RegistryError::Start(CmdError::Invalid("field `durable`: this server has no persistence writer".into()))),
            _ => None,
        };
        self.create_inner(name, scenario, scenario_name, paused, None, d)
    }

    /// Creates and starts a read-only replay world playing `replay`.
    pub fn create_replay(&self, name: &str, replay: ReplaySpawn, paused: bool) -> Result<WorldHandle, RegistryError> {
        let scenario = replay.player.scenario().clone();
        self.create_inner(name, scenario, None, paused, Some(replay), None)
    }

    /// The replay-world settings.
    pub fn replay_settings(&self) -> crate::record::player::ReplaySettings {
        crate::record::player::ReplaySettings::from(&self.limits)
    }

    fn create_inner(&self, name: &str, scenario: Scenario, scenario_name: Option<String>, paused: bool, replay: Option<ReplaySpawn>, durable: Option<DurableSpawn>) -> Result<WorldHandle, RegistryError> {
        self.create_full(name, scenario, scenario_name, paused, Start { replay, durable, arrival: None })
    }

    fn create_full(&self, name: &str, scenario: Scenario, scenario_name: Option<String>, paused: bool, start: Start) -> Result<WorldHandle, RegistryError> {
        let Start { replay, durable, arrival } = start;
        if !valid_name(name) {
            return Err(RegistryError::BadName(name.to_string()));
        }
        if let Some(why) = self.failed.lock().ok().and_then(|f| f.get(name).cloned()) {
            return Err(RegistryError::Unrecovered(name.to_string(), why));
        }
        let mut map = self.worlds.write().unwrap_or_else(|p| p.into_inner());
        if map.contains_key(name) {
            return Err(RegistryError::Exists(name.to_string()));
        }
        if map.len() >= self.limits.max_worlds {
            return Err(RegistryError::TooMany(self.limits.max_worlds));
        }
        let l = &self.limits;
        let handle = WorldHandle::start(
            WorldSpawn {
                name: name.to_string(),
                id: self.next_id.fetch_add(1, Ordering::Relaxed),
                scenario,
                scenario_name,
                queue: l.world_queue,
                frame_buffer: l.frame_buffer,
                frame_history: l.frame_history,
                max_catchup_ticks: l.max_catchup_ticks,
                max_aoi_cells: l.max_aoi_cells,
                max_agents: l.max_agents_per_world,
                max_spawn: l.max_spawn,
                crowding: crate::runtime::admission::Crowding::from(l),
                paused,
                fields: self.fields.clone(),
                sim_pool: self.sim_pool.clone(),
                parallel_step_min_agents: l.parallel_step_min_agents,
                checksum_every_ticks: l.checksum_every_ticks,
                max_every_n_ticks: l.max_every_n_ticks,
                max_shared_messages: l.max_shared_messages,
                max_requests_per_turn: l.max_requests_per_turn,
                recorder: self.recorder.clone(),
                policy: self.player_rules.policy(name).clone(),
                players: self.players.clone(),
                replay,
                durable,
                arrival,
            },
            self.metrics.clone(),
        )?;
        map.insert(name.to_string(), handle.clone());
        drop(map);
        // A world of that name is here (again): it no longer answers where it went.
        self.moved.lock().unwrap_or_else(|p| p.into_inner()).retain(|(n, _)| n != name);
        Ok(handle)
    }

    /// Replaces a dead world's thread with a fresh one from `scenario` (same name, new id).
    pub fn restart(&self, name: &str, scenario: Scenario, scenario_name: Option<String>) -> Result<WorldHandle, RegistryError> {
        self.remove(name)?;
        self.create(name, scenario, scenario_name, false)
    }

    /// Stops and forgets a world, and deletes its stored state if it is durable.
    pub fn remove(&self, name: &str) -> Result<(), RegistryError> {
        let mut map = self.worlds.write().unwrap_or_else(|p| p.into_inner());
        let h = map.remove(name).ok_or_else(|| RegistryError::Unknown(name.to_string()))?;
        h.stats.forget.store(true, Ordering::SeqCst);
        h.shutdown();
        // A dead thread deletes nothing itself.
        if let (false, Some(_), Some((w, _))) = (h.alive(), &h.durable, &self.persist) {
            w.remove(name);
        }
        Ok(())
    }

    /// Stops every world.
    pub fn shutdown_all(&self) {
        for h in self.list() {
            h.shutdown();
        }
    }

    /// Stops every world and waits until their threads have ended or `deadline` passes;
    /// answers the names of the worlds still running then.
    pub fn stop_all(&self, deadline: std::time::Instant) -> Vec<String> {
        self.shutdown_all();
        loop {
            let running: Vec<String> = self.list().into_iter().filter(WorldHandle::alive).map(|w| w.name).collect();
            if running.is_empty() || std::time::Instant::now() >= deadline {
                return running;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names_are_checked() {
        for ok in ["demo", "a", "world_1", "x-y"] {
            assert!(valid_name(ok), "{ok}");
        }
        let long = "a".repeat(65);
        for bad in ["", "../x", "/etc/passwd", "a/b", "a\0b", "-x", ".hidden", "naïve", "a b", long.as_str()] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
