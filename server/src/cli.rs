//! The flags and `STEERD_*` environment variables of `steerd serve` (the `steerd` binary parses
//! them), and how they override the settings file. Here rather than in `main.rs` so that the
//! configuration reference in `docs/configuration.md` is generated from this one definition.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use crate::config::Settings;

/// Flags of `steerd` / `steerd serve`; each also reads the environment variable it names.
#[derive(Args, Clone, Default)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "STEERD_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Data directory for saved scenarios [default: ./data].
    #[arg(long, env = "STEERD_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Scenario for world `demo` at start: a file, or a shipped/saved name [default: built-in demo].
    #[arg(long, env = "STEERD_SCENARIO")]
    pub scenario: Option<String>,
    /// Admin token for mutating calls.
    #[arg(long, env = "STEERD_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// Settings file (TOML); flags and STEERD_* variables override it.
    #[arg(long, env = "STEERD_CONFIG")]
    pub config: Option<PathBuf>,
    /// Log format: text or json.
    #[arg(long, env = "STEERD_LOG_FORMAT")]
    pub log_format: Option<String>,
    /// Directory of shipped scenarios [default: ./scenarios].
    #[arg(long, env = "STEERD_SCENARIOS_DIR")]
    pub scenarios_dir: Option<PathBuf>,
    /// Browser origins allowed on /ws (comma separated).
    #[arg(long, env = "STEERD_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Option<Vec<String>>,
    /// Host names the server answers under besides loopback names and IP addresses, whose own
    /// pages may open /ws (comma separated).
    #[arg(long, env = "STEERD_SAME_ORIGIN_HOSTS", value_delimiter = ',')]
    pub same_origin_hosts: Option<Vec<String>>,
    /// Most agents per world.
    #[arg(long, env = "STEERD_MAX_AGENTS_PER_WORLD")]
    pub max_agents_per_world: Option<usize>,
    /// HS256 secret of player tokens (none: dev mode, anonymous players).
    #[arg(long, env = "STEERD_PLAYER_JWT_SECRET", hide_env_values = true)]
    pub player_jwt_secret: Option<String>,
    /// PEM public key file of player tokens (RS256 or EdDSA).
    #[arg(long, env = "STEERD_PLAYER_JWT_PUBLIC_KEY")]
    pub player_jwt_public_key: Option<PathBuf>,
    /// Most agents one player may own per world (`players.max_agents_per_player`).
    #[arg(long, env = "STEERD_MAX_AGENTS_PER_PLAYER")]
    pub max_agents_per_player: Option<usize>,
    /// Seconds a dropped player's session can be resumed before the orphan policy applies.
    #[arg(long, env = "STEERD_SESSION_GRACE_SECS")]
    pub session_grace_secs: Option<u32>,
    /// Orphan policy of every world: despawn, keep or freeze.
    #[arg(long, env = "STEERD_ORPHAN_POLICY")]
    pub orphan_policy: Option<String>,
    /// Visibility of every world: open, owned or spectators_only_whole_world.
    #[arg(long, env = "STEERD_VISIBILITY")]
    pub visibility: Option<String>,
    /// Most WebSocket connections.
    #[arg(long, env = "STEERD_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Commands per second per connection.
    #[arg(long, env = "STEERD_COMMANDS_PER_SEC")]
    pub commands_per_sec: Option<f64>,
    /// Largest WebSocket message, bytes.
    #[arg(long, env = "STEERD_MAX_MESSAGE_BYTES")]
    pub max_message_bytes: Option<usize>,
    /// Graceful shutdown deadline, ms (autosaves, connection close, world stop).
    #[arg(long, env = "STEERD_SHUTDOWN_TIMEOUT_MS")]
    pub shutdown_timeout_ms: Option<u64>,
    /// Time to send a whole request body, ms (more: 408).
    #[arg(long, env = "STEERD_BODY_TIMEOUT_MS")]
    pub body_timeout_ms: Option<u64>,
    /// Most open TCP sockets of any kind (REST, idle, WebSocket).
    #[arg(long, env = "STEERD_MAX_HTTP_CONNECTIONS")]
    pub max_http_connections: Option<usize>,
    /// Kernel send buffer of every socket, bytes (0 = the kernel's auto-tuning).
    #[arg(long, env = "STEERD_SOCKET_SEND_BUFFER_BYTES")]
    pub socket_send_buffer_bytes: Option<usize>,
    /// Longest a send to a client may block before it is closed as slow (4008), ms.
    #[arg(long, env = "STEERD_WRITE_TIMEOUT_MS")]
    pub write_timeout_ms: Option<u64>,
    /// Report to the Agones SDK sidecar (also on when AGONES_SDK_HTTP_PORT is set).
    #[arg(long, env = "STEERD_AGONES")]
    pub agones: bool,
    /// Record every world from its start into <data_dir>/recordings (see server/RECORDING.md).
    #[arg(long, env = "STEERD_RECORD")]
    pub record: bool,
    /// Make worlds durable by default: command log and snapshots in <data_dir>/worlds,
    /// recovered on start (`persistence.enabled`, docs/persistence.md).
    #[arg(long, env = "STEERD_PERSISTENCE")]
    pub persistence: bool,
    /// Durable worlds' fsync policy: `interval` or `every_command` (`persistence.fsync`).
    #[arg(long, env = "STEERD_FSYNC")]
    pub fsync: Option<String>,
    /// Let a dev-mode server (no admin token, no player key: everything open) listen on a
    /// non-loopback address.
    /// The cluster's shared secret (`cluster.secret`): enables live handoff of worlds between
    /// servers that share it.
    #[arg(long = "cluster-secret", env = "STEERD_CLUSTER_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// On SIGTERM, hand every durable world off to this steerd (`drain.handoff_to`).
    #[arg(long, env = "STEERD_HANDOFF_TO")]
    pub handoff_to: Option<String>,
    #[arg(long, env = "STEERD_ALLOW_DEV_ON_NETWORK")]
    pub allow_dev_on_network: bool,
    /// Serve `POST /debug/panic`, `POST /debug/stall` and `POST /debug/stall/release` (admin
    /// only) for the reliability suite's
    /// panic and overload tests.
    #[arg(long, env = "STEERD_FAULT_INJECTION", hide = true)]
    pub fault_injection: bool,
}

impl ServeArgs {
    /// The settings: the file of `--config` (or the defaults), then every flag or variable given.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let mut s = match &self.config {
            Some(p) => Settings::from_toml_file(p).with_context(|| format!("reading {}", p.display()))?,
            None => Settings::default(),
        };
        self.server_flags(&mut s);
        self.player_flags(&mut s)?;
        self.limit_flags(&mut s.limits);
        self.storage_flags(&mut s)?;
        s.validate().map_err(anyhow::Error::msg)?;
        Ok(s)
    }

    /// Where it listens and reads from, its tokens, origins, cluster and drain, dev switches.
    fn server_flags(&self, s: &mut Settings) {
        if let Some(v) = self.listen {
            s.listen = v;
        }
        if let Some(v) = &self.data_dir {
            s.data_dir = v.clone();
        }
        if let Some(v) = &self.scenario {
            s.scenario = Some(v.clone());
        }
        if let Some(v) = &self.admin_token {
            s.admin_token = Some(v.clone());
        }
        if let Some(v) = &self.log_format {
            s.log_format = v.clone();
        }
        if let Some(v) = &self.scenarios_dir {
            s.scenarios_dir = v.clone();
        }
        if let Some(v) = &self.allowed_origins {
            s.allowed_origins = v.clone();
        }
        if let Some(v) = &self.same_origin_hosts {
            s.same_origin_hosts = v.clone();
        }
        if let Some(v) = &self.secret {
            s.cluster.secret = Some(v.clone());
        }
        if let Some(v) = &self.handoff_to {
            s.drain.handoff_to = Some(v.clone());
        }
        if self.allow_dev_on_network {
            s.allow_dev_on_network = true;
        }
        if self.fault_injection {
            s.fault_injection = true;
        }
    }

    /// Player tokens and the default player rules.
    fn player_flags(&self, s: &mut Settings) -> anyhow::Result<()> {
        if let Some(v) = &self.player_jwt_secret {
            s.auth.player_jwt_secret = Some(v.clone());
        }
        if let Some(v) = &self.player_jwt_public_key {
            s.auth.player_jwt_public_key = Some(v.clone());
        }
        if let Some(v) = self.max_agents_per_player {
            s.players.default.max_agents_per_player = v;
        }
        if let Some(v) = self.session_grace_secs {
            s.players.default.session_grace_secs = v;
        }
        if let Some(v) = &self.orphan_policy {
            s.players.default.orphan_policy = serde_json::from_value(serde_json::Value::String(v.clone()))
                .map_err(|_| anyhow::anyhow!("--orphan-policy: expected despawn, keep or freeze, got `{v}`"))?;
        }
        if let Some(v) = &self.visibility {
            s.players.default.visibility = serde_json::from_value(serde_json::Value::String(v.clone()))
                .map_err(|_| anyhow::anyhow!("--visibility: expected open, owned or spectators_only_whole_world, got `{v}`"))?;
        }
        Ok(())
    }

    /// Server limits.
    fn limit_flags(&self, limits: &mut crate::config::LimitSettings) {
        if let Some(v) = self.max_agents_per_world {
            limits.max_agents_per_world = v;
        }
        if let Some(v) = self.max_connections {
            limits.max_connections = v;
        }
        if let Some(v) = self.commands_per_sec {
            limits.commands_per_sec = v;
        }
        if let Some(v) = self.max_message_bytes {
            limits.max_message_bytes = v;
        }
        if let Some(v) = self.shutdown_timeout_ms {
            limits.shutdown_timeout_ms = v;
        }
        if let Some(v) = self.socket_send_buffer_bytes {
            limits.socket_send_buffer_bytes = v;
        }
        if let Some(v) = self.write_timeout_ms {
            limits.write_timeout_ms = v;
        }
        if let Some(v) = self.body_timeout_ms {
            limits.body_timeout_ms = v;
        }
        if let Some(v) = self.max_http_connections {
            limits.max_http_connections = v;
        }
    }

    /// Recording and persistence.
    fn storage_flags(&self, s: &mut Settings) -> anyhow::Result<()> {
        if self.record {
            s.record = true;
        }
        if self.persistence {
            s.persistence.enabled = true;
        }
        if let Some(v) = &self.fsync {
            s.persistence.fsync = serde_json::from_value(serde_json::Value::String(v.clone()))
                .map_err(|_| anyhow::anyhow!("--fsync: expected interval or every_command, got `{v}`"))?;
        }
        Ok(())
    }
}
