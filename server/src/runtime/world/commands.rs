//! A command's way in: who may give it (ownership, sight, quotas, crowding), checked for a
//! whole batch first, then applied in order through the one recorded `apply`; and what
//! ownership changes bring (owners logged, orphans' agents handled by the world's policy).

use super::*;

impl Runner {
    /// Applies commands on behalf of an actor: ownership, sight, quotas, crowding and the
    /// batch itself (`World::check_batch`) are checked for all of them first, so a refused
    /// batch changes nothing; then they run in order. Agents a player spawns belong to it.
    pub(super) fn apply_for(&mut self, cmds: Vec<Command>, actor: &Actor) -> Result<Outcome, CmdError> {
        let kind = cmds.first().map_or("none", command_kind);
        let agents: Vec<AgentId> = cmds.iter().flat_map(command_agents).collect();
        let asked = spawn_count(&cmds);
        self.ownership.know(actor);
        // A spawn larger than `max_spawn` is invalid whoever asks: the sim refuses it naming
        // the field (`invalid_field`), before any quota is weighed.
        let quota = if self.caps.oversize(&cmds) { Ok(()) } else { self.ownership.check_spawn_quota(actor, asked, &self.name, self.world.agents().len(), self.caps.max_agents()) };
        let r = self
            .check_owner(actor, &agents, &cmds)
            .and_then(|()| self.check_spawn_place(actor, &cmds))
            .and(quota)
            .and_then(|()| self.caps.admit(&self.world, &cmds))
            .and_then(|()| self.world.check_batch(&cmds).map_err(CmdError::Sim))
            .and_then(|()| {
            let mut last = Outcome::Done;
            for c in cmds {
                last = self.apply(c)?;
                self.record_owner(&last, actor);
            }
            Ok(last)
        });
        if r.is_ok() && asked > 0 {
            self.ownership.charge_spawn(actor, asked);
        }
        self.metrics.command(kind, r.is_ok());
        r
    }

    /// Makes a player the owner of the agents it spawned (the admin's belong to nobody).
    pub(super) fn record_owner(&mut self, outcome: &Outcome, actor: &Actor) {
        if let (Outcome::Spawned(ids), Some(p)) = (outcome, &actor.player) {
            self.ownership.set_team(p.clone(), actor.team.clone());
            for id in ids {
                self.own(*id, p.clone());
            }
        }
    }

    /// The runner's state a durable world's snapshot keeps besides the world: the scenario a
    /// reset goes back to, the owners, and the sessions of the owners and subscribers.
    pub(super) fn durable_state(&self) -> crate::persist::RunnerState {
        crate::persist::RunnerState {
            scenario: serde_json::to_string(&self.scenario).unwrap_or_default(),
            max_agents: self.caps.max_agents() as u64,
            max_spawn: self.caps.max_spawn() as u64,
            owners: self.ownership.owner_list(),
            sessions: self.players.stored_sessions(&self.name, &self.ownership.owning()),
        }
    }

    /// A durable world logs its sessions when their set changed (checked with the orphans,
    /// once a second): a session opened or resumed since the last snapshot survives a crash.
    fn log_sessions(&mut self) {
        if !self.recorder.durable() {
            return;
        }
        let sessions = self.players.stored_sessions(&self.name, &self.ownership.owning());
        self.recorder.sessions(&self.world, &sessions);
    }

    /// Takes a durable world's snapshot when one is due (or, `now`, at once: a clean stop).
    pub(super) fn snapshot_if_due(&mut self, now: bool) {
        if !self.recorder.snapshot_due(now) {
            return;
        }
        let state = self.durable_state();
        self.recorder.snapshot(&self.world, self.schedule.paused, self.scenario_name.as_deref(), state);
    }

    /// `p` owns `id` from now on (a durable world logs it).
    pub(super) fn own(&mut self, id: AgentId, p: Arc<str>) {
        let team = self.ownership.team_of(&p);
        self.recorder.owner(&self.world, id, Some(&p), team.as_deref());
        self.ownership.own(id, p);
    }

    /// Forgets the owner of a removed agent.
    pub(super) fn disown(&mut self, id: AgentId) {
        if self.ownership.disown(id) {
            self.recorder.owner(&self.world, id, None, None);
        }
    }

    /// A player may command its own agents only, and name (as a behaviour's target) only the
    /// agents it sees. Under `owned` visibility an agent it does not see is as unknown to it
    /// as an id no agent has (`unknown_agent`); one it sees but does not own is `forbidden`.
    pub(super) fn check_owner(&self, actor: &Actor, agents: &[AgentId], cmds: &[Command]) -> Result<(), CmdError> {
        if actor.is_admin() {
            return Ok(());
        }
        if actor.role == proto::Role::Spectator {
            return Err(CmdError::NotAllowed("spectators command nothing".into()));
        }
        if !cmds.iter().all(Command::is_agent_command) {
            return Err(CmdError::NotAllowed("only the admin changes obstacles and walls".into()));
        }
        let seen = self.seen_by(actor);
        for id in agents {
            if !self.sees_id(seen.as_ref(), *id) {
                return Err(CmdError::Sim(SimError::UnknownAgent(*id)));
            }
            if actor.player.is_none() || self.ownership.owners.get(id) != actor.player.as_ref() {
                return Err(CmdError::Forbidden(*id));
            }
        }
        for (field, id) in cmds.iter().flat_map(command_targets) {
            if !self.sees_id(seen.as_ref(), id) {
                return Err(CmdError::Sim(SimError::invalid(field, format!("no agent {id}"))));
            }
        }
        Ok(())
    }

    /// Once a second: owners without a connection for the grace period get the orphan policy
    /// (once); known players who own nothing and are gone are forgotten.
    pub(super) fn check_orphans(&mut self) {
        let now = Instant::now();
        if !self.ownership.orphan_check_due(now) {
            return;
        }
        self.log_sessions();
        let players = self.players.clone();
        for p in self.ownership.expired(now, |p| players.connected(p)) {
            self.apply_orphan_policy(&p);
        }
    }

    /// The world's orphan policy on a player's agents.
    pub(super) fn apply_orphan_policy(&mut self, p: &Arc<str>) {
        let ids = self.ownership.agents_of(p);
        if ids.is_empty() {
            return;
        }
        tracing::info!(player = %p, agents = ids.len(), policy = ?self.ownership.policy.orphan_policy, "orphaned agents");
        for id in ids {
            let r = match self.ownership.policy.orphan_policy {
                crate::config::OrphanPolicy::Keep => Ok(Outcome::Done),
                crate::config::OrphanPolicy::Despawn => self.apply(Command::Despawn(id)),
                crate::config::OrphanPolicy::Freeze => {
                    let at = self.world.agent(id).map(|a| a.position);
                    self.apply(Command::ResetBehaviors { agent: id }).and_then(|_| match at {
                        Some(target) => self.apply(Command::MoveTo { agents: vec![id], target, stopping_distance: 0.0 }),
                        None => Ok(Outcome::Done),
                    })
                }
            };
            if let Err(e) = r {
                tracing::warn!(player = %p, agent = id, "orphan policy: {e}");
            }
        }
    }
}
