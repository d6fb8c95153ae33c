// The WebSocket stream: connect and resume, subscribe to the cells on screen (AOI), apply
// keyframes, deltas and cell batches through the SDK, and the agents held from them. Owns the
// connection (socket, Welcome, resume token, quantization, request ids), the cells held and
// subscribed, and the stream's figures (bytes, frames, resyncs, lateness).

import { decodeServer, encodeClient, helloMessage, CellMap, CellsTxn, applyCells, cellOf, ProtoError } from './sdk/index.js';
import { $, canvas, V } from './state.js';
import { api, wpath, fail, showTokenField, toast, token, setToken } from './rest.js';
import { selectedWorld, tickRate, isPaused, setGroupNames, setTickRate, preferWorld, worldsAnnounced } from './world.js';
import { s2w } from './view.js';
import { updateSelectionText, noteArrived } from './input.js';
import { escapeHtml, logEvent } from './status.js';
import { stoppedShort } from './stuck.js';

/** The stream's own state (others read it through the functions below). */
const own = {
  ws: null,
  connState: 'connecting', // the connection pill's text ('live' once welcomed)
  connected: false, // welcomed on the current socket
  welcome: null,
  /** Welcome.resume_token: sent in the next Hello to resume the session. */
  resume: null,
  quant: { pos_step: 0.01, vel_step: 0.1, predict_num: 32768 },
  nextRid: 1,
  cells: new Map(), // cell -> CellMap
  cellSeen: new Map(), // cell -> performance.now() of the last applied frame
  subCells: new Set(), // cells of the current subscription (Subscribed answer)
  bytes: 0,
  bytesWindow: [], // [t, bytes] of the last 2 s
  keyframes: 0,
  chainBreaks: 0,
  lateness: [], // [t, ms] of the last 5 s
  wantCells: '', // key of the cell set last requested
  pendingSub: null, // request id of an unanswered Subscribe
  lastArea: null, // the area of the last Subscribe (a resync asks for it again)
  deltas: 0,
  tickOffsets: [], // [t, arrival - tick/rate] for the lateness baseline
  lastFrameTick: -1,
  lastTick: 0,
  ticksSeen: new Set(),
};

/** The connection pill's text: 'connecting', 'live', 'closed (code)'. */
export const connState = () => own.connState;
/** Whether the current socket is welcomed. */
export const isConnected = () => own.connected;
/** The quantization steps of the wire (Welcome.quantization). */
export const quant = () => own.quant;
/** The cells held: an iterator over [cell, CellMap]. */
export const heldCells = () => own.cells.entries();
/** performance.now() of the last frame applied to `cell`, or undefined. */
export const cellSeenAt = (cell) => own.cellSeen.get(cell);
export const isSubscribed = (cell) => own.subCells.has(cell);
/** The cells of the current subscription (a copy). */
export const subscribedCells = () => [...own.subCells];
/** Welcome.player_id of the stream's session, or null (kept across a drop: the page resumes it). */
export const playerId = () => (own.welcome ? own.welcome.player_id : null);
/** Keyframes and deltas applied, resyncs, and the highest tick seen. */
export const frameCounts = () => ({ keyframes: own.keyframes, deltas: own.deltas, chainBreaks: own.chainBreaks, tick: own.lastTick });

/**
 * The stream's traffic figures now: bytes per second over the last 2 s, bytes in total,
 * keyframes, resyncs, and each tick's lateness over the last 5 s (ms, sorted).
 */
export function traffic(now) {
  while (own.bytesWindow.length && own.bytesWindow[0][0] < now - 2000) own.bytesWindow.shift();
  while (own.lateness.length && own.lateness[0][0] < now - 5000) own.lateness.shift();
  return {
    bytesPerSec: own.bytesWindow.reduce((acc, [, n]) => acc + n, 0) / 2,
    bytes: own.bytes,
    keyframes: own.keyframes,
    chainBreaks: own.chainBreaks,
    lateness: own.lateness.map(([, x]) => x).sort((x, y) => x - y),
  };
}

/**
 * A page opened by following a moved world (`moved`, below) carries the session's resume token
 * in its fragment: taken once (app.js calls this before `connect`) and removed from the address
 * (it never reaches a server in a request, and a reload or a copied link does not carry it on).
 * The fragment also names the world that moved, which the page notes (`V.moved`) and says.
 */
export function takeCarriedSession() {
  const carried = new URLSearchParams(location.hash.slice(1));
  if (carried.has('resume') || carried.has('moved')) {
    own.resume = carried.get('resume') || null;
    history.replaceState(null, '', location.pathname + location.search);
  }
  const name = carried.get('moved');
  if (name) {
    V.moved.push({ name, to: ownWsUrl() });
    setTimeout(() => {
      toast(`world ${name} moved to this server (${location.host}): followed`, true);
      logEvent(`world <b>${escapeHtml(name)}</b> moved to this server: followed`, 'arrive');
    }, 0);
  }
}

// WebSocket

export function connect() {
  if (own.ws) {
    own.ws.onclose = null;
    own.ws.close();
  }
  own.connected = false;
  setConn('connecting', 'warn');
  const url = ownWsUrl();
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  own.ws = ws;
  ws.onopen = () => {
    // After a drop, resume the session: same player, so the agents this page
    // spawned stay commandable.
    send(helloMessage({ token: token() || null, encoding: 'binary', resume: own.resume }));
  };
  ws.onmessage = (ev) => {
    if (!(ev.data instanceof ArrayBuffer)) return;
    own.bytes += ev.data.byteLength;
    own.bytesWindow.push([performance.now(), ev.data.byteLength]);
    let msg;
    try {
      msg = decodeServer(ev.data, { rawChanges: true });
    } catch (e) {
      fail(new Error(`undecodable frame: ${e.message}`));
      resubscribe();
      return;
    }
    onMessage(msg);
  };
  ws.onclose = (ev) => {
    own.connected = false;
    setConn(`closed${ev.code ? ` (${ev.code})` : ''}`, 'bad');
    if (own.ws === ws) setTimeout(connect, 1500);
  };
}

/** The WebSocket URL of the server that serves this page. */
function ownWsUrl() {
  return `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/ws`;
}

/**
 * The world on screen moved to another server (a live handoff, protocol 11 `moved`;
 * docs/handoff.md). The page talks to one server (its REST calls are same-origin), so it
 * follows the world to where it went: on this server's own address (an empty `to`, or a `to`
 * naming this page's host: a load balancer in front of the fleet) it reconnects at once and
 * resumes its session, on another server it opens that server's viewer on the world, carrying
 * the resume token in the fragment, so the page keeps its session (same player, its agents
 * still commandable). A short notice says where it went.
 */
function onMoved(m) {
  const shown = selectedWorld();
  if (!shown || m.name !== shown.name) return;
  V.moved.push({ name: m.name, to: m.to });
  const to = m.to || ownWsUrl();
  let target;
  try {
    target = new URL(to);
  } catch {
    return fail(new Error(`world ${m.name} moved to an unusable address: ${to}`));
  }
  const origin = `${target.protocol === 'wss:' ? 'https:' : 'http:'}//${target.host}`;
  toast(`world ${m.name} moved to ${target.host}: following`, true);
  logEvent(`world <b>${escapeHtml(m.name)}</b> moved to ${escapeHtml(target.host)}: following`, 'arrive');
  if (origin === location.origin) {
    preferWorld(m.name);
    connect();
    return;
  }
  const carry = new URLSearchParams({ moved: m.name });
  if (own.resume) carry.set('resume', own.resume);
  if (own.ws) {
    own.ws.onclose = null;
    own.ws.close();
  }
  location.assign(`${origin}/?world=${encodeURIComponent(m.name)}#${carry}`);
}

function setConn(text, cls) {
  const c = $('conn');
  c.textContent = text;
  c.className = `pill ${cls}`;
  own.connState = text;
}

export function send(msg) {
  if (own.ws && own.ws.readyState === WebSocket.OPEN) own.ws.send(encodeClient(msg));
}

/** A keep-alive ping (only on an open socket). */
export function ping() {
  if (own.ws && own.ws.readyState === WebSocket.OPEN) send({ type: 'ping', request_id: own.nextRid++ });
}

/** Closes the stream as a network failure would (the page reconnects and resumes). */
export function dropSocket() {
  if (own.ws) own.ws.close(4000, 'dropped by the page');
}

/** Stops streaming and drops the cells held (a scenario load; `connect` starts again). */
export function stopStreaming() {
  if (own.ws) {
    own.ws.onclose = null;
    own.ws.close();
    own.ws = null;
  }
  own.connected = false;
  own.cells.clear();
}

/** Another identity (a token set or cleared): the next connection starts a new session. */
export function forgetSession() {
  own.resume = null;
}

/** Whether a message's world id is the shown world's. */
function ofShownWorld(id) {
  const w = selectedWorld();
  return !!w && w.id === id;
}

function onMessage(m) {
  switch (m.type) {
    case 'welcome': return onWelcome(m);
    case 'keyframe': return onKeyframe(m);
    case 'delta': return onDelta(m);
    case 'cells': return onCells(m);
    case 'event': return onEvent(m);
    case 'command_result': return onResult(m);
    case 'moved': return onMoved(m);
    case 'error':
      if (m.code === 'unauthorized' && m.field === 'resume') {
        // The session expired: the next connection starts a new one.
        own.resume = null;
        return fail(new Error(`session not resumed: ${m.message}`));
      }
      if (m.code === 'forbidden' || m.code === 'unauthorized') {
        showTokenField(true);
        if (token()) {
          // A wrong token closes the connection: retry without it.
          setToken('');
          own.resume = null;
        }
      }
      return fail(new Error(`server: ${m.code}: ${m.message}`));
    default:
  }
}

function onWelcome(w) {
  own.welcome = w;
  own.resume = w.resume_token || null;
  own.quant = w.quantization;
  own.connected = true;
  setConn('live', 'ok');
  worldsAnnounced(w.worlds);
}

/** Unsubscribes from the world shown before (the page shows another). */
export function unsubscribe(worldName) {
  send({ type: 'unsubscribe', request_id: own.nextRid++, world: worldName });
}

/** Another world is shown (or the same one anew): subscribe afresh, and forget its cells if asked. */
export function resetForWorld(forgetCells) {
  if (forgetCells) {
    own.cells.clear();
    own.subCells.clear();
  }
  own.wantCells = '';
  own.lastFrameTick = -1;
  own.tickOffsets = [];
}

// ---- AOI: subscribe to the cells on screen

export function visibleRect() {
  const [x0, y1] = s2w(0, 0);
  const [x1, y0] = s2w(canvas.clientWidth, canvas.clientHeight);
  return { min_x: x0, min_y: y0, max_x: x1, max_y: y1 };
}

function areaForView() {
  const w = selectedWorld();
  const b = w.bounds;
  const v = visibleRect();
  // A margin of a quarter cell so agents entering the view are already streamed.
  const m = w.aoi_cell_size / 4;
  const r = {
    min_x: Math.max(b.min_x, v.min_x - m),
    min_y: Math.max(b.min_y, v.min_y - m),
    max_x: Math.min(b.max_x, v.max_x + m),
    max_y: Math.min(b.max_y, v.max_y + m),
  };
  if (r.min_x >= b.max_x || r.min_y >= b.max_y || r.max_x <= b.min_x || r.max_y <= b.min_y) {
    // Nothing of the world on screen: keep the nearest cell so the stream stays alive.
    r.min_x = r.max_x = Math.min(Math.max(v.min_x, b.min_x), b.max_x);
    r.min_y = r.max_y = Math.min(Math.max(v.min_y, b.min_y), b.max_y);
  }
  const c0 = cellOf(w, r.min_x, r.min_y);
  const c1 = cellOf(w, r.max_x, r.max_y);
  const cells = [];
  for (let row = Math.floor(c0 / w.cols); row <= Math.floor(c1 / w.cols); row++) {
    for (let col = c0 % w.cols; col <= c1 % w.cols; col++) cells.push(row * w.cols + col);
  }
  const whole = cells.length === w.cols * w.rows;
  return { area: whole ? { type: 'whole_world' } : { type: 'rect', ...r }, key: whole ? 'all' : cells.join(',') };
}

let subTimer = 0;
export function updateSubscription(now = false) {
  clearTimeout(subTimer);
  const go = () => {
    const w = selectedWorld();
    if (!w || !own.connected) return;
    const { area, key } = areaForView();
    if (key === own.wantCells) return;
    own.wantCells = key;
    own.lastArea = area;
    own.pendingSub = own.nextRid++;
    send({ type: 'subscribe', request_id: own.pendingSub, world: w.name, area });
  };
  if (now) go();
  else subTimer = setTimeout(go, 120);
}

/** Chain break or bad frame: subscribe again (same area) to get keyframes. */
let resubTimer = 0;
function resubscribe() {
  if (resubTimer || !selectedWorld()) return;
  resubTimer = setTimeout(() => {
    resubTimer = 0;
    own.pendingSub = own.nextRid++;
    send({ type: 'subscribe', request_id: own.pendingSub, world: selectedWorld().name, area: own.lastArea || { type: 'whole_world' } });
  }, 50);
}

function onResult(m) {
  const r = m.result;
  if (r.type === 'subscribed') {
    if (!ofShownWorld(r.world)) return;
    own.subCells = new Set(r.cells);
    setGroupNames(r.groups);
    for (const c of [...own.cells.keys()]) if (!own.subCells.has(c)) own.cells.delete(c);
    const w = selectedWorld();
    $('s-cells').textContent = `${r.cells.length} of ${w.cols * w.rows}`;
    // A paused world publishes nothing, so its keyframes only come with the next tick: show
    // the REST snapshot (quantized exactly like the wire) in the meantime.
    if (isPaused()) setTimeout(fillFromSnapshot, 300);
  } else if (r.type === 'error') {
    fail(new Error(`command ${m.request_id}: ${r.code}: ${r.message}`));
  }
}

export async function fillFromSnapshot() {
  if (!selectedWorld() || !isPaused()) return;
  const missing = [...own.subCells].filter((c) => !own.cells.has(c));
  if (!missing.length) return;
  const w = selectedWorld();
  const snap = await api('GET', wpath('/snapshot'));
  if (selectedWorld() !== w) return;
  const per = new Map(missing.map((c) => [c, []]));
  for (const a of snap.quantized) {
    const list = per.get(cellOf(w, a.pos[0] * own.quant.pos_step, a.pos[1] * own.quant.pos_step));
    if (list) list.push(a);
  }
  for (const [c, list] of per) {
    if (own.cells.has(c)) continue; // a keyframe came meanwhile
    const m = new CellMap(); // tick -1: the next keyframe replaces it, a delta resyncs
    m.agents = list.sort((a, b) => a.id - b.id);
    own.cells.set(c, m);
  }
}

/** A frame that does not fit what we hold: note it and resync (keyframes), without alarm. */
function resync(cell, why) {
  own.chainBreaks++;
  const what = cell === null ? why : `cell ${cell}: ${why}`;
  V.resyncs.push(what);
  console.warn(`steerd viewer: resync: ${what}`);
  resubscribe();
}

function noteFrameTiming(tick) {
  const now = performance.now();
  if (tick < own.lastFrameTick) own.tickOffsets = [];
  if (tick > own.lastFrameTick) {
    // First frame of a new tick: its lateness against the tick schedule. The baseline is the
    // earliest arrival (relative to tick / rate) of the last 3 s, so network delay and clock
    // offset cancel and what remains is how late this tick's frames are (a stalled tick, a
    // slow network or a busy page). A short window forgets time the server dropped.
    const off = now - (tick * 1000) / tickRate();
    own.tickOffsets.push([now, off]);
    while (own.tickOffsets.length && own.tickOffsets[0][0] < now - 3000) own.tickOffsets.shift();
    let base = Infinity;
    for (const [, o] of own.tickOffsets) base = Math.min(base, o);
    const paused = isPaused();
    if (!paused && tick === own.lastFrameTick + 1) own.lateness.push([now, off - base]);
    own.lastFrameTick = tick;
  }
  own.lastTick = Math.max(own.lastTick, tick);
  own.ticksSeen.add(tick);
  if (own.ticksSeen.size > 1000) own.ticksSeen.clear();
}

function onKeyframe(k) {
  if (!ofShownWorld(k.world)) return;
  own.keyframes++;
  V.frames++;
  let cell = own.cells.get(k.cell);
  if (!cell) {
    if (own.subCells.size && !own.subCells.has(k.cell)) return;
    cell = new CellMap();
    own.cells.set(k.cell, cell);
  }
  try {
    cell.keyframe(k);
  } catch (e) {
    resync(k.cell, e.message);
    return;
  }
  own.cellSeen.set(k.cell, performance.now());
  noteFrameTiming(k.tick);
}

function onDelta(d) {
  if (!ofShownWorld(d.world)) return;
  V.frames++;
  const cell = own.cells.get(d.cell);
  if (!cell) return; // not (yet) ours: its keyframe comes first
  noteFrameTiming(d.tick);
  try {
    if (!cell.delta(d, own.quant.predict_num)) {
      // Not chained on what we hold (a skipped frame, or the world was loaded / reset).
      resync(d.cell, `delta ${d.base_tick}→${d.tick} on a cell held at ${cell.tick}`);
      return;
    }
  } catch (e) {
    if (!(e instanceof ProtoError)) throw e;
    resync(d.cell, e.message);
    return;
  }
  own.deltas++;
  own.cellSeen.set(d.cell, performance.now());
}

/** Undo log of the cells message being applied (reused). */
const cellsTxn = new CellsTxn();

/**
 * Protocol v4: a tick's keyframe and delta entries for many cells in one message, applied whole
 * (a chain break, a bad entry or a checksum mismatch leaves every cell as it was, and resyncs).
 */
function onCells(m) {
  if (!ofShownWorld(m.world)) return;
  V.frames++;
  noteFrameTiming(m.tick);
  const why = applyCells(own.cells, m, selectedWorld(), own.quant.predict_num, own.subCells.size ? own.subCells : null, cellsTxn);
  if (why !== null) {
    resync(null, why);
    return;
  }
  const now = performance.now();
  for (const e of m.entries) {
    const c = e.keyframe ? e.keyframe.cell : e.delta.cell;
    if (!own.cells.has(c)) continue;
    if (e.keyframe) {
      own.keyframes++;
    } else {
      own.deltas++;
    }
    own.cellSeen.set(c, now);
  }
}

function onEvent(m) {
  if (!ofShownWorld(m.world)) return;
  const e = m.event;
  if (e.type === 'destination_reached') {
    V.destinationReached++;
    V.arrived.push(e.agent);
    noteArrived(e.agent);
    logEvent(`agent <b>${e.agent}</b> reached its destination`, 'arrive', m.tick);
    updateSelectionText();
  } else if (e.type === 'gave_up' || e.type === 'unreachable') {
    V.stoppedShortEvents++;
    stoppedShort(e.type, e.agent, e.distance);
    const why = e.type === 'gave_up' ? 'gave up' : 'cannot reach its target and stopped';
    logEvent(`agent <b>${e.agent}</b> ${why}, ${e.distance.toFixed(1)} short`, 'err', m.tick);
  } else if (e.type === 'path_completed') {
    logEvent(`agent <b>${e.agent}</b> completed its path`, '', m.tick);
  } else if (e.type === 'spawned') {
    logEvent(`<b>${e.agents.length}</b> agents spawned in ${escapeHtml(e.group)}`, '', m.tick);
  } else if (e.type === 'despawned') {
    logEvent(`<b>${e.agents.length}</b> agents despawned`, '', m.tick);
  } else if (e.type === 'target_lost') {
    logEvent(`agent <b>${e.agent}</b> lost sight of its target <b>${e.target}</b>`, '', m.tick);
  } else if (e.type === 'groups') {
    setGroupNames(e.groups);
  } else if (e.type === 'tick_rate') {
    setTickRate(e.tick_rate_hz);
    logEvent(`the world now runs at <b>${e.tick_rate_hz}</b> ticks per second`, '', m.tick);
  }
}

// ---------------------------------------------------------------------------------------------
// Agents

export function allAgents() {
  const out = [];
  for (const c of own.cells.values()) for (const a of c.agents) out.push(a);
  return out;
}

export function toWorld(a) {
  const ps = own.quant.pos_step;
  const vs = own.quant.vel_step;
  return { id: a.id, group: a.group, x: a.pos[0] * ps, y: a.pos[1] * ps, vx: a.vel[0] * vs, vy: a.vel[1] * vs, angle: (a.orient * Math.PI * 2) / 65536 };
}
