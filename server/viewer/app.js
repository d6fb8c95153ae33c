// steerd live viewer: binary WebSocket stream (decoded by the TypeScript SDK, sdk/) + REST for
// world control.
// Plain ES module, no dependencies, served by steerd itself (GET /, /viewer/*).

import { decodeServer, encodeClient, helloMessage, CellMap, CellsTxn, applyCells, cellOf, ProtoError } from './sdk/index.js';
import { initPlayers } from './players.js';

const $ = (id) => document.getElementById(id);
const canvas = $('canvas');
const ctx = canvas.getContext('2d');

const PALETTE = ['#4fa3ff', '#ff7a59', '#5fd38d', '#f5c542', '#c37cff', '#3fd0d4', '#ff5fa2', '#a3b1c6', '#9bd651', '#ff9f40'];
const groupColor = (g) => PALETTE[g % PALETTE.length];

// ---------------------------------------------------------------------------------------------
// State

const S = {
  token: sessionStorage.getItem('steerd-token') || '',
  needsToken: false,
  ws: null,
  wsState: 'connecting',
  welcome: null,
  /** Welcome.resume_token: sent in the next Hello to resume the session. */
  resume: null,
  quant: { pos_step: 0.01, vel_step: 0.1, predict_num: 32768 },
  tickRate: 20,
  worlds: [], // WorldInfo from Welcome
  world: null, // selected WorldInfo
  worldName: new URLSearchParams(location.search).get('world') || '',
  /** A replay world's timeline (null for a live world), and a scrub in progress. */
  replay: null,
  scrubbing: false,
  restInfo: null, // GET /worlds/{w}
  cells: new Map(), // cell -> CellMap
  cellSeen: new Map(), // cell -> performance.now() of the last applied frame
  subCells: new Set(), // cells of the current subscription (Subscribed answer)
  wantCells: '', // key of the cell set last requested
  pendingSub: null, // request id of an unanswered Subscribe
  nextRid: 1,
  obstacles: [],
  walls: [],
  groupNames: new Map(), // group index -> name
  neighborRadius: new Map(), // group name -> radius (from the scenario)
  agentRadius: new Map(), // group index -> body radius
  selection: new Set(),
  arrivedAt: new Map(), // agent id -> performance.now() of DestinationReached
  moveTarget: null, // {x, y, t}
  view: { cx: 0, cy: 0, scale: 2 }, // world point at the canvas centre, pixels per world unit
  fitted: false,
  tool: 'select',
  drag: null,
  hoverObstacle: null,
  mouse: null,
  // Status counters
  bytes: 0,
  bytesWindow: [], // [t, bytes]
  keyframes: 0,
  deltas: 0,
  chainBreaks: 0,
  lateness: [], // [t, ms]
  tickOffsets: [], // [t, arrival - tick/rate] for the lateness baseline
  lastFrameTick: -1,
  lastTick: 0,
  ticksSeen: new Set(),
  metrics: null,
  prevMetrics: null,
  flow: null, // GET /worlds/{w}/flowfield answer for the selection's first agent
  flowBusy: false,
  avoid: null, // GET /worlds/{w}/agents/{id}/avoidance answer for the selection's first agent
  avoidBusy: false,
};

// What the browser test (and a curious person in the console) can read.
const V = {
  ready: false,
  connected: false,
  world: null,
  tick: 0,
  frames: 0,
  keyframes: 0,
  deltas: 0,
  chainBreaks: 0,
  resyncs: [],
  destinationReached: 0,
  arrived: [],
  moveToSent: 0,
  moveToAgents: [],
  obstaclesPlaced: 0,
  /** The flow-field overlay: the last answer ({status, goal, angles, …}) and arrows drawn. */
  get flow() { return S.flow; },
  flowArrows: 0,
  /** The avoidance overlays: the last answer, how many fetches, and what the last frame drew. */
  get avoid() { return S.avoid; },
  avoidFetches: 0,
  avoidDrawn: { planes: 0, arrows: 0 },
  errors: [],
  /** The replay world's timeline (GET /worlds/{w}/replay), null for a live world. */
  get replay() { return S.replay; },
  replaySeeks: 0,
  /** Welcome.player_id of the stream's session (kept across a drop: the page resumes it). */
  get player() { return S.welcome ? S.welcome.player_id : null; },
  /** Closes the stream as a network failure would (the page reconnects and resumes). */
  dropSocket() { if (S.ws) S.ws.close(4000, 'dropped by the page'); },
  get selection() { return [...S.selection]; },
  get obstacles() { return S.obstacles.slice(); },
  get subscribedCells() { return [...S.subCells]; },
  /** Every agent held, in world units: {id, group, x, y, vx, vy, angle}. */
  agents() { return allAgents().map(toWorld); },
  worldToScreen(x, y) { const [sx, sy] = w2s(x, y); const r = canvas.getBoundingClientRect(); return { x: r.left + sx, y: r.top + sy }; },
  screenToWorld(x, y) { const r = canvas.getBoundingClientRect(); const [wx, wy] = s2w(x - r.left, y - r.top); return { x: wx, y: wy }; },
  viewRect() { return visibleRect(); },
  /** Centres the view on a world point at `scale` pixels per unit (for tests and screenshots). */
  lookAt(x, y, scale) { S.view = { cx: x, cy: y, scale: scale || S.view.scale }; S.fitted = true; updateSubscription(); },
};
window.viewer = V;

// ---------------------------------------------------------------------------------------------
// REST

async function api(method, path, body) {
  const headers = {};
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (S.token) headers.Authorization = `Bearer ${S.token}`;
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!r.ok) {
    if (r.status === 401 || r.status === 403) showTokenField(true);
    const msg = data && data.message ? data.message : `${r.status} ${r.statusText}`;
    const err = new Error(`${method} ${path}: ${msg}`);
    err.status = r.status;
    throw err;
  }
  return data;
}

const wpath = (suffix = '') => `/worlds/${encodeURIComponent(S.world.name)}${suffix}`;

function fail(e) {
  console.error(e);
  V.errors.push(String(e.message || e));
  toast(String(e.message || e));
  logEvent(String(e.message || e), 'err');
}

let toastTimer = 0;
function toast(text, info = false) {
  const t = $('toast');
  t.textContent = text;
  t.className = info ? 'info' : '';
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, info ? 2000 : 5000);
}

function showTokenField(needed) {
  S.needsToken = S.needsToken || needed;
  $('token-box').hidden = !S.needsToken && !S.token;
  if (needed && !S.token) $('token').focus();
}

// ---------------------------------------------------------------------------------------------
// WebSocket

function connect() {
  if (S.ws) {
    S.ws.onclose = null;
    S.ws.close();
  }
  V.connected = false;
  setConn('connecting', 'warn');
  const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/ws`;
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

function setConn(text, cls) {
  const c = $('conn');
  c.textContent = text;
  c.className = `pill ${cls}`;
  S.wsState = text;
}

function send(msg) {
  if (S.ws && S.ws.readyState === WebSocket.OPEN) S.ws.send(encodeClient(msg));
}

function onMessage(m) {
  switch (m.type) {
    case 'welcome': return onWelcome(m);
    case 'keyframe': return onKeyframe(m);
    case 'delta': return onDelta(m);
    case 'cells': return onCells(m);
    case 'event': return onEvent(m);
    case 'command_result': return onResult(m);
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
  S.tickRate = w.tick_rate_hz;
  S.worlds = w.worlds;
  V.connected = true;
  setConn('live', 'ok');
  const sel = $('world');
  sel.replaceChildren(...w.worlds.map((wi) => new Option(wi.name, wi.name)));
  const pick = w.worlds.find((x) => x.name === (S.world ? S.world.name : S.worldName)) || w.worlds.find((x) => x.name === 'demo') || w.worlds[0];
  if (pick) selectWorld(pick.name, true);
}

async function selectWorld(name, fromWelcome = false) {
  const info = S.worlds.find((w) => w.name === name);
  if (!info) return;
  const changed = !S.world || S.world.name !== name || S.world.id !== info.id;
  if (S.world && changed && !fromWelcome) send({ type: 'unsubscribe', request_id: S.nextRid++, world: S.world.name });
  const gridChanged = !S.world || JSON.stringify(S.world) !== JSON.stringify(info);
  S.world = info;
  V.world = name;
  $('world').value = name;
  if (changed || gridChanged) {
    S.cells.clear();
    S.subCells.clear();
    S.selection.clear();
    S.groupNames.clear();
    S.fitted = false;
  }
  S.wantCells = '';
  S.lastFrameTick = -1;
  S.tickOffsets = [];
  if (!S.fitted) fit();
  updateSubscription(true);
  await Promise.all([refreshWorld(), refreshShapes()]).catch(fail);
  await refreshScenarios().catch(fail);
  refreshGroups().catch(() => {});
  V.ready = true;
}

// ---- AOI: subscribe to the cells on screen

function visibleRect() {
  const [x0, y1] = s2w(0, 0);
  const [x1, y0] = s2w(canvas.clientWidth, canvas.clientHeight);
  return { min_x: x0, min_y: y0, max_x: x1, max_y: y1 };
}

function areaForView() {
  const w = S.world;
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
function updateSubscription(now = false) {
  clearTimeout(subTimer);
  const go = () => {
    if (!S.world || !V.connected) return;
    const { area, key } = areaForView();
    if (key === S.wantCells) return;
    S.wantCells = key;
    S.lastArea = area;
    S.pendingSub = S.nextRid++;
    send({ type: 'subscribe', request_id: S.pendingSub, world: S.world.name, area });
  };
  if (now) go();
  else subTimer = setTimeout(go, 120);
}

/** Chain break or bad frame: subscribe again (same area) to get keyframes. */
let resubTimer = 0;
function resubscribe() {
  if (resubTimer || !S.world) return;
  resubTimer = setTimeout(() => {
    resubTimer = 0;
    S.pendingSub = S.nextRid++;
    send({ type: 'subscribe', request_id: S.pendingSub, world: S.world.name, area: S.lastArea || { type: 'whole_world' } });
  }, 50);
}

function onResult(m) {
  const r = m.result;
  if (r.type === 'subscribed') {
    if (!S.world || r.world !== S.world.id) return;
    S.subCells = new Set(r.cells);
    for (const c of [...S.cells.keys()]) if (!S.subCells.has(c)) S.cells.delete(c);
    $('s-cells').textContent = `${r.cells.length} of ${S.world.cols * S.world.rows}`;
    // A paused world publishes nothing, so its keyframes only come with the next tick: show
    // the REST snapshot (quantized exactly like the wire) in the meantime.
    if (S.restInfo && S.restInfo.paused) setTimeout(fillFromSnapshot, 300);
  } else if (r.type === 'error') {
    fail(new Error(`command ${m.request_id}: ${r.code}: ${r.message}`));
  }
}

async function fillFromSnapshot() {
  if (!S.world || !S.restInfo || !S.restInfo.paused) return;
  const missing = [...S.subCells].filter((c) => !S.cells.has(c));
  if (!missing.length) return;
  const w = S.world;
  const snap = await api('GET', wpath('/snapshot'));
  if (S.world !== w) return;
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
  if (tick < S.lastFrameTick) S.tickOffsets = [];
  if (tick > S.lastFrameTick) {
    // First frame of a new tick: its lateness against the tick schedule. The baseline is the
    // earliest arrival (relative to tick / rate) of the last 3 s, so network delay and clock
    // offset cancel and what remains is how late this tick's frames are (a stalled tick, a
    // slow network or a busy page). A short window forgets time the server dropped.
    const off = now - (tick * 1000) / S.tickRate;
    S.tickOffsets.push([now, off]);
    while (S.tickOffsets.length && S.tickOffsets[0][0] < now - 3000) S.tickOffsets.shift();
    let base = Infinity;
    for (const [, o] of S.tickOffsets) base = Math.min(base, o);
    const paused = S.restInfo && S.restInfo.paused;
    if (!paused && tick === S.lastFrameTick + 1) S.lateness.push([now, off - base]);
    S.lastFrameTick = tick;
  }
  S.lastTick = Math.max(S.lastTick, tick);
  S.ticksSeen.add(tick);
  if (S.ticksSeen.size > 1000) S.ticksSeen.clear();
  V.tick = S.lastTick;
}

function onKeyframe(k) {
  if (!S.world || k.world !== S.world.id) return;
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
  if (!S.world || d.world !== S.world.id) return;
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
  S.deltas++;
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
  if (!S.world || m.world !== S.world.id) return;
  V.frames++;
  noteFrameTiming(m.tick);
  const why = applyCells(S.cells, m, S.world, S.quant.predict_num, S.subCells.size ? S.subCells : null, cellsTxn);
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
      S.deltas++;
      V.deltas++;
    }
    S.cellSeen.set(c, now);
  }
}

function onEvent(m) {
  if (!S.world || m.world !== S.world.id) return;
  const e = m.event;
  if (e.type === 'destination_reached') {
    V.destinationReached++;
    V.arrived.push(e.agent);
    S.arrivedAt.set(e.agent, performance.now());
    logEvent(`agent <b>${e.agent}</b> reached its destination`, 'arrive', m.tick);
    updateSelectionText();
  } else if (e.type === 'path_completed') {
    logEvent(`agent <b>${e.agent}</b> completed its path`, '', m.tick);
  } else if (e.type === 'spawned') {
    logEvent(`<b>${e.agents.length}</b> agents spawned in ${escapeHtml(e.group)}`, '', m.tick);
  } else if (e.type === 'despawned') {
    logEvent(`<b>${e.agents.length}</b> agents despawned`, '', m.tick);
  }
}

// ---------------------------------------------------------------------------------------------
// Agents

function allAgents() {
  const out = [];
  for (const c of S.cells.values()) for (const a of c.agents) out.push(a);
  return out;
}

function toWorld(a) {
  const ps = S.quant.pos_step;
  const vs = S.quant.vel_step;
  return { id: a.id, group: a.group, x: a.pos[0] * ps, y: a.pos[1] * ps, vx: a.vel[0] * vs, vy: a.vel[1] * vs, angle: (a.orient * Math.PI * 2) / 65536 };
}

// ---------------------------------------------------------------------------------------------
// REST-backed state: world info, obstacles, walls, scenarios, group names

async function refreshWorld() {
  if (!S.world) return;
  const name = S.world.name;
  const info = await api('GET', wpath());
  if (!S.world || S.world.name !== name) return;
  const prevScenario = S.restInfo && S.restInfo.scenario;
  const reloaded = S.restInfo && S.restInfo.name === info.name && (info.tick < S.restInfo.tick || info.scenario !== prevScenario);
  S.restInfo = info;
  updateTimeline(info.replay);
  const p = $('pause');
  p.textContent = info.paused ? 'Resume' : 'Pause';
  p.classList.toggle('on', info.paused);
  $('s-tick').textContent = `${info.tick}${info.paused ? ' (paused)' : ''}`;
  $('s-agents').textContent = `${info.agents} (${allAgents().length} streamed)`;
  if (info.paused) fillFromSnapshot().catch(() => {});
  if (reloaded) {
    // Someone loaded or reset the world: its grid may have changed (Welcome carries it).
    refreshShapes().catch(() => {});
    refreshGroups().catch(() => {});
    connect();
  }
}

async function refreshShapes() {
  if (!S.world) return;
  const [obs, walls] = await Promise.all([api('GET', wpath('/obstacles')), api('GET', wpath('/walls'))]);
  S.obstacles = obs;
  S.walls = walls;
}

async function refreshScenarios() {
  const list = await api('GET', '/scenarios');
  const sel = $('scenario');
  const cur = (S.restInfo && S.restInfo.scenario) || sel.value || '';
  sel.replaceChildren(...list.map((s) => new Option(`${s.name} (${s.origin})`, s.name)));
  if (list.some((s) => s.name === cur)) sel.value = cur;
}

async function refreshGroups() {
  if (!S.world) return;
  // Group names are not on the wire (only indices): match agent ids with the REST view.
  const agents = await api('GET', wpath('/agents?limit=2000'));
  const held = new Map(allAgents().map((a) => [a.id, a.group]));
  for (const a of agents) {
    const g = held.get(a.id);
    if (g !== undefined) {
      S.groupNames.set(g, a.group);
      S.agentRadius.set(g, a.radius);
    }
  }
  const scen = S.restInfo && S.restInfo.scenario;
  if (scen) {
    try {
      const sc = await api('GET', `/scenarios/${encodeURIComponent(scen)}`);
      for (const g of sc.groups || []) {
        let r = 0;
        for (const e of g.behaviors || []) {
          const b = e.behavior || {};
          if (['separation', 'cohesion', 'alignment'].includes(b.type)) r = Math.max(r, b.neighbor_radius ?? 3);
        }
        if (r > 0) S.neighborRadius.set(g.name, r);
      }
    } catch {
      // The scenario may be gone; the overlay falls back to the default radius.
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Commands

async function togglePause() {
  if (!S.restInfo) return;
  try {
    S.restInfo = await api('PATCH', wpath(), { paused: !S.restInfo.paused });
    await refreshWorld();
  } catch (e) { fail(e); }
}

async function step() {
  const n = Math.max(1, Math.min(10000, parseInt($('step-n').value, 10) || 1));
  try {
    await api('POST', wpath('/step'), { ticks: n });
    await refreshWorld();
  } catch (e) { fail(e); }
}

async function moveTo(x, y) {
  const agents = [...S.selection];
  if (!agents.length) return;
  S.moveTarget = { x, y, t: performance.now() };
  for (const id of agents) S.arrivedAt.delete(id);
  S.moveAgents = new Set(agents);
  try {
    await api('POST', wpath('/move-to'), { agents, target: { x, y }, stopping_distance: 0 });
    V.moveToSent++;
    V.moveToAgents = agents;
    logEvent(`move <b>${agents.length}</b> agents to (${x.toFixed(1)}, ${y.toFixed(1)})`, '');
    updateSelectionText();
  } catch (e) { fail(e); }
}

/** Fetches the flow field of the first selected agent's MoveTo (when the overlay is on). */
async function refreshFlow() {
  if (!$('ov-flow').checked || !S.world || !S.selection.size || S.flowBusy) {
    if (!$('ov-flow').checked || !S.selection.size) { S.flow = null; $('flow-status').textContent = ''; }
    return;
  }
  const agent = Math.min(...S.selection);
  S.flowBusy = true;
  try {
    S.flow = await api('GET', wpath(`/flowfield?agent=${agent}&max_side=64`));
    const why = {
      ready: `agent ${agent}: following a flow field`,
      pending: `agent ${agent}: field requested, heading straight meanwhile`,
      straight: `agent ${agent}: sees its goal, no field needed`,
      no_order: `agent ${agent}: no MoveTo order`,
    };
    $('flow-status').textContent = why[S.flow.status] || S.flow.status;
  } catch (e) {
    S.flow = null;
    $('flow-status').textContent = String(e.message || e);
  } finally {
    S.flowBusy = false;
  }
}

/** True when an avoidance overlay is on and an agent is selected (only then is it polled). */
function avoidWanted() {
  return ($('ov-vo').checked || $('ov-pvc').checked) && !!S.world && S.selection.size > 0;
}

/** Fetches what reciprocal avoidance sees for the first selected agent (5 Hz while wanted). */
async function refreshAvoidance() {
  if (!avoidWanted()) {
    if (S.avoid) { S.avoid = null; $('avoid-status').textContent = ''; }
    return;
  }
  if (S.avoidBusy) return;
  const agent = Math.min(...S.selection);
  S.avoidBusy = true;
  try {
    V.avoidFetches++;
    const a = await api('GET', wpath(`/agents/${agent}/avoidance`));
    if (!avoidWanted()) return; // switched off meanwhile
    S.avoid = a;
    const nStatic = a.half_planes.filter((h) => h.static).length;
    const speed = (v) => Math.hypot(v.x, v.y).toFixed(2);
    $('avoid-status').textContent = `agent ${agent}: ${a.active ? 'avoids reciprocally' : 'does not avoid reciprocally (default parameters shown)'} · `
      + `${a.half_planes.length - nStatic} neighbour + ${nStatic} static half-planes`
      + `${permittedPolygon(a.half_planes, a.max_speed).length ? '' : ' (none leaves room: least violation chosen)'}`
      + ` · preferred ${speed(a.preferred)} (${a.preferred_source}), chosen ${speed(a.chosen)} u/s`;
  } catch (e) {
    S.avoid = null;
    $('avoid-status').textContent = String(e.message || e);
  } finally {
    S.avoidBusy = false;
  }
}

/**
 * The velocities every half-plane permits within the max-speed disc (a 48-gon), as a polygon
 * in velocity space (Sutherland–Hodgman clipping); empty when none does (a jam: the solver
 * then picks the least violation).
 */
function permittedPolygon(planes, maxSpeed) {
  let poly = [];
  for (let i = 0; i < 48; i++) {
    const t = (i / 48) * Math.PI * 2;
    poly.push({ x: maxSpeed * Math.cos(t), y: maxSpeed * Math.sin(t) });
  }
  // Permitted: det(direction, point − v) ≤ 0, i.e. left of the directed line.
  const side = (h, v) => h.direction.x * (h.point.y - v.y) - h.direction.y * (h.point.x - v.x);
  for (const h of planes) {
    const out = [];
    for (let i = 0; i < poly.length; i++) {
      const a = poly[i];
      const b = poly[(i + 1) % poly.length];
      const sa = side(h, a);
      const sb = side(h, b);
      if (sa <= 0) out.push(a);
      if ((sa <= 0) !== (sb <= 0)) {
        const t = sa / (sa - sb);
        out.push({ x: a.x + (b.x - a.x) * t, y: a.y + (b.y - a.y) * t });
      }
    }
    poly = out;
    if (!poly.length) break;
  }
  return poly;
}

/** An arrow from (x0, y0) to (x1, y1) in screen pixels. */
function arrow(x0, y0, x1, y1, color, width, dash = []) {
  const len = Math.hypot(x1 - x0, y1 - y0);
  if (len < 0.5) return false;
  const back = Math.atan2(y1 - y0, x1 - x0) + Math.PI;
  const h = Math.min(10, Math.max(4, 0.25 * len));
  ctx.strokeStyle = color;
  ctx.lineWidth = width;
  ctx.setLineDash(dash);
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  ctx.lineTo(x1, y1);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.beginPath();
  ctx.moveTo(x1, y1);
  ctx.lineTo(x1 + h * Math.cos(back + 0.45), y1 + h * Math.sin(back + 0.45));
  ctx.moveTo(x1, y1);
  ctx.lineTo(x1 + h * Math.cos(back - 0.45), y1 + h * Math.sin(back - 0.45));
  ctx.stroke();
  return true;
}

/**
 * The avoidance overlays of the selected agent, in velocity space centred on the agent: a
 * velocity v is drawn at the agent's position + v · vsc pixels (vsc: max speed ↦ at least 80 px,
 * 1 s of travel when zoomed in). "velocity obstacle": the dashed max-speed circle, each
 * half-plane's boundary with its forbidden side faintly shaded (red: neighbours, grey: obstacles
 * and walls), and the permitted velocities (what all half-planes leave of the max-speed disc)
 * in green.
 * "preferred vs chosen": two arrows, preferred (dashed blue) and chosen (green).
 */
function drawAvoidance(sc, layer) {
  const a = S.avoid;
  const drawn = layer === 'planes' ? { planes: 0, arrows: 0, permitted: 0 } : V.avoidDrawn;
  V.avoidDrawn = drawn;
  if (!a || !avoidWanted() || !S.selection.has(a.agent)) return;
  // Where the agent is drawn now (the stream), else where the answer says it was.
  const live = allAgents().find((q) => q.id === a.agent);
  const [cx, cy] = live ? w2s(live.pos[0] * S.quant.pos_step, live.pos[1] * S.quant.pos_step) : w2s(a.position.x, a.position.y);
  const ms = Math.max(a.max_speed, 1e-3);
  const vsc = Math.max(sc, 80 / ms);
  const at = (v) => [cx + v.x * vsc, cy - v.y * vsc]; // screen y grows downwards
  if (layer === 'planes' && $('ov-vo').checked) {
    const reach = 1.6 * ms * vsc; // pixels of velocity space shown
    ctx.save();
    ctx.beginPath();
    ctx.arc(cx, cy, reach, 0, Math.PI * 2);
    ctx.fillStyle = 'rgba(15,18,22,.35)';
    ctx.fill();
    ctx.clip();
    const far = 4 * reach;
    for (const h of a.half_planes) {
      const [px, py] = at(h.point);
      const dx = h.direction.x;
      const dy = -h.direction.y;
      // Permitted: left of the direction in velocity space, i.e. right of it on screen (y flipped).
      const nx = dy;
      const ny = -dx;
      const [ax, ay] = [px - dx * far, py - dy * far];
      const [bx, by] = [px + dx * far, py + dy * far];
      ctx.beginPath();
      ctx.moveTo(ax, ay);
      ctx.lineTo(bx, by);
      ctx.lineTo(bx - nx * far, by - ny * far);
      ctx.lineTo(ax - nx * far, ay - ny * far);
      ctx.closePath();
      ctx.fillStyle = h.static ? 'rgba(160,170,190,.05)' : 'rgba(255,90,90,.05)';
      ctx.fill();
      ctx.beginPath();
      ctx.moveTo(ax, ay);
      ctx.lineTo(bx, by);
      ctx.strokeStyle = h.static ? 'rgba(190,198,214,.8)' : 'rgba(255,110,110,.85)';
      ctx.lineWidth = 1.2;
      ctx.stroke();
      drawn.planes++;
    }
    ctx.restore();
    // What is left: the velocities avoidance may choose from.
    const poly = permittedPolygon(a.half_planes, ms);
    if (poly.length) {
      ctx.beginPath();
      poly.forEach((v, i) => { const [x, y] = at(v); if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y); });
      ctx.closePath();
      ctx.fillStyle = 'rgba(95,211,141,.28)';
      ctx.fill();
      ctx.strokeStyle = 'rgba(95,211,141,.9)';
      ctx.lineWidth = 1;
      ctx.stroke();
    }
    drawn.permitted = poly.length;
    ctx.beginPath();
    ctx.arc(cx, cy, ms * vsc, 0, Math.PI * 2);
    ctx.setLineDash([3, 4]);
    ctx.strokeStyle = 'rgba(255,255,255,.45)';
    ctx.lineWidth = 1;
    ctx.stroke();
    ctx.setLineDash([]);
  }
  if (layer === 'arrows' && $('ov-pvc').checked) {
    const [px, py] = at(a.preferred);
    const [qx, qy] = at(a.chosen);
    if (arrow(cx, cy, px, py, '#6fb3ff', 2, [5, 3])) drawn.arrows++;
    if (arrow(cx, cy, qx, qy, '#5fd38d', 2)) drawn.arrows++;
    ctx.font = '11px system-ui, sans-serif';
    ctx.fillStyle = '#6fb3ff';
    ctx.textAlign = 'right';
    ctx.fillText('preferred', px - 6, py - 4);
    ctx.textAlign = 'left';
    ctx.fillStyle = '#5fd38d';
    ctx.fillText('chosen', qx + 6, qy + 12);
  }
}

function drawFlow(sc) {
  const f = S.flow;
  if (!f || !$('ov-flow').checked) return;
  let arrows = 0;
  if (f.status === 'ready') {
    const len = 0.38 * f.spacing * sc;
    const step = len < 3 ? Math.ceil(3 / Math.max(len, 0.1)) : 1; // thin out when zoomed far out
    const v = visibleRect();
    ctx.strokeStyle = 'rgba(245,197,66,.55)';
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let r = 0; r < f.rows; r += step) {
      for (let c = 0; c < f.cols; c += step) {
        const a = f.angles[r * f.cols + c];
        if (a === null || a === undefined) continue;
        const x = f.origin[0] + (c + 0.5) * f.spacing;
        const y = f.origin[1] + (r + 0.5) * f.spacing;
        if (x < v.min_x - f.spacing || x > v.max_x + f.spacing || y < v.min_y - f.spacing || y > v.max_y + f.spacing) continue;
        const [sx, sy] = w2s(x, y);
        const dx = Math.cos(a) * len * step;
        const dy = -Math.sin(a) * len * step; // screen y grows downwards
        ctx.moveTo(sx - dx, sy - dy);
        ctx.lineTo(sx + dx, sy + dy);
        // Arrow head.
        const hx = sx + dx;
        const hy = sy + dy;
        const back = Math.atan2(dy, dx) + Math.PI;
        const h = Math.max(2, 0.5 * len * step);
        ctx.moveTo(hx, hy);
        ctx.lineTo(hx + h * Math.cos(back + 0.5), hy + h * Math.sin(back + 0.5));
        ctx.moveTo(hx, hy);
        ctx.lineTo(hx + h * Math.cos(back - 0.5), hy + h * Math.sin(back - 0.5));
        arrows++;
      }
    }
    ctx.stroke();
  }
  if (f.goal) {
    const [gx, gy] = w2s(f.goal[0], f.goal[1]);
    ctx.strokeStyle = '#f5c542';
    ctx.lineWidth = 1.5;
    ctx.strokeRect(gx - 5, gy - 5, 10, 10);
  }
  V.flowArrows = arrows;
}

async function addObstacle(x, y, radius) {
  const r = await api('POST', wpath('/obstacles'), { center: { x, y }, radius });
  V.obstaclesPlaced++;
  return r.id;
}

async function moveObstacle(o, x, y) {
  // No endpoint moves an obstacle: delete it and create it again at the drop point.
  try {
    await api('DELETE', wpath(`/obstacles/${o.id}`));
    await addObstacle(x, y, o.radius);
  } catch (e) { fail(e); }
  await refreshShapes().catch(fail);
}

async function deleteObstacle(o) {
  try {
    await api('DELETE', wpath(`/obstacles/${o.id}`));
    await refreshShapes();
  } catch (e) { fail(e); }
}

async function loadScenario() {
  const name = $('scenario').value;
  if (!name || !S.world) return;
  // The load restarts the world's ticks and AOI chains: stop streaming, drop what we hold,
  // and reconnect afterwards (Welcome carries the new bounds and grid).
  if (S.ws) {
    S.ws.onclose = null;
    S.ws.close();
    S.ws = null;
  }
  V.connected = false;
  S.cells.clear();
  try {
    await api('POST', wpath('/load'), { scenario: name });
    toast(`loaded ${name}`, true);
    logEvent(`loaded scenario <b>${escapeHtml(name)}</b>`, '');
    S.restInfo = null;
    S.selection.clear();
    S.fitted = false;
    await refreshWorld();
  } catch (e) { fail(e); }
  connect();
}

async function saveScenario() {
  const name = $('save-name').value.trim();
  if (!name) {
    toast('type a name to save the world as');
    $('save-name').focus();
    return;
  }
  try {
    await api('POST', wpath('/save'), { scenario: name });
    toast(`saved as ${name}`, true);
    logEvent(`saved as <b>${escapeHtml(name)}</b>`, '');
    await refreshScenarios();
  } catch (e) { fail(e); }
}

// ---------------------------------------------------------------------------------------------
// View transform: world y points up, canvas y down

function w2s(x, y) {
  const v = S.view;
  return [(x - v.cx) * v.scale + canvas.clientWidth / 2, canvas.clientHeight / 2 - (y - v.cy) * v.scale];
}
function s2w(sx, sy) {
  const v = S.view;
  return [(sx - canvas.clientWidth / 2) / v.scale + v.cx, (canvas.clientHeight / 2 - sy) / v.scale + v.cy];
}

function fit() {
  if (!S.world || !canvas.clientWidth) return;
  const b = S.world.bounds;
  const w = b.max_x - b.min_x;
  const h = b.max_y - b.min_y;
  S.view.cx = (b.min_x + b.max_x) / 2;
  S.view.cy = (b.min_y + b.max_y) / 2;
  S.view.scale = Math.min((canvas.clientWidth - 20) / w, (canvas.clientHeight - 20) / h);
  S.fitted = true;
  updateSubscription();
}

function zoomAt(sx, sy, factor) {
  const [wx, wy] = s2w(sx, sy);
  S.view.scale = Math.min(400, Math.max(0.01, S.view.scale * factor));
  const [nx, ny] = s2w(sx, sy);
  S.view.cx += wx - nx;
  S.view.cy += wy - ny;
  updateSubscription();
}

function pan(dxPx, dyPx) {
  S.view.cx -= dxPx / S.view.scale;
  S.view.cy += dyPx / S.view.scale;
  updateSubscription();
}

// ---------------------------------------------------------------------------------------------
// Input

function localXY(ev) {
  const r = canvas.getBoundingClientRect();
  return [ev.clientX - r.left, ev.clientY - r.top];
}

function obstacleAt(sx, sy) {
  const [wx, wy] = s2w(sx, sy);
  let best = null;
  for (const o of S.obstacles) {
    const d = Math.hypot(o.center[0] - wx, o.center[1] - wy);
    const r = Math.max(o.radius, 6 / S.view.scale);
    if (d <= r && (!best || d < best.d)) best = { o, d };
  }
  return best ? best.o : null;
}

canvas.addEventListener('contextmenu', (ev) => ev.preventDefault());

canvas.addEventListener('pointerdown', (ev) => {
  canvas.focus();
  const [sx, sy] = localXY(ev);
  if (ev.button === 1 || (ev.button === 0 && (ev.altKey || S.spaceDown))) {
    S.drag = { kind: 'pan', sx, sy };
    canvas.classList.add('panning');
  } else if (ev.button === 0) {
    const o = obstacleAt(sx, sy);
    if (o) S.drag = { kind: 'obstacle', o, sx, sy, moved: false };
    else if (S.tool === 'obstacle') S.drag = { kind: 'place', sx, sy };
    else S.drag = { kind: 'box', sx, sy, ex: sx, ey: sy, add: ev.shiftKey };
  } else if (ev.button === 2) {
    const [wx, wy] = s2w(sx, sy);
    if (S.selection.size) moveTo(wx, wy);
    else toast('select agents first (drag a box around them), then right-click where they should go', true);
    return;
  } else {
    return;
  }
  canvas.setPointerCapture(ev.pointerId);
  ev.preventDefault();
});

canvas.addEventListener('pointermove', (ev) => {
  const [sx, sy] = localXY(ev);
  S.mouse = [sx, sy];
  const d = S.drag;
  if (!d) {
    S.hoverObstacle = obstacleAt(sx, sy);
    canvas.classList.toggle('over-obstacle', !!S.hoverObstacle);
    return;
  }
  if (d.kind === 'pan') {
    pan(sx - d.sx, sy - d.sy);
    d.sx = sx;
    d.sy = sy;
  } else if (d.kind === 'box') {
    d.ex = sx;
    d.ey = sy;
  } else if (d.kind === 'obstacle') {
    if (Math.hypot(sx - d.sx, sy - d.sy) > 3) d.moved = true;
    d.ex = sx;
    d.ey = sy;
  }
});

canvas.addEventListener('pointerup', (ev) => {
  const d = S.drag;
  S.drag = null;
  canvas.classList.remove('panning');
  if (!d) return;
  const [sx, sy] = localXY(ev);
  if (d.kind === 'box') boxSelect(d.sx, d.sy, sx, sy, d.add);
  else if (d.kind === 'place') {
    const [wx, wy] = s2w(sx, sy);
    const radius = Math.max(0.5, parseFloat($('obstacle-radius').value) || 6);
    addObstacle(wx, wy, radius).then(() => refreshShapes()).catch(fail);
  } else if (d.kind === 'obstacle' && d.moved) {
    const [wx, wy] = s2w(sx, sy);
    moveObstacle(d.o, wx, wy);
  }
});

canvas.addEventListener('wheel', (ev) => {
  ev.preventDefault();
  const [sx, sy] = localXY(ev);
  zoomAt(sx, sy, Math.exp(-ev.deltaY * 0.0015));
}, { passive: false });

function boxSelect(x0, y0, x1, y1, add) {
  const [ax, ay] = s2w(Math.min(x0, x1), Math.max(y0, y1));
  const [bx, by] = s2w(Math.max(x0, x1), Math.min(y0, y1));
  if (!add) S.selection.clear();
  const small = Math.abs(x1 - x0) < 4 && Math.abs(y1 - y0) < 4;
  if (small) {
    // A click: the agent under the pointer, if any.
    let best = null;
    for (const a of allAgents().map(toWorld)) {
      const [px, py] = w2s(a.x, a.y);
      const d = Math.hypot(px - x1, py - y1);
      if (d < 8 && (!best || d < best.d)) best = { a, d };
    }
    if (best) S.selection.add(best.a.id);
  } else {
    for (const a of allAgents().map(toWorld)) {
      if (a.x >= ax && a.x <= bx && a.y >= ay && a.y <= by) S.selection.add(a.id);
    }
  }
  updateSelectionText();
}

function updateSelectionText() {
  const n = S.selection.size;
  if (!n) {
    $('sel').textContent = 'none — drag a box around agents';
    return;
  }
  let arrived = 0;
  for (const id of S.selection) if (S.arrivedAt.has(id)) arrived++;
  const moving = S.moveAgents && [...S.selection].some((id) => S.moveAgents.has(id));
  $('sel').textContent = `${n} agent${n > 1 ? 's' : ''}${moving ? ` · ${arrived} arrived` : ' · right-click to send them'}`;
}

window.addEventListener('keydown', (ev) => {
  if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement) return;
  const k = ev.key;
  const stepPx = 60;
  if (k === ' ') { S.spaceDown = true; ev.preventDefault(); }
  else if (k === 'ArrowLeft') pan(stepPx, 0);
  else if (k === 'ArrowRight') pan(-stepPx, 0);
  else if (k === 'ArrowUp') pan(0, stepPx);
  else if (k === 'ArrowDown') pan(0, -stepPx);
  else if (k === '+' || k === '=') zoomAt(canvas.clientWidth / 2, canvas.clientHeight / 2, 1.25);
  else if (k === '-') zoomAt(canvas.clientWidth / 2, canvas.clientHeight / 2, 0.8);
  else if (k === 'f' || k === 'F') fit();
  else if (k === 'p' || k === 'P') togglePause();
  else if (k === 'Escape') { S.selection.clear(); updateSelectionText(); }
  else if ((k === 'Delete' || k === 'Backspace') && S.hoverObstacle) deleteObstacle(S.hoverObstacle);
});
window.addEventListener('keyup', (ev) => { if (ev.key === ' ') S.spaceDown = false; });

$('world').addEventListener('change', (ev) => selectWorld(ev.target.value));
$('pause').addEventListener('click', togglePause);
$('step').addEventListener('click', step);
$('fit').addEventListener('click', fit);
$('load').addEventListener('click', loadScenario);
$('save').addEventListener('click', saveScenario);
$('sel-clear').addEventListener('click', () => { S.selection.clear(); updateSelectionText(); });
for (const r of document.querySelectorAll('input[name="tool"]')) {
  r.addEventListener('change', () => { S.tool = r.value; });
}
$('token-apply').addEventListener('click', () => {
  S.token = $('token').value.trim();
  S.resume = null; // another identity: a new session
  if (S.token) sessionStorage.setItem('steerd-token', S.token);
  else sessionStorage.removeItem('steerd-token');
  connect();
  toast(S.token ? 'token set' : 'token cleared', true);
});
$('token').value = S.token;

// ---------------------------------------------------------------------------------------------
// Replay timeline: shown for replay worlds only (GET /worlds/{w} has `replay`); a scrub bar
// (current tick / last tick), play/pause and a speed choice, over /worlds/{w}/replay/...

const SPEEDS = [0.25, 0.5, 1, 2, 4, 8, 16];

function updateTimeline(rp) {
  $('timeline').hidden = !rp;
  // A replay world takes no commands: the simulation controls and tools would be refused.
  $('sim-controls').hidden = !!rp;
  $('tools').hidden = !!rp;
  S.replay = rp || null;
  if (!rp) return;
  const scrub = $('tl-scrub');
  scrub.max = String(rp.end_tick);
  if (!S.scrubbing) scrub.value = String(rp.tick);
  $('tl-tick').textContent = `${S.scrubbing ? scrub.value : rp.tick} / ${rp.end_tick}`;
  const play = $('tl-play');
  play.textContent = rp.playing ? 'Pause' : 'Play';
  play.classList.toggle('on', rp.playing);
  const sel = $('tl-speed');
  const speeds = SPEEDS.filter((x) => x <= rp.max_speed);
  if (sel.options.length !== speeds.length) sel.replaceChildren(...speeds.map((x) => new Option(`${x}×`, String(x))));
  if (document.activeElement !== sel) sel.value = String(rp.speed);
  const v = rp.verification;
  const chk = $('tl-check');
  chk.textContent = v.divergences ? `diverged at ${v.divergences} checkpoint(s)` : `${v.checks_ok}/${v.checks} checkpoints ok`;
  chk.className = `pill ${v.divergences ? 'bad' : 'ok'}`;
}

async function refreshReplay() {
  if (!S.world || !S.replay) return;
  const name = S.world.name;
  const rp = await api('GET', wpath('/replay'));
  if (!S.world || S.world.name !== name) return;
  updateTimeline(rp);
}

async function replayControl(op, body) {
  const rp = await api('POST', wpath(`/replay/${op}`), body);
  updateTimeline(rp);
  V.replaySeeks += op === 'seek' ? 1 : 0;
  return rp;
}

$('tl-play').addEventListener('click', () => replayControl(S.replay && S.replay.playing ? 'pause' : 'play').catch(fail));
$('tl-scrub').addEventListener('input', () => {
  S.scrubbing = true;
  $('tl-tick').textContent = `${$('tl-scrub').value} / ${$('tl-scrub').max}`;
});
$('tl-scrub').addEventListener('change', () => {
  const tick = Number($('tl-scrub').value);
  replayControl('seek', { tick }).catch(fail).finally(() => { S.scrubbing = false; });
});
$('tl-speed').addEventListener('change', (ev) => replayControl('speed', { speed: Number(ev.target.value) }).catch(fail));
setInterval(() => { refreshReplay().catch(() => {}); }, 250);

// ---------------------------------------------------------------------------------------------
// Event log

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function logEvent(html, cls, tick) {
  const li = document.createElement('li');
  if (cls) li.className = cls;
  li.innerHTML = `${tick !== undefined ? `<span>${tick}</span> ` : ''}${html}`;
  const ol = $('events');
  ol.prepend(li);
  while (ol.children.length > 200) ol.lastChild.remove();
}

// ---------------------------------------------------------------------------------------------
// Status panel

function fmtBytes(n) {
  if (n < 1024) return `${n.toFixed(0)} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(2)} MiB`;
}

function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)/);
    if (m && !m[2]) out[m[1]] = parseFloat(m[3]);
  }
  return out;
}

async function refreshMetrics() {
  const r = await fetch('/metrics');
  if (!r.ok) return;
  const m = parseMetrics(await r.text());
  const prev = S.metrics;
  S.metrics = m;
  const sum = m.steerd_tick_duration_seconds_sum;
  const count = m.steerd_tick_duration_seconds_count;
  if (sum !== undefined && count !== undefined) {
    let mean = count ? sum / count : 0;
    if (prev && count > prev.steerd_tick_duration_seconds_count) {
      mean = (sum - prev.steerd_tick_duration_seconds_sum) / (count - prev.steerd_tick_duration_seconds_count);
    }
    $('s-tickdur').textContent = `${(mean * 1000).toFixed(2)} ms`;
  }
  if (m.steerd_subscribers !== undefined) $('s-subs').textContent = String(m.steerd_subscribers);
}

function updateStatus() {
  const now = performance.now();
  while (S.bytesWindow.length && S.bytesWindow[0][0] < now - 2000) S.bytesWindow.shift();
  const b = S.bytesWindow.reduce((acc, [, n]) => acc + n, 0) / 2;
  $('s-bytes').textContent = `${fmtBytes(b)}/s`;
  $('s-bytes').title = `${fmtBytes(S.bytes)} in total`;
  $('s-keys').textContent = `${S.keyframes}${S.chainBreaks ? ` · ${S.chainBreaks} resyncs` : ''}`;
  while (S.lateness.length && S.lateness[0][0] < now - 5000) S.lateness.shift();
  if (S.lateness.length) {
    const v = S.lateness.map(([, x]) => x).sort((x, y) => x - y);
    const p50 = v[Math.floor(v.length / 2)];
    const max = v[v.length - 1];
    $('s-late').textContent = `${p50.toFixed(1)} ms · max ${max.toFixed(1)}`;
  } else {
    $('s-late').textContent = S.restInfo && S.restInfo.paused ? 'paused' : '–';
  }
  if (S.restInfo) $('s-agents').textContent = `${S.restInfo.agents} (${allAgents().length} streamed)`;
  updateLegend();
}

function updateLegend() {
  const counts = new Map();
  for (const a of allAgents()) counts.set(a.group, (counts.get(a.group) || 0) + 1);
  const groups = [...counts.keys()].sort((a, b) => a - b);
  const key = groups.map((g) => `${g}:${counts.get(g)}:${S.groupNames.get(g) || ''}`).join('|');
  if (key === S.legendKey) return;
  S.legendKey = key;
  $('legend').replaceChildren(...groups.map((g) => {
    const li = document.createElement('li');
    const sw = document.createElement('span');
    sw.className = 'sw';
    sw.style.background = groupColor(g);
    const name = document.createElement('span');
    name.textContent = S.groupNames.get(g) || `group ${g}`;
    const n = document.createElement('span');
    n.className = 'n';
    n.textContent = String(counts.get(g));
    li.append(sw, name, n);
    return li;
  }));
  if (groups.some((g) => !S.groupNames.has(g)) && !S.groupsPending && performance.now() - (S.groupsTried || 0) > 5000) {
    S.groupsPending = true;
    S.groupsTried = performance.now();
    refreshGroups().catch(() => {}).finally(() => { S.groupsPending = false; });
  }
}

// ---------------------------------------------------------------------------------------------
// Drawing

function resize() {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth;
  const h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
    if (!S.fitted) fit();
    updateSubscription();
  }
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
}

function draw() {
  resize();
  const W = canvas.clientWidth;
  const H = canvas.clientHeight;
  ctx.fillStyle = '#0f1216';
  ctx.fillRect(0, 0, W, H);
  if (!S.world) {
    ctx.fillStyle = '#8a93a3';
    ctx.font = '14px system-ui, sans-serif';
    ctx.fillText(S.wsState === 'live' ? 'no worlds' : 'connecting…', 20, 30);
    requestAnimationFrame(draw);
    return;
  }
  const w = S.world;
  const b = w.bounds;
  const sc = S.view.scale;

  // World area and a light grid.
  const [bx0, by0] = w2s(b.min_x, b.max_y);
  const [bx1, by1] = w2s(b.max_x, b.min_y);
  ctx.fillStyle = '#171b21';
  ctx.fillRect(bx0, by0, bx1 - bx0, by1 - by0);
  drawGrid(b);
  ctx.strokeStyle = '#3a4150';
  ctx.lineWidth = 1;
  ctx.strokeRect(bx0 + 0.5, by0 + 0.5, bx1 - bx0, by1 - by0);

  if ($('ov-aoi').checked) drawAoi();

  // Walls.
  ctx.strokeStyle = '#c9ced8';
  ctx.lineWidth = Math.min(6, Math.max(2, 0.4 * sc));
  ctx.lineCap = 'round';
  ctx.beginPath();
  for (const wl of S.walls) {
    const [x0, y0] = w2s(wl.a[0], wl.a[1]);
    const [x1, y1] = w2s(wl.b[0], wl.b[1]);
    ctx.moveTo(x0, y0);
    ctx.lineTo(x1, y1);
  }
  ctx.stroke();

  // Obstacles (the one being dragged follows the pointer).
  for (const o of S.obstacles) {
    let [x, y] = w2s(o.center[0], o.center[1]);
    const dragging = S.drag && S.drag.kind === 'obstacle' && S.drag.o === o && S.drag.moved;
    if (dragging) [x, y] = [S.drag.ex, S.drag.ey];
    ctx.beginPath();
    ctx.arc(x, y, Math.max(2, o.radius * sc), 0, Math.PI * 2);
    ctx.fillStyle = dragging ? 'rgba(120,130,150,.35)' : '#2b313c';
    ctx.fill();
    ctx.strokeStyle = o === S.hoverObstacle || dragging ? '#4fa3ff' : '#59627a';
    ctx.lineWidth = o === S.hoverObstacle || dragging ? 2 : 1.2;
    ctx.stroke();
  }
  if (S.tool === 'obstacle' && S.mouse && !S.drag && !S.hoverObstacle) {
    const r = Math.max(0.5, parseFloat($('obstacle-radius').value) || 6) * sc;
    ctx.beginPath();
    ctx.arc(S.mouse[0], S.mouse[1], Math.max(2, r), 0, Math.PI * 2);
    ctx.setLineDash([4, 4]);
    ctx.strokeStyle = '#4fa3ff';
    ctx.lineWidth = 1;
    ctx.stroke();
    ctx.setLineDash([]);
  }

  drawFlow(sc);
  drawAvoidance(sc, 'planes'); // under the agents, so that the neighbours stay visible
  drawAgents(sc);
  drawAvoidance(sc, 'arrows');
  drawMoveTarget();

  // Selection box.
  if (S.drag && S.drag.kind === 'box') {
    const d = S.drag;
    ctx.fillStyle = 'rgba(79,163,255,.12)';
    ctx.strokeStyle = '#4fa3ff';
    ctx.lineWidth = 1;
    ctx.fillRect(d.sx, d.sy, d.ex - d.sx, d.ey - d.sy);
    ctx.strokeRect(d.sx + 0.5, d.sy + 0.5, d.ex - d.sx, d.ey - d.sy);
  }
  drawScale(W, H);
  requestAnimationFrame(draw);
}

function drawGrid(b) {
  const sc = S.view.scale;
  // A step of 1, 2 or 5 × 10^k world units, at least 40 px apart.
  const raw = 40 / sc;
  const p = 10 ** Math.floor(Math.log10(raw));
  const stepW = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= raw);
  ctx.strokeStyle = '#1e232b';
  ctx.lineWidth = 1;
  ctx.beginPath();
  const v = visibleRect();
  for (let x = Math.ceil(Math.max(b.min_x, v.min_x) / stepW) * stepW; x <= Math.min(b.max_x, v.max_x); x += stepW) {
    const [sx] = w2s(x, 0);
    const [, y0] = w2s(0, b.max_y);
    const [, y1] = w2s(0, b.min_y);
    ctx.moveTo(Math.round(sx) + 0.5, y0);
    ctx.lineTo(Math.round(sx) + 0.5, y1);
  }
  for (let y = Math.ceil(Math.max(b.min_y, v.min_y) / stepW) * stepW; y <= Math.min(b.max_y, v.max_y); y += stepW) {
    const [, sy] = w2s(0, y);
    const [x0] = w2s(b.min_x, 0);
    const [x1] = w2s(b.max_x, 0);
    ctx.moveTo(x0, Math.round(sy) + 0.5);
    ctx.lineTo(x1, Math.round(sy) + 0.5);
  }
  ctx.stroke();
  S.gridStep = stepW;
}

function drawScale(W, H) {
  const len = S.gridStep * S.view.scale;
  const x = W - 20 - len;
  const y = H - 14;
  ctx.strokeStyle = '#8a93a3';
  ctx.lineWidth = 1;
  ctx.beginPath();
  ctx.moveTo(x, y - 4);
  ctx.lineTo(x, y);
  ctx.lineTo(x + len, y);
  ctx.lineTo(x + len, y - 4);
  ctx.stroke();
  ctx.fillStyle = '#8a93a3';
  ctx.font = '11px system-ui, sans-serif';
  ctx.textAlign = 'center';
  ctx.fillText(`${S.gridStep} m`, x + len / 2, y - 5);
  ctx.textAlign = 'start';
}

function drawAoi() {
  const w = S.world;
  const s = w.aoi_cell_size;
  ctx.lineWidth = 1;
  for (let c = 0; c < w.cols * w.rows; c++) {
    const col = c % w.cols;
    const row = Math.floor(c / w.cols);
    const x0 = w.bounds.min_x + col * s;
    const y0 = w.bounds.min_y + row * s;
    const [sx0, sy1] = w2s(x0, y0);
    const [sx1, sy0] = w2s(x0 + s, y0 + s);
    if (S.subCells.has(c)) {
      ctx.fillStyle = 'rgba(79,163,255,.06)';
      ctx.fillRect(sx0, sy0, sx1 - sx0, sy1 - sy0);
      ctx.strokeStyle = 'rgba(79,163,255,.45)';
    } else {
      ctx.strokeStyle = 'rgba(255,255,255,.06)';
    }
    ctx.strokeRect(sx0 + 0.5, sy0 + 0.5, sx1 - sx0 - 1, sy1 - sy0 - 1);
  }
}

function drawAgents(sc) {
  const now = performance.now();
  const running = S.restInfo && !S.restInfo.paused;
  const showVel = $('ov-vel').checked;
  const showNbr = $('ov-nbr').checked;
  const showIds = $('ov-ids').checked && sc > 6;
  const period = 1000 / S.tickRate;
  const ps = S.quant.pos_step;
  const vs = S.quant.vel_step;
  const v = visibleRect();
  const margin = 5;
  for (const [cellId, cell] of S.cells) {
    // Dead reckoning between frames: at most one tick ahead, and not while paused.
    const age = running ? Math.min(now - (S.cellSeen.get(cellId) || now), period) / 1000 : 0;
    for (const a of cell.agents) {
      const vx = a.vel[0] * vs;
      const vy = a.vel[1] * vs;
      const x = a.pos[0] * ps + vx * age;
      const y = a.pos[1] * ps + vy * age;
      if (x < v.min_x - margin || x > v.max_x + margin || y < v.min_y - margin || y > v.max_y + margin) continue;
      const [sx, sy] = w2s(x, y);
      const radius = S.agentRadius.get(a.group) || 0.5;
      const rpx = Math.max(3, radius * sc);
      const ang = (a.orient * Math.PI * 2) / 65536;
      const selected = S.selection.has(a.id);
      const color = groupColor(a.group);
      if (showNbr && (selected || S.selection.size === 0)) {
        const name = S.groupNames.get(a.group);
        const nr = (name && S.neighborRadius.get(name)) || 3;
        ctx.beginPath();
        ctx.arc(sx, sy, nr * sc, 0, Math.PI * 2);
        ctx.strokeStyle = 'rgba(255,255,255,.12)';
        ctx.lineWidth = 1;
        ctx.stroke();
      }
      if (showVel && (vx || vy)) {
        ctx.beginPath();
        ctx.moveTo(sx, sy);
        ctx.lineTo(sx + vx * sc * 0.5, sy - vy * sc * 0.5);
        ctx.strokeStyle = 'rgba(255,255,255,.35)';
        ctx.lineWidth = 1;
        ctx.stroke();
      }
      // An oriented dart: nose along the heading.
      const c = Math.cos(ang);
      const s = Math.sin(ang);
      const nose = rpx * 1.6;
      const back = rpx;
      ctx.beginPath();
      ctx.moveTo(sx + c * nose, sy - s * nose);
      ctx.lineTo(sx - c * back - s * back * 0.9, sy + s * back - c * back * 0.9);
      ctx.lineTo(sx - c * back * 0.4, sy + s * back * 0.4);
      ctx.lineTo(sx - c * back + s * back * 0.9, sy + s * back + c * back * 0.9);
      ctx.closePath();
      ctx.fillStyle = color;
      ctx.fill();
      if (selected) {
        ctx.beginPath();
        ctx.arc(sx, sy, rpx * 1.7 + 2, 0, Math.PI * 2);
        ctx.strokeStyle = 'rgba(255,255,255,.85)';
        ctx.lineWidth = 1;
        ctx.stroke();
      }
      const t = S.arrivedAt.get(a.id);
      if (t !== undefined && now - t < 1500) {
        const k = (now - t) / 1500;
        ctx.beginPath();
        ctx.arc(sx, sy, rpx * 2 + 2 + k * 14, 0, Math.PI * 2);
        ctx.strokeStyle = `rgba(95,211,141,${1 - k})`;
        ctx.lineWidth = 2;
        ctx.stroke();
      }
      if (showIds) {
        ctx.fillStyle = '#8a93a3';
        ctx.font = '10px system-ui, sans-serif';
        ctx.fillText(String(a.id), sx + rpx + 3, sy - rpx - 2);
      }
    }
  }
}

function drawMoveTarget() {
  const t = S.moveTarget;
  if (!t) return;
  const age = performance.now() - t.t;
  const [x, y] = w2s(t.x, t.y);
  const pending = S.moveAgents ? [...S.moveAgents].filter((id) => !S.arrivedAt.has(id)).length : 0;
  if (!pending && age > 3000) return;
  const pulse = 6 + 3 * Math.sin(age / 150);
  ctx.strokeStyle = '#5fd38d';
  ctx.lineWidth = 2;
  ctx.beginPath();
  ctx.arc(x, y, pulse, 0, Math.PI * 2);
  ctx.moveTo(x - 12, y);
  ctx.lineTo(x + 12, y);
  ctx.moveTo(x, y - 12);
  ctx.lineTo(x, y + 12);
  ctx.stroke();
}

// ---------------------------------------------------------------------------------------------
// Start

async function probeToken() {
  // A no-op PATCH tells whether mutations need the admin token (401/403) without changing anything.
  try {
    const worlds = await api('GET', '/worlds');
    if (!worlds.length) return;
    await api('PATCH', `/worlds/${encodeURIComponent(worlds[0].name)}`, {});
    showTokenField(false);
  } catch (e) {
    if (e.status === 401 || e.status === 403) showTokenField(true);
  }
}

probeToken();
connect();
requestAnimationFrame(draw);
setInterval(updateStatus, 500);
setInterval(() => { refreshWorld().catch(() => {}); }, 1000);
setInterval(() => { refreshMetrics().catch(() => {}); }, 2000);
setInterval(() => { refreshShapes().catch(() => {}); }, 3000);
setInterval(() => { refreshFlow().catch(() => {}); }, 500);
$('ov-flow').addEventListener('change', () => { refreshFlow().catch(() => {}); });
setInterval(() => { refreshAvoidance().catch(() => {}); }, 200); // 5 Hz, and only while wanted
for (const id of ['ov-vo', 'ov-pvc']) $(id).addEventListener('change', () => { refreshAvoidance().catch(() => {}); });
setInterval(() => { if (S.ws && S.ws.readyState === WebSocket.OPEN) send({ type: 'ping', request_id: S.nextRid++ }); }, 10000);
refreshMetrics().catch(() => {});
initPlayers({ world: () => (S.world ? S.world.name : null), token: () => S.token, toast });
