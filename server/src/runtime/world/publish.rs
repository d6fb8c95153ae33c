//! The publisher: a tick's frames for subscribers. It keeps the AOI cells' encoders (one diff
//! per cell per tick, and one per cell of each other send rate in use), the frames' counters,
//! what subscribers were last told (tick rate, groups), and the broadcast they listen on.

use std::sync::{Arc, Mutex};

use steer_proto as proto;
use tokio::sync::broadcast;

use super::super::frames::{CellFrame, FrameEvent, RateCells, Recent, Shared, TickFrame};
use super::types::{RateUsers, Vision, world_info};
use crate::convert;
use crate::sim::World;

pub(super) struct Publisher {
    /// The world's wire id.
    pub(super) id: u32,
    pub(super) encoders: Vec<proto::CellEncoder>,
    pub(super) keys: Vec<Arc<Shared<proto::ServerMsg>>>,
    /// Encoders and keys of each send rate in use other than 1.
    pub(super) rate_sets: Vec<RateSet>,
    pub(super) rate_users: Arc<RateUsers>,
    /// Shared `cells` messages per tick.
    pub(super) max_shared: usize,
    /// The AOI grid and tick rate as announced, and its copy the handle shows.
    pub(super) info: proto::WorldInfo,
    pub(super) shared_info: Arc<Mutex<proto::WorldInfo>>,
    pub(super) max_aoi_cells: u32,
    /// The tick rate subscribers were last told (the next publish announces a different one).
    pub(super) announced_rate: f32,
    /// The group names subscribers were last told, and their copy a subscribe answers with.
    pub(super) announced_groups: Vec<String>,
    pub(super) shared_groups: Arc<Mutex<Vec<String>>>,
    pub(super) frames: broadcast::Sender<Arc<TickFrame>>,
    /// The newest frames (a new subscriber starts from the newest).
    pub(super) recent: Arc<Mutex<Recent>>,
    /// Frames published (the last one's `seq`).
    pub(super) published: u64,
    /// The next publish marks its frame as a reset.
    pub(super) reset_pending: bool,
    /// Frames carry checksums on ticks that are multiples of this (≥ 1).
    pub(super) checksum_every: u64,
}

impl Publisher {
    /// The announced WorldInfo (a later Welcome's) takes the world's current tick rate.
    pub(super) fn sync_info_rate(&mut self, rate: f32) {
        if self.info.tick_rate_hz.to_bits() == rate.to_bits() {
            return;
        }
        self.info.tick_rate_hz = rate;
        if let Ok(mut i) = self.shared_info.lock() {
            i.tick_rate_hz = rate;
        }
    }

    /// Resets the AOI encoders (after load/reset): every cell starts empty at `tick`, and the
    /// next publish sends the whole state as entered agents.
    pub(super) fn reset(&mut self, name: &str, world: &World, tick: u64, q: &proto::Quantization) {
        self.info = world_info(self.id, name, world, self.max_aoi_cells);
        if let Ok(mut i) = self.shared_info.lock() {
            *i = self.info.clone();
        }
        let n = self.info.cell_count() as usize;
        self.encoders = (0..n).map(|c| proto::CellEncoder::new(proto::FrameScope { world: self.id, cell: c as u32 })).collect();
        // Fill the encoders with the current state now (their keyframes are what subscribers
        // resync from); the deltas of this first diff chain on nothing and are not sent.
        for (c, cell) in self.quantize_cells(world, q).into_iter().enumerate() {
            if let Some(enc) = self.encoders.get_mut(c) {
                let _ = enc.update(cell, tick, q, true);
            }
        }
        self.keys = self.encoders.iter().map(|e| Arc::new(Shared::new(proto::ServerMsg::Keyframe(e.keyframe(true))))).collect();
        // Rates start again from the new state at the next publish.
        self.rate_sets.clear();
    }

    /// The quantized agents of every AOI cell, each sorted by id.
    pub(super) fn quantize_cells(&self, world: &World, q: &proto::Quantization) -> Vec<Vec<proto::QAgent>> {
        let mut per_cell: Vec<Vec<proto::QAgent>> = vec![Vec::new(); self.info.cell_count() as usize];
        for a in world.agents() {
            let c = self.info.cell_of(a.position.x, a.position.y) as usize;
            if let Some(v) = per_cell.get_mut(c) {
                v.push(q.quantize(&convert::sample(a)));
            }
        }
        per_cell
    }

    /// This tick's cells: those of each other send rate in use, and each AOI cell diffed once.
    pub(super) fn cells(&mut self, world: &World, tick: u64, q: &proto::Quantization) -> (Vec<RateCells>, Vec<CellFrame>) {
        let per_cell = self.quantize_cells(world, q);
        let with_sum = tick % self.checksum_every == 0;
        let rates = self.rate_cells(&per_cell, tick, q);
        (rates, self.diff_cells(per_cell, tick, q, with_sum))
    }

    /// The cells of each send rate other than 1 in use: those nobody uses are dropped, new ones
    /// start from this state.
    fn rate_cells(&mut self, per_cell: &[Vec<proto::QAgent>], tick: u64, q: &proto::Quantization) -> Vec<RateCells> {
        let in_use: Vec<u32> = self.rate_users.in_use().collect();
        self.rate_sets.retain(|r| in_use.contains(&r.span));
        let mut rates = Vec::with_capacity(in_use.len());
        for span in in_use {
            match self.rate_sets.iter_mut().find(|r| r.span == span) {
                Some(set) => rates.push(set.cells(per_cell, tick, q)),
                None => {
                    let mut set = RateSet::new(span, self.id, per_cell, tick, q);
                    rates.push(set.cells(&[], tick, q));
                    self.rate_sets.push(set);
                }
            }
        }
        rates
    }

    /// Each AOI cell diffed once against its last state: the delta (if anything changed) and
    /// the cell's keyframe.
    fn diff_cells(&mut self, per_cell: Vec<Vec<proto::QAgent>>, tick: u64, q: &proto::Quantization, with_sum: bool) -> Vec<CellFrame> {
        let mut cells = Vec::with_capacity(self.encoders.len());
        for (c, next) in per_cell.into_iter().enumerate() {
            let (Some(enc), Some(key)) = (self.encoders.get_mut(c), self.keys.get_mut(c)) else { continue };
            let delta = match enc.update(next, tick, q, with_sum) {
                Ok(Some(d)) => {
                    *key = Arc::new(Shared::new(proto::ServerMsg::Keyframe(enc.keyframe(with_sum))));
                    Some(Arc::new(Shared::new(proto::ServerMsg::Delta(d))))
                }
                Ok(None) => None,
                Err(e) => {
                    tracing::error!("cell {c}: cannot encode delta: {e}");
                    None
                }
            };
            cells.push(CellFrame { delta, key: key.clone() });
        }
        cells
    }

    /// The wire message of one event of this world at `tick`.
    pub(super) fn event(&self, tick: u64, event: proto::EventKind) -> Arc<Shared<proto::ServerMsg>> {
        Arc::new(Shared::new(proto::ServerMsg::Event(proto::Event { world: self.id, tick, event })))
    }

    /// A tick-rate change (PATCH, a load, a replay's recording) and a change of the group table
    /// (a spawn of a new group, a load), announced to every subscriber with this tick's frame;
    /// later Welcomes and Subscribed answers carry them.
    pub(super) fn announcements(&mut self, world: &World, tick: u64) -> Vec<FrameEvent> {
        let mut out = Vec::new();
        self.sync_info_rate(world.config().tick_rate);
        let rate = self.info.tick_rate_hz;
        if rate.to_bits() != self.announced_rate.to_bits() {
            self.announced_rate = rate;
            out.push(proto::EventKind::TickRate(proto::TickRateEvent { tick_rate_hz: rate }));
        }
        if world.groups() != self.announced_groups.as_slice() {
            self.announced_groups = world.groups().to_vec();
            if let Ok(mut g) = self.shared_groups.lock() {
                g.clone_from(&self.announced_groups);
            }
            out.push(proto::EventKind::Groups(proto::GroupsEvent { groups: self.announced_groups.clone() }));
        }
        out.into_iter().map(|event| FrameEvent { owner: None, vision: None, public: true, msg: self.event(tick, event) }).collect()
    }

    /// Sends this tick's frame to every subscriber and keeps it as the newest.
    pub(super) fn broadcast(&mut self, tick: u64, cells: Vec<CellFrame>, rates: Vec<RateCells>, events: Vec<FrameEvent>, vision: Option<Arc<Vision>>) {
        self.published += 1;
        let frame = Arc::new(TickFrame {
            world: self.id,
            tick,
            seq: self.published,
            cells,
            rates,
            checksum_every: self.checksum_every,
            shared: Default::default(),
            max_shared: self.max_shared,
            events,
            reset: std::mem::take(&mut self.reset_pending),
            vision,
        });
        if let Ok(mut r) = self.recent.lock() {
            r.push(frame.clone());
        }
        // No receivers is fine: nobody is watching.
        let _ = self.frames.send(frame);
    }
}

/// The cells of one send rate: diffed every `span` ticks.
pub(super) struct RateSet {
    span: u32,
    encoders: Vec<proto::CellEncoder>,
    keys: Vec<Arc<Shared<proto::ServerMsg>>>,
}

impl RateSet {
    /// A rate whose cells start at the current state (their keyframes are what its subscribers
    /// start from).
    fn new(span: u32, world: u32, per_cell: &[Vec<proto::QAgent>], tick: u64, q: &proto::Quantization) -> Self {
        let mut encoders: Vec<proto::CellEncoder> = (0..per_cell.len()).map(|c| proto::CellEncoder::new(proto::FrameScope { world, cell: c as u32 })).collect();
        for (enc, cell) in encoders.iter_mut().zip(per_cell) {
            if let Err(e) = enc.update(cell.clone(), tick, q, false) {
                tracing::error!("cannot encode a cell of rate {span}: {e}");
            }
        }
        let keys = encoders.iter().map(|e| Arc::new(Shared::new(proto::ServerMsg::Keyframe(e.keyframe(false))))).collect();
        RateSet { span, encoders, keys }
    }

    /// This tick's cells of the rate: diffed when the tick is one of its ticks.
    fn cells(&mut self, per_cell: &[Vec<proto::QAgent>], tick: u64, q: &proto::Quantization) -> RateCells {
        let due = tick % u64::from(self.span) == 0;
        let mut cells = Vec::with_capacity(self.keys.len());
        for (c, key) in self.keys.iter_mut().enumerate() {
            let mut delta = None;
            if let (true, Some(enc), Some(next)) = (due, self.encoders.get_mut(c), per_cell.get(c)) {
                match enc.update(next.clone(), tick, q, false) {
                    Ok(Some(d)) => {
                        *key = Arc::new(Shared::new(proto::ServerMsg::Keyframe(enc.keyframe(false))));
                        delta = Some(Arc::new(Shared::new(proto::ServerMsg::Delta(d))));
                    }
                    Ok(None) => {}
                    Err(e) => tracing::error!("cell {c} of rate {}: cannot encode delta: {e}", self.span),
                }
            }
            cells.push(CellFrame { delta, key: key.clone() });
        }
        RateCells { span: self.span, due, cells }
    }
}
