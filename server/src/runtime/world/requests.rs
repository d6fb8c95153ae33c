//! Each request of the closed set answered on the world thread.

use super::*;

impl Runner {
    /// Replaces the world by one built from `scenario`; with `admit`, its groups must pass the
    /// crowding bounds (load and reset; a recording's re-base is the world as it is).
    pub(super) fn replace_world(&mut self, scenario: Scenario, name: Option<String>, admit: bool) -> Result<u64, CmdError> {
        let world = self.caps.build(&scenario, admit)?;
        self.tick_offset = self.wire_tick() + 1;
        self.world = world;
        self.fields.restart();
        if let Ok(mut o) = self.origin.lock() {
            *o = (scenario.clone(), name.clone());
        }
        self.recorder.replaced(&self.name, &scenario, self.caps.max_agents(), self.caps.max_spawn());
        self.scenario = scenario;
        self.scenario_name = name;
        self.ownership.clear_owners();
        self.reset_encoders();
        // Subscribers resync from this frame's keyframes.
        self.publisher.reset_pending = true;
        self.publish();
        Ok(self.wire_tick())
    }

    /// Answers one request: refused while frozen for a handoff if it changes anything, refused
    /// by a replay world if it changes the world, else served.
    pub(super) fn handle(&mut self, req: Request) {
        // Frozen for a handoff: reads only (the state handed off must stay the state here).
        if self.schedule.frozen && changes_while_frozen(&req) {
            return refuse(req, CmdError::Moving(self.name.clone()));
        }
        // A replay world refuses every change but play/pause, with the reason.
        if let Some(what) = req.change()
            && let Err(e) = self.read_only(what)
        {
            self.metrics.command("replay_refused", false);
            return refuse(req, e);
        }
        self.serve(req);
    }

    /// Serves a request that passed the gates of [`Runner::handle`].
    fn serve(&mut self, req: Request) {
        match req {
            Request::Apply { cmd, actor, reply } => {
                let r = self.apply_for(vec![cmd], &actor);
                self.recorder.answer(reply, r);
            }
            Request::ApplyMany { cmds, actor, reply } => {
                let r = self.apply_for(cmds, &actor);
                self.recorder.answer(reply, r);
            }
            Request::Players { reply } => send(reply, Ok(self.ownership.players_view())),
            Request::Kick { player, reply } => send(reply, Ok(self.kick(&player))),
            Request::SetOwner { agent, player, team, reply } => send(reply, self.set_owner(agent, player, team)),
            Request::Agents { limit, stuck, sight, reply } => send(reply, Ok(self.agents_view(limit, stuck, &sight))),
            Request::Agent { id, sight, reply } => send(reply, self.one_agent_view(id, &sight)),
            Request::FlowField { agent, max_side, sight, reply } => send(reply, self.seen_flow_field(agent, max_side, &sight)),
            Request::Avoidance { agent, reply } => send(reply, self.avoidance_view(agent)),
            Request::Obstacles { reply } => send(reply, Ok(self.obstacle_views())),
            Request::Walls { reply } => send(reply, Ok(self.wall_views())),
            Request::Snapshot { sight, reply } => send(reply, Ok(self.snapshot_view(&sight))),
            Request::Info { sight, reply } => send(reply, Ok(self.seen_info_view(&sight))),
            Request::Patch { tick_rate, paused, autosave, reply } => send(reply, self.patch(tick_rate, paused, autosave)),
            Request::Step { ticks, reply } => self.start_step(ticks, reply),
            Request::Reset { reply } => {
                let (sc, name) = (self.scenario.clone(), self.scenario_name.clone());
                send(reply, self.replace_world(sc, name, true));
            }
            Request::Load { scenario, name, reply } => send(reply, self.replace_world(*scenario, Some(name), true)),
            Request::Save { reply } => send(reply, Ok(Box::new(crate::scenario::snapshot_scenario(&self.world, &self.scenario)))),
            Request::RandomObstacles { spec, reply } => {
                let r = self.random_obstacles(&spec).map_err(CmdError::from);
                self.metrics.command("random_obstacles", r.is_ok());
                send(reply, r);
            }
            Request::Replay { op, reply } => send(reply, self.replay_op(op)),
            Request::Recording { on, digests, reply } => send(reply, self.set_recording(on, digests).map(|()| self.info_view())),
            Request::Freeze { reply } => send(reply, self.freeze()),
            Request::Thaw { reply } => {
                self.schedule.frozen = false;
                tracing::info!("handoff: thawed, the world runs on here");
                send(reply, Ok(()));
            }
            Request::Shutdown => {}
            Request::Panic => panic!("fault injection: a world thread panic was asked for"),
            Request::Stall { time, reply } => {
                send(reply, Ok(()));
                self.stats.stall.block(time);
            }
        }
    }

    /// One agent, if `sight` sees it (one it does not see is unknown).
    fn one_agent_view(&self, id: AgentId, sight: &Sight) -> Result<AgentView, CmdError> {
        let seen = self.seen(sight);
        self.world
            .agent(id)
            .filter(|a| self.sees(seen.as_ref(), a))
            .map(|a| self.agent_view(a, self.sees_order(seen.as_ref(), a.id)))
            .ok_or(CmdError::Sim(SimError::UnknownAgent(id)))
    }

    /// An agent's flow field; a player that does not see all asks for its own agents only.
    fn seen_flow_field(&self, agent: AgentId, max_side: u32, sight: &Sight) -> Result<FlowFieldView, CmdError> {
        let seen = self.seen(sight);
        match &seen {
            Some(_) if !self.sees_id(seen.as_ref(), agent) => Err(CmdError::Sim(SimError::UnknownAgent(agent))),
            Some(_) if !self.owns(seen.as_ref(), agent) => Err(CmdError::Forbidden(agent)),
            _ => self.flow_field_view(agent, max_side),
        }
    }

    /// The summary, its agent count what `sight` sees.
    fn seen_info_view(&self, sight: &Sight) -> WorldInfoView {
        let mut v = self.info_view();
        if let Some(seen) = self.seen(sight) {
            v.agents = self.world.agents().iter().filter(|a| self.sees(Some(&seen), a)).count();
        }
        v
    }

    /// A `Step` of `ticks`: run in chunks by the loop, between which it serves requests (one at
    /// a time; 0 ticks answers at once).
    fn start_step(&mut self, ticks: u32, reply: Reply<u64>) {
        if self.schedule.stepping.is_some() {
            send(reply, Err(CmdError::Busy(self.name.clone())));
        } else if ticks == 0 {
            send(reply, Ok(self.wire_tick()));
        } else {
            self.schedule.stepping = Some((ticks, reply));
        }
    }

    /// Freezes the world for a handoff (see [`Request::Freeze`]): a durable world's log gets a
    /// checkpoint and a snapshot at this tick, queued for the writer.
    fn freeze(&mut self) -> Result<Frozen, CmdError> {
        if self.replay.is_some() {
            return Err(CmdError::Conflict(format!("world `{}` is a replay: a replay is not handed off", self.name)));
        }
        if self.schedule.stepping.is_some() {
            return Err(CmdError::Conflict(format!("world `{}` is running a step; hand it off once the step is done", self.name)));
        }
        self.schedule.frozen = true;
        // The world itself at the freeze (and the sessions): the target starts from it.
        self.snapshot_if_due(true);
        let owners = self.ownership.owning_sorted();
        tracing::info!(tick = self.world.tick(), "handoff: frozen");
        Ok(Frozen { tick: self.world.tick(), tick_offset: self.tick_offset, state_hash: crate::sim::hash::state_hash(&self.world), owners })
    }

    /// Treats `player` as gone for good (its orphan policy applies now); answers the agents it owned.
    fn kick(&mut self, player: &str) -> usize {
        let key: Arc<str> = Arc::from(player);
        let n = self.ownership.kick(&key);
        self.apply_orphan_policy(&key);
        n
    }

    /// Gives `agent` to `player` (in `team`), or to no one.
    fn set_owner(&mut self, agent: AgentId, player: Option<String>, team: Option<String>) -> Result<(), CmdError> {
        if self.world.agent(agent).is_none() {
            return Err(CmdError::Sim(SimError::UnknownAgent(agent)));
        }
        self.disown(agent);
        if let Some(p) = player {
            let key: Arc<str> = Arc::from(p.as_str());
            self.ownership.set_team(key.clone(), team.as_deref().map(Arc::from));
            self.own(agent, key);
        }
        Ok(())
    }

    /// The agents `sight` sees (only the stuck ones with `stuck`), at most `limit`.
    fn agents_view(&self, limit: usize, stuck: bool, sight: &Sight) -> Vec<AgentView> {
        let seen = self.seen(sight);
        let rate = self.world.config().tick_rate;
        // Whether an agent is stuck is part of its order: only whoever may see the order
        // may filter by it.
        let shows_order = |a: &crate::sim::Agent| self.sees_order(seen.as_ref(), a.id);
        self.world
            .agents()
            .iter()
            .filter(|a| self.sees(seen.as_ref(), a))
            .filter(|a| !stuck || (shows_order(a) && a.order.as_ref().is_some_and(|o| o.stuck(rate))))
            .take(limit)
            .map(|a| self.agent_view(a, shows_order(a)))
            .collect()
    }

    fn obstacle_views(&self) -> Vec<ObstacleView> {
        self.world.obstacles().iter().map(|o| ObstacleView { id: o.id, center: o.center.to_array(), radius: o.radius }).collect()
    }

    fn wall_views(&self) -> Vec<WallView> {
        self.world.walls().iter().map(|w| WallView { id: w.id, a: w.a.to_array(), b: w.b.to_array() }).collect()
    }

    /// The world as `sight` sees it.
    fn snapshot_view(&self, sight: &Sight) -> Snapshot {
        let q = self.quant();
        let seen = self.seen(sight);
        let agents: Vec<&crate::sim::Agent> = self.world.agents().iter().filter(|a| self.sees(seen.as_ref(), a)).collect();
        Snapshot {
            world: self.name.clone(),
            tick: self.wire_tick(),
            agents: agents.iter().map(|a| self.agent_view(a, self.sees_order(seen.as_ref(), a.id))).collect(),
            obstacles: self.obstacle_views(),
            walls: self.wall_views(),
            quantized: agents.iter().map(|a| q.quantize(&convert::sample(a))).collect(),
        }
    }

    /// Changes the tick rate, pause and autosave (each when given).
    fn patch(&mut self, tick_rate: Option<f32>, paused: Option<bool>, autosave: Option<bool>) -> Result<WorldInfoView, CmdError> {
        if let Some(rate) = tick_rate {
            self.world.set_tick_rate(rate).map_err(CmdError::Sim)?;
            self.recorder.tick_rate(&self.world, rate);
            self.stats.tick_rate_milli.store((rate * 1000.0) as u32, Ordering::Relaxed);
            self.publisher.sync_info_rate(self.world.config().tick_rate);
        }
        if let Some(p) = paused {
            self.schedule.paused = p;
            self.recorder.paused(&self.world, p);
        }
        if let Some(a) = autosave {
            self.autosave = a;
        }
        Ok(self.info_view())
    }

    /// Places random obstacles as `spec` says, within the world's obstacle and index bounds.
    fn random_obstacles(&mut self, spec: &crate::scenario::RandomObstacles) -> Result<Vec<u32>, SimError> {
        let existing: Vec<(glam::Vec2, f32)> = self.world.obstacles().iter().map(|o| (o.center, o.radius)).collect();
        let placed = crate::scenario::place_random_obstacles(self.world.config().bounds, spec, &existing, self.world.config().seed)?;
        let room = self.world.config().max_obstacles.saturating_sub(self.world.obstacles().len());
        if placed.len() > room {
            return Err(SimError::LimitExceeded { what: "obstacles".into(), max: self.world.config().max_obstacles });
        }
        self.caps.admit_obstacles(&self.world, &placed)?;
        placed
            .into_iter()
            .map(|(center, radius)| match self.apply(Command::AddObstacle { center, radius })? {
                Outcome::Added(id) => Ok(id),
                other => Err(SimError::invalid("obstacles", format!("unexpected outcome {other:?}"))),
            })
            .collect()
    }

    /// Applies a sim command: the one place commands reach the `World`, so the recording sees
    /// every one (REST, WebSocket, admin edits, random obstacles).
    pub(super) fn apply(&mut self, cmd: Command) -> Result<Outcome, SimError> {
        self.recorder.command(&self.world, &cmd);
        self.world.apply(cmd)
    }

    /// Starts or stops recording. A world changed since its load cannot be rebuilt from its
    /// scenario, and a snapshot (`snapshot_scenario`) keeps positions, not velocities, orders or
    /// per-agent behaviour changes: so the world is first re-based on that snapshot (as a save
    /// then load would do; subscribers get a reset), and the recording starts from it. The
    /// world's scenario for `reset` stays the one it was loaded from.
    pub(super) fn set_recording(&mut self, on: bool, digests: Option<bool>) -> Result<(), CmdError> {
        if !on {
            self.recorder.rec.stop(&self.world, "stopped by request");
            return Ok(());
        }
        if self.recorder.rec.active() {
            return Ok(());
        }
        if self.recorder.rec.pristine() {
            let sc = self.scenario.clone();
            return self.recorder.rec.start(&self.name, &sc, digests, false).map_err(CmdError::Invalid);
        }
        let snap = crate::scenario::snapshot_scenario(&self.world, &self.scenario);
        let (base, base_name) = (self.scenario.clone(), self.scenario_name.clone());
        self.replace_world(snap.clone(), base_name.clone(), false)?;
        self.scenario = base.clone();
        if let Ok(mut o) = self.origin.lock() {
            *o = (base, base_name);
        }
        self.recorder.rec.start(&self.name, &snap, digests, true).map_err(CmdError::Invalid)
    }
}

/// Sends an answer (a caller that stopped waiting is no error).
fn send<T>(reply: Reply<T>, r: Result<T, CmdError>) {
    let _ = reply.send(r);
}

/// True for the requests a world frozen for a handoff refuses: every one that changes it.
fn changes_while_frozen(req: &Request) -> bool {
    matches!(
        req,
        Request::Apply { .. }
            | Request::ApplyMany { .. }
            | Request::Patch { .. }
            | Request::Step { .. }
            | Request::Reset { .. }
            | Request::Load { .. }
            | Request::RandomObstacles { .. }
            | Request::Recording { .. }
            | Request::Kick { .. }
            | Request::SetOwner { .. }
            | Request::Replay { .. }
            | Request::Freeze { .. }
    )
}

/// Answers a refused request with `e` (nothing was changed).
pub(super) fn refuse(req: Request, e: CmdError) {
    match req {
        Request::Apply { reply, .. } | Request::ApplyMany { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Patch { reply, .. } | Request::Recording { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Step { reply, .. } | Request::Reset { reply } | Request::Load { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::RandomObstacles { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Kick { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::SetOwner { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Agents { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Agent { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::FlowField { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Avoidance { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Obstacles { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Walls { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Snapshot { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Info { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Save { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Players { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Replay { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Freeze { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Thaw { reply } => {
            let _ = reply.send(Err(e));
        },
        Request::Stall { reply, .. } => {
            let _ = reply.send(Err(e));
        },
        Request::Shutdown | Request::Panic => {}
    }
}

/// The agents a command acts on (ownership is checked for these).
pub(super) fn command_agents(c: &Command) -> Vec<AgentId> {
    match c {
        Command::Despawn(id) => vec![*id],
        Command::SetBehaviors { agent, .. }
        | Command::AddBehavior { agent, .. }
        | Command::RemoveBehavior { agent, .. }
        | Command::ResetBehaviors { agent } => vec![*agent],
        Command::MoveTo { agents, .. } => agents.clone(),
        Command::Spawn(_) | Command::AddObstacle { .. } | Command::MoveObstacle { .. } | Command::RemoveObstacle(_) | Command::AddWall { .. } | Command::RemoveWall(_) => Vec::new(),
    }
}

/// The agents a command names as behaviour targets, with the field that names each (the
/// field paths `World::apply` gives for an unknown target).
pub(super) fn command_targets(c: &Command) -> Vec<(String, AgentId)> {
    let of = |prefix: &str, entries: &[crate::sim::behaviors::BehaviorEntry]| -> Vec<(String, AgentId)> {
        entries.iter().enumerate().filter_map(|(i, e)| e.behavior.target_agent().map(|id| (format!("{prefix}[{i}].params.target"), id))).collect()
    };
    match c {
        Command::SetBehaviors { entries, .. } => of("behaviors", entries),
        Command::AddBehavior { entry, .. } => entry.behavior.target_agent().map(|id| vec![("behavior.params.target".to_string(), id)]).unwrap_or_default(),
        Command::Spawn(spec) => of("behaviors", &spec.behaviors),
        Command::Despawn(_)
        | Command::RemoveBehavior { .. }
        | Command::ResetBehaviors { .. }
        | Command::MoveTo { .. }
        | Command::AddObstacle { .. }
        | Command::MoveObstacle { .. }
        | Command::RemoveObstacle(_)
        | Command::AddWall { .. }
        | Command::RemoveWall(_) => Vec::new(),
    }
}

pub(super) fn command_kind(c: &Command) -> &'static str {
    match c {
        Command::Spawn(_) => "spawn",
        Command::Despawn(_) => "despawn",
        Command::SetBehaviors { .. } => "set_behaviors",
        Command::AddBehavior { .. } => "add_behavior",
        Command::RemoveBehavior { .. } => "remove_behavior",
        Command::ResetBehaviors { .. } => "reset_behaviors",
        Command::AddObstacle { .. } => "add_obstacle",
        Command::MoveObstacle { .. } => "move_obstacle",
        Command::RemoveObstacle(_) => "remove_obstacle",
        Command::AddWall { .. } => "add_wall",
        Command::RemoveWall(_) => "remove_wall",
        Command::MoveTo { .. } => "move_to",
    }
}
