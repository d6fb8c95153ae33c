// steerd live viewer: binary WebSocket stream (decoded by the TypeScript SDK, sdk/) + REST for
// world control.
// Plain ES modules, no dependencies, served by steerd itself (GET /, /viewer/*). This is the
// entry: it gives `V` its methods, binds each module's listeners and starts the timers.

import { initPlayers } from './players.js';
import { $, V, canvas } from './state.js';
import { api, toast, showTokenField, token } from './rest.js';
import { takeCarriedSession, connect, ping, dropSocket as dropStream, visibleRect, allAgents, toWorld, isConnected, frameCounts, playerId, subscribedCells } from './stream.js';
import { refreshWorld, refreshShapes, selectedWorld, obstacles } from './world.js';
import { w2s, s2w, lookAt as placeView } from './view.js';
import { bindInput, selectedIds } from './input.js';
import { bindReplay, timeline } from './replay.js';
import { refreshFlow, refreshAvoidance, flowAnswer, avoidAnswer } from './overlays.js';
import { refreshStuck } from './stuck.js';
import { refreshMetrics, updateStatus } from './status.js';
import { draw } from './draw.js';

// What the browser test (and a curious person in the console) can read: `V`'s figures (state.js)
// and these methods, which reach into the stream and the view.
Object.assign(V, {
  /** Every agent held, in world units: {id, group, x, y, vx, vy, angle}. */
  agents() { return allAgents().map(toWorld); },
  worldToScreen(x, y) { const [sx, sy] = w2s(x, y); const r = canvas.getBoundingClientRect(); return { x: r.left + sx, y: r.top + sy }; },
  screenToWorld(x, y) { const r = canvas.getBoundingClientRect(); const [wx, wy] = s2w(x - r.left, y - r.top); return { x: wx, y: wy }; },
  viewRect() { return visibleRect(); },
  /** Centres the view on a world point at `scale` pixels per unit (for tests and screenshots). */
  lookAt(x, y, scale) { placeView(x, y, scale); },
  /** Closes the stream as a network failure would (the page reconnects and resumes). */
  dropSocket() { dropStream(); },
});
// Read-only views of state its owner module keeps (a getter each, read when the test asks).
Object.defineProperties(V, Object.getOwnPropertyDescriptors({
  /** The flow-field overlay's last answer ({status, goal, angles, …}). */
  get flow() { return flowAnswer(); },
  /** The avoidance overlays' last answer. */
  get avoid() { return avoidAnswer(); },
  /** The replay world's timeline (GET /worlds/{w}/replay), null for a live world. */
  get replay() { return timeline(); },
  get selection() { return selectedIds(); },
  /** The shown world's name (null before the first Welcome). */
  get world() { const w = selectedWorld(); return w ? w.name : null; },
  get obstacles() { return obstacles().slice(); },
  get connected() { return isConnected(); },
  /** The highest tick seen; keyframes and deltas applied; resyncs. */
  get tick() { return frameCounts().tick; },
  get keyframes() { return frameCounts().keyframes; },
  get deltas() { return frameCounts().deltas; },
  get chainBreaks() { return frameCounts().chainBreaks; },
  /** Welcome.player_id of the stream's session (kept across a drop: the page resumes it). */
  get player() { return playerId(); },
  get subscribedCells() { return subscribedCells(); },
}));
window.viewer = V;

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

takeCarriedSession();
bindInput();
bindReplay();
probeToken();
connect();
requestAnimationFrame(draw);
setInterval(updateStatus, 500);
setInterval(() => { refreshWorld().catch(() => {}); }, 1000);
setInterval(() => { refreshMetrics().catch(() => {}); }, 2000);
setInterval(() => { refreshShapes().catch(() => {}); }, 3000);
setInterval(() => { refreshFlow().catch(() => {}); }, 500);
setInterval(() => { refreshStuck().catch(() => {}); }, 1000);
$('ov-stuck').addEventListener('change', () => { refreshStuck().catch(() => {}); });
$('ov-flow').addEventListener('change', () => { refreshFlow().catch(() => {}); });
setInterval(() => { refreshAvoidance().catch(() => {}); }, 200); // 5 Hz, and only while wanted
for (const id of ['ov-vo', 'ov-pvc']) $(id).addEventListener('change', () => { refreshAvoidance().catch(() => {}); });
setInterval(ping, 10000);
refreshMetrics().catch(() => {});
initPlayers({ world: () => (selectedWorld() ? selectedWorld().name : null), token, toast });
