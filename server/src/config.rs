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
    /// Admin token; when set, mutating calls need it.
    pub admin_token: Option<String>,
    /// Log format: `text` or `json`.
    pub log_format: String,
    /// Limits.
    pub limits: LimitSettings,
    /// Directory of the shipped, read-only scenarios.
    pub scenarios_dir: PathBuf,
    /// Browser origins allowed to open `/ws` (empty = only clients without an Origin header and
    /// the server's own pages under a loopback or `same_origin_hosts` name).
    pub allowed_origins: Vec<String>,
    /// Host names (optionally `name:port`) under which the server's own pages may open `/ws`
    /// (Origin equal to the request's Host). Loopback names always may; any other Host needs
    /// to be listed, so that DNS rebinding cannot pass the Origin check.
    pub same_origin_hosts: Vec<String>,
    /// Serves `POST /debug/panic` (admin only), which panics a world's thread or the request's
    /// connection task on purpose, so the reliability suite can check that a panic is contained
    /// and reported (RELIABILITY.md test 18). Off by default: the route answers 404.
    pub fault_injection: bool,
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
    /// Most agents one WebSocket session without the admin token may own in a world at once
    /// (its spawns beyond it: `invalid_field` `count`).
    pub max_agents_per_session: usize,
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
    /// Outbound control messages (results, events) queued per connection.
    pub connection_queue: usize,
    /// Most ticks a late world runs back to back before it drops time.
    pub max_catchup_ticks: u32,
    /// Time a client has to send `Hello`, ms.
    pub hello_timeout_ms: u64,
    /// Longest a single send to a client may take before it is closed as slow, ms.
    pub write_timeout_ms: u64,
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
            fault_injection: false,
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
            max_agents_per_session: 10_000,
            max_message_bytes: 64 * 1024,
            max_body_bytes: 8 << 20,
            commands_per_sec: 50.0,
            command_burst: 100.0,
            pings_per_sec: 10.0,
            ping_burst: 20.0,
            world_queue: 1024,
            frame_buffer: 32,
            connection_queue: 256,
            max_catchup_ticks: 3,
            hello_timeout_ms: 5_000,
            write_timeout_ms: 5_000,
            socket_send_buffer_bytes: 64 * 1024,
            header_timeout_ms: 10_000,
            body_timeout_ms: 10_000,
            max_http_connections: 4_352,
            max_aoi_cells: 16_384,
            max_bad_messages: 16,
            max_subscriptions: 8,
            shutdown_timeout_ms: 10_000,
            max_requests_per_turn: 256,
            nav_threads: 1,
            max_queued_field_builds: 64,
            nav_nice: 10,
            sim_threads: 0,
            parallel_step_min_agents: 20_000,
            checksum_every_ticks: 10,
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
        let l = &self.limits;
        let positive = [
            ("limits.max_connections", l.max_connections as f64),
            ("limits.max_worlds", l.max_worlds as f64),
            ("limits.max_agents_per_world", l.max_agents_per_world as f64),
            ("limits.max_spawn", l.max_spawn as f64),
            ("limits.max_agents_per_session", l.max_agents_per_session as f64),
            ("limits.max_message_bytes", l.max_message_bytes as f64),
            ("limits.max_body_bytes", l.max_body_bytes as f64),
            ("limits.commands_per_sec", l.commands_per_sec),
            ("limits.command_burst", l.command_burst),
            ("limits.pings_per_sec", l.pings_per_sec),
            ("limits.ping_burst", l.ping_burst),
            ("limits.world_queue", l.world_queue as f64),
            ("limits.frame_buffer", l.frame_buffer as f64),
            ("limits.connection_queue", l.connection_queue as f64),
            ("limits.max_aoi_cells", f64::from(l.max_aoi_cells)),
            ("limits.max_subscriptions", l.max_subscriptions as f64),
            ("limits.nav_threads", l.nav_threads as f64),
            ("limits.max_queued_field_builds", l.max_queued_field_builds as f64),
            ("limits.checksum_every_ticks", f64::from(l.checksum_every_ticks)),
            ("limits.max_requests_per_turn", l.max_requests_per_turn as f64),
            ("limits.body_timeout_ms", l.body_timeout_ms as f64),
            ("limits.max_http_connections", l.max_http_connections as f64),
            ("limits.shutdown_timeout_ms", l.shutdown_timeout_ms as f64),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("{name} must be a positive number"));
            }
        }
        if l.max_message_bytes > 64 << 20 {
            return Err("limits.max_message_bytes must be at most 64 MiB".into());
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
        if self.log_format != "text" && self.log_format != "json" {
            return Err("log_format must be `text` or `json`".into());
        }
        if self.admin_token.as_deref().is_some_and(str::is_empty) {
            return Err("admin_token must not be empty when set".into());
        }
        Ok(())
    }
}
