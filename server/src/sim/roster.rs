//! The roster: every agent of a world, stored in (roughly) grid-cell order, found by id.
//!
//! The tick visits agents cell by cell, so that neighbouring agents are computed together. If
//! the agents were stored in id order, every one of those visits would land on a random
//! address: at 100k agents (12 MB of agent records) each would miss the cache. So the roster
//! keeps them in *storage order*, which the world now and then re-sorts into the grid's cell
//! order ([`Roster::permute`]), and keeps an id index beside it.
//!
//! **Invariant:** nothing the simulation computes depends on the storage order. Whatever must
//! be visited in a fixed order (neighbours within a cell, events, goal resolution and slot
//! claims, hashes, published frames) is visited in id order, through [`Roster::by_id`] or the
//! grid's per-cell id order.

use super::agent::{Agent, AgentId};

/// Agents in storage order, with an index from id to storage slot.
#[derive(Debug, Default, Clone)]
pub struct Roster {
    /// The agents, in storage order.
    agents: Vec<Agent>,
    /// Ids of all agents, ascending.
    ids: Vec<AgentId>,
    /// `slots[r]` = storage slot of the agent whose id is `ids[r]`.
    slots: Vec<u32>,
}

impl Roster {
    /// A roster of `agents` in this storage order; `None` if two share an id.
    pub fn from_storage(agents: Vec<Agent>) -> Option<Roster> {
        let mut by_id: Vec<(AgentId, u32)> = agents.iter().enumerate().map(|(i, a)| (a.id, i as u32)).collect();
        by_id.sort_unstable();
        if by_id.windows(2).any(|w| w[0].0 == w[1].0) {
            return None;
        }
        let (ids, slots) = by_id.into_iter().unzip();
        Some(Roster { agents, ids, slots })
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// True if there are no agents.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// The agents in storage order (any order; see the module docs).
    pub fn storage(&self) -> &[Agent] {
        &self.agents
    }

    /// The agents in storage order, mutable. Callers must not change an agent's `id`.
    pub fn storage_mut(&mut self) -> &mut [Agent] {
        &mut self.agents
    }

    /// Storage slots in id order, and the agents in storage order, mutable (to visit them in id
    /// order while changing them). Callers must not change an agent's `id`.
    pub fn slots_and_storage_mut(&mut self) -> (&[u32], &mut [Agent]) {
        (&self.slots, &mut self.agents)
    }

    /// The agents in id order.
    pub fn by_id(&self) -> ById<'_> {
        ById { agents: &self.agents, slots: &self.slots }
    }

    /// Storage slot of the agent with `id`.
    pub fn slot(&self, id: AgentId) -> Option<usize> {
        let r = self.ids.binary_search(&id).ok()?;
        self.slots.get(r).map(|&s| s as usize)
    }

    /// The agent with `id`.
    pub fn get(&self, id: AgentId) -> Option<&Agent> {
        self.slot(id).and_then(|s| self.agents.get(s))
    }

    /// The agent with `id`, mutable. Callers must not change its `id`.
    pub fn get_mut(&mut self, id: AgentId) -> Option<&mut Agent> {
        self.slot(id).and_then(|s| self.agents.get_mut(s))
    }

    /// Adds an agent at the end of the storage. Returns false (and adds nothing) if its id is
    /// taken.
    #[must_use]
    pub fn insert(&mut self, a: Agent) -> bool {
        let r = match self.ids.binary_search(&a.id) {
            Ok(_) => return false,
            Err(r) => r,
        };
        let slot = self.agents.len() as u32;
        // New ids are the largest so far, so this is a push in all but tests.
        self.ids.insert(r, a.id);
        self.slots.insert(r, slot);
        self.agents.push(a);
        true
    }

    /// Removes the agent with `id`; the last agent in storage takes its slot.
    pub fn remove(&mut self, id: AgentId) -> Option<Agent> {
        let r = self.ids.binary_search(&id).ok()?;
        let slot = *self.slots.get(r)? as usize;
        self.ids.remove(r);
        self.slots.remove(r);
        let a = self.agents.swap_remove(slot);
        // The agent that was last now lives at `slot`.
        if let Some(moved) = self.agents.get(slot) {
            if let Ok(m) = self.ids.binary_search(&moved.id) {
                if let Some(s) = self.slots.get_mut(m) {
                    *s = slot as u32;
                }
            }
        }
        Some(a)
    }

    /// Puts the agents in the order given by `order`: afterwards the agent at slot `k` is the
    /// one that was at slot `order[k]`. `rank` is the inverse (`rank(order[k]) == k`). Moves
    /// every agent at most once, in place, following the permutation's cycles; a permutation
    /// close to the identity touches memory close to sequentially. Does nothing (and returns
    /// false) if `order` is not a permutation of the slots.
    pub fn permute(&mut self, order: &[u32], rank: impl Fn(usize) -> usize) -> bool {
        let n = self.agents.len();
        if order.len() != n {
            return false;
        }
        let mut seen = vec![false; n];
        for &o in order {
            match seen.get_mut(o as usize) {
                Some(s) if !*s => *s = true,
                _ => return false,
            }
        }
        seen.fill(false);
        for start in 0..n {
            if seen[start] {
                continue;
            }
            // Cycle start → order[start] → …: slot k receives the agent of slot order[k].
            let mut k = start;
            loop {
                seen[k] = true;
                let from = order[k] as usize;
                if from == start {
                    break;
                }
                self.agents.swap(k, from);
                k = from;
            }
        }
        for s in self.slots.iter_mut() {
            *s = rank(*s as usize) as u32;
        }
        true
    }
}

/// The agents in id order: indexable, iterable, with a length.
#[derive(Debug, Clone, Copy)]
pub struct ById<'a> {
    agents: &'a [Agent],
    slots: &'a [u32],
}

impl<'a> ById<'a> {
    /// Number of agents.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True if there are no agents.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The agent with the `r`-th smallest id.
    pub fn get(&self, r: usize) -> Option<&'a Agent> {
        self.slots.get(r).and_then(|&s| self.agents.get(s as usize))
    }

    /// The agents in ascending id order.
    pub fn iter(&self) -> ByIdIter<'a> {
        ByIdIter { agents: self.agents, slots: self.slots.iter() }
    }
}

impl<'a> std::ops::Index<usize> for ById<'a> {
    type Output = Agent;

    /// The agent with the `r`-th smallest id. Panics when `r >= len()`, as a slice does.
    fn index(&self, r: usize) -> &Agent {
        &self.agents[self.slots[r] as usize]
    }
}

impl<'a> IntoIterator for ById<'a> {
    type Item = &'a Agent;
    type IntoIter = ByIdIter<'a>;

    fn into_iter(self) -> ByIdIter<'a> {
        self.iter()
    }
}

/// Iterator over the agents in ascending id order.
#[derive(Debug, Clone)]
pub struct ByIdIter<'a> {
    agents: &'a [Agent],
    slots: std::slice::Iter<'a, u32>,
}

impl<'a> Iterator for ByIdIter<'a> {
    type Item = &'a Agent;

    fn next(&mut self) -> Option<&'a Agent> {
        // Every slot indexes `agents` (the roster keeps them in step); `get` keeps this
        // panic-free all the same.
        self.slots.find_map(|&s| self.agents.get(s as usize))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.slots.size_hint()
    }
}

impl<'a> DoubleEndedIterator for ByIdIter<'a> {
    fn next_back(&mut self) -> Option<&'a Agent> {
        let agents = self.agents;
        self.slots.by_ref().rev().find_map(|&s| agents.get(s as usize))
    }
}

impl ExactSizeIterator for ByIdIter<'_> {}

#[cfg(test)]
mod tests {
    use glam::Vec2;

    use super::*;
    use crate::sim::behaviors::testkit::agent_at;

    fn roster(ids: &[u32]) -> Roster {
        let mut r = Roster::default();
        for &id in ids {
            assert!(r.insert(agent_at(id, Vec2::new(id as f32, 0.0), Vec2::ZERO)));
        }
        r
    }

    fn ids_by_id(r: &Roster) -> Vec<u32> {
        r.by_id().iter().map(|a| a.id).collect()
    }

    fn ids_in_storage(r: &Roster) -> Vec<u32> {
        r.storage().iter().map(|a| a.id).collect()
    }

    #[test]
    fn finds_agents_by_id_and_refuses_a_taken_id() {
        let mut r = roster(&[3, 5, 9]);
        assert_eq!(r.len(), 3);
        assert_eq!(r.slot(5), Some(1));
        assert_eq!(r.get(9).map(|a| a.position.x), Some(9.0));
        assert!(r.get(4).is_none());
        assert!(!r.insert(agent_at(5, Vec2::ZERO, Vec2::ZERO)));
        assert_eq!(r.len(), 3);
        // A smaller id goes to the end of storage but into its place in id order.
        assert!(r.insert(agent_at(1, Vec2::ZERO, Vec2::ZERO)));
        assert_eq!(ids_in_storage(&r), [3, 5, 9, 1]);
        assert_eq!(ids_by_id(&r), [1, 3, 5, 9]);
        assert_eq!(r.by_id()[0].id, 1);
        assert_eq!(r.slot(1), Some(3));
    }

    #[test]
    fn removing_moves_the_last_agent_into_the_hole_and_keeps_it_found() {
        let mut r = roster(&[1, 2, 3, 4]);
        assert_eq!(r.remove(2).map(|a| a.id), Some(2));
        assert_eq!(ids_in_storage(&r), [1, 4, 3]);
        assert_eq!(r.slot(4), Some(1));
        assert_eq!(r.get(4).map(|a| a.id), Some(4));
        assert_eq!(ids_by_id(&r), [1, 3, 4]);
        assert!(r.remove(2).is_none());
        // Removing the last one moves nothing.
        assert_eq!(r.remove(3).map(|a| a.id), Some(3));
        assert_eq!(ids_by_id(&r), [1, 4]);
        assert_eq!(r.slot(1), Some(0));
    }

    #[test]
    fn permute_puts_slot_k_from_order_k_and_the_index_follows() {
        let mut r = roster(&[10, 20, 30, 40, 50]);
        // Two cycles: 0 → 2 → 4 → 0 and 1 ↔ 3.
        let order = [2u32, 3, 4, 1, 0];
        let mut rank = [0usize; 5];
        for (k, &o) in order.iter().enumerate() {
            rank[o as usize] = k;
        }
        assert!(r.permute(&order, |i| rank[i]));
        assert_eq!(ids_in_storage(&r), [30, 40, 50, 20, 10]);
        assert_eq!(ids_by_id(&r), [10, 20, 30, 40, 50]);
        for id in [10, 20, 30, 40, 50] {
            assert_eq!(r.get(id).map(|a| a.id), Some(id));
        }
        assert_eq!(r.slot(10), Some(4));
        let mut rev: Vec<u32> = r.by_id().iter().rev().map(|a| a.id).collect();
        rev.reverse();
        assert_eq!(rev, [10, 20, 30, 40, 50]);
        assert_eq!(r.by_id().iter().len(), 5);
    }

    #[test]
    fn permute_refuses_what_is_not_a_permutation() {
        let mut r = roster(&[1, 2, 3]);
        assert!(!r.permute(&[0, 1], |i| i));
        assert!(!r.permute(&[0, 1, 1], |i| i));
        assert!(!r.permute(&[0, 1, 3], |i| i));
        assert_eq!(ids_in_storage(&r), [1, 2, 3]);
        assert_eq!(ids_by_id(&r), [1, 2, 3]);
    }
}
