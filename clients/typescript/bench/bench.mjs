// Benchmarks (not gates): decode + apply one tick of a 10,000-agent whole-world stream through
// WorldView (the client's path), and WorldView.sample() of 10,000 agents. Prints medians.
// Usage: node bench/bench.mjs [--write-stream FILE]   (FILE: the stream for the C# benchmark)
import { decodeServer, WorldView } from '../dist/index.js';
import { makeStream, writeStream, QUANT, INFO } from './stream.mjs';

const N = 10000;
const TICKS = 100;
const stream = makeStream(N, TICKS);
const out = process.argv.indexOf('--write-stream');
if (out > 0) {
  writeStream(process.argv[out + 1], stream);
  console.log(`wrote ${process.argv[out + 1]}`);
}
const bytesPerTick = stream.ticks[0].reduce((n, f) => n + f.length, 0);
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };

function run() {
  const view = new WorldView(INFO, QUANT, 20, { type: 'whole_world' });
  let resyncs = 0;
  view.onResync = (r) => { resyncs++; if (resyncs < 3) console.error('resync', r); };
  for (const k of stream.keyframes) view.keyframe(decodeServer(k, { rawChanges: true }), 0);
  const times = [];
  for (let t = 0; t < stream.ticks.length; t++) {
    const t0 = performance.now();
    for (const f of stream.ticks[t]) view.delta(decodeServer(f, { rawChanges: true }), t * 50);
    times.push(performance.now() - t0);
  }
  if (resyncs || view.size !== N) throw new Error(`bench stream broken: ${resyncs} resyncs, ${view.size} agents`);
  return { times, view };
}

// Warm up (JIT), then measure.
for (let i = 0; i < 3; i++) run();
const all = [];
let view;
for (let i = 0; i < 5; i++) { const r = run(); all.push(...r.times); view = r.view; }
console.log(`decode+apply one tick, ${N} agents in ${stream.ticks[0].length} cells (${bytesPerTick} bytes/tick): median ${median(all).toFixed(3)} ms over ${all.length} ticks`);

// sample(): interpolating between the last ticks (clock at the newest tick + half a tick).
view.clock.addSample(0, 0, view.latestTick);
view.interpDelayMs = 100;
const st = [];
for (let i = 0; i < 2000; i++) {
  const t0 = performance.now();
  const s = view.sample(25 + (i % 50));
  st.push(performance.now() - t0);
  if (s.length !== N) throw new Error(`sample returned ${s.length}`);
}
console.log(`sample() of ${N} agents: median ${median(st.slice(200)).toFixed(3)} ms over ${st.length - 200} calls`);
