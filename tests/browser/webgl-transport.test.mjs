// The JavaScript side of the C# SDK's WebGL transport (clients/csharp/Runtime/WebGL/
// SteerdWebSocket.jslib) in headless Chromium, against a real steerd: the jslib is loaded the way
// Unity's Emscripten build links it (mergeInto / autoAddDeps, HEAPU8, UTF8ToString,
// stringToUTF8 stood in by a few lines), from a page on its own origin (allowed with
// --allowed-origins). Hello → Welcome through the heap; the server's close frame (a kick: 4003)
// with its reason; Abort as a network failure; a refused port; the bounded receive queue.
// (The C# side over the same contract runs under mono: Tests/Editor/WebGLTransportTests.cs.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { cleanup, freePort, launchPage, root, scratchDir, startSteerd, staticServer, until } from './harness.mjs';

const ADMIN = 'webgl-transport-admin-token';
let scratch;
let steerd;
let site;
let browser;

// Emscripten's runtime as far as the jslib uses it: one heap, UTF-8 helpers, the library merge.
const EMSCRIPTEN_STANDIN = `
  window.HEAPU8 = new Uint8Array(1 << 22);
  window.LibraryManager = { library: {} };
  window.mergeInto = (lib, obj) => Object.assign(lib, obj);
  window.autoAddDeps = (obj, name) => { window[name.slice(1)] = obj[name]; };
  window.UTF8ToString = (ptr) => { let end = ptr; while (HEAPU8[end]) end++; return new TextDecoder().decode(HEAPU8.subarray(ptr, end)); };
  window.stringToUTF8 = (str, ptr, max) => {
    const bytes = new TextEncoder().encode(str).subarray(0, Math.max(0, max - 1));
    HEAPU8.set(bytes, ptr); HEAPU8[ptr + bytes.length] = 0; return bytes.length;
  };
  // C#'s side: strings and byte arrays marshalled into the heap.
  window.cstr = (s, ptr) => { stringToUTF8(s, ptr, 4096); return ptr; };
  window.lib = LibraryManager.library;
`;

before(async () => {
  scratch = scratchDir('webgl');
  site = await staticServer(
    { '/jslib/': join(root, 'clients/csharp/Runtime/WebGL'), '/sdk/': join(root, 'server/viewer/sdk') },
    { '/': { type: 'text/html; charset=utf-8', body: '<!doctype html><title>jslib</title>' } },
  );
  steerd = await startSteerd(scratch, ['--allowed-origins', site.origin], ADMIN);
  browser = await launchPage(scratch);
  await browser.page.goto(`${site.origin}/`);
  await browser.page.addScriptTag({ content: EMSCRIPTEN_STANDIN });
  const jslib = await (await fetch(`${site.origin}/jslib/SteerdWebSocket.jslib`)).text();
  await browser.page.addScriptTag({ content: jslib });
});

after(async () => {
  try { if (browser) await browser.context.close(); } catch { /* gone */ }
  if (steerd) await steerd.stop();
  if (site) await site.close();
  cleanup(scratch);
});

const wsUrl = () => `${steerd.base.replace('http:', 'ws:')}/ws`;

/** Opens a socket in the page and waits until it is open (state 1): its id. */
async function openSocket(url, maxQueued = 0) {
  const id = await browser.page.evaluate(([u, m]) => lib.SteerdWs_Open(cstr(u, 1024), m), [url, maxQueued]);
  assert.ok(id > 0, 'an id');
  return id;
}

const state = (id) => browser.page.evaluate((i) => lib.SteerdWs_State(i), id);

/** Sends Hello (encoded by the SDK) through the heap and reads the Welcome back through it. */
async function helloWelcome(id) {
  return browser.page.evaluate(async (i) => {
    const sdk = await import('/sdk/index.js');
    const hello = sdk.encodeClient(sdk.helloMessage({}));
    HEAPU8.set(hello, 8192);
    const sent = lib.SteerdWs_Send(i, 8192, hello.length);
    const end = Date.now() + 5000;
    let n = -1;
    while ((n = lib.SteerdWs_NextLength(i)) < 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    if (n < 0) return { sent, error: 'no message' };
    const short = lib.SteerdWs_Receive(i, 65536, n - 1); // too small a buffer: refused, kept
    const got = lib.SteerdWs_Receive(i, 65536, n);
    const w = sdk.decodeServer(HEAPU8.slice(65536, 65536 + got));
    return { sent, n, short, got, type: w.type, version: w.protocol_version, player: w.player_id, left: lib.SteerdWs_NextLength(i) };
  }, id);
}

test('the jslib carries Hello and Welcome through the heap, and tells the server\'s close from a broken connection', { timeout: 60000 }, async (t) => {
  await steerd.rest('POST', '/worlds', { name: 'webgl' });

  await t.test('open, Hello, Welcome; a short buffer is refused and the message kept', async () => {
    const id = await openSocket(wsUrl());
    await until('the socket open', async () => (await state(id)) === 1, 5000);
    const r = await helloWelcome(id);
    assert.equal(r.sent, 0);
    assert.equal(r.short, -1);
    assert.equal(r.got, r.n);
    assert.equal(r.type, 'welcome');
    assert.equal(r.version, 11);
    assert.match(r.player, /^anon-/);
    assert.equal(r.left, -1);

    // The server closes (an operator kicks the player): code 4003 and its reason reach C#.
    await steerd.rest('DELETE', `/worlds/webgl/players/${r.player}`);
    await until('the close', async () => (await state(id)) === 3, 5000);
    const close = await browser.page.evaluate((i) => {
      const n = lib.SteerdWs_CloseReason(i, 4096, 256);
      return { code: lib.SteerdWs_CloseCode(i), reason: UTF8ToString(4096), n, send: lib.SteerdWs_Send(i, 8192, 4) };
    }, id);
    assert.equal(close.code, 4003);
    assert.equal(close.reason, 'kicked');
    assert.equal(close.n, 'kicked'.length);
    assert.equal(close.send, -1, 'nothing is sent on a closed socket');
    await browser.page.evaluate((i) => lib.SteerdWs_Free(i), id);
    assert.equal(await state(id), -1, 'freed');
  });

  await t.test('Abort is a network failure: closed at once, no close code, the queue dropped', async () => {
    const id = await openSocket(wsUrl());
    await until('the socket open', async () => (await state(id)) === 1, 5000);
    const r = await browser.page.evaluate(async (i) => {
      const sdk = await import('/sdk/index.js');
      const hello = sdk.encodeClient(sdk.helloMessage({}));
      HEAPU8.set(hello, 8192);
      lib.SteerdWs_Send(i, 8192, hello.length);
      const end = Date.now() + 5000;
      while (lib.SteerdWs_NextLength(i) < 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
      const queued = lib.SteerdWs_NextLength(i);
      lib.SteerdWs_Abort(i);
      return { queued, state: lib.SteerdWs_State(i), code: lib.SteerdWs_CloseCode(i), next: lib.SteerdWs_NextLength(i) };
    }, id);
    assert.ok(r.queued > 0, 'the Welcome was queued before the abort');
    assert.deepEqual({ state: r.state, code: r.code, next: r.next }, { state: 3, code: 0, next: -1 });
    await browser.page.evaluate((i) => lib.SteerdWs_Free(i), id);
  });

  await t.test('a port nobody listens on: closed without a code', async () => {
    const port = await freePort();
    const id = await openSocket(`ws://127.0.0.1:${port}/ws`);
    await until('the failed connection', async () => (await state(id)) === 3, 5000);
    assert.equal(await browser.page.evaluate((i) => lib.SteerdWs_CloseCode(i), id), 0);
  });

  await t.test('the receive queue is bounded: past it the socket closes, reported broken', async () => {
    const id = await openSocket(wsUrl(), 16); // the Welcome alone is larger
    await until('the socket open', async () => (await state(id)) === 1, 5000);
    await browser.page.evaluate(async (i) => {
      const sdk = await import('/sdk/index.js');
      const hello = sdk.encodeClient(sdk.helloMessage({}));
      HEAPU8.set(hello, 8192);
      lib.SteerdWs_Send(i, 8192, hello.length);
    }, id);
    await until('the overflow close', async () => (await state(id)) === 3, 5000);
    const r = await browser.page.evaluate((i) => {
      lib.SteerdWs_CloseReason(i, 4096, 256);
      return { code: lib.SteerdWs_CloseCode(i), reason: UTF8ToString(4096), next: lib.SteerdWs_NextLength(i) };
    }, id);
    assert.deepEqual(r, { code: 0, reason: 'receive queue over 16 bytes', next: -1 });
  });

  // (Chromium logs the refused port's connection error itself: the one expected message.)
  assert.deepEqual(browser.errors.filter((e) => !/ERR_CONNECTION_REFUSED/.test(e)), []);
});
