//! The world's fan-out writers: one pass per tick frame writes the same bytes to every steady
//! subscriber's socket, instead of waking each connection's send task to do it.
//!
//! A subscriber is *steady* when nothing about its next frames is per connection: binary, on a
//! TCP socket, no keyframe owed, every cell in sight (no `owned` visibility filter for it), and
//! nothing left unwritten on its socket. Its send task then *joins* the world's fan-out with
//! the frame sequence number it has sent up to, and stops reading the world's frames itself.
//! Per frame a writer (a task of the world's, `limits.fanout_writers` of them, each with its
//! share of the members) takes the subscription's shared `cells` message
//! ([`TickFrame::shared_message`], the same one the send task would take), frames it once per
//! rectangle and rate, adds the events the viewer may see, and offers it to the socket without
//! waiting ([`TcpOut::offer`]).
//!
//! The member goes back to its send task (a [`Handback`]) when a frame is not steady for it (a
//! world reset, a vision filter, a rate not kept), when the socket does not take a whole write
//! at once (the rest stays queued in [`TcpOut`]; the send task finishes it under the write
//! timeout, so the slow-reader rules are the send task's, unchanged), or when the writer missed
//! frames (lagged) or stops (a panic included: its shard's lock is taken back from the
//! poison). The send task resubscribes and resumes after the handed-back sequence number, with
//! the frames in between from the world's newest frames (`limits.frame_history`); a frame older
//! than those shows as a gap in `seq` and is covered by keyframes, as after a lag.
//!
//! **Invariant:** a member's socket is written by its writer only while it is a member, and
//! [`Fanout::leave`] returns only once the writer is not writing to it: after it, the send task
//! may write a close frame knowing nothing follows.
//! **Invariant:** a member gets every frame after its `after` sequence number exactly once, by
//! its writer or, after a handback, by its send task (or a keyframe resync where a gap shows).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use steer_proto::Encoding;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::feed::{ByteRate, Viewer, steady_cells};
use super::wsio::{Frames, TcpOut, queue_messages};
use crate::metrics::Metrics;
use crate::runtime::{SessionId, SetKey, TickFrame, WorldHandle};

/// A member given back to its send task.
#[derive(Debug)]
pub struct Handback {
    /// The world.
    pub world: u32,
    /// Which membership (a send task ignores handbacks of one it already left).
    pub join: u64,
    /// Frames up to this sequence number were sent.
    pub after: u64,
    /// The frame the writer did not send (it is the send task's to send), if any.
    pub frame: Option<Arc<TickFrame>>,
}

/// A steady subscriber as its send task hands it over.
pub struct Member {
    /// The world.
    pub world: u32,
    /// The connection.
    pub conn: SessionId,
    /// Its membership number (from [`Fanout::next_join`]).
    pub join: u64,
    /// Its socket.
    pub out: Arc<TcpOut>,
    /// Its subscription: shared-message key, rate and cells.
    pub key: SetKey,
    /// `every_n_ticks`.
    pub span: u32,
    /// The subscription's cells.
    pub cells: Arc<[u32]>,
    /// Whom the frames' events are filtered for.
    pub(crate) viewer: Viewer,
    /// `?batch=1`: a tick's messages go as one WebSocket message.
    pub combine: bool,
    /// Frames up to this sequence number were sent.
    pub after: u64,
    /// Where handbacks go (the send task's queue, one slot per world it may subscribe to).
    pub back: mpsc::Sender<Handback>,
    /// The connection's outgoing bytes per second.
    pub(crate) rate: Arc<ByteRate>,
}

impl Member {
    fn hand_back(&self, frame: Option<Arc<TickFrame>>) {
        let h = Handback { world: self.world, join: self.join, after: self.after, frame };
        // The queue has room for every handback a connection can have queued (see
        // `send_task`); closed means the send task is gone.
        if let Err(mpsc::error::TrySendError::Full(_)) = self.back.try_send(h) {
            tracing::error!(world = self.world, "a fan-out handback found its connection's queue full");
        }
    }
}

/// A writer's shard, also after a panic while it was held (its members are then handed back:
/// see [`Stop`]).
fn lock(shard: &Mutex<Shard>) -> std::sync::MutexGuard<'_, Shard> {
    shard.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

struct Shard {
    members: Vec<Member>,
    /// The newest frame this writer has passed (a member joining after it would miss it).
    seen: u64,
    /// The writer stopped: nobody may join.
    stopped: bool,
}

/// A world's fan-out writers.
pub struct Fanout {
    shards: Vec<Arc<Mutex<Shard>>>,
    joins: AtomicU64,
    metrics: Arc<Metrics>,
}

impl Fanout {
    /// Starts `writers` writer tasks on `tracker` for `world`, until `cancel` or the world ends.
    pub fn start(world: &WorldHandle, writers: usize, metrics: Arc<Metrics>, tracker: &TaskTracker, cancel: CancellationToken) -> Arc<Fanout> {
        let fan = Fanout::over(|| world.subscribe(), writers, metrics, tracker, cancel);
        // Read after the writers' receivers were made: what the world published before is not
        // in them.
        if let Some(newest) = world.latest() {
            fan.seen_up_to(newest.seq);
        }
        fan
    }

    /// The writers never get frames up to `seq` (published before their receivers were made):
    /// a member sent less than that may not join, nobody would send it the rest.
    fn seen_up_to(&self, seq: u64) {
        for shard in &self.shards {
            let mut s = lock(shard);
            s.seen = s.seen.max(seq);
        }
    }

    /// Starts `writers` writer tasks, each reading the frames of its own `subscribe()`.
    pub(crate) fn over(subscribe: impl Fn() -> broadcast::Receiver<Arc<TickFrame>>, writers: usize, metrics: Arc<Metrics>, tracker: &TaskTracker, cancel: CancellationToken) -> Arc<Fanout> {
        let shards: Vec<_> = (0..writers.max(1)).map(|_| Arc::new(Mutex::new(Shard { members: Vec::new(), seen: 0, stopped: false }))).collect();
        for shard in &shards {
            tracker.spawn(writer(subscribe(), shard.clone(), metrics.clone(), cancel.clone()));
        }
        Arc::new(Fanout { shards, joins: AtomicU64::new(0), metrics })
    }

    /// A fresh membership number.
    pub fn next_join(&self) -> u64 {
        self.joins.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Takes `m` on, to be sent the frames after `m.after`. Refuses (false) when a writer has
    /// already passed a frame after that one, or started after it was published (the send task
    /// has it; it tries again later), or the writers stopped.
    pub fn join(&self, m: Member) -> bool {
        let Some(shard) = self.shards.iter().min_by_key(|s| lock(s).members.len()) else { return false };
        let mut s = lock(shard);
        if s.stopped || s.seen > m.after {
            return false;
        }
        s.members.push(m);
        self.metrics.fanout_members.inc();
        true
    }

    /// Whether every writer has written the frame `seq` (or a later one) to its members, or
    /// stopped: a message sent to a member's connection after this comes after that frame.
    pub fn passed(&self, seq: u64) -> bool {
        self.shards.iter().all(|s| {
            let s = lock(s);
            s.stopped || s.seen >= seq
        })
    }

    /// Whether a writer stopped (the world ended, or it failed): a new fan-out is needed.
    pub fn stopped(&self) -> bool {
        self.shards.iter().any(|s| lock(s).stopped)
    }

    /// Takes the membership `join` of `conn` off its writer. Returns the sequence number sent
    /// up to, or `None` if it was no longer a member (a handback is on its way, or it never
    /// joined). Once it returns, no writer writes to the member's socket.
    pub fn leave(&self, conn: SessionId, join: u64) -> Option<u64> {
        for shard in &self.shards {
            let mut s = lock(shard);
            if let Some(i) = s.members.iter().position(|m| m.conn == conn && m.join == join) {
                self.metrics.fanout_members.dec();
                return Some(s.members.swap_remove(i).after);
            }
        }
        None
    }
}

/// One writer: per frame, sends it to its members.
async fn writer(mut rx: broadcast::Receiver<Arc<TickFrame>>, shard: Arc<Mutex<Shard>>, m: Arc<Metrics>, cancel: CancellationToken) {
    // However the writer ends, a panic included, its members go back to their send tasks.
    let _stop = Stop { shard: shard.clone(), metrics: m.clone() };
    loop {
        let frame = tokio::select! {
            () = cancel.cancelled() => None,
            r = rx.recv() => match r {
                Ok(f) => Some(f),
                // Frames this writer never saw: its members resync from their send tasks.
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    m.frames_dropped.inc_by(n);
                    hand_back_all(&shard, false, &m);
                    continue;
                }
                Err(broadcast::error::RecvError::Closed) => None,
            },
        };
        let Some(frame) = frame else { break };
        let mut s = lock(&shard);
        s.seen = frame.seq;
        if s.members.is_empty() {
            continue;
        }
        let started = Instant::now();
        let mut pass = Pass::default();
        s.members.retain_mut(|mb| {
            if frame.seq <= mb.after {
                return true;
            }
            let steady = frame.seq == mb.after + 1 && !frame.reset && (frame.vision.is_none() || mb.viewer.sees_all()) && frame.cells_at(mb.span).is_some();
            if !steady {
                m.fanout_members.dec();
                m.fanout_handbacks.inc();
                mb.hand_back(Some(frame.clone()));
                return false;
            }
            let done = pass.send(&frame, mb, &m, started);
            mb.after = frame.seq;
            if matches!(done, Ok(true)) {
                return true;
            }
            // The socket did not take it all (the rest stays queued), or failed: its send task
            // takes over.
            m.fanout_members.dec();
            m.fanout_handbacks.inc();
            mb.hand_back(None);
            false
        });
        m.send_micros.inc_by(started.elapsed().as_micros() as u64);
        m.ws_messages.inc_by(pass.ws_messages);
        m.frames_sent.inc_by(pass.items);
        m.bytes_sent.inc_by(pass.bytes);
        m.fanout_writes.inc_by(pass.sockets);
        m.cells_shared_hits.inc_by(pass.hits);
    }
}

/// Ends a writer: hands its members back and stops its shard for good (on drop, so also when
/// the writer panics).
struct Stop {
    shard: Arc<Mutex<Shard>>,
    metrics: Arc<Metrics>,
}

impl Drop for Stop {
    fn drop(&mut self) {
        hand_back_all(&self.shard, true, &self.metrics);
    }
}

/// Gives every member back (with nothing unsent: the next frame is theirs); `stop`: for good.
fn hand_back_all(shard: &Mutex<Shard>, stop: bool, m: &Metrics) {
    let mut s = lock(shard);
    s.stopped |= stop;
    for mb in std::mem::take(&mut s.members) {
        m.fanout_members.dec();
        m.fanout_handbacks.inc();
        mb.hand_back(None);
    }
}

/// A member's messages of one frame as they go on the wire.
struct Wire {
    /// WebSocket frames, heads and payloads back to back.
    bytes: Bytes,
    /// Messages before batching.
    items: u64,
    /// WebSocket messages.
    messages: u64,
    /// Payload bytes.
    payload: u64,
}

impl Wire {
    fn new(batch: Vec<Bytes>, combine: bool) -> Wire {
        let items = batch.len() as u64;
        let mut f = Frames::default();
        queue_messages(batch.into_iter().map(|b| (b, Encoding::Binary)).collect(), combine, &mut f);
        Wire { bytes: f.to_bytes(), items, messages: f.messages() as u64, payload: f.payload_bytes() as u64 }
    }
}

/// One frame's pass over a writer's members: the wire bytes made so far, by rectangle and rate
/// (a member whose viewer takes any of the frame's events gets its own).
#[derive(Default)]
struct Pass {
    framed: HashMap<SetKey, Wire>,
    ws_messages: u64,
    items: u64,
    /// Members sent a `cells` message this pass framed for another member.
    hits: u64,
    bytes: u64,
    sockets: u64,
}

impl Pass {
    fn send(&mut self, frame: &TickFrame, mb: &mut Member, m: &Metrics, now: Instant) -> std::io::Result<bool> {
        let events: Vec<Bytes> = frame.events.iter().filter(|e| mb.viewer.wants(frame, e)).map(|e| e.msg.encoded(Encoding::Binary)).collect();
        let own;
        let wire = if events.is_empty() {
            match self.framed.entry(mb.key) {
                std::collections::hash_map::Entry::Occupied(e) => {
                    self.hits += e.get().items;
                    e.into_mut()
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    let cells = steady_cells(frame, mb.span, mb.key, &mb.cells, m);
                    e.insert(Wire::new(cells.into_iter().collect(), mb.combine))
                }
            }
        } else {
            let mut batch: Vec<Bytes> = steady_cells(frame, mb.span, mb.key, &mb.cells, m).into_iter().collect();
            batch.extend(events);
            own = Wire::new(batch, mb.combine);
            &own
        };
        if wire.bytes.is_empty() {
            return Ok(true);
        }
        let sent = mb.out.offer_bytes(&wire.bytes)?;
        let bytes = wire.payload;
        self.ws_messages += wire.messages;
        self.items += wire.items;
        self.bytes += bytes;
        self.sockets += 1;
        mb.rate.add(bytes, now);
        Ok(sent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn frame(seq: u64, reset: bool) -> Arc<TickFrame> {
        Arc::new(TickFrame {
            world: 1,
            tick: 100 + seq,
            seq,
            cells: Vec::new(),
            rates: Vec::new(),
            checksum_every: 10,
            shared: Default::default(),
            max_shared: 4,
            events: Vec::new(),
            reset,
            vision: None,
        })
    }

    async fn socket() -> (Arc<TcpOut>, tokio::net::TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (_r, w) = server.into_split();
        (super::super::wsio::Writer::tcp(w).shared().unwrap().clone(), client)
    }

    fn member(out: Arc<TcpOut>, join: u64, after: u64, back: mpsc::Sender<Handback>) -> Member {
        Member {
            world: 1,
            conn: 7,
            join,
            out,
            key: (1, 0, 0, 0),
            span: 1,
            cells: Arc::from(Vec::<u32>::new()),
            viewer: Viewer::nobody(),
            combine: true,
            after,
            back,
            rate: Arc::new(ByteRate::new(Arc::default())),
        }
    }

    /// Waits until the writer has passed frame `seq`.
    async fn passed(fan: &Fanout, seq: u64) {
        for _ in 0..500 {
            if fan.passed(seq) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("the writer never passed frame {seq}");
    }

    /// Writers started after a frame was published never get it: a member sent only the frames
    /// before it may not join (the writer would skip it), one sent it may.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_behind_the_frames_before_the_writers_started_is_refused() {
        let (tx, _keep) = broadcast::channel::<Arc<TickFrame>>(16);
        tx.send(frame(1, false)).unwrap();
        let metrics = Arc::new(Metrics::new());
        let tracker = TaskTracker::new();
        let fan = Fanout::over(|| tx.subscribe(), 1, metrics.clone(), &tracker, CancellationToken::new());
        fan.seen_up_to(1);
        let (out, _client) = socket().await;
        let (back_tx, mut back_rx) = mpsc::channel(4);
        assert!(!fan.join(member(out.clone(), 1, 0, back_tx.clone())), "frame 1 is in no writer's receiver");
        assert!(fan.join(member(out, 2, 1, back_tx)));
        tx.send(frame(2, false)).unwrap();
        passed(&fan, 2).await;
        assert!(back_rx.try_recv().is_err(), "frame 2 follows the member's 1: sent, not handed back");
        assert_eq!(fan.leave(7, 2), Some(2));
    }

    /// The membership rules: a join after a frame the writer already passed is refused (the
    /// member would miss it); frames up to `after` are the send task's; a reset hands the member
    /// back with the frame it did not send; leave says what was sent, and only once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn joins_skips_handbacks_and_leaves() {
        let (tx, _keep) = broadcast::channel::<Arc<TickFrame>>(16);
        let metrics = Arc::new(Metrics::new());
        let tracker = TaskTracker::new();
        let cancel = CancellationToken::new();
        let fan = Fanout::over(|| tx.subscribe(), 1, metrics.clone(), &tracker, cancel.clone());
        let (out, _client) = socket().await;
        let (back_tx, mut back_rx) = mpsc::channel(4);
        assert!(!fan.passed(1), "no frame written yet");

        tx.send(frame(1, false)).unwrap();
        tx.send(frame(2, false)).unwrap();
        passed(&fan, 2).await;
        assert!(!fan.join(member(out.clone(), 1, 1, back_tx.clone())), "frame 2 already passed: a member sent up to 1 would miss it");
        assert!(fan.join(member(out.clone(), 2, 3, back_tx.clone())), "a member ahead of the writer");
        assert_eq!(metrics.fanout_members.get(), 1);
        // Frame 3 is the member's own (sent by its task); frame 4 the writer sends.
        tx.send(frame(3, false)).unwrap();
        tx.send(frame(4, false)).unwrap();
        passed(&fan, 4).await;
        assert!(back_rx.try_recv().is_err(), "steady frames are not handed back");
        // A reset is not steady: handed back with the reset frame, after = 4.
        tx.send(frame(5, true)).unwrap();
        let h = tokio::time::timeout(Duration::from_secs(5), back_rx.recv()).await.unwrap().unwrap();
        assert_eq!((h.world, h.join, h.after), (1, 2, 4));
        assert_eq!(h.frame.map(|f| f.seq), Some(5));
        assert_eq!(metrics.fanout_members.get(), 0);
        assert_eq!(metrics.fanout_handbacks.get(), 1);
        assert_eq!(fan.leave(7, 2), None, "handed back: no longer a member");

        // A new membership, left by its send task: leave reports the frames sent up to.
        assert!(fan.join(member(out.clone(), 3, 5, back_tx.clone())));
        tx.send(frame(6, false)).unwrap();
        passed(&fan, 6).await;
        assert_eq!(fan.leave(7, 3), Some(6));
        assert_eq!(fan.leave(7, 3), None);
        assert_eq!(metrics.fanout_members.get(), 0);

        // Shutdown hands every member back and stops the writers for good.
        assert!(fan.join(member(out, 4, 6, back_tx)));
        cancel.cancel();
        let h = tokio::time::timeout(Duration::from_secs(5), back_rx.recv()).await.unwrap().unwrap();
        assert_eq!((h.join, h.after), (4, 6));
        assert!(h.frame.is_none());
        tracker.close();
        tracker.wait().await;
        assert!(fan.stopped());
        assert!(fan.passed(99), "a stopped fan-out holds no message back");
    }
}
