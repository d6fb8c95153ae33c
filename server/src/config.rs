//! Server settings: every limit with a safe default, settable from `steerd.toml`, `STEERD_*`
//! environment variables and command-line flags (flags win, then env, then file).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// All settings of a running server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Directory of saved scenarios.
    pub data_dir: PathBuf,
    /// Scenario to load into world `demo` at start (a file path or a shipped name); `None` = the
    /// built-in demo.
    pub scenario: Option<String>,
    /// Admin token. With it (or a player key) the server is secured: every call but the
    /// public ones needs a token, and admin calls this one (SECURITY.md).
    pub admin_token: Option<String>,
    /// Lets a dev-mode server (no admin token, no player key: everything open) listen on an
    /// address that is not loopback. Off: such a server refuses to start.
    pub allow_dev_on_network: bool,
    /// Log format: `text` or `json`.
    pub log_format: String,
    /// Limits.
    pub limits: LimitSettings,
    /// Directory of the shipped, read-only scenarios.
    pub scenarios_dir: PathBuf,
    /// Browser origins allowed to open `/ws` (empty = only clients without an Origin header and
    /// the server's own pages under a loopback or `same_origin_hosts` name).
    pub allowed_origins: Vec<String>,
    /// Host names (optionally `name:port`) the server answers under besides loopback names and
    /// IP addresses (any other `Host` is refused on every route, so that DNS rebinding finds
    /// nothing); its own pages under these names may open `/ws` and change state (Origin equal
    /// to the request's Host).
    pub same_origin_hosts: Vec<String>,
    /// Record every world from its start (`serve --record`); files go to `<data_dir>/recordings`.
    pub record: bool,
    /// Serves `POST /debug/panic`, `POST /debug/stall` and `POST /debug/stall/release` (admin
    /// only), which panic a world's thread or the request's connection task, or block a world's
    /// thread (until released), on purpose, so the
    /// reliability suite can check that a panic is contained and reported (docs/reliability.md,
    /// test 18) and that a full world queue answers `busy` (test 9). Off by default: the routes
    /// answer 404.
    pub fault_injection: bool,
    /// Player authentication and sessions.
    pub auth: AuthSettings,
    /// Player rules of every world (`[players]`), with per-world overrides
    /// (`[players.worlds.NAME]`).
    pub players: PlayerSettings,
    /// Durable worlds (`[persistence]`, docs/persistence.md).
    pub persistence: PersistSettings,
    /// Servers that hand worlds to each other (`[cluster]`, docs/handoff.md).
    pub cluster: ClusterSettings,
    /// What a stop (SIGTERM) does with the running worlds (`[drain]`, docs/handoff.md).
    pub drain: DrainSettings,
}

/// `[cluster]`: live handoff of worlds between servers (docs/handoff.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClusterSettings {
    /// The secret servers of one cluster share: a handoff's transfer carries it, and a server
    /// takes a world only from a caller that presents it (compared in constant time). Unset:
    /// handoffs are disabled, both ways. At least 16 bytes.
    pub secret: Option<String>,
    /// Largest world transfer accepted (bytes of snapshot and log).
    pub max_transfer_bytes: u64,
    /// Longest a handoff waits for the target server to take the world (then the world runs on
    /// here).
    pub transfer_timeout_ms: u64,
    /// Longest a world taken over waits, before its first tick, for the sessions that were
    /// connected to it on the old server to resume with their subscriptions (a client that
    /// follows at once misses no tick).
    pub resume_wait_ms: u64,
}

impl Default for ClusterSettings {
    fn default() -> Self {
        ClusterSettings { secret: None, max_transfer_bytes: 256 << 20, transfer_timeout_ms: 10_000, resume_wait_ms: 1_000 }
    }
}

/// `[drain]`: the stop of a server (SIGTERM, an Agones shutdown).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DrainSettings {
    /// A steerd URL (`http://host:port`): on SIGTERM every durable world is handed off to it
    /// (its clients follow) instead of stopping here; a world whose handoff fails autosaves and
    /// stops as without it. Needs `cluster.secret`.
    pub handoff_to: Option<String>,
}

/// When a durable world's log is fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// Group commit every `fsync_interval_ms`: a crash loses at most that much.
    Interval,
    /// A command's result is sent only after its record is on disk: nothing acknowledged is lost.
    EveryCommand,
}

/// `[persistence]`: durable worlds (their command log and snapshots, recovered on start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PersistSettings {
    /// Worlds are durable unless created with `"durable": false` (`POST /worlds`); off: only
    /// worlds created with `"durable": true` are. Either way stored worlds are recovered on start.
    pub enabled: bool,
    /// Directory of the durable worlds (none: `<data_dir>/worlds`).
    pub dir: Option<PathBuf>,
    /// `interval` (group commit every `fsync_interval_ms`) or `every_command` (a command's
    /// result is sent only after its record is fsynced).
    pub fsync: FsyncPolicy,
    /// Milliseconds between group commits under `interval` (each ends with a checkpoint).
    pub fsync_interval_ms: u64,
    /// Seconds between snapshots; a snapshot lets the segments before the world's last start go.
    pub snapshot_every_secs: u64,
    /// Chunks and snapshots queued for the writer thread; when full, the world's log ends (the
    /// world is not durable until its next load or reset), never the tick.
    pub writer_queue: usize,
    /// A segment file is closed and the next one started once it reaches this many bytes.
    pub segment_max_bytes: u64,
    /// Bytes of a world's log kept in memory while writes fail (a full disk), retried every
    /// 200 ms; beyond it the world's log ends.
    pub max_backlog_bytes: u64,
}

impl Default for PersistSettings {
    fn default() -> Self {
        PersistSettings {
            enabled: false,
            dir: None,
            fsync: FsyncPolicy::Interval,
            fsync_interval_ms: 100,
            snapshot_every_secs: 30,
            writer_queue: 1024,
            segment_max_bytes: 16 << 20,
            max_backlog_bytes: 64 << 20,
        }
    }
}

/// How players prove who they are, and how many sessions the server keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    /// HS256 secret of player tokens (JWT). With neither this nor `player_jwt_public_key` the
    /// server runs in dev mode: a client without a token is an anonymous player with a fresh id.
    pub player_jwt_secret: Option<String>,
    /// PEM public key file (RSA → RS256, Ed25519 → EdDSA) of player tokens.
    pub player_jwt_public_key: Option<PathBuf>,
    /// Required `iss` of player tokens (none: `iss` is not checked).
    pub jwt_issuer: Option<String>,
    /// Required audience of player tokens: their `aud` (a string, or an array) must name it.
    /// None: `aud` is not checked, and tokens with or without one are accepted.
    pub jwt_audience: Option<String>,
    /// Longest lifetime of a player token, seconds: its `exp` may lie at most this far beyond
    /// now and beyond its `iat`.
    pub max_token_lifetime_secs: u64,
    /// Most sessions (live or waiting to be resumed) and known players kept at once.
    pub max_sessions: usize,
    /// Most simultaneous connections of one player (the admin token is exempt).
    pub max_connections_per_player: usize,
    /// Most sessions (live or waiting to be resumed) of one player. A join at the cap evicts the
    /// player's oldest resumable session; with every one of them live it is refused. The admin's
    /// resumable sessions are evicted the same way, but its joins are never refused by this.
    pub max_sessions_per_player: usize,
    /// Most sessions (live or waiting to be resumed) of anonymous dev-mode players from one IP
    /// address (the socket's peer: behind a proxy, the proxy's), each of which has a fresh
    /// player id. Evicted and refused as `max_sessions_per_player`.
    pub max_sessions_per_ip: usize,
    /// Events about its agents kept for a player while it has no connection (given on its
    /// next connection).
    pub pending_events_per_player: usize,
}

/// What happens to a player's agents when the grace period after its last connection ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrphanPolicy {
    /// Remove them (a `despawned` event).
    #[default]
    Despawn,
    /// Leave them as they are (still owned: the player commands them again when it returns).
    Keep,
    /// Stop them where they are: behaviours removed, a MoveTo to their own position.
    Freeze,
}

/// What a player receives of a world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    /// Every subscribed cell.
    #[default]
    Open,
    /// Only the subscribed cells within `vision_radius` of its own and its team's agents.
    Owned,
    /// Players subscribe to rectangles only; `whole_world` is for spectators and admins.
    SpectatorsOnlyWholeWorld,
}

/// The player rules of one world.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorldPolicy {
    /// What players see.
    pub visibility: Visibility,
    /// Reach of an agent's sight under `owned` visibility, world units.
    pub vision_radius: f32,
    /// What happens to a player's agents after the grace period.
    pub orphan_policy: OrphanPolicy,
    /// Seconds after a player's last connection before `orphan_policy` applies (and during which
    /// its sessions can be resumed).
    pub session_grace_secs: u32,
    /// Most agents one player may own in the world.
    pub max_agents_per_player: usize,
    /// Agents per second one player may spawn in the world (token bucket, burst
    /// `max_agents_per_player`).
    pub spawn_rate_per_sec: f64,
    /// Most AOI cells of one player's subscription (under `owned` visibility the cells
    /// delivered are narrowed anyway).
    pub max_subscription_cells: usize,
    /// Under `owned` visibility: where players spawn. When any zone is set, a player's spawn
    /// area must lie inside one of its own or its team's zones, or inside what it sees now;
    /// with none, players spawn anywhere in the world.
    pub spawn_zones: Vec<SpawnZone>,
}

/// A rectangle where one player, or one team, may spawn (`[[players.spawn_zones]]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnZone {
    /// The player (token `sub`) the zone is for; give this or `team`.
    #[serde(default)]
    pub player: Option<String>,
    /// The team (token `team`) the zone is for; give this or `player`.
    #[serde(default)]
    pub team: Option<String>,
    /// Lower corner `[x, y]`.
    pub min: [f32; 2],
    /// Upper corner `[x, y]`.
    pub max: [f32; 2],
}

/// Most spawn zones of one world.
pub const MAX_SPAWN_ZONES: usize = 1024;

impl SpawnZone {
    /// True if the zone is for `player` or its `team`.
    pub fn is_for(&self, player: &str, team: Option<&str>) -> bool {
        self.player.as_deref() == Some(player) || (self.team.is_some() && self.team.as_deref() == team)
    }

    /// True if the box `lo`–`hi` lies inside the zone.
    pub fn holds(&self, lo: [f32; 2], hi: [f32; 2]) -> bool {
        lo[0] >= self.min[0] && lo[1] >= self.min[1] && hi[0] <= self.max[0] && hi[1] <= self.max[1]
    }
}

/// `[players]`: the rules of every world, and per-world overrides. Read through a TOML table
/// (not serde `flatten`, which would let a misspelt key pass silently): every key but `worlds`
/// is a `WorldPolicy` field, and unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct PlayerSettings {
    /// The rules of worlds not named in `worlds`.
    #[serde(flatten)]
    pub default: WorldPolicy,
    /// Per world name: its rules (fields not given take the built-in defaults).
    pub worlds: std::collections::BTreeMap<String, WorldPolicy>,
}

impl Default for AuthSettings {
    fn default() -> Self {
        AuthSettings {
            player_jwt_secret: None,
            player_jwt_public_key: None,
            jwt_issuer: None,
            jwt_audience: None,
            max_token_lifetime_secs: 86_400,
            max_sessions: 10_000,
            max_connections_per_player: 8,
            max_sessions_per_player: 8,
            max_sessions_per_ip: 32,
            pending_events_per_player: 256,
        }
    }
}

impl Default for WorldPolicy {
    fn default() -> Self {
        WorldPolicy {
            visibility: Visibility::Open,
            vision_radius: 100.0,
            orphan_policy: OrphanPolicy::Despawn,
            session_grace_secs: 30,
            max_agents_per_player: 256,
            spawn_rate_per_sec: 256.0,
            max_subscription_cells: 16_384,
            spawn_zones: Vec::new(),
        }
    }
}

impl TryFrom<toml::Table> for PlayerSettings {
    type Error = String;

    fn try_from(mut t: toml::Table) -> Result<Self, String> {
        let worlds = match t.remove("worlds") {
            Some(w) => w.try_into().map_err(|e| format!("players.worlds: {e}"))?,
            None => Default::default(),
        };
        let default = toml::Value::Table(t).try_into().map_err(|e| format!("players: {e}"))?;
        Ok(PlayerSettings { default, worlds })
    }
}

impl PlayerSettings {
    /// The rules of world `name`.
    pub fn policy(&self, name: &str) -> &WorldPolicy {
        self.worlds.get(name).unwrap_or(&self.default)
    }

    /// The longest grace period of any world (how long a session can wait to be resumed).
    pub fn max_grace_secs(&self) -> u32 {
        self.worlds.values().map(|w| w.session_grace_secs).fold(self.default.session_grace_secs, u32::max)
    }
}

impl WorldPolicy {
    fn validate(&self, at: &str) -> Result<(), String> {
        if !(self.vision_radius.is_finite() && self.vision_radius > 0.0) {
            return Err(format!("{at}.vision_radius must be a positive number"));
        }
        if !(self.spawn_rate_per_sec.is_finite() && self.spawn_rate_per_sec > 0.0) {
            return Err(format!("{at}.spawn_rate_per_sec must be a positive number"));
        }
        if self.max_agents_per_player == 0 {
            return Err(format!("{at}.max_agents_per_player must be positive"));
        }
        if self.max_subscription_cells == 0 {
            return Err(format!("{at}.max_subscription_cells must be positive"));
        }
        if self.session_grace_secs > 86_400 {
            return Err(format!("{at}.session_grace_secs must be at most 86400"));
        }
        if self.spawn_zones.len() > MAX_SPAWN_ZONES {
            return Err(format!("{at}.spawn_zones: at most {MAX_SPAWN_ZONES} zones"));
        }
        for (i, z) in self.spawn_zones.iter().enumerate() {
            let f = format!("{at}.spawn_zones[{i}]");
            if z.player.is_some() == z.team.is_some() {
                return Err(format!("{f}: give one of `player` and `team`"));
            }
            if !z.min.iter().chain(&z.max).all(|v| v.is_finite()) || z.min[0] > z.max[0] || z.min[1] > z.max[1] {
                return Err(format!("{f}: `min` and `max` must be finite, with min ≤ max on both axes"));
            }
        }
        Ok(())
    }
}

/// Every bound of the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitSettings {
    /// Most simultaneous WebSocket connections.
    pub max_connections: usize,
    /// Most worlds.
    pub max_worlds: usize,
    /// Most agents per world.
    pub max_agents_per_world: usize,
    /// Most agents one spawn may create.
    pub max_spawn: usize,
    /// Largest radius a spawned agent may have. The sim's contact query of *every* agent
    /// reaches as far as the largest radius and top speed any agent of the world was spawned
    /// with, so one huge or fast agent makes every tick cost agents² (see `runtime/admission.rs`).
    pub max_agent_radius: f32,
    /// Largest top speed (`limits.max_speed`, units/s) a spawned agent may have (as above).
    pub max_agent_speed: f32,
    /// Most pairs of agents a spawn may start overlapping (estimated from its count, radius and
    /// area): a pile of agents on one spot costs the tick's contact pass pairs × rounds.
    pub max_spawn_overlaps: u64,
    /// Most area a world's agents may cover, as a multiple of its bounds' area (the sum of
    /// π·radius² over its agents): beyond it the crowd can never stop overlapping.
    pub max_agent_cover: f32,
    /// Most entries of a world's obstacle and wall index: the sum over obstacles and walls of
    /// the index cells each one's bounding box covers. The index is rebuilt on the tick after
    /// every change, in time and memory proportional to this.
    pub max_static_cells: u64,
    /// Largest inbound WebSocket message, bytes (and frame).
    pub max_message_bytes: usize,
    /// Largest REST body, bytes.
    pub max_body_bytes: usize,
    /// Commands per second one connection may send (token bucket rate).
    pub commands_per_sec: f64,
    /// Burst of the command token bucket.
    pub command_burst: f64,
    /// `Hello`/`Ping` messages and WebSocket ping frames per second one connection may send
    /// (a token bucket of their own; beyond it `rate_limited`, then close 4029).
    pub pings_per_sec: f64,
    /// Burst of the ping token bucket.
    pub ping_burst: f64,
    /// Capacity of a world's command queue; a full queue answers `busy`.
    pub world_queue: usize,
    /// Tick frames buffered per world for subscribers; a reader further behind gets keyframes.
    pub frame_buffer: usize,
    /// Newest tick frames a world keeps so a subscription that changes hands (a Subscribe that
    /// replaces it, a fan-out handback) sends the ones it has not sent; further back, keyframes.
    pub frame_history: usize,
    /// Outbound control messages (results, events) queued per connection.
    pub connection_queue: usize,
    /// Most ticks a late world runs back to back before it drops time.
    pub max_catchup_ticks: u32,
    /// Time a client has to send `Hello`, ms.
    pub hello_timeout_ms: u64,
    /// Longest a single send to a client may take before it is closed as slow, ms.
    pub write_timeout_ms: u64,
    /// After the server sends a WebSocket Close, how long it keeps reading (and dropping) what
    /// the client still sends, until the client closes too, ms. Closing a socket with unread
    /// bytes makes the kernel send a reset, which can destroy the Close frame before the
    /// client reads it. Also bounded by 4 × `max_message_bytes` bytes.
    pub close_linger_ms: u64,
    /// Kernel send buffer of every accepted socket (SO_SNDBUF; Linux doubles it), bytes; 0 =
    /// the kernel's auto-tuning. Small, so that a client that stops reading is seen within a
    /// few ticks (resynced with keyframes, or closed 4008 after `write_timeout_ms`).
    pub socket_send_buffer_bytes: usize,
    /// Header read timeout for HTTP requests, ms.
    pub header_timeout_ms: u64,
    /// Time a client has to send a whole request body once its headers are in, ms (more: 408).
    pub body_timeout_ms: u64,
    /// Most open TCP sockets of any kind (REST, idle, WebSocket); beyond it a socket is
    /// answered 503 and closed at once. Lowered at start to fit the open-files limit.
    pub max_http_connections: usize,
    /// Largest worlds' AOI cell count (the cell size grows to fit).
    pub max_aoi_cells: u32,
    /// Malformed messages tolerated per connection before it is closed.
    pub max_bad_messages: u32,
    /// Most world subscriptions per connection.
    pub max_subscriptions: usize,
    /// Fan-out writer tasks per world: they send steady binary subscribers' frames (the same
    /// bytes to every subscriber of a rectangle and rate) without waking each connection's
    /// task; 0 = none, every connection's task sends its own frames.
    pub fanout_writers: usize,
    /// Graceful shutdown deadline, ms: within it SIGTERM writes the autosaves, closes the
    /// connections and stops the worlds, however loaded they are.
    pub shutdown_timeout_ms: u64,
    /// Requests a world serves per turn of its loop, before its next tick. A world serves its
    /// queue every turn, however late its tick is, so this bounds the work between two ticks.
    pub max_requests_per_turn: usize,
    /// Threads building MoveTo flow fields for every world, off the world threads.
    pub nav_threads: usize,
    /// Flow-field builds queued or running at once; beyond it a world builds the field itself
    /// on the tick it is due.
    pub max_queued_field_builds: usize,
    /// Nice value of the flow-field builder threads (0 to 19; 0 = the process's own): builds
    /// are background work used ticks later, so they give way to the ticks and the sends.
    /// Linux only; elsewhere ignored.
    pub nav_nice: i32,
    /// Threads stepping large worlds in parallel, shared by every world (0 = one per core).
    pub sim_threads: usize,
    /// Worlds with fewer agents step on one thread of their own: a parallel step of a small
    /// world saves little and waits at every join for a thread the OS may have given away.
    pub parallel_step_min_agents: usize,
    /// Deltas and keyframes carry a state checksum on ticks that are multiples of this (1 =
    /// every tick). Clients verify each checksum over the whole cell, so fewer save their CPU;
    /// the delta chain itself is checked on every frame.
    pub checksum_every_ticks: u32,
    /// Largest `Subscribe.every_n_ticks` a client may ask for (each rate in use keeps one more
    /// copy of every cell's state in the world thread: at most this many copies).
    pub max_every_n_ticks: u32,
    /// Shared `cells` messages per world and tick (one per distinct subscription rectangle and
    /// rate); subscribers beyond it build their own message.
    pub max_shared_messages: usize,
    /// A recording stops once its file reaches this many bytes.
    pub recording_max_bytes: u64,
    /// Recording files kept per world (starting one deletes the oldest beyond this).
    pub recording_max_files: usize,
    /// Ticks between a recording's state-hash checkpoints.
    pub recording_hash_every_ticks: u32,
    /// Chunks queued for the recording writer; when full, a recording stops (never the tick).
    pub recording_writer_queue: usize,
    /// Recordings carry per-agent digests at each checkpoint (so `steerd replay --verify` can
    /// name the first differing agent); 4-6 bytes per agent per checkpoint.
    pub recording_agent_digests: bool,
    /// Replay worlds keep a keyframe (a copy of the world) every this many ticks, so a seek
    /// simulates fewer ticks than this.
    pub replay_keyframe_every: u32,
    /// Most keyframes a replay world keeps (beyond it the interval doubles).
    pub replay_max_keyframes: usize,
    /// Most bytes of keyframes a replay world keeps (beyond it the interval doubles).
    pub replay_keyframe_max_bytes: u64,
    /// Fastest replay playback, as a multiple of the recorded tick rate.
    pub replay_max_speed: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            data_dir: PathBuf::from("./data"),
            scenario: None,
            admin_token: None,
            log_format: "text".into(),
            limits: LimitSettings::default(),
            scenarios_dir: PathBuf::from("./scenarios"),
            allowed_origins: Vec::new(),
            same_origin_hosts: Vec::new(),
            record: false,
            auth: AuthSettings::default(),
            players: PlayerSettings::default(),
            persistence: PersistSettings::default(),
            cluster: ClusterSettings::default(),
            drain: DrainSettings::default(),
            fault_injection: false,
            allow_dev_on_network: false,
        }
    }
}

impl Default for LimitSettings {
    fn default() -> Self {
        LimitSettings {
            max_connections: 4096,
            max_worlds: 64,
            max_agents_per_world: 200_000,
            max_spawn: 10_000,
            max_agent_radius: 10.0,
            max_agent_speed: 100.0,
            max_spawn_overlaps: 100_000,
            max_agent_cover: 1.0,
            max_static_cells: 1 << 20,
            max_message_bytes: 64 * 1024,
            max_body_bytes: 8 << 20,
            commands_per_sec: 50.0,
            command_burst: 100.0,
            pings_per_sec: 10.0,
            ping_burst: 20.0,
            world_queue: 1024,
            frame_buffer: 32,
            frame_history: 8,
            connection_queue: 256,
            max_catchup_ticks: 3,
            hello_timeout_ms: 5_000,
            write_timeout_ms: 5_000,
            close_linger_ms: 1_000,
            socket_send_buffer_bytes: 64 * 1024,
            header_timeout_ms: 10_000,
            body_timeout_ms: 10_000,
            max_http_connections: 4_352,
            max_aoi_cells: 16_384,
            max_bad_messages: 16,
            max_subscriptions: 8,
            fanout_writers: 2,
            shutdown_timeout_ms: 10_000,
            max_requests_per_turn: 256,
            nav_threads: 1,
            max_queued_field_builds: 64,
            nav_nice: 10,
            sim_threads: 0,
            parallel_step_min_agents: 20_000,
            checksum_every_ticks: 10,
            max_every_n_ticks: 20,
            max_shared_messages: 256,
            recording_max_bytes: 64 << 20,
            recording_max_files: 8,
            recording_hash_every_ticks: 20,
            recording_writer_queue: 256,
            recording_agent_digests: false,
            replay_keyframe_every: 100,
            replay_max_keyframes: 64,
            replay_keyframe_max_bytes: 256 << 20,
            replay_max_speed: 16.0,
        }
    }
}

impl LimitSettings {
    /// The write timeout.
    pub fn write_timeout(&self) -> Duration {
        Duration::from_millis(self.write_timeout_ms)
    }
}

impl Settings {
    /// Reads a TOML settings file.
    pub fn from_toml_file(path: &std::path::Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)?;
        Ok(toml::from_str(&text)?)
    }

    /// Checks the settings; the error names the setting.
    pub fn validate(&self) -> Result<(), String> {
        self.limits.validate()?;
        if self.log_format != "text" && self.log_format != "json" {
            return Err("log_format must be `text` or `json`".into());
        }
        if self.admin_token.as_deref().is_some_and(str::is_empty) {
            return Err("admin_token must not be empty when set".into());
        }
        self.auth.validate()?;
        self.persistence.validate()?;
        self.cluster.validate(&self.drain)?;
        self.players.default.validate("players")?;
        for (name, p) in &self.players.worlds {
            p.validate(&format!("players.worlds.{name}"))?;
        }
        Ok(())
    }
}

impl LimitSettings {
    /// Checks every `limits.*` setting; the error names the first bad one.
    pub fn validate(&self) -> Result<(), String> {
        let l = self;
        let positive = [
            ("limits.max_connections", l.max_connections as f64),
            ("limits.max_worlds", l.max_worlds as f64),
            ("limits.max_agents_per_world", l.max_agents_per_world as f64),
            ("limits.max_spawn", l.max_spawn as f64),
            ("limits.max_agent_radius", f64::from(l.max_agent_radius)),
            ("limits.max_agent_speed", f64::from(l.max_agent_speed)),
            ("limits.max_spawn_overlaps", l.max_spawn_overlaps as f64),
            ("limits.max_agent_cover", f64::from(l.max_agent_cover)),
            ("limits.max_static_cells", l.max_static_cells as f64),
            ("limits.max_message_bytes", l.max_message_bytes as f64),
            ("limits.max_body_bytes", l.max_body_bytes as f64),
            ("limits.commands_per_sec", l.commands_per_sec),
            ("limits.command_burst", l.command_burst),
            ("limits.pings_per_sec", l.pings_per_sec),
            ("limits.ping_burst", l.ping_burst),
            ("limits.world_queue", l.world_queue as f64),
            ("limits.frame_buffer", l.frame_buffer as f64),
            ("limits.frame_history", l.frame_history as f64),
            ("limits.connection_queue", l.connection_queue as f64),
            ("limits.max_aoi_cells", f64::from(l.max_aoi_cells)),
            ("limits.max_subscriptions", l.max_subscriptions as f64),
            ("limits.nav_threads", l.nav_threads as f64),
            ("limits.max_queued_field_builds", l.max_queued_field_builds as f64),
            ("limits.checksum_every_ticks", f64::from(l.checksum_every_ticks)),
            ("limits.max_every_n_ticks", f64::from(l.max_every_n_ticks)),
            ("limits.max_shared_messages", l.max_shared_messages as f64),
            ("limits.max_requests_per_turn", l.max_requests_per_turn as f64),
            ("limits.body_timeout_ms", l.body_timeout_ms as f64),
            ("limits.max_http_connections", l.max_http_connections as f64),
            ("limits.shutdown_timeout_ms", l.shutdown_timeout_ms as f64),
            ("limits.recording_max_bytes", l.recording_max_bytes as f64),
            ("limits.recording_max_files", l.recording_max_files as f64),
            ("limits.recording_hash_every_ticks", f64::from(l.recording_hash_every_ticks)),
            ("limits.recording_writer_queue", l.recording_writer_queue as f64),
            ("limits.replay_keyframe_every", f64::from(l.replay_keyframe_every)),
            ("limits.replay_max_keyframes", l.replay_max_keyframes as f64),
            ("limits.replay_keyframe_max_bytes", l.replay_keyframe_max_bytes as f64),
            ("limits.replay_max_speed", l.replay_max_speed),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name} must be a positive number"));
            }
        }
        if l.max_every_n_ticks > 1200 {
            return Err("limits.max_every_n_ticks must be at most 1200".into());
        }
        if l.max_message_bytes > 64 << 20 {
            return Err("limits.max_message_bytes must be at most 64 MiB".into());
        }
        if l.replay_max_keyframes > 100_000 {
            return Err("limits.replay_max_keyframes must be at most 100000".into());
        }
        if l.replay_max_speed > 1000.0 {
            return Err("limits.replay_max_speed must be at most 1000".into());
        }
        if l.fanout_writers > 64 {
            return Err("limits.fanout_writers must be at most 64".into());
        }
        if l.nav_threads > 64 {
            return Err("limits.nav_threads must be at most 64".into());
        }
        if !(0..=19).contains(&l.nav_nice) {
            return Err("limits.nav_nice must be from 0 to 19".into());
        }
        if l.sim_threads > 256 {
            return Err("limits.sim_threads must be at most 256".into());
        }
        Ok(())
    }
}

impl AuthSettings {
    /// Checks every `auth.*` setting; the error names the first bad one.
    pub fn validate(&self) -> Result<(), String> {
        if self.player_jwt_secret.as_deref().is_some_and(|s| s.len() < 16) {
            return Err("auth.player_jwt_secret must be at least 16 bytes".into());
        }
        for (name, v) in [
            ("auth.max_sessions", self.max_sessions),
            ("auth.max_connections_per_player", self.max_connections_per_player),
            ("auth.pending_events_per_player", self.pending_events_per_player),
            ("auth.max_sessions_per_player", self.max_sessions_per_player),
            ("auth.max_sessions_per_ip", self.max_sessions_per_ip),
        ] {
            if v == 0 {
                return Err(format!("{name} must be positive"));
            }
        }
        if self.max_token_lifetime_secs == 0 || self.max_token_lifetime_secs > 366 * 86_400 {
            return Err("auth.max_token_lifetime_secs must be from 1 to 31622400 (366 days)".into());
        }
        for (name, v) in [("auth.jwt_issuer", &self.jwt_issuer), ("auth.jwt_audience", &self.jwt_audience)] {
            if v.as_deref().is_some_and(str::is_empty) {
                return Err(format!("{name} must not be empty when set"));
            }
        }
        Ok(())
    }
}

impl ClusterSettings {
    /// Checks every `cluster.*` setting and `drain.handoff_to` (which needs a secret); the error
    /// names the first bad one.
    pub fn validate(&self, drain: &DrainSettings) -> Result<(), String> {
        if self.secret.as_deref().is_some_and(|s| s.len() < 16) {
            return Err("cluster.secret must be at least 16 bytes".into());
        }
        for (k, v) in [("cluster.max_transfer_bytes", self.max_transfer_bytes), ("cluster.transfer_timeout_ms", self.transfer_timeout_ms)] {
            if v == 0 {
                return Err(format!("{k} must be positive"));
            }
        }
        if self.resume_wait_ms > 60_000 {
            return Err("cluster.resume_wait_ms must be at most 60000".into());
        }
        if let Some(to) = &drain.handoff_to {
            if !(to.starts_with("http://") || to.starts_with("https://")) {
                return Err(format!("drain.handoff_to must be an http:// or https:// URL of a steerd, got `{to}`"));
            }
            if self.secret.is_none() {
                return Err("drain.handoff_to needs cluster.secret (the target takes worlds only from a server that presents it)".into());
            }
        }
        Ok(())
    }
}

impl PersistSettings {
    /// Checks every `persistence.*` setting; the error names the first bad one.
    pub fn validate(&self) -> Result<(), String> {
        let p = self;
        for (k, v) in [
            ("persistence.fsync_interval_ms", p.fsync_interval_ms),
            ("persistence.snapshot_every_secs", p.snapshot_every_secs),
            ("persistence.writer_queue", p.writer_queue as u64),
            ("persistence.segment_max_bytes", p.segment_max_bytes),
            ("persistence.max_backlog_bytes", p.max_backlog_bytes),
        ] {
            if v == 0 {
                return Err(format!("{k} must be positive"));
            }
        }
        if p.fsync_interval_ms > 60_000 {
            return Err("persistence.fsync_interval_ms must be at most 60000".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod player_settings_tests {
    use super::*;

    #[test]
    fn players_section_parses_with_overrides_and_refuses_unknown_keys() {
        let s: Settings = toml::from_str(
            "[players]\nvisibility = \"owned\"\nvision_radius = 80\n[players.worlds.arena]\norphan_policy = \"freeze\"\nsession_grace_secs = 2\n",
        )
        .unwrap();
        assert_eq!(s.players.policy("demo").visibility, Visibility::Owned);
        assert_eq!(s.players.policy("demo").vision_radius, 80.0);
        let a = s.players.policy("arena");
        assert_eq!((a.orphan_policy, a.session_grace_secs, a.visibility), (OrphanPolicy::Freeze, 2, Visibility::Open));
        assert_eq!(s.players.max_grace_secs(), 30);
        assert!(toml::from_str::<Settings>("[players]\nvisibilty = \"owned\"\n").is_err(), "a misspelt key is refused");
        assert!(toml::from_str::<Settings>("[players.worlds.a]\nbogus = 1\n").is_err());
        assert!(s.validate().is_ok());
        let mut bad = s.clone();
        bad.players.default.vision_radius = f32::NAN;
        assert!(bad.validate().unwrap_err().contains("players.vision_radius"));
    }

    #[test]
    fn auth_section_parses_and_bad_values_name_the_setting() {
        let s: Settings = toml::from_str(
            "[auth]\njwt_issuer = \"backend\"\njwt_audience = \"steerd\"\nmax_token_lifetime_secs = 3600\nmax_sessions_per_player = 4\nmax_sessions_per_ip = 16\n",
        )
        .unwrap();
        assert_eq!((s.auth.jwt_issuer.as_deref(), s.auth.jwt_audience.as_deref()), (Some("backend"), Some("steerd")));
        assert_eq!((s.auth.max_token_lifetime_secs, s.auth.max_sessions_per_player, s.auth.max_sessions_per_ip), (3600, 4, 16));
        assert!(s.validate().is_ok());
        let d = AuthSettings::default();
        assert_eq!((d.jwt_issuer, d.jwt_audience, d.max_token_lifetime_secs, d.max_sessions_per_player, d.max_sessions_per_ip), (None, None, 86_400, 8, 32));
        type Break = fn(&mut AuthSettings);
        let cases: [(Break, &str); 5] = [
            (|a| a.max_sessions_per_player = 0, "auth.max_sessions_per_player"),
            (|a| a.max_sessions_per_ip = 0, "auth.max_sessions_per_ip"),
            (|a| a.max_token_lifetime_secs = 0, "auth.max_token_lifetime_secs"),
            (|a| a.jwt_issuer = Some(String::new()), "auth.jwt_issuer"),
            (|a| a.jwt_audience = Some(String::new()), "auth.jwt_audience"),
        ];
        for (break_it, name) in cases {
            let mut bad = s.clone();
            break_it(&mut bad.auth);
            let e = bad.validate().unwrap_err();
            assert!(e.contains(name), "{e} does not name {name}");
        }
    }

    #[test]
    fn spawn_zones_parse_and_bad_ones_name_the_zone() {
        let ok = "[players.worlds.fog]\nvisibility = \"owned\"\n\n[[players.worlds.fog.spawn_zones]]\nteam = \"red\"\nmin = [0.0, 0.0]\nmax = [50.0, 40.0]\n";
        let s: Settings = toml::from_str(ok).unwrap();
        let z = &s.players.worlds["fog"].spawn_zones[0];
        assert!(z.is_for("anyone", Some("red")) && !z.is_for("anyone", Some("blue")) && !z.is_for("red", None));
        assert!(z.holds([1.0, 1.0], [50.0, 40.0]) && !z.holds([1.0, 1.0], [50.0, 40.5]));
        assert!(s.validate().is_ok());
        for (zone, says) in [
            ("player = \"a\"\nteam = \"red\"\nmin = [0.0, 0.0]\nmax = [1.0, 1.0]", "give one of"),
            ("min = [0.0, 0.0]\nmax = [1.0, 1.0]", "give one of"),
            ("team = \"red\"\nmin = [5.0, 0.0]\nmax = [1.0, 1.0]", "min ≤ max"),
        ] {
            let bad: Settings = toml::from_str(&format!("[players.worlds.fog]\n[[players.worlds.fog.spawn_zones]]\n{zone}\n")).unwrap();
            let e = bad.validate().unwrap_err();
            assert!(e.contains("players.worlds.fog.spawn_zones[0]") && e.contains(says), "{e}");
        }
    }
}
