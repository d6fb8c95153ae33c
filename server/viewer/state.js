// What every module uses and nobody owns: the page's elements and the group palette; and the
// figures `V` that the browser test reads. The viewer's state lives in the module that writes it
// (stream.js, world.js, view.js, input.js, …), and others read it through that module's functions.

export const $ = (id) => document.getElementById(id);
export const canvas = $('canvas');
export const ctx = canvas.getContext('2d');

const PALETTE = ['#4fa3ff', '#ff7a59', '#5fd38d', '#f5c542', '#c37cff', '#3fd0d4', '#ff5fa2', '#a3b1c6', '#9bd651', '#ff9f40'];
export const groupColor = (g) => PALETTE[g % PALETTE.length];

/**
 * What the browser test (and a curious person in the console) can read. Each figure here has one
 * writer, named beside it, and no module reads another's figure; app.js adds the methods and the
 * getters over state a module owns (connected, world, tick, selection, …).
 */
export const V = {
  /** world.js: the first world shown is set up (REST refreshed). */
  ready: false,
  /** stream.js: frames received of the shown world, resyncs (why), destinations reached. */
  frames: 0,
  resyncs: [],
  destinationReached: 0,
  arrived: [],
  /** stream.js: `gave_up` and `unreachable` events received. stuck.js: the agents stuck at the
   * last poll (sorted); the orders that ended short ({agent, kind, distance}); stuck polls answered. */
  stoppedShortEvents: 0,
  stuck: [],
  stoppedShort: [],
  stuckPolled: 0,
  /** world.js: MoveTo orders accepted, the agents of the last, obstacles placed. */
  moveToSent: 0,
  moveToAgents: [],
  obstaclesPlaced: 0,
  /** overlays.js: the flow-field arrows drawn (its last answer: `flow`). */
  flowArrows: 0,
  /** overlays.js: avoidance fetches, and what the last frame drew (its last answer: `avoid`). */
  avoidFetches: 0,
  avoidDrawn: { planes: 0, arrows: 0 },
  /** rest.js: the errors shown. */
  errors: [],
  /** replay.js: replay seeks sent (the timeline itself: `replay`). */
  replaySeeks: 0,
  /** stream.js: `moved` messages followed ({name, to}): the world on screen moved to another server. */
  moved: [],
};
