//! steer-swarm: bot swarm load tester (see issue tracker; not yet implemented).
fn main() -> anyhow::Result<()> {
    anyhow::bail!("steer-swarm is not implemented yet")
}
