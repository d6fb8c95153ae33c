//! Tick cost of `World::step` for `swarm-10k` and `flock` at 1k, 10k and 100k agents, on 1 and
//! 2 threads, with the O(N²) brute-force neighbour baseline at 1k and 10k.
//!
//! `cargo bench -p steerd --bench tick` (figures: BENCHMARKS.md).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use steerd::scenario::Scenario;
use steerd::sim::World;

fn world(name: &str, agents: usize, brute: bool) -> World {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios").join(format!("{name}.json"));
    let sc = match Scenario::from_file(&path) {
        Ok(s) => s.scaled_to(agents),
        Err(e) => panic!("{}: {e}", path.display()),
    };
    let mut w = match sc.build() {
        Ok(w) => w,
        Err(e) => panic!("{name}: {e}"),
    };
    w.set_brute_force(brute);
    // Warm up so that the state is a typical mid-run one, not the spawn pattern.
    for _ in 0..20 {
        w.step();
    }
    w
}

fn bench(c: &mut Criterion) {
    let pools: Vec<(usize, rayon::ThreadPool)> = [1usize, 2]
        .into_iter()
        .filter_map(|n| rayon::ThreadPoolBuilder::new().num_threads(n).build().ok().map(|p| (n, p)))
        .collect();
    for name in ["swarm-10k", "flock"] {
        let mut g = c.benchmark_group(format!("tick/{name}"));
        g.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3));
        for agents in [1_000usize, 10_000, 100_000] {
            g.throughput(Throughput::Elements(agents as u64));
            for (threads, pool) in &pools {
                let mut w = world(name, agents, false);
                g.bench_with_input(BenchmarkId::new(format!("grid/{threads}t"), agents), &agents, |b, _| {
                    b.iter(|| pool.install(|| w.step()))
                });
                if agents <= 10_000 {
                    let mut w = world(name, agents, true);
                    g.bench_with_input(BenchmarkId::new(format!("brute/{threads}t"), agents), &agents, |b, _| {
                        b.iter(|| pool.install(|| w.step()))
                    });
                }
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
