//! The `steerd` binary: `serve` (default) runs the server; `simulate` runs a scenario headless.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};

use steerd::cli::ServeArgs;
use steerd::config::Settings;
use steerd::http::{AppState, run};
use steerd::scenario::Scenario;
use steerd::simulate::{SimulateOptions, run as simulate};

/// The demo world served when no scenario is given.
const DEMO: &str = include_str!("../../scenarios/demo.json");

#[derive(Parser)]
#[command(name = "steerd", version, about = "Authoritative 2-D steering-simulation server")]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the server (the default).
    Serve(Box<ServeArgs>),
    /// Probe a running server's /health (for container HEALTHCHECKs: no curl in scratch).
    Healthcheck {
        /// URL to probe [default: http://127.0.0.1:$PORT/health from STEERD_LISTEN].
        #[arg(long)]
        url: Option<String>,
    },
    /// Mint a player token (HS256) with the configured `auth.player_jwt_secret`, for local
    /// testing; the game's backend issues the real ones.
    Token {
        /// Player id (`sub`).
        #[arg(long)]
        sub: String,
        /// `player` or `spectator`.
        #[arg(long, default_value = "player")]
        role: String,
        /// Lifetime: e.g. 90s, 15m, 1h, 2d (the server refuses more than its
        /// `auth.max_token_lifetime_secs`, default 1 day).
        #[arg(long, default_value = "1h")]
        ttl: String,
        /// Team (team-mates share vision in `owned` worlds).
        #[arg(long)]
        team: Option<String>,
        /// World names the token is good for (comma separated; default all).
        #[arg(long, value_delimiter = ',')]
        worlds: Option<Vec<String>>,
        /// Settings file (TOML) holding `auth.player_jwt_secret`.
        #[arg(long, env = "STEERD_CONFIG")]
        config: Option<PathBuf>,
        /// The secret (else STEERD_PLAYER_JWT_SECRET, else the settings file).
        #[arg(long, env = "STEERD_PLAYER_JWT_SECRET", hide_env_values = true)]
        secret: Option<String>,
    },
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
        /// Write how the crowd flowed, one CSV row per simulated second (arrived, gave up,
        /// stuck, on the way, mean speed, deepest overlap of the second's audits), to this file.
        #[arg(long)]
        series: Option<PathBuf>,
        /// Draw the same series as a PNG (agents arrived, on their way, stuck, gave up; mean
        /// speed) to this file.
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Re-run a recording headless as fast as possible and check its recorded state hashes.
    Replay {
        /// Recording file (`.rec`).
        file: PathBuf,
        /// Exit non-zero at the first divergence, naming the tick (and the agent, if the
        /// recording has per-agent digests).
        #[arg(long)]
        verify: bool,
        /// Stop when the world is at this tick (of the first segment reaching it).
        #[arg(long)]
        until: Option<u64>,
        /// With --until: write the state at that tick to this JSON file.
        #[arg(long, requires = "until")]
        snapshot: Option<PathBuf>,
        /// Worker threads (does not change the result).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

fn init_tracing(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if format == "json" {
        b.json().init();
    } else {
        b.init();
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let settings = args.settings()?;
    init_tracing(&settings.log_format);
    let (scenario, name) = match &settings.scenario {
        None => (Scenario::from_json(DEMO)?, Some("demo".to_string())),
        Some(s) if std::path::Path::new(s).is_file() => (Scenario::from_file(std::path::Path::new(s))?, None),
        Some(s) => {
            let store = steerd::store::Store::open(&settings.data_dir, &settings.scenarios_dir)?;
            (store.get(s).with_context(|| format!("scenario `{s}`"))?.0, Some(s.clone()))
        }
    };
    let mode = steerd::authz::Mode::new(settings.admin_token.is_some(), settings.auth.player_jwt_secret.is_some() || settings.auth.player_jwt_public_key.is_some());
    if mode == steerd::authz::Mode::Dev && !settings.listen.ip().is_loopback() && !settings.allow_dev_on_network {
        anyhow::bail!(
            "refusing to listen on {} in dev mode (no admin token, no player key: every REST call is open and WebSocket clients are anonymous players); \
             set an admin token (--admin-token / STEERD_ADMIN_TOKEN) or a player key, listen on a loopback address, or pass --allow-dev-on-network",
            settings.listen
        );
    }
    let listener = tokio::net::TcpListener::bind(settings.listen).await.with_context(|| format!("binding {}", settings.listen))?;
    let state = AppState::new(settings)?;
    match state.mode {
        steerd::authz::Mode::Dev => tracing::warn!(
            "dev mode: no admin token and no player key; every REST call is open, WebSocket clients without a token are anonymous players (quotas still hold). Set admin_token and auth.player_jwt_secret for production (SECURITY.md)"
        ),
        steerd::authz::Mode::Secured { admin, players } => {
            tracing::info!("secured: every call but /health, /metrics, /openapi.json, the viewer's files and /ws needs a token");
            if players {
                tracing::info!("player tokens required (JWT)");
            } else {
                tracing::info!("no player key: WebSocket clients without a token are anonymous players; REST takes the admin token only");
            }
            if !admin {
                tracing::warn!("admin calls are disabled: no admin token is configured (they answer 401)");
            }
        }
    }
    let reg = state.registry.clone();
    let recovered = tokio::task::spawn_blocking(move || reg.recover_all()).await?;
    let reg = state.registry.clone();
    // A stored `demo` (recovered, or failed and kept for the operator) is not replaced.
    if !recovered.iter().any(|w| w == "demo") && !reg.failed_recoveries().contains_key("demo") {
        tokio::task::spawn_blocking(move || reg.create("demo", scenario, name, false)).await??;
    }
    let addr = listener.local_addr()?;
    tracing::info!("steerd listening on http://{addr} (world `demo` running)");
    println!("steerd listening on http://{addr}");
    let cancel = state.cancel.clone();
    let draining = state.clone();
    tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down");
        // With `drain.handoff_to`, the durable worlds move first, while their clients are still
        // connected to be told where (docs/handoff.md).
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(draining.settings.limits.shutdown_timeout_ms);
        steerd::http::handoff::drain(&draining, deadline).await;
        cancel.cancel();
    });
    let agones = steerd::agones::Agones::from_env(args.agones).map(|a| {
        tracing::info!("reporting to the Agones SDK sidecar");
        let labels = Labels(state.clone());
        tokio::spawn(steerd::agones::lifecycle(a, labels, std::time::Duration::from_secs(2), state.cancel.clone()))
    });
    let recorder = state.registry.recorder().cloned();
    let persist = state.registry.persistence().cloned();
    run(listener, state).await?;
    // The worlds have stopped and queued their logs' last chunks: let the writer sync them.
    if let Some(w) = persist {
        let _ = tokio::task::spawn_blocking(move || w.drain(std::time::Duration::from_secs(5))).await;
    }
    // The worlds have stopped and queued their recordings' last chunks: let the writer finish.
    if let Some(hub) = recorder {
        let _ = tokio::task::spawn_blocking(move || hub.drain(std::time::Duration::from_secs(5))).await;
    }
    if let Some(task) = agones {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), task).await;
    }
    tracing::info!("bye");
    Ok(())
}

/// Labels for Agones: world names and connected players.
struct Labels(AppState);

impl steerd::agones::LabelSource for Labels {
    fn worlds(&self) -> Vec<String> {
        self.0.registry.list().into_iter().map(|w| w.name).collect()
    }
    fn players(&self) -> u64 {
        self.0.metrics.connections.get().max(0) as u64
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

/// jemalloc, for its count of live heap bytes (`steerd_heap_allocated_bytes`, the leak gate of
/// reliability test 10): glibc's malloc keeps freed memory in its arenas, so RSS alone cannot
/// tell a leak from the allocator's high-water mark. Not in static (`crt-static`) builds,
/// which keep the C library's malloc, nor without the default `jemalloc` feature.
#[cfg(all(feature = "jemalloc", target_os = "linux", not(target_feature = "crt-static")))]
mod heap {
    #[global_allocator]
    static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

    /// The heap figures of jemalloc (refreshed by an epoch advance; `None` if any read fails).
    fn stats() -> Option<steerd::metrics::HeapStats> {
        tikv_jemalloc_ctl::epoch::advance().ok()?;
        let allocated = tikv_jemalloc_ctl::stats::allocated::read().ok()?;
        let resident = tikv_jemalloc_ctl::stats::resident::read().ok()?;
        Some(steerd::metrics::HeapStats { allocated: allocated as u64, resident: resident as u64 })
    }

    /// Gives `/metrics` its heap figures.
    pub fn install() {
        steerd::metrics::set_heap_probe(stats);
    }
}

fn main() -> anyhow::Result<()> {
    #[cfg(all(feature = "jemalloc", target_os = "linux", not(target_feature = "crt-static")))]
    heap::install();
    let cli = Cli::parse();
    match cli.command {
        Some(Cmd::Simulate { scenario, ticks, agents, threads, seed, audit_every, json, series, plot }) => {
            if threads == 0 || threads > 256 {
                anyhow::bail!("--threads must be between 1 and 256");
            }
            let sc = Scenario::from_file(&scenario)?;
            let name = scenario.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
            let opts = SimulateOptions { ticks, agents, threads, seed, audit_every, series: series.is_some() || plot.is_some() };
            let mut report = simulate(&name, &sc, &opts).with_context(|| format!("simulating {}", scenario.display()))?;
            if let Some(path) = &plot {
                let png = steerd::plot::series_png(&format!("{name}: how the crowd flowed"), &report.series)?;
                steerd::store::write_atomic(path, &png).with_context(|| format!("writing {}", path.display()))?;
            }
            if let Some(path) = &series {
                let mut csv = String::from(steerd::simulate::SeriesRow::CSV_HEADER);
                for row in std::mem::take(&mut report.series) {
                    csv.push('\n');
                    csv.push_str(&row.csv());
                }
                csv.push('\n');
                steerd::store::write_atomic(path, csv.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
            }
            if json {
                println!("{}", serde_json::to_string(&report)?);
            } else {
                print!("{}", report.table());
            }
            Ok(())
        }
        Some(Cmd::Replay { file, verify, until, snapshot, threads, json }) => replay_cmd(&file, verify, until, snapshot.as_deref(), threads, json),
        Some(Cmd::Token { sub, role, ttl, team, worlds, config, secret }) => {
            let secret = match secret {
                Some(s) => s,
                None => match &config {
                    Some(p) => Settings::from_toml_file(p).with_context(|| format!("reading {}", p.display()))?.auth.player_jwt_secret,
                    None => None,
                }
                .ok_or_else(|| anyhow::anyhow!("no secret: pass --secret, set STEERD_PLAYER_JWT_SECRET, or auth.player_jwt_secret in --config"))?,
            };
            if role != "player" && role != "spectator" {
                anyhow::bail!("--role: expected player or spectator, got `{role}`");
            }
            let ttl = steerd::auth::parse_ttl(&ttl).map_err(anyhow::Error::msg)?;
            let now = steerd::auth::now_secs();
            let claims = steerd::auth::Claims { sub, role: Some(role), worlds, team, exp: now.saturating_add(ttl), nbf: None, iat: Some(now) };
            println!("{}", steerd::auth::mint(&secret, &claims).map_err(anyhow::Error::msg)?);
            Ok(())
        }
        Some(Cmd::Healthcheck { url }) => {
            let url = url.unwrap_or_else(|| {
                let port = std::env::var("STEERD_LISTEN").ok().and_then(|l| l.parse::<SocketAddr>().ok()).map_or(8080, |a| a.port());
                format!("http://127.0.0.1:{port}/health")
            });
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let status = rt.block_on(async {
                reqwest::Client::builder().timeout(std::time::Duration::from_secs(2)).build()?.get(&url).send().await.map(|r| r.status())
            })?;
            if status.is_success() {
                println!("healthy ({status})");
                Ok(())
            } else {
                anyhow::bail!("unhealthy: {url} answered {status}")
            }
        }
        Some(Cmd::Serve(args)) => tokio_main(*args),
        None => tokio_main(cli.serve),
    }
}

fn tokio_main(args: ServeArgs) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let r = rt.block_on(serve(args));
    // The drain was bounded by `shutdown_timeout_ms`; do not wait again for stragglers.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    r
}

/// `steerd replay`.
fn replay_cmd(file: &std::path::Path, verify: bool, until: Option<u64>, snapshot: Option<&std::path::Path>, threads: usize, json: bool) -> anyhow::Result<()> {
    use steerd::record::{format, replay};
    if threads == 0 || threads > 256 {
        anyhow::bail!("--threads must be between 1 and 256");
    }
    // A directory is a durable world's log (docs/persistence.md): its segments in order.
    // (Pruned: from the oldest snapshot whose place is in the log.)
    let (from, parsed) = if file.is_dir() {
        let d = steerd::persist::disk::read_log_dir(file).with_context(|| format!("reading {}", file.display()))?;
        if let (Some(s), false) = (&d.snapshot, json) {
            println!("starting from snapshot {s}");
        }
        (d.from, d.parsed)
    } else {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        (None, format::parse(&bytes).with_context(|| format!("reading {}", file.display()))?)
    };
    let mut snap: Option<serde_json::Value> = None;
    let (report, _) = replay::replay_onto(from, &parsed, &replay::ReplayOptions { verify, until, threads, last_check_only: false }, &mut |w, sc| {
        snap = Some(replay::snapshot_json(w, Some(sc)));
    })
    .with_context(|| format!("replaying {}", file.display()))?;
    if let Some(path) = snapshot {
        let Some(v) = snap else { anyhow::bail!("the recording never reached tick {}", until.unwrap_or(0)) };
        steerd::store::write_atomic(path, serde_json::to_string_pretty(&v)?.as_bytes()).with_context(|| format!("writing {}", path.display()))?;
    }
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "replayed {} segment(s), {} ticks, {} commands ({} refused), {}/{} checkpoints match; final tick {} state_hash {}; {:.2} s, {:.1}x real time",
            report.segments, report.ticks, report.commands, report.commands_refused, report.checks_ok, report.checks, report.final_tick, report.final_state_hash, report.seconds, report.realtime_factor
        );
        if let Some((n, why)) = &report.torn {
            println!("ignored a torn tail of {n} bytes ({why})");
        }
        if report.end.is_none() && !report.stopped_at_until {
            println!("the recording has no end record (cut off)");
        }
        for d in &report.divergences {
            println!("{d}");
        }
    }
    if let Some(d) = report.divergences.first().filter(|_| verify) {
        // Named on stdout above (or in the JSON); stderr gets it too, then a failing exit.
        eprintln!("replay --verify failed: {d}");
        std::process::exit(1);
    }
    Ok(())
}
