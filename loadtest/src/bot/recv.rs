//! A bot reading its stream: each frame decoded (or skimmed), applied to its copy of the cells
//! with the delta chain and checksums verified (a break starts a resync), and counted: bytes,
//! ticks and their gaps, lateness by the tick clock.

use super::*;

impl Bot {
    pub(super) fn note_tick(&mut self, tick: u64, is_delta: bool) {
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

    pub(super) fn on_message(&mut self, m: &Message) {
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
    pub(super) fn on_bytes(&mut self, len: usize, arrival: u64) {
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
    pub(super) fn on_batch(&mut self, b: &[u8], arrival: u64) {
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
    pub(super) fn on_cells(&mut self, head: &proto::CellsHead, entries: &[proto::AppliedEntry], arrival: u64) {
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
    pub(super) fn count_entry(&mut self, cell: u32, keyframe: bool, tick: u64, records: usize) {
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
    pub(super) fn decode_error(&mut self, e: &str) {
        self.rec.add(C::DecodeErrors, 1);
        self.stats.note(format!("decode error: {e}"));
        self.resync();
    }

    /// Counts the join once a keyframe of every subscribed cell has arrived.
    pub(super) fn joined(&mut self) {
        if let Some((bytes, agents)) = self.join.complete() {
            self.rec.add(C::Joins, 1);
            self.rec.add(C::JoinBytes, bytes);
            self.rec.add(C::JoinAgents, agents);
        }
    }

    /// A skimmed `cells` message of `len` bytes for `tick`: its bytes, tick (gaps) and lateness
    /// are counted; it adds nothing to the window's bytes, ticks and moved agents or to the
    /// join figures, which verifying bots measure.
    pub(super) fn on_skimmed(&mut self, len: usize, tick: u64, arrival: u64) {
        self.in_window = false;
        self.rec.add(C::BytesIn, len as u64);
        self.skimmed_tick(tick, arrival);
    }

    /// A skimming bot's `cells` message for `tick` (skimmed, or decoded from a frame that held
    /// more than it): counted, never applied.
    pub(super) fn skimmed_tick(&mut self, tick: u64, arrival: u64) {
        self.rec.add(C::Skimmed, 1);
        let joined = self.last_tick.is_some();
        self.note_tick(tick, true);
        // The first message is the join's keyframes, whose lateness verifying bots do not count.
        if joined {
            self.lateness(tick, arrival);
        }
    }

    /// Records how late the message of `tick` that arrived at `arrival` is, by the tick clock.
    pub(super) fn lateness(&mut self, tick: u64, arrival: u64) {
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
    pub(super) fn on_server_msg(&mut self, msg: ServerMsg, len: usize, arrival: u64) {
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

    pub(super) fn on_keyframe(&mut self, k: &proto::Keyframe) -> bool {
        self.count_entry(k.cell, true, k.tick, k.agents.len());
        let r = self.state.apply_keyframe(k);
        self.applied(r, k.cell, k.tick)
    }

    pub(super) fn on_delta(&mut self, d: &proto::Delta) -> bool {
        self.count_entry(d.cell, false, d.tick, moved_agents(d));
        let r = self.state.apply_delta(d);
        self.applied(r, d.cell, d.tick)
    }

    pub(super) fn frame(&mut self, len: usize, agents: usize) {
        self.rec.add(C::Frames, 1);
        self.rec.add(C::FrameBytes, len as u64);
        self.rec.add(C::AgentUpdates, agents as u64);
        self.rec.record(H::FrameBytes, len as u64, &self.stats);
    }

    /// Whether `r` applied; an error is counted and starts a resync.
    pub(super) fn applied(&mut self, r: Result<(), ApplyError>, cell: u32, tick: u64) -> bool {
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
}
