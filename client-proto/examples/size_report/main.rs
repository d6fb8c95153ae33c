//! Wire-size and codec-speed figures for 10,000 wandering agents, 200 ticks at 20 Hz.
//!
//! `cargo run --release -p steer-proto --example size_report`
//! Prints a table, then one `key=value` line per figure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod trace;

use serde::Serialize;
use std::time::Instant;
use steer_proto::{
    AgentSample, CellEncoder, CellState, ClientState, Delta, FrameScope, QAgent, Quantization, ServerMsg,
    WorldInfo, checksum, decode_binary, encode_binary, encode_delta, encode_keyframe, DEFAULT_SERVER_LIMIT,
};

const AGENTS: u32 = 10_000;
const TICKS: usize = 200;
const HZ: f32 = 20.0;

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
    encode_delta(prev, next, FrameScope { world: 0, cell: 0 }, base, tick, q, false).unwrap()
}

fn main() {
    let params = trace::WanderParams::default();
    let trace = trace::generate(AGENTS, TICKS, params, 0x5eed);
    let q = Quantization::new(0.01, 0.1, HZ);
    let n = f64::from(AGENTS);
    let resting_ids: Vec<bool> = trace[0].iter().map(|s| s.vel == [0.0, 0.0]).collect();
    let resting = resting_ids.iter().filter(|&&r| r).count() as f64;
    let moving = n - resting;

    // Naive full state.
    let (mut json_total, mut bin_total) = (0usize, 0usize);
    for tick in &trace {
        let f = full(tick);
        json_total += serde_json::to_vec(&f).unwrap().len();
        bin_total += bincode::serde::encode_to_vec(&f, bincode::config::standard()).unwrap().len();
    }
    let ticks = trace.len() as f64;
    let json_per_agent = json_total as f64 / ticks / n;
    let bin_per_agent = bin_total as f64 / ticks / n;

    // Quantized states, whole world as one cell.
    let qstates: Vec<Vec<QAgent>> = trace.iter().map(|t| t.iter().map(|s| q.quantize(s)).collect()).collect();
    let mut key_total = 0usize;
    for (t, st) in qstates.iter().enumerate() {
        let k = encode_keyframe(FrameScope::default(), t as u64, st, false).unwrap();
        key_total += encode_binary(&ServerMsg::Keyframe(k)).unwrap().len();
    }
    let key_per_agent = key_total as f64 / ticks / n;

    // Deltas: encode, decode, apply, and check exactness every tick.
    let mut client = CellState::from_keyframe(&encode_keyframe(FrameScope::default(), 0, &qstates[0], false).unwrap())
        .unwrap();
    let (mut delta_total, mut changed_total, mut enc_ns, mut dec_ns) = (0usize, 0usize, 0u128, 0u128);
    let mut delta_max = 0usize;
    let (mut quant_ns, mut diff_ns, mut unpack_ns) = (0u128, 0u128, 0u128);
    for t in 1..trace.len() {
        let t0 = Instant::now();
        let next: Vec<QAgent> = trace[t].iter().map(|s| q.quantize(s)).collect();
        let tq = Instant::now();
        let d = delta_msg(&qstates[t - 1], &next, t as u64 - 1, t as u64, &q);
        let td = Instant::now();
        let changed = d.changed.len();
        let bytes = encode_binary(&ServerMsg::Delta(d)).unwrap();
        let t1 = Instant::now();
        let ServerMsg::Delta(back) = decode_binary::<ServerMsg>(&bytes, DEFAULT_SERVER_LIMIT).unwrap() else {
            panic!("not a delta")
        };
        let tb = Instant::now();
        client.apply_delta(&back, &q).unwrap();
        let t2 = Instant::now();
        assert_eq!(client.agents(), next.as_slice(), "client diverged at tick {t}");
        quant_ns += (tq - t0).as_nanos();
        diff_ns += (td - tq).as_nanos();
        enc_ns += (t1 - tq).as_nanos();
        unpack_ns += (tb - t1).as_nanos();
        dec_ns += (t2 - t1).as_nanos();
        delta_total += bytes.len();
        delta_max = delta_max.max(bytes.len());
        changed_total += changed;
    }
    let dticks = (trace.len() - 1) as f64;
    let delta_per_tick = delta_total as f64 / dticks;
    let delta_per_moving = delta_per_tick / moving;
    let changed_per_tick = changed_total as f64 / dticks;

    // Resting agents alone: bytes beyond an empty delta's envelope.
    let only = |st: &[QAgent]| st.iter().filter(|a| resting_ids[a.id as usize]).copied().collect::<Vec<_>>();
    let mut rest_bytes = 0usize;
    for t in 1..qstates.len() {
        let d = delta_msg(&only(&qstates[t - 1]), &only(&qstates[t]), t as u64 - 1, t as u64, &q);
        let empty = delta_msg(&[], &[], t as u64 - 1, t as u64, &q);
        rest_bytes += encode_binary(&ServerMsg::Delta(d)).unwrap().len()
            - encode_binary(&ServerMsg::Delta(empty)).unwrap().len();
    }
    let rest_per_agent = rest_bytes as f64 / dticks / resting;

    // Checksum cost (both sides compute it once per frame when enabled).
    let t0 = Instant::now();
    let mut sink = 0u64;
    for st in &qstates {
        sink ^= checksum(st);
    }
    let checksum_us = t0.elapsed().as_secs_f64() * 1e6 / ticks;
    std::hint::black_box(sink);

    // Per-cell fan-out: 50-unit AOI cells over the 1000x1000 world.
    let world = WorldInfo::new(
        0,
        "bench",
        steer_proto::Rect { min_x: -500.0, min_y: -500.0, max_x: 500.0, max_y: 500.0 },
        50.0,
    );
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
        enc.update(cell, 1, &q, false).unwrap();
        clients.apply_keyframe(&enc.keyframe(true)).unwrap();
    }
    let (mut cell_bytes, mut cell_frames) = (0usize, 0usize);
    for (t, st) in qstates.iter().enumerate().skip(1) {
        for (enc, cell) in encoders.iter_mut().zip(split(st)) {
            if let Some(d) = enc.update(cell, t as u64 + 1, &q, false).unwrap() {
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
    let cell_per_moving = cell_bytes as f64 / dticks / moving;

    let enc_us = enc_ns as f64 / 1e3 / dticks;
    let dec_us = dec_ns as f64 / 1e3 / dticks;
    println!("steer-proto size report: {AGENTS} agents ({moving} moving, {resting} resting), {TICKS} ticks at {HZ} Hz");
    println!("quantization: pos_step={} vel_step={} predict_num={} orient_snap={}", q.pos_step, q.vel_step, q.predict_num, q.orient_snap);
    println!("{:<44} {:>14} {:>12}", "format", "bytes/tick", "bytes/agent");
    let row = |name: &str, per_tick: f64, per: f64| println!("{name:<44} {per_tick:>14.0} {per:>12.3}");
    row("JSON full state (f32)", json_total as f64 / ticks, json_per_agent);
    row("bincode full state (f32)", bin_total as f64 / ticks, bin_per_agent);
    row("keyframe (quantized)", key_total as f64 / ticks, key_per_agent);
    row("delta, one cell (per moving agent)", delta_per_tick, delta_per_moving);
    row("delta, 400 AOI cells (per moving agent)", cell_bytes as f64 / dticks, cell_per_moving);
    println!("changed agents per tick: {changed_per_tick:.0}; largest delta: {delta_max} bytes; cell deltas sent per tick: {:.0}", cell_frames as f64 / dticks);
    let us = |ns: u128| ns as f64 / 1e3 / dticks;
    println!(
        "per tick: quantize {:.0} us; encode {enc_us:.0} us (diff {:.0} + bincode/pack {:.0}); decode {dec_us:.0} us (bincode/unpack {:.0} + apply {:.0}); checksum {checksum_us:.0} us/state",
        us(quant_ns), us(diff_ns), us(enc_ns - diff_ns), us(unpack_ns), us(dec_ns - unpack_ns)
    );
    println!("json_full_bytes_per_agent={json_per_agent:.3}");
    println!("bincode_full_bytes_per_agent={bin_per_agent:.3}");
    println!("keyframe_bytes_per_agent={key_per_agent:.3}");
    println!("delta_bytes_per_tick={delta_per_tick:.0}");
    println!("delta_bytes_per_moving_agent={delta_per_moving:.3}");
    println!("delta_bytes_per_resting_agent={rest_per_agent:.3}");
    println!("cell_delta_bytes_per_moving_agent={cell_per_moving:.3}");
    println!("encode_us_per_tick={enc_us:.1}");
    println!("decode_us_per_tick={dec_us:.1}");
    println!("quantize_us_per_tick={:.1}", us(quant_ns));
    println!("checksum_us_per_state={checksum_us:.1}");
}
