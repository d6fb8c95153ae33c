//! The `steerd` binary.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

use steerd::scenario::Scenario;
use steerd::simulate::{SimulateOptions, run};

#[derive(Parser)]
#[command(name = "steerd", version, about = "Authoritative 2-D steering-simulation server")]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a scenario headless as fast as possible and print a report.
    Simulate {
        /// Scenario JSON file.
        scenario: PathBuf,
        /// Ticks to run.
        #[arg(long, default_value_t = 1000)]
        ticks: u64,
        /// Scale the scenario to this many agents in a proportionally larger area.
        #[arg(long)]
        agents: Option<usize>,
        /// Worker threads.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Audit safety counters every N ticks (0 = never).
        #[arg(long, default_value_t = 1)]
        audit_every: u64,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Cmd::Simulate { scenario, ticks, agents, threads, seed, audit_every, json }) => {
            if threads == 0 || threads > 256 {
                anyhow::bail!("--threads must be between 1 and 256");
            }
            let sc = Scenario::from_file(&scenario)?;
            let name = scenario.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let report = run(&name, &sc, &SimulateOptions { ticks, agents, threads, seed, audit_every })
                .with_context(|| format!("simulating {}", scenario.display()))?;
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.table());
            }
            Ok(())
        }
        None => anyhow::bail!("the server is not built yet: use `steerd simulate SCENARIO`"),
    }
}
