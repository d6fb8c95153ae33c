//! `/ws`: the steer-proto WebSocket endpoint.
//!
//! Per connection a receive task (reads the client's messages and carries out what the
//! protocol state machine, `session.rs`, decides: it decodes, validates, rate-limits and
//! dispatches) and a send task (tick frames from the worlds' broadcast, command results from a bounded queue). While a
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
//! What a subscription is sent of each frame is decided in `feed.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::{FutureExt, StreamExt};
use steer_proto::{self as proto, Encoding, ServerMsg};
use tokio::sync::mpsc;
use tokio_stream::StreamMap;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_util::sync::CancellationToken;

use super::state::AppState;
use super::fanout::{Fanout, Handback, Member};
use super::feed::{ByteRate, Cursor, Viewer, encode};
use super::session::{Effect, Env, Flow, Inbound, ReadFault, Rules, Session};
use super::wsio::{self, Frames, queue_messages};
use crate::auth::Identity;
use crate::config::WorldPolicy;
use crate::runtime::players::{ConnHandle, Direct, JoinError, Joined};
use crate::runtime::{RateGuard, SessionId, TickFrame, WorldHandle};

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
        (status = 400, description = "Not a WebSocket upgrade request, or a bad `format`/`batch` value (`bad_request`)", body = super::schema::ErrorBody),
        (status = 403, description = "Origin not allowed (`forbidden`)", body = super::schema::ErrorBody),
        (status = 503, description = "Too many connections, or shutting down (`busy`)", body = super::schema::ErrorBody)))]
pub async fn upgrade(
    State(state): State<AppState>,
    headers: HeaderMap,
    slot: Option<axum::Extension<super::state::ConnSlot>>,
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
    /// Who the connection is (set by Hello, before Welcome): what its frames are filtered by,
    /// and their encoding.
    Viewer(Viewer, Encoding),
    /// A message for this connection alone, in its encoding.
    Direct(Direct),
    /// Stop a subscription.
    Unsubscribe { world: u32, result: Bytes },
    /// Answer a WebSocket ping with this payload.
    Pong(Bytes),
    /// Close with a code and reason.
    Close(u16, &'static str),
    /// The subscriptions a resume restored are in place (the `Subscribe`s before this one):
    /// dropped once handled, it lets a world that arrived by a handoff tick.
    Restored(crate::runtime::players::Awaited),
}

/// A subscription the send task serves.
struct Sub {
    /// The world.
    world: WorldHandle,
    /// Where it stands in the world's frames.
    feed: Cursor,
    /// Keeps the world diffing this rate's cells while the subscription lives.
    _rate: RateGuard,
    /// Its membership of the world's fan-out, while the fan-out sends its frames (left when
    /// the subscription is dropped).
    fast: Option<(Arc<Fanout>, u64)>,
    /// Its connection.
    conn: SessionId,
}

impl Drop for Sub {
    fn drop(&mut self) {
        self.leave_fanout();
    }
}

impl Sub {
    /// Takes the subscription off the world's fan-out, if it is on it (a handback already on
    /// its way is then ignored: it names a membership that is gone).
    fn leave_fanout(&mut self) {
        if let Some((fan, join)) = self.fast.take() {
            fan.leave(self.conn, join);
        }
    }

    /// Whether the fan-out may send its frames from now on (nothing per connection).
    fn steady(&self, frame: &TickFrame, viewer: &Viewer, enc: Encoding) -> bool {
        self.fast.is_none() && self.feed.steady(frame, viewer, enc)
    }
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
        state.metrics.connections.inc();
        let (ctl_tx, ctl_rx) = mpsc::channel::<Ctl>(state.settings.limits.connection_queue.max(1));
        let cancel = state.cancel.child_token();
        let (ev_tx, ev_rx) = mpsc::channel::<Direct>(state.settings.limits.connection_queue.max(1));
        let handle = ConnHandle { events: ev_tx, kick: CancellationToken::new(), bytes_per_sec: Arc::default() };
        let link = Link { id, enc: url_enc, combine: batch, rate: Arc::new(ByteRate::new(handle.bytes_per_sec.clone())), cancel: cancel.clone() };
        let send = tokio::spawn(send_task(writer, ctl_rx, ev_rx, state.clone(), link).instrument(send_span));
        let rules = Rules { mode: state.mode, limits: state.settings.limits.clone(), session_grace_secs: state.settings.players.default.session_grace_secs };
        let mut session = Session::new(rules, url_enc, Instant::now());
        let kick = handle.kick.clone();
        let mut env = AppEnv { state: state.clone(), id, handle: Some(handle), peer };
        recv_task(&mut stream, &ctl_tx, &mut env, &mut session, &cancel, &kick).await;
        if let Some((who, token, subs)) = session.resumable() {
            state.registry.players.leave(&who.player, id, token, subs.to_vec());
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

/// What the send task knows of its connection.
struct Link {
    id: SessionId,
    /// The frames' encoding until Hello sets it.
    enc: Encoding,
    /// `?batch=1`: a tick's messages in one WebSocket message.
    combine: bool,
    /// Its outgoing bytes per second.
    rate: Arc<ByteRate>,
    /// Cancelled when the connection ends.
    cancel: CancellationToken,
}

async fn send_task(mut writer: wsio::Writer, mut ctl: mpsc::Receiver<Ctl>, mut direct: mpsc::Receiver<Direct>, state: AppState, link: Link) {
    let Link { id, mut enc, combine, rate, cancel } = link;
    let mut viewer = Viewer::nobody();
    let write_timeout = state.settings.limits.write_timeout();
    let mut feeds = Feeds::default();
    // A membership hands back at most once, and a subscription joins only after a frame of its
    // world, which this loop reads only when no handback is waiting (handbacks come first in
    // its `select!`): so at most one handback per subscription, and one of each subscription a
    // (re)subscribe replaced since, is ever queued. Twice the subscriptions, with room to spare.
    let (back_tx, mut back_rx) = mpsc::channel::<Handback>(2 * state.settings.limits.max_subscriptions.max(1) + 2);
    let m = &state.metrics;
    // Made once: a `cancelled()` made anew per message would lock the token and register a
    // waiter for every frame sent.
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    let mut frames = Frames::default();
    let closing: Option<(u16, &'static str)> = loop {
        let mut batch: Vec<(Bytes, Encoding)> = Vec::new();
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
                // Set once, by Hello, before any subscription exists.
                Some(Ctl::Viewer(v, e)) => (viewer, enc) = (v, e),
                // The restored subscriptions' receivers exist: the world may tick.
                Some(Ctl::Restored(awaited)) => drop(awaited),
                Some(Ctl::Subscribe { world, cells, span, request_id }) => {
                    feeds.subscribe(id, world, cells, span, request_id, &mut Out { viewer: &viewer, enc, batch: &mut batch, m });
                }
                Some(Ctl::Unsubscribe { world, result }) => {
                    batch.push((result, enc));
                    feeds.unsubscribe(world, m);
                }
            },
            Some(h) = back_rx.recv() => {
                if !feeds.take_back(h, &mut Out { viewer: &viewer, enc, batch: &mut batch, m }) {
                    continue;
                }
                flush = true;
            }
            Some((wid, item)) = feeds.streams.next(), if !feeds.streams.is_empty() => {
                let Some(sub) = feeds.subs.get_mut(&wid) else { continue };
                if let Some(frame) = sub.on_item(item, &mut Out { viewer: &viewer, enc, batch: &mut batch, m }) {
                    steady = Some((wid, frame));
                }
            }
            Some(d) = direct.recv() => batch.push((d.encoded(enc), enc)),
        }
        let items = batch.len() as u64;
        queue_messages(batch, combine, &mut frames);
        if frames.is_empty() && !flush {
            continue;
        }
        if let Err(close) = write_turn(&mut writer, &mut frames, items, write_timeout, m, &rate).await {
            break close;
        }
        if let Some((wid, frame)) = steady
            && let Some(sub) = feeds.subs.get_mut(&wid)
        {
            let port = Port { writer: &writer, viewer: &viewer, combine, rate: &rate, back: &back_tx };
            join_fanout(&state, &port, sub, &mut feeds.streams, &frame);
        }
    };
    m.subscribers.dec_by(feeds.subs.len() as i64);
    // Off every fan-out before the close frame: no writer writes after it.
    feeds.subs.clear();
    if let Some((code, reason)) = closing {
        // After what a timed-out write left (the writer finishes a frame it began), if the
        // client takes it in time.
        frames.clear();
        frames.close(code, reason);
        let _ = tokio::time::timeout(Duration::from_millis(500), writer.write(&mut frames)).await;
    }
    cancel.cancel();
}

/// Writes what a turn queued, within `write_timeout`, and counts it. `Err`: the connection
/// ends, with a close (code, reason) for a reader too slow to take it, none for a broken socket.
async fn write_turn(writer: &mut wsio::Writer, frames: &mut Frames, items: u64, write_timeout: Duration, m: &crate::metrics::Metrics, rate: &ByteRate) -> Result<(), Option<(u16, &'static str)>> {
    let bytes = frames.payload_bytes() as u64;
    let ws_messages = frames.messages() as u64;
    let started = Instant::now();
    let written = tokio::time::timeout(write_timeout, writer.write(frames)).await;
    m.send_micros.inc_by(started.elapsed().as_micros() as u64);
    match written {
        Ok(Ok(())) => {
            m.ws_messages.inc_by(ws_messages);
            m.frames_sent.inc_by(items);
            m.bytes_sent.inc_by(bytes);
            rate.add(bytes, Instant::now());
            Ok(())
        }
        Ok(Err(_)) => Err(None),
        Err(_) => {
            tracing::info!("closing slow client: a write took over {write_timeout:?}");
            m.slow_closes.inc();
            Err(Some((close::SLOW, "slow consumer")))
        }
    }
}

/// The subscriptions a send task serves, and the frames it reads itself: those of the worlds
/// whose fan-out does not send this connection's frames.
#[derive(Default)]
struct Feeds {
    streams: StreamMap<u32, BroadcastStream<Arc<TickFrame>>>,
    subs: HashMap<u32, Sub>,
}

/// Where a turn of the send task puts messages: for whom, in which encoding, counted where.
struct Out<'a> {
    viewer: &'a Viewer,
    enc: Encoding,
    batch: &'a mut Vec<(Bytes, Encoding)>,
    m: &'a crate::metrics::Metrics,
}

impl Feeds {
    /// Starts (or moves) a subscription to `world`'s `cells` at send rate `span`: the frames the
    /// subscription it replaces has not sent yet up to the newest frame, then the `subscribed`
    /// result (for a command), then keyframes of the newest frame.
    fn subscribe(&mut self, conn: SessionId, world: WorldHandle, cells: Vec<u32>, span: u32, request_id: Option<u32>, out: &mut Out<'_>) {
        // Receiver first, then the newest frame: any frame published in between is in the
        // receiver and is skipped by `after` if the keyframes cover it.
        let stream = BroadcastStream::new(world.subscribe());
        let latest = world.latest();
        // The subscription it replaces sends what it has not sent up to the newest frame, so a
        // client that subscribes again (a resync, a pan, after a resume restored the
        // subscription) misses no tick and no event between the frames it had and the
        // keyframes. Later frames are in the new receiver.
        if let Some(old) = self.subs.get_mut(&world.id) {
            let newest = latest.as_ref().map_or(0, |l| l.seq);
            let queued = self.streams.remove(&world.id);
            old.finish(queued, newest, out);
        }
        self.streams.insert(world.id, stream);
        // Then the group table for the result: the publisher updates it before it makes a
        // frame the newest, so a change in a frame the keyframes cover (its events are not
        // sent) is in the table, and one in a later frame comes as that frame's `groups` event.
        // (Read when the command was handled, a change published before this point was
        // announced to nobody here.)
        if let Some(request_id) = request_id {
            let groups = world.groups.lock().map(|g| g.clone()).unwrap_or_else(|p| p.into_inner().clone());
            let result = proto::Outcome::Subscribed(proto::Subscribed { world: world.id, cells: cells.clone(), groups });
            out.batch.push((encode(&ServerMsg::CommandResult(proto::CommandResult { request_id, result }), out.enc), out.enc));
        }
        let wid = world.id;
        let mut sub = Sub { feed: Cursor::new(cells, span), _rate: world.rates.hold(span), fast: None, conn, world };
        if let Some(latest) = latest {
            // Keyframes now (at the newest frame's tick); a rate the world does not keep yet
            // starts with its first frame.
            let n = sub.feed.frame(&latest, out.viewer, out.enc, out.batch, false, out.m);
            out.m.keyframes_sent.inc_by(n);
            sub.feed.after = latest.tick;
            sub.feed.seq = latest.seq;
        }
        // The subscription it replaces (if any) leaves the fan-out as it drops.
        if self.subs.insert(wid, sub).is_none() {
            out.m.subscribers.inc();
        }
    }

    /// Stops the subscription to world `world`, if any.
    fn unsubscribe(&mut self, world: u32, m: &crate::metrics::Metrics) {
        self.streams.remove(&world);
        if self.subs.remove(&world).is_some() {
            m.subscribers.dec();
        }
    }

    /// The fan-out gave a subscription back: read the world's frames again; send those the
    /// world still keeps after the last one sent, the one the writer did not send (if any) in
    /// its place among them; a gap beyond them is resynced by keyframes. False when the handback
    /// names a membership that is gone.
    fn take_back(&mut self, h: Handback, out: &mut Out<'_>) -> bool {
        let Some(sub) = self.subs.get_mut(&h.world) else { return false };
        if sub.fast.as_ref().map(|f| f.1) != Some(h.join) {
            return false;
        }
        sub.fast = None;
        sub.feed.seq = sub.feed.seq.max(h.after);
        // Receiver first, then the kept frames: none falls between them. Those before the
        // handed-back frame first (a writer that lagged, or started after them, never had them).
        self.streams.insert(h.world, BroadcastStream::new(sub.world.subscribe()));
        if let Some(frame) = h.frame {
            sub.catch_up(frame.seq.saturating_sub(1), out);
            let n = sub.feed.on_frame(&frame, out.viewer, out.enc, out.batch, out.m);
            out.m.keyframes_sent.inc_by(n);
        }
        sub.catch_up(u64::MAX, out);
        true
    }
}

impl Sub {
    /// Before a subscription that replaces it: sends the frames this one has not sent, up to
    /// sequence number `upto`: those still `queued` in its receiver (if it reads the world's
    /// frames itself), then those the world still keeps (`limits.frame_history`); after a gap
    /// it cannot fill, nothing (the new subscription's keyframes cover it).
    fn finish(&mut self, queued: Option<BroadcastStream<Arc<TickFrame>>>, upto: u64, out: &mut Out<'_>) {
        if let Some((fan, join)) = self.fast.take() {
            match fan.leave(self.conn, join) {
                Some(after) => self.feed.seq = self.feed.seq.max(after),
                // A handback is on its way with what was sent: unknown here, so nothing is
                // sent twice and the keyframes cover the rest.
                None => return,
            }
        }
        if let Some(mut queued) = queued {
            while let Some(Some(item)) = queued.next().now_or_never() {
                if item.as_ref().is_ok_and(|f| f.seq > upto) {
                    break;
                }
                if item.is_err() {
                    return;
                }
                self.on_item(item, out);
            }
        }
        self.catch_up(upto, out);
    }

    /// Sends the frames the world still keeps after the last one this subscription handled, up
    /// to sequence number `upto`, unless the oldest kept frame leaves a gap (keyframes resync
    /// that, from the next frame read).
    fn catch_up(&mut self, upto: u64, out: &mut Out<'_>) {
        let kept = self.world.frames_after(self.feed.seq);
        if kept.first().is_some_and(|f| f.seq != self.feed.seq + 1) {
            return;
        }
        for frame in kept.into_iter().take_while(|f| f.seq <= upto) {
            self.on_item(Ok(frame), out);
        }
    }

    /// A frame (or a gap) read from the world: what it sends. Answers the frame when it left
    /// the subscription steady (it may join the fan-out after this turn's write).
    fn on_item(&mut self, item: Result<Arc<TickFrame>, BroadcastStreamRecvError>, out: &mut Out<'_>) -> Option<Arc<TickFrame>> {
        match item {
            Ok(frame) => {
                let n = self.feed.on_frame(&frame, out.viewer, out.enc, out.batch, out.m);
                out.m.keyframes_sent.inc_by(n);
                self.steady(&frame, out.viewer, out.enc).then_some(frame)
            }
            Err(BroadcastStreamRecvError::Lagged(n)) => {
                // Skipped frames: the next frame sends keyframes instead of a broken chain.
                out.m.frames_dropped.inc_by(n);
                self.feed.owe_all();
                None
            }
        }
    }
}

/// What a subscription that joins its world's fan-out takes along from its connection.
struct Port<'a> {
    /// The socket's write half (shared with the fan-out if it can be).
    writer: &'a wsio::Writer,
    viewer: &'a Viewer,
    /// `?batch=1`.
    combine: bool,
    rate: &'a Arc<ByteRate>,
    /// Where the fan-out hands the subscription back.
    back: &'a mpsc::Sender<Handback>,
}

/// Hands `sub` to its world's fan-out, which sends its frames after `frame` from now on, if the
/// socket can be shared and has nothing left to write. Stays with this task when the fan-out
/// already passed a later frame (the next frame tries again).
fn join_fanout(state: &AppState, port: &Port<'_>, sub: &mut Sub, streams: &mut StreamMap<u32, BroadcastStream<Arc<TickFrame>>>, frame: &TickFrame) {
    let Some(out) = port.writer.shared() else { return };
    if sub.feed.seq != frame.seq || !out.idle() {
        return;
    }
    let Some(fan) = state.fanout(&sub.world) else { return };
    let join = fan.next_join();
    let wid = sub.world.id;
    let member = Member {
        world: wid,
        conn: sub.conn,
        join,
        out: out.clone(),
        key: sub.feed.key,
        span: sub.feed.span,
        cells: sub.feed.cells.clone(),
        viewer: port.viewer.clone(),
        combine: port.combine,
        after: sub.feed.seq,
        back: port.back.clone(),
        rate: port.rate.clone(),
    };
    if fan.join(member) {
        sub.fast = Some((fan, join));
        streams.remove(&wid);
    }
}

/// The server as a session reads it: the registry, the token checker, and this connection's
/// registration with the players registry (used by the first Hello).
struct AppEnv {
    state: AppState,
    id: SessionId,
    handle: Option<ConnHandle>,
    /// The client's address (what `auth.max_sessions_per_ip` counts).
    peer: Option<std::net::IpAddr>,
}

impl Env for AppEnv {
    type World = WorldHandle;

    fn authenticate(&self, token: Option<&str>) -> Result<Identity, String> {
        self.state.auth.authenticate(token).map_err(|e| e.0)
    }

    fn join(&mut self, resume: Option<&str>, presented: Option<&Identity>) -> Option<Result<Joined, JoinError>> {
        let handle = self.handle.take()?;
        let players = &self.state.registry.players;
        Some(match (resume, presented) {
            (Some(r), p) => players.resume(r, p, self.id, handle, self.peer),
            (None, Some(id)) => players.join(id, self.id, handle, self.peer),
            (None, None) => return None,
        })
    }

    fn world(&self, name: &str) -> Result<WorldHandle, String> {
        self.state.registry.get(name).map_err(|e| e.to_string())
    }

    fn info(&self, world: &WorldHandle) -> proto::WorldInfo {
        world.world_info()
    }

    fn max_rate(&self, world: &WorldHandle) -> u32 {
        world.rates.max()
    }

    fn policy(&self, name: &str) -> &WorldPolicy {
        self.state.registry.policy(name)
    }

    fn worlds(&self) -> Vec<proto::WorldInfo> {
        self.state.registry.list().iter().map(WorldHandle::world_info).collect()
    }

    fn tick(&self, world: u32) -> u64 {
        self.state.registry.by_id(world).map_or(0, |w| w.stats.tick.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// What the client sent, as the session reads it.
fn inbound(m: Message) -> Inbound {
    match m {
        Message::Binary(b) => Inbound::Binary(b),
        Message::Text(t) => Inbound::Text(t.as_str().to_owned()),
        Message::Ping(p) => Inbound::Ping(p),
        Message::Pong(_) | Message::Frame(_) => Inbound::Pong,
        Message::Close(_) => Inbound::Close,
    }
}

/// Why tungstenite refused what the client sent: a message or frame over the size limit, or a
/// protocol violation.
fn fault_of(e: &WsError) -> ReadFault {
    match e {
        WsError::Capacity(_) | WsError::Protocol(ProtocolError::ControlFrameTooBig) => ReadFault::TooBig,
        WsError::ConnectionClosed
        | WsError::AlreadyClosed
        | WsError::Io(_)
        | WsError::Tls(_)
        | WsError::Protocol(_)
        | WsError::WriteBufferFull(_)
        | WsError::Utf8(_)
        | WsError::AttackAttempt
        | WsError::Url(_)
        | WsError::Http(_)
        | WsError::HttpFormat(_) => ReadFault::Protocol,
    }
}

/// Reads the client's messages into the session and carries out its effects, until the session
/// stops, the socket ends or the server shuts down.
async fn recv_task(stream: &mut wsio::Reader, ctl: &mpsc::Sender<Ctl>, env: &mut AppEnv, session: &mut Session, cancel: &CancellationToken, kick: &CancellationToken) {
    let hello_deadline = tokio::time::Instant::now() + session.hello_timeout();
    let mut out = Vec::new();
    loop {
        let flow = tokio::select! {
            () = cancel.cancelled() => return,
            () = kick.cancelled() => session.kicked(&mut out),
            () = tokio::time::sleep_until(hello_deadline), if !session.welcomed() => session.hello_timed_out(&mut out),
            m = stream.next() => match m {
                None => return,
                Some(Err(e)) => {
                    tracing::debug!("receive error: {e}");
                    session.read_fault(fault_of(&e), &mut out)
                }
                Some(Ok(m)) => session.on_message(env, inbound(m), Instant::now(), &mut out),
            },
        };
        let subs_changed = out.iter().any(|e| matches!(e, Effect::Subscribe { .. } | Effect::Unsubscribe { .. }));
        if !carry_out(&mut out, session, ctl, &env.state).await || flow == Flow::Stop {
            return;
        }
        if subs_changed && let Some((_, token, subs)) = session.resumable() {
            // Who uses which world, for a handoff (`http/handoff.rs`).
            env.state.registry.players.set_subs(token, env.id, subs);
        }
    }
}

/// Carries out the session's effects in order; false if the send task is gone.
async fn carry_out(out: &mut Vec<Effect<WorldHandle>>, session: &mut Session, ctl: &mpsc::Sender<Ctl>, state: &AppState) -> bool {
    let mut queue: std::collections::VecDeque<Effect<WorldHandle>> = out.drain(..).collect();
    while let Some(effect) = queue.pop_front() {
        let c = match effect {
            Effect::Send(b, e) => Ctl::Send(b, e),
            Effect::Pong(p) => Ctl::Pong(p),
            Effect::Viewer(v, e) => Ctl::Viewer(v, e),
            Effect::Direct(d) => Ctl::Direct(d),
            Effect::Subscribe { world, cells, span, request_id } => Ctl::Subscribe { world, cells, span, request_id },
            Effect::Unsubscribe { world, result } => Ctl::Unsubscribe { world, result },
            Effect::Close(code, reason) => Ctl::Close(code, reason),
            Effect::Restored(awaited) => Ctl::Restored(awaited),
            Effect::RateLimited => {
                state.metrics.command("rate_limited", false);
                continue;
            }
            Effect::Apply { request_id, world, commands, actor } => {
                // The outcome's reply goes out before anything the session decided after it.
                let result = world.apply_many(commands, actor).await;
                let mut reply = Vec::new();
                session.applied(request_id, result, &mut reply);
                reply.into_iter().rev().for_each(|e| queue.push_front(e));
                continue;
            }
        };
        if ctl.send(c).await.is_err() {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::world::Request;
    use tokio_util::task::TaskTracker;

    /// A paused circle world of a registry whose worlds keep `history` frames, stepped once.
    async fn world(history: usize) -> (crate::runtime::Registry, WorldHandle, Arc<crate::metrics::Metrics>) {
        let players = Arc::new(crate::runtime::Players::new(crate::config::AuthSettings::default(), 0));
        let m = Arc::new(crate::metrics::Metrics::new());
        let limits = crate::config::LimitSettings { frame_history: history, ..Default::default() };
        let reg = crate::runtime::Registry::new(limits, crate::config::PlayerSettings::default(), players, m.clone()).unwrap();
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/circle.json");
        let w = reg.create("w", crate::scenario::Scenario::from_file(&path).unwrap(), None, true).unwrap();
        step(&w).await;
        (reg, w, m)
    }

    async fn step(w: &WorldHandle) {
        w.ask(|reply| Request::Step { ticks: 1, reply }).await.unwrap();
    }

    fn whole(w: &WorldHandle) -> Vec<u32> {
        w.info.lock().unwrap().cells_in(&proto::Area::WholeWorld(proto::WholeWorld {}))
    }

    /// A JSON connection's feeds subscribed to all of `w` (answering `rid`), and what it sent.
    fn subscribed(w: &WorldHandle, m: &crate::metrics::Metrics, viewer: &Viewer, rid: Option<u32>) -> (Feeds, Vec<(Bytes, Encoding)>) {
        let mut feeds = Feeds::default();
        let mut batch = Vec::new();
        feeds.subscribe(1, w.clone(), whole(w), 1, rid, &mut Out { viewer, enc: Encoding::Json, batch: &mut batch, m });
        (feeds, batch)
    }

    fn decoded(batch: &[(Bytes, Encoding)]) -> Vec<ServerMsg> {
        batch.iter().map(|(b, _)| proto::decode_json(std::str::from_utf8(b).unwrap(), usize::MAX).unwrap()).collect()
    }

    /// The ticks of the deltas in `msgs`, in order, once each.
    fn delta_ticks(msgs: &[ServerMsg]) -> Vec<u64> {
        let mut t: Vec<u64> = msgs.iter().filter_map(|x| if let ServerMsg::Delta(d) = x { Some(d.tick) } else { None }).collect();
        t.dedup();
        t
    }

    fn keyframes(msgs: &[ServerMsg]) -> usize {
        msgs.iter().filter(|x| matches!(x, ServerMsg::Keyframe(_))).count()
    }

    /// Asserts the client sees the ticks after `first` up to `last` as deltas, then the
    /// `subscribed` answer to `rid`, then keyframes.
    fn assert_resubscribed(batch: &[(Bytes, Encoding)], rid: u32, first: u64, last: u64) {
        let msgs = decoded(batch);
        let answer = msgs.iter().position(|x| matches!(x, ServerMsg::CommandResult(r) if r.request_id == rid)).expect("the subscribed answer");
        assert_eq!(delta_ticks(&msgs[..answer]), (first + 1..=last).collect::<Vec<_>>(), "{msgs:?}");
        assert_eq!(keyframes(&msgs[..answer]), 0, "{msgs:?}");
        assert!(keyframes(&msgs[answer..]) > 0, "keyframes after the answer: {msgs:?}");
    }

    /// A Subscribe that replaces a subscription whose frames are still queued (a client that
    /// subscribes again, as the SDKs do after a resume restored the subscription) sends those
    /// frames first: the client sees every tick, then the answer, then the keyframes. The
    /// world keeps one frame here, so the queue alone has both.
    #[tokio::test]
    async fn a_subscribe_again_sends_the_frames_queued_for_the_subscription_it_replaces() {
        let (_reg, w, m) = world(1).await;
        let viewer = Viewer::nobody();
        let (mut feeds, mut batch) = subscribed(&w, &m, &viewer, Some(1));
        let first = w.latest().unwrap().tick;
        // Two frames published and not read yet when the client subscribes again.
        step(&w).await;
        step(&w).await;
        batch.clear();
        feeds.subscribe(1, w.clone(), whole(&w), 1, Some(2), &mut Out { viewer: &viewer, enc: Encoding::Json, batch: &mut batch, m: &m });
        assert_resubscribed(&batch, 2, first, first + 2);
        // The stream goes on after the keyframes' frame, not before it.
        step(&w).await;
        let (_, item) = feeds.streams.next().await.unwrap();
        assert_eq!(item.unwrap().tick, first + 3);
        w.shutdown();
    }

    /// A subscription the fan-out serves reads no frames itself: a Subscribe that replaces it
    /// takes it off the fan-out and sends, from the frames the world keeps, those the fan-out
    /// had not written (here: a writer that never got them), then the answer and keyframes.
    #[tokio::test]
    async fn a_subscribe_again_sends_what_the_fan_out_had_not_written_yet() {
        let (_reg, w, m) = world(8).await;
        let viewer = Viewer::nobody();
        let (mut feeds, mut batch) = subscribed(&w, &m, &viewer, Some(1));
        let first = w.latest().unwrap().tick;
        // The subscription joins a fan-out whose writer reads a channel nobody sends on.
        let (tx, _keep) = tokio::sync::broadcast::channel::<Arc<TickFrame>>(4);
        let tracker = TaskTracker::new();
        let fan = Fanout::over(|| tx.subscribe(), 1, m.clone(), &tracker, CancellationToken::new());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let writer = wsio::Writer::tcp(server.into_split().1);
        let (back, _back_rx) = mpsc::channel(4);
        let sub = feeds.subs.get_mut(&w.id).unwrap();
        let join = fan.next_join();
        let member = Member {
            world: w.id,
            conn: 1,
            join,
            out: writer.shared().unwrap().clone(),
            key: sub.feed.key,
            span: 1,
            cells: sub.feed.cells.clone(),
            viewer: viewer.clone(),
            combine: false,
            after: sub.feed.seq,
            back,
            rate: Arc::new(ByteRate::new(Arc::default())),
        };
        assert!(fan.join(member));
        sub.fast = Some((fan.clone(), join));
        feeds.streams.remove(&w.id);
        step(&w).await;
        step(&w).await;
        batch.clear();
        feeds.subscribe(1, w.clone(), whole(&w), 1, Some(2), &mut Out { viewer: &viewer, enc: Encoding::Json, batch: &mut batch, m: &m });
        assert_resubscribed(&batch, 2, first, first + 2);
        assert_eq!(m.fanout_members.get(), 0, "off the fan-out");
        w.shutdown();
    }

    /// A subscription the fan-out hands back sends the frames the writer never had (here the
    /// first: a writer started after it was published), the frame it did not send and every
    /// later one the world keeps, in order, as deltas: no gap, so no keyframes.
    #[tokio::test]
    async fn a_handed_back_subscription_sends_the_frames_after_the_handback_as_deltas() {
        let (_reg, w, m) = world(8).await;
        let viewer = Viewer::nobody();
        let (mut feeds, mut batch) = subscribed(&w, &m, &viewer, None);
        let (first, after) = w.latest().map(|f| (f.tick, f.seq)).unwrap();
        let (tx, _keep) = tokio::sync::broadcast::channel::<Arc<TickFrame>>(4);
        let fan = Fanout::over(|| tx.subscribe(), 1, m.clone(), &TaskTracker::new(), CancellationToken::new());
        let join = fan.next_join();
        feeds.subs.get_mut(&w.id).unwrap().fast = Some((fan, join));
        feeds.streams.remove(&w.id);
        for _ in 0..3 {
            step(&w).await;
        }
        // Handed back at the second of them; one more published since.
        let unsent = w.frames_after(after).into_iter().nth(1);
        batch.clear();
        assert!(feeds.take_back(Handback { world: w.id, join, after, frame: unsent }, &mut Out { viewer: &viewer, enc: Encoding::Json, batch: &mut batch, m: &m }));
        let msgs = decoded(&batch);
        assert_eq!(delta_ticks(&msgs), vec![first + 1, first + 2, first + 3], "{msgs:?}");
        assert_eq!(keyframes(&msgs), 0, "{msgs:?}");
        // A handback of a membership already gone changes nothing.
        assert!(!feeds.take_back(Handback { world: w.id, join, after, frame: None }, &mut Out { viewer: &viewer, enc: Encoding::Json, batch: &mut batch, m: &m }));
        w.shutdown();
    }
}
