// The wire messages (client-proto/PROTOCOL.md §5) as TypeScript types, in their JSON form (§4).
// Binary frames decode to the same shapes (see codec.ts for the one difference: base indices).
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)

import type { QAgent, ChangeEntry, CellsEntry } from './codec.js';

export type Encoding = 'binary' | 'json';
export type ErrorCodeName =
  | 'bad_request' | 'invalid_field' | 'unknown_world' | 'unknown_agent' | 'forbidden' | 'unauthorized'
  | 'rate_limited' | 'too_large' | 'busy' | 'not_found' | 'unsupported_version' | 'internal' | 'quota_exceeded';
export type RoleName = 'admin' | 'player' | 'spectator';

export interface Point { x: number; y: number }
export interface Rect { min_x: number; min_y: number; max_x: number; max_y: number }

export type Area = ({ type: 'rect' } & Rect) | { type: 'whole_world' };
export type SpawnArea = ({ type: 'rect' } & Rect) | { type: 'circle' | 'ring'; x: number; y: number; radius: number } | { type: 'points'; points: Point[] };
export interface Limits {
  max_speed?: number | null; max_accel?: number | null; max_rotation?: number | null;
  max_angular_accel?: number | null; radius?: number | null; mass?: number | null;
}
export type Target = { type: 'point'; x: number; y: number } | { type: 'agent'; agent: number };
export type AlignTarget = { type: 'orientation'; radians: number } | { type: 'agent'; agent: number };
export interface AlignParams { target_radius?: number; slow_radius?: number; time_to_target?: number }

/** A steering behaviour (§5.1 table): `type` plus its fields; fields with a default may be omitted. */
export type Behavior =
  | { type: 'seek'; target: Target }
  | { type: 'flee'; target: Target; panic_distance?: number }
  | { type: 'arrive'; target: Target; target_radius?: number; slow_radius?: number; time_to_target?: number }
  | { type: 'pursue'; target_agent: number; max_prediction?: number }
  | { type: 'evade'; target_agent: number; panic_distance?: number; max_prediction?: number }
  | { type: 'align'; target: AlignTarget; align?: AlignParams }
  | { type: 'face'; target: Target; align?: AlignParams }
  | { type: 'look_where_you_are_going'; align?: AlignParams }
  | { type: 'velocity_match'; target_agent: number; time_to_target?: number }
  | { type: 'wander'; variant?: 'millington' | 'circle'; wander_offset?: number; wander_radius?: number; wander_rate?: number }
  | { type: 'random_target'; radius?: number; interval_min?: number; interval_max?: number; center?: Point | null }
  | { type: 'obstacle_avoidance'; min_box_length?: number | null; braking_weight?: number; lateral_base?: number }
  | { type: 'ahead_avoidance'; ahead_len?: number; max_avoid_force?: number; margin?: number }
  | { type: 'wall_avoidance'; look_ahead?: number; avoid_distance?: number }
  | { type: 'agent_avoidance'; look_ahead?: number; avoid_radius?: number }
  | { type: 'separation'; neighbor_radius?: number }
  | { type: 'cohesion'; neighbor_radius?: number }
  | { type: 'alignment'; neighbor_radius?: number; time_to_target?: number }
  | { type: 'path_following'; waypoints: Point[]; path_radius?: number; mode?: 'once' | 'loop' | 'ping_pong' }
  | { type: 'leader_following'; leader: number; behind_distance?: number; leader_sight_radius?: number; separation_radius?: number; separation_weight?: number }
  | { type: 'reciprocal_avoidance'; time_horizon?: number; obstacle_time_horizon?: number; neighbor_dist?: number; max_neighbors?: number };
export type BehaviorKind = Behavior['type'];
export interface BehaviorEntry { behavior: Behavior; weight?: number; priority?: number }

// ---- Client → server

export interface Hello {
  type: 'hello'; protocol_version: number; token: string | null; encoding: Encoding;
  /** The `resume_token` of a previous Welcome, to resume that session (protocol v3). */
  resume?: string | null;
}
export type ClientMsg =
  | Hello
  | {
      type: 'subscribe'; request_id: number; world: string; area: Area;
      /** Send state on ticks that are multiples of this (protocol v4; default 1 = every tick). */
      every_n_ticks?: number;
    }
  | { type: 'unsubscribe'; request_id: number; world: string }
  | { type: 'move_to'; request_id: number; world: string; agents: number[]; target: Point; stopping_distance?: number }
  | { type: 'set_behaviors'; request_id: number; world: string; agents: number[]; behaviors: BehaviorEntry[] }
  | { type: 'add_behavior'; request_id: number; world: string; agents: number[]; entry: BehaviorEntry }
  | { type: 'remove_behavior'; request_id: number; world: string; agents: number[]; kind: BehaviorKind }
  | { type: 'reset_behaviors'; request_id: number; world: string; agents: number[] }
  | { type: 'spawn'; request_id: number; world: string; group: string; count: number; area: SpawnArea; limits?: Limits; behaviors?: BehaviorEntry[] }
  | { type: 'despawn'; request_id: number; world: string; agents: number[] }
  | { type: 'ping'; request_id: number };

// ---- Server → client

export interface Quantization { pos_step: number; vel_step: number; predict_num: number; orient_snap: number }
/** `tick_rate_hz` (since protocol v9): the world's ticks per second; the `tick_rate` event announces a change. */
export interface WorldInfo { id: number; name: string; bounds: Rect; aoi_cell_size: number; cols: number; rows: number; tick_rate_hz: number }
export interface Welcome {
  type: 'welcome'; protocol_version: number; quantization: Quantization;
  worlds: WorldInfo[]; max_message_bytes: number;
  /** The player this connection acts as (token `sub`, `anon-…` in dev mode, `admin`). */
  player_id: string;
  role: RoleName;
  /** Send back in `Hello.resume` after a drop to resume this session. */
  resume_token: string;
  /** How long after a drop the session can be resumed, seconds. */
  session_grace_secs: number;
}
export interface Keyframe { type: 'keyframe'; world: number; cell: number; tick: number; checksum: string | null; agents: QAgent[] }
export interface Delta {
  type: 'delta'; world: number; cell: number; tick: number; base_tick: number; checksum: string | null;
  left: number[];
  /** Decoded entries, or (decoded with `rawChanges`) the packed bytes of a binary frame. */
  changed: ChangeEntry[] | Uint8Array;
  entered: QAgent[];
}
export type EventKind =
  | { type: 'destination_reached'; agent: number }
  | { type: 'path_completed'; agent: number }
  | { type: 'spawned'; group: string; agents: number[] }
  | { type: 'despawned'; agents: number[] }
  /** Since protocol v8: `agent`'s behaviours aimed at `target` were removed, as the target left its owner's vision. */
  | { type: 'target_lost'; agent: number; target: number }
  /** Since protocol v9: the world runs at `tick_rate_hz` from the event's tick on. */
  | { type: 'tick_rate'; tick_rate_hz: number }
  /** Since protocol v9: the world's group table again (it changed); a record's `group` indexes it. */
  | { type: 'groups'; groups: string[] }
  /** Since protocol v10: `agent`'s MoveTo ended `distance` units short of its stop point (no progress for the world's give-up time). */
  | { type: 'gave_up'; agent: number; distance: number }
  /** Since protocol v10: no path reaches the MoveTo's target; `agent` stopped at the nearest reachable point, `distance` from the target. */
  | { type: 'unreachable'; agent: number; distance: number };
export interface EventMsg { type: 'event'; world: number; tick: number; event: EventKind }
export interface OkOutcome { type: 'ok' }
/** The cells now covered, ascending (binary: runs of consecutive cells since protocol v7, §5.2). */
/** `groups` (since protocol v9): the world's group names, indexed by a record's `group`. */
export interface SubscribedOutcome { type: 'subscribed'; world: number; cells: number[]; groups: string[] }
export interface SpawnedOutcome { type: 'spawned'; agents: number[] }
export interface ErrorOutcome { type: 'error'; code: ErrorCodeName; message: string; field: string | null }
export type Outcome = OkOutcome | SubscribedOutcome | SpawnedOutcome | ErrorOutcome;
export interface CommandResult { type: 'command_result'; request_id: number; result: Outcome }
export interface ErrorMsg { type: 'error'; code: ErrorCodeName; message: string; field: string | null }
export interface Pong { type: 'pong'; request_id: number; server_tick: number }
/**
 * A tick's state of many cells of one world in one message (protocol v4, §6.8; binary
 * connections receive these instead of per-cell keyframes and deltas).
 */
export interface Cells {
  type: 'cells'; world: number; tick: number;
  /** The subscription's `every_n_ticks`: a delta entry without an age is based on `tick - span`. */
  span: number;
  /** FNV-1a 64 folded over the cells' checksums after each entry, in entry order. */
  checksum: string | null;
  entries: CellsEntry[];
}
/**
 * The world moved to another server (protocol v11, a live handoff): it runs on at `to` (a
 * `ws://` / `wss://` URL), where the session resumes with its resume token. `SteerClient`
 * follows it by itself and emits `moved`.
 */
export interface Moved { type: 'moved'; world: number; name: string; to: string }
export type ServerMsg = Welcome | Keyframe | Delta | EventMsg | CommandResult | ErrorMsg | Pong | Cells | Moved;
