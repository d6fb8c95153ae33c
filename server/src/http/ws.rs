//! `/ws`: the steer-proto WebSocket endpoint.
//!
//! Per connection a receive task (decode, validate, rate-limit, dispatch to worlds) and a send
//! task (tick frames from the worlds' broadcast, command results from a bounded queue). While a
//! subscription is steady (nothing in its frames is per connection), the send task hands it to
//! the world's fan-out writers (`fanout.rs`), which send its frames, and takes it back when it
//! is not. WebSocket frames are written by hand and read by tungstenite (`wsio.rs`). A send
//! task that falls behind the broadcast ring does not buffer: it skips to the newest frame and
//! sends keyframes for its cells. A send that takes longer than the write timeout closes the
//! connection. So a slow reader never slows a world or other clients, and its memory is bounded
//! by the broadcast ring (shared) plus the socket's write buffer. The kernel's send buffer is
//! capped per socket (`limits.socket_send_buffer_bytes`, set at accept): otherwise it grows to
//! megabytes, the writes keep succeeding, and a stalled or starved reader is fed tens of seconds
//! of stale frames before either policy engages.
//!
//! Encodings (PROTOCOL.md §2): a client may send binary or text frames at any time, each
//! decoded by its frame type. Replies before `Welcome` use the encoding of the frame they answer;
//! from `Welcome` on every server frame uses `Hello.encoding` — or JSON when the URL asked for
//! it with `?format=json`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::StreamExt;
use steer_proto::{self as proto, ClientMsg, Encoding, ErrorCode, ServerMsg, Validate};
use tokio::sync::mpsc;
use tokio_stream::StreamMap;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::wsio::{self, Frames, queue_messages};
use crate::auth::Identity;
use crate::config::Visibility;
use crate::runtime::players::{ConnHandle, Direct, JoinError};
use crate::runtime::world::Actor;
use crate::runtime::{CmdError, SessionId, TickFrame, WorldHandle};
use crate::sim::world::{Command, Outcome};

/// Close codes used by the server (one definition, in `steer-proto`).
pub use steer_proto::close;

/// Query of `/ws`.
#[derive(Debug, serde::Deserialize)]
pub struct WsQuery {
    /// `json` for text frames; binary otherwise.
    #[serde(default)]
    pub format: Option<String>,
    /// `1` (or `true`): binary frames may carry several messages back to back (PROTOCOL.md §2),
    /// so a tick is one WebSocket message per client instead of one per AOI cell.
    #[serde(default)]
    pub batch: Option<String>,
}

/// The `batch` query parameter: absent, `0`/`false` or `1`/`true`.
fn parse_batch(v: Option<&str>) -> Result<bool, crate::http::error::ApiError> {
    match v {
        None | Some("0" | "false") => Ok(false),
        Some("1" | "true") => Ok(true),
        Some(other) => Err(crate::http::error::ApiError::bad_request(format!("batch: expected 1, true, 0 or false, got `{other}`"))),
    }
}

/// `GET /ws`: checks Origin and connection slots before upgrading.
#[utoipa::path(get, path = "/ws", tag = "ops",
    params(("format" = Option<String>, Query, description = "`json` for JSON text frames; binary frames otherwise"),
           ("batch" = Option<String>, Query, description = "`1`/`true`: binary frames carry one or more messages back to back (a tick per WebSocket message); `0`/`false` or absent: one message per frame")),
    responses(
        (status = 101, description = "Switching Protocols: the WebSocket of the `steer-proto` protocol (hello, subscribe, commands, keyframes and deltas)"),
        (status = 400, description = "Not a WebSocket upgrade request, or a bad `format`/`batch` value (`bad_request`)", body = super::openapi::ErrorBody),
        (status = 403, description = "Origin not allowed (`forbidden`)", body = super::openapi::ErrorBody),
        (status = 503, description = "Too many connections, or shutting down (`busy`)", body = super::openapi::ErrorBody)))]
pub async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    slot: Option<axum::Extension<super::ConnSlot>>,
    peer: Option<axum::Extension<std::net::SocketAddr>>,
    Query(q): Query<WsQuery>,
    mut req: axum::extract::Request,
) -> Response {
    let key = match wsio::check_handshake(req.method(), &headers) {
        Ok(k) => k,
        Err(e) => return crate::http::error::ApiError::bad_request(format!("not a WebSocket upgrade: {e}")).into_response(),
    };
    if !super::guard::origin_allowed(&state, &headers) {
        state.metrics.connections_refused.inc();
        return (StatusCode::FORBIDDEN, axum::Json(serde_json::json!({"error": "forbidden", "message": "Origin not allowed"}))).into_response();
    }
    if state.cancel.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({"error": "busy", "message": "shutting down"}))).into_response();
    }
    let json = matches!(q.format.as_deref(), Some("json"));
    let batch = match parse_batch(q.batch.as_deref()) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let Some(on_upgrade) = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>() else {
        return crate::http::error::ApiError::bad_request("not a WebSocket upgrade: this connection cannot be upgraded").into_response();
    };
    let Ok(permit) = state.connections.clone().try_acquire_owned() else {
        state.metrics.connections_refused.inc();
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(serde_json::json!({"error": "busy", "message": "too many connections"}))).into_response();
    };
    let max = state.settings.limits.max_message_bytes;
    let peer = peer.map(|axum::Extension(a)| a.ip());
    let tracker = state.tracker.clone();
    tracker.spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let (reader, writer) = wsio::open(upgraded, max).await;
                session(reader, writer, state, if json { Encoding::Json } else { Encoding::Binary }, batch, peer).await;
            }
            Err(e) => tracing::debug!("WebSocket upgrade failed: {e}"),
        }
        drop(permit);
        // The socket's slot of `limits.max_http_connections`, held until now.
        drop(slot);
    });
    wsio::switching(&key)
}

/// What the receive task tells the send task.
enum Ctl {
    /// Send a message (encoded as given).
    Send(Bytes, Encoding),
    /// Start (or move) a subscription: keyframes for `cells`, then deltas (`request_id`: the
    /// command whose `subscribed` result goes first; none for a subscription a resume restores).
    Subscribe { world: WorldHandle, cells: Vec<u32>, span: u32, request_id: Option<u32> },
    /// Who the connection is (set by Hello, before Welcome): what its frames are filtered by.
    Viewer(Viewer),
    /// A message for this connection alone, in its encoding.
    Direct(Direct),
    /// Stop a subscription.
    Unsubscribe { world: u32, result: Bytes },
    /// Answer a WebSocket ping with this payload.
    Pong(Bytes),
    /// Close with a code and reason.
    Close(u16, &'static str),
}

struct Sub {
    /// The world.
    world: WorldHandle,
    cells: Arc<[u32]>,
    /// `every_n_ticks`.
    span: u32,
    /// Its shared messages' key.
    key: crate::runtime::SetKey,
    /// Keeps the world diffing this rate's cells while the subscription lives.
    _rate: crate::runtime::RateGuard,
    need_key: Vec<bool>,
    /// Some `need_key` may be set (false: none is, so a tick costs no scan of the cells).
    owed: bool,
    /// Under `owned` visibility: the client holds this cell's content (a cell that goes out of
    /// sight is emptied with an empty keyframe).
    shown: Vec<bool>,
    /// Frames up to this tick are already covered by keyframes sent.
    after: u64,
    /// Frames up to this sequence number ([`TickFrame::seq`]) are handled.
    seq: u64,
    /// Its membership of the world's fan-out, while the fan-out sends its frames (left when
    /// the subscription is dropped).
    fast: Option<(Arc<super::fanout::Fanout>, u64)>,
    /// Its connection.
    conn: SessionId,
}

impl Drop for Sub {
    fn drop(&mut self) {
        self.leave_fanout();
    }
}

/// What the send task filters frames and events by.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// The player (`None` for the admin).
    player: Option<String>,
    /// Admins and spectators see every cell and every event.
    sees_all: bool,
    /// The vision key (team or player) under `owned` visibility.
    key: String,
}

impl Viewer {
    pub(super) fn nobody() -> Self {
        Viewer { player: None, sees_all: false, key: String::new() }
    }

    /// Under the frame's visibility: `None` = every cell; `Some(cells)` = only those marked
    /// (`Some(None)`: none at all).
    fn vision<'a>(&self, frame: &'a TickFrame) -> Option<Option<&'a Vec<bool>>> {
        match &frame.vision {
            Some(v) if !self.sees_all => Some(v.get(&self.key)),
            _ => None,
        }
    }

    /// Admins and spectators see every cell and every event.
    pub(super) fn sees_all(&self) -> bool {
        self.sees_all
    }

    /// Should this event of the broadcast go to this viewer?
    pub(super) fn wants(&self, frame: &TickFrame, e: &crate::runtime::FrameEvent) -> bool {
        if e.owner.is_some() && e.owner.as_deref() == self.player.as_deref() {
            // Delivered to every connection of the owner directly.
            return false;
        }
        e.public || frame.vision.is_none() || self.sees_all || e.vision.as_deref() == Some(self.key.as_str())
    }
}

/// An empty keyframe of a cell: what a viewer gets for a cell that goes out of its sight.
fn empty_keyframe(world: u32, cell: u32, tick: u64, enc: Encoding) -> Option<Bytes> {
    let k = proto::encode_keyframe(proto::FrameScope { world, cell }, tick, &[], true).ok()?;
    Some(encode(&ServerMsg::Keyframe(k), enc))
}

/// The connection's frame encoding from `Welcome` on, shared by its two tasks.
#[derive(Debug, Default)]
struct SharedEncoding(std::sync::atomic::AtomicBool);

impl SharedEncoding {
    fn new(enc: Encoding) -> Self {
        SharedEncoding(std::sync::atomic::AtomicBool::new(enc == Encoding::Json))
    }

    fn get(&self) -> Encoding {
        if self.0.load(std::sync::atomic::Ordering::Acquire) { Encoding::Json } else { Encoding::Binary }
    }

    fn set(&self, enc: Encoding) {
        self.0.store(enc == Encoding::Json, std::sync::atomic::Ordering::Release);
    }
}

/// What a subscription takes of one cell this tick.
enum Want {
    Skip,
    Key,
    Delta,
    /// An empty keyframe: the cell went out of the viewer's sight.
    Empty,
}

/// The state tick of a key and the base tick of a delta.
fn frame_ticks(m: &ServerMsg) -> u64 {
    match m {
        ServerMsg::Keyframe(k) => k.tick,
        ServerMsg::Delta(d) => d.base_tick,
        _ => 0,
    }
}

/// The `cells` message (PROTOCOL.md §6.8) of `sub_cells` at `frame`'s tick: each cell's entry as
/// `want` says, from the bodies every cell frame encodes once. Empty when no cell has an entry.
fn build_cells(frame: &TickFrame, span: u32, cells: &[crate::runtime::CellFrame], sub_cells: &[u32], mut want: impl FnMut(usize, u32, &crate::runtime::CellFrame) -> Want) -> Bytes {
    let mut w = proto::EntriesWriter::new(frame.tick, span, 64 * sub_cells.len().min(4096));
    // The cell frames whose state each entry leaves (`None`: emptied), for the checksum.
    let mut after: Vec<Option<&crate::runtime::CellFrame>> = Vec::new();
    let mut has_key = false;
    for (k, &c) in sub_cells.iter().enumerate() {
        let Some(cf) = cells.get(c as usize) else { continue };
        let r = match want(k, c, cf) {
            Want::Skip => continue,
            Want::Key => {
                has_key = true;
                after.push(Some(cf));
                w.keyframe(c, frame_ticks(&cf.key.msg), cf.key.body())
            }
            Want::Empty => {
                has_key = true;
                after.push(None);
                w.keyframe(c, frame.tick, &proto::EntryBody::empty_keyframe())
            }
            Want::Delta => match &cf.delta {
                Some(d) => {
                    after.push(Some(cf));
                    w.delta(c, frame_ticks(&d.msg), d.body())
                }
                None => continue,
            },
        };
        if let Err(e) = r {
            tracing::error!("cannot build a cells message: {e}");
            return Bytes::new();
        }
    }
    if w.is_empty() {
        return Bytes::new();
    }
    let checksum = (has_key || frame.checksum_due(span)).then(|| proto::fold_checksums(after.iter().map(|cf| cf.map_or(proto::FNV_OFFSET, |cf| cf.key.sum()))));
    proto::encode_cells_binary(frame.world, frame.tick, span, checksum, &w.finish()).map(Bytes::from).unwrap_or_default()
}

/// The `cells` message of a subscription with nothing per connection (no keyframe owed, every
/// cell in sight) at `frame`, if this tick has one for its rate: the message shared by every
/// subscription of the same rectangle and rate (`key`), built by the first to ask.
pub(super) fn steady_cells(frame: &TickFrame, span: u32, key: crate::runtime::SetKey, sub_cells: &[u32], m: &crate::metrics::Metrics) -> Option<Bytes> {
    let (cells, due) = frame.cells_at(span)?;
    if !due {
        return None;
    }
    let build = || build_cells(frame, span, cells, sub_cells, |_, _, _| Want::Delta);
    let (b, built) = frame.shared_message(key, build).unwrap_or_else(|| (build(), true));
    if built {
        m.cells_built.inc();
    } else {
        m.cells_shared_hits.inc();
    }
    (!b.is_empty()).then_some(b)
}

impl Sub {
    /// Takes the subscription off the world's fan-out, if it is on it (a handback already on
    /// its way is then ignored: it names a membership that is gone).
    fn leave_fanout(&mut self) {
        if let Some((fan, join)) = self.fast.take() {
            fan.leave(self.conn, join);
        }
    }

    /// Handles a frame of its world: skips what is covered, resyncs after a gap, and adds the
    /// frame's messages to `batch`. Returns the keyframes sent.
    fn on_frame(&mut self, frame: &TickFrame, viewer: &Viewer, enc: Encoding, batch: &mut Vec<(Bytes, Encoding)>, m: &crate::metrics::Metrics) -> u64 {
        if frame.seq <= self.seq {
            return 0;
        }
        // A frame this subscription never saw (its receiver was made anew after a fan-out
        // membership): the chain is broken, keyframes resync it.
        let gap = frame.seq > self.seq + 1;
        self.seq = frame.seq;
        if frame.tick <= self.after {
            return 0;
        }
        if gap {
            self.owe_all();
        }
        self.frame(frame, viewer, enc, batch, true, m)
    }

    /// Whether the fan-out may send its frames from now on (nothing per connection).
    fn steady(&self, frame: &TickFrame, viewer: &Viewer, enc: Encoding) -> bool {
        self.fast.is_none() && !self.owed && enc == Encoding::Binary && (frame.vision.is_none() || viewer.sees_all) && !frame.reset
    }

    /// This frame's state for the viewer: keyframes where owed, deltas on the subscription's
    /// ticks; under `owned` visibility only cells in sight, and an empty keyframe for a cell
    /// leaving it. Binary connections get one `cells` message (shared with every subscription
    /// of the same rectangle and rate when nothing about it is per connection), JSON ones a
    /// message per cell. With `events`, the frame's events for the viewer follow. Returns the
    /// keyframes sent.
    fn frame(&mut self, frame: &TickFrame, viewer: &Viewer, enc: Encoding, batch: &mut Vec<(Bytes, Encoding)>, events: bool, m: &crate::metrics::Metrics) -> u64 {
        if frame.reset {
            self.owe_all();
        }
        let mut keys = 0;
        if let Some((cells, due)) = frame.cells_at(self.span) {
            let vision = viewer.vision(frame);
            let owed = self.owed;
            if due || owed {
                keys = match enc {
                    Encoding::Binary => self.cells_message(frame, cells, due, vision, owed, batch, m),
                    Encoding::Json => self.json_frames(frame, cells, due, vision, batch),
                };
            }
        }
        if events {
            for e in &frame.events {
                if viewer.wants(frame, e) {
                    batch.push((e.msg.encoded(enc), enc));
                }
            }
        }
        keys
    }

    /// Whether cell `c` is out of the viewer's sight; updates what the client holds.
    fn hidden(&mut self, k: usize, c: u32, vision: Option<Option<&Vec<bool>>>) -> Option<Want> {
        let v = vision?;
        if v.is_some_and(|v| v.get(c as usize).copied().unwrap_or(false)) {
            self.shown[k] = true;
            return None;
        }
        // Back in sight later: a keyframe, never a delta on what the client does not hold.
        self.need_key[k] = true;
        self.owed = true;
        Some(if std::mem::replace(&mut self.shown[k], false) { Want::Empty } else { Want::Skip })
    }

    #[allow(clippy::too_many_arguments)]
    fn cells_message(&mut self, frame: &TickFrame, cells: &[crate::runtime::CellFrame], due: bool, vision: Option<Option<&Vec<bool>>>, owed: bool, batch: &mut Vec<(Bytes, Encoding)>, m: &crate::metrics::Metrics) -> u64 {
        let span = self.span;
        if vision.is_none() && !owed {
            // Nothing per connection (`due`, since `owed` is not set): the message every
            // subscription of this rectangle and rate gets.
            batch.extend(steady_cells(frame, span, self.key, &self.cells, m).map(|b| (b, Encoding::Binary)));
            return 0;
        }
        let mut keys = 0;
        let sub_cells = self.cells.clone();
        let b = build_cells(frame, span, cells, &sub_cells, |k, c, _| {
            if let Some(w) = self.hidden(k, c, vision) {
                return w;
            }
            if std::mem::replace(&mut self.need_key[k], false) {
                keys += 1;
                Want::Key
            } else if due {
                Want::Delta
            } else {
                Want::Skip
            }
        });
        self.owed = self.need_key.iter().any(|&k| k);
        m.cells_built.inc();
        if !b.is_empty() {
            batch.push((b, Encoding::Binary));
        }
        keys
    }

    /// Every cell owes a keyframe (after a lag or a world reset).
    fn owe_all(&mut self) {
        self.need_key.iter_mut().for_each(|k| *k = true);
        self.owed = true;
    }

    fn json_frames(&mut self, frame: &TickFrame, cells: &[crate::runtime::CellFrame], due: bool, vision: Option<Option<&Vec<bool>>>, batch: &mut Vec<(Bytes, Encoding)>) -> u64 {
        let enc = Encoding::Json;
        let mut keys = 0;
        for k in 0..self.cells.len() {
            let c = self.cells[k];
            let Some(cf) = cells.get(c as usize) else { continue };
            match self.hidden(k, c, vision) {
                Some(Want::Empty) => {
                    batch.extend(empty_keyframe(frame.world, c, frame.tick, enc).map(|b| (b, enc)));
                    continue;
                }
                Some(_) => continue,
                None => {}
            }
            if std::mem::replace(&mut self.need_key[k], false) {
                batch.push((cf.key.encoded(enc), enc));
                keys += 1;
            } else if let (true, Some(d)) = (due, &cf.delta) {
                batch.push((d.encoded(enc), enc));
            }
        }
        self.owed = self.need_key.iter().any(|&k| k);
        keys
    }
}

fn encode(msg: &ServerMsg, enc: Encoding) -> Bytes {
    let r = match enc {
        Encoding::Binary => proto::encode_binary(msg).map(Bytes::from),
        Encoding::Json => proto::encode_json(msg).map(Bytes::from),
    };
    r.unwrap_or_default()
}

/// One WebSocket connection from `peer` (the client's address, if the accept loop gave it).
async fn session(mut stream: wsio::Reader, writer: wsio::Writer, state: AppState, url_enc: Encoding, batch: bool, peer: Option<std::net::IpAddr>) {
    use tracing::Instrument;
    let id: SessionId = state.next_session.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The span is attached to the futures (`instrument`), entered only while they are polled:
    // a guard from `span.enter()` held across `.await` would leave it entered on whatever
    // task the worker thread polls next, and exit it on the wrong one (tracing-subscriber then
    // panics, "tried to clone a span that already closed").
    let span = tracing::info_span!("conn", id);
    let send_span = span.clone();
    async move {
        let enc = Arc::new(SharedEncoding::new(url_enc));
        state.metrics.connections.inc();
        let (ctl_tx, ctl_rx) = mpsc::channel::<Ctl>(state.settings.limits.connection_queue.max(1));
        let cancel = state.cancel.child_token();
        let (ev_tx, ev_rx) = mpsc::channel::<Direct>(state.settings.limits.connection_queue.max(1));
        let handle = ConnHandle { events: ev_tx, kick: CancellationToken::new(), bytes_per_sec: Arc::default() };
        let send = tokio::spawn(send_task(writer, ctl_rx, ev_rx, state.clone(), enc.clone(), cancel.clone(), batch, Arc::new(ByteRate::new(handle.bytes_per_sec.clone())), id).instrument(send_span));
        let conn = recv_task(&mut stream, ctl_tx, state.clone(), url_enc, enc, id, cancel.clone(), handle, peer).await;
        if let (Some(who), Some(token)) = (&conn.identity, &conn.resume_token) {
            state.registry.players.leave(&who.player, id, token, conn.subs.clone());
        }
        // The receive side ended (close, error or shutdown): let the send task finish its close.
        if tokio::time::timeout(Duration::from_secs(2), send).await.is_err() {
            tracing::debug!("send task did not finish in time");
        }
        let l = &state.settings.limits;
        linger(&mut stream, Duration::from_millis(l.close_linger_ms), l.max_message_bytes.saturating_mul(4)).await;
        cancel.cancel();
        state.metrics.connections.dec();
    }
    .instrument(span)
    .await;
}

/// A lingering close: after our Close frame, reads and drops what the peer still sends until it
/// closes too, for at most `time` and about `max_bytes`. Dropping a socket with unread bytes in
/// its receive buffer makes the kernel answer with a reset instead of a FIN, and a reset can
/// destroy our Close frame in the peer's buffer before the peer reads it: a client that flooded
/// us would then see a bare connection reset instead of the close code that says why.
async fn linger(stream: &mut wsio::Reader, time: Duration, max_bytes: usize) {
    let drain = async {
        let mut read = 0usize;
        while let Some(Ok(m)) = stream.next().await {
            read = read.saturating_add(match &m {
                Message::Binary(b) | Message::Ping(b) | Message::Pong(b) => b.len(),
                Message::Text(t) => t.len(),
                Message::Frame(f) => f.len(),
                Message::Close(_) => return,
            });
            if read > max_bytes {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(time, drain).await;
}

#[allow(clippy::too_many_arguments)]
async fn send_task(
    mut writer: wsio::Writer,
    mut ctl: mpsc::Receiver<Ctl>,
    mut direct: mpsc::Receiver<Direct>,
    state: AppState,
    shared_enc: Arc<SharedEncoding>,
    cancel: CancellationToken,
    combine: bool,
    rate: Arc<ByteRate>,
    id: SessionId,
) {
    let mut viewer = Viewer::nobody();
    let write_timeout = state.settings.limits.write_timeout();
    // Frames of the worlds whose fan-out does not send this connection's frames.
    let mut streams: StreamMap<u32, BroadcastStream<Arc<TickFrame>>> = StreamMap::new();
    let mut subs: HashMap<u32, Sub> = HashMap::new();
    // A membership hands back at most once, and a subscription joins only after a frame of its
    // world, which this loop reads only when no handback is waiting (handbacks come first in
    // its `select!`): so at most one handback per subscription, and one of each subscription a
    // (re)subscribe replaced since, is ever queued. Twice the subscriptions, with room to spare.
    let (back_tx, mut back_rx) = mpsc::channel::<super::fanout::Handback>(2 * state.settings.limits.max_subscriptions.max(1) + 2);
    let m = &state.metrics;
    // Made once: a `cancelled()` made anew per message would lock the token and register a
    // waiter for every frame sent.
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    let mut frames = Frames::default();
    let closing: Option<(u16, &'static str)> = loop {
        let mut batch: Vec<(Bytes, Encoding)> = Vec::new();
        // Set once, by Hello, before any subscription exists.
        let enc = shared_enc.get();
        // A world whose last frame left its subscription steady: it may join the fan-out
        // once this turn's write is done.
        let mut steady: Option<(u32, Arc<TickFrame>)> = None;
        // Finish what a fan-out writer left on the socket even if this turn adds nothing.
        let mut flush = false;
        tokio::select! {
            biased;
            () = &mut cancelled => break Some((close::GOING_AWAY, "server shutting down")),
            c = ctl.recv() => match c {
                None => break None,
                Some(Ctl::Close(code, reason)) => break Some((code, reason)),
                Some(Ctl::Pong(p)) => frames.push_one(wsio::OP_PONG, p),
                Some(Ctl::Send(b, e)) => batch.push((b, e)),
                Some(Ctl::Direct(d)) => batch.push((d.encoded(enc), enc)),
                Some(Ctl::Viewer(v)) => viewer = v,
                Some(Ctl::Subscribe { world, cells, span, request_id }) => {
                    // Receiver first, then the newest frame: any frame published in between
                    // is in the receiver and is skipped by `after` if the keyframes cover it.
                    streams.insert(world.id, BroadcastStream::new(world.subscribe()));
                    let latest = world.latest();
                    // Then the group table for the result: the publisher updates it before it
                    // makes a frame the newest, so a change in a frame the keyframes cover (its
                    // events are not sent) is in the table, and one in a later frame comes as
                    // that frame's `groups` event. (Read when the command was handled, a change
                    // published before this point was announced to nobody here.)
                    if let Some(request_id) = request_id {
                        let groups = world.groups.lock().map(|g| g.clone()).unwrap_or_else(|p| p.into_inner().clone());
                        let result = proto::Outcome::Subscribed(proto::Subscribed { world: world.id, cells: cells.clone(), groups });
                        batch.push((encode(&ServerMsg::CommandResult(proto::CommandResult { request_id, result }), enc), enc));
                    }
                    let key = (span, cells.first().copied().unwrap_or(0), cells.last().copied().unwrap_or(0), cells.len());
                    let n = cells.len();
                    let mut sub = Sub { need_key: vec![true; n], owed: true, shown: vec![false; n], span, key, _rate: world.rates.hold(span), cells: cells.into(), after: 0, seq: 0, fast: None, conn: id, world: world.clone() };
                    if let Some(latest) = latest {
                        // Keyframes now (at the newest frame's tick); a rate the world does not
                        // keep yet starts with its first frame.
                        let n = sub.frame(&latest, &viewer, enc, &mut batch, false, m);
                        m.keyframes_sent.inc_by(n);
                        sub.after = latest.tick;
                        sub.seq = latest.seq;
                    }
                    // The subscription it replaces (if any) leaves the fan-out as it drops.
                    if subs.insert(world.id, sub).is_none() {
                        m.subscribers.inc();
                    }
                }
                Some(Ctl::Unsubscribe { world, result }) => {
                    batch.push((result, enc));
                    streams.remove(&world);
                    if subs.remove(&world).is_some() {
                        m.subscribers.dec();
                    }
                }
            },
            Some(h) = back_rx.recv() => {
                // The fan-out gave the subscription back: read the world's frames again, from
                // the one it did not send (if any); a gap in between is resynced by keyframes.
                let Some(sub) = subs.get_mut(&h.world) else { continue };
                if sub.fast.as_ref().map(|f| f.1) != Some(h.join) {
                    continue;
                }
                sub.fast = None;
                sub.seq = sub.seq.max(h.after);
                streams.insert(h.world, BroadcastStream::new(sub.world.subscribe()));
                if let Some(frame) = h.frame {
                    let n = sub.on_frame(&frame, &viewer, enc, &mut batch, m);
                    m.keyframes_sent.inc_by(n);
                }
                flush = true;
            }
            Some((wid, item)) = streams.next(), if !streams.is_empty() => {
                let Some(sub) = subs.get_mut(&wid) else { continue };
                match item {
                    Ok(frame) => {
                        let n = sub.on_frame(&frame, &viewer, enc, &mut batch, m);
                        m.keyframes_sent.inc_by(n);
                        if sub.steady(&frame, &viewer, enc) {
                            steady = Some((wid, frame));
                        }
                    }
                    Err(BroadcastStreamRecvError::Lagged(n)) => {
                        // Skipped frames: the next frame sends keyframes instead of a broken chain.
                        m.frames_dropped.inc_by(n);
                        sub.owe_all();
                    }
                }
            }
            Some(d) = direct.recv() => batch.push((d.encoded(enc), enc)),
        }
        let items = batch.len() as u64;
        queue_messages(batch, combine, &mut frames);
        if frames.is_empty() && !flush {
            continue;
        }
        let bytes = frames.payload_bytes() as u64;
        let ws_messages = frames.messages() as u64;
        let started = Instant::now();
        let written = tokio::time::timeout(write_timeout, writer.write(&mut frames)).await;
        m.send_micros.inc_by(started.elapsed().as_micros() as u64);
        match written {
            Ok(Ok(())) => {
                m.ws_messages.inc_by(ws_messages);
                m.frames_sent.inc_by(items);
                m.bytes_sent.inc_by(bytes);
                rate.add(bytes, Instant::now());
            }
            Ok(Err(_)) => break None,
            Err(_) => {
                tracing::info!("closing slow client: a write took over {write_timeout:?}");
                m.slow_closes.inc();
                break Some((close::SLOW, "slow consumer"));
            }
        }
        if let Some((wid, frame)) = steady {
            join_fanout(&state, &writer, &mut subs, &mut streams, wid, &frame, &viewer, combine, &back_tx, &rate);
        }
    };
    m.subscribers.dec_by(subs.len() as i64);
    // Off every fan-out before the close frame: no writer writes after it.
    subs.clear();
    if let Some((code, reason)) = closing {
        // After what a timed-out write left (the writer finishes a frame it began), if the
        // client takes it in time.
        frames.clear();
        frames.close(code, reason);
        let _ = tokio::time::timeout(Duration::from_millis(500), writer.write(&mut frames)).await;
    }
    cancel.cancel();
}

/// Hands world `wid`'s subscription to the world's fan-out, which sends its frames after
/// `frame` from now on, if the socket can be shared and has nothing left to write. Stays with
/// this task when the fan-out already passed a later frame (the next frame tries again).
#[allow(clippy::too_many_arguments)]
fn join_fanout(
    state: &AppState,
    writer: &wsio::Writer,
    subs: &mut HashMap<u32, Sub>,
    streams: &mut StreamMap<u32, BroadcastStream<Arc<TickFrame>>>,
    wid: u32,
    frame: &TickFrame,
    viewer: &Viewer,
    combine: bool,
    back: &mpsc::Sender<super::fanout::Handback>,
    rate: &Arc<ByteRate>,
) {
    let (Some(out), Some(sub)) = (writer.shared(), subs.get_mut(&wid)) else { return };
    if sub.seq != frame.seq || !out.idle() {
        return;
    }
    let Some(fan) = state.fanout(&sub.world) else { return };
    let join = fan.next_join();
    let member = super::fanout::Member {
        world: wid,
        conn: sub.conn,
        join,
        out: out.clone(),
        key: sub.key,
        span: sub.span,
        cells: sub.cells.clone(),
        viewer: viewer.clone(),
        combine,
        after: sub.seq,
        back: back.clone(),
        rate: rate.clone(),
    };
    if fan.join(member) {
        sub.fast = Some((fan, join));
        streams.remove(&wid);
    }
}

/// A connection's outgoing bytes per second (`ConnHandle::bytes_per_sec`), over windows of about
/// a second, fed by everyone who writes to it: its send task and the world's fan-out.
pub(crate) struct ByteRate {
    window: std::sync::Mutex<(Instant, u64)>,
    per_sec: Arc<std::sync::atomic::AtomicU64>,
}

impl ByteRate {
    pub(crate) fn new(per_sec: Arc<std::sync::atomic::AtomicU64>) -> Self {
        ByteRate { window: std::sync::Mutex::new((Instant::now(), 0)), per_sec }
    }

    /// Counts `bytes` written at `now`.
    pub(crate) fn add(&self, bytes: u64, now: Instant) {
        let Ok(mut w) = self.window.lock() else { return };
        w.1 += bytes;
        let elapsed = now.saturating_duration_since(w.0);
        if elapsed >= Duration::from_secs(1) {
            self.per_sec.store((w.1 as f64 / elapsed.as_secs_f64()) as u64, std::sync::atomic::Ordering::Relaxed);
            *w = (now, 0);
        }
    }
}

/// Token bucket of one connection.
struct Bucket {
    tokens: f64,
    rate: f64,
    burst: f64,
    last: Instant,
}

impl Bucket {
    fn take(&mut self) -> bool {
        let now = Instant::now();
        self.tokens = (self.tokens + now.duration_since(self.last).as_secs_f64() * self.rate).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

struct Conn {
    state: AppState,
    /// Encoding of replies (see the module docs).
    enc: Encoding,
    /// `?format=json` asked for JSON.
    url_enc: Encoding,
    /// The send task's encoding of frames, set at the first Hello.
    shared_enc: Arc<SharedEncoding>,
    id: SessionId,
    ctl: mpsc::Sender<Ctl>,
    hello: bool,
    /// Who it is (from Hello).
    identity: Option<Identity>,
    /// Its resume token (from Welcome).
    resume_token: Option<String>,
    /// Its registration with the players registry (taken at Hello).
    handle: Option<ConnHandle>,
    /// The client's address (what `auth.max_sessions_per_ip` counts).
    peer: Option<std::net::IpAddr>,
    bad: u32,
    limited: u32,
    subscribed: Vec<u32>,
    /// (world name, area, every_n_ticks) of each subscription, kept for a resume.
    subs: Vec<(String, proto::Area, u32)>,
}

#[allow(clippy::too_many_arguments)]
async fn recv_task(
    stream: &mut wsio::Reader,
    ctl: mpsc::Sender<Ctl>,
    state: AppState,
    url_enc: Encoding,
    shared_enc: Arc<SharedEncoding>,
    id: SessionId,
    cancel: CancellationToken,
    handle: ConnHandle,
    peer: Option<std::net::IpAddr>,
) -> Conn {
    let l = &state.settings.limits;
    let mut bucket = Bucket { tokens: l.command_burst, rate: l.commands_per_sec, burst: l.command_burst, last: Instant::now() };
    // Hello, Ping and WebSocket-level ping/pong frames: cheap, but each is answered, so they
    // have a bucket of their own (a client that is out of command tokens can still ping).
    let mut ping_bucket = Bucket { tokens: l.ping_burst, rate: l.pings_per_sec, burst: l.ping_burst, last: Instant::now() };
    let hello_deadline = tokio::time::Instant::now() + Duration::from_millis(l.hello_timeout_ms);
    let max_bad = l.max_bad_messages;
    let limit = l.max_message_bytes;
    let mut conn = Conn {
        state: state.clone(),
        enc: url_enc,
        url_enc,
        shared_enc,
        id,
        ctl,
        hello: false,
        identity: None,
        resume_token: None,
        handle: Some(handle),
        peer,
        bad: 0,
        limited: 0,
        subscribed: Vec::new(),
        subs: Vec::new(),
    };
    let kick = conn.handle.as_ref().map(|h| h.kick.clone()).unwrap_or_default();
    loop {
        let next = tokio::select! {
            () = cancel.cancelled() => return conn,
            () = kick.cancelled() => {
                let _ = conn.ctl.send(Ctl::Close(close::KICKED, "kicked")).await;
                return conn;
            }
            () = tokio::time::sleep_until(hello_deadline), if !conn.hello => {
                let _ = conn.ctl.send(Ctl::Close(close::POLICY, "no Hello in time")).await;
                return conn;
            }
            m = stream.next() => m,
        };
        let msg = match next {
            None => return conn,
            Some(Err(e)) => {
                // tungstenite refuses oversize messages/frames and protocol violations here.
                let text = e.to_string();
                let (code, reason) = if text.contains("too long") || text.contains("too big") || text.contains("Space limit") || text.contains("capacity") {
                    (close::TOO_BIG, "message too big")
                } else {
                    (close::POLICY, "protocol error")
                };
                tracing::debug!("receive error: {text}");
                let _ = conn.ctl.send(Ctl::Close(code, reason)).await;
                return conn;
            }
            Some(Ok(m)) => m,
        };
        // Each frame is decoded by its type; until Welcome, replies take the encoding of the
        // frame they answer.
        let decoded: Result<ClientMsg, String> = match &msg {
            Message::Binary(b) => {
                if !conn.hello {
                    conn.enc = Encoding::Binary;
                }
                proto::decode_binary(b, limit).map_err(|e| e.to_string()).or_else(|e| match proto::peek_hello_version(b) {
                    // A Hello of another protocol version whose fields differ: answered
                    // `unsupported_version`, not `bad_request`.
                    Some(v) if v != proto::PROTOCOL_VERSION => {
                        Ok(ClientMsg::Hello(proto::Hello { protocol_version: v, token: None, encoding: Encoding::Binary, resume: None }))
                    }
                    _ => Err(e),
                })
            }
            Message::Text(t) => {
                if !conn.hello {
                    conn.enc = Encoding::Json;
                }
                proto::decode_json(t.as_str(), limit).map_err(|e| e.to_string())
            }
            Message::Close(_) => {
                let _ = conn.ctl.send(Ctl::Close(close::NORMAL, "bye")).await;
                return conn;
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {
                // Each ping is answered (by the send task, which alone writes); a flood of them
                // still costs a write each, so they draw on the ping bucket.
                if let Message::Ping(p) = &msg {
                    if conn.ctl.send(Ctl::Pong(p.clone())).await.is_err() {
                        return conn;
                    }
                }
                if !ping_bucket.take() {
                    conn.limited += 1;
                    conn.state.metrics.command("rate_limited", false);
                    if f64::from(conn.limited) > 10.0 * l.command_burst.max(l.ping_burst) {
                        let _ = conn.ctl.send(Ctl::Close(close::RATE, "too many requests")).await;
                        return conn;
                    }
                }
                continue;
            }
        };
        let cmd = match decoded {
            Ok(c) => c,
            Err(e) => {
                conn.bad += 1;
                conn.reply_error(None, ErrorCode::BadRequest, &format!("malformed message: {e}"), None).await;
                if conn.bad > max_bad {
                    let _ = conn.ctl.send(Ctl::Close(close::POLICY, "too many malformed messages")).await;
                    return conn;
                }
                continue;
            }
        };
        let allowed = if matches!(cmd, ClientMsg::Hello(_) | ClientMsg::Ping(_)) { ping_bucket.take() } else { bucket.take() };
        if !allowed {
            conn.limited += 1;
            conn.state.metrics.command("rate_limited", false);
            conn.reply_error(cmd.request_id(), ErrorCode::RateLimited, "too many commands; slow down", None).await;
            if f64::from(conn.limited) > 10.0 * l.command_burst.max(l.ping_burst) {
                let _ = conn.ctl.send(Ctl::Close(close::RATE, "too many requests")).await;
                return conn;
            }
            continue;
        }
        conn.limited = 0;
        if !conn.handle(cmd).await {
            return conn;
        }
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

impl Conn {
    async fn send(&self, msg: ServerMsg) -> bool {
        self.ctl.send(Ctl::Send(encode(&msg, self.enc), self.enc)).await.is_ok()
    }

    async fn reply(&self, request_id: u32, result: proto::Outcome) -> bool {
        self.send(ServerMsg::CommandResult(proto::CommandResult { request_id, result })).await
    }

    async fn reply_error(&self, request_id: Option<u32>, code: ErrorCode, message: &str, field: Option<String>) {
        let body = proto::ErrorBody { code, message: message.to_string(), field };
        let msg = match request_id {
            Some(r) => ServerMsg::CommandResult(proto::CommandResult { request_id: r, result: proto::Outcome::Error(body) }),
            None => ServerMsg::Error(body),
        };
        let _ = self.send(msg).await;
    }

    fn actor(&self) -> Actor {
        self.identity.as_ref().map_or_else(|| Actor { player: None, role: proto::Role::Spectator, team: None }, Actor::of)
    }

    /// The world, if it exists and the connection's token is good for it.
    fn world(&self, name: &str) -> Result<WorldHandle, proto::ErrorBody> {
        if let Some(Err(m)) = self.identity.as_ref().map(|i| i.check_world(name)) {
            return Err(proto::ErrorBody { code: ErrorCode::Unauthorized, message: m, field: Some("world".into()) });
        }
        self.state.registry.get(name).map_err(|e| proto::ErrorBody { code: ErrorCode::UnknownWorld, message: e.to_string(), field: Some("world".into()) })
    }

    /// Handles one message; false closes the connection.
    async fn handle(&mut self, cmd: ClientMsg) -> bool {
        let rid = cmd.request_id();
        if let ClientMsg::Hello(h) = &cmd {
            return self.hello(h).await;
        }
        let Some(rid) = rid else { return true };
        if !self.hello {
            self.reply_error(Some(rid), ErrorCode::BadRequest, "send Hello first", None).await;
            self.bad += 1;
            return self.bad <= self.state.settings.limits.max_bad_messages;
        }
        if let Err(e) = cmd.validate() {
            self.reply_error(Some(rid), ErrorCode::InvalidField, &format!("invalid field `{}`: {}", e.field, e.reason), Some(e.field)).await;
            return true;
        }
        // The one authorization step, as for every REST route.
        if let Err(d) = self.authorize(&cmd) {
            self.reply_error(Some(rid), d.code, &d.message, world_of(&cmd).map(|_| "world".to_string())).await;
            return true;
        }
        let result = match &cmd {
            ClientMsg::Hello(_) => return true,
            ClientMsg::Ping(p) => {
                let tick = self
                    .subscribed
                    .first()
                    .and_then(|w| self.state.registry.by_id(*w))
                    .map_or(0, |w| w.stats.tick.load(std::sync::atomic::Ordering::Relaxed));
                return self.send(ServerMsg::Pong(proto::Pong { request_id: p.request_id, server_tick: tick })).await;
            }
            ClientMsg::Subscribe(s) => return self.subscribe(rid, &s.world, &s.area, s.every_n_ticks).await,
            ClientMsg::Unsubscribe(u) => {
                let w = match self.world(&u.world) {
                    Ok(w) => w,
                    Err(b) => return self.reply(rid, proto::Outcome::Error(b)).await,
                };
                self.subscribed.retain(|x| *x != w.id);
                self.subs.retain(|(n, _, _)| *n != w.name);
                let result = encode(&ServerMsg::CommandResult(proto::CommandResult { request_id: rid, result: proto::Outcome::Ok(proto::Done {}) }), self.enc);
                return self.ctl.send(Ctl::Unsubscribe { world: w.id, result }).await.is_ok();
            }
            ClientMsg::Spawn(s) => {
                self.run(&s.world, |_| commands_of(&cmd)).await
            }
            ClientMsg::Despawn(m) => self.run(&m.world, |_| commands_of(&cmd)).await,
            ClientMsg::SetBehaviors(m) => self.run(&m.world, |_| commands_of(&cmd)).await,
            ClientMsg::AddBehavior(m) => self.run(&m.world, |_| commands_of(&cmd)).await,
            ClientMsg::RemoveBehavior(m) => self.run(&m.world, |_| commands_of(&cmd)).await,
            ClientMsg::ResetBehaviors(m) => self.run(&m.world, |_| commands_of(&cmd)).await,
            ClientMsg::MoveTo(m) => self.run(&m.world, |_| commands_of(&cmd)).await,
        };
        self.reply(rid, result).await
    }

    /// Decides a message with `authz::decide`, for the session's identity and the world it
    /// names.
    fn authorize(&self, cmd: &ClientMsg) -> Result<crate::authz::Grant, crate::authz::Denial> {
        use crate::authz::{Caller, Target};
        let caller = self.identity.clone().map_or(Caller::Nobody, Caller::Known);
        let target = world_of(cmd).map(|name| Target { name, visibility: self.state.registry.policy(name).visibility });
        crate::authz::decide(self.state.mode, &caller, crate::authz::rule_of_msg(cmd.kind()), target)
    }

    /// Builds the sim commands and applies them in the named world.
    async fn run(&self, world: &str, build: impl FnOnce(&WorldHandle) -> Result<Vec<Command>, CmdError>) -> proto::Outcome {
        let w = match self.world(world) {
            Ok(w) => w,
            Err(b) => return proto::Outcome::Error(b),
        };
        let cmds = match build(&w) {
            Ok(c) => c,
            Err(e) => return proto::Outcome::Error(e.body()),
        };
        match w.apply_many(cmds, self.actor()).await {
            Ok(Outcome::Spawned(ids)) => proto::Outcome::Spawned(proto::Spawned { agents: ids }),
            Ok(_) => proto::Outcome::Ok(proto::Done {}),
            Err(e) => proto::Outcome::Error(e.body()),
        }
    }

    /// Refuses the Hello with `code` and closes.
    async fn refuse(&mut self, code: ErrorCode, message: &str, field: &str, close_code: u16, reason: &'static str) -> bool {
        self.reply_error(None, code, message, Some(field.into())).await;
        let _ = self.ctl.send(Ctl::Close(close_code, reason)).await;
        false
    }

    async fn hello(&mut self, h: &proto::Hello) -> bool {
        if h.protocol_version != proto::PROTOCOL_VERSION {
            self.reply_error(None, ErrorCode::UnsupportedVersion, &format!("protocol version {} is not supported; this server speaks {}", h.protocol_version, proto::PROTOCOL_VERSION), Some("protocol_version".into())).await;
            let _ = self.ctl.send(Ctl::Close(close::POLICY, "unsupported protocol version")).await;
            return false;
        }
        if !self.hello {
            // Who: the token first (none: anonymous in dev mode), so that a resume with a bad
            // token or another player's leaves the session alone; then a resumed session (a
            // resume without a token takes the session's identity), or a new one.
            let presented = match (h.token.as_deref(), h.resume.is_some()) {
                (None, true) => None,
                (token, _) => match self.state.auth.authenticate(token) {
                    Ok(id) => Some(id),
                    Err(e) => return self.refuse(ErrorCode::Unauthorized, &e.0, "token", close::UNAUTHORIZED, "unauthorized").await,
                },
            };
            let Some(handle) = self.handle.take() else { return false };
            let players = &self.state.registry.players;
            let joined = match (h.resume.as_deref(), &presented) {
                (Some(r), p) => players.resume(r, p.as_ref(), self.id, handle, self.peer),
                (None, Some(id)) => players.join(id, self.id, handle, self.peer),
                // Without a resume the token was authenticated above.
                (None, None) => return false,
            };
            let crate::runtime::players::Joined { identity, subs: restore, token, pending } = match joined {
                Ok(j) => j,
                Err(e) if e.is_resume() => return self.refuse(ErrorCode::Unauthorized, &e.to_string(), "resume", close::UNAUTHORIZED, "unauthorized").await,
                Err(e) if e.is_quota() => {
                    let reason = if matches!(e, JoinError::TooManyConnections(..)) { "too many connections" } else { "too many sessions" };
                    return self.refuse(ErrorCode::QuotaExceeded, &e.to_string(), "token", close::UNAUTHORIZED, reason).await;
                }
                Err(e) => return self.refuse(ErrorCode::Busy, &e.to_string(), "token", close::POLICY, "too many sessions").await,
            };
            tracing::debug!(player = %identity.player, role = %identity.role, resumed = h.resume.is_some(), "hello");
            let viewer = Viewer {
                player: (identity.role != proto::Role::Admin).then(|| identity.player.clone()),
                sees_all: identity.role != proto::Role::Player,
                key: identity.vision_key(),
            };
            if self.ctl.send(Ctl::Viewer(viewer)).await.is_err() {
                return false;
            }
            self.identity = Some(identity);
            self.resume_token = Some(token);
            self.enc = if self.url_enc == Encoding::Json { Encoding::Json } else { h.encoding };
            self.shared_enc.set(self.enc);
            self.hello = true;
            if !self.welcome().await {
                return false;
            }
            // A resumed session gets its subscriptions back (keyframes of every cell), then the
            // events about its agents it missed.
            for (world, area, span) in restore {
                if self.world(&world).is_ok() && !self.subscribe_inner(None, &world, &area, span).await {
                    return false;
                }
            }
            for d in pending {
                if self.ctl.send(Ctl::Direct(d)).await.is_err() {
                    return false;
                }
            }
            return true;
        }
        // A later Hello: the same session, welcomed again (its token and resume are ignored).
        self.welcome().await
    }

    async fn welcome(&self) -> bool {
        let Some(who) = &self.identity else { return false };
        let worlds: Vec<proto::WorldInfo> = self.state.registry.list().iter().filter(|w| who.check_world(&w.name).is_ok()).map(WorldHandle::world_info).collect();
        self.send(ServerMsg::Welcome(proto::Welcome {
            protocol_version: proto::PROTOCOL_VERSION,
            // The same fixed quantization every world publishes with (see runtime::world).
            quantization: proto::Quantization::default(),
            worlds,
            max_message_bytes: self.state.settings.limits.max_message_bytes as u32,
            player_id: who.player.clone(),
            role: who.role,
            resume_token: self.resume_token.clone().unwrap_or_default(),
            session_grace_secs: self.state.settings.players.default.session_grace_secs,
        }))
        .await
    }

    async fn subscribe(&mut self, rid: u32, world: &str, area: &proto::Area, span: u32) -> bool {
        self.subscribe_inner(Some(rid), world, area, span).await
    }

    /// Subscribes (`rid`: answer the command; none for a subscription a resume restores).
    async fn subscribe_inner(&mut self, rid: Option<u32>, world: &str, area: &proto::Area, span: u32) -> bool {
        let fail = |code: ErrorCode, message: String, field: &str| proto::ErrorBody { code, message, field: Some(field.into()) };
        let w = match self.world(world) {
            Ok(w) => w,
            Err(b) => return self.fail(rid, b).await,
        };
        if !self.subscribed.contains(&w.id) && self.subscribed.len() >= self.state.settings.limits.max_subscriptions {
            return self.fail(rid, fail(ErrorCode::InvalidField, "too many subscriptions".into(), "world")).await;
        }
        if span == 0 || span > w.rates.max() {
            let message = format!("every_n_ticks must be between 1 and {} (got {span})", w.rates.max());
            return self.fail(rid, fail(ErrorCode::InvalidField, message, "every_n_ticks")).await;
        }
        let info = w.world_info();
        let cells = info.cells_in(area);
        let policy = self.state.registry.policy(&w.name);
        if self.identity.as_ref().is_some_and(|i| i.role == proto::Role::Player) {
            if policy.visibility == Visibility::SpectatorsOnlyWholeWorld && matches!(area, proto::Area::WholeWorld(_)) {
                return self.fail(rid, fail(ErrorCode::Forbidden, format!("in world `{}` only spectators subscribe to whole_world; subscribe to a rect", w.name), "area")).await;
            }
            // Under `owned` visibility the cells delivered are narrowed to what the player sees.
            if policy.visibility != Visibility::Owned && cells.len() > policy.max_subscription_cells {
                let message = format!("a subscription covers at most {} AOI cells in world `{}` (this one {})", policy.max_subscription_cells, w.name, cells.len());
                return self.fail(rid, fail(ErrorCode::QuotaExceeded, message, "area")).await;
            }
        }
        if !self.subscribed.contains(&w.id) {
            self.subscribed.push(w.id);
        }
        self.subs.retain(|(n, _, _)| *n != w.name);
        self.subs.push((w.name.clone(), area.clone(), span));
        self.ctl.send(Ctl::Subscribe { world: w, cells, span, request_id: rid }).await.is_ok()
    }

    /// Answers a failed subscribe (with a request id) or logs a failed restore.
    async fn fail(&self, rid: Option<u32>, body: proto::ErrorBody) -> bool {
        match rid {
            Some(r) => self.reply(r, proto::Outcome::Error(body)).await,
            None => {
                tracing::debug!("subscription not restored: {}", body.message);
                true
            }
        }
    }
}
