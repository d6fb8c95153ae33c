//! Ownership: who owns which agent, the team of every player known here, spawn quotas and
//! rates, and players gone without a connection (orphans). It decides; the runner applies
//! (and records) what follows from a decision.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::requests::{MAX_KNOWN_PLAYERS, ORPHAN_CHECK};
use super::{Actor, CmdError, WorldPlayer};
use crate::config::WorldPolicy;
use crate::sim::AgentId;

pub(super) struct Ownership {
    /// The player rules of this world (quotas, grace, orphan policy, visibility).
    pub(super) policy: WorldPolicy,
    /// The owner of each owned agent (agents of the scenario and of the admin have none).
    pub(super) owners: HashMap<AgentId, Arc<str>>,
    /// The team of every player known here (owners, and players who commanded here).
    pub(super) teams: HashMap<Arc<str>, Option<Arc<str>>>,
    /// Agents each player owns (the counts of `owners`).
    pub(super) owned: HashMap<Arc<str>, usize>,
    /// Spawn-rate token bucket per player: (tokens, last refill).
    buckets: HashMap<Arc<str>, (f64, Instant)>,
    /// Owners without a connection: since when, and whether the orphan policy was applied.
    gone: HashMap<Arc<str>, (Instant, bool)>,
    next_orphan_check: Instant,
}

impl Ownership {
    pub(super) fn new(policy: WorldPolicy) -> Self {
        Ownership {
            policy,
            owners: HashMap::new(),
            teams: HashMap::new(),
            owned: HashMap::new(),
            buckets: HashMap::new(),
            gone: HashMap::new(),
            next_orphan_check: Instant::now(),
        }
    }

    /// The team of player `p` (`None`: none, or not known here).
    pub(super) fn team_of(&self, p: &Arc<str>) -> Option<Arc<str>> {
        self.teams.get(p).cloned().flatten()
    }

    /// A player who commands here is known from now on (GET /worlds/{w}/players, team
    /// vision), within [`MAX_KNOWN_PLAYERS`].
    pub(super) fn know(&mut self, actor: &Actor) {
        if let Some(p) = &actor.player
            && !self.teams.contains_key(p)
            && self.teams.len() < MAX_KNOWN_PLAYERS
        {
            self.teams.insert(p.clone(), actor.team.clone());
        }
    }

    /// Player `p` is in `team` (an owner's team is always known).
    pub(super) fn set_team(&mut self, p: Arc<str>, team: Option<Arc<str>>) {
        self.teams.insert(p, team);
    }

    /// `p` owns `id` from now on (answers nothing: the caller records the change).
    pub(super) fn own(&mut self, id: AgentId, p: Arc<str>) {
        if let Some(old) = self.owners.insert(id, p.clone()) {
            self.release(&old);
        }
        *self.owned.entry(p).or_insert(0) += 1;
    }

    /// `id` belongs to nobody from now on; answers whether it belonged to someone.
    pub(super) fn disown(&mut self, id: AgentId) -> bool {
        let Some(s) = self.owners.remove(&id) else { return false };
        self.release(&s);
        true
    }

    fn release(&mut self, s: &Arc<str>) {
        if let Some(n) = self.owned.get_mut(s) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.owned.remove(s);
            }
        }
    }

    /// A new world: nobody owns anything (players stay known).
    pub(super) fn clear_owners(&mut self) {
        self.owners.clear();
        self.owned.clear();
    }

    /// Every owner, sorted by agent: (agent, player, team), as a snapshot keeps them.
    pub(super) fn owner_list(&self) -> Vec<(u32, String, Option<String>)> {
        let mut owners: Vec<(u32, String, Option<String>)> = self.owners.iter().map(|(&a, p)| (a, p.to_string(), self.team_of(p).map(|t| t.to_string()))).collect();
        owners.sort_unstable();
        owners
    }

    /// The players owning at least one agent here.
    pub(super) fn owning(&self) -> HashSet<&str> {
        self.owned.keys().map(|p| &**p).collect()
    }

    /// The players owning agents here, sorted (a handoff waits for their sessions).
    pub(super) fn owning_sorted(&self) -> Vec<String> {
        let mut owners: Vec<String> = self.owned.iter().filter(|(_, n)| **n > 0).map(|(p, _)| p.to_string()).collect();
        owners.sort_unstable();
        owners
    }

    /// The agents `p` owns, by id.
    pub(super) fn agents_of(&self, p: &Arc<str>) -> Vec<AgentId> {
        let mut ids: Vec<AgentId> = self.owners.iter().filter(|(_, o)| *o == p).map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids
    }

    /// Every player known here, by name.
    pub(super) fn players_view(&self) -> Vec<WorldPlayer> {
        let mut v: Vec<WorldPlayer> = self
            .teams
            .keys()
            .map(|p| WorldPlayer { player: p.to_string(), agents: self.owned.get(p).copied().unwrap_or(0), orphaned: self.gone.get(p).is_some_and(|g| g.1) })
            .collect();
        v.sort_by(|a, b| a.player.cmp(&b.player));
        v
    }

    /// Marks `p` gone for good (kicked); answers the agents it owns.
    pub(super) fn kick(&mut self, p: &Arc<str>) -> usize {
        self.gone.insert(p.clone(), (Instant::now(), true));
        self.owned.get(p).copied().unwrap_or(0)
    }

    /// The spawn-rate bucket of a player, refilled to now: (tokens, burst).
    fn bucket(&self, p: &Arc<str>, now: Instant) -> (f64, f64) {
        let burst = self.policy.max_agents_per_player as f64;
        let (tokens, last) = self.buckets.get(p).copied().unwrap_or((burst, now));
        ((tokens + now.duration_since(last).as_secs_f64() * self.policy.spawn_rate_per_sec).min(burst), burst)
    }

    /// Takes `asked` spawned agents from the actor's bucket.
    pub(super) fn charge_spawn(&mut self, actor: &Actor, asked: usize) {
        let Some(p) = actor.player.clone().filter(|_| !actor.is_admin()) else { return };
        let now = Instant::now();
        let (tokens, _) = self.bucket(&p, now);
        if self.buckets.len() < MAX_KNOWN_PLAYERS || self.buckets.contains_key(&p) {
            self.buckets.insert(p, ((tokens - asked as f64).max(0.0), now));
        }
    }

    /// A player's spawns must fit its quotas in world `world`: agents owned
    /// (`max_agents_per_player`), spawn rate (`spawn_rate_per_sec`), and the world's own cap
    /// (`total` of at most `max_agents`). The admin is exempt.
    pub(super) fn check_spawn_quota(&self, actor: &Actor, asked: usize, world: &str, total: usize, max_agents: usize) -> Result<(), CmdError> {
        if actor.is_admin() || asked == 0 {
            return Ok(());
        }
        let Some(p) = &actor.player else { return Ok(()) };
        let max = self.policy.max_agents_per_player;
        let have = self.owned.get(p).copied().unwrap_or(0);
        if have.saturating_add(asked) > max {
            return Err(CmdError::Quota(format!("player `{p}` may own at most {max} agents in world `{world}` (owns {have}, asked {asked})")));
        }
        let (tokens, _) = self.bucket(p, Instant::now());
        if asked as f64 > tokens {
            return Err(CmdError::Quota(format!(
                "player `{p}` spawns too fast in world `{world}`: at most {} agents per second (now {} available)",
                self.policy.spawn_rate_per_sec,
                tokens.floor()
            )));
        }
        if total.saturating_add(asked) > max_agents {
            return Err(CmdError::Quota(format!("world `{world}` is full: {total} of at most {max_agents} agents")));
        }
        Ok(())
    }

    /// True once per [`ORPHAN_CHECK`]: time to look for orphans (and log sessions).
    pub(super) fn orphan_check_due(&mut self, now: Instant) -> bool {
        if now < self.next_orphan_check {
            return false;
        }
        self.next_orphan_check = now + ORPHAN_CHECK;
        true
    }

    /// The owners whose grace period without a connection ends now (each once); known players
    /// who own nothing and are gone are forgotten.
    pub(super) fn expired(&mut self, now: Instant, connected: impl Fn(&str) -> bool) -> Vec<Arc<str>> {
        if self.teams.is_empty() {
            return Vec::new();
        }
        let grace = Duration::from_secs(u64::from(self.policy.session_grace_secs));
        let mut expired = Vec::new();
        let known: Vec<Arc<str>> = self.teams.keys().cloned().collect();
        for p in known {
            if connected(&p) {
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
        expired
    }
}
