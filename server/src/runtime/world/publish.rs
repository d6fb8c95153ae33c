//! A tick's frames for subscribers: AOI encoders, quantized cells, per-team visibility.

use super::*;

impl Runner {
    /// The announced WorldInfo (a later Welcome's) takes the world's current tick rate.
    pub(super) fn sync_info_rate(&mut self) {
        let rate = self.world.config().tick_rate;
        if self.info.tick_rate_hz.to_bits() == rate.to_bits() {
            return;
        }
        self.info.tick_rate_hz = rate;
        if let Ok(mut i) = self.shared_info.lock() {
            i.tick_rate_hz = rate;
        }
    }

    /// Resets the AOI encoders (after load/reset): every cell starts empty at the current tick,
    /// and the next publish sends the whole state as entered agents.
    pub(super) fn reset_encoders(&mut self) {
        self.info = world_info(self.id, &self.name, &self.world, self.max_aoi_cells);
        if let Ok(mut i) = self.shared_info.lock() {
            *i = self.info.clone();
        }
        let n = self.info.cell_count() as usize;
        self.encoders = (0..n).map(|c| proto::CellEncoder::new(proto::FrameScope { world: self.id, cell: c as u32 })).collect();
        // Fill the encoders with the current state now (their keyframes are what subscribers
        // resync from); the deltas of this first diff chain on nothing and are not sent.
        let q = self.quant();
        let tick = self.wire_tick();
        for (c, cell) in self.quantize_cells(&q).into_iter().enumerate() {
            if let Some(enc) = self.encoders.get_mut(c) {
                let _ = enc.update(cell, tick, &q, true);
            }
        }
        self.keys = self.encoders.iter().map(|e| Arc::new(Shared::new(proto::ServerMsg::Keyframe(e.keyframe(true))))).collect();
        // Rates start again from the new state at the next publish.
        self.rate_sets.clear();
        self.stats.tick_rate_milli.store((self.world.config().tick_rate * 1000.0) as u32, Ordering::Relaxed);
        self.stats.agents.store(self.world.agents().len() as u64, Ordering::Relaxed);
        self.stats.tick.store(self.wire_tick(), Ordering::Relaxed);
    }

    /// The quantized agents of every AOI cell, each sorted by id.
    pub(super) fn quantize_cells(&self, q: &proto::Quantization) -> Vec<Vec<proto::QAgent>> {
        let mut per_cell: Vec<Vec<proto::QAgent>> = vec![Vec::new(); self.info.cell_count() as usize];
        for a in self.world.agents() {
            let c = self.info.cell_of(a.position.x, a.position.y) as usize;
            if let Some(v) = per_cell.get_mut(c) {
                v.push(q.quantize(&convert::sample(a)));
            }
        }
        per_cell
    }

    /// Quantizes the state per AOI cell, diffs each cell once, and broadcasts the frame.
    pub(super) fn publish(&mut self) {
        let vision = self.vision();
        let lost = self.drop_hidden_targets(vision.as_deref());
        let q = self.quant();
        let per_cell = self.quantize_cells(&q);
        let tick = self.wire_tick();
        let with_sum = tick % self.checksum_every == 0;
        let rates = self.rate_cells(&per_cell, tick, &q);
        let cells = self.diff_cells(per_cell, tick, &q, with_sum);
        let mut kinds = self.sim_events();
        kinds.extend(lost);
        let announced = self.announcements(tick);
        let events: Vec<FrameEvent> = kinds
            .into_iter()
            .map(|(owner, event)| {
                let msg = Arc::new(Shared::new(proto::ServerMsg::Event(proto::Event { world: self.id, tick, event })));
                // Events about a player's agents go to each of its connections, subscribed or
                // not (their send tasks skip them in the broadcast).
                if let Some(p) = &owner {
                    self.players.deliver(p, &msg);
                }
                let vision = owner.as_ref().map(|p| crate::auth::vision_key(p, self.teams.get(p).cloned().flatten().as_deref()));
                FrameEvent { owner, vision, public: false, msg }
            })
            .chain(announced)
            .collect();
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
        if let Ok(mut l) = self.latest.lock() {
            *l = Some(frame.clone());
        }
        // No receivers is fine: nobody is watching.
        let _ = self.frames.send(frame);
    }

    /// The cells of each send rate other than 1 in use: those nobody uses are dropped, new ones
    /// start from this state.
    fn rate_cells(&mut self, per_cell: &[Vec<proto::QAgent>], tick: u64, q: &proto::Quantization) -> Vec<crate::runtime::frames::RateCells> {
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

    /// The sim's events since the last publish, with their agents' owners: one wire event per
    /// run of same-group, same-owner spawns / despawns (their `agents` lists), not one per
    /// agent, so a 10k-agent spawn is one message to each subscriber.
    fn sim_events(&mut self) -> Vec<(Option<Arc<str>>, proto::EventKind)> {
        let groups = self.world.groups().to_vec();
        let mut kinds: Vec<(Option<Arc<str>>, proto::EventKind)> = Vec::new();
        for e in self.world.drain_events() {
            let id = match &e {
                crate::sim::world::Event::Spawned { id, .. }
                | crate::sim::world::Event::Despawned { id }
                | crate::sim::world::Event::DestinationReached { id, .. }
                | crate::sim::world::Event::PathCompleted { id } => *id,
            };
            let owner = self.owners.get(&id).cloned();
            if let crate::sim::world::Event::Despawned { id } = &e {
                self.disown(*id);
            }
            match (kinds.last_mut(), convert::event(&e, &groups)) {
                (Some((o, proto::EventKind::Spawned(last))), proto::EventKind::Spawned(s)) if last.group == s.group && *o == owner => last.agents.extend(s.agents),
                (Some((o, proto::EventKind::Despawned(last))), proto::EventKind::Despawned(d)) if *o == owner => last.agents.extend(d.agents),
                (_, k) => kinds.push((owner, k)),
            }
        }
        kinds
    }

    /// A tick-rate change (PATCH, a load, a replay's recording) and a change of the group table
    /// (a spawn of a new group, a load), announced to every subscriber with this tick's frame;
    /// later Welcomes and Subscribed answers carry them.
    fn announcements(&mut self, tick: u64) -> Vec<FrameEvent> {
        let public = |world: u32, event| FrameEvent {
            owner: None,
            vision: None,
            public: true,
            msg: Arc::new(Shared::new(proto::ServerMsg::Event(proto::Event { world, tick, event }))),
        };
        let mut out = Vec::new();
        self.sync_info_rate();
        let rate = self.info.tick_rate_hz;
        if rate.to_bits() != self.announced_rate.to_bits() {
            self.announced_rate = rate;
            out.push(public(self.id, proto::EventKind::TickRate(proto::TickRateEvent { tick_rate_hz: rate })));
        }
        if self.world.groups() != self.announced_groups.as_slice() {
            self.announced_groups = self.world.groups().to_vec();
            if let Ok(mut g) = self.shared_groups.lock() {
                g.clone_from(&self.announced_groups);
            }
            out.push(public(self.id, proto::EventKind::Groups(proto::GroupsEvent { groups: self.announced_groups.clone() })));
        }
        out
    }

    /// Under `owned` visibility: per vision key (a team, or a player without one), the AOI
    /// cells that intersect a disc of `vision_radius` around one of its agents.
    pub(super) fn vision(&self) -> Option<Arc<HashMap<String, Vec<bool>>>> {
        if self.policy.visibility != crate::config::Visibility::Owned {
            return None;
        }
        let mut out: HashMap<String, Vec<bool>> = HashMap::new();
        let n = self.info.cell_count() as usize;
        for (id, owner) in &self.owners {
            let Some(a) = self.world.agent(*id) else { continue };
            let team = self.teams.get(owner).cloned().flatten();
            let key = crate::auth::vision_key(owner, team.as_deref());
            let cells = out.entry(key).or_insert_with(|| vec![false; n]);
            self.mark_sight(cells, a.position);
        }
        Some(Arc::new(out))
    }
}
