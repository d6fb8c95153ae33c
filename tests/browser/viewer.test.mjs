// The live viewer in a real headless Chromium (Debian's /usr/bin/chromium via playwright-core).
// Starts steerd (STEERD_BIN) on a free port with a scratch data directory, opens the page and
// drives it like a person: agents move between two captures, box-select + right-click MoveTo
// until DestinationReached arrives for every selected agent, place and drag an obstacle (checked
// through REST), pause / step / resume, the status panel, the flow-field and avoidance overlays;
// the page follows its world when it is handed off to another server.
// Keeps screenshots in tests/artifacts/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, mkdirSync, rmSync, existsSync } from 'node:fs';
import { createServer, createServer as createNetServer, connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');
const BIN = process.env.STEERD_BIN || join(root, 'target/release/steerd');
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = join(root, 'tests/artifacts');
const WORLD = 'demo';

const servers = [];
let base;
let context;
let page;
let scratch;
const pageErrors = [];

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

async function rest(method, path, body) {
  const r = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  assert.ok(r.ok, `${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

/** A REST call to the server at `srvBase`: its status and parsed body, whatever the status. */
async function callAt(srvBase, method, path, body) {
  const r = await fetch(srvBase + path, { method, headers: body === undefined ? {} : { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

/** A square world of `side` with `count` wanderers (for the handoff tests). */
function wanderScenario(name, side, count, seed) {
  return {
    name, bounds: { min: { x: 0, y: 0 }, max: { x: side, y: side } }, edge: 'wrap', tick_rate: 20, seed,
    groups: [{ name: 'w', count, area: { type: 'rect', min_x: 0, min_y: 0, max_x: side, max_y: side },
      limits: { max_speed: 5, max_accel: 10, radius: 0.5 }, initial_speed: 3, behaviors: [{ behavior: { type: 'wander' } }] }],
  };
}

async function until(what, fn, timeoutMs = 10000, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Starts steerd on a free port; returns {base, proc, log()}. */
async function startServer(extra = []) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const dataDir = join(scratch, `data-${port}`);
  const proc = spawn(BIN, ['--listen', `127.0.0.1:${port}`, '--data-dir', dataDir, '--scenarios-dir', join(root, 'scenarios'), ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG || 'warn' },
  });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  servers.push(proc);
  await until('the server to answer /health', async () => {
    if (proc.exitCode !== null) throw new Error(`steerd exited (${proc.exitCode}):\n${log}`);
    try { return (await fetch(`${url}/health`)).ok; } catch { return false; }
  }, 15000);
  return { base: url, proc, log: () => log };
}

async function stopServer(proc) {
  if (proc.exitCode !== null) return;
  proc.kill('SIGTERM');
  await Promise.race([new Promise((r) => proc.once('exit', r)), new Promise((r) => setTimeout(r, 5000))]);
  if (proc.exitCode === null) proc.kill('SIGKILL');
}

before(async () => {
  assert.ok(existsSync(BIN), `steerd binary not found at ${BIN} (set STEERD_BIN)`);
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} not found (apt-get install chromium)`);
  scratch = mkdtempSync(join(tmpdir(), 'steerd-viewer-'));
  ({ base } = await startServer());

  context = await chromium.launchPersistentContext(join(scratch, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
    viewport: { width: 1440, height: 900 },
    timeout: 20000,
  });
  page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(10000);
  page.on('pageerror', (e) => pageErrors.push(`pageerror: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(`console: ${m.text()}`); });
  // Offline: the page must not load anything from elsewhere.
  await context.route((url) => url.hostname !== '127.0.0.1', (r) => {
    pageErrors.push(`external request: ${r.request().url()}`);
    return r.abort();
  });
});

after(async () => {
  try { if (context) await context.close(); } catch { /* already gone */ }
  for (const p of servers) await stopServer(p);
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

const agentsNow = () => page.evaluate(() => window.viewer.agents());

test('viewer: streams, selects, moves, places obstacles', { timeout: 80000 }, async (t) => {
  await t.test('the page loads from the server and streams the demo world', async () => {
    const resp = await page.goto(`${base}/`);
    assert.equal(resp.status(), 200);
    assert.match(resp.headers()['content-type'], /text\/html/);
    await page.waitForFunction(() => window.viewer && window.viewer.ready && window.viewer.keyframes > 0 && window.viewer.agents().length > 0, null, { timeout: 15000 });
    const v = await page.evaluate(() => ({ world: window.viewer.world, cells: window.viewer.subscribedCells.length }));
    assert.equal(v.world, WORLD);
    assert.ok(v.cells > 0, 'subscribed to AOI cells');
  });

  await t.test('agents move between two captures', async () => {
    const a = await agentsNow();
    const tick0 = await page.evaluate(() => window.viewer.tick);
    // Twenty ticks (a second at 20 Hz) reach the page, however long that takes.
    await until('twenty more ticks on the page', () => page.evaluate((t) => window.viewer.tick > t + 20, tick0), 15000);
    const b = new Map((await agentsNow()).map((x) => [x.id, x]));
    const tick1 = await page.evaluate(() => window.viewer.tick);
    let moved = 0;
    for (const x of a) {
      const y = b.get(x.id);
      if (y && Math.hypot(y.x - x.x, y.y - x.y) > 0.05) moved++;
    }
    assert.ok(tick1 > tick0 + 5, `ticks advance (${tick0} → ${tick1})`);
    assert.ok(moved >= a.length / 2, `${moved} of ${a.length} agents moved`);
    const deltas = await page.evaluate(() => window.viewer.deltas);
    assert.ok(deltas > 0, 'deltas applied');
  });

  await t.test('box-select and right-click MoveTo; DestinationReached arrives for each', async () => {
    const obstacles = await rest('GET', `/worlds/${WORLD}/obstacles`);
    const clear = (x, y, m) => obstacles.every((o) => Math.hypot(o.center[0] - x, o.center[1] - y) > o.radius + m);
    const agents = await agentsNow();
    const half = 12;
    // The densest spot whose box corners are off obstacles (a drag starting on one moves it).
    let best = null;
    for (const c of agents) {
      const n = agents.filter((o) => Math.abs(o.x - c.x) <= half - 2 && Math.abs(o.y - c.y) <= half - 2).length;
      if (n >= 2 && clear(c.x - half, c.y + half, 2) && c.x > 30 && c.x < 270 && c.y > 30 && c.y < 270 && (!best || n > best.n)) best = { c, n };
    }
    assert.ok(best, 'a cluster of agents to select');
    const p0 = await page.evaluate(([x, y]) => window.viewer.worldToScreen(x, y), [best.c.x - half, best.c.y + half]);
    const p1 = await page.evaluate(([x, y]) => window.viewer.worldToScreen(x, y), [best.c.x + half, best.c.y - half]);
    await page.mouse.move(p0.x, p0.y);
    await page.mouse.down();
    await page.mouse.move((p0.x + p1.x) / 2, (p0.y + p1.y) / 2, { steps: 4 });
    await page.mouse.move(p1.x, p1.y, { steps: 4 });
    await page.mouse.up();
    const selection = await page.evaluate(() => window.viewer.selection);
    assert.ok(selection.length >= 1, `selected ${selection.length} agents`);

    // A free spot 25–45 units away, inside the world, off obstacles.
    let target = null;
    for (let d = 25; d <= 45 && !target; d += 10) {
      for (let k = 0; k < 16 && !target; k++) {
        const x = best.c.x + d * Math.cos((k * Math.PI) / 8);
        const y = best.c.y + d * Math.sin((k * Math.PI) / 8);
        if (x > 20 && x < 280 && y > 20 && y < 280 && clear(x, y, 8)) target = { x, y };
      }
    }
    assert.ok(target, 'a free spot for the MoveTo');
    const q = await page.evaluate(([x, y]) => window.viewer.worldToScreen(x, y), [target.x, target.y]);
    await page.mouse.click(q.x, q.y, { button: 'right' });
    await until('the MoveTo to be accepted', () => page.evaluate(() => window.viewer.moveToSent === 1), 5000);
    const sent = await page.evaluate(() => window.viewer.moveToAgents);
    assert.deepEqual([...sent].sort((x, y) => x - y), [...selection].sort((x, y) => x - y));
    await until(`DestinationReached for all ${selection.length} selected agents`, async () => {
      const arrived = new Set(await page.evaluate(() => window.viewer.arrived));
      return selection.every((id) => arrived.has(id));
    }, 30000, 200);
    const arrived = await page.evaluate(() => window.viewer.arrived);
    for (const id of arrived) assert.ok(selection.includes(id), `only commanded agents arrive (${id})`);
    // They went there (the formation spreads them round it; once arrived, their own
    // behaviours may move them on, so only the closest one is checked).
    const now = (await agentsNow()).filter((x) => selection.includes(x.id));
    const closest = Math.min(...now.map((a) => Math.hypot(a.x - target.x, a.y - target.y)));
    assert.ok(closest < 15, `a commanded agent near the target (closest at ${closest.toFixed(1)})`);
    await page.waitForTimeout(300); // let the arrival rings show in the screenshot
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'viewer.png') });
  });

  await t.test('flow-field overlay: a MoveTo behind a wall shows its field', async () => {
    // One agent, a wall between it and a free target 40 units away: the goal is hidden, so the
    // server builds a flow field, and the overlay draws it. The world is paused while the agent
    // is picked and clicked, so that it stays behind the wall and under the pointer.
    await rest('PATCH', `/worlds/${WORLD}`, { paused: true });
    const { tick: pausedAt } = await rest('GET', `/worlds/${WORLD}`);
    await until('the last frames before the pause to reach the page', () => page.evaluate((t) => window.viewer.tick >= t, pausedAt), 5000);
    const obstacles = await rest('GET', `/worlds/${WORLD}/obstacles`);
    const clear = (x, y, m) => obstacles.every((o) => Math.hypot(o.center[0] - x, o.center[1] - y) > o.radius + m);
    const agents = await agentsNow();
    let pick = null;
    for (const a of agents) {
      for (const dir of [1, -1]) {
        const tx = a.x + 40 * dir;
        if (!pick && tx > 20 && tx < 280 && a.y > 40 && a.y < 260 && clear(tx, a.y, 8) && clear(a.x + 20 * dir, a.y, 22)) pick = { a, tx, dir };
      }
    }
    assert.ok(pick, 'an agent with room for a wall and a free target');
    const mx = pick.a.x + 20 * pick.dir;
    await rest('POST', `/worlds/${WORLD}/walls`, { a: { x: mx, y: pick.a.y - 18 }, b: { x: mx, y: pick.a.y + 18 } });
    await page.evaluate(() => { document.getElementById('ov-flow').checked = true; });
    await page.locator('#ov-flow').dispatchEvent('change');
    // Click-select the agent where it is now, then right-click the target.
    const now = (await agentsNow()).find((x) => x.id === pick.a.id);
    assert.ok(now, 'the agent is still streamed');
    const p = await page.evaluate(([x, y]) => window.viewer.worldToScreen(x, y), [now.x, now.y]);
    await page.mouse.click(p.x, p.y);
    const sel = await page.evaluate(() => window.viewer.selection);
    assert.ok(sel.length >= 1, 'an agent is selected');
    const q = await page.evaluate(([x, y]) => window.viewer.worldToScreen(x, y), [pick.tx, now.y]);
    const sent = await page.evaluate(() => window.viewer.moveToSent);
    await page.mouse.click(q.x, q.y, { button: 'right' });
    await until('the MoveTo to be accepted', () => page.evaluate((n) => window.viewer.moveToSent === n + 1, sent), 5000);
    await rest('PATCH', `/worlds/${WORLD}`, { paused: false });
    const flow = await until('the overlay to show a ready field', async () => {
      const f = await page.evaluate(() => window.viewer.flow);
      return f && f.status === 'ready' && f.angles.length > 0 ? f : null;
    }, 10000, 100);
    assert.equal(flow.agent, Math.min(...sel));
    assert.ok(Math.hypot(flow.target[0] - pick.tx, flow.target[1] - now.y) < 1, 'the field is for the clicked target');
    assert.ok(flow.angles.some((a) => a !== null), 'the field has directions');
    assert.ok(flow.cols <= 64 && flow.rows <= 64, `sampled to at most 64 per side (${flow.cols}×${flow.rows})`);
    await until('arrows on the canvas', () => page.evaluate(() => window.viewer.flowArrows > 0), 3000);
    const text = await page.locator('#flow-status').textContent();
    assert.match(text, /following a flow field/);
    mkdirSync(ARTIFACTS, { recursive: true });
    await page.screenshot({ path: join(ARTIFACTS, 'viewer-flowfield.png') });
    await page.evaluate(() => { document.getElementById('ov-flow').checked = false; });
  });

  await t.test('place an obstacle by clicking, see it in GET /obstacles, drag it', async () => {
    const before = await rest('GET', `/worlds/${WORLD}/obstacles`);
    const agents = await agentsNow();
    // A spot away from obstacles and agents.
    let spot = null;
    for (let x = 40; x <= 260 && !spot; x += 20) {
      for (let y = 40; y <= 260 && !spot; y += 20) {
        if (before.every((o) => Math.hypot(o.center[0] - x, o.center[1] - y) > o.radius + 16) && agents.every((a) => Math.hypot(a.x - x, a.y - y) > 8)) spot = { x, y };
      }
    }
    assert.ok(spot, 'a free spot');
    await page.check('input[name="tool"][value="obstacle"]');
    await page.fill('#obstacle-radius', '4');
    const s = await page.evaluate(([x, y]) => window.viewer.worldToScreen(x, y), [spot.x, spot.y]);
    await page.mouse.click(s.x, s.y);
    const added = await until('the new obstacle in GET /obstacles', async () => {
      const now = await rest('GET', `/worlds/${WORLD}/obstacles`);
      return now.length === before.length + 1 && now.find((o) => !before.some((b) => b.id === o.id));
    }, 5000);
    assert.ok(Math.hypot(added.center[0] - spot.x, added.center[1] - spot.y) < 1, `placed at the click (${added.center} vs ${spot.x},${spot.y})`);
    assert.equal(added.radius, 4);
    await until('the page to show it', () => page.evaluate((id) => window.viewer.obstacles.some((o) => o.id === id), added.id), 5000);

    // Drag it 10 units right (delete + re-create at the drop point).
    const d = await page.evaluate(([x, y]) => window.viewer.worldToScreen(x, y), [spot.x + 10, spot.y]);
    await page.mouse.move(s.x, s.y);
    await page.mouse.down();
    await page.mouse.move((s.x + d.x) / 2, d.y, { steps: 3 });
    await page.mouse.move(d.x, d.y, { steps: 3 });
    await page.mouse.up();
    const moved = await until('the dragged obstacle at its new place', async () => {
      const now = await rest('GET', `/worlds/${WORLD}/obstacles`);
      return now.length === before.length + 1 && !now.some((o) => o.id === added.id) && now.find((o) => Math.hypot(o.center[0] - spot.x - 10, o.center[1] - spot.y) < 1);
    }, 5000);
    assert.equal(moved.radius, 4);
    await page.check('input[name="tool"][value="select"]');
  });

  await t.test('pause, step and resume from the toolbar', async () => {
    await page.click('#pause');
    await until('the world to pause', async () => (await rest('GET', `/worlds/${WORLD}`)).paused, 5000);
    const t0 = (await rest('GET', `/worlds/${WORLD}`)).tick;
    await page.fill('#step-n', '5');
    await page.click('#step');
    await until('5 ticks stepped', async () => (await rest('GET', `/worlds/${WORLD}`)).tick === t0 + 5, 5000);
    await until('the page to see the stepped tick', () => page.evaluate((t) => window.viewer.tick >= t, t0 + 5), 5000);
    await page.click('#pause');
    await until('the world to resume', async () => !(await rest('GET', `/worlds/${WORLD}`)).paused, 5000);
  });

  await t.test('the status panel shows live numbers', async () => {
    // Read until a metrics poll has filled every field (or 10 s pass), then check each.
    const read = () => page.evaluate(() => Object.fromEntries(['s-tick', 's-tickdur', 's-agents', 's-subs', 's-bytes', 's-keys', 's-late'].map((id) => [id, document.getElementById(id).textContent])));
    const filled = (s) => /^\d+/.test(s['s-tick']) && /ms$/.test(s['s-tickdur']) && /^\d+ \(\d+ streamed\)$/.test(s['s-agents'])
      && /^[1-9]\d*$/.test(s['s-subs']) && /\/s/.test(s['s-bytes']) && /^[1-9]/.test(s['s-keys']) && /ms/.test(s['s-late']);
    let s = await read();
    for (const end = Date.now() + 10000; !filled(s) && Date.now() < end;) {
      await new Promise((r) => setTimeout(r, 100));
      s = await read();
    }
    assert.match(s['s-tick'], /^\d+/);
    assert.match(s['s-tickdur'], /ms$/);
    assert.match(s['s-agents'], /^\d+ \(\d+ streamed\)$/);
    assert.match(s['s-subs'], /^[1-9]\d*$/);
    assert.match(s['s-bytes'], /\/s/);
    assert.match(s['s-keys'], /^[1-9]/);
    assert.match(s['s-late'], /ms/);
  });

  await t.test('zooming in shrinks the area of interest', async () => {
    const before = await page.evaluate(() => window.viewer.subscribedCells.length);
    const box = await page.locator('#canvas').boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    for (let i = 0; i < 6; i++) await page.mouse.wheel(0, -400);
    await until('a smaller subscription', () => page.evaluate((n) => window.viewer.subscribedCells.length < n, before), 5000);
    const frames = await page.evaluate(() => window.viewer.frames);
    await until('frames after the zoom (still streaming)', () => page.evaluate((n) => window.viewer.frames > n, frames), 5000);
    await page.keyboard.press('f');
  });

  await t.test('no page errors', () => {
    assert.deepEqual(pageErrors, []);
  });
});

test('viewer: stuck agents and orders that ended short are ringed; REST lists the stuck ones', { timeout: 60000 }, async () => {
  // A paused world stepped by REST: a unit sent onto a rock that cannot move (max_speed 0)
  // presses against it and makes no progress (stuck once 10 s pass); a unit sent into a closed
  // box of walls stops outside at the nearest reachable point (the `unreachable` event).
  const world = 'stuck-view';
  await rest('POST', '/worlds', { name: world, paused: true });
  for (const [a, b] of [[[70, 70], [90, 70]], [[90, 70], [90, 90]], [[90, 90], [70, 90]], [[70, 90], [70, 70]]]) {
    await rest('POST', `/worlds/${world}/walls`, { a: { x: a[0], y: a[1] }, b: { x: b[0], y: b[1] } });
  }
  const pts = (x, y) => ({ type: 'points', points: [{ x, y }] });
  await rest('POST', `/worlds/${world}/agents`, { group: 'rock', count: 1, area: pts(50, 50), limits: { max_speed: 0, radius: 3 } });
  const [mover] = (await rest('POST', `/worlds/${world}/agents`, { group: 'mover', count: 1, area: pts(30, 50) })).agents;
  const [walker] = (await rest('POST', `/worlds/${world}/agents`, { group: 'walker', count: 1, area: pts(40, 80) })).agents;
  await rest('POST', `/worlds/${world}/move-to`, { agents: [mover], target: { x: 50, y: 50 }, stopping_distance: 0.5 });
  await rest('POST', `/worlds/${world}/move-to`, { agents: [walker], target: { x: 80, y: 80 }, stopping_distance: 0.5 });
  const p = await context.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  p.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  try {
    await p.goto(`${base}/?world=${world}`);
    // Paused: the page has the world but no frame until it steps.
    await p.waitForFunction((w) => window.viewer && window.viewer.ready && window.viewer.world === w && window.viewer.subscribedCells.length > 0, world, { timeout: 15000 });
    assert.deepEqual(await rest('GET', `/worlds/${world}/agents?stuck=true`), [], 'nobody is stuck before the world runs');
    // 30 simulated seconds: the walker reaches the box, the mover has pressed on the rock for > 10 s.
    await rest('POST', `/worlds/${world}/step`, { ticks: 600 });
    const stuck = await rest('GET', `/worlds/${world}/agents?stuck=true`);
    assert.deepEqual(stuck.map((a) => a.id), [mover], 'only the unit pressing on the rock is stuck');
    const o = stuck[0].order;
    assert.equal(o.state, 'moving');
    assert.equal(o.stuck, true);
    assert.ok(o.stalled_secs >= 10, `stalled ${o.stalled_secs} s`);
    assert.ok(o.distance > 2.5 && o.distance < 4, `pressing on the rock, ${o.distance} from its centre`);
    const w = await rest('GET', `/worlds/${world}/agents/${walker}`);
    assert.equal(w.order.state, 'unreachable');
    await until('the stuck unit ringed in the viewer', () => p.evaluate((id) => window.viewer.stuck.includes(id), mover), 5000)
      .catch(async (e) => { throw new Error(`${e.message}: ${JSON.stringify(await p.evaluate(() => ({ polled: window.viewer.stuckPolled, stuck: window.viewer.stuck, errors: window.viewer.errors })))} ${errors}`); });
    const short = await until('the unreachable event in the viewer', () => p.evaluate((id) => window.viewer.stoppedShort.find((s) => s.agent === id), walker), 5000);
    assert.equal(short.kind, 'unreachable');
    assert.ok(short.distance > 10 && short.distance < 16, `stopped ${short.distance} from the target`);
    assert.equal(await p.evaluate(() => window.viewer.stuck.length), 1, 'the rock (no order) and the walker are not stuck');
    mkdirSync(ARTIFACTS, { recursive: true });
    await p.evaluate(() => window.viewer.lookAt(60, 65, 8));
    await p.waitForTimeout(300);
    await p.screenshot({ path: join(ARTIFACTS, 'viewer-stuck.png') });
    assert.deepEqual(errors, []);
  } finally {
    await p.close();
    await rest('DELETE', `/worlds/${world}`);
  }
});

test('viewer: velocity-obstacle and preferred-vs-chosen overlays of the selected agent', { timeout: 60000 }, async () => {
  // The crossing scenario: 120 agents on a ring, each with reciprocal_avoidance, ~4 units apart,
  // so every agent has neighbours within the default neighbor_dist of 10.
  const srv = await startServer(['--scenario', 'crossing']);
  const p = await context.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  p.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
  const fetched = [];
  p.on('request', (r) => { if (r.url().includes('/avoidance')) fetched.push(new URL(r.url()).pathname); });
  const patch = (body) => fetch(`${srv.base}/worlds/${WORLD}`, { method: 'PATCH', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  try {
    await p.goto(`${srv.base}/`);
    await p.waitForFunction(() => window.viewer && window.viewer.ready && window.viewer.keyframes > 0, null, { timeout: 15000 });
    // Both toggles exist and start off.
    assert.equal(await p.locator('#ov-vo').isChecked(), false);
    assert.equal(await p.locator('#ov-pvc').isChecked(), false);
    // Paused, so that the agent stays under the pointer and the picture holds still.
    assert.ok((await patch({ paused: true })).ok);
    // Step the crowd towards the middle (12.5 s at up to 4 u/s from radius 80): dense, each
    // agent with 10 neighbours, and (on this build) still room for every agent's velocity.
    const stepped = await fetch(`${srv.base}/worlds/${WORLD}/step`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ ticks: 250 }) });
    assert.ok(stepped.ok, `step: ${stepped.status}`);
    const { tick: target } = await (await fetch(`${srv.base}/worlds/${WORLD}`)).json();
    await until('the page to see the stepped tick', () => p.evaluate((t) => window.viewer.tick >= t, target), 5000);
    // A toggle on but nothing selected: nothing is polled (several poll periods pass).
    await p.check('#ov-vo');
    await p.waitForTimeout(600);
    assert.deepEqual(fetched, [], 'no selection, no requests');
    // Select one agent by clicking it (zoomed in so that a click hits one agent).
    const agents = await p.evaluate(() => window.viewer.agents());
    agents.sort((q, r) => Math.hypot(q.x - 100, q.y - 100) - Math.hypot(r.x - 100, r.y - 100));
    const a = agents[Math.floor(agents.length / 2)]; // in the crowd, not its very centre
    const cellsBefore = await p.evaluate(() => window.viewer.subscribedCells.length);
    await p.evaluate(([x, y]) => window.viewer.lookAt(x, y, 12), [a.x, a.y]);
    await until('the re-subscription for the zoomed view', () => p.evaluate((n) => window.viewer.subscribedCells.length < n, cellsBefore), 5000);
    const at = await p.evaluate(([x, y]) => window.viewer.worldToScreen(x, y), [a.x, a.y]);
    await p.mouse.click(at.x, at.y);
    const sel = await p.evaluate(() => window.viewer.selection);
    assert.ok(sel.includes(a.id), `the clicked agent ${a.id} is selected (${sel})`);
    const id = Math.min(...sel);
    await p.check('#ov-pvc');
    const v = await until('the avoidance answer and both overlays drawn', async () => {
      const r = await p.evaluate(() => ({ avoid: window.viewer.avoid, drawn: window.viewer.avoidDrawn }));
      return r.avoid && r.avoid.agent === id && r.drawn.planes > 0 && r.drawn.arrows === 2 ? r : null;
    }, 10000, 100);
    assert.ok(fetched.every((u) => u === `/worlds/${WORLD}/agents/${id}/avoidance`), `only the selected agent's endpoint: ${fetched}`);
    assert.equal(v.avoid.active, true, 'crossing agents avoid reciprocally');
    assert.equal(v.drawn.planes, v.avoid.half_planes.length, 'one line per half-plane');
    assert.ok(v.avoid.half_planes.length >= 1, 'neighbours within 10 units');
    assert.match(await p.locator('#avoid-status').textContent(), /avoids reciprocally/);
    mkdirSync(ARTIFACTS, { recursive: true });
    await p.screenshot({ path: join(ARTIFACTS, 'viewer-avoidance.png') });
    // Both off: the overlay clears and polling stops.
    await p.uncheck('#ov-vo');
    await p.uncheck('#ov-pvc');
    await until('the overlay to clear', () => p.evaluate(() => window.viewer.avoid === null), 5000);
    const n = fetched.length;
    await p.waitForTimeout(600);
    assert.equal(fetched.length, n, 'no polling while both toggles are off');
    assert.deepEqual(errors, []);
  } finally {
    await p.close();
    await stopServer(srv.proc);
  }
});

test('viewer: admin token field when the server has one', { timeout: 30000 }, async () => {
  const token = 'viewer-test-token';
  const srv = await startServer(['--admin-token', token]);
  const p = await context.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(e.message));
  try {
    await p.goto(`${srv.base}/`);
    await p.waitForFunction(() => window.viewer && window.viewer.ready && window.viewer.keyframes > 0, null, { timeout: 15000 });
    await p.waitForSelector('#token-box', { state: 'visible', timeout: 5000 });
    // Without the token a mutation is refused (and said so on the page).
    await p.click('#pause');
    await until('the refusal to show', () => p.evaluate(() => window.viewer.errors.some((e) => /admin token|401|Bearer/.test(e))), 5000);
    // The test reads with the token: a secured server answers no read without one.
    const auth = { headers: { Authorization: `Bearer ${token}` } };
    assert.equal((await fetch(`${srv.base}/worlds/${WORLD}`)).status, 401);
    const info = await (await fetch(`${srv.base}/worlds/${WORLD}`, auth)).json();
    assert.equal(info.paused, false);
    // With it, it works; the page reconnects the stream with the token in Hello.
    await p.fill('#token', token);
    await p.click('#token-apply');
    await until('the stream to come back', () => p.evaluate(() => window.viewer.connected && window.viewer.keyframes > 0), 5000);
    await p.click('#pause');
    await until('the world to pause with the token', async () => (await (await fetch(`${srv.base}/worlds/${WORLD}`, auth)).json()).paused, 5000);
    // The players panel (an admin call) lists who plays in the world: from a second page, the
    // SDK the viewer bundles connects without a token (dev mode: an anonymous player) and spawns 2.
    const q = await context.newPage();
    try {
      await q.goto(`${srv.base}/`);
      const who = await q.evaluate(async (world) => {
        const sdk = await import('/viewer/sdk/index.js');
        const c = await sdk.connect(location.origin);
        await c.spawn(world, { group: 'panel', count: 2, area: { type: 'circle', x: 20, y: 20, radius: 2 } });
        window.panelClient = c;
        return [c.playerId, c.role];
      }, WORLD);
      assert.match(who[0], /^anon-/);
      assert.equal(who[1], 'player');
      const row = new RegExp(`^${who[0]} · player · 1 conn · 2 agents`);
      try {
        await until('the players panel to list the anonymous player', () => p.evaluate((src) =>
          [...document.querySelectorAll('#players-list li')].some((li) => new RegExp(src).test(li.textContent)), row.source), 10000);
      } catch (e) {
        const seen = await p.evaluate(() => [document.getElementById('players-note').textContent, ...[...document.querySelectorAll('#players-list li')].map((li) => li.textContent)]);
        throw new Error(`${e.message}; panel: ${JSON.stringify(seen)}`);
      }
      // The page's own stream resumes its session after a drop: the same anonymous player.
      await q.waitForFunction(() => window.viewer && window.viewer.connected && window.viewer.player, null, { timeout: 10000 });
      const before = await q.evaluate(() => window.viewer.player);
      assert.match(before, /^anon-/);
      await q.evaluate(() => window.viewer.dropSocket());
      await until('the page to notice the drop', () => q.evaluate(() => !window.viewer.connected), 5000);
      await until('the page to reconnect', () => q.evaluate(() => window.viewer.connected), 10000);
      assert.equal(await q.evaluate(() => window.viewer.player), before, 'the same player after the reconnect');
    } finally {
      await q.close();
    }
    assert.deepEqual(errors, []);
  } finally {
    await p.close();
    await stopServer(srv.proc);
  }
});

test('viewer: follows its world to another server when it is handed off (moved)', { timeout: 60000 }, async () => {
  // Two servers of one cluster; a durable world on A, watched by the page (subscribed: its
  // session moves with the world). A hands it to B: the page gets `moved` and opens B's viewer on
  // the world with its session's resume token; there it is the same player, streams the world
  // from B with every agent, ticking on, and says where the world went.
  const secret = 'viewer-handoff-secret-0123456789';
  const a = await startServer(['--persistence', '--cluster-secret', secret]);
  const b = await startServer(['--persistence', '--cluster-secret', secret]);
  const COUNT = 60;
  const scenario = wanderScenario('viewer-arena', 100, COUNT, 5);
  assert.equal((await callAt(a.base, 'PUT', '/scenarios/viewer-arena', scenario)).status < 300, true);
  assert.equal((await callAt(a.base, 'POST', '/worlds', { name: 'arena', scenario: 'viewer-arena' })).status, 201);
  const p = await context.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(e.message));
  try {
    await p.goto(`${a.base}/?world=arena`);
    await p.waitForFunction((n) => window.viewer && window.viewer.ready && window.viewer.connected && window.viewer.world === 'arena' && window.viewer.agents().length === n, COUNT, { timeout: 15000 });
    const player = await p.evaluate(() => window.viewer.player);
    assert.match(player, /^anon-/);
    const h = await callAt(a.base, 'POST', '/worlds/arena/handoff', { to: b.base });
    assert.equal(h.status, 200, JSON.stringify(h.body));
    assert.ok(h.body.sessions >= 1, JSON.stringify(h.body));
    await p.waitForURL(`${b.base}/?world=arena`, { timeout: 15000 });
    await p.waitForFunction((n) => window.viewer && window.viewer.ready && window.viewer.connected && window.viewer.world === 'arena' && window.viewer.agents().length === n, COUNT, { timeout: 15000 });
    assert.equal(await p.evaluate(() => window.viewer.player), player, 'the same player on B: the session resumed');
    assert.deepEqual(await p.evaluate(() => window.viewer.moved.map((m) => m.name)), ['arena']);
    await until('the notice', async () => /moved to this server/.test(await p.textContent('#toast')), 5000);
    const t0 = await p.evaluate(() => window.viewer.tick);
    assert.ok(t0 >= h.body.tick, `B streams from the freeze on: tick ${t0}, frozen at ${h.body.tick}`);
    await until('the world to tick on B', () => p.evaluate((t) => window.viewer.tick >= t + 5, t0), 5000);
    assert.equal((await callAt(a.base, 'GET', '/worlds/arena')).status, 410);
    assert.deepEqual(errors, []);
  } finally {
    await p.close();
    await stopServer(a.proc);
    await stopServer(b.proc);
  }
});

test('viewer: behind one address (a load balancer), follows its moved world in place', { timeout: 60000 }, async () => {
  // The page is served through a TCP proxy that stands for a load balancer in front of a fleet:
  // it sends new connections to A, then (once the world is on its way) to B. The handoff names
  // the proxy as where clients reach B, so `moved.to` is the page's own address: the page
  // reconnects there at once, resumes its session and resubscribes, without leaving.
  const secret = 'viewer-handoff-secret-0123456789';
  const a = await startServer(['--persistence', '--cluster-secret', secret]);
  const b = await startServer(['--persistence', '--cluster-secret', secret]);
  let upstream = Number(new URL(a.base).port);
  const sockets = new Set();
  const proxy = createNetServer((down) => {
    const up = netConnect(upstream, '127.0.0.1');
    const entry = { down, up, ws: false };
    sockets.add(entry);
    down.once('data', (d) => { entry.ws = d.toString('latin1').startsWith('GET /ws'); });
    down.pipe(up);
    up.pipe(down);
    const end = () => { sockets.delete(entry); down.destroy(); up.destroy(); };
    down.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
  });
  await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
  const lb = `http://127.0.0.1:${proxy.address().port}`;
  const COUNT = 40;
  const scenario = wanderScenario('viewer-lb', 80, COUNT, 6);
  assert.ok((await callAt(a.base, 'PUT', '/scenarios/viewer-lb', scenario)).status < 300);
  assert.equal((await callAt(a.base, 'POST', '/worlds', { name: 'lb', scenario: 'viewer-lb' })).status, 201);
  const p = await context.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(e.message));
  try {
    await p.goto(`${lb}/?world=lb`);
    await p.waitForFunction((n) => window.viewer && window.viewer.ready && window.viewer.connected && window.viewer.world === 'lb' && window.viewer.agents().length === n, COUNT, { timeout: 15000 });
    const player = await p.evaluate(() => window.viewer.player);
    // New connections go to B from now on; the page's open stream stays on A (and its idle
    // REST connections are closed, as a load balancer draining A would).
    upstream = Number(new URL(b.base).port);
    for (const e of sockets) if (!e.ws) { e.down.destroy(); e.up.destroy(); }
    const h = await callAt(a.base, 'POST', '/worlds/lb/handoff', { to: b.base, client_url: `ws://127.0.0.1:${proxy.address().port}/ws` });
    assert.equal(h.status, 200, JSON.stringify(h.body));
    await until('the page to follow in place', () => p.evaluate(() => window.viewer.moved.length === 1 && window.viewer.connected), 10000);
    assert.equal(p.url(), `${lb}/?world=lb`, 'the page stays');
    await p.waitForFunction((n) => window.viewer.world === 'lb' && window.viewer.agents().length === n, COUNT, { timeout: 10000 });
    assert.equal(await p.evaluate(() => window.viewer.player), player, 'the same player: the session resumed on B');
    await until('the notice', async () => /moved to 127\.0\.0\.1:\d+: following/.test(await p.textContent('#toast')), 5000);
    const t0 = await p.evaluate(() => window.viewer.tick);
    await until('the world to tick on B', () => p.evaluate((t) => window.viewer.tick >= t + 5, t0), 5000);
    assert.equal((await callAt(b.base, 'GET', '/worlds/lb')).status, 200);
    assert.equal((await callAt(a.base, 'GET', '/worlds/lb')).status, 410);
    assert.deepEqual(errors, []);
  } finally {
    await p.close();
    for (const e of sockets) { e.down.destroy(); e.up.destroy(); }
    await new Promise((r) => proxy.close(r));
    await stopServer(a.proc);
    await stopServer(b.proc);
  }
});

test('viewer: the replay timeline scrubs, plays, pauses and sets the speed of a replay world', { timeout: 60000 }, async () => {
  const srv = await startServer();
  const port = new URL(srv.base).port;
  copyFileSync(join(root, 'tests/recordings/patrol-edits.rec'), join(scratch, `data-${port}`, 'recordings', 'patrol-edits.rec'));
  const call = async (method, path, body) => {
    const r = await fetch(srv.base + path, { method, headers: body === undefined ? {} : { 'Content-Type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await r.text();
    assert.ok(r.ok, `${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  };
  await call('POST', '/worlds', { name: 'rp', replay: 'patrol-edits', paused: true });
  const p = await context.newPage();
  const errors = [];
  p.on('pageerror', (e) => errors.push(e.message));
  try {
    // A live world has no timeline.
    await p.goto(`${srv.base}/?world=${WORLD}`);
    await p.waitForFunction(() => window.viewer && window.viewer.ready && window.viewer.keyframes > 0, null, { timeout: 15000 });
    await until('the live world to be described', () => p.evaluate(() => document.getElementById('s-tick').textContent !== '–'), 5000);
    assert.equal(await p.isVisible('#timeline'), false, 'no timeline on a live world');
    // The replay world has one: current tick / last tick, and no simulation controls.
    await p.goto(`${srv.base}/?world=rp`);
    await p.waitForFunction(() => window.viewer && window.viewer.ready && window.viewer.world === 'rp' && window.viewer.agents().length > 0, null, { timeout: 15000 });
    await p.waitForSelector('#timeline', { state: 'visible', timeout: 5000 });
    assert.equal((await p.textContent('#tl-tick')).trim(), '0 / 200');
    assert.equal(await p.isVisible('#sim-controls'), false);
    assert.match(await p.textContent('#tl-check'), /^10\/10 checkpoints ok$/);
    // Play, then pause from the timeline.
    await p.click('#tl-play');
    await until('the replay to play', async () => (await call('GET', '/worlds/rp/replay')).tick >= 20, 10000);
    await p.click('#tl-play');
    await until('the replay to pause', async () => !(await call('GET', '/worlds/rp/replay')).playing, 5000);
    const paused = (await call('GET', '/worlds/rp/replay')).tick;
    await until('the timeline to show the paused tick', async () => (await p.textContent('#tl-tick')).trim() === `${paused} / 200`, 5000);
    assert.equal((await p.textContent('#tl-play')).trim(), 'Play');
    // Scrub back to 150: the server seeks, the bar and the streamed agents follow.
    await p.$eval('#tl-scrub', (el) => { el.value = '150'; el.dispatchEvent(new Event('input')); el.dispatchEvent(new Event('change')); });
    const rp = await until('the seek', async () => { const r = await call('GET', '/worlds/rp/replay'); return r.tick === 150 ? r : null; }, 5000);
    assert.ok(rp.last_seek.ticks_simulated < rp.keyframe_interval, JSON.stringify(rp.last_seek));
    await until('the timeline to show 150', async () => (await p.textContent('#tl-tick')).trim() === '150 / 200', 5000);
    assert.equal(await p.$eval('#tl-scrub', (el) => el.value), '150');
    const snap = await call('GET', '/worlds/rp/snapshot');
    await until('the streamed agents to be those of tick 150', () => p.evaluate((want) => {
      const got = new Map(window.viewer.agents().map((a) => [a.id, a]));
      return want.length === got.size && want.every((w) => { const g = got.get(w.id); return g && Math.hypot(g.x - w.position[0], g.y - w.position[1]) < 0.1; });
    }, snap.agents), 5000);
    // Speed choice.
    await p.selectOption('#tl-speed', '4');
    await until('the speed to change', async () => (await call('GET', '/worlds/rp/replay')).speed === 4, 5000);
    // Play to the end: it stops there and says so.
    await p.click('#tl-play');
    await until('the replay to stop at its end', async () => { const r = await call('GET', '/worlds/rp/replay'); return r.tick === 200 && !r.playing; }, 10000);
    await until('the timeline to show the end', async () => (await p.textContent('#tl-tick')).trim() === '200 / 200', 5000);
    assert.deepEqual(errors, []);
  } finally {
    await p.close();
    await stopServer(srv.proc);
  }
});
