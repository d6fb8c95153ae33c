// Pointer and keyboard input: tools, selection, obstacle drag, buttons. Owns the selection, the
// pointer's state (tool, drag, hovered obstacle, mouse), and the last MoveTo order with the
// arrivals it awaits.

import { $, canvas } from './state.js';
import { fail, toast, token, setToken } from './rest.js';
import { connect, forgetSession, allAgents, toWorld } from './stream.js';
import { selectWorld, obstacles, refreshShapes, togglePause, step, moveTo, addObstacle, moveObstacle, deleteObstacle, loadScenario, saveScenario } from './world.js';
import { w2s, s2w, fit, zoomAt, pan, scale } from './view.js';

/** This module's own state. */
const own = {
  selection: new Set(), // agent ids
  tool: 'select',
  drag: null, // {kind: 'pan' | 'box' | 'place' | 'obstacle', sx, sy, …} while a button is down
  hoverObstacle: null,
  mouse: null, // [x, y] in canvas pixels
  spaceDown: false,
  moveTarget: null, // {x, y, t} of the last MoveTo
  moveAgents: null, // Set of the agents it sent
  arrivedAt: new Map(), // agent id -> performance.now() of DestinationReached
};

// The selection

/** The selected agent ids (a copy). */
export const selectedIds = () => [...own.selection];
export const isSelected = (id) => own.selection.has(id);
export const selectionSize = () => own.selection.size;
/** The selection's lowest id (the agent the overlays show); Infinity when none. */
export const firstSelected = () => Math.min(...own.selection);
/** Forgets the selection (another world, a scenario load). */
export function clearSelection() {
  own.selection.clear();
}

/** What the pointer is doing, for drawing (read-only). */
export const pointer = Object.freeze({
  get tool() { return own.tool; },
  get drag() { return own.drag; },
  get hoverObstacle() { return own.hoverObstacle; },
  get mouse() { return own.mouse; },
});

// Orders and arrivals

/** A MoveTo of `agents` to (x, y) was sent: mark the target, and await their arrivals again. */
export function noteOrder(agents, x, y) {
  own.moveTarget = { x, y, t: performance.now() };
  for (const id of agents) own.arrivedAt.delete(id);
  own.moveAgents = new Set(agents);
}
/** DestinationReached of `agent`. */
export function noteArrived(agent) {
  own.arrivedAt.set(agent, performance.now());
}
/** performance.now() of the agent's last arrival, or undefined. */
export const arrivedAt = (id) => own.arrivedAt.get(id);
/** The last MoveTo's target {x, y, t}, or null. */
export const moveTarget = () => own.moveTarget;
/** How many agents of the last MoveTo have not arrived yet. */
export function awaitedArrivals() {
  return own.moveAgents ? [...own.moveAgents].filter((id) => !own.arrivedAt.has(id)).length : 0;
}

// Input

function localXY(ev) {
  const r = canvas.getBoundingClientRect();
  return [ev.clientX - r.left, ev.clientY - r.top];
}

function obstacleAt(sx, sy) {
  const [wx, wy] = s2w(sx, sy);
  let best = null;
  for (const o of obstacles()) {
    const d = Math.hypot(o.center[0] - wx, o.center[1] - wy);
    const r = Math.max(o.radius, 6 / scale());
    if (d <= r && (!best || d < best.d)) best = { o, d };
  }
  return best ? best.o : null;
}

function boxSelect(x0, y0, x1, y1, add) {
  const [ax, ay] = s2w(Math.min(x0, x1), Math.max(y0, y1));
  const [bx, by] = s2w(Math.max(x0, x1), Math.min(y0, y1));
  if (!add) own.selection.clear();
  const small = Math.abs(x1 - x0) < 4 && Math.abs(y1 - y0) < 4;
  if (small) {
    // A click: the agent under the pointer, if any.
    let best = null;
    for (const a of allAgents().map(toWorld)) {
      const [px, py] = w2s(a.x, a.y);
      const d = Math.hypot(px - x1, py - y1);
      if (d < 8 && (!best || d < best.d)) best = { a, d };
    }
    if (best) own.selection.add(best.a.id);
  } else {
    for (const a of allAgents().map(toWorld)) {
      if (a.x >= ax && a.x <= bx && a.y >= ay && a.y <= by) own.selection.add(a.id);
    }
  }
  updateSelectionText();
}

export function updateSelectionText() {
  const n = own.selection.size;
  if (!n) {
    $('sel').textContent = 'none — drag a box around agents';
    return;
  }
  let arrived = 0;
  for (const id of own.selection) if (own.arrivedAt.has(id)) arrived++;
  const moving = own.moveAgents && [...own.selection].some((id) => own.moveAgents.has(id));
  $('sel').textContent = `${n} agent${n > 1 ? 's' : ''}${moving ? ` · ${arrived} arrived` : ' · right-click to send them'}`;
}

/** Binds this module's listeners and timers (app.js calls it once, after every module has loaded). */
export function bindInput() {
  canvas.addEventListener('contextmenu', (ev) => ev.preventDefault());

  canvas.addEventListener('pointerdown', (ev) => {
    canvas.focus();
    const [sx, sy] = localXY(ev);
    if (ev.button === 1 || (ev.button === 0 && (ev.altKey || own.spaceDown))) {
      own.drag = { kind: 'pan', sx, sy };
      canvas.classList.add('panning');
    } else if (ev.button === 0) {
      const o = obstacleAt(sx, sy);
      if (o) own.drag = { kind: 'obstacle', o, sx, sy, moved: false };
      else if (own.tool === 'obstacle') own.drag = { kind: 'place', sx, sy };
      else own.drag = { kind: 'box', sx, sy, ex: sx, ey: sy, add: ev.shiftKey };
    } else if (ev.button === 2) {
      const [wx, wy] = s2w(sx, sy);
      if (own.selection.size) moveTo(wx, wy);
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
    own.mouse = [sx, sy];
    const d = own.drag;
    if (!d) {
      own.hoverObstacle = obstacleAt(sx, sy);
      canvas.classList.toggle('over-obstacle', !!own.hoverObstacle);
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
    const d = own.drag;
    own.drag = null;
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

  window.addEventListener('keydown', (ev) => {
    if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLSelectElement) return;
    const k = ev.key;
    const stepPx = 60;
    if (k === ' ') { own.spaceDown = true; ev.preventDefault(); }
    else if (k === 'ArrowLeft') pan(stepPx, 0);
    else if (k === 'ArrowRight') pan(-stepPx, 0);
    else if (k === 'ArrowUp') pan(0, stepPx);
    else if (k === 'ArrowDown') pan(0, -stepPx);
    else if (k === '+' || k === '=') zoomAt(canvas.clientWidth / 2, canvas.clientHeight / 2, 1.25);
    else if (k === '-') zoomAt(canvas.clientWidth / 2, canvas.clientHeight / 2, 0.8);
    else if (k === 'f' || k === 'F') fit();
    else if (k === 'p' || k === 'P') togglePause();
    else if (k === 'Escape') { own.selection.clear(); updateSelectionText(); }
    else if ((k === 'Delete' || k === 'Backspace') && own.hoverObstacle) deleteObstacle(own.hoverObstacle);
  });
  window.addEventListener('keyup', (ev) => { if (ev.key === ' ') own.spaceDown = false; });

  $('world').addEventListener('change', (ev) => selectWorld(ev.target.value));
  $('pause').addEventListener('click', togglePause);
  $('step').addEventListener('click', step);
  $('fit').addEventListener('click', fit);
  $('load').addEventListener('click', loadScenario);
  $('save').addEventListener('click', saveScenario);
  $('sel-clear').addEventListener('click', () => { own.selection.clear(); updateSelectionText(); });
  for (const r of document.querySelectorAll('input[name="tool"]')) {
    r.addEventListener('change', () => { own.tool = r.value; });
  }
  $('token-apply').addEventListener('click', () => {
    setToken($('token').value.trim());
    forgetSession(); // another identity: a new session
    connect();
    toast(token() ? 'token set' : 'token cleared', true);
  });
  $('token').value = token();

}
