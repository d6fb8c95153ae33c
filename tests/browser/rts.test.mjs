// The SDK's example game (clients/typescript/examples/rts) in headless Chromium against a real
// steerd whose worlds are `owned` (fog of war): two pages are two players. The first one's units
// are drawn as its own; the other player's, far away, are not sent (fog) until they walk into
// sight; box-select with the mouse and right-click moves the selection until destination_reached
// for each. The page uses the SDK alone (served as the compiled copy in server/viewer/sdk, which
// the SDK suite checks equal to a fresh build). Screenshot: tests/artifacts/rts.png.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, launchPage, root, scratchDir, startSteerd, staticServer, until } from './harness.mjs';

const WORLD = 'rts';
const VISION = 100; // players.vision_radius's default
let scratch;
let steerd;
let site;
let one;
let two;

before(async () => {
  scratch = scratchDir('rts');
  site = await staticServer({ '/examples/': join(root, 'clients/typescript/examples'), '/dist/': join(root, 'server/viewer/sdk') });
  steerd = await startSteerd(scratch, ['--allowed-origins', site.origin, '--visibility', 'owned']);
  await steerd.rest('POST', '/worlds', { name: WORLD }); // an empty 200 × 200 world
  one = await launchPage(join(scratch, 'one'), { width: 900, height: 900 });
  two = await launchPage(join(scratch, 'two'), { width: 600, height: 600 });
});

after(async () => {
  for (const b of [one, two]) try { if (b) await b.context.close(); } catch { /* gone */ }
  if (steerd) await steerd.stop();
  if (site) await site.close();
  cleanup(scratch);
});

const page = (b, q) => b.page.goto(`${site.origin}/examples/rts/index.html?server=${encodeURIComponent(steerd.base.replace('http:', 'ws:') + '/ws')}&world=${WORLD}&fog=${VISION}&${q}`);
const rts = (b, f, arg) => b.page.evaluate(f, arg);

test('the RTS example: your units, fog of war, box-select and right-click to move', { timeout: 90000 }, async (t) => {
  await t.test('two players spawn; each page draws its own units as its own', async () => {
    await page(one, 'units=6&at=40,40');
    await page(two, 'units=3&at=170,170');
    for (const [b, n] of [[one, 6], [two, 3]]) {
      await b.page.waitForFunction((k) => window.rts && window.rts.ready && window.rts.mine().length === k, n, { timeout: 15000 });
      assert.equal(await rts(b, () => window.rts.error), null);
    }
  });

  await t.test('fog of war: the other player\'s units far away are not in sight, then come into it', async () => {
    // 130 units and more apart: beyond every cell in sight of the first player's units.
    await one.page.waitForTimeout(500);
    assert.deepEqual(await rts(one, () => window.rts.others()), [], 'nothing of the other player in sight');
    const theirs = await rts(two, () => window.rts.mine());
    await rts(two, () => window.rts.command(70, 60));
    await until('the other player\'s units in sight', async () => {
      const seen = new Set(await rts(one, () => window.rts.others()));
      return theirs.every((id) => seen.has(id));
    }, 40000, 200);
  });

  await t.test('box-select with the mouse, right-click: every selected unit arrives', async () => {
    const units = await rts(one, () => window.rts.drawn().filter((a) => a.mine));
    assert.equal(units.length, 6);
    const xs = units.map((a) => a.x), ys = units.map((a) => a.y);
    const p0 = await rts(one, ([x, y]) => window.rts.worldToScreen(x, y), [Math.min(...xs) - 3, Math.max(...ys) + 3]);
    const p1 = await rts(one, ([x, y]) => window.rts.worldToScreen(x, y), [Math.max(...xs) + 3, Math.min(...ys) - 3]);
    await one.page.mouse.move(p0.x, p0.y);
    await one.page.mouse.down();
    await one.page.mouse.move((p0.x + p1.x) / 2, (p0.y + p1.y) / 2, { steps: 4 });
    await one.page.mouse.move(p1.x, p1.y, { steps: 4 });
    await one.page.mouse.up();
    const selection = await rts(one, () => window.rts.selection());
    assert.deepEqual([...selection].sort((a, b) => a - b), units.map((a) => a.id).sort((a, b) => a - b), 'every unit of yours, nothing else');
    const target = { x: 40, y: 150 };
    const q = await rts(one, ([x, y]) => window.rts.worldToScreen(x, y), [target.x, target.y]);
    await one.page.mouse.click(q.x, q.y, { button: 'right' });
    await until('the MoveTo accepted', () => rts(one, () => window.rts.state.moveToSent === 1), 5000);
    await until('destination_reached for every selected unit', async () => {
      const arrived = new Set(await rts(one, () => window.rts.arrived()));
      return selection.every((id) => arrived.has(id));
    }, 40000, 200);
    const now = await rts(one, () => window.rts.drawn().filter((a) => a.mine));
    const closest = Math.min(...now.map((a) => Math.hypot(a.x - target.x, a.y - target.y)));
    assert.ok(closest < 10, `a unit at the target (closest ${closest.toFixed(1)} away)`);
    // A click on empty ground clears the selection.
    await one.page.mouse.click(20, 20);
    assert.deepEqual(await rts(one, () => window.rts.selection()), []);
    mkdirSync(join(root, 'tests/artifacts'), { recursive: true });
    await one.page.screenshot({ path: join(root, 'tests/artifacts/rts.png') });
  });

  assert.deepEqual(one.errors, []);
  assert.deepEqual(two.errors, []);
});
