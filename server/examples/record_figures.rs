//! Figures of record and replay (issue 19): the cost of recording on a
//! `swarm-10k` tick under a command stream like a 200-bot swarm's, bytes per command on disk,
//! and a `maze-moveto` recording of 1,800 ticks for timing `steerd replay --verify`.
//!
//! `cargo run --release -p steerd --example record_figures -- [ticks] [out.rec]`

use std::time::Instant;

use glam::Vec2;
use steerd::record::codec::Enc;
use steerd::record::format::Record;
use steerd::record::{Hook, RecordHub, RecordSettings, generate};
use steerd::scenario::Scenario;
use steerd::sim::rng::Rng;
use steerd::sim::world::Command;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let ticks: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(400);
    let out = args.get(2).cloned().unwrap_or_else(|| "maze-moveto-1800.rec".into());
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let work = std::env::temp_dir().join(format!("steerd-record-figures-{}", std::process::id()));

    // 1. swarm-10k: the same run with and without recording, in alternating blocks of 20 ticks
    //    (a shared machine's noise hits both arms alike). 200 bots at 1 command/s each at
    //    20 Hz = 10 single-agent MoveTo per tick.
    let sc = Scenario::from_file(&root.join("scenarios/swarm-10k.json"))?;
    let hub = RecordHub::start(&work, RecordSettings::default(), false)?;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let mut plain = sc.build()?;
    let mut recorded = sc.build()?;
    let mut hook = Hook::new(Some(hub.clone()), 200_000, 10_000);
    hook.start("swarm", &sc, Some(false), false).map_err(anyhow::Error::msg)?;
    let ids: Vec<u32> = plain.agents().iter().map(|a| a.id).collect();
    let b = plain.config().bounds;
    let mut rng = Rng::new(1);
    let (mut t_plain, mut t_rec) = (Vec::new(), Vec::new());
    let mut commands = 0u64;
    let mut cmd_bytes = 0usize;
    for t in 0..ticks {
        let cmds: Vec<Command> = (0..10)
            .map(|_| {
                let id = ids[(rng.next_u64() as usize) % ids.len()];
                let target = Vec2::new(b.min.x + rng.next_f32() * (b.max.x - b.min.x), b.min.y + rng.next_f32() * (b.max.y - b.min.y));
                Command::MoveTo { agents: vec![id], target, stopping_distance: 1.0 }
            })
            .collect();
        for c in &cmds {
            let mut e = Enc::default();
            Record::Command { tick: recorded.tick(), command: c.clone() }.encode(&mut e);
            cmd_bytes += e.buf.len();
        }
        commands += cmds.len() as u64;
        let block_rec_first = (t / 20) % 2 == 0;
        for arm in 0..2 {
            let rec_arm = (arm == 0) == block_rec_first;
            let start = Instant::now();
            if rec_arm {
                for c in &cmds {
                    hook.command(&recorded, c);
                    let _ = recorded.apply(c.clone());
                }
                pool.install(|| recorded.step());
                hook.after_step(&recorded);
                t_rec.push(start.elapsed().as_secs_f64() * 1e3);
            } else {
                for c in &cmds {
                    let _ = plain.apply(c.clone());
                }
                pool.install(|| plain.step());
                t_plain.push(start.elapsed().as_secs_f64() * 1e3);
            }
            drop(plain.drain_events());
            drop(recorded.drain_events());
        }
    }
    hook.stop(&recorded, "done");
    let name = hook.view().name.unwrap_or_default();
    hub.drain(std::time::Duration::from_secs(10));
    let file_bytes = std::fs::metadata(hub.path_of(&name).unwrap_or_default()).map(|m| m.len()).unwrap_or(0);
    assert_eq!(steerd::sim::hash::exact_hash(&plain), steerd::sim::hash::exact_hash(&recorded), "recording changed the run");
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v.iter().sum::<f64>() / v.len() as f64, v[v.len() / 2])
    };
    let (mp, pp) = stats(&mut t_plain);
    let (mr, pr) = stats(&mut t_rec);
    println!("swarm-10k, {ticks} ticks, 10 MoveTo/tick, 1 thread:");
    println!("  tick without recording: mean {mp:.3} ms, median {pp:.3} ms");
    println!("  tick with recording:    mean {mr:.3} ms, median {pr:.3} ms  ({:+.2} % mean, {:+.2} % median)", (mr / mp - 1.0) * 100.0, (pr / pp - 1.0) * 100.0);
    println!("  file: {file_bytes} bytes for {commands} commands and {} checkpoints; command records {:.1} bytes each", ticks / 20, cmd_bytes as f64 / commands as f64);

    // The recorder's own work, timed alone (no noise from the step): a checkpoint of 10k
    // agents and the encoding of one MoveTo record.
    let t0 = Instant::now();
    for _ in 0..100 {
        std::hint::black_box(steerd::record::checkpoint(&recorded, false));
    }
    let check_us = t0.elapsed().as_secs_f64() * 1e6 / 100.0;
    let c = Command::MoveTo { agents: vec![4711], target: Vec2::new(1.0, 2.0), stopping_distance: 1.0 };
    let t0 = Instant::now();
    for _ in 0..10_000 {
        let mut e = Enc::default();
        Record::Command { tick: 1000, command: c.clone() }.encode(&mut e);
        std::hint::black_box(e.buf);
    }
    let enc_us = t0.elapsed().as_secs_f64() * 1e6 / 10_000.0;
    println!(
        "  recorder work alone: checkpoint of {} agents {check_us:.1} µs (every 20 ticks), MoveTo record {enc_us:.3} µs; per tick with 10 commands {:.1} µs = {:.3} % of the median tick",
        recorded.agents().len(),
        check_us / 20.0 + 10.0 * enc_us,
        (check_us / 20.0 + 10.0 * enc_us) / (pp * 1e3) * 100.0
    );

    // 2. bytes of single command records of other kinds.
    use steerd::sim::behaviors::{Behavior, BehaviorEntry, separation, wander};
    use steerd::sim::world::{SpawnArea, SpawnSpec};
    let kinds: Vec<(&str, Command)> = vec![
        ("MoveTo (1 agent)", Command::MoveTo { agents: vec![4711], target: Vec2::new(120.5, 33.25), stopping_distance: 1.0 }),
        ("MoveTo (20 agents, consecutive ids)", Command::MoveTo { agents: (4000..4020).collect(), target: Vec2::new(120.5, 33.25), stopping_distance: 1.0 }),
        ("Despawn", Command::Despawn(4711)),
        ("AddObstacle", Command::AddObstacle { center: Vec2::new(10.0, 20.0), radius: 3.0 }),
        ("MoveObstacle", Command::MoveObstacle { id: 3, center: Vec2::new(10.0, 20.0), radius: None }),
        ("AddWall", Command::AddWall { a: Vec2::ZERO, b: Vec2::ONE }),
        ("RemoveBehavior", Command::RemoveBehavior { agent: 4711, kind: steerd::sim::behaviors::BehaviorKind::Separation }),
        (
            "Spawn (rect, 2 behaviours)",
            Command::Spawn(SpawnSpec {
                behaviors: vec![BehaviorEntry::new(Behavior::Wander(wander::WanderParams::default())), BehaviorEntry::new(Behavior::Separation(separation::SeparationParams { neighbor_radius: 2.0 }))],
                ..SpawnSpec::new("bots", 10, SpawnArea::Rect { min: Vec2::ZERO, max: Vec2::ONE })
            }),
        ),
    ];
    for (what, c) in kinds {
        let mut e = Enc::default();
        Record::Command { tick: 12_345, command: c }.encode(&mut e);
        println!("  {what}: {} bytes", e.buf.len());
    }

    // 3. maze-moveto, 1,800 ticks, recorded through a world thread.
    let mut maze = Scenario::from_file(&root.join("scenarios/maze-moveto.json"))?;
    maze.recording = true;
    let t0 = Instant::now();
    let bytes = generate::run_script(&work.join("maze"), maze, &[generate::Step::Run(1800)], 1, false)?;
    std::fs::write(&out, &bytes)?;
    println!("maze-moveto 1800 ticks recorded in {:.1} s: {} bytes -> {out}", t0.elapsed().as_secs_f64(), bytes.len());
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
