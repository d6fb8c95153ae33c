//! One bot: a WebSocket session that behaves like a game client.
//!
//! Hello → Welcome (under the handshake semaphore), Subscribe to a random area, Spawn its own
//! agents there, then until the deadline: decode every frame with steer-proto, keep its own
//! copy of the cells and verify the delta chain and checksums (resubscribing on any break),
//! send MoveTo / behaviour commands at the configured rate and match each CommandResult,
//! ping to estimate the server's tick clock, and pan the area now and then. When the run ends
//! (its deadline, or the swarm told to stop: `stop.rs`) it despawns its agents and closes with
//! 1000. Every wait has a timeout.

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
use tokio::time::{Instant as TokioInstant, sleep_until, timeout, timeout_at};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::clock::SharedClock;
use crate::stats::{C, H, Recorder, Stats};

mod config;
mod orders;
mod recv;

pub use config::{BotConfig, CommandMix, VERIFYING, is_active};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

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
    /// The run is over (its deadline, or the swarm was told to stop).
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

/// Runs one bot until the run ends.
pub async fn run(cfg: Arc<BotConfig>, index: usize) {
    let stats = cfg.stats.clone();
    let permit = tokio::select! {
        p = cfg.handshakes.clone().acquire_owned() => p,
        () = cfg.stop.until() => return,
    };
    // A run that ended while this bot waited for its start or its slot: it never starts.
    let Ok(permit) = permit else { return };
    if cfg.stop.done() {
        return;
    }
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
    bot.index = index;
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
                        stats.followed(index);
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
    /// The bot's index in the run (its row of the per-bot figures).
    index: usize,
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
            index: 0,
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
        let stop = cfg.stop.until();
        let cmd_timer = sleep_until(next_cmd);
        let ping_timer = sleep_until(next_ping);
        let pan_timer = sleep_until(next_pan);
        let house_timer = sleep_until(next_house);
        tokio::pin!(stop, cmd_timer, ping_timer, pan_timer, house_timer);
        let end = loop {
            tokio::select! {
                biased;
                () = &mut stop => break End::Deadline,
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
