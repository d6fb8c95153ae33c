//! Ownership: who owns which agent, the team of every player known here, spawn quotas and
//! rates, and players gone without a connection (orphans). It decides; the runner applies
//! (and records) what follows from a decision.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::types::{Actor, CmdError, WorldPlayer};
use crate::config::WorldPolicy;
use crate::sim::AgentId;

/// Most players a world remembers (owners, and players who commanded in it).
pub(super) const MAX_KNOWN_PLAYERS: usize = 100_000;

/// How often a world looks for owners whose grace period is over.
pub(super) const ORPHAN_CHECK: Duration = Duration::from_millis(250);

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

#[cfg(test)]
mod tests {
    use super::*;
    use steer_proto as proto;

    fn player(name: &str, team: Option<&str>) -> Actor {
        Actor { player: Some(Arc::from(name)), role: proto::Role::Player, team: team.map(Arc::from) }
    }

    #[test]
    fn owning_moving_and_disowning_keep_the_counts() {
        let mut o = Ownership::new(WorldPolicy::default());
        let (p, q): (Arc<str>, Arc<str>) = (Arc::from("p"), Arc::from("q"));
        o.own(1, p.clone());
        o.own(2, p.clone());
        // Agent 2 changes hands: p keeps one, q has one.
        o.own(2, q.clone());
        assert_eq!((o.owned.get(&p).copied(), o.owned.get(&q).copied()), (Some(1), Some(1)));
        assert_eq!(o.agents_of(&p), vec![1]);
        assert!(o.disown(1));
        // Owning nothing, p is no owner any more; a second disown finds nobody.
        assert!(!o.owned.contains_key(&p));
        assert!(!o.disown(1));
        assert_eq!(o.owning_sorted(), vec!["q".to_string()]);
        o.clear_owners();
        assert!(o.owners.is_empty() && o.owned.is_empty());
    }

    #[test]
    fn spawn_quotas_name_the_player_the_rate_and_the_world_cap() {
        let policy = WorldPolicy { max_agents_per_player: 3, spawn_rate_per_sec: 1.0, ..WorldPolicy::default() };
        let mut o = Ownership::new(policy);
        let a = player("p", None);
        // Within every quota.
        assert_eq!(o.check_spawn_quota(&a, 3, "w", 0, 100), Ok(()));
        // More than the player may own.
        let e = o.check_spawn_quota(&a, 4, "w", 0, 100).unwrap_err().to_string();
        assert_eq!(e, "player `p` may own at most 3 agents in world `w` (owns 0, asked 4)");
        // The bucket starts full (3 tokens); three spawned leave none for now.
        o.charge_spawn(&a, 3);
        let e = o.check_spawn_quota(&a, 1, "w", 3, 100).unwrap_err().to_string();
        assert!(e.starts_with("player `p` spawns too fast in world `w`: at most 1 agents per second"), "{e}");
        // The world's cap, for a player with room and tokens.
        let e = o.check_spawn_quota(&player("r", None), 2, "w", 99, 100).unwrap_err().to_string();
        assert_eq!(e, "world `w` is full: 99 of at most 100 agents");
        // The admin has no quotas.
        assert_eq!(o.check_spawn_quota(&Actor::admin(), 1000, "w", 99, 100), Ok(()));
    }

    #[test]
    fn an_away_owner_expires_once_after_the_grace_and_an_idle_player_is_forgotten() {
        let policy = WorldPolicy { session_grace_secs: 0, ..WorldPolicy::default() };
        let mut o = Ownership::new(policy);
        let (p, q) = (player("p", Some("red")), player("q", None));
        o.know(&p);
        o.know(&q);
        o.own(7, Arc::from("p"));
        assert_eq!(o.team_of(&Arc::from("p")).as_deref(), Some("red"));
        let now = Instant::now();
        // p owns an agent and is away past a grace of 0: its orphan policy applies, once.
        assert_eq!(o.expired(now, |_| false), vec![Arc::<str>::from("p")]);
        assert!(o.expired(now, |_| false).is_empty());
        // q owns nothing and is away: forgotten.
        let names: Vec<String> = o.players_view().into_iter().map(|w| w.player).collect();
        assert_eq!(names, vec!["p".to_string()]);
        assert!(o.players_view()[0].orphaned);
        // Back again, p is no longer counted as gone.
        assert!(o.expired(now, |_| true).is_empty());
        assert!(!o.players_view()[0].orphaned);
    }

    #[test]
    fn orphans_are_looked_for_once_per_check_period() {
        let mut o = Ownership::new(WorldPolicy::default());
        let now = Instant::now();
        assert!(o.orphan_check_due(now));
        assert!(!o.orphan_check_due(now));
        assert!(o.orphan_check_due(now + ORPHAN_CHECK));
    }
}
