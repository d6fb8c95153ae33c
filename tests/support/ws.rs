use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use steer_proto::{
    self as proto, ClientMsg, ClientState, Encoding, Event, Outcome, PROTOCOL_VERSION, ServerMsg,
    Welcome,
};

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::*;

// ------------------------------------------------------------------------------- WebSocket

/// What [`Ws::next`] saw.
#[derive(Debug)]
pub enum Next {
    /// A decoded server message.
    Msg(ServerMsg),
    /// The server closed, with this close code (`None`: no close frame, or a dropped socket).
    Closed(Option<u16>),
    /// Nothing within the wait.
    Timeout,
}

/// A WebSocket client that applies every keyframe and delta to a [`ClientState`] (a chain
/// break or checksum mismatch panics: the server must never send one) and records events.
pub struct Ws {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Encoding of this connection.
    pub enc: Encoding,
    /// The client's view.
    pub state: ClientState,
    /// `Welcome`, once received.
    pub welcome: Option<Welcome>,
    /// Events received.
    pub events: Vec<Event>,
    /// `Error` messages received.
    pub errors: Vec<proto::ErrorBody>,
    /// Keyframes received (messages, or entries of `cells` messages).
    pub keyframes: u64,
    /// Deltas received (messages, or entries of `cells` messages).
    pub deltas: u64,
    /// `cells` messages received.
    pub cells_messages: u64,
    /// Highest delta tick seen.
    pub last_tick: u64,
    /// Bytes of server messages received.
    pub bytes: u64,
    /// Server messages that came as text (JSON) and as binary frames.
    pub text_frames: u64,
    pub binary_frames: u64,
    /// Server messages received (several per frame when batched).
    pub messages: u64,
    /// Opened with `?batch=1`: binary frames carry one or more messages.
    pub batch: bool,
    /// Messages of a batched frame not returned yet.
    pending: std::collections::VecDeque<ServerMsg>,
    next_id: u32,
}

impl Ws {
    /// Connects to `/ws` (binary), no `Hello` yet.
    pub async fn connect(addr: SocketAddr) -> Ws {
        Ws::connect_with(addr, None, Encoding::Binary)
            .await
            .expect("WebSocket connect")
    }

    /// Connects to `/ws?batch=1` (batched binary frames) and says `Hello`.
    pub async fn connect_batched(addr: SocketAddr) -> Ws {
        let mut ws = Ws::open(format!("ws://{addr}/ws?batch=1"), None, Encoding::Binary)
            .await
            .expect("WebSocket connect");
        ws.batch = true;
        ws.hello(None).await;
        ws
    }

    /// Connects with an optional `Origin` header and an encoding (`?format=json` for JSON).
    pub async fn connect_with(
        addr: SocketAddr,
        origin: Option<&str>,
        enc: Encoding,
    ) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
        let url = match enc {
            Encoding::Binary => format!("ws://{addr}/ws"),
            Encoding::Json => format!("ws://{addr}/ws?format=json"),
        };
        Ws::open(url, origin, enc).await
    }

    /// Opens `url` with an optional `Origin` header, within [`WAIT`].
    async fn open(
        url: String,
        origin: Option<&str>,
        enc: Encoding,
    ) -> Result<Ws, tokio_tungstenite::tungstenite::Error> {
        let mut req = url.into_client_request()?;
        if let Some(o) = origin {
            req.headers_mut()
                .insert("origin", o.parse().expect("origin header value"));
        }
        let (stream, _) = tokio::time::timeout(WAIT, tokio_tungstenite::connect_async(req))
            .await
            .map_err(|_| {
                tokio_tungstenite::tungstenite::Error::Io(std::io::Error::other(
                    "connect timed out",
                ))
            })??;
        Ok(Ws::from_stream(stream, enc))
    }

    /// Connects to `/ws` with a kernel receive buffer of `rcvbuf` bytes and says `Hello`: a client
    /// that stops reading backs the server's socket up quickly.
    pub async fn connect_small_buffer(addr: SocketAddr, rcvbuf: u32) -> Ws {
        Ws::connect_small_buffer_with(addr, rcvbuf, Encoding::Binary).await
    }

    /// [`Ws::connect_small_buffer`] in either encoding (JSON: `/ws?format=json`).
    pub async fn connect_small_buffer_with(addr: SocketAddr, rcvbuf: u32, enc: Encoding) -> Ws {
        let sock = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()
        } else {
            tokio::net::TcpSocket::new_v6()
        }
        .expect("socket");
        sock.set_recv_buffer_size(rcvbuf).expect("SO_RCVBUF");
        let stream = tokio::time::timeout(WAIT, sock.connect(addr))
            .await
            .expect("connect timed out")
            .expect("connect");
        let (ws, _) = tokio::time::timeout(
            WAIT,
            tokio_tungstenite::client_async(
                match enc {
                    Encoding::Binary => format!("ws://{addr}/ws"),
                    Encoding::Json => format!("ws://{addr}/ws?format=json"),
                },
                MaybeTlsStream::Plain(stream),
            ),
        )
        .await
        .expect("upgrade timed out")
        .expect("upgrade");
        let mut ws = Ws::from_stream(ws, enc);
        ws.hello(None).await;
        ws
    }

    /// Wraps an open stream.
    pub fn from_stream(stream: WebSocketStream<MaybeTlsStream<TcpStream>>, enc: Encoding) -> Ws {
        Ws {
            stream,
            enc,
            state: ClientState::default(),
            welcome: None,
            events: Vec::new(),
            errors: Vec::new(),
            keyframes: 0,
            cells_messages: 0,
            deltas: 0,
            last_tick: 0,
            bytes: 0,
            text_frames: 0,
            binary_frames: 0,
            messages: 0,
            batch: false,
            pending: std::collections::VecDeque::new(),
            next_id: 1,
        }
    }

    /// A fresh request id.
    pub fn rid(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    /// Connects to a WebSocket URL (e.g. a `moved` message's `to`), binary, no `Hello` yet.
    pub async fn connect_url(url: &str) -> Ws {
        Ws::open(url.to_string(), None, Encoding::Binary).await.expect("WebSocket connect")
    }

    /// Sends `Hello` resuming the session of `resume` and waits for `Welcome` (panics on
    /// anything else).
    pub async fn hello_resume(&mut self, token: Option<&str>, resume: &str) -> Welcome {
        let mut h = hello(token, self.enc);
        if let ClientMsg::Hello(x) = &mut h {
            x.resume = Some(resume.to_string());
        }
        self.send(&h).await;
        match self.next_until(WAIT, |m| matches!(m, ServerMsg::Welcome(_) | ServerMsg::Error(_))).await {
            Some(ServerMsg::Welcome(w)) => w,
            other => panic!("expected Welcome to a resume, got {other:?}"),
        }
    }

    /// Sends `Hello` and waits for `Welcome` (panics on anything else).
    pub async fn hello(&mut self, token: Option<&str>) -> Welcome {
        self.send(&hello(token, self.enc)).await;
        match self
            .next_until(WAIT, |m| {
                matches!(m, ServerMsg::Welcome(_) | ServerMsg::Error(_))
            })
            .await
        {
            Some(ServerMsg::Welcome(w)) => w,
            other => panic!("expected Welcome, got {other:?}"),
        }
    }

    /// Sends a message in this connection's encoding.
    pub async fn send(&mut self, msg: &ClientMsg) {
        let m = match self.enc {
            Encoding::Binary => Message::Binary(proto::encode_binary(msg).expect("encode").into()),
            Encoding::Json => Message::Text(proto::encode_json(msg).expect("encode").into()),
        };
        self.send_raw(m).await;
    }

    /// Sends a raw WebSocket message.
    pub async fn send_raw(&mut self, m: Message) {
        tokio::time::timeout(WAIT, self.stream.send(m))
            .await
            .expect("send timed out")
            .expect("send failed");
    }

    /// Tries to send; false if the connection is gone.
    pub async fn try_send_raw(&mut self, m: Message) -> bool {
        matches!(
            tokio::time::timeout(WAIT, self.stream.send(m)).await,
            Ok(Ok(()))
        )
    }

    /// The next message within `wait`, applied to the state.
    pub async fn next(&mut self, wait: Duration) -> Next {
        loop {
            if let Some(msg) = self.pending.pop_front() {
                self.observe(&msg);
                return Next::Msg(msg);
            }
            let m = match tokio::time::timeout(wait, self.stream.next()).await {
                Err(_) => return Next::Timeout,
                Ok(None) => return Next::Closed(None),
                Ok(Some(Err(_))) => return Next::Closed(None),
                Ok(Some(Ok(m))) => m,
            };
            let msg: ServerMsg = match &m {
                Message::Binary(b) if self.batch => {
                    self.bytes += b.len() as u64;
                    self.binary_frames += 1;
                    let msgs = proto::decode_binary_batch(b, proto::DEFAULT_SERVER_LIMIT)
                        .unwrap_or_else(|e| panic!("undecodable batch: {e}"));
                    self.pending.extend(msgs.into_iter().map(|(m, _)| m));
                    continue;
                }
                Message::Binary(b) => {
                    self.bytes += b.len() as u64;
                    self.binary_frames += 1;
                    proto::decode_binary(b, proto::DEFAULT_SERVER_LIMIT)
                        .unwrap_or_else(|e| panic!("undecodable server frame: {e}"))
                }
                Message::Text(t) => {
                    self.bytes += t.len() as u64;
                    self.text_frames += 1;
                    proto::decode_json(t.as_str(), proto::DEFAULT_SERVER_LIMIT)
                        .unwrap_or_else(|e| panic!("undecodable server frame: {e}: {}", t.as_str()))
                }
                Message::Close(c) => return Next::Closed(c.as_ref().map(|c| u16::from(c.code))),
                _ => continue,
            };
            self.observe(&msg);
            return Next::Msg(msg);
        }
    }

    fn observe(&mut self, msg: &ServerMsg) {
        self.messages += 1;
        match msg {
            ServerMsg::Welcome(w) => self.welcome = Some(w.clone()),
            ServerMsg::Keyframe(_) => self.keyframes += 1,
            ServerMsg::Delta(d) => {
                self.deltas += 1;
                self.last_tick = self.last_tick.max(d.tick);
            }
            ServerMsg::Event(e) => self.events.push(e.clone()),
            ServerMsg::Error(e) => self.errors.push(e.clone()),
            ServerMsg::CommandResult(r) => {
                if let Outcome::Subscribed(s) = &r.result {
                    self.state.retain_cells(s.world, &s.cells);
                }
            }
            ServerMsg::Cells(c) => {
                for e in &c.entries {
                    match e {
                        proto::CellEntry::Keyframe(_) => self.keyframes += 1,
                        proto::CellEntry::Delta(_) => self.deltas += 1,
                    }
                }
                self.cells_messages += 1;
                self.last_tick = self.last_tick.max(c.tick);
            }
            ServerMsg::Pong(_) | ServerMsg::Moved(_) => {}
        }
        if let Err(e) = self.state.apply(msg) {
            let what = match msg {
                ServerMsg::Keyframe(k) => format!(
                    "keyframe world {} cell {} tick {} ({} agents)",
                    k.world,
                    k.cell,
                    k.tick,
                    k.agents.len()
                ),
                ServerMsg::Delta(d) => format!(
                    "delta world {} cell {} tick {} base {} (left {}, changed {}, entered {}); client holds tick {:?}",
                    d.world,
                    d.cell,
                    d.tick,
                    d.base_tick,
                    d.left.len(),
                    d.changed.len(),
                    d.entered.len(),
                    self.state.cell(d.world, d.cell).map(|c| c.tick())
                ),
                ServerMsg::Cells(c) => {
                    let held: Vec<_> = c
                        .entries
                        .iter()
                        .map(|e| {
                            (
                                e.cell(),
                                self.state.cell(c.world, e.cell()).map(|s| s.tick()),
                            )
                        })
                        .collect();
                    format!(
                        "cells world {} tick {} span {} ({} entries); client holds (cell, tick) {held:?}",
                        c.world,
                        c.tick,
                        c.span,
                        c.entries.len()
                    )
                }
                other => format!("{other:?}"),
            };
            panic!("server frame does not apply to the client state: {e}: {what}");
        }
    }

    /// Reads until a message matches `pred` (answered) or `wait` passes (`None`); also `None`
    /// when the connection closes.
    pub async fn next_until(
        &mut self,
        wait: Duration,
        mut pred: impl FnMut(&ServerMsg) -> bool,
    ) -> Option<ServerMsg> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Next::Msg(m) if pred(&m) => return Some(m),
                Next::Msg(_) => {}
                Next::Closed(_) | Next::Timeout => return None,
            }
        }
    }

    /// Sends a command and waits for its `CommandResult`.
    pub async fn request(&mut self, msg: &ClientMsg) -> Outcome {
        let rid = msg.request_id().expect("a command with a request id");
        self.send(msg).await;
        self.result(rid).await
    }

    /// Waits for the `CommandResult` of `rid`.
    pub async fn result(&mut self, rid: u32) -> Outcome {
        match self
            .next_until(
                WAIT,
                |m| matches!(m, ServerMsg::CommandResult(r) if r.request_id == rid),
            )
            .await
        {
            Some(ServerMsg::CommandResult(r)) => r.result,
            other => panic!("no CommandResult for request {rid}: {other:?}"),
        }
    }

    /// Reads (applying frames) until `done` holds of this client, or `wait` passes; answers
    /// whether it held. A condition instead of a quiet spell (see [`Ws::drain`]): a frame a
    /// loaded machine delays is still read, and the caller's check does not race it.
    pub async fn read_until(&mut self, wait: Duration, done: impl Fn(&Ws) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if done(self) {
                return true;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            if let Next::Closed(c) = self.next(left.min(Duration::from_millis(100))).await {
                panic!("closed ({c:?}) while waiting for a state");
            }
        }
    }

    /// Reads (applying frames) until no message came for `quiet` or `max` passed.
    pub async fn drain(&mut self, quiet: Duration, max: Duration) {
        let deadline = tokio::time::Instant::now() + max;
        while tokio::time::Instant::now() < deadline {
            match self.next(quiet).await {
                Next::Msg(_) => {}
                Next::Timeout | Next::Closed(_) => return,
            }
        }
    }

    /// Reads until the server closes; answers the close code (`None` without a close frame).
    /// Panics if it stays open for `wait`.
    pub async fn expect_close(&mut self, wait: Duration) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Next::Msg(_) => {}
                Next::Closed(c) => return c,
                Next::Timeout => panic!("connection still open after {wait:?}"),
            }
        }
    }

    /// Sends a `Ping` and waits for its `Pong`: the connection is open and served.
    pub async fn ping(&mut self) -> u64 {
        let rid = self.rid();
        self.send(&ClientMsg::Ping(proto::Ping { request_id: rid }))
            .await;
        match self
            .next_until(
                WAIT,
                |m| matches!(m, ServerMsg::Pong(p) if p.request_id == rid),
            )
            .await
        {
            Some(ServerMsg::Pong(p)) => p.server_tick,
            other => panic!("no Pong for {rid}: {other:?}"),
        }
    }

    /// Subscribes and answers the cells (panics on an error result).
    pub async fn subscribe(&mut self, world: &str, area: proto::Area) -> Vec<u32> {
        let rid = self.rid();
        match self
            .request(&ClientMsg::Subscribe(proto::Subscribe {
                request_id: rid,
                world: world.into(),
                area,
                every_n_ticks: 1,
            }))
            .await
        {
            Outcome::Subscribed(s) => s.cells,
            other => panic!("subscribe failed: {other:?}"),
        }
    }

    /// Every agent in view, sorted by id.
    pub fn agents(&self) -> Vec<proto::QAgent> {
        let mut v: Vec<_> = self.state.agents().map(|(_, a)| *a).collect();
        v.sort_by_key(|a| a.id);
        v
    }

    /// Closes politely (best effort).
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.stream.close(None)).await;
    }
}

/// `Hello` for protocol 1.
pub fn hello(token: Option<&str>, encoding: Encoding) -> ClientMsg {
    ClientMsg::Hello(proto::Hello {
        protocol_version: PROTOCOL_VERSION,
        token: token.map(str::to_string),
        encoding,
        resume: None,
    })
}

/// The whole world.
pub fn whole_world() -> proto::Area {
    proto::Area::WholeWorld(proto::WholeWorld {})
}

/// A rectangle area.
pub fn rect_area(min_x: f32, min_y: f32, max_x: f32, max_y: f32) -> proto::Area {
    proto::Area::Rect(proto::Rect {
        min_x,
        min_y,
        max_x,
        max_y,
    })
}

/// `Spawn` of `count` agents in a rectangle with default limits and no behaviours.
pub fn spawn_msg(
    request_id: u32,
    world: &str,
    count: u32,
    r: [f32; 4],
    limits: proto::Limits,
) -> ClientMsg {
    ClientMsg::Spawn(proto::Spawn {
        request_id,
        world: world.into(),
        group: "g".into(),
        count,
        area: proto::SpawnArea::Rect(proto::Rect {
            min_x: r[0],
            min_y: r[1],
            max_x: r[2],
            max_y: r[3],
        }),
        limits,
        behaviors: Vec::new(),
    })
}

/// `MoveTo`.
pub fn move_to_msg(
    request_id: u32,
    world: &str,
    agents: Vec<u32>,
    x: f32,
    y: f32,
    stopping_distance: f32,
) -> ClientMsg {
    ClientMsg::MoveTo(proto::MoveTo {
        request_id,
        world: world.into(),
        agents,
        target: proto::Point { x, y },
        stopping_distance,
    })
}

/// The agent ids of a `Spawned` outcome (panics otherwise).
pub fn spawned(o: Outcome) -> Vec<u32> {
    match o {
        Outcome::Spawned(s) => s.agents,
        other => panic!("expected Spawned, got {other:?}"),
    }
}

/// The error body of an outcome (panics on success).
pub fn error_of(o: Outcome) -> proto::ErrorBody {
    match o {
        Outcome::Error(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}
