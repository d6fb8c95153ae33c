//! What every bot of a run shares: its settings, the command mix, and which bots are active
//! and which verify.

use std::sync::Arc;
use std::time::{Duration, Instant};

use steer_proto::Encoding;
use tokio::sync::Semaphore;

use crate::clock::SharedClock;
use crate::stats::Stats;
use crate::stop::Stop;

/// Settings shared by every bot.
pub struct BotConfig {
    /// WebSocket URL (with `?format=json` for JSON).
    pub url: String,
    /// World name.
    pub world: String,
    /// Subscription area size, world units (also where an active bot spawns its agents).
    pub aoi: (f32, f32),
    /// Subscribe to the whole world instead of the `aoi` area.
    pub whole_world: bool,
    /// Bots in the run.
    pub bots: usize,
    /// How many of them are active (spawn, command, pan); the rest are passive: they only
    /// receive, decode, verify and count (see [`is_active`]).
    pub active_bots: usize,
    /// Bots but the first [`VERIFYING`] only skim: of a frame that is one whole `cells` message
    /// they read the head (tick, length) and count it, without decoding, applying or verifying
    /// its entries. Receive-and-count load, so one box can carry more subscribers. Active bots
    /// that skim still spawn, command, pan and ping, and time each command's result, but hold
    /// no state to aim by: their MoveTo targets are their area's centre (see `pick_target`),
    /// and the command-to-effect latency, which needs the decoded state, comes from the first
    /// ones.
    pub skim: bool,
    /// Start of the measured window, ns since `epoch` (`u64::MAX`: none): bytes, moved agents
    /// and ticks of messages arriving from then on are counted as `Window*`.
    pub window_ns: u64,
    /// Frame encoding.
    pub encoding: Encoding,
    /// The URL asks for batched binary frames (several messages per WebSocket message).
    pub batch: bool,
    /// Agents each bot spawns and commands.
    pub spawn_per_bot: u32,
    /// Admin token for Hello.
    pub token: Option<String>,
    /// Commands per second per bot.
    pub commands_per_sec: f64,
    /// Which commands.
    pub mix: CommandMix,
    /// Move the area this often.
    pub pan_every: Option<Duration>,
    /// Ping this often (after an initial burst).
    pub ping_every: Duration,
    /// Connect + Hello → Welcome timeout.
    pub connect_timeout: Duration,
    /// A request without a result after this counts as timed out.
    pub request_timeout: Duration,
    /// No message for this long closes the bot as stalled.
    pub stall_timeout: Duration,
    /// A MoveTo whose effect is not seen within this counts as unobserved.
    pub effect_timeout: Duration,
    /// Base seed.
    pub seed: u64,
    /// Time zero of the swarm's nanosecond clock.
    pub epoch: Instant,
    /// When every bot stops: at the run's deadline, or when the swarm is told to stop.
    pub stop: Stop,
    /// Bounds concurrent handshakes.
    pub handshakes: Arc<Semaphore>,
    /// Shared measurements.
    pub stats: Arc<Stats>,
    /// The tick clock estimate, made on the first Welcome (all bots watch the same world).
    pub clock: std::sync::OnceLock<SharedClock>,
}

/// Which commands bots send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CommandMix {
    /// Three MoveTo, then one add/remove `look_where_you_are_going`, repeating.
    Mixed,
    /// Only MoveTo.
    MoveTo,
    /// Only add/remove `look_where_you_are_going` (cheap for the server: no path finding).
    Behaviors,
}

/// Whether bot `index` of `bots` is one of the `active` ones: spread evenly over the indices
/// (so active bots start throughout the ramp), exactly `active` of them.
pub fn is_active(index: usize, bots: usize, active: usize) -> bool {
    if bots == 0 || active >= bots {
        return true;
    }
    let (i, n, a) = (index as u128, bots as u128, active as u128);
    (i + 1) * a / n > i * a / n
}

/// Bots with an index below this still decode and verify everything under `--skim`, and send
/// pings even when passive (the tick clock that lateness is measured with).
pub const VERIFYING: usize = 4;
