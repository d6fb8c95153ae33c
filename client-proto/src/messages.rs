//! Client → server and server → client messages.

use crate::behavior::{BehaviorEntry, BehaviorKind};
use crate::common::{Area, ErrorCode, Encoding, Point, Rect, Role, SpawnArea};
use crate::frames::{Delta, Keyframe};
use crate::quant::Quantization;

// ---------------------------------------------------------------- client → server

wire_struct! {
    /// First message of a connection. Answered by `Welcome`, or by `Error`
    /// (`unsupported_version`, `unauthorized`) and a close.
    pub struct Hello {
        pub protocol_version: u16,
        pub token: Option<String>,
        /// Encoding of server frames from `Welcome` on (default `binary`).
        #[serde(default)] pub encoding: Encoding,
        /// Resume token of an earlier `Welcome`: within the grace period the connection takes
        /// over that session (player, role, subscriptions) instead of starting a new one.
        #[serde(default)] pub resume: Option<String>,
    }
}

wire_struct! {
    /// Watch an area of a world. Re-subscribing to the same world moves the
    /// area; every cell of the new area gets a fresh keyframe.
    pub struct Subscribe {
        pub request_id: u32,
        pub world: String,
        pub area: Area,
        /// Send state on ticks that are a multiple of this (1 = every tick; since version 4).
        #[serde(default = "one")] pub every_n_ticks: u32,
    }
}

fn one() -> u32 {
    1
}

wire_struct! {
    /// Stop watching a world.
    pub struct Unsubscribe {
        pub request_id: u32,
        pub world: String,
    }
}

wire_struct! {
    /// Send agents to a point (arrive), stopping within `stopping_distance` (default 0).
    pub struct MoveTo {
        pub request_id: u32,
        pub world: String,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
        pub target: Point,
        #[serde(default)] pub stopping_distance: f32,
    }
}

wire_struct! {
    /// Replace the agents' behaviours.
    pub struct SetBehaviors {
        pub request_id: u32,
        pub world: String,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub behaviors: Vec<BehaviorEntry>,
    }
}

wire_struct! {
    /// Add one behaviour (replacing one of the same kind).
    pub struct AddBehavior {
        pub request_id: u32,
        pub world: String,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
        pub entry: BehaviorEntry,
    }
}

wire_struct! {
    /// Remove the behaviour of that kind.
    pub struct RemoveBehavior {
        pub request_id: u32,
        pub world: String,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
        pub kind: BehaviorKind,
    }
}

wire_struct! {
    /// Remove every behaviour (agents coast to a stop).
    pub struct ResetBehaviors {
        pub request_id: u32,
        pub world: String,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
    }
}

wire_struct! {
    #[openapi]
    /// Physical limits of spawned agents; absent = server default.
    #[derive(Default)]
    pub struct Limits {
        /// Top speed, units/s.
        #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000000))] pub max_speed: Option<f32>,
        /// Top acceleration, units/s².
        #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000000))] pub max_accel: Option<f32>,
        /// Top turn rate, rad/s.
        #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000000))] pub max_rotation: Option<f32>,
        /// Top angular acceleration, rad/s².
        #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 1000000))] pub max_angular_accel: Option<f32>,
        /// Body radius.
        #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 1000000))] pub radius: Option<f32>,
        /// Mass.
        #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 1000000))] pub mass: Option<f32>,
    }
}

wire_struct! {
    /// Create `count` agents of a named group. Result: `spawned` with the ids.
    pub struct Spawn {
        pub request_id: u32,
        pub world: String,
        pub group: String,
        pub count: u32,
        pub area: SpawnArea,
        #[serde(default)] pub limits: Limits,
        #[serde(default, deserialize_with = "crate::common::bounded::vec")] pub behaviors: Vec<BehaviorEntry>,
    }
}

wire_struct! {
    /// Remove agents.
    pub struct Despawn {
        pub request_id: u32,
        pub world: String,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
    }
}

wire_struct! {
    /// Liveness/latency probe; answered by `Pong` with the same id.
    pub struct Ping { pub request_id: u32 }
}

wire_enum! {
    /// Every client → server message.
    pub enum ClientMsg / ClientMsgKind {
        Hello(Hello) = "hello",
        Subscribe(Subscribe) = "subscribe",
        Unsubscribe(Unsubscribe) = "unsubscribe",
        MoveTo(MoveTo) = "move_to",
        SetBehaviors(SetBehaviors) = "set_behaviors",
        AddBehavior(AddBehavior) = "add_behavior",
        RemoveBehavior(RemoveBehavior) = "remove_behavior",
        ResetBehaviors(ResetBehaviors) = "reset_behaviors",
        Spawn(Spawn) = "spawn",
        Despawn(Despawn) = "despawn",
        Ping(Ping) = "ping",
    }
}

impl ClientMsg {
    /// The client request id (`None` for `Hello`).
    pub fn request_id(&self) -> Option<u32> {
        match self {
            ClientMsg::Hello(_) => None,
            ClientMsg::Subscribe(m) => Some(m.request_id),
            ClientMsg::Unsubscribe(m) => Some(m.request_id),
            ClientMsg::MoveTo(m) => Some(m.request_id),
            ClientMsg::SetBehaviors(m) => Some(m.request_id),
            ClientMsg::AddBehavior(m) => Some(m.request_id),
            ClientMsg::RemoveBehavior(m) => Some(m.request_id),
            ClientMsg::ResetBehaviors(m) => Some(m.request_id),
            ClientMsg::Spawn(m) => Some(m.request_id),
            ClientMsg::Despawn(m) => Some(m.request_id),
            ClientMsg::Ping(m) => Some(m.request_id),
        }
    }
}

// ---------------------------------------------------------------- server → client

wire_struct! {
    /// A world and its AOI grid. Cell of a point: `col = clamp(floor((x -
    /// min_x) / aoi_cell_size), 0, cols-1)`, likewise `row` with y; index
    /// `row * cols + col`.
    pub struct WorldInfo {
        pub id: u32,
        pub name: String,
        pub bounds: Rect,
        pub aoi_cell_size: f32,
        pub cols: u32,
        pub rows: u32,
        /// The world's simulation ticks per second (since version 9; a change is announced to
        /// its subscribers with the `tick_rate` event).
        pub tick_rate_hz: f32,
    }
}

impl WorldInfo {
    /// A world ticking at `tick_rate_hz` whose grid covers `bounds` with square cells of `cell_size`.
    pub fn new(id: u32, name: impl Into<String>, bounds: Rect, cell_size: f32, tick_rate_hz: f32) -> Self {
        let n = |extent: f32| ((extent / cell_size).ceil() as u32).max(1);
        WorldInfo {
            id,
            name: name.into(),
            bounds,
            aoi_cell_size: cell_size,
            cols: n(bounds.max_x - bounds.min_x),
            rows: n(bounds.max_y - bounds.min_y),
            tick_rate_hz,
        }
    }

    fn col_row(&self, x: f32, y: f32) -> (u32, u32) {
        let f = |v: f32, min: f32, n: u32| {
            let c = ((v - min) / self.aoi_cell_size).floor();
            // `as` saturates and maps NaN to 0.
            (c.max(0.0) as u32).min(n.saturating_sub(1))
        };
        (f(x, self.bounds.min_x, self.cols), f(y, self.bounds.min_y, self.rows))
    }

    /// Number of cells.
    pub fn cell_count(&self) -> u32 {
        self.cols.saturating_mul(self.rows)
    }

    /// The cell containing a point (points outside are clamped to the edge).
    pub fn cell_of(&self, x: f32, y: f32) -> u32 {
        let (c, r) = self.col_row(x, y);
        r * self.cols + c
    }

    /// The cells an area covers, ascending.
    pub fn cells_in(&self, area: &Area) -> Vec<u32> {
        let (c0, r0, c1, r1) = match area {
            Area::WholeWorld(_) => (0, 0, self.cols.saturating_sub(1), self.rows.saturating_sub(1)),
            Area::Rect(r) => {
                let (c0, r0) = self.col_row(r.min_x, r.min_y);
                let (c1, r1) = self.col_row(r.max_x, r.max_y);
                (c0, r0, c1, r1)
            }
        };
        (r0..=r1).flat_map(|r| (c0..=c1).map(move |c| r * self.cols + c)).collect()
    }
}

wire_struct! {
    /// Answer to `Hello`.
    pub struct Welcome {
        pub protocol_version: u16,
        pub quantization: Quantization,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub worlds: Vec<WorldInfo>,
        /// Largest client message the server accepts, in bytes.
        pub max_message_bytes: u32,
        /// The player this connection acts as (the token's `sub`, a fresh `anon-…` id in dev
        /// mode, `admin` for the admin token).
        pub player_id: String,
        /// What the connection may do.
        pub role: Role,
        /// Give it back in `Hello.resume` after a drop to resume this session.
        pub resume_token: String,
        /// How long after a drop the session can be resumed (and the player's agents wait
        /// before the world's orphan policy applies), seconds.
        pub session_grace_secs: u32,
    }
}

wire_struct! {
    /// Payload of agent events.
    pub struct AgentEvent { pub agent: u32 }
}

wire_struct! {
    /// Payload of `target_lost`: the owner's agent `agent` lost sight of `target`, which its
    /// behaviours aimed at; those behaviours were removed (as if the target had gone).
    pub struct TargetLostEvent { pub agent: u32, pub target: u32 }
}

wire_struct! {
    /// Payload of `gave_up` and `unreachable`: the MoveTo agent `agent` stopped for good
    /// `distance` units short of where its order sent it (never reported as arrived).
    /// For `gave_up`, the distance to its stop point (its formation slot, or the target); for
    /// `unreachable`, the distance to the target asked for from the nearest reachable point where
    /// it stopped.
    pub struct StoppedShortEvent { pub agent: u32, pub distance: f32 }
}

wire_struct! {
    /// Payload of `tick_rate`: the world now runs at `tick_rate_hz` ticks per second (from the
    /// event's tick on). Sent to every subscriber of the world, whatever its visibility.
    pub struct TickRateEvent { pub tick_rate_hz: f32 }
}

wire_struct! {
    /// Payload of `groups`: the world's whole group table (a record's `group` is an index into
    /// it), sent to every subscriber when it grows or changes.
    pub struct GroupsEvent {
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub groups: Vec<String>,
    }
}

wire_struct! {
    /// Payload of `spawned`.
    pub struct SpawnedEvent {
        pub group: String,
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
    }
}

wire_struct! {
    /// Payload of `despawned`.
    pub struct DespawnedEvent {
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
    }
}

wire_enum! {
    /// What happened.
    pub enum EventKind / EventKindKind {
        DestinationReached(AgentEvent) = "destination_reached",
        PathCompleted(AgentEvent) = "path_completed",
        Spawned(SpawnedEvent) = "spawned",
        Despawned(DespawnedEvent) = "despawned",
        TargetLost(TargetLostEvent) = "target_lost",
        TickRate(TickRateEvent) = "tick_rate",
        Groups(GroupsEvent) = "groups",
        GaveUp(StoppedShortEvent) = "gave_up",
        Unreachable(StoppedShortEvent) = "unreachable",
    }
}

wire_struct! {
    /// A simulation event in a subscribed world.
    pub struct Event {
        pub world: u32,
        pub tick: u64,
        pub event: EventKind,
    }
}

wire_struct! {
    /// An error: `code`, a human message, and the offending field path if any.
    pub struct ErrorBody {
        pub code: ErrorCode,
        pub message: String,
        pub field: Option<String>,
    }
}

wire_struct! {
    /// Success without data.
    #[derive(Default)]
    pub struct Done {}
}

wire_struct! {
    /// Success of `Subscribe`: the world id and the cells now covered (ascending; binary:
    /// runs of consecutive cells, PROTOCOL.md §5.2).
    pub struct Subscribed {
        pub world: u32,
        #[serde(with = "crate::pack::runs")] pub cells: Vec<u32>,
        /// The world's group names (since version 9): a record's `group` indexes them; the
        /// `groups` event brings the table again when it changes.
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub groups: Vec<String>,
    }
}

wire_struct! {
    /// Success of `Spawn`: the new agent ids.
    pub struct Spawned {
        #[serde(deserialize_with = "crate::common::bounded::vec")] pub agents: Vec<u32>,
    }
}

wire_enum! {
    /// Outcome of a command.
    pub enum Outcome / OutcomeKind {
        Ok(Done) = "ok",
        Subscribed(Subscribed) = "subscribed",
        Spawned(Spawned) = "spawned",
        Error(ErrorBody) = "error",
    }
}

impl Outcome {
    /// True unless `Error`.
    pub fn is_ok(&self) -> bool {
        !matches!(self, Outcome::Error(_))
    }
}

wire_struct! {
    /// Exactly one per command, with the command's `request_id`.
    pub struct CommandResult {
        pub request_id: u32,
        pub result: Outcome,
    }
}

wire_struct! {
    /// Answer to `Ping`.
    pub struct Pong {
        pub request_id: u32,
        /// Current simulation tick of the server.
        pub server_tick: u64,
    }
}

wire_struct! {
    /// A world this connection uses moved to another server (a live handoff, since version 11):
    /// the world is gone from this server (commands naming it are refused from now on) and runs
    /// on at `to`, a WebSocket URL. The client reconnects there and sends `Hello { resume }` with
    /// its latest `Welcome.resume_token`, which the new server accepts; the world's id there is
    /// in that server's `Welcome.worlds` (match it by `name`).
    pub struct Moved {
        /// The world's id on this server.
        pub world: u32,
        /// The world's name (the same on the new server).
        pub name: String,
        /// Where it runs now: a `ws://` or `wss://` URL of the new server's `/ws`.
        pub to: String,
    }
}

wire_enum! {
    /// Every server → client message.
    pub enum ServerMsg / ServerMsgKind {
        Welcome(Welcome) = "welcome",
        Keyframe(Keyframe) = "keyframe",
        Delta(Delta) = "delta",
        Event(Event) = "event",
        CommandResult(CommandResult) = "command_result",
        Error(ErrorBody) = "error",
        Pong(Pong) = "pong",
        Cells(crate::cells::Cells) = "cells",
        Moved(Moved) = "moved",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::WholeWorld;

    #[test]
    fn aoi_grid_indexing() {
        let w = WorldInfo::new(0, "w", Rect { min_x: -50.0, min_y: 0.0, max_x: 50.0, max_y: 30.0 }, 10.0, 20.0);
        assert_eq!((w.cols, w.rows, w.cell_count()), (10, 3, 30));
        assert_eq!(w.cell_of(-50.0, 0.0), 0);
        assert_eq!(w.cell_of(-39.9, 10.5), 11);
        assert_eq!(w.cell_of(1e9, 1e9), 29);
        assert_eq!(w.cell_of(f32::NAN, -5.0), 0);
        let r = Area::Rect(Rect { min_x: -45.0, min_y: 5.0, max_x: -35.0, max_y: 15.0 });
        assert_eq!(w.cells_in(&r), vec![0, 1, 10, 11]);
        assert_eq!(w.cells_in(&Area::WholeWorld(WholeWorld {})).len(), 30);
    }

    #[test]
    fn request_ids_and_kinds() {
        let m = ClientMsg::Ping(Ping { request_id: 9 });
        assert_eq!(m.request_id(), Some(9));
        assert_eq!(m.kind(), ClientMsgKind::Ping);
        assert_eq!(ClientMsgKind::ALL.len(), 11);
        assert_eq!(ServerMsgKind::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(","),
            "welcome,keyframe,delta,event,command_result,error,pong,cells,moved");
    }
}
