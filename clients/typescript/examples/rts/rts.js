// A small RTS on the steerd-client SDK alone: spawn your units, left-drag (or click) to select
// them, right-click to send them there; the others' units in red; with fog of war (the world is
// `owned`: the server sends only what your units see) the map is dark beyond their sight.
//
// Page parameters: server (ws URL, default ws://<this host>:8080/ws), world (default rts), units
// (how many to spawn, default 6), at (x,y of the spawn, default the world's centre), token (a
// player JWT; none in dev mode), fog (your units' sight in world units — the world's
// players.vision_radius under `visibility = "owned"`; 0 = no fog).
import { connect } from 'steerd-client';

const params = new URLSearchParams(location.search);
const SERVER = params.get('server') || `ws://${location.hostname || '127.0.0.1'}:8080/ws`;
const WORLD = params.get('world') || 'rts';
const UNITS = Number(params.get('units') || 6);
const FOG = Number(params.get('fog') || 0);

const canvas = document.getElementById('map');
const ctx = canvas.getContext('2d');
const hud = document.getElementById('hud');
const fog = document.createElement('canvas');
const fogCtx = fog.getContext('2d');

// What the page shows, for people and for tests (tests/browser/rts.test.mjs).
const state = {
  ready: false,
  error: null,
  selection: new Set(),
  arrived: new Set(),
  orders: [], // {x, y, agents}
  moveToSent: 0,
  drag: null, // screen coordinates {x0, y0, x1, y1}
  drawn: [], // the last frame's sampled agents
};

let client;
let view;
let bounds = { min_x: 0, min_y: 0, max_x: 200, max_y: 200 };

// ---- world ↔ screen (y up, the world fitted into the canvas)

function transform() {
  const w = canvas.width, h = canvas.height, m = 20;
  const bw = bounds.max_x - bounds.min_x, bh = bounds.max_y - bounds.min_y;
  const s = Math.min((w - 2 * m) / bw, (h - 2 * m) / bh);
  return { s, ox: (w - bw * s) / 2, oy: (h - bh * s) / 2 };
}
function worldToScreen(x, y) {
  const t = transform();
  return { x: t.ox + (x - bounds.min_x) * t.s, y: canvas.height - (t.oy + (y - bounds.min_y) * t.s) };
}
function screenToWorld(px, py) {
  const t = transform();
  return { x: bounds.min_x + (px - t.ox) / t.s, y: bounds.min_y + (canvas.height - py - t.oy) / t.s };
}
function resize() {
  canvas.width = fog.width = canvas.clientWidth;
  canvas.height = fog.height = canvas.clientHeight;
}
addEventListener('resize', resize);
resize();

// ---- commands

async function moveTo(agents, p) {
  if (!agents.length) return;
  const order = { x: p.x, y: p.y, agents };
  state.orders.push(order);
  for (const id of agents) state.arrived.delete(id);
  try {
    await client.moveTo(WORLD, agents, p, { stoppingDistance: 1 });
    state.moveToSent++;
  } catch (e) {
    // Refused, or its outcome unknown after a drop: shown, not retried (the SDK never replays it).
    state.orders.splice(state.orders.indexOf(order), 1);
    state.error = e.message;
  }
}

// ---- input: left-drag or click selects your units, right-click sends them

canvas.addEventListener('mousedown', (e) => {
  if (e.button !== 0) return;
  state.drag = { x0: e.offsetX, y0: e.offsetY, x1: e.offsetX, y1: e.offsetY };
});
canvas.addEventListener('mousemove', (e) => {
  if (state.drag) { state.drag.x1 = e.offsetX; state.drag.y1 = e.offsetY; }
});
canvas.addEventListener('mouseup', (e) => {
  if (e.button !== 0 || !state.drag) return;
  const d = state.drag;
  state.drag = null;
  const mine = state.drawn.filter((a) => a.mine);
  state.selection.clear();
  if (Math.abs(d.x1 - d.x0) < 4 && Math.abs(d.y1 - d.y0) < 4) {
    // A click: your unit under the pointer (within 12 px), if any.
    let best = null, bestD = 12;
    for (const a of mine) {
      const p = worldToScreen(a.x, a.y);
      const dist = Math.hypot(p.x - d.x1, p.y - d.y1);
      if (dist < bestD) { best = a; bestD = dist; }
    }
    if (best) state.selection.add(best.id);
    return;
  }
  const [x0, x1] = [Math.min(d.x0, d.x1), Math.max(d.x0, d.x1)];
  const [y0, y1] = [Math.min(d.y0, d.y1), Math.max(d.y0, d.y1)];
  for (const a of mine) {
    const p = worldToScreen(a.x, a.y);
    if (p.x >= x0 && p.x <= x1 && p.y >= y0 && p.y <= y1) state.selection.add(a.id);
  }
});
canvas.addEventListener('contextmenu', (e) => {
  e.preventDefault();
  moveTo([...state.selection], screenToWorld(e.offsetX, e.offsetY));
});

// ---- drawing

function draw() {
  requestAnimationFrame(draw);
  ctx.fillStyle = '#1b1f16';
  ctx.fillRect(0, 0, canvas.width, canvas.height);
  const a0 = worldToScreen(bounds.min_x, bounds.max_y), a1 = worldToScreen(bounds.max_x, bounds.min_y);
  ctx.fillStyle = '#33402a';
  ctx.fillRect(a0.x, a0.y, a1.x - a0.x, a1.y - a0.y);
  if (!view) return;
  const scale = transform().s;
  const agents = view.sample(); // interpolated, interpDelayMs behind the server's clock
  state.drawn = agents.map((a) => ({ id: a.id, x: a.x, y: a.y, mine: a.mine, group: a.groupName }));
  for (const id of [...state.selection]) if (!agents.some((a) => a.id === id)) state.selection.delete(id);
  for (const o of state.orders) {
    if (o.agents.every((id) => state.arrived.has(id))) continue;
    const p = worldToScreen(o.x, o.y);
    ctx.strokeStyle = '#9fe870';
    ctx.beginPath(); ctx.moveTo(p.x - 6, p.y - 6); ctx.lineTo(p.x + 6, p.y + 6); ctx.moveTo(p.x + 6, p.y - 6); ctx.lineTo(p.x - 6, p.y + 6); ctx.stroke();
  }
  const r = Math.max(4, 0.9 * scale);
  for (const a of agents) {
    const p = worldToScreen(a.x, a.y);
    ctx.fillStyle = a.mine ? '#4da3ff' : '#e5484d';
    ctx.beginPath(); ctx.arc(p.x, p.y, r, 0, Math.PI * 2); ctx.fill();
    ctx.strokeStyle = '#0008';
    ctx.beginPath(); ctx.moveTo(p.x, p.y); ctx.lineTo(p.x + Math.cos(a.heading) * r * 1.8, p.y - Math.sin(a.heading) * r * 1.8); ctx.stroke();
    if (state.selection.has(a.id)) {
      ctx.strokeStyle = '#f5f0a0';
      ctx.beginPath(); ctx.arc(p.x, p.y, r + 4, 0, Math.PI * 2); ctx.stroke();
    }
  }
  if (FOG > 0) {
    // Dark beyond your units' sight (the server sends nothing from there).
    fogCtx.globalCompositeOperation = 'source-over';
    fogCtx.clearRect(0, 0, fog.width, fog.height);
    fogCtx.fillStyle = 'rgba(5, 8, 4, 0.72)';
    fogCtx.fillRect(a0.x, a0.y, a1.x - a0.x, a1.y - a0.y);
    fogCtx.globalCompositeOperation = 'destination-out';
    for (const a of agents) {
      if (!a.mine) continue;
      const p = worldToScreen(a.x, a.y);
      const g = fogCtx.createRadialGradient(p.x, p.y, FOG * scale * 0.85, p.x, p.y, FOG * scale);
      g.addColorStop(0, '#000'); g.addColorStop(1, '#0000');
      fogCtx.fillStyle = g;
      fogCtx.beginPath(); fogCtx.arc(p.x, p.y, FOG * scale, 0, Math.PI * 2); fogCtx.fill();
    }
    ctx.drawImage(fog, 0, 0);
  }
  if (state.drag) {
    const d = state.drag;
    ctx.strokeStyle = '#f5f0a0';
    ctx.setLineDash([4, 3]);
    ctx.strokeRect(Math.min(d.x0, d.x1), Math.min(d.y0, d.y1), Math.abs(d.x1 - d.x0), Math.abs(d.y1 - d.y0));
    ctx.setLineDash([]);
  }
  const mine = state.drawn.filter((a) => a.mine).length;
  hud.textContent = `${client.playerId} · ${WORLD} · ${client.state}\n` +
    `your units ${mine} · selected ${state.selection.size} · others in sight ${state.drawn.length - mine}` +
    (FOG > 0 ? ` · fog ${FOG}` : '') + (state.error ? `\n${state.error}` : '') +
    '\nleft-drag: select · right-click: move';
}

// ---- start

async function start() {
  client = await connect(SERVER, { token: params.get('token') || undefined, retryFirstConnect: true });
  client.on('destination_reached', (agent, w) => { if (w === WORLD) state.arrived.add(agent); });
  client.on('disconnect', (d) => { state.error = `disconnected (${d.cause} ${d.code}${d.willReconnect ? ', reconnecting' : ''})`; });
  client.on('reconnect', () => { state.error = null; });
  ({ view } = await client.subscribe(WORLD));
  bounds = view.info.bounds;
  const at = (params.get('at') || '').split(',').map(Number);
  const x = at.length === 2 && at.every(Number.isFinite) ? at[0] : (bounds.min_x + bounds.max_x) / 2;
  const y = at.length === 2 && at.every(Number.isFinite) ? at[1] : (bounds.min_y + bounds.max_y) / 2;
  await client.spawn(WORLD, { group: 'units', count: UNITS, area: { type: 'circle', x, y, radius: 2 + Math.sqrt(UNITS) * 1.5 } });
  state.ready = true;
}

window.rts = {
  state,
  worldToScreen,
  get ready() { return state.ready; },
  get error() { return state.error; },
  /** Ids of the units drawn last frame: yours, and the others'. */
  mine: () => state.drawn.filter((a) => a.mine).map((a) => a.id),
  others: () => state.drawn.filter((a) => !a.mine).map((a) => a.id),
  drawn: () => state.drawn,
  selection: () => [...state.selection],
  arrived: () => [...state.arrived],
  /** Sends every unit of yours to (x, y) (what a right-click does with all of them selected). */
  command: (x, y) => moveTo(client ? [...client.mine(WORLD)] : [], { x, y }),
};

draw();
start().catch((e) => { state.error = `could not start: ${e.message}`; hud.textContent = state.error; });
