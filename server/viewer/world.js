// The world on screen and its control over REST: which world is shown (from the Welcome's list),
// refreshes of the world, shapes, scenarios and groups; pause, step, MoveTo, obstacles, scenario
// load and save. Owns the shown world, what REST says of it, its shapes and its group table.

import { $, V } from './state.js';
import { api, wpath, fail, toast } from './rest.js';
import { connect, stopStreaming, fillFromSnapshot, allAgents, unsubscribe, resetForWorld, updateSubscription } from './stream.js';
import { updateSelectionText, selectedIds, clearSelection, noteOrder } from './input.js';
import { updateTimeline } from './replay.js';
import { escapeHtml, logEvent } from './status.js';
import { ordered } from './stuck.js';
import { fit, isFitted, unfit } from './view.js';

/** This module's own state. */
const own = {
  worlds: [], // WorldInfo from Welcome
  /** The world to show when the next Welcome lists it (the page's `?world=`, a moved world). */
  worldName: new URLSearchParams(location.search).get('world') || '',
  world: null, // the shown WorldInfo
  tickRate: 20, // its ticks per second
  restInfo: null, // GET /worlds/{w}
  obstacles: [],
  walls: [],
  groupNames: new Map(), // group index -> name (protocol v9: `subscribed.groups`, the `groups` event)
  neighborRadius: new Map(), // group name -> radius (from the scenario)
  agentRadius: new Map(), // group index -> body radius
};

/** The shown world's WorldInfo (from Welcome), or null before the first. */
export const selectedWorld = () => own.world;
/** The shown world's ticks per second. */
export const tickRate = () => own.tickRate;
/** The last GET /worlds/{w} answer, or null. */
export const restInfo = () => own.restInfo;
/** Whether REST last said the shown world is paused. */
export const isPaused = () => !!(own.restInfo && own.restInfo.paused);
export const obstacles = () => own.obstacles;
export const walls = () => own.walls;
export const groupName = (g) => own.groupNames.get(g);
/** The body radius of group `g`'s agents, or undefined before REST told. */
export const agentRadius = (g) => own.agentRadius.get(g);
export const knowsAgentRadius = (g) => own.agentRadius.has(g);
/** The neighbour radius of the group named `name` in its scenario, or undefined. */
export const neighborRadius = (name) => own.neighborRadius.get(name);

/** The world's group table (`subscribed.groups`, the `groups` event): index → name. */
export function setGroupNames(names) {
  own.groupNames.clear();
  names.forEach((n, i) => own.groupNames.set(i, n));
}

/** The world's rate changed (protocol v9 `tick_rate`): the clock and the interpolation period follow. */
export function setTickRate(hz) {
  own.world.tick_rate_hz = hz;
  own.tickRate = hz;
}

/** Show `name` when the next Welcome lists it (a world that moved is followed by name). */
export function preferWorld(name) {
  own.worldName = name;
}

/** A Welcome's world list: fill the picker and show the world shown before (or the wanted one). */
export function worldsAnnounced(worlds) {
  own.worlds = worlds;
  const sel = $('world');
  sel.replaceChildren(...worlds.map((wi) => new Option(wi.name, wi.name)));
  const pick = worlds.find((x) => x.name === (own.world ? own.world.name : own.worldName)) || worlds.find((x) => x.name === 'demo') || worlds[0];
  if (pick) selectWorld(pick.name, true);
}

export async function selectWorld(name, fromWelcome = false) {
  const info = own.worlds.find((w) => w.name === name);
  if (!info) return;
  const changed = !own.world || own.world.name !== name || own.world.id !== info.id;
  if (own.world && changed && !fromWelcome) unsubscribe(own.world.name);
  const gridChanged = !own.world || JSON.stringify(own.world) !== JSON.stringify(info);
  own.world = info;
  own.tickRate = info.tick_rate_hz;
  $('world').value = name;
  if (changed || gridChanged) {
    clearSelection();
    own.groupNames.clear();
    own.agentRadius.clear();
    unfit();
  }
  resetForWorld(changed || gridChanged);
  if (!isFitted()) fit();
  updateSubscription(true);
  await Promise.all([refreshWorld(), refreshShapes()]).catch(fail);
  await refreshScenarios().catch(fail);
  refreshGroups().catch(() => {});
  V.ready = true;
}

// REST-backed state: world info, obstacles, walls, scenarios, group names

export async function refreshWorld() {
  if (!own.world) return;
  const name = own.world.name;
  const info = await api('GET', wpath());
  if (!own.world || own.world.name !== name) return;
  const prevScenario = own.restInfo && own.restInfo.scenario;
  const reloaded = own.restInfo && own.restInfo.name === info.name && (info.tick < own.restInfo.tick || info.scenario !== prevScenario);
  own.restInfo = info;
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

export async function refreshShapes() {
  if (!own.world) return;
  const [obs, walls] = await Promise.all([api('GET', wpath('/obstacles')), api('GET', wpath('/walls'))]);
  own.obstacles = obs;
  own.walls = walls;
}

export async function refreshScenarios() {
  const list = await api('GET', '/scenarios');
  const sel = $('scenario');
  const cur = (own.restInfo && own.restInfo.scenario) || sel.value || '';
  sel.replaceChildren(...list.map((s) => new Option(`${s.name} (${s.origin})`, s.name)));
  if (list.some((s) => s.name === cur)) sel.value = cur;
}

export async function refreshGroups() {
  if (!own.world) return;
  // Group names come on the wire (stream.js); radii are not: match agent ids with the REST view.
  const agents = await api('GET', wpath('/agents?limit=2000'));
  const held = new Map(allAgents().map((a) => [a.id, a.group]));
  for (const a of agents) {
    const g = held.get(a.id);
    if (g !== undefined) own.agentRadius.set(g, a.radius);
  }
  const scen = own.restInfo && own.restInfo.scenario;
  if (scen) {
    try {
      const sc = await api('GET', `/scenarios/${encodeURIComponent(scen)}`);
      for (const g of sc.groups || []) {
        let r = 0;
        for (const e of g.behaviors || []) {
          const b = e.behavior || {};
          if (['separation', 'cohesion', 'alignment'].includes(b.type)) r = Math.max(r, b.neighbor_radius ?? 3);
        }
        if (r > 0) own.neighborRadius.set(g.name, r);
      }
    } catch {
      // The scenario may be gone; the overlay falls back to the default radius.
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Commands

export async function togglePause() {
  if (!own.restInfo) return;
  try {
    own.restInfo = await api('PATCH', wpath(), { paused: !own.restInfo.paused });
    await refreshWorld();
  } catch (e) { fail(e); }
}

export async function step() {
  const n = Math.max(1, Math.min(10000, parseInt($('step-n').value, 10) || 1));
  try {
    await api('POST', wpath('/step'), { ticks: n });
    await refreshWorld();
  } catch (e) { fail(e); }
}

export async function moveTo(x, y) {
  const agents = selectedIds();
  if (!agents.length) return;
  noteOrder(agents, x, y);
  ordered(agents);
  try {
    await api('POST', wpath('/move-to'), { agents, target: { x, y }, stopping_distance: 0 });
    V.moveToSent++;
    V.moveToAgents = agents;
    logEvent(`move <b>${agents.length}</b> agents to (${x.toFixed(1)}, ${y.toFixed(1)})`, '');
    updateSelectionText();
  } catch (e) { fail(e); }
}

/** Places an obstacle (a disc of `radius` round (x, y)); resolves to its id. */
export async function addObstacle(x, y, radius) {
  const r = await api('POST', wpath('/obstacles'), { center: { x, y }, radius });
  V.obstaclesPlaced++;
  return r.id;
}

export async function moveObstacle(o, x, y) {
  // No endpoint moves an obstacle: delete it and create it again at the drop point.
  try {
    await api('DELETE', wpath(`/obstacles/${o.id}`));
    await addObstacle(x, y, o.radius);
  } catch (e) { fail(e); }
  await refreshShapes().catch(fail);
}

export async function deleteObstacle(o) {
  try {
    await api('DELETE', wpath(`/obstacles/${o.id}`));
    await refreshShapes();
  } catch (e) { fail(e); }
}

export async function loadScenario() {
  const name = $('scenario').value;
  if (!name || !own.world) return;
  // The load restarts the world's ticks and AOI chains: stop streaming, drop what we hold,
  // and reconnect afterwards (Welcome carries the new bounds and grid).
  stopStreaming();
  try {
    await api('POST', wpath('/load'), { scenario: name });
    toast(`loaded ${name}`, true);
    logEvent(`loaded scenario <b>${escapeHtml(name)}</b>`, '');
    own.restInfo = null;
    clearSelection();
    unfit();
    await refreshWorld();
  } catch (e) { fail(e); }
  connect();
}

export async function saveScenario() {
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
