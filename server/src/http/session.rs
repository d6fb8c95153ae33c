//! The WebSocket protocol of one connection, without I/O: messages and ticks in, messages and
//! effects out (in the manner of a sans-I/O protocol state machine).
//!
//! [`Session`] decides everything about what a client sends: Hello (protocol version, token,
//! resume, the encoding from `Welcome` on), the deny-by-default authorization of every message,
//! subscriptions and their quotas, world commands, the two token buckets (commands; Hello, Ping
//! and WebSocket ping/pong frames), the malformed-message budget and every close code it sends.
//! It reads the server through [`Env`] (tokens, players, worlds: synchronous look-ups) and
//! answers with [`Effect`]s, which the receive task in `ws.rs` carries out: frames and
//! subscriptions go to the send task, a world command is applied and its outcome handed back
//! with [`Session::applied`]. Time comes in as an argument, so every rule is unit-tested below
//! without a socket or a runtime.
//!
//! Encodings (PROTOCOL.md §2): replies before `Welcome` use the encoding of the frame they
//! answer; from `Welcome` on every server frame uses `Hello.encoding`, or JSON when the URL asked
//! for it with `?format=json`.

use std::time::{Duration, Instant};

use bytes::Bytes;
use steer_proto::{self as proto, ClientMsg, Encoding, ErrorCode, ServerMsg, Validate, close};

use super::feed::{Viewer, encode};
use crate::auth::Identity;
use crate::authz::{Caller, Denial, Grant, Mode, Target};
use crate::config::{LimitSettings, Visibility, WorldPolicy};
use crate::runtime::CmdError;
use crate::runtime::players::{Awaited, Direct, JoinError, Joined};
use crate::runtime::world::Actor;
use crate::sim::world::{Command, Outcome};

/// What the session reads of the server: synchronous look-ups, no I/O of the connection's.
pub(crate) trait Env {
    /// A handle on a world (what a subscription and a command are sent to).
    type World: Clone;
    /// Who a token is (`None`: no token; anonymous in dev mode), or why not.
    fn authenticate(&self, token: Option<&str>) -> Result<Identity, String>;
    /// Registers the connection as `presented` (a fresh session), or takes over the session of
    /// `resume`. Called at most once per connection; `None` if the connection's registration
    /// was already used.
    fn join(&mut self, resume: Option<&str>, presented: Option<&Identity>) -> Option<Result<Joined, JoinError>>;
    /// The world named `name`, or why not (the registry's message).
    fn world(&self, name: &str) -> Result<Self::World, String>;
    /// A world's announced AOI grid (its id and name included).
    fn info(&self, world: &Self::World) -> proto::WorldInfo;
    /// The highest `every_n_ticks` the world serves.
    fn max_rate(&self, world: &Self::World) -> u32;
    /// The player rules of the world named `name`.
    fn policy(&self, name: &str) -> &WorldPolicy;
    /// Every world, as `Welcome` lists them.
    fn worlds(&self) -> Vec<proto::WorldInfo>;
    /// The world's current tick (0 for a world that is gone).
    fn tick(&self, world: u32) -> u64;
}

/// What the session asks of its connection.
#[derive(Debug)]
pub(crate) enum Effect<W> {
    /// Send a message (encoded as given).
    Send(Bytes, Encoding),
    /// Answer a WebSocket ping with this payload.
    Pong(Bytes),
    /// Who the connection is from now on (set by the first Hello, before `Welcome`) and the
    /// encoding of its frames.
    Viewer(Viewer, Encoding),
    /// A message for this connection alone (an event about the player's agents).
    Direct(Direct),
    /// Start (or move) a subscription: keyframes for `cells`, then deltas (`request_id`: the
    /// command whose `subscribed` result goes first, with the group table as the subscription
    /// starts; none for a subscription a resume restores).
    Subscribe { world: W, cells: Vec<u32>, span: u32, request_id: Option<u32> },
    /// Stop the subscription of world `world`, then send `result`.
    Unsubscribe { world: u32, result: Bytes },
    /// Apply `commands` in `world` as `actor`, then hand the outcome to [`Session::applied`].
    Apply { request_id: u32, world: W, commands: Vec<Command>, actor: Actor },
    /// A message was refused by a token bucket (the `rate_limited` metric counts it).
    RateLimited,
    /// Close the connection with a code and reason (the session ends).
    Close(u16, &'static str),
    /// The resumed session's subscriptions are restored (the effects before this one): a world
    /// that arrived by a handoff and waits for the session may tick once this is dropped.
    Restored(Awaited),
}

/// Whether the connection goes on after a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub(crate) enum Flow {
    /// Keep reading.
    Continue,
    /// The session is over (a `Close` effect says why, if the server closes it).
    Stop,
}

/// A WebSocket message from the client, as the socket's reader gives it.
#[derive(Debug, Clone)]
pub(crate) enum Inbound {
    Binary(Bytes),
    Text(String),
    Ping(Bytes),
    /// A pong, or a raw frame: answered by nothing, counted by the ping bucket.
    Pong,
    Close,
}

/// Why the socket's reader refused what the client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadFault {
    /// A message or frame over `limits.max_message_bytes`.
    TooBig,
    /// Anything else that breaks the WebSocket protocol.
    Protocol,
}

/// The settings a session obeys.
#[derive(Debug, Clone)]
pub(crate) struct Rules {
    /// Dev or secured.
    pub mode: Mode,
    /// `[limits]`.
    pub limits: LimitSettings,
    /// `Welcome.session_grace_secs`.
    pub session_grace_secs: u32,
}

/// Token bucket of one connection.
#[derive(Debug, Clone)]
struct Bucket {
    tokens: f64,
    rate: f64,
    burst: f64,
    last: Instant,
}

impl Bucket {
    fn full(rate: f64, burst: f64, now: Instant) -> Self {
        Bucket { tokens: burst, rate, burst, last: now }
    }

    fn take(&mut self, now: Instant) -> bool {
        self.tokens = (self.tokens + now.saturating_duration_since(self.last).as_secs_f64() * self.rate).min(self.burst);
        self.last = self.last.max(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// The protocol state of one connection.
pub(crate) struct Session {
    rules: Rules,
    /// Encoding of replies (see the module docs).
    enc: Encoding,
    /// `?format=json` asked for JSON.
    url_enc: Encoding,
    /// Welcomed (a first Hello was accepted).
    hello: bool,
    /// Who it is (from Hello).
    identity: Option<Identity>,
    /// Its resume token (from Welcome).
    resume_token: Option<String>,
    /// Malformed messages, and commands before Hello.
    bad: u32,
    /// Messages refused by a bucket since the last one let through.
    limited: u32,
    commands: Bucket,
    /// Hello, Ping and WebSocket-level ping/pong frames: cheap, but each is answered, so they
    /// have a bucket of their own (a client that is out of command tokens can still ping).
    pings: Bucket,
    /// Ids of the subscribed worlds, in subscription order.
    subscribed: Vec<u32>,
    /// (world name, area, every_n_ticks) of each subscription, kept for a resume.
    subs: Vec<Kept>,
}

/// A subscription as a resume restores it: world name, area, `every_n_ticks`.
pub(crate) type Kept = (String, proto::Area, u32);

/// Effects are pushed here.
type Out<W> = Vec<Effect<W>>;

impl Session {
    /// A connection opened at `now`, whose URL asked for `url_enc`.
    pub(crate) fn new(rules: Rules, url_enc: Encoding, now: Instant) -> Self {
        let l = &rules.limits;
        let commands = Bucket::full(l.commands_per_sec, l.command_burst, now);
        let pings = Bucket::full(l.pings_per_sec, l.ping_burst, now);
        Session {
            rules,
            enc: url_enc,
            url_enc,
            hello: false,
            identity: None,
            resume_token: None,
            bad: 0,
            limited: 0,
            commands,
            pings,
            subscribed: Vec::new(),
            subs: Vec::new(),
        }
    }

    /// How long a connection may take to send its Hello.
    pub(crate) fn hello_timeout(&self) -> Duration {
        Duration::from_millis(self.rules.limits.hello_timeout_ms)
    }

    /// A first Hello was accepted.
    pub(crate) fn welcomed(&self) -> bool {
        self.hello
    }

    /// What a session that ends leaves for a resume: who, its resume token, its subscriptions.
    pub(crate) fn resumable(&self) -> Option<(&Identity, &str, &[Kept])> {
        Some((self.identity.as_ref()?, self.resume_token.as_deref()?, &self.subs))
    }

    /// No Hello within [`Session::hello_timeout`]: closed, unless welcomed meanwhile.
    pub(crate) fn hello_timed_out<W>(&mut self, out: &mut Out<W>) -> Flow {
        if self.hello {
            return Flow::Continue;
        }
        out.push(Effect::Close(close::POLICY, "no Hello in time"));
        Flow::Stop
    }

    /// The player was kicked (its connections are closed).
    pub(crate) fn kicked<W>(&mut self, out: &mut Out<W>) -> Flow {
        out.push(Effect::Close(close::KICKED, "kicked"));
        Flow::Stop
    }

    /// The socket's reader refused what the client sent.
    pub(crate) fn read_fault<W>(&mut self, fault: ReadFault, out: &mut Out<W>) -> Flow {
        out.push(match fault {
            ReadFault::TooBig => Effect::Close(close::TOO_BIG, "message too big"),
            ReadFault::Protocol => Effect::Close(close::POLICY, "protocol error"),
        });
        Flow::Stop
    }

    /// One WebSocket message from the client, received at `now`.
    pub(crate) fn on_message<E: Env>(&mut self, env: &mut E, msg: Inbound, now: Instant, out: &mut Out<E::World>) -> Flow {
        let limit = self.rules.limits.max_message_bytes;
        // Each frame is decoded by its type; until Welcome, replies take the encoding of the
        // frame they answer.
        let decoded: Result<ClientMsg, String> = match msg {
            Inbound::Binary(b) => {
                if !self.hello {
                    self.enc = Encoding::Binary;
                }
                proto::decode_binary(&b, limit).map_err(|e| e.to_string()).or_else(|e| match proto::peek_hello_version(&b) {
                    // A Hello of another protocol version whose fields differ: answered
                    // `unsupported_version`, not `bad_request`.
                    Some(v) if v != proto::PROTOCOL_VERSION => {
                        Ok(ClientMsg::Hello(proto::Hello { protocol_version: v, token: None, encoding: Encoding::Binary, resume: None }))
                    }
                    _ => Err(e),
                })
            }
            Inbound::Text(t) => {
                if !self.hello {
                    self.enc = Encoding::Json;
                }
                proto::decode_json(&t, limit).map_err(|e| e.to_string())
            }
            Inbound::Close => {
                out.push(Effect::Close(close::NORMAL, "bye"));
                return Flow::Stop;
            }
            Inbound::Ping(p) => {
                // Each ping is answered (by the send task, which alone writes); a flood of them
                // still costs a write each, so they draw on the ping bucket.
                out.push(Effect::Pong(p));
                return self.ping_frame(now, out);
            }
            Inbound::Pong => return self.ping_frame(now, out),
        };
        let cmd = match decoded {
            Ok(c) => c,
            Err(e) => {
                self.reply_error(None, ErrorCode::BadRequest, &format!("malformed message: {e}"), None, out);
                return self.bad_message("too many malformed messages", out);
            }
        };
        let bucket = if matches!(cmd, ClientMsg::Hello(_) | ClientMsg::Ping(_)) { &mut self.pings } else { &mut self.commands };
        if !bucket.take(now) {
            self.reply_error(cmd.request_id(), ErrorCode::RateLimited, "too many commands; slow down", None, out);
            return self.rate_limited(out);
        }
        self.limited = 0;
        self.handle(env, cmd, out)
    }

    /// The outcome of an [`Effect::Apply`].
    pub(crate) fn applied<W>(&mut self, request_id: u32, result: Result<Outcome, CmdError>, out: &mut Out<W>) {
        let result = match result {
            Ok(Outcome::Spawned(ids)) => proto::Outcome::Spawned(proto::Spawned { agents: ids }),
            // The WebSocket commands answer `ok` for everything but a spawn.
            Ok(Outcome::Added(_) | Outcome::Removed(_) | Outcome::Done) => proto::Outcome::Ok(proto::Done {}),
            Err(e) => proto::Outcome::Error(e.body()),
        };
        self.reply(request_id, result, out);
    }

    /// A WebSocket ping or pong frame: drawn on the ping bucket.
    fn ping_frame<W>(&mut self, now: Instant, out: &mut Out<W>) -> Flow {
        if self.pings.take(now) { Flow::Continue } else { self.rate_limited(out) }
    }

    /// A message a bucket refused: counted, and the connection closed (4029) once refusals
    /// pile up far beyond the bursts.
    fn rate_limited<W>(&mut self, out: &mut Out<W>) -> Flow {
        self.limited += 1;
        out.push(Effect::RateLimited);
        let l = &self.rules.limits;
        if f64::from(self.limited) > 10.0 * l.command_burst.max(l.ping_burst) {
            out.push(Effect::Close(close::RATE, "too many requests"));
            return Flow::Stop;
        }
        Flow::Continue
    }

    /// A malformed message, or a command before Hello: the connection is closed (1008) past
    /// `limits.max_bad_messages`.
    fn bad_message<W>(&mut self, reason: &'static str, out: &mut Out<W>) -> Flow {
        self.bad += 1;
        if self.bad > self.rules.limits.max_bad_messages {
            out.push(Effect::Close(close::POLICY, reason));
            return Flow::Stop;
        }
        Flow::Continue
    }

    fn send<W>(&self, msg: &ServerMsg, out: &mut Out<W>) {
        out.push(Effect::Send(encode(msg, self.enc), self.enc));
    }

    fn reply<W>(&self, request_id: u32, result: proto::Outcome, out: &mut Out<W>) {
        self.send(&ServerMsg::CommandResult(proto::CommandResult { request_id, result }), out);
    }

    fn reply_error<W>(&self, request_id: Option<u32>, code: ErrorCode, message: &str, field: Option<String>, out: &mut Out<W>) {
        let body = proto::ErrorBody { code, message: message.to_string(), field };
        let msg = match request_id {
            Some(r) => ServerMsg::CommandResult(proto::CommandResult { request_id: r, result: proto::Outcome::Error(body) }),
            None => ServerMsg::Error(body),
        };
        self.send(&msg, out);
    }

    fn actor(&self) -> Actor {
        self.identity.as_ref().map_or_else(|| Actor { player: None, role: proto::Role::Spectator, team: None }, Actor::of)
    }

    /// The world, if it exists and the connection's token is good for it.
    fn world<E: Env>(&self, env: &E, name: &str) -> Result<E::World, proto::ErrorBody> {
        if let Some(Err(m)) = self.identity.as_ref().map(|i| i.check_world(name)) {
            return Err(proto::ErrorBody { code: ErrorCode::Unauthorized, message: m, field: Some("world".into()) });
        }
        env.world(name).map_err(|message| proto::ErrorBody { code: ErrorCode::UnknownWorld, message, field: Some("world".into()) })
    }

    /// Decides a message with `authz::decide`, for the session's identity and the world it
    /// names: the one authorization step, as for every REST route.
    fn authorize<E: Env>(&self, env: &E, cmd: &ClientMsg) -> Result<Grant, Denial> {
        let caller = self.identity.clone().map_or(Caller::Nobody, Caller::Known);
        let target = world_of(cmd).map(|name| Target { name, visibility: env.policy(name).visibility });
        crate::authz::decide(self.rules.mode, &caller, crate::authz::rule_of_msg(cmd.kind()), target)
    }

    /// Handles one message the buckets let through.
    fn handle<E: Env>(&mut self, env: &mut E, cmd: ClientMsg, out: &mut Out<E::World>) -> Flow {
        if let ClientMsg::Hello(h) = &cmd {
            return self.on_hello(env, h, out);
        }
        let Some(rid) = cmd.request_id() else { return Flow::Continue };
        if !self.hello {
            self.reply_error(Some(rid), ErrorCode::BadRequest, "send Hello first", None, out);
            return self.bad_message("too many messages before Hello", out);
        }
        if let Err(e) = cmd.validate() {
            self.reply_error(Some(rid), ErrorCode::InvalidField, &format!("invalid field `{}`: {}", e.field, e.reason), Some(e.field), out);
            return Flow::Continue;
        }
        if let Err(d) = self.authorize(env, &cmd) {
            self.reply_error(Some(rid), d.code, &d.message, world_of(&cmd).map(|_| "world".to_string()), out);
            return Flow::Continue;
        }
        match &cmd {
            ClientMsg::Hello(_) => Flow::Continue,
            ClientMsg::Ping(p) => {
                let server_tick = self.subscribed.first().map_or(0, |w| env.tick(*w));
                self.send(&ServerMsg::Pong(proto::Pong { request_id: p.request_id, server_tick }), out);
                Flow::Continue
            }
            ClientMsg::Subscribe(s) => self.subscribe(env, Some(rid), &s.world, &s.area, s.every_n_ticks, out),
            ClientMsg::Unsubscribe(u) => self.unsubscribe(env, rid, &u.world, out),
            ClientMsg::Spawn(proto::Spawn { world, .. })
            | ClientMsg::Despawn(proto::Despawn { world, .. })
            | ClientMsg::SetBehaviors(proto::SetBehaviors { world, .. })
            | ClientMsg::AddBehavior(proto::AddBehavior { world, .. })
            | ClientMsg::RemoveBehavior(proto::RemoveBehavior { world, .. })
            | ClientMsg::ResetBehaviors(proto::ResetBehaviors { world, .. })
            | ClientMsg::MoveTo(proto::MoveTo { world, .. }) => {
                match self.world(env, world).and_then(|w| Ok((w, commands_of(&cmd).map_err(|e| e.body())?))) {
                    Ok((world, commands)) => out.push(Effect::Apply { request_id: rid, world, commands, actor: self.actor() }),
                    Err(body) => self.reply(rid, proto::Outcome::Error(body), out),
                }
                Flow::Continue
            }
        }
    }

    /// Refuses the Hello with `code` and closes.
    fn refuse<W>(&self, code: ErrorCode, message: &str, field: &str, close_code: u16, reason: &'static str, out: &mut Out<W>) -> Flow {
        self.reply_error(None, code, message, Some(field.into()), out);
        out.push(Effect::Close(close_code, reason));
        Flow::Stop
    }

    fn on_hello<E: Env>(&mut self, env: &mut E, h: &proto::Hello, out: &mut Out<E::World>) -> Flow {
        if h.protocol_version != proto::PROTOCOL_VERSION {
            let message = format!("protocol version {} is not supported; this server speaks {}", h.protocol_version, proto::PROTOCOL_VERSION);
            return self.refuse(ErrorCode::UnsupportedVersion, &message, "protocol_version", close::POLICY, "unsupported protocol version", out);
        }
        if self.hello {
            // A later Hello: the same session, welcomed again (its token and resume are ignored).
            self.welcome(env, out);
            return Flow::Continue;
        }
        // Who: the token first (none: anonymous in dev mode), so that a resume with a bad token
        // or another player's leaves the session alone; then a resumed session (a resume
        // without a token takes the session's identity), or a new one.
        let presented = match (h.token.as_deref(), h.resume.is_some()) {
            (None, true) => None,
            (token, _) => match env.authenticate(token) {
                Ok(id) => Some(id),
                Err(e) => return self.refuse(ErrorCode::Unauthorized, &e, "token", close::UNAUTHORIZED, "unauthorized", out),
            },
        };
        if h.resume.is_none() && presented.is_none() {
            // Without a resume the token was authenticated above.
            return Flow::Stop;
        }
        let Some(joined) = env.join(h.resume.as_deref(), presented.as_ref()) else { return Flow::Stop };
        let Joined { identity, subs: restore, token, pending, awaited } = match joined {
            Ok(j) => j,
            Err(e) => return self.refuse_join(&e, out),
        };
        tracing::debug!(player = %identity.player, role = %identity.role, resumed = h.resume.is_some(), "hello");
        self.enc = if self.url_enc == Encoding::Json { Encoding::Json } else { h.encoding };
        out.push(Effect::Viewer(Viewer::of(&identity), self.enc));
        self.identity = Some(identity);
        self.resume_token = Some(token);
        self.hello = true;
        self.welcome(env, out);
        // A resumed session gets its subscriptions back (keyframes of every cell), then the
        // events about its agents it missed.
        for (world, area, span) in restore {
            if self.world(env, &world).is_ok() && self.subscribe(env, None, &world, &area, span, out) == Flow::Stop {
                return Flow::Stop;
            }
        }
        out.extend(awaited.map(Effect::Restored));
        out.extend(pending.into_iter().map(Effect::Direct));
        Flow::Continue
    }

    /// A join or resume the players registry refused.
    fn refuse_join<W>(&self, e: &JoinError, out: &mut Out<W>) -> Flow {
        let m = e.to_string();
        match e {
            JoinError::BadResume | JoinError::SessionInUse | JoinError::SessionExpired | JoinError::OtherPlayer => {
                self.refuse(ErrorCode::Unauthorized, &m, "resume", close::UNAUTHORIZED, "unauthorized", out)
            }
            JoinError::TooManyConnections(..) => self.refuse(ErrorCode::QuotaExceeded, &m, "token", close::UNAUTHORIZED, "too many connections", out),
            JoinError::TooManyPlayerSessions(..) => self.refuse(ErrorCode::QuotaExceeded, &m, "token", close::UNAUTHORIZED, "too many sessions", out),
            JoinError::TooManySessions(..) => self.refuse(ErrorCode::Busy, &m, "token", close::POLICY, "too many sessions", out),
        }
    }

    fn welcome<E: Env>(&self, env: &E, out: &mut Out<E::World>) {
        let Some(who) = &self.identity else { return };
        let worlds: Vec<proto::WorldInfo> = env.worlds().into_iter().filter(|w| who.check_world(&w.name).is_ok()).collect();
        self.send(
            &ServerMsg::Welcome(proto::Welcome {
                protocol_version: proto::PROTOCOL_VERSION,
                // The same fixed quantization every world publishes with (see runtime::world).
                quantization: proto::Quantization::default(),
                worlds,
                max_message_bytes: self.rules.limits.max_message_bytes as u32,
                player_id: who.player.clone(),
                role: who.role,
                resume_token: self.resume_token.clone().unwrap_or_default(),
                session_grace_secs: self.rules.session_grace_secs,
            }),
            out,
        );
    }

    fn unsubscribe<E: Env>(&mut self, env: &E, rid: u32, world: &str, out: &mut Out<E::World>) -> Flow {
        let info = match self.world(env, world) {
            Ok(w) => env.info(&w),
            Err(b) => {
                self.reply(rid, proto::Outcome::Error(b), out);
                return Flow::Continue;
            }
        };
        self.subscribed.retain(|x| *x != info.id);
        self.subs.retain(|(n, _, _)| *n != info.name);
        let result = encode(&ServerMsg::CommandResult(proto::CommandResult { request_id: rid, result: proto::Outcome::Ok(proto::Done {}) }), self.enc);
        out.push(Effect::Unsubscribe { world: info.id, result });
        Flow::Continue
    }

    /// Subscribes (`rid`: answer the command; none for a subscription a resume restores).
    fn subscribe<E: Env>(&mut self, env: &E, rid: Option<u32>, world: &str, area: &proto::Area, span: u32, out: &mut Out<E::World>) -> Flow {
        let w = match self.world(env, world) {
            Ok(w) => w,
            Err(b) => return self.fail(rid, b, out),
        };
        let info = env.info(&w);
        match self.admit(env, &w, &info, area, span) {
            Ok(cells) => {
                if !self.subscribed.contains(&info.id) {
                    self.subscribed.push(info.id);
                }
                self.subs.retain(|(n, _, _)| *n != info.name);
                self.subs.push((info.name.clone(), area.clone(), span));
                out.push(Effect::Subscribe { world: w, cells, span, request_id: rid });
                Flow::Continue
            }
            Err(b) => self.fail(rid, b, out),
        }
    }

    /// The cells of a subscription of `area` at rate `span` in world `w`, or why it is refused.
    fn admit<E: Env>(&self, env: &E, w: &E::World, info: &proto::WorldInfo, area: &proto::Area, span: u32) -> Result<Vec<u32>, proto::ErrorBody> {
        let fail = |code: ErrorCode, message: String, field: &str| Err(proto::ErrorBody { code, message, field: Some(field.into()) });
        if !self.subscribed.contains(&info.id) && self.subscribed.len() >= self.rules.limits.max_subscriptions {
            return fail(ErrorCode::InvalidField, "too many subscriptions".into(), "world");
        }
        let max = env.max_rate(w);
        if span == 0 || span > max {
            return fail(ErrorCode::InvalidField, format!("every_n_ticks must be between 1 and {max} (got {span})"), "every_n_ticks");
        }
        let cells = info.cells_in(area);
        let policy = env.policy(&info.name);
        if self.identity.as_ref().is_some_and(|i| i.role == proto::Role::Player) {
            if policy.visibility == Visibility::SpectatorsOnlyWholeWorld && matches!(area, proto::Area::WholeWorld(_)) {
                return fail(ErrorCode::Forbidden, format!("in world `{}` only spectators subscribe to whole_world; subscribe to a rect", info.name), "area");
            }
            // Under `owned` visibility the cells delivered are narrowed to what the player sees.
            if policy.visibility != Visibility::Owned && cells.len() > policy.max_subscription_cells {
                let message = format!("a subscription covers at most {} AOI cells in world `{}` (this one {})", policy.max_subscription_cells, info.name, cells.len());
                return fail(ErrorCode::QuotaExceeded, message, "area");
            }
        }
        Ok(cells)
    }

    /// Answers a failed subscribe (with a request id) or logs a failed restore.
    fn fail<W>(&self, rid: Option<u32>, body: proto::ErrorBody, out: &mut Out<W>) -> Flow {
        match rid {
            Some(r) => self.reply(r, proto::Outcome::Error(body), out),
            None => tracing::debug!("subscription not restored: {}", body.message),
        }
        Flow::Continue
    }
}

/// The sim commands of a world command (see [`crate::convert::world_commands`]).
fn commands_of(cmd: &ClientMsg) -> Result<Vec<Command>, CmdError> {
    match crate::convert::world_commands(cmd) {
        Some(commands) => commands.map_err(CmdError::Sim),
        None => Err(CmdError::Invalid("not a world command".into())),
    }
}

/// The world a message names, if any.
fn world_of(cmd: &ClientMsg) -> Option<&str> {
    match cmd {
        ClientMsg::Hello(_) | ClientMsg::Ping(_) => None,
        ClientMsg::Subscribe(m) => Some(&m.world),
        ClientMsg::Unsubscribe(m) => Some(&m.world),
        ClientMsg::MoveTo(m) => Some(&m.world),
        ClientMsg::SetBehaviors(m) => Some(&m.world),
        ClientMsg::AddBehavior(m) => Some(&m.world),
        ClientMsg::RemoveBehavior(m) => Some(&m.world),
        ClientMsg::ResetBehaviors(m) => Some(&m.world),
        ClientMsg::Spawn(m) => Some(&m.world),
        ClientMsg::Despawn(m) => Some(&m.world),
    }
}

#[cfg(test)]
mod tests {
    //! Every rule of the protocol, fed by hand: no socket, no runtime, time as an argument.

    use std::time::{Duration, Instant};

    use steer_proto::{self as proto, ErrorCode, Role, ServerMsg, close};

    use super::*;
    use crate::sim::world::Outcome;

    /// A server of two worlds (`arena`, id 0; `yard`, id 1) and a few tokens.
    struct FakeEnv {
        worlds: Vec<proto::WorldInfo>,
        policy: WorldPolicy,
        /// The connection's registration was used.
        joined: bool,
        /// A dropped session that can be resumed with token `r1`.
        dropped: Option<(Identity, Vec<Kept>)>,
        /// The dropped session is one a world that arrived by a handoff waits for.
        awaited: Option<Awaited>,
        /// The server keeps as many sessions as it may.
        full: bool,
    }

    fn player(name: &str) -> Identity {
        Identity { player: name.into(), role: Role::Player, team: None, worlds: None, expires: None }
    }

    impl FakeEnv {
        fn new() -> Self {
            let bounds = proto::Rect { min_x: 0.0, min_y: 0.0, max_x: 100.0, max_y: 50.0 };
            let worlds = vec![proto::WorldInfo::new(0, "arena", bounds, 10.0, 20.0), proto::WorldInfo::new(1, "yard", bounds, 25.0, 20.0)];
            FakeEnv { worlds, policy: WorldPolicy::default(), joined: false, dropped: None, awaited: None, full: false }
        }
    }

    impl Env for FakeEnv {
        type World = u32;

        fn authenticate(&self, token: Option<&str>) -> Result<Identity, String> {
            match token {
                None => Ok(player("anonymous-1")),
                Some("admin") => Ok(Identity::admin()),
                Some("p1") => Ok(player("p1")),
                Some(_) => Err("invalid token".into()),
            }
        }

        fn join(&mut self, resume: Option<&str>, presented: Option<&Identity>) -> Option<Result<Joined, JoinError>> {
            if std::mem::replace(&mut self.joined, true) {
                return None;
            }
            let joined = |identity: Identity, subs, awaited| Joined { identity, subs, token: "t-new".into(), pending: Vec::new(), awaited };
            Some(match (resume, presented) {
                (Some("r1"), p) => match self.dropped.take() {
                    Some((id, _)) if p.is_some_and(|p| p.player != id.player) => Err(JoinError::OtherPlayer),
                    Some((id, subs)) => Ok(joined(id, subs, self.awaited.take())),
                    None => Err(JoinError::BadResume),
                },
                (Some(_), _) => Err(JoinError::BadResume),
                (None, _) if self.full => Err(JoinError::TooManySessions(1)),
                (None, Some(id)) => Ok(joined(id.clone(), Vec::new(), None)),
                (None, None) => return None,
            })
        }

        fn world(&self, name: &str) -> Result<u32, String> {
            self.worlds.iter().find(|w| w.name == name).map(|w| w.id).ok_or_else(|| format!("unknown world `{name}`"))
        }

        fn info(&self, world: &u32) -> proto::WorldInfo {
            self.worlds[*world as usize].clone()
        }

        fn max_rate(&self, _: &u32) -> u32 {
            20
        }

        fn policy(&self, _: &str) -> &WorldPolicy {
            &self.policy
        }

        fn worlds(&self) -> Vec<proto::WorldInfo> {
            self.worlds.clone()
        }

        fn tick(&self, world: u32) -> u64 {
            1000 + u64::from(world)
        }
    }

    fn rules() -> Rules {
        Rules { mode: Mode::Dev, limits: LimitSettings::default(), session_grace_secs: 30 }
    }

    /// Feeds one text message at `now`.
    fn text(s: &mut Session, env: &mut FakeEnv, json: &str, now: Instant) -> (Flow, Vec<Effect<u32>>) {
        let mut out = Vec::new();
        let flow = s.on_message(env, Inbound::Text(json.into()), now, &mut out);
        (flow, out)
    }

    /// The messages sent, decoded.
    fn sent(out: &[Effect<u32>]) -> Vec<ServerMsg> {
        out.iter()
            .filter_map(|e| match e {
                Effect::Send(b, Encoding::Json) => Some(proto::decode_json(std::str::from_utf8(b).expect("utf-8"), 1 << 20).expect("a server message")),
                Effect::Send(b, Encoding::Binary) => Some(proto::decode_binary(b, 1 << 20).expect("a server message")),
                _ => None,
            })
            .collect()
    }

    fn closed(out: &[Effect<u32>]) -> Option<(u16, &'static str)> {
        out.iter().find_map(|e| match e {
            Effect::Close(c, r) => Some((*c, *r)),
            _ => None,
        })
    }

    /// The outcome of the command result for `rid`.
    fn result_of(out: &[Effect<u32>], rid: u32) -> proto::Outcome {
        sent(out)
            .into_iter()
            .find_map(|m| match m {
                ServerMsg::CommandResult(r) if r.request_id == rid => Some(r.result),
                _ => None,
            })
            .expect("a command result")
    }

    fn error_code(o: &proto::Outcome) -> Option<ErrorCode> {
        match o {
            proto::Outcome::Error(b) => Some(b.code),
            _ => None,
        }
    }

    fn hello(token: Option<&str>, resume: Option<&str>) -> String {
        let token = token.map_or("null".into(), |t| format!("\"{t}\""));
        let resume = resume.map_or("null".into(), |t| format!("\"{t}\""));
        format!(r#"{{"type":"hello","protocol_version":{},"token":{token},"encoding":"json","resume":{resume}}}"#, proto::PROTOCOL_VERSION)
    }

    /// A session welcomed as the admin at `t0`.
    fn admin(env: &mut FakeEnv, t0: Instant) -> Session {
        let mut s = Session::new(rules(), Encoding::Binary, t0);
        let (flow, _) = text(&mut s, env, &hello(Some("admin"), None), t0);
        assert_eq!(flow, Flow::Continue);
        assert!(s.welcomed());
        s
    }

    #[test]
    fn hello_welcomes_with_the_worlds_the_token_may_use_and_sets_the_encoding() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Binary, t0);
        assert!(!s.welcomed());
        let (flow, out) = text(&mut s, &mut env, &hello(Some("p1"), None), t0);
        assert_eq!(flow, Flow::Continue);
        assert!(matches!(&out[0], Effect::Viewer(v, Encoding::Json) if !v.sees_all()));
        let msgs = sent(&out);
        let [ServerMsg::Welcome(w)] = msgs.as_slice() else { panic!("one Welcome, got {msgs:?}") };
        assert_eq!((w.player_id.as_str(), w.role, w.resume_token.as_str(), w.session_grace_secs), ("p1", Role::Player, "t-new", 30));
        assert_eq!(w.worlds.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), ["arena", "yard"]);
        assert_eq!(w.max_message_bytes as usize, LimitSettings::default().max_message_bytes);
        let (who, token, subs) = s.resumable().expect("a session to keep");
        assert_eq!((who.player.as_str(), token, subs.len()), ("p1", "t-new", 0));
        // A second Hello welcomes the same session again, joining nothing.
        let (flow, out) = text(&mut s, &mut env, &hello(Some("admin"), None), t0);
        assert_eq!(flow, Flow::Continue);
        assert!(matches!(sent(&out).as_slice(), [ServerMsg::Welcome(w)] if w.player_id == "p1"));
    }

    #[test]
    fn hello_of_another_protocol_version_is_refused_and_closed_1008() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Binary, t0);
        let json = format!(r#"{{"type":"hello","protocol_version":{},"token":null}}"#, proto::PROTOCOL_VERSION + 1);
        let (flow, out) = text(&mut s, &mut env, &json, t0);
        assert_eq!(flow, Flow::Stop);
        assert!(matches!(sent(&out).as_slice(), [ServerMsg::Error(b)] if b.code == ErrorCode::UnsupportedVersion && b.field.as_deref() == Some("protocol_version")));
        assert_eq!(closed(&out), Some((close::POLICY, "unsupported protocol version")));
    }

    #[test]
    fn hello_with_a_bad_token_is_closed_4001() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Json, t0);
        let (flow, out) = text(&mut s, &mut env, &hello(Some("forged"), None), t0);
        assert_eq!(flow, Flow::Stop);
        assert!(matches!(sent(&out).as_slice(), [ServerMsg::Error(b)] if b.code == ErrorCode::Unauthorized && b.field.as_deref() == Some("token")));
        assert_eq!(closed(&out), Some((close::UNAUTHORIZED, "unauthorized")));
        assert!(!env.joined, "a refused token leaves the players registry alone");
    }

    #[test]
    fn resume_restores_the_subscriptions_and_a_bad_resume_is_closed_4001() {
        let mut env = FakeEnv::new();
        env.dropped = Some((player("p1"), vec![("arena".into(), proto::Area::WholeWorld(proto::WholeWorld {}), 2), ("gone".into(), proto::Area::WholeWorld(proto::WholeWorld {}), 1)]));
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Json, t0);
        let (flow, out) = text(&mut s, &mut env, &hello(None, Some("r1")), t0);
        assert_eq!(flow, Flow::Continue);
        let restored: Vec<_> = out.iter().filter_map(|e| if let Effect::Subscribe { world, cells, span, request_id } = e { Some((*world, cells.len(), *span, request_id.is_none())) } else { None }).collect();
        // The world that is gone is skipped; a restored subscription answers no command.
        assert_eq!(restored, [(0, 50, 2, true)]);
        assert_eq!(s.resumable().map(|(_, _, subs)| subs.len()), Some(1));
        assert!(!out.iter().any(|e| matches!(e, Effect::Restored(_))), "no world waits for this session");

        let mut env = FakeEnv::new();
        let mut s = Session::new(rules(), Encoding::Json, t0);
        let (flow, out) = text(&mut s, &mut env, &hello(None, Some("stale")), t0);
        assert_eq!(flow, Flow::Stop);
        assert!(matches!(sent(&out).as_slice(), [ServerMsg::Error(b)] if b.field.as_deref() == Some("resume")));
        assert_eq!(closed(&out), Some((close::UNAUTHORIZED, "unauthorized")));
    }

    /// A session a world that arrived by a handoff waits for: the world may tick only once
    /// the restored subscriptions are in place, so `Restored` comes after every `Subscribe`
    /// (the send task handles them in order) and holds the world's count until it is dropped.
    #[test]
    fn a_resume_a_world_waits_for_releases_it_after_the_restored_subscriptions() {
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut env = FakeEnv::new();
        env.dropped = Some((player("p1"), vec![("arena".into(), proto::Area::WholeWorld(proto::WholeWorld {}), 1), ("yard".into(), proto::Area::WholeWorld(proto::WholeWorld {}), 1)]));
        env.awaited = Some(Awaited::counted_in(&count));
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Json, t0);
        let (flow, mut out) = text(&mut s, &mut env, &hello(None, Some("r1")), t0);
        assert_eq!(flow, Flow::Continue);
        let last_subscribe = out.iter().rposition(|e| matches!(e, Effect::Subscribe { .. })).expect("restored subscriptions");
        let restored = out.iter().position(|e| matches!(e, Effect::Restored(_))).expect("the release");
        assert!(restored > last_subscribe, "{out:?}");
        assert_eq!(out.iter().filter(|e| matches!(e, Effect::Subscribe { .. })).count(), 2);
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 1, "held until the send task drops it");
        out.clear();
        assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    #[test]
    fn hello_on_a_full_server_is_busy_and_closed_1008() {
        let mut env = FakeEnv::new();
        env.full = true;
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Json, t0);
        let (flow, out) = text(&mut s, &mut env, &hello(None, None), t0);
        assert_eq!(flow, Flow::Stop);
        assert!(matches!(sent(&out).as_slice(), [ServerMsg::Error(b)] if b.code == ErrorCode::Busy));
        assert_eq!(closed(&out), Some((close::POLICY, "too many sessions")));
    }

    #[test]
    fn commands_before_hello_are_refused_and_past_the_budget_closed_1008() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Json, t0);
        let max = LimitSettings::default().max_bad_messages;
        for i in 0..max {
            let (flow, out) = text(&mut s, &mut env, &format!(r#"{{"type":"ping","request_id":{i}}}"#), t0 + Duration::from_secs(u64::from(i)));
            assert_eq!(flow, Flow::Continue);
            assert_eq!(error_code(&result_of(&out, i)), Some(ErrorCode::BadRequest));
        }
        let (flow, out) = text(&mut s, &mut env, r#"{"type":"ping","request_id":99}"#, t0 + Duration::from_secs(100));
        assert_eq!(flow, Flow::Stop);
        assert_eq!(closed(&out), Some((close::POLICY, "too many messages before Hello")));
    }

    #[test]
    fn malformed_messages_are_answered_and_past_the_budget_closed_1008() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let max = LimitSettings::default().max_bad_messages;
        for _ in 0..max {
            let (flow, out) = text(&mut s, &mut env, r#"{"type":"ping","#, t0);
            assert_eq!(flow, Flow::Continue);
            assert!(matches!(sent(&out).as_slice(), [ServerMsg::Error(b)] if b.code == ErrorCode::BadRequest && b.message.starts_with("malformed message")));
        }
        let mut out = Vec::new();
        assert_eq!(s.on_message(&mut env, Inbound::Binary(bytes::Bytes::from_static(&[0xff, 0xff])), t0, &mut out), Flow::Stop);
        assert_eq!(closed(&out), Some((close::POLICY, "too many malformed messages")));
    }

    #[test]
    fn invalid_fields_are_named() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let (_, out) = text(&mut s, &mut env, r#"{"type":"move_to","request_id":3,"world":"arena","agents":[1],"target":{"x":1e39,"y":0}}"#, t0);
        let o = result_of(&out, 3);
        assert_eq!(error_code(&o), Some(ErrorCode::InvalidField), "{o:?}");
    }

    #[test]
    fn subscribe_starts_a_subscription_and_answers_with_its_cells() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let (flow, out) = text(&mut s, &mut env, r#"{"type":"subscribe","request_id":5,"world":"yard","area":{"type":"rect","min_x":0,"min_y":0,"max_x":30,"max_y":10},"every_n_ticks":3}"#, t0);
        assert_eq!(flow, Flow::Continue);
        // The send task answers it (with the group table as the subscription starts).
        let [Effect::Subscribe { world: 1, cells, span: 3, request_id: Some(5) }] = out.as_slice() else { panic!("one subscription, got {out:?}") };
        // 25-unit cells: columns 0..=1, row 0.
        assert_eq!(cells, &[0, 1]);
        // A rate beyond the world's and an unknown world are refused, naming the field.
        let (_, out) = text(&mut s, &mut env, r#"{"type":"subscribe","request_id":6,"world":"yard","area":{"type":"whole_world"},"every_n_ticks":21}"#, t0);
        assert!(matches!(result_of(&out, 6), proto::Outcome::Error(b) if b.field.as_deref() == Some("every_n_ticks")));
        let (_, out) = text(&mut s, &mut env, r#"{"type":"subscribe","request_id":7,"world":"moon","area":{"type":"whole_world"}}"#, t0);
        assert_eq!(error_code(&result_of(&out, 7)), Some(ErrorCode::UnknownWorld));
    }

    #[test]
    fn subscriptions_are_bounded_and_player_quotas_apply() {
        let mut env = FakeEnv::new();
        env.worlds = (0..10).map(|i| proto::WorldInfo::new(i, format!("w{i}"), proto::Rect { min_x: 0.0, min_y: 0.0, max_x: 100.0, max_y: 100.0 }, 1.0, 20.0)).collect();
        env.policy.max_subscription_cells = 4;
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Json, t0);
        let _ = text(&mut s, &mut env, &hello(Some("p1"), None), t0);
        let (_, out) = text(&mut s, &mut env, r#"{"type":"subscribe","request_id":1,"world":"w0","area":{"type":"whole_world"}}"#, t0);
        assert_eq!(error_code(&result_of(&out, 1)), Some(ErrorCode::QuotaExceeded));
        let max = LimitSettings::default().max_subscriptions as u32;
        for i in 0..max {
            let (_, out) = text(&mut s, &mut env, &format!(r#"{{"type":"subscribe","request_id":{},"world":"w{i}","area":{{"type":"rect","min_x":0,"min_y":0,"max_x":1,"max_y":1}}}}"#, 10 + i), t0);
            assert!(matches!(result_of_effects(&out), Some(4)), "{out:?}");
        }
        let (_, out) = text(&mut s, &mut env, &format!(r#"{{"type":"subscribe","request_id":99,"world":"w{max}","area":{{"type":"rect","min_x":0,"min_y":0,"max_x":1,"max_y":1}}}}"#), t0);
        assert!(matches!(result_of(&out, 99), proto::Outcome::Error(b) if b.message == "too many subscriptions"));
    }

    /// The cells of the one subscription in `out`.
    fn result_of_effects(out: &[Effect<u32>]) -> Option<usize> {
        out.iter().find_map(|e| if let Effect::Subscribe { cells, .. } = e { Some(cells.len()) } else { None })
    }

    #[test]
    fn unsubscribe_stops_the_subscription() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let _ = text(&mut s, &mut env, r#"{"type":"subscribe","request_id":1,"world":"yard","area":{"type":"whole_world"}}"#, t0);
        let (flow, out) = text(&mut s, &mut env, r#"{"type":"unsubscribe","request_id":2,"world":"yard"}"#, t0);
        assert_eq!(flow, Flow::Continue);
        let [Effect::Unsubscribe { world: 1, result }] = out.as_slice() else { panic!("one unsubscribe, got {out:?}") };
        assert!(result.starts_with(br#"{"type":"command_result","request_id":2"#));
        assert_eq!(s.resumable().map(|(_, _, subs)| subs.len()), Some(0));
    }

    #[test]
    fn ping_answers_the_tick_of_the_first_subscribed_world() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let (_, out) = text(&mut s, &mut env, r#"{"type":"ping","request_id":8}"#, t0);
        assert!(matches!(sent(&out).as_slice(), [ServerMsg::Pong(p)] if p.request_id == 8 && p.server_tick == 0));
        let _ = text(&mut s, &mut env, r#"{"type":"subscribe","request_id":1,"world":"yard","area":{"type":"whole_world"}}"#, t0);
        let (_, out) = text(&mut s, &mut env, r#"{"type":"ping","request_id":9}"#, t0);
        assert!(matches!(sent(&out).as_slice(), [ServerMsg::Pong(p)] if p.request_id == 9 && p.server_tick == 1001));
    }

    #[test]
    fn every_world_command_is_applied_in_the_world_it_names() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let cases = [
            (1, r#"{"type":"move_to","request_id":1,"world":"yard","agents":[1,2],"target":{"x":5,"y":5},"stopping_distance":0.5}"#),
            (2, r#"{"type":"set_behaviors","request_id":2,"world":"yard","agents":[1],"behaviors":[{"behavior":{"type":"wander"}}]}"#),
            (3, r#"{"type":"add_behavior","request_id":3,"world":"yard","agents":[1],"entry":{"behavior":{"type":"wander"},"weight":2}}"#),
            (4, r#"{"type":"remove_behavior","request_id":4,"world":"yard","agents":[1],"kind":"wander"}"#),
            (5, r#"{"type":"reset_behaviors","request_id":5,"world":"yard","agents":[1]}"#),
            (6, r#"{"type":"spawn","request_id":6,"world":"yard","group":"blue","count":3,"area":{"type":"circle","x":10,"y":10,"radius":5}}"#),
            (7, r#"{"type":"despawn","request_id":7,"world":"yard","agents":[1,2]}"#),
        ];
        for (rid, json) in cases {
            let (flow, out) = text(&mut s, &mut env, json, t0);
            assert_eq!(flow, Flow::Continue);
            let [Effect::Apply { request_id, world: 1, commands, actor }] = out.as_slice() else { panic!("{json}: one command to apply, got {out:?}") };
            assert_eq!(*request_id, rid);
            assert!(!commands.is_empty(), "{json}");
            assert!(actor.is_admin());
        }
        // A world that does not exist is answered without applying anything.
        let (_, out) = text(&mut s, &mut env, r#"{"type":"despawn","request_id":8,"world":"moon","agents":[1]}"#, t0);
        assert_eq!(error_code(&result_of(&out, 8)), Some(ErrorCode::UnknownWorld));
        assert!(!out.iter().any(|e| matches!(e, Effect::Apply { .. })));
    }

    #[test]
    fn an_applied_command_is_answered_with_its_outcome() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let mut out = Vec::new();
        s.applied::<u32>(6, Ok(Outcome::Spawned(vec![4, 5])), &mut out);
        assert!(matches!(result_of(&out, 6), proto::Outcome::Spawned(sp) if sp.agents == [4, 5]));
        let mut out = Vec::new();
        s.applied::<u32>(7, Ok(Outcome::Removed(2)), &mut out);
        assert!(matches!(result_of(&out, 7), proto::Outcome::Ok(_)));
        let mut out = Vec::new();
        s.applied::<u32>(8, Err(CmdError::Busy("yard".into())), &mut out);
        assert_eq!(error_code(&result_of(&out, 8)), Some(ErrorCode::Busy));
    }

    #[test]
    fn commands_beyond_the_burst_are_rate_limited_refilled_and_a_flood_closed_4029() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let l = LimitSettings::default();
        let cmd = r#"{"type":"reset_behaviors","request_id":1,"world":"yard","agents":[1]}"#;
        for _ in 0..l.command_burst as u32 {
            let (_, out) = text(&mut s, &mut env, cmd, t0);
            assert!(matches!(out.as_slice(), [Effect::Apply { .. }]));
        }
        let (flow, out) = text(&mut s, &mut env, cmd, t0);
        assert_eq!(flow, Flow::Continue);
        assert_eq!(error_code(&result_of(&out, 1)), Some(ErrorCode::RateLimited));
        assert!(out.iter().any(|e| matches!(e, Effect::RateLimited)));
        // Pings have a bucket of their own.
        let (_, out) = text(&mut s, &mut env, r#"{"type":"ping","request_id":2}"#, t0);
        assert!(matches!(sent(&out).as_slice(), [ServerMsg::Pong(_)]));
        // One command's worth of time later, one more goes through.
        let later = t0 + Duration::from_secs_f64(1.0 / l.commands_per_sec);
        let (_, out) = text(&mut s, &mut env, cmd, later);
        assert!(matches!(out.as_slice(), [Effect::Apply { .. }]));
        // Refused more than 10 × the burst in a row: closed.
        let flood = 10 * l.command_burst.max(l.ping_burst) as u32;
        for _ in 0..flood {
            assert_eq!(text(&mut s, &mut env, cmd, later).0, Flow::Continue);
        }
        let (flow, out) = text(&mut s, &mut env, cmd, later);
        assert_eq!(flow, Flow::Stop);
        assert_eq!(closed(&out), Some((close::RATE, "too many requests")));
    }

    #[test]
    fn websocket_pings_are_answered_and_draw_on_the_ping_bucket() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let mut out = Vec::new();
        assert_eq!(s.on_message(&mut env, Inbound::Ping(bytes::Bytes::from_static(b"hi")), t0, &mut out), Flow::Continue);
        assert!(matches!(out.as_slice(), [Effect::Pong(p)] if p.as_ref() == b"hi"));
        // The Hello took one token; the ping above another.
        let l = LimitSettings::default();
        let mut out = Vec::new();
        for _ in 0..(l.ping_burst as u32 - 2) {
            assert_eq!(s.on_message(&mut env, Inbound::Pong, t0, &mut out), Flow::Continue);
        }
        assert!(!out.iter().any(|e| matches!(e, Effect::RateLimited)));
        assert_eq!(s.on_message(&mut env, Inbound::Pong, t0, &mut out), Flow::Continue);
        assert!(matches!(out.last(), Some(Effect::RateLimited)));
    }

    #[test]
    fn a_close_frame_is_answered_1000() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = admin(&mut env, t0);
        let mut out = Vec::new();
        assert_eq!(s.on_message(&mut env, Inbound::Close, t0, &mut out), Flow::Stop);
        assert_eq!(closed(&out), Some((close::NORMAL, "bye")));
    }

    #[test]
    fn read_faults_close_1009_when_too_big_and_1008_otherwise() {
        let mut s = Session::new(rules(), Encoding::Binary, Instant::now());
        let mut out: Vec<Effect<u32>> = Vec::new();
        assert_eq!(s.read_fault(ReadFault::TooBig, &mut out), Flow::Stop);
        assert_eq!(closed(&out), Some((close::TOO_BIG, "message too big")));
        let mut out: Vec<Effect<u32>> = Vec::new();
        assert_eq!(s.read_fault(ReadFault::Protocol, &mut out), Flow::Stop);
        assert_eq!(closed(&out), Some((close::POLICY, "protocol error")));
    }

    #[test]
    fn a_kicked_player_is_closed_4003() {
        let mut env = FakeEnv::new();
        let mut s = admin(&mut env, Instant::now());
        let mut out: Vec<Effect<u32>> = Vec::new();
        assert_eq!(s.kicked(&mut out), Flow::Stop);
        assert_eq!(closed(&out), Some((close::KICKED, "kicked")));
    }

    #[test]
    fn no_hello_in_time_is_closed_1008_but_a_welcomed_session_stays() {
        let mut s = Session::new(rules(), Encoding::Binary, Instant::now());
        assert_eq!(s.hello_timeout(), Duration::from_millis(LimitSettings::default().hello_timeout_ms));
        let mut out: Vec<Effect<u32>> = Vec::new();
        assert_eq!(s.hello_timed_out(&mut out), Flow::Stop);
        assert_eq!(closed(&out), Some((close::POLICY, "no Hello in time")));
        let mut env = FakeEnv::new();
        let mut s = admin(&mut env, Instant::now());
        let mut out: Vec<Effect<u32>> = Vec::new();
        assert_eq!(s.hello_timed_out(&mut out), Flow::Continue);
        assert!(out.is_empty());
    }

    #[test]
    fn replies_before_welcome_take_the_encoding_of_the_frame_they_answer() {
        let mut env = FakeEnv::new();
        let t0 = Instant::now();
        let mut s = Session::new(rules(), Encoding::Binary, t0);
        let (_, out) = text(&mut s, &mut env, r#"{"type":"ping","request_id":1}"#, t0);
        assert!(matches!(out.as_slice(), [Effect::Send(_, Encoding::Json)]));
        let ping = proto::encode_binary(&ClientMsg::Ping(proto::Ping { request_id: 2 })).expect("encodes");
        let mut out = Vec::new();
        let _ = s.on_message(&mut env, Inbound::Binary(ping.into()), t0, &mut out);
        assert!(matches!(out.as_slice(), [Effect::Send(_, Encoding::Binary)]));
    }
}
