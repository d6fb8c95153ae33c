//! What a caller sees of the world. Under `owned` visibility every REST read and every agent
//! a player's command names is narrowed to the player's vision (`authz::Sight`), exactly as
//! its WebSocket frames are (`Runner::vision` below): its own agents, and the agents in the AOI
//! cells within `vision_radius` of an agent of its own or its team's.
//!
//! **Invariant:** a hidden agent and an unknown one look the same to a player: the same error
//! code (`unknown_agent`), the same absence from lists and counts.

use super::*;
use crate::authz::Sight;
use crate::config::Visibility;

/// The agents one viewer sees now.
pub(crate) struct Seen {
    player: Arc<str>,
    cells: Vec<bool>,
}

impl Runner {
    /// What `sight` sees here now; `None` sees everything (the world is not `owned`, or the
    /// caller sees all).
    pub(super) fn seen(&self, sight: &Sight) -> Option<Seen> {
        match sight {
            Sight::All => None,
            Sight::Vision { player, key } => self.seen_as(player, key),
        }
    }

    /// What a command's actor sees here now (`None`: everything; the admin, spectators).
    pub(super) fn seen_by(&self, actor: &Actor) -> Option<Seen> {
        if actor.role != proto::Role::Player {
            return None;
        }
        let p = actor.player.as_ref()?;
        self.seen_as(p, &crate::auth::vision_key(p, actor.team.as_deref()))
    }

    fn seen_as(&self, player: &str, key: &str) -> Option<Seen> {
        if self.ownership.policy.visibility != Visibility::Owned {
            return None;
        }
        let mut cells = vec![false; self.publisher.info.cell_count() as usize];
        for (id, owner) in &self.ownership.owners {
            let team = self.ownership.team_of(owner);
            if crate::auth::vision_key(owner, team.as_deref()) != key {
                continue;
            }
            if let Some(a) = self.world.agent(*id) {
                self.mark_sight(&mut cells, a.position);
            }
        }
        Some(Seen { player: Arc::from(player), cells })
    }

    /// Marks the AOI cells that intersect the disc of `vision_radius` around `at`.
    pub(super) fn mark_sight(&self, cells: &mut [bool], at: glam::Vec2) {
        let r = self.ownership.policy.vision_radius;
        let (cs, b) = (self.publisher.info.aoi_cell_size, self.publisher.info.bounds);
        let (x, y) = (at.x, at.y);
        let lo = self.publisher.info.cell_of(x - r, y - r);
        let hi = self.publisher.info.cell_of(x + r, y + r);
        let cols = self.publisher.info.cols.max(1);
        for row in lo / cols..=hi / cols {
            for col in lo % cols..=hi % cols {
                // Nearest point of the cell to the agent.
                let (x0, y0) = (b.min_x + col as f32 * cs, b.min_y + row as f32 * cs);
                let dx = x - x.clamp(x0, x0 + cs);
                let dy = y - y.clamp(y0, y0 + cs);
                if dx * dx + dy * dy <= r * r {
                    if let Some(c) = cells.get_mut((row * cols + col) as usize) {
                        *c = true;
                    }
                }
            }
        }
    }

    /// True if `seen` sees agent `a`: its own agents always, others in a cell its vision covers.
    pub(super) fn sees(&self, seen: Option<&Seen>, a: &crate::sim::Agent) -> bool {
        let Some(s) = seen else { return true };
        self.ownership.owners.get(&a.id).is_some_and(|o| **o == *s.player) || s.cells.get(self.publisher.info.cell_of(a.position.x, a.position.y) as usize).copied().unwrap_or(false)
    }

    /// True if `seen` sees agent `id` (an unknown id is not seen).
    pub(super) fn sees_id(&self, seen: Option<&Seen>, id: AgentId) -> bool {
        self.world.agent(id).is_some_and(|a| self.sees(seen, a))
    }

    /// True if `seen` is a player's and `id` is its own agent.
    pub(super) fn owns(&self, seen: Option<&Seen>, id: AgentId) -> bool {
        seen.is_some_and(|s| self.ownership.owners.get(&id).is_some_and(|o| **o == *s.player))
    }

    /// True if `seen` may see agent `id`'s MoveTo order (where it goes, whether it is stuck):
    /// everything seen whole (the admin, spectators, worlds without fog) or a player's own agent.
    pub(super) fn sees_order(&self, seen: Option<&Seen>, id: AgentId) -> bool {
        seen.is_none() || self.owns(seen, id)
    }
}

impl Runner {
    /// Under `owned` visibility: per vision key (a team, or a player without one), the AOI
    /// cells that intersect a disc of `vision_radius` around one of its agents.
    pub(super) fn vision(&self) -> Option<Arc<Vision>> {
        if self.ownership.policy.visibility != Visibility::Owned {
            return None;
        }
        let mut out: Vision = HashMap::new();
        let n = self.publisher.info.cell_count() as usize;
        for (id, owner) in &self.ownership.owners {
            let Some(a) = self.world.agent(*id) else { continue };
            let team = self.ownership.team_of(owner);
            let key = crate::auth::vision_key(owner, team.as_deref());
            let cells = out.entry(key).or_insert_with(|| vec![false; n]);
            self.mark_sight(cells, a.position);
        }
        Some(Arc::new(out))
    }

    /// Under `owned` visibility: a target that leaves its owner's (team's) vision acts as
    /// gone. Every owned agent's behaviours aimed at an agent its owner no longer sees are
    /// removed (through the recorded `apply`, so a replay does the same), and the owner gets
    /// one `target_lost` event per (agent, target). `vision`: this tick's vision per key.
    pub(super) fn drop_hidden_targets(&mut self, vision: Option<&Vision>) -> Vec<(Option<Arc<str>>, proto::EventKind)> {
        let Some(vision) = vision else { return Vec::new() };
        let mut ids: Vec<AgentId> = self.ownership.owners.keys().copied().collect();
        ids.sort_unstable();
        let mut out = Vec::new();
        for id in ids {
            let (Some(owner), Some(a)) = (self.ownership.owners.get(&id).cloned(), self.world.agent(id)) else { continue };
            if !a.behaviors.entries().iter().any(|e| e.behavior.target_agent().is_some()) {
                continue;
            }
            let team = self.ownership.team_of(&owner);
            let cells = vision.get(&crate::auth::vision_key(&owner, team.as_deref()));
            // A target that no longer exists is gone already (the sim treats it so).
            let seen = |t: AgentId| {
                self.world.agent(t).is_none_or(|ta| cells.and_then(|c| c.get(self.publisher.info.cell_of(ta.position.x, ta.position.y) as usize)).copied().unwrap_or(false))
            };
            let mut lost: Vec<AgentId> = a.behaviors.entries().iter().filter_map(|e| e.behavior.target_agent()).filter(|t| !seen(*t)).collect();
            if lost.is_empty() {
                continue;
            }
            lost.sort_unstable();
            lost.dedup();
            let entries: Vec<_> = a.behaviors.entries().iter().filter(|e| e.behavior.target_agent().is_none_or(|t| !lost.contains(&t))).cloned().collect();
            if let Err(e) = self.apply(Command::SetBehaviors { agent: id, entries }) {
                tracing::warn!(agent = id, "dropping hidden targets: {e}");
                continue;
            }
            out.extend(lost.into_iter().map(|target| (Some(owner.clone()), proto::EventKind::TargetLost(proto::TargetLostEvent { agent: id, target }))));
        }
        out
    }
}

impl Runner {
    /// Under `owned` visibility with `spawn_zones` set: a player's spawn area must lie inside one
    /// of its own or its team's zones, or inside what it sees now (every AOI cell the area's
    /// bounding box touches), so that no spawn scouts where the player cannot see.
    pub(super) fn check_spawn_place(&self, actor: &Actor, cmds: &[Command]) -> Result<(), CmdError> {
        if actor.role != proto::Role::Player || self.ownership.policy.visibility != Visibility::Owned || self.ownership.policy.spawn_zones.is_empty() {
            return Ok(());
        }
        let Some(p) = &actor.player else { return Ok(()) };
        let seen = self.seen_by(actor);
        for c in cmds {
            let Command::Spawn(spec) = c else { continue };
            let (lo, hi) = area_box(&spec.area);
            let zoned = self.ownership.policy.spawn_zones.iter().any(|z| z.is_for(p, actor.team.as_deref()) && z.holds(lo, hi));
            if !zoned && !seen.as_ref().is_some_and(|s| self.covers(s, lo, hi)) {
                return Err(CmdError::NotAllowed(format!(
                    "in world `{}` a player spawns only inside its (team's) spawn zones or where it sees now (players.spawn_zones)",
                    self.name
                )));
            }
        }
        Ok(())
    }

    /// True if `seen` sees every AOI cell the box `lo`–`hi` touches.
    fn covers(&self, seen: &Seen, lo: [f32; 2], hi: [f32; 2]) -> bool {
        let cols = self.publisher.info.cols.max(1);
        let (a, b) = (self.publisher.info.cell_of(lo[0], lo[1]), self.publisher.info.cell_of(hi[0], hi[1]));
        (a / cols..=b / cols).all(|row| (a % cols..=b % cols).all(|col| seen.cells.get((row * cols + col) as usize).copied().unwrap_or(false)))
    }
}

/// The bounding box of a spawn area: (`[min x, min y]`, `[max x, max y]`).
fn area_box(area: &crate::sim::world::SpawnArea) -> ([f32; 2], [f32; 2]) {
    use crate::sim::world::SpawnArea;
    match area {
        SpawnArea::Rect { min, max } => (min.to_array(), max.to_array()),
        SpawnArea::Disc { center, radius } | SpawnArea::Ring { center, radius } => ([center.x - radius, center.y - radius], [center.x + radius, center.y + radius]),
        SpawnArea::Points(points) => points.iter().fold(([f32::INFINITY; 2], [f32::NEG_INFINITY; 2]), |(lo, hi), p| {
            ([lo[0].min(p.x), lo[1].min(p.y)], [hi[0].max(p.x), hi[1].max(p.y)])
        }),
    }
}
