//! Who may command which agent: ownership, spawn quotas and rates, orphaned agents.

use super::*;

impl Runner {
    /// Applies commands on behalf of an actor: ownership, sight, quotas, crowding and the
    /// batch itself (`World::check_batch`) are checked for all of them first, so a refused
    /// batch changes nothing; then they run in order. Agents a player spawns belong to it.
    pub(super) fn apply_for(&mut self, cmds: Vec<Command>, actor: &Actor) -> Result<Outcome, CmdError> {
        let kind = cmds.first().map_or("none", command_kind);
        let agents: Vec<AgentId> = cmds.iter().flat_map(command_agents).collect();
        let asked = spawn_count(&cmds);
        if let Some(p) = &actor.player {
            // Known here from now on (GET /worlds/{w}/players, team vision).
            if !self.teams.contains_key(p) && self.teams.len() < MAX_KNOWN_PLAYERS {
                self.teams.insert(p.clone(), actor.team.clone());
            }
        }
        // A spawn larger than `max_spawn` is invalid whoever asks: the sim refuses it naming
        // the field (`invalid_field`), before any quota is weighed.
        let oversize = cmds.iter().any(|c| spawn_count(std::slice::from_ref(c)) > self.max_spawn);
        let quota = if oversize { Ok(()) } else { self.check_spawn_quota(actor, asked) };
        let r = self
            .check_owner(actor, &agents, &cmds)
            .and_then(|()| self.check_spawn_place(actor, &cmds))
            .and(quota)
            .and_then(|()| self.admit(&cmds))
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
            self.charge_spawn(actor, asked);
        }
        self.metrics.command(kind, r.is_ok());
        r
    }

    /// Checks the spawns among `cmds` against the crowding bounds (`admission.rs`), all of
    /// them before any is applied.
    pub(super) fn admit(&self, cmds: &[Command]) -> Result<(), CmdError> {
        use crate::runtime::admission as adm;
        if cmds.iter().any(|c| matches!(c, Command::Spawn(_))) {
            let bounds = self.world.config().bounds;
            let mut covered = adm::cover(&self.world);
            for c in cmds {
                if let Command::Spawn(spec) = c {
                    covered = adm::check_spawn(spec, bounds, covered, &self.crowding)?;
                }
            }
        }
        if cmds.iter().any(|c| matches!(c, Command::AddObstacle { .. } | Command::MoveObstacle { .. } | Command::AddWall { .. })) {
            let shape = adm::static_shape(self.world.config());
            let mut used = adm::static_cells(&self.world, &shape);
            for c in cmds {
                match c {
                    Command::AddObstacle { center, radius } => {
                        let (lo, hi) = adm::obstacle_box(*center, *radius);
                        used = adm::check_static(used + adm::box_cells(&shape, lo, hi), "radius", &self.crowding)?;
                    }
                    Command::MoveObstacle { id, center, radius } => {
                        if let Some(o) = self.world.obstacles().iter().find(|o| o.id == *id) {
                            let (lo, hi) = adm::obstacle_box(o.center, o.radius);
                            let old = adm::box_cells(&shape, lo, hi);
                            let (lo, hi) = adm::obstacle_box(*center, radius.unwrap_or(o.radius));
                            used = adm::check_static(used.saturating_sub(old) + adm::box_cells(&shape, lo, hi), "radius", &self.crowding)?;
                        }
                    }
                    Command::AddWall { a, b } => {
                        used = adm::check_static(used + adm::box_cells(&shape, a.min(*b), a.max(*b)), "b", &self.crowding)?;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// Makes a player the owner of the agents it spawned (the admin's belong to nobody).
    pub(super) fn record_owner(&mut self, outcome: &Outcome, actor: &Actor) {
        if let (Outcome::Spawned(ids), Some(p)) = (outcome, &actor.player) {
            self.teams.insert(p.clone(), actor.team.clone());
            for id in ids {
                self.own(*id, p.clone());
            }
        }
    }

    /// The runner's state a durable world's snapshot keeps besides the world: the scenario a
    /// reset goes back to, the owners, and the sessions of the owners and subscribers.
    pub(super) fn durable_state(&self) -> crate::persist::RunnerState {
        let mut owners: Vec<(u32, String, Option<String>)> =
            self.owners.iter().map(|(&a, p)| (a, p.to_string(), self.teams.get(p).cloned().flatten().map(|t| t.to_string()))).collect();
        owners.sort_unstable();
        let players: std::collections::HashSet<&str> = self.owned.keys().map(|p| &**p).collect();
        crate::persist::RunnerState {
            scenario: serde_json::to_string(&self.scenario).unwrap_or_default(),
            max_agents: self.max_agents as u64,
            max_spawn: self.max_spawn as u64,
            owners,
            sessions: self.players.stored_sessions(&self.name, &players),
        }
    }

    /// A durable world logs its sessions when their set changed (checked with the orphans,
    /// once a second): a session opened or resumed since the last snapshot survives a crash.
    fn log_sessions(&mut self) {
        if self.dur.is_none() {
            return;
        }
        let players: std::collections::HashSet<&str> = self.owned.keys().map(|p| &**p).collect();
        let sessions = self.players.stored_sessions(&self.name, &players);
        if let Some(d) = self.dur.as_mut() {
            d.sessions(&self.world, &sessions);
        }
    }

    /// Takes a durable world's snapshot when one is due (or, `now`, at once: a clean stop).
    pub(super) fn snapshot_if_due(&mut self, now: bool) {
        if !self.dur.as_ref().is_some_and(|d| now || d.snapshot_due()) {
            return;
        }
        let state = self.durable_state();
        if let Some(d) = self.dur.as_mut() {
            d.snapshot(&self.world, self.paused, self.scenario_name.as_deref(), state);
        }
    }

    pub(super) fn own(&mut self, id: AgentId, p: Arc<str>) {
        if let Some(d) = self.dur.as_mut() {
            let team = self.teams.get(&p).cloned().flatten();
            d.owner(&self.world, id, Some(&p), team.as_deref());
        }
        if let Some(old) = self.owners.insert(id, p.clone()) {
            self.release(&old);
        }
        *self.owned.entry(p).or_insert(0) += 1;
    }

    /// Forgets the owner of a removed agent.
    pub(super) fn disown(&mut self, id: AgentId) {
        if let Some(s) = self.owners.remove(&id) {
            if let Some(d) = self.dur.as_mut() {
                d.owner(&self.world, id, None, None);
            }
            self.release(&s);
        }
    }

    pub(super) fn release(&mut self, s: &Arc<str>) {
        if let Some(n) = self.owned.get_mut(s) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.owned.remove(s);
            }
        }
    }

    /// The spawn-rate bucket of a player, refilled to now: (tokens, burst).
    pub(super) fn bucket(&self, p: &Arc<str>, now: Instant) -> (f64, f64) {
        let burst = self.policy.max_agents_per_player as f64;
        let (tokens, last) = self.buckets.get(p).copied().unwrap_or((burst, now));
        ((tokens + now.duration_since(last).as_secs_f64() * self.policy.spawn_rate_per_sec).min(burst), burst)
    }

    pub(super) fn charge_spawn(&mut self, actor: &Actor, asked: usize) {
        let Some(p) = actor.player.clone().filter(|_| !actor.is_admin()) else { return };
        let now = Instant::now();
        let (tokens, _) = self.bucket(&p, now);
        if self.buckets.len() < MAX_KNOWN_PLAYERS || self.buckets.contains_key(&p) {
            self.buckets.insert(p, ((tokens - asked as f64).max(0.0), now));
        }
    }

    /// A player's spawns must fit its quotas in this world: agents owned
    /// (`max_agents_per_player`), spawn rate (`spawn_rate_per_sec`), and the world's own cap.
    /// The admin is exempt.
    pub(super) fn check_spawn_quota(&self, actor: &Actor, asked: usize) -> Result<(), CmdError> {
        if actor.is_admin() || asked == 0 {
            return Ok(());
        }
        let Some(p) = &actor.player else { return Ok(()) };
        let max = self.policy.max_agents_per_player;
        let have = self.owned.get(p).copied().unwrap_or(0);
        if have.saturating_add(asked) > max {
            return Err(CmdError::Quota(format!("player `{p}` may own at most {max} agents in world `{}` (owns {have}, asked {asked})", self.name)));
        }
        let (tokens, _) = self.bucket(p, Instant::now());
        if asked as f64 > tokens {
            return Err(CmdError::Quota(format!(
                "player `{p}` spawns too fast in world `{}`: at most {} agents per second (now {} available)",
                self.name,
                self.policy.spawn_rate_per_sec,
                tokens.floor()
            )));
        }
        let total = self.world.agents().len();
        if total.saturating_add(asked) > self.max_agents {
            return Err(CmdError::Quota(format!("world `{}` is full: {total} of at most {} agents", self.name, self.max_agents)));
        }
        Ok(())
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
            if actor.player.is_none() || self.owners.get(id) != actor.player.as_ref() {
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
        if now < self.next_orphan_check {
            return;
        }
        self.next_orphan_check = now + ORPHAN_CHECK;
        self.log_sessions();
        if self.teams.is_empty() {
            return;
        }
        let grace = Duration::from_secs(u64::from(self.policy.session_grace_secs));
        let mut expired = Vec::new();
        let known: Vec<Arc<str>> = self.teams.keys().cloned().collect();
        for p in known {
            if self.players.connected(&p) {
                self.gone.remove(&p);
                continue;
            }
            if !self.owned.contains_key(&p) {
                // Owns nothing here and is away: forget it (bounds `teams`, `gone`, `buckets`).
                self.teams.remove(&p);
                self.gone.remove(&p);
                self.buckets.remove(&p);
                continue;
            }
            let g = self.gone.entry(p.clone()).or_insert((now, false));
            if !g.1 && now.duration_since(g.0) >= grace {
                g.1 = true;
                expired.push(p);
            }
        }
        for p in expired {
            self.apply_orphan_policy(&p);
        }
    }

    /// The world's orphan policy on a player's agents.
    pub(super) fn apply_orphan_policy(&mut self, p: &Arc<str>) {
        let mut ids: Vec<AgentId> = self.owners.iter().filter(|(_, o)| *o == p).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        if ids.is_empty() {
            return;
        }
        tracing::info!(player = %p, agents = ids.len(), policy = ?self.policy.orphan_policy, "orphaned agents");
        for id in ids {
            let r = match self.policy.orphan_policy {
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
