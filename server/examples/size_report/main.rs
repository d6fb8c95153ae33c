//! Wire-size and codec-speed figures for a 10,000-agent trace at 20 Hz.
//!
//! `cargo run --release -p steerd --example size_report [-- OPTIONS]`
//!
//! The trace is recorded from the real simulation, by default scenario
//! `scenarios/swarm-10k.json`: 20 warm-up ticks, then 200 ticks.
//!
//! * `--scenario PATH`: another scenario file;
//! * `--resting N`: also spawn N agents with no behaviours (at rest unless
//!   pushed), spread over the world, for the cost of resting agents.
//!
//! Prints which trace it used, a table, then one `key=value` line per figure.
//! "Per moving agent" divides by the agents whose quantized state changed in
//! a tick (summed over ticks); "per resting agent" is the marginal cost of the
//! agents whose quantized state did not change (see `resting_cost`).
//! Codec timings are medians per tick over `TIMING_PASSES` passes of the
//! whole trace (each tick timed once per pass, so caches are as in a real
//! server and client), not means of single shots.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sim;

use serde::Serialize;
use std::collections::HashSet;
use std::time::{Duration, Instant};
use steer_proto::{
    AgentSample, CellEncoder, CellState, ClientState, DEFAULT_SERVER_LIMIT, Delta, FrameScope, QAgent, Quantization,
    Rect, ServerMsg, WorldInfo, checksum, decode_binary, encode_binary, encode_delta, encode_keyframe,
};

const WARMUP: usize = 20;
const TICKS: usize = 200;
const CELL_SIZE: f32 = 50.0;
/// Tick numbers of a server that has run for ~14 h at 20 Hz: `tick` and
/// `base_tick` then take 5 bytes each instead of 1 (bincode varints).
const LONG_RUN_TICK: u64 = 1_000_000;

/// Agent states after consecutive ticks, and where they came from.
pub struct Trace {
    /// Human-readable description of the source, printed first.
    pub source: String,
    pub bounds: Rect,
    pub hz: f32,
    /// The tick of `states[0]` (frames are numbered from here).
    pub first_tick: u64,
    /// One snapshot per tick, agents sorted by id.
    pub states: Vec<Vec<AgentSample>>,
}

/// Full state with f32 fields, as a naive server would send it.
#[derive(Serialize)]
struct FullAgent {
    id: u32,
    group: u16,
    x: f32,
    y: f32,
    vx: f32,
    vy: f32,
    orientation: f32,
}

fn full(tick: &[AgentSample]) -> Vec<FullAgent> {
    tick.iter()
        .map(|s| FullAgent {
            id: s.id,
            group: s.group,
            x: s.pos[0],
            y: s.pos[1],
            vx: s.vel[0],
            vy: s.vel[1],
            orientation: s.orientation,
        })
        .collect()
}

fn delta_msg(prev: &[QAgent], next: &[QAgent], base: u64, tick: u64, q: &Quantization) -> Delta {
    encode_delta(prev, next, FrameScope { world: 0, cell: 0 }, base..tick, q, false).unwrap()
}

fn delta_len(prev: &[QAgent], next: &[QAgent], base: u64, tick: u64, q: &Quantization) -> usize {
    encode_binary(&ServerMsg::Delta(delta_msg(prev, next, base, tick, q))).unwrap().len()
}

/// Marginal cost of the agents whose quantized state did not change between
/// `prev` and `next`: the whole-world delta's size minus the size of the
/// delta with those agents removed from both states. (An unchanged agent has
/// no record of its own, but it widens the index gap of the next changed
/// record.) Returns `(bytes, unchanged agents)`.
fn resting_cost(prev: &[QAgent], next: &[QAgent], base: u64, tick: u64, q: &Quantization) -> (usize, usize) {
    let prev_set: HashSet<&QAgent> = prev.iter().collect();
    let unchanged: HashSet<u32> = next.iter().filter(|a| prev_set.contains(a)).map(|a| a.id).collect();
    if unchanged.is_empty() {
        return (0, 0);
    }
    let without = |st: &[QAgent]| st.iter().filter(|a| !unchanged.contains(&a.id)).copied().collect::<Vec<_>>();
    let full = delta_len(prev, next, base, tick, q);
    let reduced = delta_len(&without(prev), &without(next), base, tick, q);
    (full - reduced, unchanged.len())
}

/// Passes over the trace for the codec timings (each tick timed once per pass).
const TIMING_PASSES: usize = 5;

/// Per-tick durations of each codec stage, one sample per tick and pass.
#[derive(Default)]
struct Samples {
    quant: Vec<Duration>,
    diff: Vec<Duration>,
    pack: Vec<Duration>,
    enc: Vec<Duration>,
    unpack: Vec<Duration>,
    apply: Vec<Duration>,
    dec: Vec<Duration>,
    enc_dec: Vec<Duration>,
}

/// Median in microseconds.
fn median_us(mut v: Vec<Duration>) -> f64 {
    v.sort_unstable();
    v.get(v.len() / 2).map_or(f64::NAN, |d| d.as_secs_f64() * 1e6)
}

struct Args {
    scenario: String,
    resting: usize,
}

fn args() -> Args {
    let mut a = Args { scenario: sim::DEFAULT_SCENARIO.to_string(), resting: 0 };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--scenario" => a.scenario = it.next().expect("--scenario needs a path"),
            "--resting" => a.resting = it.next().and_then(|n| n.parse().ok()).expect("--resting needs a count"),
            other => panic!("unknown argument {other:?} (use --scenario PATH or --resting N)"),
        }
    }
    a
}

fn main() {
    let args = args();
    let trace = sim::record(std::path::Path::new(&args.scenario), args.resting, WARMUP, TICKS)
        .unwrap_or_else(|e| panic!("{e}"));
    report(&trace);
}

fn report(trace: &Trace) {
    let q = Quantization::new(0.01, 0.1, trace.hz);
    let states = &trace.states;
    let n = states[0].len() as f64;
    let ticks = states.len() as f64;
    let tick_of = |i: usize| trace.first_tick + i as u64;

    // Naive full state.
    let (mut json_total, mut bin_total) = (0usize, 0usize);
    for st in states {
        let f = full(st);
        json_total += serde_json::to_vec(&f).unwrap().len();
        bin_total += bincode::serde::encode_to_vec(&f, bincode::config::standard()).unwrap().len();
    }
    let json_per_agent = json_total as f64 / ticks / n;
    let bin_per_agent = bin_total as f64 / ticks / n;

    // Quantized states, whole world as one cell.
    let qstates: Vec<Vec<QAgent>> = states.iter().map(|t| t.iter().map(|s| q.quantize(s)).collect()).collect();
    let mut key_total = 0usize;
    for (t, st) in qstates.iter().enumerate() {
        let k = encode_keyframe(FrameScope::default(), tick_of(t), st, false).unwrap();
        key_total += encode_binary(&ServerMsg::Keyframe(k)).unwrap().len();
    }
    let key_per_agent = key_total as f64 / ticks / n;

    // Deltas: encode, decode, apply, and check exactness every tick. Each
    // tick is timed once per pass (caches as in a real server and client:
    // the previous state cold, the new one just quantized); TIMING_PASSES
    // passes over the trace give the samples whose median is reported (a
    // mean of single shots is at the mercy of preemption on a busy machine).
    let first = encode_keyframe(FrameScope::default(), tick_of(0), &qstates[0], false).unwrap();
    let (mut delta_total, mut changed_total, mut delta_max) = (0usize, 0usize, 0usize);
    let mut samples = Samples::default();
    for pass in 0..TIMING_PASSES {
        let mut client = CellState::from_keyframe(&first).unwrap();
        for t in 1..states.len() {
            let t0 = Instant::now();
            let next: Vec<QAgent> = states[t].iter().map(|s| q.quantize(s)).collect();
            let tq = Instant::now();
            let d = delta_msg(&qstates[t - 1], &next, tick_of(t - 1), tick_of(t), &q);
            let td = Instant::now();
            let changed = d.changed.len() + d.entered.len();
            let bytes = encode_binary(&ServerMsg::Delta(d)).unwrap();
            let t1 = Instant::now();
            let ServerMsg::Delta(back) = decode_binary::<ServerMsg>(&bytes, DEFAULT_SERVER_LIMIT).unwrap() else {
                panic!("not a delta")
            };
            let tb = Instant::now();
            client.apply_delta(&back, &q).unwrap();
            let t2 = Instant::now();
            assert_eq!(client.agents(), next.as_slice(), "client diverged at tick {t}");
            samples.quant.push(tq - t0);
            samples.diff.push(td - tq);
            samples.pack.push(t1 - td);
            samples.enc.push(t1 - tq);
            samples.unpack.push(tb - t1);
            samples.apply.push(t2 - tb);
            samples.dec.push(t2 - t1);
            samples.enc_dec.push(t2 - tq);
            if pass == 0 {
                delta_total += bytes.len();
                delta_max = delta_max.max(bytes.len());
                changed_total += changed;
            }
        }
    }
    let dticks = (states.len() - 1) as f64;
    let delta_per_tick = delta_total as f64 / dticks;
    let changed_per_tick = changed_total as f64 / dticks;
    let delta_per_moving = delta_total as f64 / changed_total as f64;

    // Agents whose quantized state did not change in a tick.
    let (mut rest_bytes, mut rest_count) = (0usize, 0usize);
    for t in 1..qstates.len() {
        let (b, c) = resting_cost(&qstates[t - 1], &qstates[t], tick_of(t - 1), tick_of(t), &q);
        rest_bytes += b;
        rest_count += c;
    }
    let rest_per_tick = rest_count as f64 / dticks;

    // Checksum cost (both sides compute it once per frame when enabled).
    let t0 = Instant::now();
    let mut sink = 0u64;
    for st in &qstates {
        sink ^= checksum(st);
    }
    let checksum_us = t0.elapsed().as_secs_f64() * 1e6 / ticks;
    std::hint::black_box(sink);

    // Per-cell fan-out: 50-unit AOI cells over the world.
    let world = WorldInfo::new(0, "bench", trace.bounds, CELL_SIZE, 20.0);
    let mut encoders: Vec<CellEncoder> =
        (0..world.cell_count()).map(|c| CellEncoder::new(FrameScope { world: 0, cell: c })).collect();
    let mut clients = ClientState::new(q);
    let split = |st: &[QAgent]| {
        let mut cells = vec![Vec::new(); world.cell_count() as usize];
        for a in st {
            let (p, _, _) = q.dequantize(a);
            cells[world.cell_of(p[0], p[1]) as usize].push(*a);
        }
        cells
    };
    for (enc, cell) in encoders.iter_mut().zip(split(&qstates[0])) {
        enc.update(cell, tick_of(0), &q, false).unwrap();
        clients.apply_keyframe(&enc.keyframe(true)).unwrap();
    }
    let (mut cell_bytes, mut cell_frames, mut crossings, mut long_run_bytes) = (0usize, 0usize, 0usize, 0usize);
    for (t, st) in qstates.iter().enumerate().skip(1) {
        for (enc, cell) in encoders.iter_mut().zip(split(st)) {
            if let Some(d) = enc.update(cell, tick_of(t), &q, false).unwrap() {
                crossings += d.entered.len();
                let late = Delta { tick: d.tick + LONG_RUN_TICK, base_tick: d.base_tick + LONG_RUN_TICK, ..d.clone() };
                long_run_bytes += encode_binary(&ServerMsg::Delta(late)).unwrap().len();
                let bytes = encode_binary(&ServerMsg::Delta(d)).unwrap();
                cell_bytes += bytes.len();
                cell_frames += 1;
                clients.apply(&decode_binary(&bytes, DEFAULT_SERVER_LIMIT).unwrap()).unwrap();
            }
        }
    }
    let mut union: Vec<QAgent> = clients.agents().map(|(_, a)| *a).collect();
    union.sort_by_key(|a| a.id);
    assert_eq!(union, qstates[qstates.len() - 1], "per-cell client diverged");
    let cell_per_moving = cell_bytes as f64 / changed_total as f64;
    let long_run_per_moving = long_run_bytes as f64 / changed_total as f64;

    let Samples { quant, diff, pack, enc, unpack, apply, dec, enc_dec } = samples;
    let (enc_us, dec_us, enc_dec_us) = (median_us(enc), median_us(dec), median_us(enc_dec));
    let (quant_us, diff_us, pack_us) = (median_us(quant), median_us(diff), median_us(pack));
    let (unpack_us, apply_us) = (median_us(unpack), median_us(apply));
    println!("steer-proto size report");
    println!("trace: {}", trace.source);
    println!(
        "{n} agents, {} states at {} Hz ({} deltas); agents whose quantized state changed per tick: {changed_per_tick:.1}; unchanged per tick: {rest_per_tick:.1}",
        states.len(),
        trace.hz,
        states.len() - 1
    );
    println!(
        "quantization: pos_step={} vel_step={} predict_num={} orient_snap={}",
        q.pos_step, q.vel_step, q.predict_num, q.orient_snap
    );
    println!("{:<56} {:>14} {:>12}", "format", "bytes/tick", "bytes/agent");
    let row = |name: &str, per_tick: f64, per: f64| println!("{name:<56} {per_tick:>14.0} {per:>12.3}");
    row("JSON full state (f32)", json_total as f64 / ticks, json_per_agent);
    row("bincode full state (f32)", bin_total as f64 / ticks, bin_per_agent);
    row("keyframe (quantized)", key_total as f64 / ticks, key_per_agent);
    row("delta, one cell (per moving agent)", delta_per_tick, delta_per_moving);
    row(
        &format!("delta, {} AOI cells (per moving agent)", world.cell_count()),
        cell_bytes as f64 / dticks,
        cell_per_moving,
    );
    row(
        &format!("  same, frame ticks + {LONG_RUN_TICK} (long-running server)"),
        long_run_bytes as f64 / dticks,
        long_run_per_moving,
    );
    println!(
        "largest whole-world delta: {delta_max} bytes; cell deltas sent per tick: {:.0}; cell crossings per tick: {:.1}",
        cell_frames as f64 / dticks,
        crossings as f64 / dticks
    );
    let rest_text = if rest_count == 0 {
        "n/a".to_string()
    } else {
        format!("{:.3}", rest_bytes as f64 / rest_count as f64)
    };
    println!(
        "resting: {rest_count} agent-ticks with unchanged quantized state cost {rest_bytes} bytes in total (whole-world delta minus the delta without them) = {rest_text} bytes each{}",
        if rest_count == 0 { "; this trace has none, see --resting N for a resting cohort" } else { "" }
    );
    println!(
        "per tick (median of {TIMING_PASSES} passes x {} deltas): quantize {quant_us:.0} us; encode {enc_us:.0} us (diff {diff_us:.0} + bincode/pack {pack_us:.0}); decode {dec_us:.0} us (bincode/unpack {unpack_us:.0} + apply {apply_us:.0}); encode + decode {enc_dec_us:.0} us; checksum {checksum_us:.0} us/state",
        states.len() - 1
    );
    println!("json_full_bytes_per_agent={json_per_agent:.3}");
    println!("bincode_full_bytes_per_agent={bin_per_agent:.3}");
    println!("keyframe_bytes_per_agent={key_per_agent:.3}");
    println!("delta_bytes_per_tick={delta_per_tick:.0}");
    println!("delta_bytes_per_moving_agent={delta_per_moving:.3}");
    println!("delta_bytes_per_resting_agent={rest_text}");
    println!("cell_delta_bytes_per_moving_agent={cell_per_moving:.3}");
    println!("cell_delta_bytes_per_moving_agent_long_run={long_run_per_moving:.3}");
    println!("encode_us_per_tick={enc_us:.1}");
    println!("decode_us_per_tick={dec_us:.1}");
    println!("encode_decode_us_per_tick={enc_dec_us:.1}");
    println!("quantize_us_per_tick={quant_us:.1}");
    println!("checksum_us_per_state={checksum_us:.1}");
}
