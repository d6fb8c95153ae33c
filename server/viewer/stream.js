// The WebSocket stream: connect and resume, subscribe to the cells on screen (AOI), apply
// keyframes, deltas and cell batches through the SDK, and the agents held from them.

import { decodeServer, encodeClient, helloMessage, CellMap, CellsTxn, applyCells, cellOf, ProtoError } from './sdk/index.js';
import { $, canvas, S, V } from './state.js';
import { api, wpath, fail, showTokenField, toast } from './rest.js';
import { selectedWorld, tickRate, isPaused, setGroupNames, setTickRate, preferWorld, worldsAnnounced } from './world.js';
import { s2w } from './view.js';
import { updateSelectionText, noteArrived } from './input.js';
import { escapeHtml, logEvent } from './status.js';
import { stoppedShort } from './stuck.js';

/** The stream's own state (no other module reads it; what they share is in `S`). */
const own = {
  wantCells: '', // key of the cell set last requested
  pendingSub: null, // request id of an unanswered Subscribe
  lastArea: null, // the area of the last Subscribe (a resync asks for it again)
  deltas: 0,
  tickOffsets: [], // [t, arrival - tick/rate] for the lateness baseline
  lastFrameTick: -1,
  lastTick: 0,
  ticksSeen: new Set(),
};

// A page opened by following a moved world (`moved`, below) carries the session's resume token
// in its fragment: taken once and removed from the address (it never reaches a server in a
// request, and a reload or a copied link does not carry it on).
// The fragment also names the world that moved, which the page notes (`V.moved`) and says.
{
  const carried = new URLSearchParams(location.hash.slice(1));
  if (carried.has('resume') || carried.has('moved')) {
    S.resume = carried.get('resume') || null;
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
  if (S.ws) {
    S.ws.onclose = null;
    S.ws.close();
  }
  V.connected = false;
  setConn('connecting', 'warn');
  const url = ownWsUrl();
  const ws = new WebSocket(url);
  ws.binaryType = 'arraybuffer';
  S.ws = ws;
  ws.onopen = () => {
    // After a drop, resume the session: same player, so the agents this page
    // spawned stay commandable.
    send(helloMessage({ token: S.token || null, encoding: 'binary', resume: S.resume }));
  };
  ws.onmessage = (ev) => {
    if (!(ev.data instanceof ArrayBuffer)) return;
    S.bytes += ev.data.byteLength;
    S.bytesWindow.push([performance.now(), ev.data.byteLength]);
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
    V.connected = false;
    setConn(`closed${ev.code ? ` (${ev.code})` : ''}`, 'bad');
    if (S.ws === ws) setTimeout(connect, 1500);
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
  if (S.resume) carry.set('resume', S.resume);
  if (S.ws) {
    S.ws.onclose = null;
    S.ws.close();
  }
  location.assign(`${origin}/?world=${encodeURIComponent(m.name)}#${carry}`);
}

function setConn(text, cls) {
  const c = $('conn');
  c.textContent = text;
  c.className = `pill ${cls}`;
  S.wsState = text;
}

export function send(msg) {
  if (S.ws && S.ws.readyState === WebSocket.OPEN) S.ws.send(encodeClient(msg));
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
        S.resume = null;
        return fail(new Error(`session not resumed: ${m.message}`));
      }
      if (m.code === 'forbidden' || m.code === 'unauthorized') {
        showTokenField(true);
        if (S.token) {
          // A wrong token closes the connection: retry without it.
          S.token = '';
          S.resume = null;
          sessionStorage.removeItem('steerd-token');
        }
      }
      return fail(new Error(`server: ${m.code}: ${m.message}`));
    default:
  }
}

function onWelcome(w) {
  S.welcome = w;
  S.resume = w.resume_token || null;
  S.quant = w.quantization;
  V.connected = true;
  setConn('live', 'ok');
  worldsAnnounced(w.worlds);
}

/** Unsubscribes from the world shown before (the page shows another). */
export function unsubscribe(worldName) {
  send({ type: 'unsubscribe', request_id: S.nextRid++, world: worldName });
}

/** Another world is shown (or the same one anew): subscribe afresh, and forget its cells if asked. */
export function resetForWorld(forgetCells) {
  if (forgetCells) {
    S.cells.clear();
    S.subCells.clear();
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
    if (!w || !V.connected) return;
    const { area, key } = areaForView();
    if (key === own.wantCells) return;
    own.wantCells = key;
    own.lastArea = area;
    own.pendingSub = S.nextRid++;
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
    own.pendingSub = S.nextRid++;
    send({ type: 'subscribe', request_id: own.pendingSub, world: selectedWorld().name, area: own.lastArea || { type: 'whole_world' } });
  }, 50);
}

function onResult(m) {
  const r = m.result;
  if (r.type === 'subscribed') {
    if (!ofShownWorld(r.world)) return;
    S.subCells = new Set(r.cells);
    setGroupNames(r.groups);
    for (const c of [...S.cells.keys()]) if (!S.subCells.has(c)) S.cells.delete(c);
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
  const missing = [...S.subCells].filter((c) => !S.cells.has(c));
  if (!missing.length) return;
  const w = selectedWorld();
  const snap = await api('GET', wpath('/snapshot'));
  if (selectedWorld() !== w) return;
  const per = new Map(missing.map((c) => [c, []]));
  for (const a of snap.quantized) {
    const list = per.get(cellOf(w, a.pos[0] * S.quant.pos_step, a.pos[1] * S.quant.pos_step));
    if (list) list.push(a);
  }
  for (const [c, list] of per) {
    if (S.cells.has(c)) continue; // a keyframe came meanwhile
    const m = new CellMap(); // tick -1: the next keyframe replaces it, a delta resyncs
    m.agents = list.sort((a, b) => a.id - b.id);
    S.cells.set(c, m);
  }
}

/** A frame that does not fit what we hold: note it and resync (keyframes), without alarm. */
function resync(cell, why) {
  S.chainBreaks++;
  V.chainBreaks++;
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
    if (!paused && tick === own.lastFrameTick + 1) S.lateness.push([now, off - base]);
    own.lastFrameTick = tick;
  }
  own.lastTick = Math.max(own.lastTick, tick);
  own.ticksSeen.add(tick);
  if (own.ticksSeen.size > 1000) own.ticksSeen.clear();
  V.tick = own.lastTick;
}

function onKeyframe(k) {
  if (!ofShownWorld(k.world)) return;
  S.keyframes++;
  V.keyframes++;
  V.frames++;
  let cell = S.cells.get(k.cell);
  if (!cell) {
    if (S.subCells.size && !S.subCells.has(k.cell)) return;
    cell = new CellMap();
    S.cells.set(k.cell, cell);
  }
  try {
    cell.keyframe(k);
  } catch (e) {
    resync(k.cell, e.message);
    return;
  }
  S.cellSeen.set(k.cell, performance.now());
  noteFrameTiming(k.tick);
}

function onDelta(d) {
  if (!ofShownWorld(d.world)) return;
  V.frames++;
  const cell = S.cells.get(d.cell);
  if (!cell) return; // not (yet) ours: its keyframe comes first
  noteFrameTiming(d.tick);
  try {
    if (!cell.delta(d, S.quant.predict_num)) {
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
  V.deltas++;
  S.cellSeen.set(d.cell, performance.now());
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
  const why = applyCells(S.cells, m, selectedWorld(), S.quant.predict_num, S.subCells.size ? S.subCells : null, cellsTxn);
  if (why !== null) {
    resync(null, why);
    return;
  }
  const now = performance.now();
  for (const e of m.entries) {
    const c = e.keyframe ? e.keyframe.cell : e.delta.cell;
    if (!S.cells.has(c)) continue;
    if (e.keyframe) {
      S.keyframes++;
      V.keyframes++;
    } else {
      own.deltas++;
      V.deltas++;
    }
    S.cellSeen.set(c, now);
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
  for (const c of S.cells.values()) for (const a of c.agents) out.push(a);
  return out;
}

export function toWorld(a) {
  const ps = S.quant.pos_step;
  const vs = S.quant.vel_step;
  return { id: a.id, group: a.group, x: a.pos[0] * ps, y: a.pos[1] * ps, vx: a.vel[0] * vs, vy: a.vel[1] * vs, angle: (a.orient * Math.PI * 2) / 65536 };
}
