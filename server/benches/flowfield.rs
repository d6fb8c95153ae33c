//! Flow-field build cost on a 256×256 navigation grid (the maze of `flowfield_figures`).
//!
//! `cargo bench -p steerd --bench flowfield`

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use glam::Vec2;
use steerd::sim::nav::flowfield::FlowField;
use steerd::sim::nav::grid::NavGrid;
use steerd::sim::{Bounds, Obstacle, Wall};

fn maze() -> NavGrid {
    let bounds = Bounds { min: Vec2::ZERO, max: Vec2::splat(256.0) };
    let walls: Vec<Wall> = (0..12u32)
        .map(|k| {
            let x = 20.0 + k as f32 * 20.0;
            let (a, b) = if k % 2 == 0 { (0.0, 220.0) } else { (36.0, 256.0) };
            Wall { id: k, a: Vec2::new(x, a), b: Vec2::new(x, b), normal: Vec2::X }
        })
        .collect();
    let obstacles: Vec<Obstacle> = (0..150u32)
        .map(|i| Obstacle { id: 100 + i, center: Vec2::new(10.0 + (i % 12) as f32 * 20.0, 12.0 + (i / 12) as f32 * 19.0), radius: 2.5 })
        .collect();
    NavGrid::build(bounds, 1.0, 0.75, &obstacles, &walls)
}

fn bench(c: &mut Criterion) {
    let grid = maze();
    let goal = Vec2::new(250.5, 128.5);
    let cell = grid.cell_of(goal);
    let mut g = c.benchmark_group("flowfield");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.bench_function("build_256x256_maze", |b| b.iter(|| FlowField::build(&grid, cell, goal)));
    g.bench_function("rasterize_256x256_maze", |b| b.iter(maze));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
