//! A bot's orders: the next command of its mix, the targets it picks, the results it matches,
//! and the effect of a MoveTo seen in the frames (the watched agent turning towards its target).

use super::*;

impl Bot {
    pub(super) fn on_result(&mut self, r: proto::CommandResult) {
        let Some(p) = self.pending.remove(&r.request_id) else {
            self.rec.add(C::UnmatchedResults, 1);
            return;
        };
        if let proto::Outcome::Error(e) = &r.result {
            self.rec.add(C::CommandErrors, 1);
            self.stats.error_code(e.code.name());
            self.stats.note(format!("{:?} failed: {} ({})", p.kind, e.message, e.code));
        }
        match (p.kind, r.result) {
            (Kind::Command, result) => {
                if !matches!(result, proto::Outcome::Error(_)) {
                    self.stats.acked(self.index);
                    if self.awaiting_command_after_follow {
                        self.awaiting_command_after_follow = false;
                        self.rec.add(C::CommandedAfterFollow, 1);
                    }
                }
                self.rec.add(C::CommandResults, 1);
                self.rec.record(H::CmdRttUs, p.sent.elapsed().as_micros() as u64, &self.stats);
            }
            (Kind::Subscribe, result) => {
                self.subscribing = false;
                if let proto::Outcome::Subscribed(s) = result {
                    self.state.retain_cells(s.world, &s.cells);
                    self.join.on_subscribed(&s.cells);
                    if !self.counted_subscribed {
                        self.counted_subscribed = true;
                        self.stats.add(C::Subscribed, 1);
                    }
                }
                if std::mem::take(&mut self.resync_wanted) {
                    self.resync();
                }
            }
            (Kind::Spawn, proto::Outcome::Spawned(s)) => {
                self.rec.add(C::AgentsSpawned, s.agents.len() as u64);
                self.agents.extend(s.agents);
            }
            _ => {}
        }
    }

    /// Sends the next command (see [`CommandMix`]).
    pub(super) fn command(&mut self) {
        self.commands += 1;
        let world = self.cfg.world.clone();
        let agents = self.agents.clone();
        let request_id = self.request(Kind::Command);
        self.rec.add(C::CommandsSent, 1);
        let behavior = match self.cfg.mix {
            CommandMix::Mixed => self.commands % 4 == 0,
            CommandMix::MoveTo => false,
            CommandMix::Behaviors => true,
        };
        if behavior {
            let msg = if self.commands % 2 == 0 {
                ClientMsg::RemoveBehavior(RemoveBehavior { request_id, world, agents, kind: BehaviorKind::LookWhereYouAreGoing })
            } else {
                let entry = BehaviorEntry::from(proto::Behavior::LookWhereYouAreGoing(LookWhereYouAreGoing { align: proto::AlignParams::default() }));
                ClientMsg::AddBehavior(AddBehavior { request_id, world, agents, entry })
            };
            self.outbox.push(msg);
            return;
        }
        let watched = agents[(self.rng.next_u64() % agents.len() as u64) as usize];
        let (target, measurable) = self.pick_target(watched);
        self.outbox.push(ClientMsg::MoveTo(MoveTo { request_id, world, agents, target, stopping_distance: 0.0 }));
        if measurable {
            if self.effect.is_some() {
                self.rec.add(C::EffectTimeouts, 1);
            }
            let q = &self.quant;
            self.effect = Some(Effect {
                agent: watched,
                target: [f64::from(target.x) / f64::from(q.pos_step), f64::from(target.y) / f64::from(q.pos_step)],
                sent: Instant::now(),
                after_tick: self.last_tick.unwrap_or(0),
            });
        }
    }

    /// A MoveTo target for `agent`, and whether its effect can be measured. A moving agent
    /// gets a target 95°–120° off its heading, so its velocity points away from the target
    /// when the command leaves and "turned toward the target" (positive dot product) can only
    /// be the command's doing; a resting agent gets any direction. Targets stay inside the
    /// area (so the agent stays in view) and the world.
    pub(super) fn pick_target(&mut self, agent: u32) -> (Point, bool) {
        let (ps, vs) = (f64::from(self.quant.pos_step), f64::from(self.quant.vel_step));
        let a = &self.area;
        let found = self.state.agents().find(|(_, q)| q.id == agent).map(|(_, q)| *q);
        let Some(q) = found else {
            let x = f64::from(a.min_x + a.max_x) / 2.0 + self.rng.range(-2.0, 2.0);
            let y = f64::from(a.min_y + a.max_y) / 2.0 + self.rng.range(-2.0, 2.0);
            return (self.clamp_target(x, y), false);
        };
        let (px, py) = (f64::from(q.pos[0]) * ps, f64::from(q.pos[1]) * ps);
        let (vx, vy) = (f64::from(q.vel[0]) * vs, f64::from(q.vel[1]) * vs);
        let moving = vx.hypot(vy) > 1e-9;
        let ang = if moving {
            let off = self.rng.range(95f64.to_radians(), 120f64.to_radians());
            vy.atan2(vx) + if self.rng.next_u64() & 1 == 0 { off } else { -off }
        } else {
            self.rng.range(0.0, std::f64::consts::TAU)
        };
        let dist = self.rng.range(4.0, 12.0);
        let t = self.clamp_target(px + dist * ang.cos(), py + dist * ang.sin());
        let (dx, dy) = (f64::from(t.x) - px, f64::from(t.y) - py);
        let measurable = dx.hypot(dy) > 1.0 && (!moving || vx * dx + vy * dy <= 0.0);
        (t, measurable)
    }

    pub(super) fn clamp_target(&self, x: f64, y: f64) -> Point {
        let (a, b) = (&self.area, &self.info.bounds);
        let lo_x = f64::from(a.min_x.max(b.min_x)) + 2.0;
        let hi_x = (f64::from(a.max_x.min(b.max_x)) - 2.0).max(lo_x);
        let lo_y = f64::from(a.min_y.max(b.min_y)) + 2.0;
        let hi_y = (f64::from(a.max_y.min(b.max_y)) - 2.0).max(lo_y);
        Point { x: x.clamp(lo_x, hi_x) as f32, y: y.clamp(lo_y, hi_y) as f32 }
    }

    /// After a frame of `cell` at `tick` was applied: has the watched agent turned?
    pub(super) fn check_effect(&mut self, cell: u32, tick: u64) {
        let Some(e) = self.effect else { return };
        if tick <= e.after_tick {
            return;
        }
        let Some(cs) = self.state.cell(self.info.id, cell) else { return };
        let Ok(i) = cs.agents().binary_search_by_key(&e.agent, |a| a.id) else { return };
        let a = cs.agents()[i];
        let (dx, dy) = (e.target[0] - f64::from(a.pos[0]), e.target[1] - f64::from(a.pos[1]));
        let (vx, vy) = (f64::from(a.vel[0]), f64::from(a.vel[1]));
        if (vx != 0.0 || vy != 0.0) && vx * dx + vy * dy > 0.0 {
            self.rec.record(H::CmdEffectUs, e.sent.elapsed().as_micros() as u64, &self.stats);
            self.effect = None;
        }
    }
}
