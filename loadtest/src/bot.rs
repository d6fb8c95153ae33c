//! One bot: a WebSocket session that behaves like a game client.
//!
//! Hello → Welcome (under the handshake semaphore), Subscribe to a random area, Spawn its own
//! agents there, then until the deadline: decode every frame with steer-proto, keep its own
//! copy of the cells and verify the delta chain and checksums (resubscribing on any break),
//! send MoveTo / behaviour commands at the configured rate and match each CommandResult,
//! ping to estimate the server's tick clock, and pan the area now and then. At the deadline
//! it despawns its agents and closes with 1000. Every wait has a timeout.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures_util::{SinkExt, StreamExt};
use steer_proto::{
    self as proto, AddBehavior, ApplyError, Area, BehaviorEntry, BehaviorKind, ClientMsg, ClientState, Encoding, Hello,
    LookWhereYouAreGoing, MoveTo, Point, Quantization, Rect, RemoveBehavior, ServerMsg, Spawn, SpawnArea, Subscribe,
    WorldInfo,
};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::{Instant as TokioInstant, sleep_until, timeout, timeout_at};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::clock::SharedClock;
use crate::stats::{C, H, Recorder, Stats};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

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
    /// When every bot stops.
    pub deadline: TokioInstant,
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

/// Agents that moved in a delta: those present before and after whose quantized state
/// changed, and those that entered the cell (an agent crossing cells enters one and leaves
/// another, so it is counted once by a subscriber of both).
pub fn moved_agents(d: &proto::Delta) -> usize {
    d.changed.len() + d.entered.len()
}

/// The cost of joining: bytes received from the first Subscribe until a keyframe of every
/// subscribed cell has arrived, and the agents those keyframes held.
#[derive(Debug, Default)]
pub struct Join {
    bytes: u64,
    agents: u64,
    /// The cells of the first `Subscribed` result (`None` until it arrives).
    cells: Option<Vec<u32>>,
    /// Cells whose first keyframe arrived (it may come before the result).
    keyed: std::collections::HashSet<u32>,
    done: bool,
}

impl Join {
    /// A WebSocket message of `len` payload bytes arrived (counted until the join completes).
    pub fn on_bytes(&mut self, len: usize) {
        if !self.done {
            self.bytes += len as u64;
        }
    }

    /// The first `Subscribed` result's cells (later ones, of pans and resyncs, are ignored).
    pub fn on_subscribed(&mut self, cells: &[u32]) {
        if !self.done && self.cells.is_none() {
            self.cells = Some(cells.to_vec());
        }
    }

    /// A keyframe of `cell` holding `agents`; only a cell's first one counts.
    pub fn on_keyframe(&mut self, cell: u32, agents: usize) {
        if !self.done && self.keyed.insert(cell) {
            self.agents += agents as u64;
        }
    }

    /// `(bytes, agents)` once, when every subscribed cell has had its keyframe.
    pub fn complete(&mut self) -> Option<(u64, u64)> {
        if self.done {
            return None;
        }
        let cells = self.cells.as_ref()?;
        if !cells.iter().all(|c| self.keyed.contains(c)) {
            return None;
        }
        self.done = true;
        self.keyed = std::collections::HashSet::new();
        Some((self.bytes, self.agents))
    }
}

/// The bots' seeded generator (`fastrand`): the same `--seed` gives the same commands and pans.
#[derive(Debug, Clone)]
pub struct Rng(fastrand::Rng);

impl Rng {
    /// Seeded.
    pub fn new(seed: u64) -> Self {
        Rng(fastrand::Rng::with_seed(seed))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.0.f64()
    }
}

/// What an outstanding request was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Subscribe,
    Spawn,
    Command,
    Despawn,
    Ping,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    kind: Kind,
    sent: Instant,
    sent_ns: u64,
}

/// A MoveTo whose effect is being watched for.
#[derive(Debug, Clone, Copy)]
struct Effect {
    agent: u32,
    /// Target in position steps.
    target: [f64; 2],
    sent: Instant,
    /// Only frames of later ticks count.
    after_tick: u64,
}

/// How a session ended.
enum End {
    /// The run is over.
    Deadline,
    /// The connection ended early; the cause names it.
    Lost(String),
    /// The world moved to the server at this URL (`moved`): follow it there.
    Moved(String),
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(proto::DEFAULT_SERVER_LIMIT))
        .max_frame_size(Some(proto::DEFAULT_SERVER_LIMIT))
        .read_buffer_size(8 * 1024)
        .write_buffer_size(0)
}

fn to_message(msg: &ClientMsg, enc: Encoding) -> anyhow::Result<Message> {
    Ok(match enc {
        Encoding::Binary => Message::Binary(proto::encode_binary(msg)?.into()),
        Encoding::Json => Message::Text(proto::encode_json(msg)?.into()),
    })
}

/// Decoded server messages, each with its encoded length.
type Decoded = Result<Vec<(ServerMsg, usize)>, proto::DecodeError>;

/// Decodes a data message (a batch of messages when `batch`); `None` for control frames.
fn decode(msg: &Message, batch: bool) -> Option<(usize, Decoded)> {
    let limit = proto::DEFAULT_SERVER_LIMIT;
    match msg {
        Message::Binary(b) if batch => Some((b.len(), proto::decode_binary_batch(b, limit))),
        Message::Binary(b) => Some((b.len(), proto::decode_binary(b, limit).map(|m| vec![(m, b.len())]))),
        Message::Text(t) => Some((t.len(), proto::decode_json(t.as_str(), limit).map(|m| vec![(m, t.len())]))),
        _ => None,
    }
}

fn close_cause(msg: &Message) -> Option<String> {
    match msg {
        Message::Close(Some(f)) => Some(u16::from(f.code).to_string()),
        Message::Close(None) => Some("close_without_code".into()),
        _ => None,
    }
}

fn error_cause(e: &tokio_tungstenite::tungstenite::Error) -> String {
    use tokio_tungstenite::tungstenite::Error as E;
    match e {
        E::ConnectionClosed | E::AlreadyClosed => "closed".into(),
        E::Io(io) if io.kind() == std::io::ErrorKind::ConnectionReset => "reset".into(),
        E::Io(_) => "io_error".into(),
        E::Protocol(_) => "protocol_error".into(),
        E::Capacity(_) => "too_big".into(),
        _ => "error".into(),
    }
}

/// Runs one bot until the deadline.
pub async fn run(cfg: Arc<BotConfig>, index: usize) {
    let stats = cfg.stats.clone();
    let Ok(Ok(permit)) = timeout_at(cfg.deadline, cfg.handshakes.clone().acquire_owned()).await else { return };
    let started = Instant::now();
    let hello = timeout(cfg.connect_timeout, connect(&cfg)).await;
    drop(permit);
    let (ws, welcome) = match hello {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            stats.add(C::ConnectFailures, 1);
            stats.note(format!("bot {index}: connect failed: {e:#}"));
            return;
        }
        Err(_) => {
            stats.add(C::ConnectFailures, 1);
            stats.note(format!("bot {index}: connect timed out after {:?}", cfg.connect_timeout));
            return;
        }
    };
    let Some(info) = welcome.worlds.iter().find(|w| w.name == cfg.world).cloned() else {
        stats.add(C::ConnectFailures, 1);
        let names: Vec<&str> = welcome.worlds.iter().map(|w| w.name.as_str()).collect();
        stats.note(format!("bot {index}: the server has no world `{}` (worlds: {names:?})", cfg.world));
        return;
    };
    stats.add(C::BotsConnected, 1);
    stats.add(C::BotsOnline, 1);
    let mut rec = Recorder::new();
    rec.record(H::ConnectUs, started.elapsed().as_micros() as u64, &stats);
    let rng = Rng::new(cfg.seed.wrapping_add((index as u64).wrapping_mul(0x2545_f491_4f6c_dd1d)));
    let rate = info.tick_rate_hz;
    let mut bot = Bot::new(cfg.clone(), rec, rng, info, welcome.quantization, rate);
    bot.active = is_active(index, cfg.bots, cfg.active_bots);
    // Passive bots leave the tick-clock estimate to the active ones, except the first few
    // (so that a fully passive swarm still measures lateness).
    bot.pinging = bot.active || index < VERIFYING;
    bot.skimming = cfg.skim && index >= VERIFYING;
    bot.resume = Some(welcome.resume_token.clone());
    let mut ws = ws;
    let end = loop {
        match bot.session(ws).await {
            // The world moved: reconnect there, resume the session, go on (`follow.rs`).
            End::Moved(to) => match crate::follow::follow(&cfg, &to, bot.resume.take()).await {
                Ok((next, w)) => match w.worlds.iter().find(|x| x.name == cfg.world) {
                    Some(info) => {
                        bot.rebind(info.clone(), w.resume_token.clone());
                        stats.add(C::Follows, 1);
                        ws = next;
                    }
                    None => break End::Lost("moved: the new server has no such world".into()),
                },
                Err(e) => {
                    stats.note(format!("bot {index}: following the world to {to} failed: {e:#}"));
                    break End::Lost("follow_failed".into());
                }
            },
            end => break end,
        }
    };
    if let End::Lost(cause) = end {
        stats.disconnect(cause);
    }
    bot.rec.flush(&stats);
    if bot.counted_subscribed {
        stats.sub(C::Subscribed, 1);
    }
    stats.sub(C::BotsOnline, 1);
}

async fn connect(cfg: &BotConfig) -> anyhow::Result<(Ws, proto::Welcome)> {
    connect_to(cfg, &cfg.url, None).await
}

/// Connects to `url` and says Hello (with `resume`, a session to take over).
pub(crate) async fn connect_to(cfg: &BotConfig, url: &str, resume: Option<String>) -> anyhow::Result<(Ws, proto::Welcome)> {
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(url, Some(ws_config()), true)
        .await
        .with_context(|| format!("WebSocket connect to {url}"))?;
    let hello = ClientMsg::Hello(Hello { protocol_version: proto::PROTOCOL_VERSION, token: cfg.token.clone(), encoding: cfg.encoding, resume });
    ws.send(to_message(&hello, cfg.encoding)?).await?;
    while let Some(m) = ws.next().await {
        let m = m?;
        if let Some(cause) = close_cause(&m) {
            bail!("closed during Hello ({cause})");
        }
        let Some((_, decoded)) = decode(&m, cfg.batch) else { continue };
        // Welcome is the first message; with a batch, also the first of its frame.
        match decoded?.into_iter().next().map(|(msg, _)| msg) {
            Some(ServerMsg::Welcome(w)) => return Ok((ws, w)),
            Some(ServerMsg::Error(e)) => bail!("server refused Hello: {} ({})", e.message, e.code),
            Some(other) => bail!("expected Welcome, got {:?}", other.kind()),
            None => bail!("empty frame before Welcome"),
        }
    }
    bail!("connection ended before Welcome")
}

struct Bot {
    cfg: Arc<BotConfig>,
    stats: Arc<Stats>,
    rec: Recorder,
    rng: Rng,
    info: WorldInfo,
    quant: Quantization,
    state: ClientState,
    area: Rect,
    next_id: u32,
    pending: HashMap<u32, Pending>,
    agents: Vec<u32>,
    last_tick: Option<u64>,
    effect: Option<Effect>,
    /// A Subscribe is outstanding (initial, pan or resync).
    subscribing: bool,
    /// A resync was wanted while a Subscribe was outstanding.
    resync_wanted: bool,
    commands: u64,
    pings: u32,
    last_rx: Instant,
    outbox: Vec<ClientMsg>,
    /// Spawns, commands and pans (else only receives, verifies and counts).
    active: bool,
    /// Sends pings (tick clock, ping RTT).
    pinging: bool,
    /// Only skims `cells` messages (see [`BotConfig::skim`]).
    skimming: bool,
    /// Counted in the `Subscribed` gauge.
    counted_subscribed: bool,
    join: Join,
    /// The current message arrived inside the measured window.
    in_window: bool,
    /// The entries of the `cells` message being applied (a buffer reused from tick to tick).
    entries: Vec<proto::AppliedEntry>,
    /// The session's resume token (the latest Welcome's).
    resume: Option<String>,
    /// The world moved to this URL (a `moved` message): the session ends to follow it.
    moved: Option<String>,
    /// When the last new tick's state arrived.
    last_tick_at: Option<Instant>,
    /// The bot followed its world to another server and no command of it has been
    /// acknowledged there yet (a result on the new connection answers a request sent on it).
    awaiting_command_after_follow: bool,
    /// Times the bot followed its world to another server.
    follows: u32,
}

impl Bot {
    fn new(cfg: Arc<BotConfig>, rec: Recorder, mut rng: Rng, info: WorldInfo, quant: Quantization, tick_rate_hz: f32) -> Self {
        cfg.clock.get_or_init(|| SharedClock::new(tick_rate_hz));
        let area = random_area(&mut rng, &info.bounds, cfg.aoi);
        Bot {
            stats: cfg.stats.clone(),
            cfg,
            rec,
            rng,
            info,
            quant,
            state: ClientState::new(quant),
            area,
            next_id: 1,
            pending: HashMap::new(),
            agents: Vec::new(),
            last_tick: None,
            effect: None,
            subscribing: false,
            resync_wanted: false,
            commands: 0,
            pings: 0,
            last_rx: Instant::now(),
            outbox: Vec::new(),
            active: true,
            pinging: true,
            skimming: false,
            counted_subscribed: false,
            join: Join::default(),
            in_window: false,
            entries: Vec::new(),
            resume: None,
            moved: None,
            last_tick_at: None,
            awaiting_command_after_follow: false,
            follows: 0,
        }
    }

    /// The bot followed its world to another server: the world's id there, and the session's
    /// new resume token. Its agents and its tick count go on; its cells come anew.
    fn rebind(&mut self, info: WorldInfo, resume: String) {
        self.info = info;
        self.resume = Some(resume);
        self.state = ClientState::new(self.quant);
        self.subscribing = false;
        self.resync_wanted = false;
        self.pending.retain(|_, p| p.kind == Kind::Command);
        self.join = Join::default();
        self.last_rx = Instant::now();
        self.awaiting_command_after_follow = true;
        self.follows += 1;
    }

    fn now_ns(&self) -> u64 {
        self.cfg.epoch.elapsed().as_nanos() as u64
    }

    fn request(&mut self, kind: Kind) -> u32 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.pending.insert(id, Pending { kind, sent: Instant::now(), sent_ns: self.now_ns() });
        id
    }

    fn subscribe(&mut self) {
        let request_id = self.request(Kind::Subscribe);
        self.subscribing = true;
        let area = if self.cfg.whole_world { Area::WholeWorld(proto::WholeWorld {}) } else { Area::Rect(self.area) };
        self.outbox.push(ClientMsg::Subscribe(Subscribe { request_id, world: self.cfg.world.clone(), area, every_n_ticks: 1 }));
    }

    fn resync(&mut self) {
        if self.subscribing {
            self.resync_wanted = true;
            return;
        }
        self.rec.add(C::Resyncs, 1);
        self.subscribe();
    }

    async fn flush_outbox(&mut self, ws: &mut Ws) -> Result<(), String> {
        for msg in std::mem::take(&mut self.outbox) {
            let m = to_message(&msg, self.cfg.encoding).map_err(|e| format!("encode: {e}"))?;
            match timeout(Duration::from_secs(5), ws.send(m)).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(error_cause(&e)),
                Err(_) => return Err("send_timeout".into()),
            }
        }
        Ok(())
    }

    /// Queues the spawn of an active bot's agents (in the middle half of its area).
    fn queue_spawn(&mut self) {
        if self.cfg.spawn_per_bot == 0 || !self.active {
            return;
        }
        let request_id = self.request(Kind::Spawn);
        let (cx, cy) = ((self.area.min_x + self.area.max_x) / 2.0, (self.area.min_y + self.area.max_y) / 2.0);
        let (hx, hy) = ((self.area.max_x - self.area.min_x) / 4.0, (self.area.max_y - self.area.min_y) / 4.0);
        self.outbox.push(ClientMsg::Spawn(Spawn {
            request_id,
            world: self.cfg.world.clone(),
            group: "swarm-bot".into(),
            count: self.cfg.spawn_per_bot,
            area: SpawnArea::Rect(Rect { min_x: cx - hx, min_y: cy - hy, max_x: cx + hx, max_y: cy + hy }),
            limits: proto::Limits::default(),
            behaviors: Vec::new(),
        }));
    }

    /// Queues a Ping once subscribed (before, Pong carries tick 0) and says when the next one
    /// is due: a burst of 8 at random phases first, to narrow the clock interval quickly.
    fn ping(&mut self) -> Duration {
        if self.pinging && self.last_tick.is_some() {
            let request_id = self.request(Kind::Ping);
            self.outbox.push(ClientMsg::Ping(proto::Ping { request_id }));
            self.pings += 1;
        }
        if self.pings < 8 { Duration::from_millis(self.rng.range(23.0, 61.0) as u64) } else { self.cfg.ping_every.mul_f64(self.rng.range(0.8, 1.2)) }
    }

    async fn session(&mut self, mut ws: Ws) -> End {
        let cfg = self.cfg.clone();
        self.subscribe();
        // A bot that followed its world keeps the agents it spawned.
        if self.agents.is_empty() && self.pending.values().all(|p| p.kind != Kind::Spawn) {
            self.queue_spawn();
        }
        if let Err(cause) = self.flush_outbox(&mut ws).await {
            return End::Lost(cause);
        }
        let commanding = self.active && cfg.commands_per_sec > 0.0 && cfg.spawn_per_bot > 0;
        let panning = self.active && cfg.pan_every.is_some() && !cfg.whole_world;
        let cmd_period = Duration::from_secs_f64(1.0 / cfg.commands_per_sec.max(1e-3));
        let now = TokioInstant::now();
        let mut next_cmd = now + cmd_period.mul_f64(self.rng.range(0.2, 1.2));
        let mut next_ping = now + Duration::from_millis(20);
        let pan_period = cfg.pan_every.unwrap_or(Duration::from_secs(3600));
        let mut next_pan = now + pan_period.mul_f64(self.rng.range(0.5, 1.5));
        let mut next_house = now + Duration::from_millis(250);
        // One timer each, made once and reset when its time moves: a `sleep_until` made anew
        // per loop would register and clear five timer entries for every message received.
        let deadline = sleep_until(cfg.deadline);
        let cmd_timer = sleep_until(next_cmd);
        let ping_timer = sleep_until(next_ping);
        let pan_timer = sleep_until(next_pan);
        let house_timer = sleep_until(next_house);
        tokio::pin!(deadline, cmd_timer, ping_timer, pan_timer, house_timer);
        let end = loop {
            tokio::select! {
                biased;
                () = &mut deadline => break End::Deadline,
                m = ws.next() => {
                    let m = match m {
                        None => break End::Lost("eof".into()),
                        Some(Err(e)) => break End::Lost(error_cause(&e)),
                        Some(Ok(m)) => m,
                    };
                    if let Some(cause) = close_cause(&m) {
                        break End::Lost(cause);
                    }
                    self.on_message(&m);
                    if let Some(to) = self.moved.take() {
                        break End::Moved(to);
                    }
                }
                () = &mut cmd_timer, if commanding && !self.agents.is_empty() => {
                    self.command();
                    next_cmd += cmd_period;
                    if next_cmd < TokioInstant::now() {
                        next_cmd = TokioInstant::now() + cmd_period;
                    }
                    cmd_timer.as_mut().reset(next_cmd);
                }
                () = &mut ping_timer => {
                    next_ping = TokioInstant::now() + self.ping();
                    ping_timer.as_mut().reset(next_ping);
                }
                () = &mut pan_timer, if panning => {
                    next_pan = TokioInstant::now() + pan_period;
                    pan_timer.as_mut().reset(next_pan);
                    if !self.subscribing {
                        self.area = pan(&mut self.rng, &self.info.bounds, self.area);
                        self.rec.add(C::Pans, 1);
                        self.subscribe();
                    }
                }
                () = &mut house_timer => {
                    next_house = TokioInstant::now() + Duration::from_millis(250);
                    house_timer.as_mut().reset(next_house);
                    if self.last_rx.elapsed() > cfg.stall_timeout {
                        break End::Lost("stalled".into());
                    }
                    self.expire();
                    self.rec.flush(&self.stats);
                }
            }
            if !self.outbox.is_empty() {
                if let Err(cause) = self.flush_outbox(&mut ws).await {
                    break End::Lost(cause);
                }
            }
        };
        // Commands still unanswered a second after they left count as timed out.
        let stale = self.pending.values().filter(|p| p.kind == Kind::Command && p.sent.elapsed() > Duration::from_secs(1)).count();
        self.rec.add(C::CommandTimeouts, stale as u64);
        self.pending.retain(|_, p| p.kind != Kind::Command);
        if matches!(end, End::Deadline) {
            self.goodbye(&mut ws).await;
        }
        end
    }

    /// Despawns the bot's agents (waiting briefly for the result) and closes with 1000.
    async fn goodbye(&mut self, ws: &mut Ws) {
        let deadline = TokioInstant::now() + Duration::from_secs(2);
        if !self.agents.is_empty() {
            let request_id = self.request(Kind::Despawn);
            self.outbox.push(ClientMsg::Despawn(proto::Despawn { request_id, world: self.cfg.world.clone(), agents: std::mem::take(&mut self.agents) }));
            if self.flush_outbox(ws).await.is_ok() {
                while self.pending.values().any(|p| p.kind == Kind::Despawn) {
                    match timeout_at(deadline, ws.next()).await {
                        Ok(Some(Ok(m))) if close_cause(&m).is_none() => self.on_message(&m),
                        _ => break,
                    }
                }
            }
        }
        let _ = timeout_at(deadline, ws.close(None)).await;
        // Drain until the server's close frame (bounded).
        while let Ok(Some(Ok(m))) = timeout_at(deadline, ws.next()).await {
            if close_cause(&m).is_some() {
                break;
            }
        }
    }

    /// Counts requests without results, and MoveTo effects never seen.
    fn expire(&mut self) {
        let t = self.cfg.request_timeout;
        let before = self.pending.len();
        self.pending.retain(|_, p| p.sent.elapsed() < t);
        let expired = before - self.pending.len();
        if expired > 0 {
            self.rec.add(C::CommandTimeouts, expired as u64);
            // A lost Subscribe result must not block resyncs forever.
            if self.subscribing && !self.pending.values().any(|p| p.kind == Kind::Subscribe) {
                self.subscribing = false;
            }
        }
        if self.effect.is_some_and(|e| e.sent.elapsed() > self.cfg.effect_timeout) {
            self.effect = None;
            self.rec.add(C::EffectTimeouts, 1);
        }
    }

    fn note_tick(&mut self, tick: u64, is_delta: bool) {
        let new = match self.last_tick {
            None if is_delta => true,
            Some(last) if tick > last => {
                self.rec.add(C::TickGaps, tick - last - 1);
                if tick > last + 1 {
                    let moved = if self.follows > 0 { format!(" (after following its world {} time(s))", self.follows) } else { String::new() };
                    self.stats.note(format!("ticks {}..{} missed: tick {tick} came after {last}{moved}", last + 1, tick - 1));
                }
                true
            }
            _ => false,
        };
        if new {
            let now = Instant::now();
            if let Some(t) = self.last_tick_at.replace(now) {
                self.rec.record(H::TickIntervalUs, now.duration_since(t).as_micros() as u64, &self.stats);
            }
            self.last_tick = Some(tick);
            self.rec.add(C::TicksSeen, 1);
            if self.in_window {
                self.rec.add(C::WindowTicks, 1);
            }
        }
    }

    fn on_message(&mut self, m: &Message) {
        let arrival = self.now_ns();
        self.last_rx = Instant::now();
        if self.skimming {
            if let Message::Binary(b) = m {
                if let Some(head) = proto::skim_cells_binary(b).filter(|h| h.len == b.len()) {
                    self.on_skimmed(b.len(), head.tick, arrival);
                    return;
                }
            }
        }
        if let (Message::Binary(b), true, false) = (m, self.cfg.batch, self.skimming) {
            self.on_batch(b, arrival);
            return;
        }
        let Some((len, decoded)) = decode(m, self.cfg.batch) else { return };
        self.on_bytes(len, arrival);
        match decoded {
            Ok(msgs) => {
                for (msg, len) in msgs {
                    self.on_server_msg(msg, len, arrival);
                }
                self.joined();
            }
            Err(e) => self.decode_error(&e.to_string()),
        }
    }

    /// Counts a data message of `len` bytes that arrived at `arrival`.
    fn on_bytes(&mut self, len: usize, arrival: u64) {
        self.rec.add(C::BytesIn, len as u64);
        // Window figures (bytes, ticks, moved agents) come from bots that decode everything.
        self.in_window = !self.skimming && arrival >= self.cfg.window_ns;
        if self.in_window {
            self.rec.add(C::WindowBytes, len as u64);
        }
        self.join.on_bytes(len);
    }

    /// A batched binary frame of a verifying bot: its `cells` messages are applied straight
    /// from the bytes ([`ClientState::apply_cells_binary`]), any other message is decoded.
    fn on_batch(&mut self, b: &[u8], arrival: u64) {
        self.on_bytes(b.len(), arrival);
        if b.len() > proto::DEFAULT_SERVER_LIMIT || b.is_empty() {
            self.decode_error(&format!("binary frame of {} bytes", b.len()));
            return;
        }
        let mut rest = b;
        while !rest.is_empty() {
            let used = match proto::skim_cells_binary(rest) {
                Some(head) => {
                    let mut entries = std::mem::take(&mut self.entries);
                    entries.clear();
                    let r = self.state.apply_cells_binary(&head, rest, |e| entries.push(e));
                    self.on_cells(&head, &entries, arrival);
                    self.entries = entries;
                    match r {
                        Ok(()) => {}
                        Err(proto::CellsError::Malformed(e)) => return self.decode_error(&e.to_string()),
                        Err(proto::CellsError::Apply { cell, tick, error }) => {
                            self.applied(Err(error), cell.unwrap_or(u32::MAX), tick);
                        }
                    }
                    head.len
                }
                None => match proto::decode_binary_first::<ServerMsg>(rest) {
                    Ok((msg, used)) => {
                        self.on_server_msg(msg, used, arrival);
                        used
                    }
                    Err(e) => return self.decode_error(&e.to_string()),
                },
            };
            // Every message takes at least one byte, so this ends.
            rest = rest.get(used.max(1)..).unwrap_or_default();
        }
        self.joined();
    }

    /// Counts the `entries` applied of the `cells` message `head` (all of them unless it failed).
    fn on_cells(&mut self, head: &proto::CellsHead, entries: &[proto::AppliedEntry], arrival: u64) {
        self.frame(head.len, entries.iter().map(|e| e.records).sum());
        // One lateness sample per message (not per cell entry), as a skimming bot takes.
        if entries.iter().any(|e| !e.keyframe) {
            self.lateness(head.tick, arrival);
        }
        for e in entries {
            self.count_entry(e.cell, e.keyframe, e.tick, e.records);
            self.check_effect(e.cell, e.tick);
        }
    }

    /// Counts a keyframe or delta of `cell` for `tick` with `records` agent records, before or
    /// after it is applied.
    fn count_entry(&mut self, cell: u32, keyframe: bool, tick: u64, records: usize) {
        if keyframe {
            self.rec.add(C::Keyframes, 1);
            self.join.on_keyframe(cell, records);
        } else {
            self.rec.add(C::Deltas, 1);
            if self.in_window {
                self.rec.add(C::WindowMoved, records as u64);
            }
        }
        self.note_tick(tick, !keyframe);
    }

    /// A frame that does not decode: counted, and the bot resyncs.
    fn decode_error(&mut self, e: &str) {
        self.rec.add(C::DecodeErrors, 1);
        self.stats.note(format!("decode error: {e}"));
        self.resync();
    }

    /// Counts the join once a keyframe of every subscribed cell has arrived.
    fn joined(&mut self) {
        if let Some((bytes, agents)) = self.join.complete() {
            self.rec.add(C::Joins, 1);
            self.rec.add(C::JoinBytes, bytes);
            self.rec.add(C::JoinAgents, agents);
        }
    }

    /// A skimmed `cells` message of `len` bytes for `tick`: its bytes, tick (gaps) and lateness
    /// are counted; it adds nothing to the window's bytes, ticks and moved agents or to the
    /// join figures, which verifying bots measure.
    fn on_skimmed(&mut self, len: usize, tick: u64, arrival: u64) {
        self.in_window = false;
        self.rec.add(C::BytesIn, len as u64);
        self.skimmed_tick(tick, arrival);
    }

    /// A skimming bot's `cells` message for `tick` (skimmed, or decoded from a frame that held
    /// more than it): counted, never applied.
    fn skimmed_tick(&mut self, tick: u64, arrival: u64) {
        self.rec.add(C::Skimmed, 1);
        let joined = self.last_tick.is_some();
        self.note_tick(tick, true);
        // The first message is the join's keyframes, whose lateness verifying bots do not count.
        if joined {
            self.lateness(tick, arrival);
        }
    }

    /// Records how late the message of `tick` that arrived at `arrival` is, by the tick clock.
    fn lateness(&mut self, tick: u64, arrival: u64) {
        if let Some((late, err)) = self.cfg.clock.get().and_then(|c| c.lateness_ns(tick, arrival)) {
            if late < 0.0 {
                self.rec.add(C::NegativeLateness, 1);
            }
            self.rec.record(H::LatenessUs, (late.max(0.0) / 1e3) as u64, &self.stats);
            self.rec.record(H::ClockErrorUs, (err / 1e3) as u64, &self.stats);
        }
    }

    /// One server message of `len` encoded bytes, from a WebSocket message that arrived at
    /// `arrival`.
    fn on_server_msg(&mut self, msg: ServerMsg, len: usize, arrival: u64) {
        match msg {
            ServerMsg::Keyframe(k) => {
                self.frame(len, k.agents.len());
                self.on_keyframe(&k);
            }
            ServerMsg::Delta(d) => {
                self.frame(len, d.changed.len() + d.entered.len());
                self.lateness(d.tick, arrival);
                self.on_delta(&d);
            }
            ServerMsg::Cells(c) if self.skimming => self.skimmed_tick(c.tick, arrival),
            ServerMsg::Cells(c) => {
                let updates = c.entries.iter().map(|e| match e {
                    proto::CellEntry::Keyframe(k) => k.agents.len(),
                    proto::CellEntry::Delta(d) => d.changed.len() + d.entered.len(),
                });
                self.frame(len, updates.sum());
                // One lateness sample per message (not per cell entry), as a skimming bot takes.
                if c.entries.iter().any(|e| matches!(e, proto::CellEntry::Delta(_))) {
                    self.lateness(c.tick, arrival);
                }
                let mut ok = true;
                for e in &c.entries {
                    ok &= match e {
                        proto::CellEntry::Keyframe(k) => self.on_keyframe(k),
                        proto::CellEntry::Delta(d) => self.on_delta(d),
                    };
                }
                // The message checksum covers every entry's cell after the message.
                if let (true, Some(expected)) = (ok, c.checksum) {
                    let actual = self.state.cells_checksum(&c);
                    if actual != expected.0 {
                        self.applied(Err(ApplyError::ChecksumMismatch { expected: expected.0, actual }), u32::MAX, c.tick);
                    }
                }
            }
            ServerMsg::Event(_) => self.rec.add(C::Events, 1),
            ServerMsg::CommandResult(r) => self.on_result(r),
            ServerMsg::Pong(p) => match self.pending.remove(&p.request_id) {
                Some(pending) if pending.kind == Kind::Ping => {
                    self.rec.add(C::Pongs, 1);
                    self.rec.record(H::PingRttUs, pending.sent.elapsed().as_micros() as u64, &self.stats);
                    if let Some(c) = self.cfg.clock.get() {
                        c.observe(pending.sent_ns, arrival, p.server_tick);
                    }
                }
                _ => self.rec.add(C::UnmatchedResults, 1),
            },
            ServerMsg::Error(e) => {
                self.rec.add(C::ServerErrors, 1);
                self.stats.error_code(e.code.name());
                self.stats.note(format!("server error: {} ({})", e.message, e.code));
            }
            ServerMsg::Moved(m) if m.name == self.cfg.world => self.moved = Some(m.to),
            ServerMsg::Welcome(_) | ServerMsg::Moved(_) => {}
        }
    }

    fn on_keyframe(&mut self, k: &proto::Keyframe) -> bool {
        self.count_entry(k.cell, true, k.tick, k.agents.len());
        let r = self.state.apply_keyframe(k);
        self.applied(r, k.cell, k.tick)
    }

    fn on_delta(&mut self, d: &proto::Delta) -> bool {
        self.count_entry(d.cell, false, d.tick, moved_agents(d));
        let r = self.state.apply_delta(d);
        self.applied(r, d.cell, d.tick)
    }

    fn frame(&mut self, len: usize, agents: usize) {
        self.rec.add(C::Frames, 1);
        self.rec.add(C::FrameBytes, len as u64);
        self.rec.add(C::AgentUpdates, agents as u64);
        self.rec.record(H::FrameBytes, len as u64, &self.stats);
    }

    /// Whether `r` applied; an error is counted and starts a resync.
    fn applied(&mut self, r: Result<(), ApplyError>, cell: u32, tick: u64) -> bool {
        match r {
            Ok(()) => {
                self.check_effect(cell, tick);
                return true;
            }
            Err(e @ ApplyError::ChecksumMismatch { .. }) => {
                self.rec.add(C::ChecksumErrors, 1);
                self.stats.note(format!("cell {cell} tick {tick}: {e}"));
                self.resync();
            }
            Err(e) => {
                self.rec.add(C::ChainBreaks, 1);
                self.stats.note(format!("cell {cell} tick {tick}: {e}"));
                self.resync();
            }
        }
        false
    }

    fn on_result(&mut self, r: proto::CommandResult) {
        let Some(p) = self.pending.remove(&r.request_id) else {
            self.rec.add(C::UnmatchedResults, 1);
            return;
        };
        if let proto::Outcome::Error(e) = &r.result {
            self.rec.add(C::CommandErrors, 1);
            self.stats.error_code(e.code.name());
            self.stats.note(format!("{:?} failed: {} ({})", p.kind, e.message, e.code));
        }
        match (p.kind, r.result) {
            (Kind::Command, result) => {
                if self.awaiting_command_after_follow && !matches!(result, proto::Outcome::Error(_)) {
                    self.awaiting_command_after_follow = false;
                    self.rec.add(C::CommandedAfterFollow, 1);
                }
                self.rec.add(C::CommandResults, 1);
                self.rec.record(H::CmdRttUs, p.sent.elapsed().as_micros() as u64, &self.stats);
            }
            (Kind::Subscribe, result) => {
                self.subscribing = false;
                if let proto::Outcome::Subscribed(s) = result {
                    self.state.retain_cells(s.world, &s.cells);
                    self.join.on_subscribed(&s.cells);
                    if !self.counted_subscribed {
                        self.counted_subscribed = true;
                        self.stats.add(C::Subscribed, 1);
                    }
                }
                if std::mem::take(&mut self.resync_wanted) {
                    self.resync();
                }
            }
            (Kind::Spawn, proto::Outcome::Spawned(s)) => {
                self.rec.add(C::AgentsSpawned, s.agents.len() as u64);
                self.agents.extend(s.agents);
            }
            _ => {}
        }
    }

    /// Sends the next command (see [`CommandMix`]).
    fn command(&mut self) {
        self.commands += 1;
        let world = self.cfg.world.clone();
        let agents = self.agents.clone();
        let request_id = self.request(Kind::Command);
        self.rec.add(C::CommandsSent, 1);
        let behavior = match self.cfg.mix {
            CommandMix::Mixed => self.commands % 4 == 0,
            CommandMix::MoveTo => false,
            CommandMix::Behaviors => true,
        };
        if behavior {
            let msg = if self.commands % 2 == 0 {
                ClientMsg::RemoveBehavior(RemoveBehavior { request_id, world, agents, kind: BehaviorKind::LookWhereYouAreGoing })
            } else {
                let entry = BehaviorEntry::from(proto::Behavior::LookWhereYouAreGoing(LookWhereYouAreGoing { align: proto::AlignParams::default() }));
                ClientMsg::AddBehavior(AddBehavior { request_id, world, agents, entry })
            };
            self.outbox.push(msg);
            return;
        }
        let watched = agents[(self.rng.next_u64() % agents.len() as u64) as usize];
        let (target, measurable) = self.pick_target(watched);
        self.outbox.push(ClientMsg::MoveTo(MoveTo { request_id, world, agents, target, stopping_distance: 0.0 }));
        if measurable {
            if self.effect.is_some() {
                self.rec.add(C::EffectTimeouts, 1);
            }
            let q = &self.quant;
            self.effect = Some(Effect {
                agent: watched,
                target: [f64::from(target.x) / f64::from(q.pos_step), f64::from(target.y) / f64::from(q.pos_step)],
                sent: Instant::now(),
                after_tick: self.last_tick.unwrap_or(0),
            });
        }
    }

    /// A MoveTo target for `agent`, and whether its effect can be measured. A moving agent
    /// gets a target 95°–120° off its heading, so its velocity points away from the target
    /// when the command leaves and "turned toward the target" (positive dot product) can only
    /// be the command's doing; a resting agent gets any direction. Targets stay inside the
    /// area (so the agent stays in view) and the world.
    fn pick_target(&mut self, agent: u32) -> (Point, bool) {
        let (ps, vs) = (f64::from(self.quant.pos_step), f64::from(self.quant.vel_step));
        let a = &self.area;
        let found = self.state.agents().find(|(_, q)| q.id == agent).map(|(_, q)| *q);
        let Some(q) = found else {
            let x = f64::from(a.min_x + a.max_x) / 2.0 + self.rng.range(-2.0, 2.0);
            let y = f64::from(a.min_y + a.max_y) / 2.0 + self.rng.range(-2.0, 2.0);
            return (self.clamp_target(x, y), false);
        };
        let (px, py) = (f64::from(q.pos[0]) * ps, f64::from(q.pos[1]) * ps);
        let (vx, vy) = (f64::from(q.vel[0]) * vs, f64::from(q.vel[1]) * vs);
        let moving = vx.hypot(vy) > 1e-9;
        let ang = if moving {
            let off = self.rng.range(95f64.to_radians(), 120f64.to_radians());
            vy.atan2(vx) + if self.rng.next_u64() & 1 == 0 { off } else { -off }
        } else {
            self.rng.range(0.0, std::f64::consts::TAU)
        };
        let dist = self.rng.range(4.0, 12.0);
        let t = self.clamp_target(px + dist * ang.cos(), py + dist * ang.sin());
        let (dx, dy) = (f64::from(t.x) - px, f64::from(t.y) - py);
        let measurable = dx.hypot(dy) > 1.0 && (!moving || vx * dx + vy * dy <= 0.0);
        (t, measurable)
    }

    fn clamp_target(&self, x: f64, y: f64) -> Point {
        let (a, b) = (&self.area, &self.info.bounds);
        let lo_x = f64::from(a.min_x.max(b.min_x)) + 2.0;
        let hi_x = (f64::from(a.max_x.min(b.max_x)) - 2.0).max(lo_x);
        let lo_y = f64::from(a.min_y.max(b.min_y)) + 2.0;
        let hi_y = (f64::from(a.max_y.min(b.max_y)) - 2.0).max(lo_y);
        Point { x: x.clamp(lo_x, hi_x) as f32, y: y.clamp(lo_y, hi_y) as f32 }
    }

    /// After a frame of `cell` at `tick` was applied: has the watched agent turned?
    fn check_effect(&mut self, cell: u32, tick: u64) {
        let Some(e) = self.effect else { return };
        if tick <= e.after_tick {
            return;
        }
        let Some(cs) = self.state.cell(self.info.id, cell) else { return };
        let Ok(i) = cs.agents().binary_search_by_key(&e.agent, |a| a.id) else { return };
        let a = cs.agents()[i];
        let (dx, dy) = (e.target[0] - f64::from(a.pos[0]), e.target[1] - f64::from(a.pos[1]));
        let (vx, vy) = (f64::from(a.vel[0]), f64::from(a.vel[1]));
        if (vx != 0.0 || vy != 0.0) && vx * dx + vy * dy > 0.0 {
            self.rec.record(H::CmdEffectUs, e.sent.elapsed().as_micros() as u64, &self.stats);
            self.effect = None;
        }
    }
}

/// A random `size` area inside `bounds` (the whole bounds on an axis that is too small).
pub fn random_area(rng: &mut Rng, bounds: &Rect, size: (f32, f32)) -> Rect {
    let axis = |rng: &mut Rng, lo: f32, hi: f32, len: f32| {
        if hi - lo <= len {
            (lo, hi)
        } else {
            let s = rng.range(f64::from(lo), f64::from(hi - len)) as f32;
            (s, s + len)
        }
    };
    let (min_x, max_x) = axis(rng, bounds.min_x, bounds.max_x, size.0);
    let (min_y, max_y) = axis(rng, bounds.min_y, bounds.max_y, size.1);
    Rect { min_x, min_y, max_x, max_y }
}

/// `area` moved by up to a quarter of its size on each axis, kept inside `bounds`.
pub fn pan(rng: &mut Rng, bounds: &Rect, area: Rect) -> Rect {
    let shift = |rng: &mut Rng, lo: f32, hi: f32, min: f32, max: f32| {
        let len = max - min;
        let d = rng.range(-f64::from(len) / 4.0, f64::from(len) / 4.0) as f32;
        let s = (min + d).clamp(lo, (hi - len).max(lo));
        (s, s + len)
    };
    let (min_x, max_x) = shift(rng, bounds.min_x, bounds.max_x, area.min_x, area.max_x);
    let (min_y, max_y) = shift(rng, bounds.min_y, bounds.max_y, area.min_y, area.max_y);
    Rect { min_x, min_y, max_x, max_y }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn areas_stay_inside_the_world() {
        let b = Rect { min_x: -50.0, min_y: 0.0, max_x: 150.0, max_y: 60.0 };
        let mut rng = Rng::new(7);
        for _ in 0..1000 {
            let a = random_area(&mut rng, &b, (100.0, 100.0));
            assert!(a.min_x >= b.min_x && a.max_x <= b.max_x + 1e-3, "{a:?}");
            assert!((a.max_x - a.min_x - 100.0).abs() < 1e-3);
            assert_eq!((a.min_y, a.max_y), (0.0, 60.0));
            let p = pan(&mut rng, &b, a);
            assert!(p.min_x >= b.min_x && p.max_x <= b.max_x + 1e-3, "{p:?}");
            assert!((p.max_x - p.min_x - 100.0).abs() < 1e-3);
        }
    }

    #[test]
    fn active_bots_are_spread_and_counted_exactly() {
        for (bots, active) in [(10, 1), (10, 0), (10, 10), (1000, 100), (7, 3), (1, 0), (1, 1), (2000, 1999)] {
            let on: Vec<usize> = (0..bots).filter(|&i| is_active(i, bots, active)).collect();
            assert_eq!(on.len(), active, "{bots} bots, {active} active");
            if active >= 2 {
                // Evenly spread: gaps differ by at most one.
                let gaps: Vec<usize> = on.windows(2).map(|w| w[1] - w[0]).collect();
                let (lo, hi) = (gaps.iter().min().unwrap(), gaps.iter().max().unwrap());
                assert!(hi - lo <= 1, "{bots}/{active}: {gaps:?}");
            }
        }
        assert!(is_active(5, 10, 20));
    }

    #[test]
    fn moved_agents_are_changed_plus_entered() {
        let q = Quantization::default();
        let at = |id: u32, x: i32| proto::QAgent { id, pos: [x, 0], vel: [1, 0], ..proto::QAgent::default() };
        let change = |id: u32| proto::diff_agent(&at(id, 0), &at(id, 1), &q).unwrap();
        let delta = |changed: Vec<proto::AgentChange>, entered: Vec<proto::QAgent>| proto::Delta {
            world: 1,
            cell: 0,
            tick: 2,
            base_tick: 1,
            checksum: None,
            left: vec![7, 8, 9],
            changed,
            entered,
        };
        assert_eq!(moved_agents(&delta((1..=4).map(change).collect(), vec![at(5, 0), at(6, 0)])), 6);
        // Agents that only left are counted where they entered.
        assert_eq!(moved_agents(&delta(Vec::new(), Vec::new())), 0);
    }

    #[test]
    fn join_counts_bytes_until_every_cell_is_keyed() {
        let mut j = Join::default();
        j.on_bytes(100); // Subscribed result, before any keyframe
        j.on_keyframe(3, 10); // keyframes may come before the result
        assert_eq!(j.complete(), None);
        j.on_subscribed(&[1, 2, 3]);
        j.on_bytes(50);
        j.on_keyframe(1, 5);
        j.on_keyframe(1, 7); // a cell's second keyframe does not add agents
        assert_eq!(j.complete(), None);
        j.on_bytes(30);
        j.on_keyframe(2, 0); // an empty cell still needs its keyframe
        assert_eq!(j.complete(), Some((180, 15)));
        // Once: later bytes, results and keyframes (pans, resyncs) do not count.
        j.on_bytes(1000);
        j.on_subscribed(&[9]);
        j.on_keyframe(9, 100);
        assert_eq!(j.complete(), None);
        // No subscribed cells: complete at the result.
        let mut e = Join::default();
        e.on_bytes(20);
        e.on_subscribed(&[]);
        assert_eq!(e.complete(), Some((20, 0)));
    }

    #[test]
    fn same_seed_same_draws_and_ranges_hold() {
        let (mut a, mut b, mut c) = (Rng::new(1), Rng::new(1), Rng::new(2));
        let draw = |r: &mut Rng| (r.next_u64(), r.range(2.0, 3.0));
        let (xa, xb, xc) = (draw(&mut a), draw(&mut b), draw(&mut c));
        assert_eq!(xa, xb, "the same --seed must give the same bots");
        assert_ne!(xa, xc, "another seed gives other draws");
        assert!((0..1000).map(|_| a.range(2.0, 3.0)).all(|x| (2.0..3.0).contains(&x)));
    }
}
