//! Keyframes and deltas of one AOI cell, and the server-side encoders.

use crate::pack::PackError;
use crate::quant::{QAgent, Quantization, checksum, robust_heading};
use crate::validate::always_valid;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Position/velocity change of one agent in a delta.
///
/// `vel = prev.vel + dvel`, then `pos = prev.pos + predict(vel) + dpos`
/// (all wrapping 32-bit; see [`Quantization::predict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Motion {
    /// Residual against the dead-reckoned position, in position steps.
    pub dpos: [i32; 2],
    /// Velocity difference, in velocity steps.
    pub dvel: [i32; 2],
}

/// Orientation change of one agent in a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrientChange {
    /// Orientation unchanged.
    Keep,
    /// Orientation becomes the heading of the new velocity (never zero).
    Face,
    /// Orientation += this many units (wrapping `u16`).
    Turn(i16),
}

/// One changed agent in a delta.
///
/// A change names its agent twice over: by `id` (JSON carries only this) and
/// by `index`, the agent's position in the base state sorted by id, agents in
/// `left` included (binary frames carry only this; PROTOCOL.md §6.7). The
/// encoder sets both. A delta decoded from one encoding lacks the other key
/// until [`Delta::resolve`] (or applying it, which resolves internally) looks
/// it up in the base state.
///
/// JSON: `{"id":7,"dpos":[0,1],"dvel":[2,-1],"face":true}`, with
/// `dpos`/`dvel` both present or both absent, and at most one of `face` /
/// `dorient`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "ChangeJson")]
pub struct AgentChange {
    /// The agent's id; `None` when decoded from binary and not yet resolved.
    pub id: Option<u32>,
    /// Position in the base state; `None` when decoded from JSON and not yet resolved.
    pub index: Option<u32>,
    /// `None`: position and velocity unchanged.
    pub motion: Option<Motion>,
    pub orient: OrientChange,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangeJson {
    id: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dpos: Option<[i32; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dvel: Option<[i32; 2]>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    face: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dorient: Option<i16>,
}

impl TryFrom<ChangeJson> for AgentChange {
    type Error = PackError;
    fn try_from(j: ChangeJson) -> Result<Self, PackError> {
        let motion = match (j.dpos, j.dvel) {
            (Some(dpos), Some(dvel)) => Some(Motion { dpos, dvel }),
            (None, None) => None,
            _ => return Err(PackError::Inconsistent("dpos and dvel must both be present or both absent")),
        };
        let orient = match (j.face, j.dorient) {
            (false, None) => OrientChange::Keep,
            (true, None) => OrientChange::Face,
            (false, Some(t)) => OrientChange::Turn(t),
            (true, Some(_)) => return Err(PackError::Inconsistent("face and dorient are exclusive")),
        };
        Ok(AgentChange { id: Some(j.id), index: None, motion, orient })
    }
}

impl Serialize for AgentChange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let id = self.id.ok_or_else(|| {
            serde::ser::Error::custom("a changed entry without id (decoded from binary) needs Delta::resolve before JSON")
        })?;
        ChangeJson {
            id,
            dpos: self.motion.map(|m| m.dpos),
            dvel: self.motion.map(|m| m.dvel),
            face: self.orient == OrientChange::Face,
            dorient: match self.orient {
                OrientChange::Turn(t) => Some(t),
                _ => None,
            },
        }
        .serialize(s)
    }
}

/// A 64-bit state checksum (see [`checksum`](crate::checksum)). Binary: 8
/// bytes little-endian. JSON: 16 lowercase hex digits as a string (a JSON
/// number would lose precision in JavaScript).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Checksum(pub u64);

impl Serialize for Checksum {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.serialize_str(&format!("{:016x}", self.0))
        } else {
            self.0.to_le_bytes().serialize(s)
        }
    }
}

impl<'de> Deserialize<'de> for Checksum {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        if d.is_human_readable() {
            let s = String::deserialize(d)?;
            if s.len() != 16 {
                return Err(serde::de::Error::custom("checksum must be 16 hex digits"));
            }
            u64::from_str_radix(&s, 16).map(Checksum).map_err(serde::de::Error::custom)
        } else {
            <[u8; 8]>::deserialize(d).map(|b| Checksum(u64::from_le_bytes(b)))
        }
    }
}

always_valid!(Checksum, QAgent, AgentChange);

wire_struct! {
    /// Absolute state of every agent in one AOI cell.
    pub struct Keyframe {
        /// World id (from `Welcome.worlds[].id`).
        pub world: u32,
        /// Cell index `row * cols + col`.
        pub cell: u32,
        /// State tick: the tick at which the cell's content last changed.
        pub tick: u64,
        /// Checksum of the cell's state after this frame.
        pub checksum: Option<Checksum>,
        /// Agents sorted by id.
        #[serde(with = "crate::pack::records")] pub agents: Vec<QAgent>,
    }
}

wire_struct! {
    /// Changes of one AOI cell from state tick `base_tick` to `tick`.
    /// Applied in order: `left`, then `changed`, then `entered`.
    pub struct Delta {
        pub world: u32,
        pub cell: u32,
        /// The state tick this delta produces.
        pub tick: u64,
        /// The state tick the client must hold for this cell.
        pub base_tick: u64,
        /// Checksum of the cell's state after applying this delta.
        pub checksum: Option<Checksum>,
        /// Ids that left the cell (sorted).
        #[serde(with = "crate::pack::ids")] pub left: Vec<u32>,
        /// Agents present before and after whose quantized state changed
        /// (sorted by id, equivalently by base index).
        #[serde(with = "crate::pack::changes")] pub changed: Vec<AgentChange>,
        /// Agents that entered the cell, absolute (sorted).
        #[serde(with = "crate::pack::records")] pub entered: Vec<QAgent>,
    }
}

impl Delta {
    /// True when the delta changes nothing (the server does not send those).
    pub fn is_empty(&self) -> bool {
        self.left.is_empty() && self.changed.is_empty() && self.entered.is_empty()
    }
}

/// Which cell of which world a frame describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FrameScope {
    pub world: u32,
    pub cell: u32,
}

/// Encoder-side errors.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// Agent lists must be sorted by id without duplicates.
    #[error("agents must be sorted by id without duplicates (at id {0})")]
    Unsorted(u32),
    /// More than `u32::MAX` agents in one cell.
    #[error("too many agents in one cell")]
    TooMany,
    /// serde/bincode/serde_json refused the message.
    #[error("cannot encode message: {0}")]
    Serialize(String),
}

fn check_sorted(agents: &[QAgent]) -> Result<(), EncodeError> {
    match agents.windows(2).find(|w| w[0].id >= w[1].id) {
        Some(w) => Err(EncodeError::Unsorted(w[1].id)),
        None => Ok(()),
    }
}

/// Builds a keyframe of a cell (agents sorted by id).
pub fn encode_keyframe(
    scope: FrameScope,
    tick: u64,
    agents: &[QAgent],
    with_checksum: bool,
) -> Result<Keyframe, EncodeError> {
    check_sorted(agents)?;
    Ok(Keyframe {
        world: scope.world,
        cell: scope.cell,
        tick,
        checksum: with_checksum.then(|| Checksum(checksum(agents))),
        agents: agents.to_vec(),
    })
}

/// The change turning `prev` into `next` (same id and group), or `None`.
/// The change's `index` is left `None`: [`encode_delta`] sets it.
pub fn diff_agent(prev: &QAgent, next: &QAgent, q: &Quantization) -> Option<AgentChange> {
    let motion = (prev.pos != next.pos || prev.vel != next.vel).then(|| {
        let dvel = [next.vel[0].wrapping_sub(prev.vel[0]), next.vel[1].wrapping_sub(prev.vel[1])];
        let pred = |i: usize| prev.pos[i].wrapping_add(q.predict(next.vel[i]));
        Motion { dpos: [next.pos[0].wrapping_sub(pred(0)), next.pos[1].wrapping_sub(pred(1))], dvel }
    });
    let orient = if prev.orient == next.orient {
        OrientChange::Keep
    } else if robust_heading(next.vel) == Some(next.orient) {
        OrientChange::Face
    } else {
        OrientChange::Turn(next.orient.wrapping_sub(prev.orient) as i16)
    };
    (motion.is_some() || orient != OrientChange::Keep).then_some(AgentChange {
        id: Some(next.id),
        index: None,
        motion,
        orient,
    })
}

/// Builds the delta from `prev` (the state of tick `ticks.start`) to `next` (of tick
/// `ticks.end`), both sorted by id. An agent whose group changed is sent as `left` +
/// `entered`. Check [`Delta::is_empty`]: an empty delta must not be sent.
pub fn encode_delta(
    prev: &[QAgent],
    next: &[QAgent],
    scope: FrameScope,
    ticks: std::ops::Range<u64>,
    q: &Quantization,
    with_checksum: bool,
) -> Result<Delta, EncodeError> {
    let (base_tick, tick) = (ticks.start, ticks.end);
    check_sorted(prev)?;
    check_sorted(next)?;
    let (mut left, mut changed, mut entered) = (Vec::new(), Vec::with_capacity(prev.len().min(next.len())), Vec::new());
    let (mut i, mut j) = (0, 0);
    while let (Some(p), Some(n)) = (prev.get(i), next.get(j)) {
        if p.id == n.id {
            if p.group != n.group {
                left.push(p.id);
                entered.push(*n);
            } else if let Some(c) = diff_agent(p, n, q) {
                let index = u32::try_from(i).map_err(|_| EncodeError::TooMany)?;
                changed.push(AgentChange { index: Some(index), ..c });
            }
            i += 1;
            j += 1;
        } else if p.id < n.id {
            left.push(p.id);
            i += 1;
        } else {
            entered.push(*n);
            j += 1;
        }
    }
    left.extend(prev.get(i..).unwrap_or_default().iter().map(|p| p.id));
    entered.extend_from_slice(next.get(j..).unwrap_or_default());
    Ok(Delta {
        world: scope.world,
        cell: scope.cell,
        tick,
        base_tick,
        checksum: with_checksum.then(|| Checksum(checksum(next))),
        left,
        changed,
        entered,
    })
}

/// Server-side bookkeeping for one cell: the last state sent and its tick.
/// One per (world, cell); its deltas are shared by every subscriber.
#[derive(Debug, Clone, Default)]
pub struct CellEncoder {
    scope: FrameScope,
    tick: u64,
    agents: Vec<QAgent>,
    /// [`checksum`] of `agents`, when already computed (by a delta).
    checksum: Option<u64>,
}

impl CellEncoder {
    /// An empty cell at state tick 0.
    pub fn new(scope: FrameScope) -> Self {
        CellEncoder { scope, tick: 0, agents: Vec::new(), checksum: None }
    }

    /// The state tick (tick of the last non-empty delta, or 0).
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The cell's current quantized agents, sorted by id.
    pub fn agents(&self) -> &[QAgent] {
        &self.agents
    }

    /// Moves to `next` (sorted by id) at server tick `tick`. Returns the delta
    /// to broadcast, or `None` if nothing changed (send nothing; the state
    /// tick stays put). `tick` must exceed the current state tick.
    pub fn update(
        &mut self,
        next: Vec<QAgent>,
        tick: u64,
        q: &Quantization,
        with_checksum: bool,
    ) -> Result<Option<Delta>, EncodeError> {
        let delta = encode_delta(&self.agents, &next, self.scope, self.tick..tick, q, with_checksum)?;
        self.agents = next;
        match delta.checksum {
            Some(c) => self.checksum = Some(c.0),
            // An empty delta leaves the agents as they were, and their checksum.
            None if !delta.is_empty() => self.checksum = None,
            None => {}
        }
        if delta.is_empty() {
            return Ok(None);
        }
        self.tick = tick;
        Ok(Some(delta))
    }

    /// A keyframe of the current state, for a joining or lagging client.
    /// The checksum of the last delta is reused rather than recomputed.
    pub fn keyframe(&self, with_checksum: bool) -> Keyframe {
        Keyframe {
            world: self.scope.world,
            cell: self.scope.cell,
            tick: self.tick,
            checksum: with_checksum.then(|| Checksum(self.checksum.unwrap_or_else(|| checksum(&self.agents)))),
            agents: self.agents.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: u32, pos: [i32; 2], vel: [i32; 2], orient: u16) -> QAgent {
        QAgent { id, group: 1, pos, vel, orient }
    }

    #[test]
    fn diff_uses_dead_reckoning_and_face() {
        let q = Quantization::default();
        let p = agent(1, [1000, 1000], [40, 0], 0);
        // vel (42, 2) predicts +21, +1; actual moved +21, +2.
        let n = QAgent { pos: [1021, 1002], vel: [42, 2], orient: crate::heading([42, 2]).unwrap(), ..p };
        let c = diff_agent(&p, &n, &q).unwrap();
        assert_eq!(c.motion, Some(Motion { dpos: [0, 1], dvel: [2, 2] }));
        assert_eq!(c.orient, OrientChange::Face);
        assert_eq!(diff_agent(&p, &p, &q), None);
        let turned = QAgent { orient: 65530, ..p };
        assert_eq!(diff_agent(&p, &turned, &q).unwrap().orient, OrientChange::Turn(-6));
    }

    #[test]
    fn encode_delta_partitions_left_changed_entered() {
        let q = Quantization::default();
        let prev = [agent(1, [0, 0], [0, 0], 0), agent(2, [5, 5], [0, 0], 0), agent(4, [0, 0], [0, 0], 0)];
        let mut regrouped = prev[2];
        regrouped.group = 9;
        let next = [agent(2, [6, 5], [0, 0], 0), agent(3, [1, 1], [0, 0], 0), regrouped];
        let d = encode_delta(&prev, &next, FrameScope { world: 1, cell: 2 }, 10..11, &q, true).unwrap();
        assert_eq!(d.left, vec![1, 4]);
        assert_eq!(d.changed.iter().map(|c| (c.id, c.index)).collect::<Vec<_>>(), vec![(Some(2), Some(1))]);
        assert_eq!(d.entered, vec![next[1], next[2]]);
        assert_eq!(d.checksum, Some(Checksum(checksum(&next))));
        let unsorted = [prev[1], prev[0]];
        assert_eq!(
            encode_delta(&unsorted, &next, FrameScope::default(), 0..1, &q, false).unwrap_err(),
            EncodeError::Unsorted(1)
        );
    }

    #[test]
    fn cell_encoder_skips_unchanged_ticks() {
        let q = Quantization::default();
        let mut enc = CellEncoder::new(FrameScope { world: 0, cell: 3 });
        let a = vec![agent(1, [0, 0], [0, 0], 0)];
        let d = enc.update(a.clone(), 5, &q, false).unwrap().unwrap();
        assert_eq!((d.base_tick, d.tick), (0, 5));
        assert!(enc.update(a.clone(), 6, &q, false).unwrap().is_none());
        assert_eq!(enc.tick(), 5);
        assert_eq!(enc.keyframe(false).tick, 5);
        let d = enc.update(vec![], 7, &q, false).unwrap().unwrap();
        assert_eq!((d.base_tick, d.left.as_slice()), (5, &[1u32][..]));
    }

    #[test]
    fn change_json_rejects_half_motion() {
        let c: AgentChange = serde_json::from_str(r#"{"id":3,"dpos":[1,2],"dvel":[0,0],"face":true}"#).unwrap();
        assert_eq!(c.orient, OrientChange::Face);
        assert_eq!((c.id, c.index), (Some(3), None));
        assert_eq!(serde_json::to_string(&c).unwrap(), r#"{"id":3,"dpos":[1,2],"dvel":[0,0],"face":true}"#);
        assert!(serde_json::to_string(&AgentChange { id: None, index: Some(0), ..c }).is_err());
        assert!(serde_json::from_str::<AgentChange>(r#"{"id":3,"dpos":[1,2]}"#).is_err());
        assert!(serde_json::from_str::<AgentChange>(r#"{"id":3,"face":true,"dorient":2}"#).is_err());
    }
}
