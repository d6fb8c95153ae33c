// Benchmarks (not gates): decode + apply one tick of a 10,000-agent whole-world stream through
// WorldView (the client's path) — protocol v4's one `cells` message per tick (binary
// connections) and the per-cell deltas (JSON connections' framing, here in binary) —, and
// WorldView.sample() of 10,000 agents. Prints medians.
// Usage: node bench/bench.mjs [--write-stream FILE] [--write-cells-stream FILE]
//   (FILE: the stream for the C# benchmark, per-cell frames or cells messages)
import { decodeServer, WorldView } from '../dist/index.js';
import { makeStream, writeStream, QUANT, INFO } from './stream.mjs';

const N = 10000;
const TICKS = 100;
const stream = makeStream(N, TICKS);
for (const [flag, cells] of [['--write-stream', false], ['--write-cells-stream', true]]) {
  const out = process.argv.indexOf(flag);
  if (out > 0) {
    writeStream(process.argv[out + 1], stream, cells);
    console.log(`wrote ${process.argv[out + 1]}`);
  }
}
const bytesPerTick = stream.ticks[0].reduce((n, f) => n + f.length, 0);
const cellsBytesPerTick = stream.cellsTicks[0].length;
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };

function run(cells) {
  const view = new WorldView(INFO, QUANT, 20, { type: 'whole_world' });
  let resyncs = 0;
  view.onResync = (r) => { resyncs++; if (resyncs < 3) console.error('resync', r); };
  if (cells) view.applyCells(decodeServer(stream.cellsKeyframe, { rawChanges: true }), 0);
  else for (const k of stream.keyframes) view.keyframe(decodeServer(k, { rawChanges: true }), 0);
  const times = [];
  const cpu = [];
  for (let t = 0; t < stream.ticks.length; t++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    if (cells) view.applyCells(decodeServer(stream.cellsTicks[t], { rawChanges: true }), t * 50);
    else for (const f of stream.ticks[t]) view.delta(decodeServer(f, { rawChanges: true }), t * 50);
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
  if (resyncs || view.size !== N) throw new Error(`bench stream broken: ${resyncs} resyncs, ${view.size} agents`);
  if (cells && view.cellsMessages !== stream.cellsTicks.length + 1) throw new Error('cells messages not all applied');
  return { times, cpu, view };
}

let view;
for (const cells of [true, false]) {
  // Warm up (JIT), then measure.
  for (let i = 0; i < 3; i++) run(cells);
  const all = [];
  const allCpu = [];
  for (let i = 0; i < 5; i++) { const r = run(cells); all.push(...r.times); allCpu.push(...r.cpu); view = r.view; }
  const what = cells ? `one cells message (${cellsBytesPerTick} bytes/tick)` : `${stream.ticks[0].length} per-cell deltas (${bytesPerTick} bytes/tick)`;
  // CPU time of the process over the tick (user + system; less disturbed by other processes on a
  // shared machine than the wall time, which includes time the process waited for a core).
  console.log(`decode+apply one tick, ${N} agents in ${stream.ticks[0].length} cells, ${what}: median ${median(all).toFixed(3)} ms wall, ${median(allCpu).toFixed(3)} ms CPU over ${all.length} ticks`);
}

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
