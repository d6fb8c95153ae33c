//! The state every handler and connection shares.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::fanout;
use crate::config::Settings;
use crate::metrics::Metrics;
use crate::runtime::Registry;
use crate::store::Store;

/// Shared state of the front end.
#[derive(Clone)]
pub struct AppState {
    /// Settings.
    pub settings: Arc<Settings>,
    /// Worlds.
    pub registry: Arc<Registry>,
    /// Scenario store.
    pub store: Store,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Cancelled at shutdown.
    pub cancel: CancellationToken,
    /// Tracks connection tasks so shutdown can wait for them.
    pub tracker: TaskTracker,
    /// Connection slots.
    pub connections: Arc<tokio::sync::Semaphore>,
    /// Next session id.
    pub next_session: Arc<std::sync::atomic::AtomicU64>,
    /// Token checker (admin token, player JWTs, dev mode).
    pub auth: Arc<crate::auth::Auth>,
    /// Dev or secured (`authz::Mode`), from the settings.
    pub mode: crate::authz::Mode,
    /// The worlds' fan-out writers, by world id (started at a world's first steady subscriber).
    pub fanouts: Arc<std::sync::Mutex<std::collections::HashMap<u32, Arc<fanout::Fanout>>>>,
}

impl AppState {
    /// State for `settings`, opening the store.
    pub fn new(settings: Settings) -> anyhow::Result<Self> {
        let metrics = Arc::new(Metrics::new());
        let store = Store::open(&settings.data_dir, &settings.scenarios_dir)?;
        let auth = crate::auth::Auth::new(settings.admin_token.clone(), &settings.auth).map_err(anyhow::Error::msg)?;
        let players = Arc::new(crate::runtime::Players::new(settings.auth.clone(), settings.players.max_grace_secs()));
        let persist_dir = settings.persistence.dir.clone().unwrap_or_else(|| settings.data_dir.join("worlds"));
        let disk: Arc<dyn crate::persist::Store> = Arc::new(crate::persist::disk::LocalDisk::open(&persist_dir)?);
        let writer = crate::persist::Writer::start(disk, settings.persistence.clone())?;
        Ok(AppState {
            mode: crate::authz::Mode::new(settings.admin_token.is_some(), !auth.dev_mode()),
            auth: Arc::new(auth),
            registry: Arc::new(
                Registry::new(settings.limits.clone(), settings.players.clone(), players, metrics.clone())?.with_recorder(
                    crate::record::RecordHub::start(&settings.data_dir.join("recordings"), crate::record::RecordSettings::from(&settings.limits), settings.record)?,
                )
                .with_persistence(writer, settings.persistence.enabled),
            ),
            connections: Arc::new(tokio::sync::Semaphore::new(settings.limits.max_connections)),
            settings: Arc::new(settings),
            store,
            metrics,
            cancel: CancellationToken::new(),
            tracker: TaskTracker::new(),
            next_session: Arc::new(std::sync::atomic::AtomicU64::new(1)),
            fanouts: Arc::default(),
        })
    }

    /// True once the running fan-out of world `id` (if any) has written its frame `seq` to
    /// every member.
    pub fn fanout_passed(&self, id: u32, seq: u64) -> bool {
        let f = self.fanouts.lock().ok().and_then(|all| all.get(&id).cloned());
        f.is_none_or(|f| f.passed(seq))
    }

    /// The fan-out of `world`, started if it is not running; `None` when
    /// `limits.fanout_writers` is 0 or the server is shutting down.
    pub fn fanout(&self, world: &crate::runtime::WorldHandle) -> Option<Arc<fanout::Fanout>> {
        let writers = self.settings.limits.fanout_writers;
        if writers == 0 || self.cancel.is_cancelled() {
            return None;
        }
        let mut all = self.fanouts.lock().ok()?;
        if let Some(f) = all.get(&world.id).filter(|f| !f.stopped()) {
            return Some(f.clone());
        }
        // Ended worlds' fan-outs go with the first new one.
        all.retain(|_, f| !f.stopped());
        let f = fanout::Fanout::start(world, writers, self.metrics.clone(), &self.tracker, self.cancel.clone());
        all.insert(world.id, f.clone());
        Some(f)
    }
}

/// A slot of `limits.max_http_connections`, held by every accepted TCP socket for as long as
/// it is open — also after a WebSocket upgrade, whose session takes it over (it is in each
/// request's extensions).
#[derive(Clone)]
pub struct ConnSlot(#[allow(dead_code)] pub Arc<tokio::sync::OwnedSemaphorePermit>);
