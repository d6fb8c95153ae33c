//! Flow-field figures: build time and memory of a 256×256 field, and the cache
//! hit rate of the maze-moveto scenario.
//!
//!     cargo run --release -p steerd --example flowfield_figures
use std::time::Instant;

use glam::Vec2;
use steerd::sim::nav::flowfield::FlowField;
use steerd::sim::nav::grid::NavGrid;
use steerd::sim::{Bounds, Obstacle, Wall};

fn main() -> anyhow::Result<()> {
    // 256×256 cells of 1: a maze of 12 staggered walls and 150 obstacles on a regular lattice.
    let bounds = Bounds { min: Vec2::ZERO, max: Vec2::splat(256.0) };
    let mut walls = Vec::new();
    for k in 0..12u32 {
        let x = 20.0 + k as f32 * 20.0;
        let (a, b) = if k % 2 == 0 { (0.0, 220.0) } else { (36.0, 256.0) };
        walls.push(Wall { id: k, a: Vec2::new(x, a), b: Vec2::new(x, b), normal: Vec2::X });
    }
    let obstacles: Vec<Obstacle> = (0..150u32)
        .map(|i| Obstacle { id: 100 + i, center: Vec2::new(10.0 + (i % 12) as f32 * 20.0, 12.0 + (i / 12) as f32 * 19.0), radius: 2.5 })
        .collect();
    let t = Instant::now();
    let grid = NavGrid::build(bounds, 1.0, 0.75, &obstacles, &walls);
    let raster_ms = t.elapsed().as_secs_f64() * 1e3;
    let goal = Vec2::new(250.5, 128.5);
    let goal_cell = grid.cell_of(goal);
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..15 {
        let t = Instant::now();
        let f = FlowField::build(&grid, goal_cell, goal);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        bytes = f.bytes();
    }
    times.sort_by(f64::total_cmp);
    println!("256x256 grid: rasterize {raster_ms:.2} ms, {} bytes", grid.bytes());
    println!("256x256 flow field build: median {:.2} ms, min {:.2} ms; {} bytes ({:.2} B/cell)", times[7], times[0], bytes, bytes as f64 / 65536.0);

    let sc = steerd::scenario::Scenario::from_file(std::path::Path::new("scenarios/maze-moveto.json"))?;
    let mut w = sc.build()?;
    for _ in 0..1300 {
        w.step();
    }
    if let Some(n) = w.nav() {
        let s = n.cache.stats();
        println!(
            "maze-moveto after 1300 ticks: fields built {}, agent-lookups served from cache {}, hit rate {:.6}, nav bytes {}",
            s.builds,
            s.hits,
            s.hit_rate(),
            n.bytes()
        );
    }
    Ok(())
}
