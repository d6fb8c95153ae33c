// World state and control over REST: refreshes of the world, shapes, scenarios and groups;
// pause, step, MoveTo, obstacles, scenario load and save.

import { $, S, V } from './state.js';
import { api, wpath, fail, toast } from './rest.js';
import { connect, fillFromSnapshot, allAgents } from './stream.js';
import { updateSelectionText, selectedIds, clearSelection, noteOrder } from './input.js';
import { updateTimeline } from './replay.js';
import { escapeHtml, logEvent } from './status.js';
import { ordered } from './stuck.js';
import { unfit } from './view.js';

// REST-backed state: world info, obstacles, walls, scenarios, group names

export async function refreshWorld() {
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

export async function refreshShapes() {
  if (!S.world) return;
  const [obs, walls] = await Promise.all([api('GET', wpath('/obstacles')), api('GET', wpath('/walls'))]);
  S.obstacles = obs;
  S.walls = walls;
}

export async function refreshScenarios() {
  const list = await api('GET', '/scenarios');
  const sel = $('scenario');
  const cur = (S.restInfo && S.restInfo.scenario) || sel.value || '';
  sel.replaceChildren(...list.map((s) => new Option(`${s.name} (${s.origin})`, s.name)));
  if (list.some((s) => s.name === cur)) sel.value = cur;
}

export async function refreshGroups() {
  if (!S.world) return;
  // Group names come on the wire (stream.js); radii are not: match agent ids with the REST view.
  const agents = await api('GET', wpath('/agents?limit=2000'));
  const held = new Map(allAgents().map((a) => [a.id, a.group]));
  for (const a of agents) {
    const g = held.get(a.id);
    if (g !== undefined) S.agentRadius.set(g, a.radius);
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

export async function togglePause() {
  if (!S.restInfo) return;
  try {
    S.restInfo = await api('PATCH', wpath(), { paused: !S.restInfo.paused });
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

/** Fetches the flow field of the first selected agent's MoveTo (when the overlay is on). */
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
