//! The world thread's loop: serve the queue, tick on schedule, measure; and the order of a
//! tick's parts (step, record, publish).

use super::*;
use super::replay::Control;

impl Runner {
    /// Runs the loop on a thread of its own, named after the world. A panic ends the thread,
    /// not the server: `alive` turns false and `death` says why.
    pub(super) fn spawn_thread(self, rx: Receiver<Request>, death: Arc<Mutex<Option<String>>>) -> Result<(), CmdError> {
        let name = self.name.clone();
        let stats = self.stats.clone();
        std::thread::Builder::new()
            .name(format!("world-{name}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || self.run_on_solo_pool(rx)));
                stats.alive.store(false, Ordering::SeqCst);
                if let Err(p) = result {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "panic".into());
                    tracing::error!(world = %name, "world thread panicked: {msg}");
                    if let Ok(mut d) = death.lock() {
                        *d = Some(msg);
                    }
                }
            })
            .map(drop)
            .map_err(|e| CmdError::Invalid(format!("cannot start world thread: {e}")))
    }

    /// The runner runs on a one-thread rayon pool of its own, so that a small world's step runs
    /// its parallel loops inline: no hand-off to another thread, and no wake-up of a sleeping
    /// one, on any tick.
    fn run_on_solo_pool(mut self, rx: Receiver<Request>) {
        match solo_pool(&self.name) {
            Some(pool) => {
                self.stepper.on_solo_pool();
                pool.install(move || {
                    self.reset_encoders();
                    self.run(rx);
                });
            }
            None => {
                self.reset_encoders();
                self.run(rx);
            }
        }
    }

    /// The tick as clients see it (monotonic across loads).
    pub(super) fn wire_tick(&self) -> u64 {
        self.tick_offset + self.world.tick()
    }

    /// The quantization of every world: fixed (the protocol default, announced in `Welcome`).
    /// Its dead-reckoning predictor only has to be the same on both sides, so it must not follow
    /// the world's tick rate, which can change at run time and differ between worlds.
    pub(super) fn quant(&self) -> proto::Quantization {
        proto::Quantization::default()
    }

    pub(super) fn period(&self) -> Duration {
        let speed = self.replay.as_ref().map_or(1.0, |r| r.speed);
        Duration::from_secs_f64(1.0 / (f64::from(self.world.config().tick_rate) * speed))
    }

    pub(super) fn run(&mut self, rx: Receiver<Request>) {
        let _span = tracing::info_span!("world", name = %self.name).entered();
        tracing::info!(agents = self.world.agents().len(), "world started");
        let mut next = Instant::now() + self.period();
        if self.replay.is_some() || self.schedule.hold.is_some() || self.schedule.paused {
            // A world that does not tick at once (a replay world, which may start paused; one
            // that arrived by a handoff and waits for its sessions; one created or recovered
            // paused) publishes its starting state now: its subscribers get the current
            // keyframes at once, not at its first tick.
            self.publish();
            self.stats.tick.store(self.wire_tick(), Ordering::Relaxed);
        }
        loop {
            if self.stats.stop.load(Ordering::SeqCst) {
                break;
            }
            // Serve what is queued, a bounded number, without waiting: also (above all) when
            // the tick is late, so that an overloaded world keeps answering.
            if self.serve_queued(&rx) == Flow::Stop {
                break;
            }
            self.recorder.idle(&self.world);
            if !self.schedule.frozen {
                self.snapshot_if_due(false);
                self.check_orphans();
            }
            if let Some(h) = &self.schedule.hold {
                // Arrived by a handoff: the first tick waits for the sessions to resume.
                let now = Instant::now();
                if h.awaited.load(Ordering::SeqCst) == 0 || now >= h.until {
                    tracing::info!(waited_for = h.awaited.load(Ordering::SeqCst), "handoff: the world ticks");
                    self.schedule.hold = None;
                    next = now;
                    continue;
                }
                if self.wait_for_request(&rx, (now + Duration::from_millis(2)).min(h.until)) == Flow::Stop {
                    break;
                }
                continue;
            }
            if self.schedule.stepping.is_some() {
                self.step_chunk();
                next = Instant::now() + self.period();
                continue;
            }
            let now = Instant::now();
            if self.schedule.paused || self.schedule.frozen {
                self.schedule.measure(&self.stats, now, 0, 0);
                if self.wait_for_request(&rx, now + self.period()) == Flow::Stop {
                    break;
                }
                next = Instant::now() + self.period();
                continue;
            }
            if now < next {
                // On time: wait for requests until the tick is due.
                if self.wait_for_request(&rx, next) == Flow::Stop {
                    break;
                }
                continue;
            }
            let period = self.period();
            let (due, dropped) = catch_up(next, now, period, self.schedule.max_catchup);
            if dropped > 0 {
                self.stats.overruns.fetch_add(dropped, Ordering::Relaxed);
                self.metrics.overruns.inc_by(dropped);
                // Said at once; cleared by a window without drops.
                self.stats.overloaded.store(true, Ordering::Relaxed);
            }
            self.tick();
            self.schedule.measure(&self.stats, Instant::now(), 1, dropped);
            next = due + period;
        }
        if let Some((_, reply)) = self.schedule.stepping.take() {
            let _ = reply.send(Err(CmdError::Dead(self.name.clone())));
        }
        self.recorder.rec.stop(&self.world, "world stopped");
        let forget = self.stats.forget.load(Ordering::SeqCst);
        if !forget {
            // A clean stop: the next start restores this snapshot with no log to re-run.
            self.snapshot_if_due(true);
        }
        self.recorder.close_log(&self.world, forget);
        tracing::info!("world stopped");
    }

    /// Serves up to `max_requests_per_turn` queued requests without waiting.
    pub(super) fn serve_queued(&mut self, rx: &Receiver<Request>) -> Flow {
        for _ in 0..self.schedule.max_requests_per_turn {
            match rx.try_recv() {
                Ok(Request::Shutdown) => return Flow::Stop,
                Ok(req) => self.handle(req),
                Err(std::sync::mpsc::TryRecvError::Empty) => return Flow::Go,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => return Flow::Stop,
            }
            if self.stats.stop.load(Ordering::SeqCst) {
                return Flow::Stop;
            }
        }
        Flow::Go
    }

    /// Waits until `until` (at most [`MAX_IDLE_WAIT`]) for one request and serves it.
    pub(super) fn wait_for_request(&mut self, rx: &Receiver<Request>, until: Instant) -> Flow {
        let wait = until.saturating_duration_since(Instant::now()).min(MAX_IDLE_WAIT);
        match rx.recv_timeout(wait) {
            Ok(Request::Shutdown) => Flow::Stop,
            Ok(req) => {
                self.handle(req);
                Flow::Go
            }
            Err(RecvTimeoutError::Timeout) => Flow::Go,
            Err(RecvTimeoutError::Disconnected) => Flow::Stop,
        }
    }

    /// Runs a chunk of the `Step` in progress: ticks until about one period of work is done
    /// (at least one tick), then publishes one frame. Answers when the last tick has run.
    pub(super) fn step_chunk(&mut self) {
        let Some((left, reply)) = self.schedule.stepping.take() else { return };
        let budget = self.period();
        let start = Instant::now();
        let mut left = left;
        let mut ran = 0;
        while left > 0 {
            self.advance();
            left -= 1;
            ran += 1;
            if start.elapsed() >= budget {
                break;
            }
        }
        self.publish();
        self.stats.tick.store(self.wire_tick(), Ordering::Relaxed);
        self.stats.agents.store(self.world.agents().len() as u64, Ordering::Relaxed);
        self.schedule.measure(&self.stats, Instant::now(), ran, 0);
        if left == 0 {
            let _ = reply.send(Ok(self.wire_tick()));
        } else {
            self.schedule.stepping = Some((left, reply));
        }
    }

    /// One scheduled tick: step, then publish its frame.
    pub(super) fn tick(&mut self) {
        self.advance();
        self.publish();
        self.stats.tick.store(self.wire_tick(), Ordering::Relaxed);
        self.stats.agents.store(self.world.agents().len() as u64, Ordering::Relaxed);
    }

    /// How this world's sim steps, as a function a replay's player calls.
    pub(super) fn stepper(&self) -> impl FnMut(&mut World) + use<> {
        let stepper = self.stepper.clone();
        move |w: &mut World| stepper.step(w)
    }

    /// A replay world's tick: the recording's next step; at the end it pauses.
    pub(super) fn advance_replay(&mut self) {
        let mut run = self.stepper();
        let Some(r) = self.replay.as_mut() else { return };
        if !r.advance(&mut self.world, &mut run, &self.metrics) {
            self.schedule.paused = true;
        }
        self.stats.tick_rate_milli.store((self.world.config().tick_rate * 1000.0) as u32, Ordering::Relaxed);
    }

    /// Answers a replay control.
    pub(super) fn replay_op(&mut self, op: ReplayOp) -> Result<ReplayView, CmdError> {
        let mut run = self.stepper();
        let old_wire = self.wire_tick();
        let Some(r) = self.replay.as_mut() else {
            return Err(CmdError::Conflict(format!(
                "world `{}` is not a replay world (create one with POST /worlds {{\"name\": ..., \"replay\": \"<recording>\"}})",
                self.name
            )));
        };
        match r.control(op, &mut self.world, &mut run, &self.metrics)? {
            Control::Shown => {}
            Control::Paused(p) => self.schedule.paused = p,
            Control::Sought { paused } => {
                if paused {
                    self.schedule.paused = true;
                }
                // Wire ticks never go back (as across a load): clients' chains stay ordered.
                if self.tick_offset + self.world.tick() <= old_wire {
                    self.tick_offset = old_wire + 1 - self.world.tick();
                }
                // The subscribers resync from keyframes.
                self.reset_encoders();
                self.publisher.reset_pending = true;
                self.publish();
            }
        }
        self.replay_view().ok_or_else(|| CmdError::Conflict("not a replay world".into()))
    }

    pub(super) fn replay_view(&self) -> Option<ReplayView> {
        self.replay.as_ref().map(|r| r.view(&self.world, !self.schedule.paused))
    }

    /// Refuses what would change a replay world (it changes only as its recording says).
    pub(super) fn read_only(&self, what: &str) -> Result<(), CmdError> {
        match &self.replay {
            Some(r) => Err(r.refusal(&self.name, what)),
            None => Ok(()),
        }
    }

    /// Steps the world once (without publishing).
    pub(super) fn advance(&mut self) {
        if self.replay.is_some() {
            self.advance_replay();
            return;
        }
        let start = Instant::now();
        self.fields.collect(&mut self.world);
        self.stepper.step(&mut self.world);
        self.recorder.after_step(&self.world);
        self.snapshot_if_due(false);
        self.fields.submit(&mut self.world, &self.metrics);
        let elapsed = start.elapsed();
        self.fields.count(&self.world, &self.metrics);
        self.metrics.tick_seconds.observe(elapsed.as_secs_f64());
    }
}

impl Runner {
    /// Resets the publisher's AOI encoders to the world as it is (after a load, reset or seek).
    pub(super) fn reset_encoders(&mut self) {
        let (q, tick) = (self.quant(), self.wire_tick());
        self.publisher.reset(&self.name, &self.world, tick, &q);
        self.stats.tick_rate_milli.store((self.world.config().tick_rate * 1000.0) as u32, Ordering::Relaxed);
        self.stats.agents.store(self.world.agents().len() as u64, Ordering::Relaxed);
        self.stats.tick.store(tick, Ordering::Relaxed);
    }

    /// Publishes this tick's frame: vision, hidden targets dropped, the cells, the sim's
    /// events with their owners, announcements, in that order.
    pub(super) fn publish(&mut self) {
        let vision = self.vision();
        let lost = self.drop_hidden_targets(vision.as_deref());
        let tick = self.wire_tick();
        let (rates, cells) = self.publisher.cells(&self.world, tick, &self.quant());
        let mut kinds = self.sim_events();
        kinds.extend(lost);
        let announced = self.publisher.announcements(&self.world, tick);
        let events: Vec<FrameEvent> = kinds.into_iter().map(|(owner, event)| self.owned_event(tick, owner, event)).chain(announced).collect();
        self.publisher.broadcast(tick, cells, rates, events, vision);
    }

    /// An event about a player's agents (or nobody's): it goes to each of the player's
    /// connections, subscribed or not (their send tasks skip it in the broadcast).
    fn owned_event(&self, tick: u64, owner: Option<Arc<str>>, event: proto::EventKind) -> FrameEvent {
        let msg = self.publisher.event(tick, event);
        if let Some(p) = &owner {
            self.players.deliver(p, &msg);
        }
        let vision = owner.as_ref().map(|p| crate::auth::vision_key(p, self.ownership.team_of(p).as_deref()));
        FrameEvent { owner, vision, public: false, msg }
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
            let owner = self.ownership.owners.get(&id).cloned();
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
}
