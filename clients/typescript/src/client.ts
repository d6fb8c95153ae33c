// SteerClient: one WebSocket session to steerd — Hello/Welcome, typed commands resolved by their
// CommandResult, events, WorldViews per subscribed world, Ping/Pong clock sync, and automatic
// reconnect with back-off that resumes the session (same player, same agents) and resubscribes.
// Protocol v4: a binary connection receives a world's state as one `cells` message per tick.
// (Compiled by tsc into server/viewer/sdk/ for the viewer: edit this .ts, then `npm run build:viewer`.)

import {
  DEFAULT_SERVER_LIMIT, ProtoError, decodeServer, decodeServerBatch, decodeServerJson, encodeClient, helloMessage,
} from './codec.js';
import { WorldView, ViewOptions } from './view.js';
import type {
  Area, BehaviorEntry, BehaviorKind, ClientMsg, CommandResult, Encoding, ErrorCodeName, ErrorMsg, EventKind, EventMsg,
  Limits, OkOutcome, Outcome, Point, RoleName, ServerMsg, SpawnArea, SpawnedOutcome, SubscribedOutcome, Welcome,
} from './types.js';

/**
 * An event handler property whose parameter is checked both ways (as a method's is), so that
 * the DOM's `(this: WebSocket, ev: MessageEvent) => any` and the `ws` package's
 * `(event: WebSocket.MessageEvent) => void` both fit without a cast.
 */
type Handler<E> = { bivariant(ev: E): void }['bivariant'] | null;

/**
 * The part of the WebSocket API the client uses. The browsers' `WebSocket` class and the `ws`
 * package's both satisfy it as they are: `connect(url, { WebSocket })`.
 */
export interface SocketLike {
  binaryType: string;
  readonly readyState: number;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: Handler<unknown>;
  onmessage: Handler<{ data: unknown }>;
  onclose: Handler<{ code?: number; reason?: string }>;
  onerror: Handler<unknown>;
}
export type SocketCtor = new (url: string) => SocketLike;

export interface ReconnectOptions {
  /** First delay (ms, default 250); doubles per failed attempt, with jitter. */
  minDelayMs?: number;
  /** Largest delay (ms, default 5000). */
  maxDelayMs?: number;
  /** Give up after this many consecutive failed attempts (default: never). */
  maxAttempts?: number;
}

export interface ConnectOptions extends ViewOptions {
  /** Player or admin token (Hello.token). */
  token?: string | null;
  /** Encoding of the server's frames (default "binary"). JSON mode sends JSON too. */
  encoding?: Encoding;
  /** Ask for batched binary frames (`/ws?batch=1`). */
  batch?: boolean;
  /** Reconnect automatically after a drop (default on). `false` disables it. */
  reconnect?: boolean | ReconnectOptions;
  /** A command without its result after this long is rejected (ms, default 10000). */
  commandTimeoutMs?: number;
  /** Ping period for clock sync and liveness (ms, default 1000; the first five go 200 ms apart). */
  pingIntervalMs?: number;
  /** No Pong for this long: the connection is considered dead and re-opened (ms, default 10000). */
  pongTimeoutMs?: number;
  /** Commands queued while reconnecting (default 256); more are rejected. */
  maxQueuedCommands?: number;
  /** Largest server frame accepted (default 8 MiB). */
  maxFrameBytes?: number;
  /**
   * Retry the first connection too (default off: `connect` rejects at once when the server is
   * unreachable). On, it retries with the `reconnect` back-off and `maxAttempts` until the first
   * Welcome; a refusal at Hello (bad token, version) still rejects at once.
   */
  retryFirstConnect?: boolean;
  /** WebSocket implementation (default: the global one, else the `ws` package under Node). */
  WebSocket?: SocketCtor;
}

/**
 * `connect` failed. `code`: the server's refusal at Hello (`unauthorized`, `unsupported_version`,
 * `forbidden`, …, with `field`), or `unreachable` (no Welcome: refused, closed or dropped before
 * it; `closeCode` / `closeReason` from the socket), or `closed` (the client was closed first).
 */
export class ConnectError extends Error {
  readonly code: ErrorCodeName | 'unreachable' | 'closed';
  readonly url: string;
  readonly field: string | null;
  readonly closeCode: number;
  readonly closeReason: string;
  constructor(code: ConnectError['code'], url: string, message: string, opts: { field?: string | null; closeCode?: number; closeReason?: string } = {}) {
    super(`${code}: ${url}: ${message}`);
    this.name = 'ConnectError';
    this.code = code;
    this.url = url;
    this.field = opts.field ?? null;
    this.closeCode = opts.closeCode ?? 0;
    this.closeReason = opts.closeReason ?? '';
  }
}

/**
 * Why the connection ended: `client` (close(), dropSocket(), or no Pong in time), `server` (the
 * server closed it with a close frame: `code` and `reason` are its), `network` (no close frame:
 * the connection broke, `code` 1006).
 */
export type DisconnectCause = 'client' | 'server' | 'network';
export interface DisconnectInfo { cause: DisconnectCause; code: number; reason: string; willReconnect: boolean }

/**
 * A command answered with an error outcome, or not answered at all. Besides the wire
 * `ErrorCode`s: `timeout` — no connection within `commandTimeoutMs`, the command was dropped from
 * the outgoing queue and never sent; `outcome_unknown` — sent, but the result never came (timeout
 * or connection lost): the server may or may not have run it; `not_connected` — refused without
 * sending (client closed, queue full, no reconnect).
 */
export class CommandError extends Error {
  readonly code: ErrorCodeName | 'timeout' | 'outcome_unknown' | 'not_connected' | 'unsupported';
  readonly field: string | null;
  readonly requestId: number;
  constructor(code: CommandError['code'], message: string, field: string | null = null, requestId = 0) {
    super(`${code}: ${message}${field ? ` (field ${field})` : ''}`);
    this.name = 'CommandError';
    this.code = code;
    this.field = field;
    this.requestId = requestId;
  }
}

export interface ClientEvents {
  /** Every Welcome (the first one and each after a reconnect). */
  welcome: (w: Welcome) => void;
  /** Every world event (`event.type` tells which). */
  event: (event: EventKind, msg: EventMsg, world: string) => void;
  /** A MoveTo agent arrived: it stopped within the order's arrival distance of its stop point. */
  destination_reached: (agent: number, world: string, tick: number) => void;
  /** A MoveTo agent gave up `distance` units short of its stop point (no progress for the world's give-up time). */
  gave_up: (agent: number, distance: number, world: string, tick: number) => void;
  /** No path reaches the MoveTo's target: the agent stopped at the nearest reachable point, `distance` from the target. */
  unreachable: (agent: number, distance: number, world: string, tick: number) => void;
  path_completed: (agent: number, world: string, tick: number) => void;
  spawned: (agents: number[], group: string, world: string, tick: number) => void;
  despawned: (agents: number[], world: string, tick: number) => void;
  /** The world now runs at `hz` ticks per second (its view's clock follows). */
  tick_rate: (hz: number, world: string, tick: number) => void;
  /** Your agent `agent` lost sight of `target` (under `owned` visibility); the behaviours aimed at it were removed. */
  target_lost: (agent: number, target: number, world: string, tick: number) => void;
  /** A server `Error` message or an undecodable frame. */
  error: (err: ErrorMsg | Error) => void;
  /** The connection ended (`cause`: client, server or network); `willReconnect` says whether the client tries again. */
  disconnect: (info: DisconnectInfo) => void;
  /**
   * Welcome received again after a drop (views resubscribed). `resumed`: the server took the
   * previous session back (same player: its agents are still this client's); false after a
   * `session_lost`.
   */
  reconnect: (w: Welcome, resumed: boolean) => void;
  /** The server refused the resume token (grace period over, kicked, server restarted). */
  session_lost: (reason: string) => void;
  /**
   * World `world` moved to another server (a live handoff): when this client uses it (a view
   * of it, or agents it spawned there) it reconnects to `to` at once and resumes its session
   * there (same player, same agents; views resubscribe); `reconnect` follows.
   */
  moved: (world: string, to: string) => void;
  /** A view asked for keyframes again (chain break, bad frame, checksum mismatch). */
  resync: (world: string, reason: string) => void;
  /**
   * A view was dropped and cleared (its `sample()` returns nothing): its world is gone after a
   * reconnect, or the server refused to subscribe it again.
   */
  view_removed: (world: string, reason: string) => void;
}

type Pending = {
  resolve: (r: never) => void;
  reject: (e: Error) => void;
  timer: ReturnType<typeof setTimeout>;
  internal: boolean;
  /** What the message was (for error texts). */
  what: string;
  /** Written to a socket: from then on a missing result is `outcome_unknown`. */
  sent: boolean;
  /** Runs on the result, before any later message is handled (subscriptions take effect here). */
  onResult?: (r: Outcome) => void;
};
type State = 'connecting' | 'open' | 'reconnecting' | 'closed';

const U32 = 0x100000000;

/** Opens a session; resolves once the server's Welcome arrived. */
export async function connect(url: string, opts: ConnectOptions = {}): Promise<SteerClient> {
  const Ctor = opts.WebSocket ?? (await defaultSocket());
  const c = new SteerClient(url, opts, Ctor);
  await c.opened;
  return c;
}

async function defaultSocket(): Promise<SocketCtor> {
  const g = globalThis as unknown as { WebSocket?: SocketCtor };
  if (typeof g.WebSocket === 'function') return g.WebSocket;
  // Node without a global WebSocket: the optional `ws` package (never loaded in a browser).
  const name = 'ws';
  try {
    const mod = await import(name);
    return (mod.WebSocket ?? mod.default) as SocketCtor;
  } catch {
    throw new Error('steerd-client: no WebSocket in this runtime; install the `ws` package (npm i ws)');
  }
}

/** `ws://host:port/ws` from a ws(s) or http(s) URL (a bare origin gets `/ws`). */
export function wsUrl(url: string, batch: boolean): string {
  const u = new URL(url);
  if (u.protocol === 'http:') u.protocol = 'ws:';
  else if (u.protocol === 'https:') u.protocol = 'wss:';
  if (u.pathname === '/' || u.pathname === '') u.pathname = '/ws';
  if (batch) u.searchParams.set('batch', '1');
  return u.toString();
}

export class SteerClient {
  /** The latest Welcome. */
  welcome: Welcome | null = null;
  state: State = 'connecting';
  /** Resolves on the first Welcome; rejects if the first connection fails. */
  readonly opened: Promise<void>;
  /** Reconnects done. */
  reconnects = 0;
  /** Reconnects that resumed the previous session (same player, its agents and subscriptions). */
  resumes = 0;

  private url: string;
  private readonly opts: ConnectOptions;
  private readonly Ctor: SocketCtor;
  private ws: SocketLike | null = null;
  private nextRid = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly queue: ClientMsg[] = [];
  private readonly views = new Map<string, WorldView>();
  /** Per world name: the agents this client spawned there and has not seen despawned. */
  private readonly owned = new Map<string, Set<number>>();
  private readonly listeners = new Map<keyof ClientEvents, Set<(...a: never[]) => void>>();
  private readonly pings = new Map<number, number>();
  /** World ids in the order this connection subscribed them (the server's Pong reports the first). */
  private subscribedOrder: number[] = [];
  private resume: string | null = null;
  /** Whether the Hello of the current connection carried `resume`. */
  private resumeSent = false;
  private attempts = 0;
  private reconnectTimer: ReturnType<typeof setTimeout> | null = null;
  private pingTimer: ReturnType<typeof setTimeout> | null = null;
  private pingsSent = 0;
  private lastPongMs = 0;
  private readonly resyncTimers = new Map<string, ReturnType<typeof setTimeout>>();
  private openResolve!: () => void;
  private openReject!: (e: Error) => void;
  private everOpen = false;
  /** Set when this client closes the current socket itself (dropSocket, pong timeout). */
  private closingBy: 'client' | null = null;

  constructor(url: string, opts: ConnectOptions, Ctor: SocketCtor) {
    this.url = wsUrl(url, !!opts.batch);
    this.opts = opts;
    this.Ctor = Ctor;
    this.opened = new Promise<void>((res, rej) => {
      this.openResolve = res;
      this.openReject = rej;
    });
    this.open();
  }

  // ---- events

  /** Adds a listener; returns a function that removes it. */
  on<K extends keyof ClientEvents>(name: K, cb: ClientEvents[K]): () => void {
    let set = this.listeners.get(name);
    if (!set) this.listeners.set(name, (set = new Set()));
    set.add(cb as (...a: never[]) => void);
    return () => set!.delete(cb as (...a: never[]) => void);
  }

  private emit<K extends keyof ClientEvents>(name: K, ...args: Parameters<ClientEvents[K]>): void {
    const set = this.listeners.get(name);
    if (!set) return;
    for (const cb of [...set]) {
      try {
        (cb as (...a: unknown[]) => void)(...args);
      } catch (e) {
        // A listener's bug must not break the session.
        setTimeout(() => { throw e; });
      }
    }
  }

  // ---- commands

  /** Spawns `count` agents of `group` in `area`; resolves with their ids. */
  spawn(world: string, s: { group: string; count: number; area: SpawnArea; limits?: Limits; behaviors?: BehaviorEntry[] }): Promise<SpawnedOutcome> {
    return this.command<SpawnedOutcome>({ type: 'spawn', request_id: 0, world, group: s.group, count: s.count, area: s.area, limits: s.limits ?? {}, behaviors: s.behaviors ?? [] }, false, (r) => {
      if (r.type === 'spawned') {
        const set = this.mineSet(world);
        for (const id of r.agents) set.add(id);
      }
    });
  }
  /** Sends agents to a point (the server plans the path); DestinationReached follows per agent. */
  moveTo(world: string, agents: number[], target: Point, opts: { stoppingDistance?: number } = {}): Promise<OkOutcome> {
    return this.command({ type: 'move_to', request_id: 0, world, agents, target: { x: target.x, y: target.y }, stopping_distance: opts.stoppingDistance ?? 0 });
  }
  setBehaviors(world: string, agents: number[], behaviors: BehaviorEntry[]): Promise<OkOutcome> {
    return this.command({ type: 'set_behaviors', request_id: 0, world, agents, behaviors });
  }
  addBehavior(world: string, agents: number[], entry: BehaviorEntry): Promise<OkOutcome> {
    return this.command({ type: 'add_behavior', request_id: 0, world, agents, entry });
  }
  removeBehavior(world: string, agents: number[], kind: BehaviorKind): Promise<OkOutcome> {
    return this.command({ type: 'remove_behavior', request_id: 0, world, agents, kind });
  }
  resetBehaviors(world: string, agents: number[]): Promise<OkOutcome> {
    return this.command({ type: 'reset_behaviors', request_id: 0, world, agents });
  }
  despawn(world: string, agents: number[]): Promise<OkOutcome> {
    return this.command({ type: 'despawn', request_id: 0, world, agents }, false, (r) => {
      if (r.type === 'ok') this.notMine(world, agents);
    });
  }

  /** Ids of the agents this client spawned in `world` and not seen despawned (`SampledAgent.mine`). */
  mine(world: string): ReadonlySet<number> {
    return this.mineSet(world);
  }

  private mineSet(world: string): Set<number> {
    let set = this.owned.get(world);
    if (!set) this.owned.set(world, (set = new Set()));
    return set;
  }

  private notMine(world: string, agents: number[]): void {
    const set = this.owned.get(world);
    if (set) for (const id of agents) set.delete(id);
  }

  /**
   * Subscribes to `area` of `world` (default the whole world) and keeps a WorldView of it, across
   * resyncs and reconnects. `everyNTicks` (default 1): the server sends this world's state only
   * on ticks that are multiples of it (observers, minimaps: 2 = 10 Hz at 20 Hz); 0 or more than
   * the server's limit (steerd: `limits.max_every_n_ticks`, default 20) is `invalid_field`.
   */
  async subscribe(world: string, area: Area = { type: 'whole_world' }, opts: { everyNTicks?: number } = {}): Promise<SubscribedOutcome & { view: WorldView }> {
    const every = opts.everyNTicks ?? 1;
    if (!Number.isInteger(every) || every < 0 || every > 0xffffffff) {
      throw new CommandError('invalid_field', `everyNTicks ${String(opts.everyNTicks)}: a whole number of ticks`, 'every_n_ticks');
    }
    if (!this.views.has(world) && !this.welcome?.worlds.some((w) => w.name === world)) {
      throw new CommandError('unknown_world', `no world \`${world}\` in the Welcome`, 'world');
    }
    // The view exists, and takes this area and rate, only once the server accepted them: a
    // refused subscribe leaves nothing behind, and resyncs and reconnects replay only what was
    // accepted.
    const r = await this.subscribeCommand(world, area, every, false);
    return { ...r, view: this.views.get(world)! };
  }

  private subscribeCommand(world: string, area: Area, every: number, internal: boolean): Promise<SubscribedOutcome> {
    return this.command<SubscribedOutcome>({ type: 'subscribe', request_id: 0, world, area, every_n_ticks: every }, internal, (r) => {
      if (r.type === 'subscribed') this.accepted(world, area, every, r);
      else if (internal) this.removeView(world, `the server refused to subscribe again: ${r.type === 'error' ? `${r.code}: ${r.message}` : r.type}`);
    });
  }

  /** A Subscribed answer: the view (created on the first) takes the area, rate and cells. */
  private accepted(world: string, area: Area, every: number, r: SubscribedOutcome): void {
    let v = this.views.get(world);
    if (!v) {
      const info = this.welcome?.worlds.find((w) => w.id === r.world);
      if (!info || !this.welcome) return;
      v = new WorldView(info, this.welcome.quantization, info.tick_rate_hz, area, this.opts);
      v.onResync = (reason) => this.scheduleResync(world, reason);
      v.mine = this.mineSet(world);
      this.views.set(world, v);
    }
    v.area = area;
    v.everyNTicks = every;
    v.groups = r.groups;
    v.subscribed(r.cells);
    if (!this.subscribedOrder.includes(r.world)) this.subscribedOrder.push(r.world);
  }

  private removeView(world: string, reason: string): void {
    const v = this.views.get(world);
    if (!v) return;
    this.views.delete(world);
    this.subscribedOrder = this.subscribedOrder.filter((id) => id !== v.info.id);
    v.clear();
    this.emit('view_removed', world, reason);
  }

  /** Stops the stream of `world` and drops its view. */
  async unsubscribe(world: string): Promise<OkOutcome> {
    const v = this.views.get(world);
    this.views.delete(world);
    const r = await this.command<OkOutcome>({ type: 'unsubscribe', request_id: 0, world });
    if (v) this.subscribedOrder = this.subscribedOrder.filter((id) => id !== v.info.id);
    return r;
  }

  /** The view of a subscribed world. */
  view(world: string): WorldView | undefined {
    return this.views.get(world);
  }

  /** Sends a Ping; resolves with the server tick of the Pong. */
  ping(): Promise<number> {
    const rid = this.rid();
    return new Promise<number>((resolve, reject) => {
      if (this.state !== 'open') {
        reject(new CommandError('not_connected', `not connected (${this.state}): ping not sent`, null, rid));
        return;
      }
      const timer = setTimeout(() => {
        if (this.pending.delete(rid)) reject(new CommandError('outcome_unknown', `no Pong for ping ${rid}`, null, rid));
      }, this.opts.commandTimeoutMs ?? 10000);
      this.pending.set(rid, { resolve: resolve as (r: never) => void, reject, timer, internal: false, what: 'ping', sent: true });
      this.pings.set(rid, now());
      if (!this.send({ type: 'ping', request_id: rid })) {
        clearTimeout(timer);
        this.pending.delete(rid);
        reject(new CommandError('not_connected', 'the socket is not open: ping not sent', null, rid));
      }
    });
  }

  /** Closes the session for good (no reconnect); pending commands are rejected. */
  close(): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.clearTimers();
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onclose = null;
      try { ws.close(1000, 'client closed'); } catch { /* already closed */ }
    }
    this.failPending('client closed');
    this.openReject(new ConnectError('closed', this.url, 'the client was closed before the Welcome'));
    if (ws) this.emit('disconnect', { cause: 'client', code: 1000, reason: 'client closed', willReconnect: false });
  }

  /**
   * Closes the transport the way a network failure would: the client reconnects (resumes in
   * the session) and resubscribes; views keep their state meanwhile. For tests and "retry now".
   */
  dropSocket(): void {
    const ws = this.ws;
    if (!ws) return;
    this.closingBy = 'client';
    try { ws.close(4000, 'dropped by the client'); } catch { /* already closing */ }
  }

  private rid(): number {
    const r = this.nextRid;
    this.nextRid = (this.nextRid + 1) % U32 || 1;
    return r;
  }

  /**
   * Sends `msg` now, or queues it while (re)connecting. Either it is sent and its result (or
   * `outcome_unknown`) settles the promise, or it times out in the queue, is removed from it and
   * is never sent (`timeout`).
   */
  private command<R>(msg: ClientMsg, internal = false, onResult?: (r: Outcome) => void): Promise<R> {
    const rid = this.rid();
    (msg as { request_id: number }).request_id = rid;
    return new Promise<R>((resolve, reject) => {
      if (this.state === 'closed') {
        reject(new CommandError('not_connected', 'the client is closed', null, rid));
        return;
      }
      const p: Pending = { resolve: resolve as (r: never) => void, reject, timer: undefined as never, internal, what: `request ${rid} (${msg.type})`, sent: false, onResult };
      if (this.state === 'open' && this.send(msg)) p.sent = true;
      else if (this.queue.length >= (this.opts.maxQueuedCommands ?? 256)) {
        reject(new CommandError('not_connected', `reconnecting and ${this.queue.length} commands already queued`, null, rid));
        return;
      } else this.queue.push(msg);
      p.timer = setTimeout(() => this.expire(rid), this.opts.commandTimeoutMs ?? 10000);
      this.pending.set(rid, p);
    });
  }

  /** A command's time is up: never sent → out of the queue; sent → its outcome is unknown. */
  private expire(rid: number): void {
    const p = this.pending.get(rid);
    if (!p) return;
    this.pending.delete(rid);
    const ms = this.opts.commandTimeoutMs ?? 10000;
    if (!p.sent) {
      const i = this.queue.findIndex((m) => (m as { request_id: number }).request_id === rid);
      if (i >= 0) this.queue.splice(i, 1);
      p.reject(new CommandError('timeout', `no connection within ${ms} ms: ${p.what} was dropped unsent`, null, rid));
    } else {
      p.reject(new CommandError('outcome_unknown', `${p.what} was sent but not answered within ${ms} ms: it may or may not have taken effect`, null, rid));
    }
  }

  /** Writes `msg` to the open socket; false if there is none. */
  private send(msg: ClientMsg): boolean {
    const ws = this.ws;
    if (!ws || ws.readyState !== 1) return false;
    if ((this.opts.encoding ?? 'binary') === 'json') ws.send(JSON.stringify(msg));
    else ws.send(encodeClient(msg));
    return true;
  }

  // ---- connection

  private open(): void {
    let ws: SocketLike;
    try {
      ws = new this.Ctor(this.url);
    } catch (e) {
      this.onDrop(1006, (e as Error).message, 'network');
      return;
    }
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    this.closingBy = null;
    ws.onopen = () => {
      this.resumeSent = this.resume !== null;
      const hello = helloMessage({ token: this.opts.token, encoding: this.opts.encoding, resume: this.resume });
      this.send(hello);
    };
    ws.onmessage = (ev) => {
      if (this.ws !== ws) return;
      this.onFrame(ev.data);
    };
    ws.onerror = () => { /* onclose follows */ };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      const code = ev.code ?? 1006;
      const cause: DisconnectCause = this.closingBy ?? (code === 1006 || code === 1005 || code === 0 ? 'network' : 'server');
      this.onDrop(code, ev.reason ?? '', cause);
    };
  }

  private onFrame(data: unknown): void {
    let msgs: ServerMsg[];
    const limit = this.opts.maxFrameBytes ?? DEFAULT_SERVER_LIMIT;
    try {
      if (typeof data === 'string') msgs = [decodeServerJson(data, limit)];
      else {
        const bytes = data as ArrayBuffer;
        msgs = this.opts.batch ? decodeServerBatch(bytes, { limit, rawChanges: true }) : [decodeServer(bytes, { limit, rawChanges: true })];
      }
    } catch (e) {
      if (!(e instanceof ProtoError)) throw e;
      this.emit('error', new Error(`undecodable frame: ${e.message}`));
      // We cannot tell which cell it was for: every view gets keyframes again.
      for (const v of this.views.values()) v.resync(`undecodable frame: ${e.message}`);
      return;
    }
    for (const m of msgs) this.onMessage(m);
  }

  private viewById(id: number): WorldView | undefined {
    for (const v of this.views.values()) if (v.info.id === id) return v;
    return undefined;
  }

  private worldName(id: number): string {
    return this.welcome?.worlds.find((w) => w.id === id)?.name ?? String(id);
  }

  private onMessage(m: ServerMsg): void {
    const t = now();
    switch (m.type) {
      case 'welcome':
        return this.onWelcome(m);
      case 'keyframe': {
        const v = this.viewById(m.world);
        if (v) v.keyframe(m, t);
        return;
      }
      case 'delta': {
        const v = this.viewById(m.world);
        if (v) v.delta(m, t);
        return;
      }
      case 'cells': {
        const v = this.viewById(m.world);
        if (v) v.applyCells(m, t);
        return;
      }
      case 'event': {
        const w = this.worldName(m.world);
        const e = m.event;
        this.emit('event', e, m, w);
        if (e.type === 'destination_reached') this.emit('destination_reached', e.agent, w, m.tick);
        else if (e.type === 'gave_up') this.emit('gave_up', e.agent, e.distance, w, m.tick);
        else if (e.type === 'unreachable') this.emit('unreachable', e.agent, e.distance, w, m.tick);
        else if (e.type === 'path_completed') this.emit('path_completed', e.agent, w, m.tick);
        else if (e.type === 'spawned') this.emit('spawned', e.agents, e.group, w, m.tick);
        else if (e.type === 'despawned') {
          this.notMine(w, e.agents);
          this.emit('despawned', e.agents, w, m.tick);
        }
        else if (e.type === 'target_lost') this.emit('target_lost', e.agent, e.target, w, m.tick);
        else if (e.type === 'tick_rate') this.onTickRate(m.world, e.tick_rate_hz, w, m.tick);
        else if (e.type === 'groups') {
          const v = this.viewById(m.world);
          if (v) v.groups = e.groups;
        }
        return;
      }
      case 'command_result':
        return this.onResult(m);
      case 'moved':
        return this.onMoved(m.name, m.to);
      case 'pong': {
        const sent = this.pings.get(m.request_id);
        this.pings.delete(m.request_id);
        this.lastPongMs = t;
        if (sent !== undefined && this.subscribedOrder.length) {
          const v = this.viewById(this.subscribedOrder[0]);
          if (v) v.clock.addSample(sent, t, m.server_tick);
        }
        const p = this.pending.get(m.request_id);
        if (p) {
          clearTimeout(p.timer);
          this.pending.delete(m.request_id);
          p.resolve(m.server_tick as never);
        }
        return;
      }
      case 'error': {
        this.emit('error', m);
        if (m.code === 'unauthorized' && m.field === 'resume' && this.state !== 'open') {
          // The session is gone (grace period over, kicked, or server restarted): the server
          // closes; the reconnect starts a new session with the token (the old agents are not ours).
          this.resume = null;
          this.emit('session_lost', m.message);
          return;
        }
        if (!this.welcome || this.state !== 'open') {
          // Refused at Hello (bad token, version): retrying the same Hello cannot help.
          if (m.code === 'unauthorized' || m.code === 'unsupported_version' || m.code === 'forbidden') {
            this.openReject(new ConnectError(m.code, this.url, m.message, { field: m.field }));
            this.close();
          }
        }
        return;
      }
    }
  }

  /**
   * A world this client uses moved to another server: reconnect there now (no back-off) and
   * resume the session with the latest resume token (the new server knows it); the views
   * resubscribe at the Welcome, as after any reconnect.
   */
  private onMoved(world: string, to: string): void {
    this.emit('moved', world, to);
    if (this.state === 'closed' || !(this.views.has(world) || this.owned.has(world))) return;
    let url: string;
    try {
      url = wsUrl(to, !!this.opts.batch);
    } catch {
      this.emit('error', new Error(`moved: \`${to}\` is not a URL`));
      return;
    }
    this.url = url;
    const ws = this.ws;
    this.ws = null;
    if (ws) {
      ws.onclose = null;
      try { ws.close(1000, 'world moved'); } catch { /* already closing */ }
    }
    this.clearTimers();
    for (const [rid, p] of this.pending) {
      if (!p.sent) continue;
      clearTimeout(p.timer);
      this.pending.delete(rid);
      if (!p.internal) p.reject(new CommandError('outcome_unknown', `the world moved before the result of ${p.what}: it may or may not have taken effect`, null, rid));
    }
    this.pings.clear();
    this.state = 'reconnecting';
    this.emit('disconnect', { cause: 'client', code: 1000, reason: 'world moved', willReconnect: true });
    this.open();
  }

  /** The world's rate changed: its WorldInfo and its view's clock follow. */
  private onTickRate(world: number, hz: number, name: string, tick: number): void {
    const info = this.welcome?.worlds.find((x) => x.id === world);
    if (info) info.tick_rate_hz = hz;
    const v = this.viewById(world);
    if (v) v.setTickRate(hz);
    this.emit('tick_rate', hz, name, tick);
  }

  private onResult(m: CommandResult): void {
    const r = m.result;
    const p = this.pending.get(m.request_id);
    if (!p) {
      // A result after its command's timeout (`outcome_unknown`). A late Subscribed: the server
      // streams what no view asked for (resubscribe the view's accepted area, or unsubscribe).
      if (r.type === 'subscribed' && this.state === 'open') {
        const name = this.worldName(r.world);
        const v = this.views.get(name);
        if (v) this.subscribeCommand(name, v.area, v.everyNTicks, true).catch((e) => this.emit('error', e as Error));
        else this.command({ type: 'unsubscribe', request_id: 0, world: name }, true).catch((e) => this.emit('error', e as Error));
      }
      return;
    }
    clearTimeout(p.timer);
    this.pending.delete(m.request_id);
    p.onResult?.(r);
    if (r.type === 'error') p.reject(new CommandError(r.code, r.message, r.field, m.request_id));
    else p.resolve(r as never);
  }

  /** The player this session acts as (`Welcome.player_id`); null before the first Welcome. */
  get playerId(): string | null {
    return this.welcome?.player_id ?? null;
  }

  /** The session's role (`Welcome.role`); null before the first Welcome. */
  get role(): RoleName | null {
    return this.welcome?.role ?? null;
  }

  /** The token a reconnect sends in `Hello.resume` (each Welcome brings a new one); null if none. */
  get resumeToken(): string | null {
    return this.resume;
  }

  private onWelcome(w: Welcome): void {
    const again = this.everOpen;
    const resumed = again && this.resumeSent;
    // Agents belong to the player: another player id (a new dev-mode session) owns none of them.
    if (this.welcome && this.welcome.player_id !== w.player_id) for (const set of this.owned.values()) set.clear();
    for (const name of [...this.owned.keys()]) if (!w.worlds.some((x) => x.name === name)) this.owned.delete(name);
    this.welcome = w;
    this.state = 'open';
    this.everOpen = true;
    this.attempts = 0;
    // Each Welcome names a new session token; the next reconnect resumes with it.
    this.resume = w.resume_token || null;
    if (resumed) this.resumes++;
    this.subscribedOrder = [];
    this.lastPongMs = now();
    for (const [name, v] of [...this.views]) {
      const info = w.worlds.find((x) => x.name === name);
      if (!info) {
        this.removeView(name, 'the world is gone after the reconnect');
        continue;
      }
      v.rebind(info, w.quantization, info.tick_rate_hz);
      this.subscribeCommand(name, v.area, v.everyNTicks, true).catch((e) => this.emit('error', e as Error));
    }
    for (const msg of this.queue.splice(0)) {
      const p = this.pending.get((msg as { request_id: number }).request_id);
      if (p && this.send(msg)) p.sent = true;
      else if (p) this.queue.push(msg); // the socket closed under us: the next Welcome sends it
    }
    this.pingsSent = 0;
    this.schedulePing();
    this.emit('welcome', w);
    if (again) {
      this.reconnects++;
      this.emit('reconnect', w, resumed);
    }
    this.openResolve();
  }

  private scheduleResync(world: string, reason: string): void {
    this.emit('resync', world, reason);
    if (this.resyncTimers.has(world)) return;
    this.resyncTimers.set(world, setTimeout(() => {
      this.resyncTimers.delete(world);
      const v = this.views.get(world);
      if (!v || this.state !== 'open') return; // a reconnect resubscribes anyway
      this.subscribeCommand(world, v.area, v.everyNTicks, true).catch((e) => this.emit('error', e as Error));
    }, 50));
  }

  private schedulePing(): void {
    if (this.pingTimer) clearTimeout(this.pingTimer);
    const period = this.opts.pingIntervalMs ?? 1000;
    const delay = this.pingsSent < 5 ? Math.min(200, period) : period;
    this.pingTimer = setTimeout(() => {
      this.pingTimer = null;
      if (this.state !== 'open') return;
      if (now() - this.lastPongMs > (this.opts.pongTimeoutMs ?? 10000)) {
        this.dropSocket(); // silent peer: reconnect
        return;
      }
      const rid = this.rid();
      this.pings.set(rid, now());
      if (this.pings.size > 64) this.pings.delete(this.pings.keys().next().value as number);
      this.send({ type: 'ping', request_id: rid });
      this.pingsSent++;
      this.schedulePing();
    }, delay);
  }

  /** The session ends: sent commands' outcomes are unknown, queued ones were never sent. */
  private failPending(why: string): void {
    for (const [rid, p] of this.pending) {
      clearTimeout(p.timer);
      if (p.internal) continue;
      if (p.sent) p.reject(new CommandError('outcome_unknown', `${why} before the result of ${p.what}: it may or may not have taken effect`, null, rid));
      else p.reject(new CommandError('not_connected', `${why}: ${p.what} was never sent`, null, rid));
    }
    this.pending.clear();
    this.pings.clear();
    this.queue.length = 0;
  }

  private clearTimers(): void {
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.pingTimer) clearTimeout(this.pingTimer);
    for (const t of this.resyncTimers.values()) clearTimeout(t);
    this.resyncTimers.clear();
    this.reconnectTimer = null;
    this.pingTimer = null;
  }

  private onDrop(code: number, reason: string, cause: DisconnectCause): void {
    if (this.state === 'closed') return;
    this.clearTimers();
    // Commands in flight may or may not have run (`outcome_unknown`); queued ones wait.
    for (const [rid, p] of this.pending) {
      if (!p.sent) continue;
      clearTimeout(p.timer);
      this.pending.delete(rid);
      if (!p.internal) p.reject(new CommandError('outcome_unknown', `connection lost before the result of ${p.what}: it may or may not have taken effect`, null, rid));
    }
    this.pings.clear();
    const r = this.opts.reconnect;
    const enabled = r !== false && (this.everOpen || !!this.opts.retryFirstConnect);
    const ro: ReconnectOptions = typeof r === 'object' ? r : {};
    const give = ro.maxAttempts !== undefined && this.attempts >= ro.maxAttempts;
    const willReconnect = enabled && !give;
    this.emit('disconnect', { cause, code, reason, willReconnect });
    if (!willReconnect) {
      this.state = 'closed';
      this.failPending(`connection closed (${code} ${reason})`);
      const tries = this.attempts > 0 ? ` after ${this.attempts + 1} attempts` : '';
      this.openReject(new ConnectError('unreachable', this.url, `no Welcome: the connection closed (${code}${reason ? ` ${reason}` : ''})${tries}`, { closeCode: code, closeReason: reason }));
      return;
    }
    this.state = 'reconnecting';
    const min = ro.minDelayMs ?? 250;
    const max = ro.maxDelayMs ?? 5000;
    const delay = Math.min(max, min * 2 ** Math.min(this.attempts, 20)) * (0.5 + Math.random() * 0.5);
    this.attempts++;
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (this.state === 'reconnecting') this.open();
    }, delay);
  }
}

function now(): number {
  return typeof performance !== 'undefined' ? performance.now() : Date.now();
}
