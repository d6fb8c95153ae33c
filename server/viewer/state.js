// The viewer's shared state: the page's elements, the stream and view state `S`, and the
// figures `V` that the browser test reads (its methods are added by app.js).

export const $ = (id) => document.getElementById(id);
export const canvas = $('canvas');
export const ctx = canvas.getContext('2d');

const PALETTE = ['#4fa3ff', '#ff7a59', '#5fd38d', '#f5c542', '#c37cff', '#3fd0d4', '#ff5fa2', '#a3b1c6', '#9bd651', '#ff9f40'];
export const groupColor = (g) => PALETTE[g % PALETTE.length];

/** What more than one module reads or writes (a module's own state lives in that module). */
export const S = {
  token: sessionStorage.getItem('steerd-token') || '',
  ws: null,
  wsState: 'connecting',
  welcome: null,
  /** Welcome.resume_token: sent in the next Hello to resume the session. */
  resume: null,
  quant: { pos_step: 0.01, vel_step: 0.1, predict_num: 32768 },
  cells: new Map(), // cell -> CellMap
  cellSeen: new Map(), // cell -> performance.now() of the last applied frame
  subCells: new Set(), // cells of the current subscription (Subscribed answer)
  nextRid: 1,
  // Status counters
  bytes: 0,
  bytesWindow: [], // [t, bytes]
  keyframes: 0,
  chainBreaks: 0,
  lateness: [], // [t, ms]
};

// What the browser test (and a curious person in the console) can read.
export const V = {
  ready: false,
  connected: false,
  tick: 0,
  frames: 0,
  keyframes: 0,
  deltas: 0,
  chainBreaks: 0,
  resyncs: [],
  destinationReached: 0,
  arrived: [],
  /** `gave_up` and `unreachable` events received; the agents stuck at the last poll (sorted);
   * the orders that ended short ({agent, kind, distance}); stuck polls answered. */
  stoppedShortEvents: 0,
  stuck: [],
  stoppedShort: [],
  stuckPolled: 0,
  moveToSent: 0,
  moveToAgents: [],
  obstaclesPlaced: 0,
  /** The flow-field overlay: arrows drawn (its last answer: `flow`, added by app.js). */
  flowArrows: 0,
  /** The avoidance overlays: how many fetches, and what the last frame drew (its last answer:
   * `avoid`, added by app.js). */
  avoidFetches: 0,
  avoidDrawn: { planes: 0, arrows: 0 },
  errors: [],
  /** Replay seeks sent (the timeline itself: `replay`, added by app.js). */
  replaySeeks: 0,
  /** `moved` messages followed ({name, to}): the world on screen moved to another server. */
  moved: [],
  /** Welcome.player_id of the stream's session (kept across a drop: the page resumes it). */
  get player() { return S.welcome ? S.welcome.player_id : null; },
  /** Closes the stream as a network failure would (the page reconnects and resumes). */
  dropSocket() { if (S.ws) S.ws.close(4000, 'dropped by the page'); },
  get subscribedCells() { return [...S.subCells]; },
};
