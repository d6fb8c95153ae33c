//! What a client spends per `cells` message: decode a binary message and apply it to a
//! [`ClientState`], as a game client or a load-test bot does for every tick it watches.
//!
//! The stream imitates one bot of the swarm ladder (`swarm-10k`, 100×100 areas): 9 cells of 31
//! wandering agents, every agent moving every tick, a few crossing between cells, the message
//! checksum every 10th tick. It opens with the join (keyframes of every cell).
//!
//! `cargo bench -p steer-proto --bench apply`

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use steer_proto::{
    ClientState, EntriesWriter, QAgent, Quantization, ServerMsg, checksum, decode_binary_batch, delta_body, encode_cells_binary,
    encode_delta, fold_checksums, keyframe_body, robust_heading, skim_cells_binary, DEFAULT_SERVER_LIMIT, FrameScope,
};

const CELLS: u32 = 9;
const PER_CELL: u32 = 31;
const TICKS: u64 = 60;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in `-k..=k`.
    fn small(&mut self, k: i32) -> i32 {
        (self.next() % (2 * k as u64 + 1)) as i32 - k
    }
}

/// The binary messages of the stream and the agent updates they carry.
fn stream() -> (Vec<Vec<u8>>, u64) {
    let q = Quantization::default();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cell_of = |id: u32| id % CELLS;
    // Agent ids 0.. spread over the cells by id; a crossing moves an agent to another id's cell
    // by giving it a new id (left in one cell, entered in another), as a move between cells is.
    let mut next_id = CELLS * PER_CELL;
    let mut cells: Vec<Vec<QAgent>> = (0..CELLS)
        .map(|c| {
            (0..PER_CELL)
                .map(|k| {
                    let id = k * CELLS + c;
                    let vel = [rng.small(20), rng.small(20)];
                    QAgent { id, group: 0, pos: [rng.small(500_000), rng.small(500_000)], vel, orient: robust_heading(vel).unwrap_or(0) }
                })
                .collect()
        })
        .collect();
    let mut out = Vec::new();
    let mut updates = 0;
    let mut w = EntriesWriter::new(0, 1, 4096);
    for (c, agents) in cells.iter().enumerate() {
        let body = keyframe_body(agents).unwrap_or_default();
        let _ = w.keyframe(c as u32, 0, &body);
        updates += agents.len() as u64;
    }
    out.push(encode_cells_binary(1, 0, 1, None, &w.finish()).unwrap_or_default());
    for tick in 1..=TICKS {
        let mut w = EntriesWriter::new(tick, 1, 4096);
        let mut sums = Vec::new();
        for (c, agents) in cells.iter_mut().enumerate() {
            let prev = agents.clone();
            for a in agents.iter_mut() {
                a.vel = [a.vel[0] + rng.small(2), a.vel[1] + rng.small(2)];
                for i in 0..2 {
                    a.pos[i] += q.predict(a.vel[i]) + rng.small(3);
                }
                a.orient = robust_heading(a.vel).unwrap_or(a.orient);
            }
            // One agent in 40 crosses into this cell from elsewhere, one leaves.
            if rng.next() % 4 == 0 {
                let gone = (rng.next() % agents.len() as u64) as usize;
                agents.remove(gone);
                let id = next_id * CELLS + c as u32;
                next_id += 1;
                agents.push(QAgent { id, group: 0, pos: [rng.small(500_000), rng.small(500_000)], vel: [3, -4], orient: 0 });
            }
            debug_assert!(agents.iter().all(|a| cell_of(a.id) == c as u32));
            let d = encode_delta(&prev, agents, FrameScope { world: 1, cell: c as u32 }, tick - 1..tick, &q, false).unwrap_or_else(|_| unreachable!());
            updates += (d.changed.len() + d.entered.len()) as u64;
            let body = delta_body(&d.left, &d.changed, &d.entered).unwrap_or_default();
            let _ = w.delta(c as u32, tick - 1, &body);
            sums.push(checksum(agents));
        }
        let sum = (tick % 10 == 0).then(|| fold_checksums(sums));
        out.push(encode_cells_binary(1, tick, 1, sum, &w.finish()).unwrap_or_default());
    }
    (out, updates)
}

/// Decodes and applies the whole stream to a fresh client; the number of messages applied.
fn decode_and_apply(msgs: &[Vec<u8>]) -> usize {
    let mut state = ClientState::new(Quantization::default());
    let mut ok = 0;
    for m in msgs {
        let Ok(batch) = decode_binary_batch::<ServerMsg>(m, DEFAULT_SERVER_LIMIT) else { continue };
        for (msg, _) in batch {
            ok += usize::from(state.apply(&msg).is_ok());
        }
    }
    ok
}

/// Applies the whole stream to a fresh client straight from the bytes
/// ([`ClientState::apply_cells_binary`]); the number of messages applied.
fn apply_binary(msgs: &[Vec<u8>]) -> usize {
    let mut state = ClientState::new(Quantization::default());
    let mut ok = 0;
    let mut records = 0;
    for m in msgs {
        let Some(head) = skim_cells_binary(m).filter(|h| h.len == m.len()) else { continue };
        ok += usize::from(state.apply_cells_binary(&head, m, |e| records += e.records).is_ok());
    }
    std::hint::black_box(records);
    ok
}

fn bench(c: &mut Criterion) {
    let (msgs, updates) = stream();
    // The stream must apply cleanly, or the bench measures error paths.
    assert_eq!(decode_and_apply(&msgs), msgs.len(), "the bench stream does not apply");
    assert_eq!(apply_binary(&msgs), msgs.len(), "the bench stream does not apply from bytes");
    let mut g = c.benchmark_group("client_apply");
    g.sample_size(30).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(updates));
    g.bench_function("decode_and_apply_61_messages", |b| b.iter(|| decode_and_apply(&msgs)));
    g.bench_function("apply_cells_binary_61_messages", |b| b.iter(|| apply_binary(&msgs)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
