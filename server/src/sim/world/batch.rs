//! Checking a batch of commands whole before any of it applies.

use std::collections::HashSet;

use super::*;

impl World {
    /// Checks that `cmds`, applied in order, would all succeed, and changes nothing. A front
    /// end applies a batch only after this passes, so a refused batch changes nothing: each
    /// command alone already validates everything before it changes anything, and this adds
    /// what one command does to the next (an agent despawned earlier in the batch is unknown
    /// to the commands after it).
    ///
    /// A batch of more than one command holds agent commands only (despawn and behaviour
    /// changes, as the WebSocket's lists of agents become); a spawn, a MoveTo, an obstacle or
    /// a wall comes alone.
    pub fn check_batch(&self, cmds: &[Command]) -> Result<(), SimError> {
        if cmds.len() <= 1 {
            return Ok(());
        }
        let mut gone: HashSet<AgentId> = HashSet::new();
        let known = |id: AgentId, gone: &HashSet<AgentId>| if gone.contains(&id) { Err(SimError::UnknownAgent(id)) } else { self.agent_index(id).map(|_| ()) };
        let targets = |set: &BehaviorSet, gone: &HashSet<AgentId>| {
            for (i, e) in set.entries().iter().enumerate() {
                if let Some(id) = e.behavior.target_agent().filter(|id| gone.contains(id)) {
                    return Err(SimError::invalid(format!("behaviors[{i}].params.target"), format!("no agent {id}")));
                }
            }
            self.check_agent_targets(set)
        };
        for c in cmds {
            match c {
                Command::Despawn(id) => {
                    known(*id, &gone)?;
                    gone.insert(*id);
                }
                Command::SetBehaviors { agent, entries } => {
                    known(*agent, &gone)?;
                    let set = BehaviorSet::new(entries.clone()).map_err(|e| e.within("behaviors"))?;
                    targets(&set, &gone)?;
                }
                Command::AddBehavior { agent, entry } => {
                    known(*agent, &gone)?;
                    let mut set = self.agent(*agent).map(|a| (*a.behaviors).clone()).unwrap_or_default();
                    set.add(entry.clone()).map_err(|e| e.within("behavior"))?;
                    targets(&set, &gone)?;
                }
                Command::RemoveBehavior { agent, .. } | Command::ResetBehaviors { agent } => known(*agent, &gone)?,
                Command::Spawn(_)
                | Command::MoveTo { .. }
                | Command::AddObstacle { .. }
                | Command::MoveObstacle { .. }
                | Command::RemoveObstacle(_)
                | Command::AddWall { .. }
                | Command::RemoveWall(_) => {
                    return Err(SimError::invalid("commands", "a batch of more than one command holds despawns and behaviour changes only"));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::behaviors::BehaviorEntry;
    use crate::sim::behaviors::seek::SeekParams;

    fn world_with(n: usize) -> (World, Vec<AgentId>) {
        let mut w = World::new(WorldConfig::default()).unwrap();
        let points: Vec<Vec2> = (0..n).map(|i| Vec2::new(10.0 + i as f32 * 5.0, 10.0)).collect();
        let ids = w.spawn(SpawnSpec::new("g", n, SpawnArea::Points(points))).unwrap();
        (w, ids)
    }

    fn seek(target: AgentId) -> BehaviorEntry {
        BehaviorEntry::new(Behavior::Seek(SeekParams { target: Target::Agent(target) }))
    }

    #[test]
    fn a_batch_naming_an_unknown_agent_is_refused_whole() {
        let (w, ids) = world_with(2);
        assert_eq!(w.check_batch(&[Command::Despawn(ids[0]), Command::Despawn(999)]), Err(SimError::UnknownAgent(999)));
        assert_eq!(w.check_batch(&[Command::Despawn(ids[0]), Command::Despawn(ids[0])]), Err(SimError::UnknownAgent(ids[0])));
        assert!(w.check_batch(&[Command::Despawn(ids[0]), Command::Despawn(ids[1])]).is_ok());
        assert_eq!(w.agents().len(), 2, "checking changes nothing");
    }

    #[test]
    fn behaviour_targets_despawned_earlier_in_the_batch_are_unknown() {
        let (w, ids) = world_with(3);
        let r = w.check_batch(&[Command::Despawn(ids[2]), Command::SetBehaviors { agent: ids[0], entries: vec![seek(ids[2])] }]);
        assert!(matches!(r, Err(SimError::InvalidField { ref field, .. }) if field == "behaviors[0].params.target"), "{r:?}");
        let r = w.check_batch(&[Command::Despawn(ids[2]), Command::AddBehavior { agent: ids[0], entry: seek(ids[2]) }]);
        assert!(r.is_err());
        assert!(w.check_batch(&[Command::AddBehavior { agent: ids[0], entry: seek(ids[1]) }, Command::ResetBehaviors { agent: ids[1] }]).is_ok());
    }

    #[test]
    fn batches_of_spawns_or_statics_are_refused() {
        let (w, ids) = world_with(1);
        let r = w.check_batch(&[Command::Despawn(ids[0]), Command::AddObstacle { center: Vec2::new(50.0, 50.0), radius: 1.0 }]);
        assert!(matches!(r, Err(SimError::InvalidField { ref field, .. }) if field == "commands"), "{r:?}");
        assert!(w.check_batch(&[Command::AddObstacle { center: Vec2::new(50.0, 50.0), radius: 1.0 }]).is_ok());
    }
}
