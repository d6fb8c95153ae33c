//! Throughput figures of the real server: starts `steerd --scenario swarm-10k` (or another
//! scenario) on 127.0.0.1:0 and connects N clients, each watching its own 100×100 area.
//!
//! ```text
//! cargo run --release -p steerd-tests --example swarm_figures -- [CLIENTS] [SECONDS] [SCENARIO]
//! ```
//! Defaults: 100 clients, 20 s, `swarm-10k`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use steerd_tests::{Opts, Server, measure_swarm};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let clients: usize = args.first().map_or(100, |a| a.parse().expect("CLIENTS"));
    let seconds: u64 = args.get(1).map_or(20, |a| a.parse().expect("SECONDS"));
    let scenario = args.get(2).cloned().unwrap_or_else(|| "swarm-10k".into());
    let srv = Server::fresh("figures", Opts::default().arg("--scenario", scenario.clone()));
    let f = measure_swarm(&srv, clients, Duration::from_secs(seconds)).await;
    println!("{scenario}: {f}");
}
