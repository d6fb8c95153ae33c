//! Debug aid: writes every agent's state as CSV at the given ticks of a scenario.
//! `cargo run --release -p steerd --example where -- SCENARIO OUT_PREFIX TICK...`
fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let sc = steerd::scenario::Scenario::from_file(std::path::Path::new(&args[1]))?;
    let prefix = &args[2];
    let mut ticks: Vec<u64> = args[3..].iter().filter_map(|s| s.parse().ok()).collect();
    ticks.sort_unstable();
    let mut w = sc.build()?;
    let mut t = 0;
    for want in ticks {
        while t < want { w.step(); t += 1; }
        let mut out = String::from("id,group,x,y,vx,vy,gx,gy,done,gave_up,stall,wait\n");
        for a in w.agents() {
            let (g, done, gave, stall, wait) = match a.order.as_deref() {
                Some(o) => (o.stop_point, o.done, o.gave_up, o.stall, o.portal.is_some_and(|t| t.wait)),
                None => (a.position, false, false, 0, false),
            };
            out += &format!("{},{},{},{},{},{},{},{},{},{},{},{}\n", a.id, a.group, a.position.x, a.position.y,
                a.velocity.x, a.velocity.y, g.x, g.y, done as u8, gave as u8, stall, wait as u8);
        }
        std::fs::write(format!("{prefix}{want}.csv"), out)?;
    }
    Ok(())
}
