//! Debug aid: prints a coarse histogram of agent x positions after N ticks of a scenario.
fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let sc = steerd::scenario::Scenario::from_file(std::path::Path::new(&args[1]))?;
    let ticks: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let mut w = sc.build()?;
    for _ in 0..ticks { w.step(); }
    let mut hist = std::collections::BTreeMap::new();
    for a in w.agents() { *hist.entry(((a.position.x / 20.0) as i32 * 20, (a.position.y / 40.0) as i32 * 40)).or_insert(0) += 1; }
    println!("{hist:?}");
    Ok(())
}
