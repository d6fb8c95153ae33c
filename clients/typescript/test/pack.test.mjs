// Installable: `npm pack` (its prepack builds dist/) → install the tarball with `ws` into a fresh
// project → strict TypeScript compiles a program that passes the `ws` class and the DOM's
// WebSocket class as the `WebSocket` option without a cast, under Node's module resolution and a
// bundler's → the compiled program runs in Node and connects to a real steerd.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startServer } from './server.mjs';

const sdk = resolve(dirname(fileURLToPath(import.meta.url)), '..');
let srv;
let tmp;
before(async () => {
  srv = await startServer();
  tmp = mkdtempSync(join(tmpdir(), 'steerd-pack-'));
});
after(async () => {
  if (srv) await srv.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

const PROGRAM = `import { connect, type SteerClient, type SpawnedOutcome } from 'steerd-client';
import WebSocket from 'ws';

// The browser's class, as a page would pass it (type-checked here, not run: Node 20 has none).
export function inBrowser(url: string): Promise<SteerClient> {
  return connect(url, { WebSocket: globalThis.WebSocket });
}

const [url, world] = process.argv.slice(2);
const client = await connect(url, { WebSocket });
const spawned: SpawnedOutcome = await client.spawn(world, { group: 'packed', count: 2, area: { type: 'circle', x: 50, y: 50, radius: 3 } });
const { view } = await client.subscribe(world);
const deadline = Date.now() + 10000;
while (!spawned.agents.every((id) => view.agent(id)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
console.log(JSON.stringify({ protocol: client.welcome?.protocol_version, spawned: spawned.agents.length, inView: view.size }));
client.close();
`;

test('npm pack → install into a fresh project with ws → strict tsc (node and bundler resolution) → connects to a real server', async () => {
  const packed = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', tmp], sdk));
  const files = packed[0].files.map((f) => f.path);
  for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/client.js', 'package.json', 'README.md', 'LICENSE']) assert.ok(files.includes(f), `${f} in the package: ${files.join(' ')}`);
  assert.ok(!files.some((f) => f.startsWith('test/') || f.startsWith('src/') || f.startsWith('node_modules/')), `only what users need: ${files.join(' ')}`);

  const lock = JSON.parse(readFileSync(join(sdk, 'package-lock.json'), 'utf8')).packages;
  const v = (name) => lock[`node_modules/${name}`].version;
  const app = join(tmp, 'app');
  run('mkdir', ['-p', join(app, 'src')], tmp);
  writeFileSync(join(app, 'package.json'), JSON.stringify({
    name: 'steerd-pack-check', private: true, type: 'module',
    dependencies: { 'steerd-client': `file:${join(tmp, packed[0].filename)}`, ws: v('ws') },
    devDependencies: { '@types/ws': v('@types/ws'), '@types/node': v('@types/node'), typescript: v('typescript') },
  }, null, 2));
  const strict = { strict: true, target: 'ES2022', lib: ['ES2022', 'DOM'], types: ['node'], skipLibCheck: false, noEmitOnError: true };
  writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...strict, module: 'NodeNext', moduleResolution: 'NodeNext', outDir: 'dist' }, include: ['src'] }));
  writeFileSync(join(app, 'tsconfig.bundler.json'), JSON.stringify({ compilerOptions: { ...strict, module: 'ESNext', moduleResolution: 'Bundler', noEmit: true }, include: ['src'] }));
  writeFileSync(join(app, 'src/main.ts'), PROGRAM);
  run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], app);
  try {
    run('npx', ['tsc', '-p', 'tsconfig.json'], app);
    run('npx', ['tsc', '-p', 'tsconfig.bundler.json'], app);
  } catch (e) {
    assert.fail(`strict tsc failed:\n${e.stdout}${e.stderr}`);
  }

  await srv.rest('POST', '/worlds', { name: 'packed' });
  const out = await new Promise((ok, fail) => {
    import('node:child_process').then(({ execFile }) => execFile('node', ['dist/main.js', srv.base, 'packed'], { cwd: app, timeout: 30000 }, (err, stdout, stderr) => (err ? fail(new Error(`${err.message}\n${stderr}`)) : ok(stdout))));
  });
  assert.deepEqual(JSON.parse(out.trim()), { protocol: 11, spawned: 2, inView: 2 });
});
