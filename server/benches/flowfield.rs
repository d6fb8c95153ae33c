//! Flow-field build cost on a 256×256 navigation grid (the maze of `flowfield_figures`), and on
//! the 500×500 grid of the swarm-10k load scenario (1000×1000 world, nav cells of 2, its 100
//! random obstacles, the default clearance, component labels current as in the server).
//!
//! `cargo bench -p steerd --bench flowfield`

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use glam::Vec2;
use steerd::scenario::{Scenario, place_random_obstacles};
use steerd::sim::nav::flowfield::FlowField;
use steerd::sim::nav::grid::NavGrid;
use steerd::sim::{Bounds, Obstacle, Wall, WorldConfig};

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

/// The swarm-10k scenario's nav grid (500×500 cells of 2 among its random obstacles), with the
/// component labels and clearance map current, as the server builds its fields.
fn swarm_grid() -> NavGrid {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scenarios/swarm-10k.json");
    let scenario = match Scenario::from_file(std::path::Path::new(path)) {
        Ok(s) => s,
        Err(e) => panic!("{path}: {e}"),
    };
    // The bench places the random obstacles only (as `Scenario::build` does, with none before).
    assert!(scenario.obstacles.is_empty() && scenario.walls.is_empty(), "{path}: fixed obstacles or walls");
    let config: WorldConfig = scenario.world_config();
    let placed = match scenario.random_obstacles.as_ref().map(|r| place_random_obstacles(config.bounds, r, &[], scenario.seed)) {
        Some(Ok(placed)) => placed,
        Some(Err(e)) => panic!("{path}: random_obstacles: {e}"),
        None => Vec::new(),
    };
    let obstacles: Vec<Obstacle> =
        placed.iter().enumerate().map(|(i, &(center, radius))| Obstacle { id: i as u32, center, radius }).collect();
    let mut grid = NavGrid::build(config.bounds, config.nav_cell_size, config.nav_clearance, &obstacles, &[]);
    grid.update_components();
    grid
}

fn bench(c: &mut Criterion) {
    let grid = maze();
    let goal = Vec2::new(250.5, 128.5);
    let cell = grid.cell_of(goal);
    let swarm = swarm_grid();
    assert_eq!(swarm.dims(), (500, 500));
    let swarm_goal = Vec2::new(301.0, 699.0);
    let swarm_cell = swarm.cell_of(swarm_goal);
    assert!(!swarm.is_blocked(swarm_cell));
    let mut g = c.benchmark_group("flowfield");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.bench_function("build_256x256_maze", |b| b.iter(|| FlowField::build(&grid, cell, goal)));
    g.bench_function("build_500x500_swarm10k", |b| b.iter(|| FlowField::build(&swarm, swarm_cell, swarm_goal)));
    g.bench_function("rasterize_256x256_maze", |b| b.iter(maze));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
