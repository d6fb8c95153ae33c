//! Figures of replay worlds (issue 19, deliverable 3): opening a recording (one pass
//! that keeps keyframes and checks every checkpoint), keyframe memory, play speed against real
//! time, and the cost of seeks (ticks simulated and wall time) back to tick 0, to the middle,
//! and to the worst place (just before a keyframe).
//!
//! `cargo run --release -p steerd --example replay_figures -- FILE.rec [K]`

use std::time::Instant;

use steerd::record::format::parse;
use steerd::record::player::{Player, ReplaySettings};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else { anyhow::bail!("usage: replay_figures FILE.rec [K]") };
    let every: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(ReplaySettings::default().keyframe_every);
    let settings = ReplaySettings { keyframe_every: every, ..ReplaySettings::default() };
    let parsed = parse(&std::fs::read(path)?)?;
    let rss0 = rss_kib();
    let t = Instant::now();
    let (mut p, mut w) = Player::open(parsed, &settings)?;
    let open = t.elapsed().as_secs_f64();
    let rss1 = rss_kib();
    let agents = w.agents().len();
    let kf = p.keyframes();
    let per_frame = kf.bytes() as f64 / kf.len().max(1) as f64;
    println!("recording {path}: {} ticks, {agents} agents at tick 0, tick rate {} Hz", p.end(), w.config().tick_rate);
    println!(
        "open: {} ticks simulated in {open:.2} s; checkpoints {} ok of {} ({} divergences)",
        p.open_ticks,
        p.verification().checks_ok,
        p.verification().checks,
        p.verification().divergences
    );
    println!(
        "keyframes: {} every {} ticks (K = {every}, thinned {}×), {:.1} MiB in all, {:.0} KiB each, {:.0} bytes per agent (fork estimate at tick 0: {} bytes)",
        kf.len(),
        kf.interval(),
        kf.thinned(),
        kf.bytes() as f64 / (1 << 20) as f64,
        per_frame / 1024.0,
        per_frame / agents.max(1) as f64,
        w.fork_bytes()
    );
    if let (Some(a), Some(b)) = (rss0, rss1) {
        println!(
            "resident memory: +{:.1} MiB over the open (keyframes, the world, allocator slack) = {:.0} bytes per agent per keyframe held",
            (b.saturating_sub(a)) as f64 / 1024.0,
            (b.saturating_sub(a)) as f64 * 1024.0 / (agents.max(1) * kf.len().max(1)) as f64
        );
    }
    // Play speed: every tick from 0 to the end, as the world thread plays it.
    let dt = f64::from(w.config().dt());
    let t = Instant::now();
    let mut n = 0u64;
    while p.step(&mut w)? {
        n += 1;
    }
    let s = t.elapsed().as_secs_f64();
    println!("play: {n} ticks in {s:.2} s = {:.0} ticks/s = {:.1}x real time at the recorded rate", n as f64 / s, n as f64 * dt / s);
    let end = p.end();
    let interval = p.keyframes().interval();
    let worst = (end / 2 / interval) * interval + interval - 1;
    for (what, tick) in [("back to 0", 0), ("to the middle", end / 2), ("back to 0 again", 0), ("just before a keyframe", worst.min(end)), ("to the end", end)] {
        let t = Instant::now();
        let r = p.seek(&mut w, tick)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        println!("seek {what} (tick {}): {} ticks simulated from {}, {ms:.1} ms", r.tick, r.ticks_simulated, r.from);
    }
    Ok(())
}

/// Resident set size of this process (Linux), KiB.
fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
