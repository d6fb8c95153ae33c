// Agents that are not getting where they were sent: those stuck on their way (no progress for
// 10 s, polled from REST `GET /worlds/{w}/agents?stuck=true` once a second while the overlay is
// on) and those whose order ended short of its goal (the `gave_up` and `unreachable` events).
// Drawn as red rings round the agents.

import { $, V } from './state.js';
import { api, wpath } from './rest.js';
import { selectedWorld } from './world.js';

/** This module's own state. */
const own = {
  /** agent id -> how far from its stop point (stuck, from REST). */
  stuck: new Map(),
  /** agent id -> {kind: 'gave_up' | 'unreachable', distance} (from the events). */
  stopped: new Map(),
  busy: false,
  world: null,
};

const wanted = () => $('ov-stuck').checked && !!selectedWorld();

/** Forgets the marks of another world than the one shown. */
function sameWorld() {
  const shown = selectedWorld();
  const name = shown ? shown.name : null;
  if (own.world === name) return;
  own.stuck.clear();
  own.stopped.clear();
  own.world = name;
}

/** Polls the stuck agents of the shown world (once a second while the overlay is on). */
export async function refreshStuck() {
  sameWorld();
  if (!wanted()) {
    own.stuck.clear();
    return;
  }
  if (own.busy) return;
  own.busy = true;
  try {
    const world = own.world;
    const agents = await api('GET', wpath('/agents?stuck=true&limit=10000'));
    if (world !== own.world) return; // the world changed meanwhile
    own.stuck.clear();
    for (const a of agents) own.stuck.set(a.id, a.order ? a.order.distance : 0);
    V.stuckPolled++;
  } finally {
    own.busy = false;
  }
  publish();
}

/** A `gave_up` or `unreachable` event of the shown world. */
export function stoppedShort(kind, agent, distance) {
  sameWorld();
  own.stopped.set(agent, { kind, distance });
  publish();
}

/** The agents were sent somewhere again: forget how their last orders ended. */
export function ordered(agents) {
  for (const id of agents) own.stopped.delete(id);
  publish();
}

/** Why `id` is marked, or null: 'stuck', 'gave_up' or 'unreachable'. */
export function stuckMark(id) {
  if (!$('ov-stuck').checked) return null;
  if (own.stuck.has(id)) return 'stuck';
  const s = own.stopped.get(id);
  return s ? s.kind : null;
}

function publish() {
  V.stuck = [...own.stuck.keys()].sort((a, b) => a - b);
  V.stoppedShort = [...own.stopped].map(([agent, s]) => ({ agent, kind: s.kind, distance: s.distance }));
}
